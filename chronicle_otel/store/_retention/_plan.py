"""The plan of a retention run, made on one snapshot of the index: every trace's verdict, the payloads each kept
trace refers to, the size cap, the payloads no kept trace refers to, and (dry run) what the other steps would do.

Only the run's temporary tables are written; the snapshot is one read transaction.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from typing import Any, Final

from ...errors import StoreError
from ..reader import INDEX, lines_of_trace
from ._policy import FOR_SIZE, KEEP, PENDING, REMOVED, TRACE_ID, nanoseconds
from ._report import human
from ._run import INSERT_BATCH, Run
from ._segments import busy, segment_files, segment_groups

SCHEMA: Final = """
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
"""The run's temporary tables (spilled to a file, not held in memory)."""

_STATUSES: Final = frozenset({None, "UNSET", "OK", "ERROR"})


def verdicts(run: Run, db: sqlite3.Connection) -> None:
    """Every trace's verdict from the policy, on the snapshot; recent or unreadable rows stay pending."""
    c = run.counts
    run.mark = db.execute("SELECT COALESCE(MAX(rowid), 0) FROM span_lines").fetchone()[0]
    policy = run.policy
    insert = "INSERT OR IGNORE INTO temp.plan(trace_id, updated_ns, age_key, failed, verdict) VALUES (?,?,?,?,?)"
    odd = 0
    batch: list[tuple[Any, ...]] = []
    rows = db.execute("SELECT trace_id, start_ns, updated_ns, status, error_count FROM traces")
    for trace_id, start_ns, updated_ns, status, errors in rows:
        valid = (
            type(trace_id) is str
            and TRACE_ID.match(trace_id) is not None
            and type(updated_ns) is int
            and (start_ns is None or type(start_ns) is int)
            and status in _STATUSES
            and type(errors) is int
        )
        if not valid:
            odd += 1
            if type(trace_id) is str:
                batch.append((trace_id, updated_ns, 0, 1, PENDING))
            continue
        failed = status is None or status == "ERROR" or errors > 0
        age_key = start_ns if start_ns is not None else updated_ns
        verdict = PENDING if updated_ns > run.settled_ns else policy._verdict(trace_id, failed, run.now_ns - age_key)
        batch.append((trace_id, updated_ns, age_key, int(failed), verdict))
        if len(batch) >= INSERT_BATCH:
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
            run.path / INDEX,
        )
    c.payload_bytes_before = db.execute("SELECT COALESCE(SUM(size), 0) FROM payloads").fetchone()[0]


def read_references(run: Run, db: sqlite3.Connection) -> bool:
    """Record which stored payloads each trace not removed by the policy refers to. False when unknown."""
    if not run.sweep or db.execute("SELECT 1 FROM payloads LIMIT 1").fetchone() is None:
        return False
    rows = db.execute(
        "SELECT s.trace_id, s.segment, s.offset, s.length FROM span_lines s "
        "WHERE NOT EXISTS (SELECT 1 FROM temp.plan p WHERE p.trace_id = s.trace_id AND p.verdict >= ?) "
        "ORDER BY s.segment, s.offset",
        (REMOVED,),
    )
    try:
        run.record_references(db, rows, "temp.trefs(trace_id, hash)")
    except StoreError as exc:
        run.counts.warnings.append(f"payloads were not removed: a kept trace's span lines are unreadable ({exc})")
        run.sweep = False
        return False
    db.execute(
        "INSERT INTO temp.refcount(hash, n, size) SELECT t.hash, COUNT(*), p.size "
        "FROM temp.trefs t JOIN payloads p ON p.hash = t.hash GROUP BY t.hash"
    )
    return True


def size_cap(run: Run, db: sqlite3.Connection, references: bool) -> None:
    """Mark kept traces removed, oldest successes first, then oldest failures, until the data fits."""
    cap = run.policy.max_bytes
    if not isinstance(cap, int):
        return
    data = _data_after(run, db, references)
    if data <= cap:
        return
    protect = run.policy.min_keep_failed_age
    young = run.now_ns - nanoseconds(protect) if isinstance(protect, dt.timedelta) else None
    candidates = db.execute(
        "SELECT trace_id, bytes FROM temp.plan WHERE verdict = ? AND NOT (failed AND age_key > ?) "
        "ORDER BY failed, age_key, trace_id",
        (KEEP, young if young is not None else 1 << 62),
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
        "UPDATE temp.plan SET verdict = ? WHERE trace_id IN (SELECT trace_id FROM temp.size_removed)", (FOR_SIZE,)
    )
    if data > cap:
        run.counts.warnings.append(
            f"the data stays above max_bytes ({human(data)} > {human(cap)}): what is left is pending, "
            "or failed traces younger than min_keep_failed_age"
        )


def _data_after(run: Run, db: sqlite3.Connection, references: bool) -> int:
    """Span-line bytes of the traces kept plus the payload bytes they keep."""
    removed = db.execute("SELECT COALESCE(SUM(bytes), 0) FROM temp.plan WHERE verdict >= ?", (REMOVED,))
    lines: int = run.counts.lines_before - removed.fetchone()[0]
    if not references:  # no payload is removed (there is none, or the sweep is off)
        return lines + run.counts.payload_bytes_before
    kept = db.execute("SELECT COALESCE(SUM(size), 0) FROM temp.refcount WHERE n > 0").fetchone()[0]
    return int(lines + kept)


def doom_payloads(run: Run, db: sqlite3.Connection) -> None:
    """The payloads that no trace left in the store refers to, as of the snapshot."""
    if not run.sweep:
        return
    db.execute("INSERT INTO temp.keep(hash) SELECT hash FROM temp.refcount WHERE n > 0")
    db.execute("INSERT INTO temp.doomed(hash, size) SELECT hash, size FROM payloads WHERE hash NOT IN temp.keep")


def predict(run: Run, db: sqlite3.Connection) -> None:
    """Dry run: count what the removal, the sweep and the compaction would do."""
    c = run.counts
    c.payloads_removed, c.payload_bytes_removed = db.execute(
        "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM temp.doomed"
    ).fetchone()
    groups = segment_groups(
        db,
        "WHERE NOT EXISTS (SELECT 1 FROM temp.plan p WHERE p.trace_id = s.trace_id AND p.verdict >= ?)",
        (REMOVED,),
    )
    for rel, full, info in segment_files(run.path):
        rows, kept = groups.get(rel, (0, 0))
        if rows and kept == info.st_size:
            continue
        if busy(run, full, info):
            c.segments_busy += 1
        elif rows == 0:
            c.segments_deleted += 1
            c.segment_bytes_freed += info.st_size
        elif kept < info.st_size:
            c.segments_rewritten += 1
            c.segment_bytes_freed += info.st_size - kept
