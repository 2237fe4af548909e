"""Keeping the cyclic garbage collector from walking large trees of objects over and over.

Loading a trace makes millions of small objects (parsed JSON, span records, attribute dicts) and holds on to them.
CPython's collector runs after every few hundred new container objects and, as the survivors pile up, walks all of
them again: on a trace of 20,000 spans that was most of the time spent loading it. None of these objects form
cycles, so nothing is lost by not looking for any while they are built. A replay then holds such a tree while the
code it reruns allocates: the objects alive when it starts are set aside (``gc.freeze()``) until it ends.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Callable, Iterator


class _ProcessSwitch:
    """A process-wide collector setting held by nested and overlapping blocks (in any threads): ``start()`` runs when
    the first block begins and says whether the change is this switch's to undo; ``undo()`` runs when the last block
    ends, if it was."""

    def __init__(self, start: Callable[[], bool], undo: Callable[[], None]) -> None:
        self._start, self._undo = start, undo
        self._lock = threading.Lock()
        self._depth = 0
        self._owned = False

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                self._owned = self._start()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0 and self._owned:
                    self._owned = False
                    self._undo()


def _disable() -> bool:
    running = gc.isenabled()
    gc.disable()
    return running


def _freeze() -> bool:
    if gc.get_freeze_count():  # something else froze objects (a server before forking): theirs to undo
        return False
    gc.freeze()
    return True


_paused = _ProcessSwitch(_disable, gc.enable)
_set_aside = _ProcessSwitch(_freeze, gc.unfreeze)


def gc_paused() -> contextlib.AbstractContextManager[None]:
    """Pause the cyclic garbage collector while the block runs (reference counting still frees everything else).

    The collector has one switch for the whole process, so the block must be bounded (it is: one trace loaded or
    written). Blocks may nest and run in several threads at once: the collector resumes when the last one ends, and
    only if it was running when the first one began.
    """
    return _paused.held()


def survivors_set_aside() -> contextlib.AbstractContextManager[None]:
    """Keep the objects alive when the block starts out of the collector's walks while it runs.

    A replay holds a whole loaded trace (hundreds of thousands of objects) while the code it reruns allocates: every
    full collection in between walked the trace again, and on a 20,000-span trace that doubled the cost of a replay
    with spans. ``gc.freeze()`` sets the survivors aside in one step and ``gc.unfreeze()`` puts them back when the
    last block ends, so nothing is lost: objects made during the block are collected as usual, and a cycle among
    the older objects is collected after the block. Blocks may nest and run in several threads at once. When
    something else froze objects first (a server before forking), this leaves the collector alone.
    """
    return _set_aside.held()
