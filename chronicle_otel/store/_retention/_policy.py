"""What a retention run keeps: :class:`RetentionPolicy`, its verdict on one trace, and the durations and sizes it
reads from text."""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass
from typing import Final, Literal

from ...errors import ConfigError

_SAMPLE_BITS: Final = 56
TRACE_ID: Final = re.compile(r"[0-9a-f]{32}\Z")
"""A trace id as the index holds it."""

# Verdicts, as stored in the plan table.
KEEP, PENDING, EXPIRED, UNSAMPLED, FOR_SIZE = range(5)
REMOVED: Final = EXPIRED  # every verdict from this one on removes the trace

_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(ms|s|m|h|d|w)?\s*\Z", re.IGNORECASE)
_DURATION_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
_SIZE_TEXT = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([kmgt]i?b?|b)?\s*\Z", re.IGNORECASE)
_SIZE_POWERS: Final = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


@dataclass(frozen=True)
class RetentionPolicy:
    """Which traces of the local store to keep: every failure, a sample of the successes, within an age and a size.

    The default keeps everything (a run with it only reclaims space: unreferenced payloads, unindexed bytes).
    Durations are a :class:`~datetime.timedelta`, seconds, or text such as ``30d``, ``12h``, ``90m``, ``45s``,
    ``2w``; sizes are bytes or text such as ``2GB`` (powers of 1000), ``1.5GiB`` (powers of 1024), ``500M``.
    They read back normalised: a :class:`~datetime.timedelta` and an :class:`int`.

    Example::

        RetentionPolicy(success_rate=0.05, max_age="30d", max_bytes="20GB", min_keep_failed_age="7d")

    Raises:
        ConfigError: a value is out of range or unreadable; the message names the field and what it accepts.
    """

    keep_failed: bool = True
    """Keep every failed trace (within ``max_age``); ``False`` samples failed traces like successful ones."""
    success_rate: float = 1.0
    """Fraction of successful traces kept, 0.0 to 1.0, decided from the trace id (see :meth:`sampled`)."""
    max_age: dt.timedelta | float | str | None = None
    """Traces older than this are removed, failed ones too. None: no age limit."""
    max_bytes: int | str | None = None
    """Most bytes of data (indexed span lines plus stored payloads) to keep. None: no size limit."""
    min_keep_failed_age: dt.timedelta | float | str | None = None
    """Failed traces younger than this are never removed to meet ``max_bytes``. None: no such protection."""

    def __post_init__(self) -> None:
        if type(self.keep_failed) is not bool:
            raise ConfigError("keep_failed", self.keep_failed, "True or False")
        rate = self.success_rate
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not (0.0 <= rate <= 1.0):
            raise ConfigError("success_rate", rate, "a number from 0.0 (keep no success) to 1.0 (keep all)")
        object.__setattr__(self, "success_rate", float(rate))
        object.__setattr__(self, "max_age", duration_of("max_age", self.max_age))
        object.__setattr__(self, "min_keep_failed_age", duration_of("min_keep_failed_age", self.min_keep_failed_age))
        object.__setattr__(self, "max_bytes", size_of("max_bytes", self.max_bytes))

    @property
    def _threshold(self) -> int:
        return int(self.success_rate * (1 << _SAMPLE_BITS))

    def sampled(self, trace_id: str) -> bool:
        """True when a successful trace with this id is within the ``success_rate`` sample.

        The decision reads only the id: ``int(trace_id[-14:], 16) < success_rate * 2**56``. Raising the rate keeps
        every trace kept before, and more.

        Raises:
            ValueError: ``trace_id`` is not 32 hex digits.
        """
        return _sample_key(_checked_trace_id(trace_id)) < self._threshold

    def decide(
        self, trace_id: str, *, failed: bool, age: dt.timedelta | float
    ) -> Literal["keep", "expired", "unsampled"]:
        """The policy's verdict on one trace, before the size cap (which only :func:`apply_retention` applies).

        Args:
            trace_id: 32 hex digits.
            failed: the trace failed (see the module documentation for the precise rule).
            age: how old the trace is (a timedelta or seconds).

        Returns:
            ``expired`` when it is older than ``max_age``; else ``keep`` for a failed trace under ``keep_failed``;
            else ``keep`` or ``unsampled`` according to :meth:`sampled`.

        Raises:
            ValueError: ``trace_id`` is not 32 hex digits.
        """
        seconds = age.total_seconds() if isinstance(age, dt.timedelta) else float(age)
        verdict = self._verdict(_checked_trace_id(trace_id), failed, round(seconds * 1e9))
        return "expired" if verdict == EXPIRED else "unsampled" if verdict == UNSAMPLED else "keep"

    def _verdict(self, trace_id: str, failed: bool, age_ns: int) -> int:
        max_age = self.max_age
        if isinstance(max_age, dt.timedelta) and age_ns > nanoseconds(max_age):
            return EXPIRED
        if failed and self.keep_failed:
            return KEEP
        return KEEP if _sample_key(trace_id) < self._threshold else UNSAMPLED


def _checked_trace_id(trace_id: str) -> str:
    text = trace_id.lower() if isinstance(trace_id, str) else ""
    if not TRACE_ID.match(text):
        raise ValueError(f"not a trace id (32 hex digits): {trace_id!r}")
    return text


def _sample_key(trace_id: str) -> int:
    return int(trace_id[-(_SAMPLE_BITS // 4) :], 16)


def nanoseconds(delta: dt.timedelta) -> int:
    """``delta`` in whole nanoseconds, exactly."""
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def duration_of(name: str, value: object, *, zero: bool = False) -> dt.timedelta | None:
    """The setting ``name`` as a duration (None stays None); ``zero`` accepts a zero duration.

    Raises:
        ConfigError: ``value`` is no duration, or is out of range.
    """
    expected = "a duration: a timedelta, seconds, or text such as 30d, 12h, 90m, 45s, 2w"
    if value is None:
        return None
    seconds: float
    if isinstance(value, dt.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        match = _DURATION.match(value)
        if match is None:
            raise ConfigError(name, value, expected)
        seconds = float(match.group(1)) * _DURATION_UNITS[(match.group(2) or "s").lower()]
    else:
        raise ConfigError(name, value, expected)
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not zero) or seconds > 100 * 366 * 86400:
        shortest = "zero or longer" if zero else "longer than zero"
        raise ConfigError(name, value, f"a duration {shortest} and shorter than a century")
    return value if isinstance(value, dt.timedelta) else dt.timedelta(seconds=seconds)


def size_of(name: str, value: object) -> int | None:
    """The setting ``name`` as a number of bytes (None stays None).

    Raises:
        ConfigError: ``value`` is no size, or is smaller than one byte.
    """
    expected = "a size in bytes: a number, or text such as 2GB, 500MB, 1.5GiB"
    if value is None:
        return None
    size: float
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        size = value
    elif isinstance(value, str):
        match = _SIZE_TEXT.match(value)
        if match is None:
            raise ConfigError(name, value, expected)
        unit = (match.group(2) or "").lower().rstrip("b")
        base = 1024 if unit.endswith("i") else 1000
        size = float(match.group(1)) * base ** _SIZE_POWERS[unit.rstrip("i")]
    else:
        raise ConfigError(name, value, expected)
    if not math.isfinite(size) or size < 1:
        raise ConfigError(name, value, "a size of at least one byte")
    return int(size)
