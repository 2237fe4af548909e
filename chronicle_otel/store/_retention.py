"""Retention for the embedded local store: keep every failure, sample the successes, cap age and size.

Usage::

    from datetime import timedelta
    from chronicle_otel.store import RetentionPolicy, apply_retention

    policy = RetentionPolicy(success_rate=0.1, max_age=timedelta(days=30), max_bytes="2GB")
    print(apply_retention(".chronicle", policy, dry_run=True).summary())   # what would go
    report = apply_retention(".chronicle", policy)
    print(report.traces_removed, report.segment_bytes_freed, report.store_bytes_after)

From the shell: ``chronicle gc --success-rate 0.1 --max-age 30d --max-size 2GB [--dry-run] [--json]``.

Which traces go (:meth:`RetentionPolicy.decide`, then the size cap):

* a trace **failed** when its root span ended with ERROR status, or any of its stored spans did
  (``error_count > 0``: a tool call that raised inside a run that recovered counts), or its root span was never
  stored (the process died during the run, or the root was dropped);
* a trace older than ``max_age`` goes, failed or not; its age runs from the start of its root span (from its last
  write when the root is missing);
* a failed trace is kept when ``keep_failed`` (the default); otherwise it is sampled like a successful one;
* a successful trace is kept with probability ``success_rate``, decided from its id alone, so every process and every
  run agrees: kept when the last 14 hex digits of the trace id (the 56 bits that W3C Trace Context makes random; some
  systems put a timestamp in the first 8), read as an integer, are below ``success_rate * 2**56``;
* when the store's data (the span lines the index refers to plus the stored payloads) is still larger than
  ``max_bytes``, the oldest successful traces go first, then the oldest failed ones, until it fits; failed traces
  younger than ``min_keep_failed_age`` are never removed for size (the store may then stay above the cap).

How, safe while other processes record into the store:

1. a consistent snapshot of the index is planned (nothing held that writers wait for); a trace written to in the last
   ``grace`` (default 10 minutes) may still receive spans and is left for a later run (``traces_pending``);
2. the index rows of removed traces are deleted, in short ``BEGIN IMMEDIATE`` transactions (writers wait at most a
   moment); a trace written to since the snapshot is kept;
3. payloads that no remaining span line refers to (any ``sha256:<64 hex>`` in a kept line counts as a reference) are
   deleted, in short transactions that first read the lines written since (bounded memory: the references live in a
   temporary SQLite table, spilled to disk);
4. segment files are compacted: one that holds no indexed line is deleted; one that holds indexed lines and others
   is rewritten: the indexed lines are copied to a new segment which is fsync-ed, the index rows are moved to it in
   one transaction, then the old file is unlinked. At no point does an index row point at a missing or torn line: a
   crash leaves at most an unindexed file, which the next run deletes.

A segment a writer may still append to is never rewritten nor deleted (it is counted in ``segments_busy`` and its
removed lines are reclaimed by a later run). A writer only appends to the segment it created, named
``HHMMSS-<pid>-<random>.jsonl``, and moves on once it reaches 64 MiB; a segment counts as busy when it was modified
in the last ``grace``, or is smaller than 64 MiB and its process still holds it open (read from ``/proc/<pid>/fd``
on Linux; elsewhere on POSIX, while that process is alive; Windows refuses to delete a file a process holds open,
and such a file is left for a later run). Writers in other containers or on other hosts sharing the directory are
invisible to these checks: run ``gc`` where the writers run, or with a ``grace`` longer than their idle periods.

The SQLite index file does not shrink when rows go: SQLite reuses the freed pages. ``vacuum=True``
(``chronicle gc --vacuum``) rebuilds it at its minimal size, but holds the whole index meanwhile: run it when
nothing records, or writers may time out (after 30 s) and drop the batches they were writing.

A store used as a payload store for traces held elsewhere (``PayloadOptions(store=LocalStore(...))``) has payloads
no local trace refers to: collect it with ``remove_payloads=False`` (``--keep-payloads``).

API:
    :class:`RetentionPolicy`, :func:`apply_retention`, :class:`RetentionReport`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import os
import re
import sqlite3
import stat
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from ..errors import ConfigError, StoreError
from ._compression import inflate
from ._local import _SEGMENT_MAX_BYTES
from .reader import INDEX, MANIFEST, MAX_LINE_BYTES, StoreReader, default_store_path, lines_of_trace

__all__ = ["RetentionPolicy", "RetentionReport", "apply_retention"]

DEFAULT_GRACE: Final = 600.0
"""Seconds since its last write before a trace or a segment is considered settled."""

_SAMPLE_BITS: Final = 56
_TRACE_ID = re.compile(r"[0-9a-f]{32}\Z")
_DIGEST = re.compile(rb"sha256:[0-9a-f]{64}")
_SEGMENT_NAME = re.compile(r"([0-9]{6})-([0-9]{1,10})-[0-9a-f]+\.jsonl\Z")
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
_STATUSES: Final = frozenset({None, "UNSET", "OK", "ERROR"})
_LOCK_NAME: Final = "gc.lock"

# Verdicts, as stored in the plan table.
_KEEP, _PENDING, _EXPIRED, _UNSAMPLED, _FOR_SIZE = range(5)
_REMOVED: Final = _EXPIRED  # every verdict from this one on removes the trace

_CHUNK_TRACES: Final = 2_000  # traces removed per transaction
_CHUNK_PAYLOADS: Final = 500  # payloads removed per transaction
_CHUNK_SEGMENTS: Final = 200  # empty segments deleted per transaction
_INSERT_BATCH: Final = 1_000
_SEGMENT_ROWS: Final = "SELECT rowid, offset, length FROM span_lines WHERE segment = ? ORDER BY offset, rowid"

_PLAN_SCHEMA = """
CREATE TEMP TABLE plan(
    trace_id TEXT PRIMARY KEY,
    updated_ns INTEGER,
    age_key INTEGER NOT NULL,
    failed INTEGER NOT NULL,
    bytes INTEGER NOT NULL DEFAULT 0,
    verdict INTEGER NOT NULL
);
CREATE TEMP TABLE trefs(trace_id TEXT NOT NULL, hash TEXT NOT NULL, PRIMARY KEY (trace_id, hash)) WITHOUT ROWID;
CREATE TEMP TABLE refcount(hash TEXT PRIMARY KEY, n INTEGER NOT NULL, size INTEGER NOT NULL) WITHOUT ROWID;
CREATE TEMP TABLE keep(hash TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TEMP TABLE doomed(hash TEXT PRIMARY KEY, size INTEGER NOT NULL) WITHOUT ROWID;
CREATE TEMP TABLE size_removed(trace_id TEXT PRIMARY KEY) WITHOUT ROWID;
"""

_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(ms|s|m|h|d|w)?\s*\Z", re.IGNORECASE)
_DURATION_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
_SIZE_TEXT = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([kmgt]i?b?|b)?\s*\Z", re.IGNORECASE)
_SIZE_POWERS: Final = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


# ------------------------------------------------------------------------------------------------ policy


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
        object.__setattr__(self, "max_age", _duration("max_age", self.max_age))
        object.__setattr__(self, "min_keep_failed_age", _duration("min_keep_failed_age", self.min_keep_failed_age))
        object.__setattr__(self, "max_bytes", _size("max_bytes", self.max_bytes))

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
        return "expired" if verdict == _EXPIRED else "unsampled" if verdict == _UNSAMPLED else "keep"

    def _verdict(self, trace_id: str, failed: bool, age_ns: int) -> int:
        max_age = self.max_age
        if isinstance(max_age, dt.timedelta) and age_ns > _ns(max_age):
            return _EXPIRED
        if failed and self.keep_failed:
            return _KEEP
        return _KEEP if _sample_key(trace_id) < self._threshold else _UNSAMPLED


def _checked_trace_id(trace_id: str) -> str:
    text = trace_id.lower() if isinstance(trace_id, str) else ""
    if not _TRACE_ID.match(text):
        raise ValueError(f"not a trace id (32 hex digits): {trace_id!r}")
    return text


def _sample_key(trace_id: str) -> int:
    return int(trace_id[-(_SAMPLE_BITS // 4) :], 16)


def _ns(delta: dt.timedelta) -> int:
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def _duration(name: str, value: object, *, zero: bool = False) -> dt.timedelta | None:
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


def _size(name: str, value: object) -> int | None:
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


# ------------------------------------------------------------------------------------------------ report


@dataclass(frozen=True)
class RetentionReport:
    """What :func:`apply_retention` did (or, with ``dry_run``, would do). Byte counts are exact unless noted.

    ``traces_kept`` and ``traces_removed`` split into failed and successful; ``traces_removed`` also splits by reason
    (``removed_expired + removed_unsampled + removed_for_size``). Kept traces include the pending ones.
    """

    dry_run: bool
    """Nothing was changed; the numbers say what a run would do now."""
    traces_kept: int
    """Traces left in the store (pending ones included)."""
    traces_removed: int
    """Traces removed from the index."""
    failed_kept: int
    """Failed traces kept."""
    failed_removed: int
    """Failed traces removed (older than ``max_age``, not sampled without ``keep_failed``, or for size)."""
    successful_kept: int
    """Successful traces kept."""
    successful_removed: int
    """Successful traces removed."""
    removed_expired: int
    """Traces removed for being older than ``max_age``."""
    removed_unsampled: int
    """Traces removed for being outside the ``success_rate`` sample."""
    removed_for_size: int
    """Traces removed to bring the data under ``max_bytes``."""
    traces_pending: int
    """Traces left alone because they were written to recently (they may still grow); a later run decides them."""
    span_bytes_removed: int
    """Bytes of span lines of the removed traces (no longer indexed)."""
    payloads_removed: int
    """Payloads that no remaining trace refers to, deleted."""
    payload_bytes_removed: int
    """Their bytes."""
    segments_deleted: int
    """Segment files deleted (none of their lines was still indexed)."""
    segments_rewritten: int
    """Segment files rewritten with only their indexed lines."""
    segments_busy: int
    """Segments with unindexed lines left as they are because a writer may still append to them."""
    segment_bytes_freed: int
    """Bytes of segment files given back to the file system."""
    data_bytes_before: int
    """Indexed span-line bytes plus stored payload bytes before the run (what ``max_bytes`` measures)."""
    data_bytes_after: int
    """The same after the run, as of the snapshot (spans written during the run are not counted)."""
    store_bytes_before: int
    """Bytes of the store's files on disk before the run (manifest, index and its WAL, segments)."""
    store_bytes_after: int
    """The same after the run (for a dry run, an estimate: minus the segment bytes it would free)."""
    warnings: tuple[str, ...] = field(default=())
    """What the run could not do, and why (a damaged segment, the size cap out of reach…)."""

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON-ready data."""
        data = asdict(self)
        data["warnings"] = list(self.warnings)
        return data

    def summary(self) -> str:
        """One line for a human: what was kept, removed and freed."""
        head, keep, remove, free = ("gc (dry run)", "would keep", "would remove", "would free")
        if not self.dry_run:
            head, keep, remove, free = ("gc", "kept", "removed", "freed")
        reasons = (
            f"{self.removed_expired:,} expired, {self.removed_unsampled:,} unsampled, "
            f"{self.removed_for_size:,} for size"
        )
        return (
            f"{head}: {keep} {self.traces_kept:,} traces ({self.failed_kept:,} failed, "
            f"{self.traces_pending:,} pending), {remove} {self.traces_removed:,} "
            f"({self.failed_removed:,} failed; {reasons}); {free} {_human(self.segment_bytes_freed)} of "
            f"segments ({self.segments_deleted:,} deleted, {self.segments_rewritten:,} rewritten, "
            f"{self.segments_busy:,} busy) and {self.payloads_removed:,} payloads "
            f"({_human(self.payload_bytes_removed)}); data {_human(self.data_bytes_before)} -> "
            f"{_human(self.data_bytes_after)}, store {_human(self.store_bytes_before)} -> "
            f"{_human(self.store_bytes_after)}" + (f"; {len(self.warnings)} warning(s)" if self.warnings else "")
        )


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if abs(value) < 1000 or unit == "GB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("not reached")  # pragma: no cover


# ------------------------------------------------------------------------------------------------ entry point


def apply_retention(
    path: str | os.PathLike[str] | None,
    policy: RetentionPolicy | None = None,
    *,
    dry_run: bool = False,
    now: dt.datetime | float | None = None,
    grace: dt.timedelta | float | str = DEFAULT_GRACE,
    remove_payloads: bool = True,
    vacuum: bool = False,
) -> RetentionReport:
    """Apply ``policy`` to the local store at ``path``: remove traces, their unreferenced payloads and dead bytes.

    Safe while other processes record into the store, and crash safe at every step (see the module
    documentation for the procedure and the rule that keeps a live writer's segment untouched). Two runs on one
    store do not overlap: the second raises.

    Args:
        path: the store directory; None for the default store (``$CHRONICLE_HOME`` or ``./.chronicle``).
        policy: what to keep; default :class:`RetentionPolicy()` (keep every trace, reclaim space only).
        dry_run: change nothing in the store (no lock file either) and report what a run would do now.
        now: the time trace ages are measured from (an aware datetime or epoch seconds); default: now.
        grace: a trace or segment written to in the last ``grace`` (timedelta, seconds or text such as ``10m``)
            is left for a later run; measured from the real clock, whatever ``now`` says.
        remove_payloads: delete payloads no remaining trace refers to; pass False for a store that also holds
            payloads of traces kept elsewhere.
        vacuum: rebuild the index file at its minimal size afterwards (SQLite ``VACUUM``; holds the index while it
            runs: writers wait, and time out after 30 s).

    Returns:
        What was removed and freed.

    Raises:
        StoreError: ``path`` holds no store, its index cannot be read, or another run holds the store.
        ConfigError: ``now`` or ``grace`` is invalid.
        TypeError: ``policy`` is not a :class:`RetentionPolicy`.
    """
    if policy is None:
        policy = RetentionPolicy()
    if not isinstance(policy, RetentionPolicy):
        raise TypeError(f"policy must be a RetentionPolicy, not {type(policy).__name__}")
    collector = _Collector(
        default_store_path() if path is None else Path(path),
        policy,
        now_ns=_now_ns(now),
        grace_ns=_grace_ns(grace),
        dry_run=dry_run,
        remove_payloads=remove_payloads,
        vacuum=vacuum,
    )
    if not collector.path.joinpath(MANIFEST).is_file():
        raise StoreError("there is no store here", collector.path)
    with contextlib.nullcontext() if dry_run else _exclusive(collector.path / _LOCK_NAME):
        return collector.run()


def _grace_ns(grace: object) -> int:
    delta = _duration("grace", grace, zero=True)
    assert delta is not None
    return _ns(delta)


def _now_ns(now: dt.datetime | float | None) -> int:
    if now is None:
        return time.time_ns()
    if isinstance(now, dt.datetime):
        if now.tzinfo is None:
            raise ConfigError("now", now, "an aware datetime (with a tzinfo) or epoch seconds")
        return round(now.timestamp() * 1e9)
    if isinstance(now, (int, float)) and not isinstance(now, bool) and math.isfinite(now) and now >= 0:
        return round(now * 1e9)
    raise ConfigError("now", now, "an aware datetime or epoch seconds")


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Hold the store's gc lock: one retention run at a time (a crashed run's lock dies with its process)."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        try:
            if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
                import msvcrt

                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            else:
                import fcntl

                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise StoreError(
                "another retention run (chronicle gc) is working on this store", lock_path.parent
            ) from None
        yield
    finally:
        os.close(fd)  # closing releases the lock


# ------------------------------------------------------------------------------------------------ the run


class _Changed(Exception):
    """The index rows of a segment changed between its copy and the move of its rows."""


@dataclass
class _Counts:
    kept_failed: int = 0
    kept_ok: int = 0
    removed_failed: int = 0
    removed_ok: int = 0
    expired: int = 0
    unsampled: int = 0
    for_size: int = 0
    pending: int = 0
    span_bytes_removed: int = 0
    payloads_removed: int = 0
    payload_bytes_removed: int = 0
    segments_deleted: int = 0
    segments_rewritten: int = 0
    segments_busy: int = 0
    segment_bytes_freed: int = 0
    lines_before: int = 0
    payload_bytes_before: int = 0
    warnings: list[str] = field(default_factory=list)


class _Collector(StoreReader):
    """One retention run over a store: plan on a snapshot, then remove, sweep payloads and compact segments."""

    _writes = True

    def __init__(
        self,
        path: Path,
        policy: RetentionPolicy,
        *,
        now_ns: int,
        grace_ns: int,
        dry_run: bool,
        remove_payloads: bool,
        vacuum: bool,
    ) -> None:
        super().__init__(path)
        self.policy = policy
        self.now_ns = now_ns
        self.grace_ns = grace_ns
        self.settled_ns = time.time_ns() - grace_ns  # writes after this instant are recent, on the real clock
        self.dry_run = dry_run
        self.sweep = remove_payloads
        self.vacuum = vacuum
        self.counts = _Counts()
        self.mark = 0  # every span_lines row above this rowid was written after the references were read

    # ---------------------------------------------------------------------------------------- setup

    def _prepare(self, db: sqlite3.Connection) -> None:
        db.execute("PRAGMA temp_store=FILE")  # the plan spills to a temporary file, not to memory

    def _create(self) -> None:
        raise StoreError("there is no store here", self.path)

    def _index(self) -> sqlite3.Connection:
        db = self._connect(create=False)
        if db is None:
            raise StoreError("there is no store here", self.path)
        return db

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A short write transaction: writers wait for it (their timeout is 30 s), so each one does little."""
        assert not self.dry_run
        db = self._index()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def run(self) -> RetentionReport:
        """Plan, then (unless a dry run) remove traces, sweep payloads and compact segments; closes the index."""
        store_before = self._disk_bytes()
        db = self._index()
        try:
            db.executescript(_PLAN_SCHEMA)
            db.execute("BEGIN")  # one read snapshot for the whole plan; only temporary tables are written
            try:
                self._plan(db)
                references = self._read_references(db)
                self._cap(db, references)
                self._doom_payloads(db)
                if self.dry_run:
                    self._predict(db)
            finally:
                if db.in_transaction:
                    db.execute("COMMIT")
            if not self.dry_run:
                self._remove_traces()
                if self.sweep:
                    self._remove_payloads()
                self._compact_segments()
                self._checkpoint(db)
            self._tally(db)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"store index error during retention ({exc})", self.path / INDEX) from None
        finally:
            self.close()  # the last connection to close removes the WAL file
        return self._report(store_before)

    # ---------------------------------------------------------------------------------------- plan

    def _plan(self, db: sqlite3.Connection) -> None:
        """Every trace's verdict from the policy, on the snapshot; recent or unreadable rows stay pending."""
        c = self.counts
        self.mark = db.execute("SELECT COALESCE(MAX(rowid), 0) FROM span_lines").fetchone()[0]
        policy = self.policy
        insert = "INSERT OR IGNORE INTO temp.plan(trace_id, updated_ns, age_key, failed, verdict) VALUES (?,?,?,?,?)"
        odd = 0
        batch: list[tuple[Any, ...]] = []
        rows = db.execute("SELECT trace_id, start_ns, updated_ns, status, error_count FROM traces")
        for trace_id, start_ns, updated_ns, status, errors in rows:
            valid = (
                type(trace_id) is str
                and _TRACE_ID.match(trace_id) is not None
                and type(updated_ns) is int
                and (start_ns is None or type(start_ns) is int)
                and status in _STATUSES
                and type(errors) is int
            )
            if not valid:
                odd += 1
                if type(trace_id) is str:
                    batch.append((trace_id, updated_ns, 0, 1, _PENDING))
                continue
            failed = status is None or status == "ERROR" or errors > 0
            age_key = start_ns if start_ns is not None else updated_ns
            if updated_ns > self.settled_ns:
                verdict = _PENDING
            else:
                verdict = policy._verdict(trace_id, failed, self.now_ns - age_key)
            batch.append((trace_id, updated_ns, age_key, int(failed), verdict))
            if len(batch) >= _INSERT_BATCH:
                db.executemany(insert, batch)
                batch.clear()
        db.executemany(insert, batch)
        if odd:
            c.warnings.append(f"{odd} trace index row(s) with unexpected values were left alone")
        of_plan = lines_of_trace(db, "plan.trace_id")  # the lines of the plan row's trace, through the index
        db.execute(f"UPDATE temp.plan SET bytes = (SELECT COALESCE(SUM(length), 0) FROM span_lines WHERE {of_plan})")
        c.lines_before = db.execute("SELECT COALESCE(SUM(length), 0) FROM span_lines").fetchone()[0]
        odd_size = db.execute(
            "SELECT hash, size FROM payloads WHERE typeof(size) != 'integer' OR size < 0 LIMIT 1"
        ).fetchone()
        if odd_size is not None:  # the writer records byte counts: the size limit would count wrong
            raise StoreError(
                f"the payloads row of {str(odd_size[0])[:80]!r} holds size {str(odd_size[1])[:40]!r}, not a byte "
                "count: the index was changed by something else than chronicle; nothing was removed",
                self.path / INDEX,
            )
        c.payload_bytes_before = db.execute("SELECT COALESCE(SUM(size), 0) FROM payloads").fetchone()[0]

    def _read_references(self, db: sqlite3.Connection) -> bool:
        """Record which stored payloads each trace not removed by the policy refers to. False when unknown."""
        if not self.sweep or db.execute("SELECT 1 FROM payloads LIMIT 1").fetchone() is None:
            return False
        rows = db.execute(
            "SELECT s.trace_id, s.segment, s.offset, s.length FROM span_lines s "
            "WHERE NOT EXISTS (SELECT 1 FROM temp.plan p WHERE p.trace_id = s.trace_id AND p.verdict >= ?) "
            "ORDER BY s.segment, s.offset",
            (_REMOVED,),
        )
        try:
            self._record_references(db, rows, "temp.trefs(trace_id, hash)")
        except StoreError as exc:
            self.counts.warnings.append(f"payloads were not removed: a kept trace's span lines are unreadable ({exc})")
            self.sweep = False
            return False
        db.execute(
            "INSERT INTO temp.refcount(hash, n, size) SELECT t.hash, COUNT(*), p.size "
            "FROM temp.trefs t JOIN payloads p ON p.hash = t.hash GROUP BY t.hash"
        )
        return True

    def _record_references(self, db: sqlite3.Connection, rows: Any, target: str) -> None:
        """Read the lines of ``rows`` (trace_id, segment, offset, length) and record the stored payloads they name.

        ``target`` is ``temp.trefs(trace_id, hash)`` or ``temp.keep(hash)``.
        """
        per_trace = target.startswith("temp.trefs")
        if per_trace:
            sql = f"INSERT OR IGNORE INTO {target} SELECT ?, ? WHERE EXISTS (SELECT 1 FROM payloads WHERE hash = ?)"
        else:
            sql = f"INSERT OR IGNORE INTO {target} SELECT ? WHERE EXISTS (SELECT 1 FROM payloads WHERE hash = ?)"
        batch: list[tuple[str, ...]] = []
        for trace_id, digests in self._digests(rows):
            for digest in digests:
                batch.append((trace_id, digest, digest) if per_trace else (digest, digest))
            if len(batch) >= _INSERT_BATCH:
                db.executemany(sql, batch)
                batch.clear()
        db.executemany(sql, batch)

    def _digests(self, rows: Any) -> Iterator[tuple[str, set[str]]]:
        """For each row, its trace id and the payload digests its line holds; a segment is opened once per run of
        rows in it.

        Raises:
            StoreError: a row names a segment outside the store, missing, or shorter than the row says.
        """
        current: object = None
        full: Path = self.path
        handle: Any = None
        size = 0
        try:
            for trace_id, segment, offset, length in rows:
                if segment != current or handle is None:
                    full = self._segment_path(segment)
                    if handle is not None:
                        handle.close()
                        handle = None
                    handle, size = self._open_segment_file(full)
                    current = segment
                if not (type(offset) is int and type(length) is int and offset >= 0 and 0 <= length <= MAX_LINE_BYTES):
                    raise StoreError(f"index row with offset {offset!r} and length {length!r}", full)
                if offset + length > size:
                    raise StoreError(f"span segment truncated: {size} bytes, the index reads {offset}+{length}", full)
                handle.seek(offset)
                line = handle.read(length)
                if len(line) != length:
                    raise StoreError(f"span segment truncated at byte {offset}", full)
                line = inflate(line, self.path, full, offset, MAX_LINE_BYTES)  # a zstd frame: its text holds them
                yield str(trace_id), {m.decode() for m in _DIGEST.findall(line)}
        except OSError as exc:
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"unreadable span segment ({exc.strerror or exc})", full) from None
        finally:
            if handle is not None:
                handle.close()

    def _cap(self, db: sqlite3.Connection, references: bool) -> None:
        """Mark kept traces removed, oldest successes first, then oldest failures, until the data fits."""
        cap = self.policy.max_bytes
        if not isinstance(cap, int):
            return
        data = self._data_after(db, references)
        if data <= cap:
            return
        protect = self.policy.min_keep_failed_age
        young = self.now_ns - _ns(protect) if isinstance(protect, dt.timedelta) else None
        candidates = db.execute(
            "SELECT trace_id, bytes FROM temp.plan WHERE verdict = ? AND NOT (failed AND age_key > ?) "
            "ORDER BY failed, age_key, trace_id",
            (_KEEP, young if young is not None else 1 << 62),
        )
        marker = db.cursor()
        for trace_id, size in candidates:
            freed = size
            if references:
                freed += marker.execute(
                    "SELECT COALESCE(SUM(r.size), 0) FROM temp.trefs t JOIN temp.refcount r ON r.hash = t.hash "
                    "WHERE t.trace_id = ? AND r.n = 1",
                    (trace_id,),
                ).fetchone()[0]
                marker.execute(
                    "UPDATE temp.refcount SET n = n - 1 WHERE hash IN (SELECT hash FROM temp.trefs WHERE trace_id = ?)",
                    (trace_id,),
                )
            marker.execute("INSERT INTO temp.size_removed VALUES (?)", (trace_id,))
            data -= freed
            if data <= cap:
                break
        candidates.close()
        db.execute(
            "UPDATE temp.plan SET verdict = ? WHERE trace_id IN (SELECT trace_id FROM temp.size_removed)", (_FOR_SIZE,)
        )
        if data > cap:
            self.counts.warnings.append(
                f"the data stays above max_bytes ({_human(data)} > {_human(cap)}): what is left is pending, "
                "or failed traces younger than min_keep_failed_age"
            )

    def _data_after(self, db: sqlite3.Connection, references: bool) -> int:
        """Span-line bytes of the traces kept plus the payload bytes they keep."""
        removed = db.execute("SELECT COALESCE(SUM(bytes), 0) FROM temp.plan WHERE verdict >= ?", (_REMOVED,))
        lines: int = self.counts.lines_before - removed.fetchone()[0]
        if not references:  # no payload is removed (there is none, or the sweep is off)
            return lines + self.counts.payload_bytes_before
        kept = db.execute("SELECT COALESCE(SUM(size), 0) FROM temp.refcount WHERE n > 0").fetchone()[0]
        return int(lines + kept)

    def _doom_payloads(self, db: sqlite3.Connection) -> None:
        """The payloads that no trace left in the store refers to, as of the snapshot."""
        if not self.sweep:
            return
        db.execute("INSERT INTO temp.keep(hash) SELECT hash FROM temp.refcount WHERE n > 0")
        db.execute("INSERT INTO temp.doomed(hash, size) SELECT hash, size FROM payloads WHERE hash NOT IN temp.keep")

    def _predict(self, db: sqlite3.Connection) -> None:
        """Dry run: count what the removal, the sweep and the compaction would do."""
        c = self.counts
        c.payloads_removed, c.payload_bytes_removed = db.execute(
            "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM temp.doomed"
        ).fetchone()
        groups = self._segment_groups(
            db,
            "WHERE NOT EXISTS (SELECT 1 FROM temp.plan p WHERE p.trace_id = s.trace_id AND p.verdict >= ?)",
            (_REMOVED,),
        )
        for rel, full, info in self._segment_files():
            rows, kept = groups.get(rel, (0, 0))
            if rows and kept == info.st_size:
                continue
            if self._busy(full, info):
                c.segments_busy += 1
            elif rows == 0:
                c.segments_deleted += 1
                c.segment_bytes_freed += info.st_size
            elif kept < info.st_size:
                c.segments_rewritten += 1
                c.segment_bytes_freed += info.st_size - kept

    # ---------------------------------------------------------------------------------------- removal

    def _remove_traces(self) -> None:
        """Delete the index rows of removed traces, a chunk per transaction; a trace written to since is kept."""
        db = self._index()
        last = ""
        while True:
            chunk = db.execute(
                "SELECT trace_id, updated_ns FROM temp.plan WHERE verdict >= ? AND trace_id > ? "
                "ORDER BY trace_id LIMIT ?",
                (_REMOVED, last, _CHUNK_TRACES),
            ).fetchall()
            if not chunk:
                return
            last = chunk[-1][0]
            with self._write() as w:
                self._read_new_lines(w)
                gone: list[tuple[str]] = []
                of_trace = lines_of_trace(w)
                for trace_id, updated_ns in chunk:
                    row = w.execute("SELECT updated_ns FROM traces WHERE trace_id = ?", (trace_id,)).fetchone()
                    if row is not None and row[0] == updated_ns:
                        gone.append((trace_id,))
                        continue
                    w.execute("UPDATE temp.plan SET verdict = ? WHERE trace_id = ?", (_PENDING, trace_id))
                    if self.sweep:  # its earlier lines were not read as a kept trace's
                        lines = w.execute(
                            f"SELECT trace_id, segment, offset, length FROM span_lines WHERE {of_trace} "
                            "ORDER BY segment, offset",
                            {"trace_id": trace_id},
                        )
                        self._keep_references(w, lines)
                # the lines first: with chronicle-store/2 they are found through the traces row
                w.executemany(f"DELETE FROM span_lines WHERE {of_trace}", [{"trace_id": t} for (t,) in gone])
                w.executemany("DELETE FROM traces WHERE trace_id = ?", gone)
                self.mark = w.execute("SELECT COALESCE(MAX(rowid), 0) FROM span_lines").fetchone()[0]

    def _read_new_lines(self, db: sqlite3.Connection) -> None:
        """Inside a write transaction: record the payloads named by lines written since the last look.

        Rows are only ever deleted by this run, and SQLite gives a new row the largest rowid plus one, so every
        row above :attr:`mark` (the largest rowid after this run's last deletion) is new.
        """
        if not self.sweep:
            return
        rows = db.execute(
            "SELECT trace_id, segment, offset, length FROM span_lines WHERE rowid > ? ORDER BY segment, offset",
            (self.mark,),
        ).fetchall()
        self.mark = max(self.mark, db.execute("SELECT COALESCE(MAX(rowid), 0) FROM span_lines").fetchone()[0])
        self._keep_references(db, iter(rows))

    def _keep_references(self, db: sqlite3.Connection, rows: Any) -> None:
        try:
            self._record_references(db, rows, "temp.keep(hash)")
        except StoreError as exc:
            self.counts.warnings.append(f"payload removal stopped: a span line is unreadable ({exc})")
            self.sweep = False

    def _remove_payloads(self) -> None:
        """Delete the doomed payloads still unreferenced, a chunk per transaction."""
        db = self._index()
        c = self.counts
        last = ""
        while self.sweep:
            chunk = db.execute(
                "SELECT hash FROM temp.doomed WHERE hash > ? ORDER BY hash LIMIT ?", (last, _CHUNK_PAYLOADS)
            ).fetchall()
            if not chunk:
                return
            last = chunk[-1][0]
            with self._write() as w:
                self._read_new_lines(w)
                if not self.sweep:
                    return
                marks = ",".join("?" * len(chunk))
                hashes = [h for (h,) in chunk]
                found = w.execute(
                    f"SELECT hash, size FROM payloads WHERE hash IN ({marks}) AND hash NOT IN temp.keep", hashes
                ).fetchall()
                w.executemany("DELETE FROM payloads WHERE hash = ?", [(h,) for h, _ in found])
                c.payloads_removed += len(found)
                c.payload_bytes_removed += sum(size for _, size in found)

    # ---------------------------------------------------------------------------------------- segments

    def _segment_files(self) -> Iterator[tuple[str, Path, os.stat_result]]:
        """Every segment file of the store: ``spans/<dir>/<name>.jsonl``, regular files reached without links."""
        spans = self.path / "spans"
        if spans.is_symlink() or not spans.is_dir():
            return
        for day in sorted(os.listdir(spans)):
            folder = spans / day
            if folder.is_symlink() or not folder.is_dir():
                continue
            for name in sorted(os.listdir(folder)):
                if not name.endswith(".jsonl"):
                    continue
                full = folder / name
                try:
                    info = os.lstat(full)
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode):
                    yield f"spans/{day}/{name}", full, info

    def _segment_groups(
        self, db: sqlite3.Connection, where: str, params: tuple[Any, ...]
    ) -> dict[str, tuple[int, int]]:
        """Indexed rows per segment, and the bytes they take with their newlines."""
        rows = db.execute(
            f"SELECT s.segment, COUNT(*), COALESCE(SUM(s.length), 0) + COUNT(*) FROM span_lines s {where} "
            "GROUP BY s.segment",
            params,
        )
        return {str(segment): (count, size) for segment, count, size in rows}

    def _busy(self, full: Path, info: os.stat_result) -> bool:
        """True when a writer may still append to this segment (the rule is in the module documentation)."""
        if info.st_mtime_ns > self.settled_ns:
            return True
        if info.st_size >= _SEGMENT_MAX_BYTES:
            return False  # the writer moved on to a new segment
        match = _SEGMENT_NAME.match(full.name)
        if match is None:
            return False  # not a writer's name: settled once quiet for the grace period
        return _held_open(int(match.group(2)), info)

    def _compact_segments(self) -> None:
        db = self._index()
        c = self.counts
        groups = self._segment_groups(db, "", ())
        empty: list[tuple[str, Path, os.stat_result]] = []
        for rel, full, info in self._segment_files():
            rows, kept = groups.get(rel, (0, 0))
            if rows and kept == info.st_size:
                continue
            if rows and kept > info.st_size:
                c.warnings.append(f"{rel}: the index lists more bytes than the file holds; left alone")
                continue
            if self._busy(full, info):
                c.segments_busy += 1
            elif rows == 0:
                empty.append((rel, full, info))
            else:
                self._rewrite(rel, full, info)
        for start in range(0, len(empty), _CHUNK_SEGMENTS):
            self._delete_segments(empty[start : start + _CHUNK_SEGMENTS])
        self._remove_old_day_folders()

    def _delete_segments(self, segments: list[tuple[str, Path, os.stat_result]]) -> None:
        """Delete segments no index row points at; checked again under the write lock, so none can appear."""
        c = self.counts
        with self._write() as w:
            marks = ",".join("?" * len(segments))
            used = {
                segment
                for (segment,) in w.execute(
                    f"SELECT DISTINCT segment FROM span_lines WHERE segment IN ({marks})",
                    [rel for rel, _, _ in segments],
                )
            }
            for rel, full, info in segments:
                if rel in used:
                    continue
                try:
                    _unlink_segment(full)
                except OSError:
                    c.segments_busy += 1  # Windows: a process holds it open
                    continue
                c.segments_deleted += 1
                c.segment_bytes_freed += info.st_size
        _sync_folders({full.parent for _, full, _ in segments})

    def _rewrite(self, rel: str, full: Path, info: os.stat_result) -> None:
        """Copy the indexed lines of a segment to a new one, move their index rows to it, unlink the old file."""
        c = self.counts
        rows = self._index().execute(_SEGMENT_ROWS, (rel,)).fetchall()
        end = 0
        for _, offset, length in rows:
            if not (type(offset) is int and type(length) is int and offset >= end and 0 <= length <= MAX_LINE_BYTES):
                c.warnings.append(f"{rel}: index rows overlap or are malformed; left alone")
                return
            end = offset + length
        if not rows or end > info.st_size:
            if rows:
                c.warnings.append(f"{rel}: the index reads past the end of the file; left alone")
            return
        match = _SEGMENT_NAME.match(full.name)
        stamp = match.group(1) if match else time.strftime("%H%M%S", time.gmtime())
        new_rel = f"{rel.rsplit('/', 1)[0]}/{stamp}-{os.getpid()}-{os.urandom(4).hex()}.jsonl"
        new_full = self.path / new_rel
        try:
            moved, new_size = _write_segment(full, new_full, rows)
        except OSError as exc:
            with contextlib.suppress(OSError):
                new_full.unlink()
            c.warnings.append(f"{rel}: could not be rewritten ({exc}); left alone")
            return
        try:
            with self._write() as w:
                if w.execute(_SEGMENT_ROWS, (rel,)).fetchall() != rows:
                    raise _Changed  # not expected of a settled segment: never move rows that changed
                _replace_rows(w, new_rel, moved)
        except _Changed:
            with contextlib.suppress(OSError):
                new_full.unlink()
            c.segments_busy += 1
            return
        c.segments_rewritten += 1
        try:
            _unlink_segment(full)
        except OSError:  # Windows: a process holds it open; its rows are moved, a later run deletes it
            c.segment_bytes_freed -= new_size
            return
        finally:
            _sync_folders({full.parent})
        c.segment_bytes_freed += info.st_size - new_size

    def _remove_old_day_folders(self) -> None:
        """Remove empty day folders older than yesterday (a writer only creates today's, on the UTC clock)."""
        spans = self.path / "spans"
        oldest = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 2 * 86400))
        with contextlib.suppress(OSError):
            for day in os.listdir(spans):
                folder = spans / day
                if _DAY.match(day) and day < oldest and not folder.is_symlink() and folder.is_dir():
                    with contextlib.suppress(OSError):
                        folder.rmdir()  # fails unless empty

    # ---------------------------------------------------------------------------------------- end

    def _checkpoint(self, db: sqlite3.Connection) -> None:
        """Copy the WAL into the index file; after a VACUUM (whose WAL is as large as the index) truncate it too."""
        if not self.vacuum:
            with contextlib.suppress(sqlite3.DatabaseError):  # PASSIVE never makes a writer wait
                db.execute("PRAGMA wal_checkpoint(PASSIVE)")
            return
        db.execute("VACUUM")
        db.execute("PRAGMA busy_timeout=2000")  # TRUNCATE holds writers while it waits for readers: briefly
        with contextlib.suppress(sqlite3.DatabaseError):
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _disk_bytes(self) -> int:
        total = 0
        for name in (MANIFEST, INDEX, INDEX + "-wal"):  # not -shm: a shared-memory file of open connections
            with contextlib.suppress(OSError):
                info = os.lstat(self.path / name)
                if stat.S_ISREG(info.st_mode):
                    total += info.st_size
        return total + sum(info.st_size for _, _, info in self._segment_files())

    def _tally(self, db: sqlite3.Connection) -> None:
        c = self.counts
        for verdict, failed, count, size in db.execute(
            "SELECT verdict, failed, COUNT(*), COALESCE(SUM(bytes), 0) FROM temp.plan GROUP BY verdict, failed"
        ):
            if verdict >= _REMOVED:
                c.span_bytes_removed += size
                if failed:
                    c.removed_failed += count
                else:
                    c.removed_ok += count
                if verdict == _EXPIRED:
                    c.expired += count
                elif verdict == _UNSAMPLED:
                    c.unsampled += count
                else:
                    c.for_size += count
            else:
                if verdict == _PENDING:
                    c.pending += count
                if failed:
                    c.kept_failed += count
                else:
                    c.kept_ok += count

    def _report(self, store_before: int) -> RetentionReport:
        c = self.counts
        data_before = c.lines_before + c.payload_bytes_before
        data_after = data_before - c.span_bytes_removed - c.payload_bytes_removed
        store_after = store_before - c.segment_bytes_freed if self.dry_run else self._disk_bytes()
        return RetentionReport(
            dry_run=self.dry_run,
            traces_kept=c.kept_failed + c.kept_ok,
            traces_removed=c.removed_failed + c.removed_ok,
            failed_kept=c.kept_failed,
            failed_removed=c.removed_failed,
            successful_kept=c.kept_ok,
            successful_removed=c.removed_ok,
            removed_expired=c.expired,
            removed_unsampled=c.unsampled,
            removed_for_size=c.for_size,
            traces_pending=c.pending,
            span_bytes_removed=c.span_bytes_removed,
            payloads_removed=c.payloads_removed,
            payload_bytes_removed=c.payload_bytes_removed,
            segments_deleted=c.segments_deleted,
            segments_rewritten=c.segments_rewritten,
            segments_busy=c.segments_busy,
            segment_bytes_freed=c.segment_bytes_freed,
            data_bytes_before=data_before,
            data_bytes_after=data_after,
            store_bytes_before=store_before,
            store_bytes_after=store_after,
            warnings=tuple(c.warnings),
        )


