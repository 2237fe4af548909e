"""The embedded local store's writing side: ``./.chronicle/`` by default (layout: :mod:`chronicle_otel.store.reader`).

Writes are crash safe: span lines are appended (and fsync-ed when ``durable``) before the SQLite
transaction that indexes them commits, so an index row never points at a torn line; a crash leaves
at most unindexed bytes at the end of a segment. SQLite runs in WAL mode, so several processes can
record into one store. Lookup by trace id reads only that trace's lines.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .._internal.digest import payload_digest
from .reader import MANIFEST, STORE_FORMAT, StoreReader

_SEGMENT_MAX_BYTES = 64 * 1024 * 1024

_SCHEMA = """
CREATE TABLE IF NOT EXISTS traces (
    trace_id TEXT PRIMARY KEY,
    root_span_id TEXT,
    root_name TEXT,
    root_boundary TEXT,
    root_boundary_kind TEXT,
    boundary_start_ns INTEGER,
    start_ns INTEGER,
    end_ns INTEGER,
    status TEXT,
    service TEXT,
    span_count INTEGER NOT NULL DEFAULT 0,
    error_count INTEGER NOT NULL DEFAULT 0,
    updated_ns INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS traces_by_start ON traces(start_ns);
CREATE TABLE IF NOT EXISTS span_lines (
    trace_id TEXT NOT NULL,
    segment TEXT NOT NULL,
    offset INTEGER NOT NULL,
    length INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS span_lines_by_trace ON span_lines(trace_id);
CREATE TABLE IF NOT EXISTS payloads (
    hash TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    data BLOB NOT NULL
);
"""

# One statement per trace and batch. In an UPDATE every right-hand side sees the row as it was.
_NEW_ROOT = "excluded.root_span_id IS NOT NULL"
_OUTER = (
    "excluded.boundary_start_ns IS NOT NULL"
    " AND (boundary_start_ns IS NULL OR excluded.boundary_start_ns < boundary_start_ns)"
)
_UPSERT_TRACE = f"""
INSERT INTO traces(trace_id, root_span_id, root_name, start_ns, end_ns, status, root_boundary, root_boundary_kind,
                   boundary_start_ns, service, span_count, error_count, updated_ns)
VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)
ON CONFLICT(trace_id) DO UPDATE SET
    span_count = span_count + excluded.span_count,
    error_count = error_count + excluded.error_count,
    updated_ns = excluded.updated_ns,
    service = COALESCE(service, excluded.service),
    root_span_id = CASE WHEN {_NEW_ROOT} THEN excluded.root_span_id ELSE root_span_id END,
    root_name = CASE WHEN {_NEW_ROOT} THEN excluded.root_name ELSE root_name END,
    start_ns = CASE WHEN {_NEW_ROOT} THEN excluded.start_ns ELSE start_ns END,
    end_ns = CASE WHEN {_NEW_ROOT} THEN excluded.end_ns ELSE end_ns END,
    status = CASE WHEN {_NEW_ROOT} THEN excluded.status ELSE status END,
    root_boundary = CASE WHEN {_OUTER} THEN excluded.root_boundary ELSE root_boundary END,
    root_boundary_kind = CASE WHEN {_OUTER} THEN excluded.root_boundary_kind ELSE root_boundary_kind END,
    boundary_start_ns = CASE WHEN {_OUTER} THEN excluded.boundary_start_ns ELSE boundary_start_ns END
"""


@dataclass
class TraceRecord:
    """What the exporter hands the store for one trace in one export batch (internal)."""

    trace_id: str
    line: bytes
    span_count: int
    error_count: int
    root: dict[str, Any] | None
    outer_boundary: tuple[str, str, int] | None
    service: str | None


class LocalStore(StoreReader):
    """The embedded store of spans (OTLP/JSON lines) and full payloads (content addressed): reads and writes.

    Args:
        path: the store directory; default :func:`default_store_path`. Created on first write.
        durable: fsync span segments and use SQLite ``synchronous=FULL`` so a committed batch
            survives a power loss; ``False`` trades that for speed (a process crash still loses nothing
            that was written).

    Example::

        store = LocalStore(".chronicle")
        for t in store.list_traces(limit=5):
            print(t.trace_id, t.root_boundary, t.status, t.duration_ns)
        spans = store.read_spans(t.trace_id)
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, durable: bool = True) -> None:
        super().__init__(path)
        self.durable = durable
        self._segment: Any = None
        self._segment_rel = ""
        self._segment_size = 0
        self._segment_pid = 0

    # ------------------------------------------------------------------------------------ setup

    def _create(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.path / f".{MANIFEST}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps({"format": STORE_FORMAT}) + "\n", encoding="utf-8")
        os.replace(tmp, self.path / MANIFEST)

    def _prepare(self, db: sqlite3.Connection) -> None:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={'FULL' if self.durable else 'NORMAL'}")
        db.executescript(_SCHEMA)

    def _before_read(self) -> None:
        if self._segment is not None:
            self._segment.flush()

    def _drop_segment(self) -> None:
        if self._segment is not None:
            with contextlib.suppress(OSError):
                self._segment.close()
            self._segment = None

    def _open_segment(self) -> None:
        pid = os.getpid()
        if self._segment is not None and self._segment_pid == pid and self._segment_size < _SEGMENT_MAX_BYTES:
            return
        self._drop_segment()
        day = time.strftime("%Y-%m-%d", time.gmtime())
        name = f"{time.strftime('%H%M%S', time.gmtime())}-{pid}-{os.urandom(4).hex()}.jsonl"
        rel = f"spans/{day}/{name}"
        full = self.path / rel
        full.parent.mkdir(parents=True, exist_ok=True)
        self._segment = open(full, "ab")  # noqa: SIM115 - kept open across batches
        self._segment_rel = rel
        self._segment_size = 0
        self._segment_pid = pid

    # ------------------------------------------------------------------------------------ writes

    def write_batch(self, records: Iterable[TraceRecord], payloads: Iterable[tuple[str, bytes]] = ()) -> None:
        """Append span lines and payloads, then index them in one transaction.

        Raises:
            OSError, sqlite3.Error: the exporter catches and reports them.
        """
        records = list(records)
        with self._lock:
            db = self._connect(create=True)
            assert db is not None
            rows = []
            if records:
                self._open_segment()
                seg = self._segment
                # The real end of file, not tell(): bytes a failed write left behind are skipped, never indexed.
                offset = os.fstat(seg.fileno()).st_size
                chunks = []
                for rec in records:
                    rows.append((rec.trace_id, self._segment_rel, offset, len(rec.line)))
                    chunks.append(rec.line)
                    chunks.append(b"\n")
                    offset += len(rec.line) + 1
                try:
                    seg.write(b"".join(chunks))
                    seg.flush()
                    if self.durable:
                        os.fsync(seg.fileno())
                except BaseException:
                    self._drop_segment()  # the next batch starts a clean segment
                    raise
                self._segment_size = offset
            now = time.time_ns()
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany("INSERT INTO span_lines(trace_id, segment, offset, length) VALUES (?,?,?,?)", rows)
                db.executemany(_UPSERT_TRACE, [self._trace_row(rec, now) for rec in records])
                db.executemany(
                    "INSERT OR IGNORE INTO payloads(hash, size, data) VALUES (?,?,?)",
                    [(h, len(data), data) for h, data in payloads],
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    @staticmethod
    def _trace_row(rec: TraceRecord, now: int) -> tuple[Any, ...]:
        root = rec.root or {}
        name, kind, start = rec.outer_boundary or (None, None, None)
        return (
            rec.trace_id,
            root.get("span_id"),
            root.get("name"),
            root.get("start_ns"),
            root.get("end_ns"),
            root.get("status"),
            name,
            kind,
            start,
            rec.service,
            rec.span_count,
            rec.error_count,
            now,
        )

    def put_payload(self, digest: str, data: bytes) -> None:
        """Store ``data`` under ``digest`` (``sha256:<hex>``); a no-op when it is already there.

        Raises:
            ValueError: ``digest`` is not the sha256 of ``data``.
        """
        if digest != payload_digest(data):
            raise ValueError(f"payload digest mismatch: {digest} is not the sha256 of the {len(data)} bytes given")
        self.write_batch([], [(digest, data)])

    def put_payloads(self, payloads: Iterable[tuple[str, bytes]]) -> None:
        """Store many payloads in one transaction (those already there are kept as they are).

        Raises:
            ValueError: a digest is not the sha256 of its data.
        """
        items = list(payloads)
        for digest, data in items:
            if digest != payload_digest(data):
                raise ValueError(f"payload digest mismatch: {digest[:80]} is not the sha256 of the data given")
        if items:
            self.write_batch([], items)

    def flush(self) -> None:
        """Flush and fsync the open segment."""
        with self._lock:
            if self._segment is not None:
                self._segment.flush()
                os.fsync(self._segment.fileno())

    def close(self) -> None:
        """Close files; the store can be reopened by the next call."""
        with self._lock:
            self._drop_segment()
            super().close()

    # ------------------------------------------------------------------------------------ reads
