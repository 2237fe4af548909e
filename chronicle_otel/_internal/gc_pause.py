"""Keeping the cyclic garbage collector from walking large trees of objects over and over while chronicle builds them.

Loading a trace makes millions of small objects (parsed JSON, span records, attribute dicts) and holds on to them.
CPython's collector runs after every few hundred new container objects and, as the survivors pile up, walks all of
them again: on a trace of 20,000 spans that was most of the time spent loading it. None of these objects form
cycles, so nothing is lost by not looking for any while they are built. The collector is paused only around
chronicle's own building (a trace read, built or written; a replay's index of the recordings), never around the
user's code: a replay leaves the collector as the process set it while the code it reruns runs.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Callable, Iterator


class _ProcessSwitch:
    """A process-wide collector setting held by nested and overlapping blocks (in any threads): ``change()`` runs
    when the first block begins and returns how to undo it (None: nothing to undo); that runs when the last block
    ends."""

    def __init__(self, change: Callable[[], Callable[[], None] | None]) -> None:
        self._change = change
        self._lock = threading.Lock()
        self._depth = 0
        self._undo: Callable[[], None] | None = None

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                self._undo = self._change()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0 and self._undo is not None:
                    undo, self._undo = self._undo, None
                    undo()


def _disable() -> Callable[[], None] | None:
    running = gc.isenabled()
    gc.disable()
    return gc.enable if running else None


_paused = _ProcessSwitch(_disable)


def gc_paused() -> contextlib.AbstractContextManager[None]:
    """Pause the cyclic garbage collector while the block runs (reference counting still frees everything else).

    The collector has one switch for the whole process, so the block must be bounded (it is: one trace loaded or
    written). Blocks may nest and run in several threads at once: the collector resumes when the last one ends, and
    only if it was running when the first one began.
    """
    return _paused.held()
