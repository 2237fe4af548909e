"""Where replay plugs into the recording hot path, and the registry of boundaries defined in this process.

A boundary call checks one context variable (:data:`REPLAY`); when it holds a replay session, the call is
handed to it. The recording path never imports the replay machinery.
"""

from __future__ import annotations

import contextvars
import threading
from typing import Any

#: The active replay session of this context, or None.
REPLAY: contextvars.ContextVar[Any] = contextvars.ContextVar("chronicle_replay", default=None)

#: Boundary name -> the wrapped callables defined under that name in this process.
BOUNDARIES: dict[str, list[Any]] = {}
_lock = threading.Lock()


def register(name: str, wrapped: Any) -> None:
    """Remember a decorated callable under its boundary name (replay finds the root to rerun here)."""
    with _lock:
        BOUNDARIES.setdefault(name, []).append(wrapped)
