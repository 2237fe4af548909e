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

How it is built, one concept per module: ``_policy`` (:class:`RetentionPolicy`, its verdicts, durations and sizes
read from text), ``_report`` (the counts of a run and :class:`RetentionReport`), ``_run`` (one run's state and its
access to the index: write transactions, payload references read from span lines), ``_plan`` (the plan on one
snapshot: verdicts, references, the size cap, the dry-run prediction), ``_removal`` (traces and payloads removed in
short transactions) and ``_segments`` (segment files: the busy rule, compaction, the file steps); this module holds
the entry point, the lock and the order of the steps.

API:
    :class:`RetentionPolicy`, :func:`apply_retention`, :class:`RetentionReport`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from ...errors import ConfigError, StoreError
from ..reader import INDEX, INDEX_ERRORS, MANIFEST, default_store_path, index_error_text
from . import _plan, _removal, _segments
from ._policy import RetentionPolicy, duration_of, nanoseconds
from ._report import RetentionReport, report_of, tally
from ._run import Run

__all__ = ["RetentionPolicy", "RetentionReport", "apply_retention"]

DEFAULT_GRACE: Final = 600.0
"""Seconds since its last write before a trace or a segment is considered settled."""

_LOCK_NAME: Final = "gc.lock"


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
    run = Run(
        default_store_path() if path is None else Path(path),
        policy,
        now_ns=_now_ns(now),
        grace_ns=_grace_ns(grace),
        dry_run=dry_run,
        remove_payloads=remove_payloads,
        vacuum=vacuum,
    )
    if not run.path.joinpath(MANIFEST).is_file():
        raise StoreError("there is no store here", run.path)
    with contextlib.nullcontext() if dry_run else _exclusive(run.path / _LOCK_NAME):
        return _collect(run)


def _grace_ns(grace: object) -> int:
    delta = duration_of("grace", grace, zero=True)
    assert delta is not None
    return nanoseconds(delta)


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


def _collect(run: Run) -> RetentionReport:
    """Plan, then (unless a dry run) remove traces, sweep payloads and compact segments; closes the index."""
    store_before = _segments.disk_bytes(run.path)
    db = run.index()
    try:
        db.executescript(_plan.SCHEMA)
        db.execute("BEGIN")  # one read snapshot for the whole plan; only temporary tables are written
        try:
            _plan.verdicts(run, db)
            references = _plan.read_references(run, db)
            _plan.size_cap(run, db, references)
            _plan.doom_payloads(run, db)
            if run.dry_run:
                _plan.predict(run, db)
        finally:
            if db.in_transaction:
                db.execute("COMMIT")
        if not run.dry_run:
            _removal.remove_traces(run)
            if run.sweep:
                _removal.remove_payloads(run)
            _segments.compact_segments(run)
            _checkpoint(db, vacuum=run.vacuum)
        tally(db, run.counts)
    except INDEX_ERRORS as exc:
        raise StoreError(f"store index error during retention ({index_error_text(exc)})", run.path / INDEX) from None
    finally:
        run.close()  # the last connection to close removes the WAL file
    c = run.counts
    store_after = store_before - c.segment_bytes_freed if run.dry_run else _segments.disk_bytes(run.path)
    return report_of(c, dry_run=run.dry_run, store_before=store_before, store_after=store_after)


def _checkpoint(db: sqlite3.Connection, *, vacuum: bool) -> None:
    """Copy the WAL into the index file; after a VACUUM (whose WAL is as large as the index) truncate it too."""
    if not vacuum:
        with contextlib.suppress(sqlite3.DatabaseError):  # PASSIVE never makes a writer wait
            db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        return
    db.execute("VACUUM")
    db.execute("PRAGMA busy_timeout=2000")  # TRUNCATE holds writers while it waits for readers: briefly
    with contextlib.suppress(sqlite3.DatabaseError):
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
