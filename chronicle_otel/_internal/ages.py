"""Points in time as people type them: an age (``30m``, ``2h``, ``3d``, ``1w``) or a date or time (``2026-11-30``,
``2026-11-30T10:00``, UTC unless an offset is given)."""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Callable

_AGE = re.compile(r"\s*(\d+(?:\.\d*)?)\s*(s|m|h|d|w)\s*\Z")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def since(text: str, now: Callable[[], float] = time.time) -> int:
    """``text`` as ns since the epoch, within the times a store holds (0 to the largest 64-bit integer).

    Raises:
        ValueError: ``text`` is neither an age nor a date or time (the message shows both forms).
    """
    match = _AGE.match(text)
    if match is not None:
        return _clamp(int((now() - float(match.group(1)) * _UNITS[match.group(2)]) * 1e9))
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"{text!r} is neither an age (30m, 2h, 3d, 1w) nor a date or time (2026-11-30, 2026-11-30T10:00)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return _clamp(int(when.timestamp() * 1e9))


def _clamp(ns: int) -> int:
    return min(max(ns, 0), (1 << 63) - 1)
