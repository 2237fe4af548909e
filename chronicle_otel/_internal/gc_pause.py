"""Building a large tree of objects without the cyclic garbage collector walking it over and over.

Loading a trace makes millions of small objects (parsed JSON, span records, attribute dicts) and holds on to them.
CPython's collector runs after every few hundred new container objects and, as the survivors pile up, walks all of
them again: on a trace of 20,000 spans that was most of the time spent loading it. None of these objects form
cycles, so nothing is lost by not looking for any while they are built.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_depth = 0
_resume = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while the block runs (reference counting still frees everything else).

    The collector has one switch for the whole process, so the block must be bounded (it is: one trace loaded or
    written). Blocks may nest and run in several threads at once: the collector resumes when the last one ends, and
    only if it was running when the first one began.
    """
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()


_frozen_depth = 0
_froze = False


@contextlib.contextmanager
def survivors_set_aside() -> Iterator[None]:
    """Keep the objects alive when the block starts out of the collector's walks while it runs.

    A replay holds a whole loaded trace (hundreds of thousands of objects) while the code it reruns allocates: every
    full collection in between walked the trace again, and on a 20,000-span trace that doubled the cost of a replay
    with spans. ``gc.freeze()`` sets the survivors aside in one step and ``gc.unfreeze()`` puts them back when the
    last block ends, so nothing is lost: objects made during the block are collected as usual, and a cycle among
    the older objects is collected after the block. Blocks may nest and run in several threads at once. When
    something else froze objects first (a server before forking), this leaves the collector alone.
    """
    global _frozen_depth, _froze
    with _lock:
        if _frozen_depth == 0:
            _froze = gc.get_freeze_count() == 0
            if _froze:
                gc.freeze()
        _frozen_depth += 1
    try:
        yield
    finally:
        with _lock:
            _frozen_depth -= 1
            if _frozen_depth == 0 and _froze:
                _froze = False
                gc.unfreeze()
