"""Where replay plugs into the recording hot path, and the registry of boundaries defined in this process.

A boundary call checks one context variable (:data:`REPLAY`); when it holds a replay session, the call is
handed to it. The recording path never imports the replay machinery.
"""

from __future__ import annotations

import contextvars
import threading
import weakref
from typing import Any

#: The active replay session of this context, or None.
REPLAY: contextvars.ContextVar[Any] = contextvars.ContextVar("chronicle_replay", default=None)

#: Boundary name -> weak references to the wrapped callables defined under that name, oldest first.
_BOUNDARIES: dict[str, list[weakref.ref[Any]]] = {}
_lock = threading.Lock()


def register(name: str, wrapped: Any) -> None:
    """Remember a decorated callable under its boundary name (replay finds the root to rerun here)."""
    with _lock:
        refs = [r for r in _BOUNDARIES.get(name, []) if r() is not None]
        refs.append(weakref.ref(wrapped))
        _BOUNDARIES[name] = refs


def boundaries(name: str) -> list[Any]:
    """The live callables registered under ``name``, oldest first."""
    with _lock:
        found = [r() for r in _BOUNDARIES.get(name, [])]
    return [f for f in found if f is not None]


def all_boundaries() -> list[Any]:
    """Every live registered callable."""
    with _lock:
        refs = [r for refs in _BOUNDARIES.values() for r in refs]
    return [f for f in (r() for r in refs) if f is not None]
