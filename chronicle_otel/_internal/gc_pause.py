"""Keeping the cyclic garbage collector from walking large trees of objects over and over.

Loading a trace makes millions of small objects (parsed JSON, span records, attribute dicts) and holds on to them.
CPython's collector runs after every few hundred new container objects and, as the survivors pile up, walks all of
them again: on a trace of 20,000 spans that was most of the time spent loading it. None of these objects form
cycles, so nothing is lost by not looking for any while they are built. A replay then holds such a tree while the
code it reruns allocates: full collections, which walk it, are spaced further apart until the replay ends.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Callable, Iterator
from typing import Final


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


FULL_COLLECTIONS_SPACED: Final = 10
"""How many times further apart full collections are while a replay runs."""


def _space_full_collections() -> Callable[[], None] | None:
    before = gc.get_threshold()
    if not before[0] or len(before) < 3:  # automatic collection is off (a zero threshold): nothing to space
        return None
    spaced = (before[0], before[1], before[2] * FULL_COLLECTIONS_SPACED)
    gc.set_threshold(*spaced)

    def undo() -> None:
        if gc.get_threshold() == spaced:  # thresholds someone set meanwhile are theirs: kept
            gc.set_threshold(*before)

    return undo


_paused = _ProcessSwitch(_disable)
_spaced = _ProcessSwitch(_space_full_collections)


def gc_paused() -> contextlib.AbstractContextManager[None]:
    """Pause the cyclic garbage collector while the block runs (reference counting still frees everything else).

    The collector has one switch for the whole process, so the block must be bounded (it is: one trace loaded or
    written). Blocks may nest and run in several threads at once: the collector resumes when the last one ends, and
    only if it was running when the first one began.
    """
    return _paused.held()


def full_collections_spaced() -> contextlib.AbstractContextManager[None]:
    """Run full collections ten times less often while the block runs (young collections as usual).

    A replay holds a whole loaded trace (hundreds of thousands of objects) while the code it reruns allocates, and
    every full collection walks the trace again: on a 20,000-span trace, 11 of them took 930 ms of a replay with
    spans, 2 take 120 ms once spaced. Nothing is set aside or lost: every object is still collected, garbage made
    before the block included, only later. Blocks may nest and run in several threads at once; the thresholds come
    back when the last one ends, unless something else changed them meanwhile (then that setting stays).
    """
    return _spaced.held()