# ------------------------------------------------------------------------------------------------ file steps


def _write_segment(old: Path, new: Path, rows: list[tuple[int, int, int]]) -> tuple[list[tuple[int, int]], int]:
    """Copy the lines ``rows`` (rowid, offset, length) of ``old`` to the new file ``new``, fsync-ed.

    Returns:
        ``(rowid, new offset)`` of every line, and the new file's size.
    """
    moved: list[tuple[int, int]] = []
    position = 0
    fd = os.open(old, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0))
    with open(fd, "rb") as src, open(new, "xb") as dst:
        for rowid, offset, length in rows:
            src.seek(offset)
            line = src.read(length)
            if len(line) != length:
                raise OSError(f"{old}: truncated at byte {offset}")
            dst.write(line)
            dst.write(b"\n")
            moved.append((rowid, position))
            position += length + 1
        dst.flush()
        os.fsync(dst.fileno())
    _sync_folders({new.parent})
    return moved, position


def _replace_rows(db: sqlite3.Connection, segment: str, moved: list[tuple[int, int]]) -> None:
    """Point the moved rows at their place in the new segment (inside the caller's transaction)."""
    db.executemany(
        "UPDATE span_lines SET segment = ?, offset = ? WHERE rowid = ?",
        [(segment, offset, rowid) for rowid, offset in moved],
    )


def _unlink_segment(full: Path) -> None:
    os.unlink(full)


def _sync_folders(folders: set[Path]) -> None:
    """fsync directories so that file creations and removals in them are durable (POSIX only)."""
    if os.name == "nt":  # pragma: no cover - directories cannot be opened on Windows
        return
    for folder in folders:
        with contextlib.suppress(OSError):
            fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def _held_open(pid: int, info: os.stat_result) -> bool:
    """True when process ``pid`` may hold the file ``info`` describes open for appending."""
    if os.name == "nt":  # pragma: no cover - Windows refuses to delete a file held open; unlink fails instead
        return False
    fds = Path(f"/proc/{pid}/fd")
    try:
        entries = os.listdir(fds)
    except FileNotFoundError:
        if os.path.isdir("/proc/self/fd"):
            return False  # /proc works and there is no such process
        return _alive(pid)
    except OSError:
        return _alive(pid)  # another user's process: assume it holds the file
    for entry in entries:
        try:
            target = os.stat(fds / entry)
        except OSError:
            continue
        if target.st_ino == info.st_ino and target.st_dev == info.st_dev:
            return True
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
