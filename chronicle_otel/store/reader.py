"""Reading the embedded local store (``./.chronicle/`` by default) without ever writing to it.

Layout::

    .chronicle/
      chronicle-store.json               {"format": "chronicle-store/1"}
      index.sqlite3                      trace index, span-line index and content-addressed payloads
      spans/<yyyy-mm-dd>/<segment>.jsonl one OTLP/JSON ExportTraceServiceRequest per line, one trace per line

:class:`StoreReader` lists traces, reads a trace's span lines (only that trace's, through the index) and payloads by
hash. A store directory is untrusted like any trace data: a damaged or tampered index, manifest or segment raises
:class:`~chronicle_otel.errors.StoreError`. The writing side is :class:`~chronicle_otel.store.LocalStore`.

API:
    :class:`StoreReader`, :class:`TraceSummary`, :func:`is_store`, :func:`default_store_path`,
    :data:`STORE_FORMAT`, :data:`MANIFEST`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from .. import environment_variables as env
from ..errors import StoreError

__all__ = ["MANIFEST", "STORE_FORMAT", "StoreReader", "TraceSummary", "default_store_path", "is_store"]

STORE_FORMAT: Final = "chronicle-store/1"
"""Format version written in the manifest; readers refuse newer ones with an "upgrade" message."""

MANIFEST: Final = "chronicle-store.json"
"""The file that makes a directory a chronicle store."""

INDEX: Final = "index.sqlite3"


def default_store_path() -> Path:
    """``$CHRONICLE_HOME``, else ``./.chronicle``."""
    return Path(os.environ.get(env.CHRONICLE_HOME) or ".chronicle")


def is_store(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a directory holding a chronicle store (its manifest exists; nothing is opened)."""
    return (Path(path) / MANIFEST).is_file()


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


class StoreReader:
    """Read access to a local store: traces, span lines and payloads. Never creates or changes anything.

    Args:
        path: the store directory; default :func:`default_store_path`. A directory without a store reads as empty.

    Example::

        store = StoreReader(".chronicle")
        for t in store.list_traces(limit=5):
            print(t.trace_id, t.root_boundary, t.status, t.duration_ns)
        spans = store.read_spans(t.trace_id)
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_store_path()
        self._lock = threading.RLock()
        self._db: sqlite3.Connection | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    def _connect(self, create: bool) -> sqlite3.Connection | None:
        """The index connection; None when there is no store yet (``create`` is for the writing side)."""
        if self._db is not None:
            return self._db
        manifest = self.path / MANIFEST
        if not manifest.exists():
            if not create:
                return None
            self._create()
        else:
            self._check_format(manifest)
        db = sqlite3.connect(self.path / INDEX, timeout=30, check_same_thread=False, isolation_level=None)
        try:
            self._prepare(db)
        except sqlite3.DatabaseError as exc:
            db.close()
            raise StoreError(f"unreadable store index ({exc})", self.path / INDEX) from None
        self._db = db
        return db

    def _create(self) -> None:
        raise StoreError("there is no store here to read", self.path)

    def _prepare(self, db: sqlite3.Connection) -> None:
        db.execute("PRAGMA query_only=ON")

    def _before_read(self) -> None:
        """Called before span lines are read (the writing side flushes its open segment)."""

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """Reads of an index that was damaged or tampered with raise :class:`StoreError`."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"unreadable store index ({exc})", self.path / INDEX) from None

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

    def close(self) -> None:
        """Close the index; the next read reopens it."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

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
            self._before_read()
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
