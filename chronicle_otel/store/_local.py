"""The embedded local store: ``./.chronicle/`` by default.

Layout::

    .chronicle/
      chronicle-store.json               {"format": "chronicle-store/1"}
      index.sqlite3                      trace index, span-line index and content-addressed payloads
      spans/<yyyy-mm-dd>/<segment>.jsonl one OTLP/JSON ExportTraceServiceRequest per line, one trace per line

Writes are crash safe: span lines are appended (and fsync-ed when ``durable``) before the SQLite
transaction that indexes them commits, so an index row never points at a torn line; a crash leaves
at most unindexed bytes at the end of a segment. SQLite runs in WAL mode, so several processes can
record into one store. Lookup by trace id reads only that trace's lines.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .. import environment_variables as env
from ..errors import StoreError

STORE_FORMAT = "chronicle-store/1"
_FORMAT_FILE = "chronicle-store.json"
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


def default_store_path() -> Path:
    """``$CHRONICLE_HOME``, else ``./.chronicle``."""
    return Path(os.environ.get(env.CHRONICLE_HOME) or ".chronicle")


@dataclass(frozen=True)
class TraceSummary:
    """One recorded trace, as listed by :meth:`LocalStore.list_traces`.

    Attributes:
        trace_id: 32 lowercase hex digits.
        root_name: name of the trace's root span as recorded locally (may be a service span).
        root_boundary: name of the outermost boundary in the trace, if any.
        root_boundary_kind: kind of that boundary.
        start_ns: start of the root span, ns since the epoch (None until the root span is stored).
        end_ns: end of the root span.
        status: ``UNSET``, ``OK`` or ``ERROR`` of the root span (None until it is stored).
        service: ``service.name`` of the process that recorded the root.
        span_count: spans stored for this trace.
        error_count: spans with ERROR status.
    """

    trace_id: str
    root_name: str | None
    root_boundary: str | None
    root_boundary_kind: str | None
    start_ns: int | None
    end_ns: int | None
    status: str | None
    service: str | None
    span_count: int
    error_count: int

    @property
    def duration_ns(self) -> int | None:
        """``end_ns - start_ns`` when both are known."""
        if self.start_ns is None or self.end_ns is None:
            return None
        return self.end_ns - self.start_ns

    @property
    def failed(self) -> bool:
        """True when the root span ended with ERROR status."""
        return self.status == "ERROR"


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


class LocalStore:
    """The embedded store of spans (OTLP/JSON lines) and full payloads (content addressed).

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
        self.path = Path(path) if path is not None else default_store_path()
        self.durable = durable
        self._lock = threading.RLock()
        self._db: sqlite3.Connection | None = None
        self._segment: Any = None
        self._segment_rel = ""
        self._segment_size = 0
        self._segment_pid = 0

    def __repr__(self) -> str:
        return f"LocalStore({str(self.path)!r})"

    # ------------------------------------------------------------------------------------ setup

    def _connect(self, create: bool) -> sqlite3.Connection | None:
        if self._db is not None:
            return self._db
        fmt = self.path / _FORMAT_FILE
        if not fmt.exists():
            if not create:
                return None
            self.path.mkdir(parents=True, exist_ok=True)
            tmp = self.path / f".{_FORMAT_FILE}.{os.getpid()}.tmp"
            tmp.write_text(json.dumps({"format": STORE_FORMAT}) + "\n", encoding="utf-8")
            os.replace(tmp, fmt)
        else:
            self._check_format(fmt)
        db = sqlite3.connect(self.path / "index.sqlite3", timeout=30, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={'FULL' if self.durable else 'NORMAL'}")
            db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            db.close()
            raise StoreError(f"unreadable store index ({exc})", self.path / "index.sqlite3") from None
        self._db = db
        return db

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """Reads of an index that was damaged or tampered with raise :class:`StoreError`."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"unreadable store index ({exc})", self.path / "index.sqlite3") from None

    def _check_format(self, fmt: Path) -> None:
        try:
            found = json.loads(fmt.read_text(encoding="utf-8")).get("format")
        except (OSError, ValueError, AttributeError) as exc:
            raise StoreError(f"unreadable store manifest ({exc})", fmt) from None
        if found != STORE_FORMAT:
            if isinstance(found, str) and found.startswith("chronicle-store/"):
                raise StoreError(
                    f"store format {found} is newer than this chronicle-otel understands ({STORE_FORMAT}); "
                    "upgrade chronicle-otel",
                    fmt,
                )
            raise StoreError(f"not a chronicle store (format {found!r})", fmt)

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
            if self._db is not None:
                self._db.close()
                self._db = None

    # ------------------------------------------------------------------------------------ reads

    def get_payload(self, digest: str) -> bytes | None:
        """The whole payload stored under ``digest``, or None."""
        with self._lock, self._reading():
            db = self._connect(create=False)
            if db is None:
                return None
            row = db.execute("SELECT data FROM payloads WHERE hash=?", (digest,)).fetchone()
        return bytes(row[0]) if row and isinstance(row[0], bytes) else None

    def list_traces(self, *, limit: int | None = None, failed: bool | None = None) -> list[TraceSummary]:
        """Recorded traces, most recent first.

        Args:
            limit: at most this many.
            failed: True for traces whose root span failed only, False for the others.
        """
        query = (
            "SELECT trace_id, root_name, root_boundary, root_boundary_kind, start_ns, end_ns, status, service, "
            "span_count, error_count FROM traces"
        )
        if failed is True:
            query += " WHERE status = 'ERROR'"
        elif failed is False:
            query += " WHERE status IS NOT 'ERROR'"
        query += " ORDER BY COALESCE(start_ns, updated_ns) DESC, trace_id"
        params: tuple[int, ...] = ()
        if limit is not None:
            query += " LIMIT ?"
            params = (limit,)
        with self._lock, self._reading():
            db = self._connect(create=False)
            if db is None:
                return []
            rows = db.execute(query, params).fetchall()
        return [TraceSummary(*row) for row in rows]

    def trace_summary(self, trace_id: str) -> TraceSummary | None:
        """The summary of one trace, or None when it is not in the store."""
        with self._lock, self._reading():
            db = self._connect(create=False)
            if db is None:
                return None
            row = db.execute(
                "SELECT trace_id, root_name, root_boundary, root_boundary_kind, start_ns, end_ns, status, service, "
                "span_count, error_count FROM traces WHERE trace_id=?",
                (trace_id.lower(),),
            ).fetchone()
        return TraceSummary(*row) if row else None

    def iter_lines(self, trace_id: str) -> Iterator[bytes]:
        """The raw OTLP/JSON lines holding spans of ``trace_id``, in write order.

        Raises:
            StoreError: the index or a segment is damaged (missing, truncated, pointing outside the store).
        """
        for _, _, line in self._located_lines(trace_id):
            yield line

    def _located_lines(self, trace_id: str) -> Iterator[tuple[Path, int, bytes]]:
        with self._lock, self._reading():
            db = self._connect(create=False)
            if db is None:
                return
            rows = db.execute(
                "SELECT segment, offset, length FROM span_lines WHERE trace_id=? ORDER BY rowid", (trace_id.lower(),)
            ).fetchall()
            if self._segment is not None:
                self._segment.flush()
        handles: dict[str, Any] = {}
        try:
            for segment, offset, length in rows:
                full = self._segment_path(segment)
                if not (isinstance(offset, int) and isinstance(length, int) and offset >= 0 and length >= 0):
                    raise StoreError(f"index row with offset {offset!r} and length {length!r}", full)
                fh = handles.get(segment)
                if fh is None:
                    try:
                        fh = handles[segment] = open(full, "rb")  # noqa: SIM115
                    except OSError as exc:
                        raise StoreError(f"span segment missing ({exc.strerror})", full) from None
                fh.seek(offset)
                line = fh.read(length)
                if len(line) != length:
                    raise StoreError(f"span segment truncated at byte {offset}", full)
                yield full, offset, line
        finally:
            for fh in handles.values():
                fh.close()

    def _segment_path(self, segment: object) -> Path:
        """The segment file an index row names: always a file under ``spans/`` of this store."""
        rel = Path(segment) if isinstance(segment, str) else None
        if rel is None or rel.is_absolute() or ".." in rel.parts or rel.parts[:1] != ("spans",):
            raise StoreError(f"index row names a segment outside the store: {str(segment)[:200]!r}", self.path)
        return self.path / rel

    def read_requests(self, trace_id: str) -> list[dict[str, Any]]:
        """The ``ExportTraceServiceRequest`` documents holding spans of ``trace_id``.

        Raises:
            StoreError: a line is not a JSON object, or the index or a segment is damaged.
        """
        requests = []
        for path, offset, line in self._located_lines(trace_id):
            try:
                request = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise StoreError(f"the line at byte {offset} is not JSON ({exc})", path) from None
            if not isinstance(request, dict):
                raise StoreError(f"the line at byte {offset} is not a JSON object", path)
            requests.append(request)
        return requests

    def read_spans(self, trace_id: str) -> list[dict[str, Any]]:
        """The OTLP/JSON spans of ``trace_id``, in the order they were exported.

        Raises:
            StoreError: a line is not an OTLP/JSON request, or the index or a segment is damaged.
        """
        spans = []
        for request in self.read_requests(trace_id):
            for rs in _objects(request.get("resourceSpans"), self.path):
                for ss in _objects(rs.get("scopeSpans"), self.path):
                    spans.extend(_objects(ss.get("spans"), self.path))
        return spans


def _objects(value: Any, path: Path) -> list[dict[str, Any]]:
    """A list of JSON objects from a stored request (None counts as an empty one)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise StoreError("a stored line is not an OTLP/JSON request", path)
    return value


def payload_digest(data: bytes) -> str:
    """The store address of ``data``: ``sha256:<hex>``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()
