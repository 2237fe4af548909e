"""Reading the embedded local store (``./.chronicle/`` by default) without ever writing to it.

Layout::

    .chronicle/
      chronicle-store.json               {"format": "chronicle-store/2"}
      index.sqlite3                      trace index, span-line index and content-addressed payloads
      spans/<yyyy-mm-dd>/<segment>.jsonl one OTLP/JSON ExportTraceServiceRequest per line, one trace per line

:class:`StoreReader` lists traces, reads a trace's span lines (only that trace's, through the index) and payloads by
hash. A replay recorded into the store (``replay(trace, isolate=False)``) is indexed with the trace id it reran
(:attr:`TraceSummary.replay_of`) and kept apart from production runs: listed only when asked for, never ``latest``;
an index written before that distinction lists every trace as a production run.

A store directory is untrusted like any trace data: a damaged or tampered index, manifest or segment raises
:class:`~chronicle_otel.errors.StoreError`, in bounded time and memory:

- the manifest is read only when it is a regular file of at most :data:`MAX_MANIFEST_BYTES`;
- ``traces``, ``span_lines`` and ``payloads`` must be plain tables, and a query that runs longer than
  :attr:`StoreReader.query_timeout` seconds is interrupted;
- every listed row is checked (a 32-hex-digit trace id, integers where integers belong, known statuses): a store
  holding one bad row lists nothing and names the row, rather than handing it on;
- span lines are read only from regular files under ``spans/`` (no symbolic links, devices or pipes), within the
  file's size, at most :data:`MAX_LINE_BYTES` per line and :data:`MAX_TRACE_BYTES` per trace (counted over every row
  listed); a line that several rows list is read once, and lines are parsed one at a time
  (:meth:`StoreReader.iter_requests`).

The writing side is :class:`~chronicle_otel.store.LocalStore`.

API:
    :class:`StoreReader`, :class:`TraceSummary`, :func:`is_store`, :func:`default_store_path`,
    :data:`STORE_FORMAT`, :data:`MANIFEST`, :data:`MAX_MANIFEST_BYTES`, :data:`MAX_LINE_BYTES`, :data:`MAX_TRACE_BYTES`.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

import orjson

from .. import environment_variables as env
from .._api import publish
from ..errors import StoreError
from ._compression import inflate

__all__ = [
    "MANIFEST",
    "MAX_LINE_BYTES",
    "MAX_MANIFEST_BYTES",
    "MAX_TRACE_BYTES",
    "STORE_FORMAT",
    "StoreReader",
    "TraceSummary",
    "default_store_path",
    "is_store",
]

STORE_FORMAT: Final = "chronicle-store/2"
"""Format version written in the manifest of a new store; readers refuse newer ones with an "upgrade" message.

``chronicle-store/2`` finds a trace's span lines through the ``ref`` number of its ``traces`` row, given in the order
traces arrive, instead of an index by trace id: a trace's lines go in at the end of that index, not at a random
place of it, which kept the cost of indexing a span flat as the store grows (about half at 300,000 traces). A store
of ``chronicle-store/1`` is read and written in its own layout."""

_READABLE_FORMATS: Final = frozenset({"chronicle-store/1", STORE_FORMAT})

_MAX_PAYLOAD_BYTES: Final = 256 << 20  # a payload inflates to at most the codec's MAX_DECODE_BYTES

MANIFEST: Final = "chronicle-store.json"
"""The file that makes a directory a chronicle store."""

INDEX: Final = "index.sqlite3"

MAX_MANIFEST_BYTES: Final = 4096
"""Largest manifest read; a larger one is refused as not a store's."""

MAX_LINE_BYTES: Final = 256 << 20
"""Largest span line read from a segment (the writer writes one line per trace and export batch)."""

MAX_TRACE_BYTES: Final = 256 << 20
"""Most bytes of span lines read for one trace, all segments together."""

INDEX_ERRORS: Final = (sqlite3.DatabaseError, UnicodeDecodeError)
"""What a query of an index may raise when the index is damaged or tampered with: SQLite's errors, and
``UnicodeDecodeError`` when SQLite's message quotes bytes of the index that are not UTF-8 (``near "\\xff": syntax
error`` of a schema whose text is not UTF-8: Python decodes the message strictly). A text value that is not UTF-8 is
an ``OperationalError`` already."""

_MAX_MESSAGE: Final = 500  # characters of SQLite's message kept in a StoreError: it may quote the index at length

_TABLES: Final = ("traces", "span_lines", "payloads")
_PAYLOAD_BATCH: Final = 500  # digests per query: within SQLite's bound on the parameters of one statement
_TRACE_ID = re.compile(r"[0-9a-f]{32}\Z")
_HEX_PREFIX = re.compile(r"[0-9a-f]{1,32}\Z")
_FORMAT = re.compile(r"chronicle-store/[0-9]{1,6}\Z")
_STATUSES: Final = frozenset({"UNSET", "OK", "ERROR"})
_INT64_MAX: Final = (1 << 63) - 1
_PROGRESS_STEPS: Final = 10_000  # SQLite VM instructions between two looks at the clock
_SUMMARY_COLUMNS: Final = (
    "trace_id, root_name, root_boundary, root_boundary_kind, start_ns, end_ns, status, service, span_count, error_count"
)
_REPLAY_COLUMN: Final = "replay_of"  # an index written by an earlier version lacks it


def default_store_path() -> Path:
    """``$CHRONICLE_HOME``, else ``./.chronicle``."""
    return Path(os.environ.get(env.CHRONICLE_HOME) or ".chronicle")


def is_store(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a directory holding a chronicle store (its manifest exists; nothing is opened).

    A manifest that is not a regular file counts: opening the store then says what is wrong with it.
    """
    return os.path.lexists(Path(path) / MANIFEST)


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
        replay_of: for a replay (a run of :func:`~chronicle_otel.replay` recorded into this store), the trace id of
            the recorded run it reran (``chronicle.replay.of`` on its spans); None for a production run.
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
    replay_of: str | None = None

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


_Reader = TypeVar("_Reader", bound="StoreReader")


class StoreReader:
    """Read access to a local store: traces, span lines and payloads. Never creates or changes anything.

    A store the process may not write (read-only media, another user's directory) is read too: its index, closed by
    its last writer, is opened as an immutable file.

    Args:
        path: the store directory; default :func:`default_store_path`. A directory without a store reads as empty.

    Example::

        store = StoreReader(".chronicle")
        for t in store.list_traces(limit=5):
            print(t.trace_id, t.root_boundary, t.status, t.duration_ns)
        spans = store.read_spans(t.trace_id)
    """

    _writes: bool = False
    """True for the writing side (the writer, retention): an index with triggers is refused."""

    query_timeout: float = 60.0
    """Seconds one read of the index may take before it is interrupted with a :class:`StoreError`."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_store_path()
        self._lock = threading.RLock()
        self._db: sqlite3.Connection | None = None
        self._deadline: float | None = None
        self._format = STORE_FORMAT  # the manifest's, once read

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    def _connect(self, create: bool) -> sqlite3.Connection | None:
        """The index connection; None when there is no store yet (``create`` is for the writing side)."""
        if self._db is not None:
            return self._db
        manifest = self.path / MANIFEST
        if not os.path.lexists(manifest):
            if not create:
                return None
            self._create()  # the first writer's manifest wins: read back below
        self._format = self._check_format(manifest)
        index = self.path / INDEX
        try:
            db, tables = self._open_index(index)
        except (sqlite3.Error, UnicodeDecodeError) as exc:  # a directory where the index should be, no permission
            if self._writes or not _read_only_and_settled(self.path):
                raise StoreError(f"unreadable store index ({index_error_text(exc)})", index) from None
            # A store on read-only media (an archive, a CI artifact, a read-only volume, another user's store): SQLite
            # cannot make the shared-memory file of its write-ahead log beside it, but no writer can be at work
            # there either, and there is no log to miss, so the index is read as an immutable file.
            try:
                db, tables = self._open_index(f"{index.absolute().as_uri()}?mode=ro&immutable=1")
            except (sqlite3.Error, UnicodeDecodeError) as again:
                raise StoreError(f"unreadable store index ({index_error_text(again)})", index) from None
        if tables == 0 and not create:  # a writer is creating the store right now: nothing to read yet
            db.close()
            return None
        self._db = db
        return db

    def _open_index(self, target: Path | str) -> tuple[sqlite3.Connection, int]:
        """The index at ``target`` (its path, or a ``file:`` URI), opened and checked.

        Returns:
            The connection, and how many of the store's tables the index holds.

        Raises:
            sqlite3.Error, UnicodeDecodeError: it cannot be opened or read (closed again; see :data:`INDEX_ERRORS`).
            StoreError: it holds what chronicle never writes (see :meth:`_check_tables`).
        """
        uri = isinstance(target, str)
        db = sqlite3.connect(target, uri=uri, timeout=30, check_same_thread=False, isolation_level=None)
        try:
            self._prepare(db)
            db.set_progress_handler(self._past_deadline, _PROGRESS_STEPS)
            return db, self._check_tables(db)
        except BaseException:
            db.close()
            raise

    def _past_deadline(self) -> int:
        """SQLite's progress handler: non-zero interrupts the running statement."""
        deadline = self._deadline
        return 1 if deadline is not None and time.monotonic() > deadline else 0

    def _check_tables(self, db: sqlite3.Connection) -> int:
        """Refuse an index whose tables were replaced by views or virtual tables (queries on them may never end).

        Returns how many of the store's tables exist (0 while a writer creates the store).
        """
        marks = ",".join("?" * len(_TABLES))
        rows = db.execute(
            f"SELECT name, type, sql FROM sqlite_master WHERE name IN ({marks}) COLLATE NOCASE", _TABLES
        ).fetchall()
        for name, kind, sql in rows:
            if kind != "table" or not (isinstance(sql, str) and sql.lstrip()[:12].upper() == "CREATE TABLE"):
                raise StoreError(f"{_excerpt(name)} in the index is a {_excerpt(kind)}, not a table", self.path / INDEX)
        if self._writes:  # chronicle creates no trigger: one would run inside every write (and could delete rows)
            trigger = db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' LIMIT 1").fetchone()
            if trigger is not None:
                raise StoreError(
                    f"the index holds trigger {_excerpt(trigger[0])}, which chronicle never creates: it was changed by "
                    "something else; nothing is written to it",
                    self.path / INDEX,
                )
        return len(rows)

    def _create(self) -> None:
        raise StoreError("there is no store here to read", self.path)

    def _prepare(self, db: sqlite3.Connection) -> None:
        db.execute("PRAGMA query_only=ON")

    def _before_read(self) -> None:
        """Called before span lines are read (the writing side flushes its open segment)."""

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """Reads of an index that was damaged or tampered with raise :class:`StoreError`; each ends in time."""
        outer = self._deadline
        if outer is None:
            self._deadline = time.monotonic() + self.query_timeout
        try:
            yield
        except INDEX_ERRORS as exc:
            if self._deadline is not None and time.monotonic() > self._deadline:
                raise StoreError(
                    f"reading the store index took too long (more than {self.query_timeout:g} s); "
                    "a damaged or tampered index?",
                    self.path / INDEX,
                ) from None
            raise StoreError(f"unreadable store index ({index_error_text(exc)})", self.path / INDEX) from None
        finally:
            self._deadline = outer

    def _check_format(self, fmt: Path) -> str:
        try:
            fd = os.open(fmt, os.O_RDONLY | _O_NONBLOCK | _O_BINARY)
        except OSError as exc:
            raise StoreError(f"unreadable store manifest ({exc.strerror})", fmt) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise StoreError("the store manifest is not a regular file", fmt)
            if info.st_size > MAX_MANIFEST_BYTES:
                raise StoreError(f"the store manifest is larger than {MAX_MANIFEST_BYTES} bytes", fmt)
            raw = os.read(fd, MAX_MANIFEST_BYTES + 1)
        except OSError as exc:
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"unreadable store manifest ({exc.strerror})", fmt) from None
        finally:
            os.close(fd)
        if len(raw) > MAX_MANIFEST_BYTES:
            raise StoreError(f"the store manifest is larger than {MAX_MANIFEST_BYTES} bytes", fmt)
        try:
            document = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise StoreError(f"unreadable store manifest ({exc})", fmt) from None
        found = document.get("format") if isinstance(document, dict) else None
        if not isinstance(found, str) or found not in _READABLE_FORMATS:
            if isinstance(found, str) and _FORMAT.match(found):
                raise StoreError(
                    f"store format {found} is newer than this chronicle-otel understands ({STORE_FORMAT}); "
                    "upgrade chronicle-otel",
                    fmt,
                )
            raise StoreError(f"not a chronicle store (format {_excerpt(found)})", fmt)
        return str(found)

    def close(self) -> None:
        """Close the index; the next read reopens it."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def __enter__(self: _Reader) -> _Reader:
        """``with StoreReader(path) as reader:`` closes the index at the end of the block."""
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get_payload(self, digest: str) -> bytes | None:
        """The whole payload stored under ``digest``, or None."""
        with self._lock, self._reading():
            db = self._connect(create=False)
            if db is None:
                return None
            row = db.execute("SELECT data FROM payloads WHERE hash=?", (digest,)).fetchone()
        if not (row and isinstance(row[0], bytes)):
            return None
        return inflate(bytes(row[0]), self.path, self.path / INDEX, 0, _MAX_PAYLOAD_BYTES)

    def get_payloads(self, digests: Sequence[str]) -> dict[str, bytes]:
        """The payloads of ``digests`` that the store holds, by digest.

        One query per 500 digests, not one per payload: loading a trace whose payloads were cut on its spans asks
        for all of them at once.
        """
        wanted = list(dict.fromkeys(d for d in digests if isinstance(d, str)))
        found: dict[str, bytes] = {}
        if not wanted:
            return found
        with self._lock, self._reading():
            db = self._connect(create=False)
            if db is None:
                return found
            for start in range(0, len(wanted), _PAYLOAD_BATCH):
                batch = wanted[start : start + _PAYLOAD_BATCH]
                marks = ",".join("?" * len(batch))
                rows = db.execute(f"SELECT hash, data FROM payloads WHERE hash IN ({marks})", batch).fetchall()
                for digest, data in rows:
                    if isinstance(digest, str) and isinstance(data, bytes):
                        found[digest] = inflate(data, self.path, self.path / INDEX, 0, _MAX_PAYLOAD_BYTES)
        return found

    def has_payload(self, digest: str) -> bool:
        """True when the store holds the payload ``digest``."""
        with self._lock, self._reading():
            db = self._connect(create=False)
            if db is None:
                return False
            row = db.execute("SELECT 1 FROM payloads WHERE hash=?", (digest,)).fetchone()
        return row is not None

    def list_traces(
        self,
        *,
        limit: int | None = None,
        failed: bool | None = None,
        errors: bool | None = None,
        include_replays: bool = False,
        root: str | None = None,
        since_ns: int | None = None,
        id_prefix: str | None = None,
        replay_of: str | None = None,
    ) -> list[TraceSummary]:
        """Recorded traces, most recent first; production runs only unless ``include_replays``.

        Every filter is answered by the index (no span line is read).

        Args:
            limit: at most this many.
            failed: True for traces whose root span failed (the run failed) only, False for the others.
            errors: True for traces with an error: any span that ended with ERROR status, the root's or another's (a
                tool call that raised inside a run that recovered counts); False for the others.
            include_replays: also list replays recorded into this store (:attr:`TraceSummary.replay_of` set).
            root: only traces whose root boundary (or root span) name matches this glob (``support_*``; case
                sensitive; a name without ``*``, ``?`` or ``[`` matches itself only).
            since_ns: only traces that started (or, still running, were last written) at or after this time, in ns
                since the epoch.
            id_prefix: only trace ids starting with these lowercase hex digits.
            replay_of: only the replays of this trace id (implies ``include_replays``).
        """
        conditions = []
        params: list[object] = []
        if failed is True:
            conditions.append("status = 'ERROR'")
        elif failed is False:
            conditions.append("status IS NOT 'ERROR'")
        if errors is True:
            conditions.append("(status = 'ERROR' OR error_count > 0)")
        elif errors is False:
            conditions.append("(status IS NOT 'ERROR' AND error_count = 0)")
        if root is not None:
            conditions.append("(root_boundary GLOB ? OR (root_boundary IS NULL AND root_name GLOB ?))")
            params += [root, root]
        if since_ns is not None:
            conditions.append("COALESCE(start_ns, updated_ns) >= ?")
            params.append(since_ns)
        if id_prefix is not None:
            if not _HEX_PREFIX.match(id_prefix):
                return []
            conditions.append("trace_id >= ? AND trace_id < ?")  # a range of the primary key: the index answers
            params += [id_prefix, id_prefix + "g"]
        with self._lock, self._reading():
            db = self._connect(create=False)
            if db is None:
                return []
            replays = _has_replay_column(db)  # an index of an earlier version holds production runs only
            if replay_of is not None:
                if not replays:
                    return []
                conditions.append(f"{_REPLAY_COLUMN} = ?")
                params.append(replay_of.lower())
            elif replays and not include_replays:
                conditions.append(f"{_REPLAY_COLUMN} IS NULL")
            query = f"SELECT {_summary_columns(replays)} FROM traces"
            if conditions:
                query += " WHERE " + " AND ".join(conditions)
            query += " ORDER BY COALESCE(start_ns, updated_ns) DESC, trace_id"
            if limit is not None:
                query += " LIMIT ?"
                params.append(limit)
            rows = db.execute(query, params).fetchall()
        return [self._summary(row) for row in rows]

    def trace_summary(self, trace_id: str) -> TraceSummary | None:
        """The summary of one trace (a replay too), or None when it is not in the store."""
        with self._lock, self._reading():
            db = self._connect(create=False)
            if db is None:
                return None
            columns = _summary_columns(_has_replay_column(db))
            row = db.execute(f"SELECT {columns} FROM traces WHERE trace_id=?", (_key(trace_id),)).fetchone()
        return self._summary(row) if row else None

    def _summary(self, row: tuple[Any, ...]) -> TraceSummary:
        """A :class:`TraceSummary` from an index row, every field checked (the index is untrusted)."""
        tid, name, boundary, kind, start, end, status, service, spans, errors, replay_of = row
        if (  # the common case in one expression; the checks below name what is wrong
            type(tid) is str
            and _TRACE_ID.match(tid)
            and (name is None or type(name) is str)
            and (boundary is None or type(boundary) is str)
            and (kind is None or type(kind) is str)
            and (service is None or type(service) is str)
            and (status is None or status in _STATUSES)
            and (start is None or (type(start) is int and start >= 0))
            and (end is None or (type(end) is int and end >= 0))
            and type(spans) is int
            and spans >= 0
            and type(errors) is int
            and errors >= 0
            and (replay_of is None or type(replay_of) is str)
        ):
            return TraceSummary(tid, name, boundary, kind, start, end, status, service, spans, errors, replay_of)
        where = self.path / INDEX
        trace_id = row[0]
        if not (isinstance(trace_id, str) and _TRACE_ID.match(trace_id)):
            raise StoreError(f"a traces row has the trace id {_excerpt(trace_id)}, not 32 lowercase hex digits", where)
        texts = (
            ("root_name", row[1]),
            ("root_boundary", row[2]),
            ("root_boundary_kind", row[3]),
            ("service", row[7]),
            ("replay_of", row[10]),
        )
        for name, value in texts:
            if value is not None and not isinstance(value, str):
                raise StoreError(f"trace {trace_id}: {name} is {_excerpt(value)}, not text", where)
        if row[6] is not None and row[6] not in _STATUSES:
            raise StoreError(f"trace {trace_id}: status is {_excerpt(row[6])}, not UNSET, OK or ERROR", where)
        for name, value, nullable in (
            ("start_ns", row[4], True),
            ("end_ns", row[5], True),
            ("span_count", row[8], False),
            ("error_count", row[9], False),
        ):
            if value is None and nullable:
                continue
            if not (type(value) is int and 0 <= value <= _INT64_MAX):
                raise StoreError(f"trace {trace_id}: {name} is {_excerpt(value)}, not a count or time in ns", where)
        raise StoreError(f"trace {trace_id}: a row of unexpected values", where)  # not reached: a check above fails

    def iter_lines(self, trace_id: str) -> Iterator[bytes]:
        """The raw OTLP/JSON lines holding spans of ``trace_id``, in write order (a line the index lists twice, once).

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
                f"SELECT segment, offset, length FROM span_lines WHERE {lines_of_trace(db)} ORDER BY rowid",
                {"trace_id": _key(trace_id)},
            ).fetchall()
            self._before_read()
        total = 0
        for segment, offset, length in rows:  # every row is checked before anything is read
            full = self._segment_path(segment)
            if not (type(offset) is int and type(length) is int and offset >= 0 and length >= 0):
                raise StoreError(f"index row with offset {_excerpt(offset)} and length {_excerpt(length)}", full)
            if length > MAX_LINE_BYTES:
                raise StoreError(
                    f"index row with a line of {length} bytes at byte {offset}, more than {MAX_LINE_BYTES}", full
                )
            total += length
        if total > MAX_TRACE_BYTES:
            raise StoreError(
                f"the index lists {total} bytes of span lines for trace {_excerpt(trace_id)}, "
                f"more than {MAX_TRACE_BYTES}",
                self.path / INDEX,
            )
        handles: dict[str, tuple[Any, int]] = {}
        seen: set[tuple[Any, ...]] = set()
        try:
            for row in rows:
                if row in seen:
                    continue  # the writer indexes a line once: a row listing it again (a tampered index) adds nothing
                seen.add(row)
                segment, offset, length = row
                full = self._segment_path(segment)
                opened = handles.get(segment)
                if opened is None:
                    opened = handles[segment] = self._open_segment_file(full)
                fh, size = opened
                if offset + length > size:
                    raise StoreError(f"span segment truncated: {size} bytes, the index reads {offset}+{length}", full)
                try:
                    fh.seek(offset)
                    line = fh.read(length)
                except OSError as exc:
                    raise StoreError(f"unreadable span segment ({exc.strerror})", full) from None
                if len(line) != length:
                    raise StoreError(f"span segment truncated at byte {offset}", full)
                yield full, offset, inflate(line, self.path, full, offset, MAX_LINE_BYTES)
        finally:
            for fh, _ in handles.values():
                fh.close()

    def _open_segment_file(self, full: Path) -> tuple[Any, int]:
        """An open segment and its size: a regular file under ``spans/``, reached without symbolic links."""
        try:
            resolved = full.resolve()
            inside = resolved.is_relative_to(self.path.resolve() / "spans")
        except (OSError, RuntimeError, ValueError) as exc:
            raise StoreError(f"span segment cannot be located ({exc})", full) from None
        if not inside or os.path.islink(full):
            raise StoreError("span segment is a symbolic link or leads outside the store's spans/", full)
        try:
            fd = os.open(full, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_BINARY)
        except OSError as exc:
            raise StoreError(f"span segment missing ({exc.strerror})", full) from None
        try:
            info = os.fstat(fd)
        except OSError:
            os.close(fd)
            raise
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise StoreError("span segment is not a regular file", full)
        return open(fd, "rb"), info.st_size  # closed by the caller

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
        return list(self.iter_requests(trace_id))

    def iter_requests(self, trace_id: str) -> Iterator[dict[str, Any]]:
        """The ``ExportTraceServiceRequest`` documents holding spans of ``trace_id``, parsed one at a time.

        Each line is parsed when the next document is asked for, so a reader that keeps only what it needs of each
        (loading merges the copies of a span as it reads) holds one document at a time, not all of them.

        Raises:
            StoreError: a line is not a JSON object, or the index or a segment is damaged.
        """
        for path, offset, line in self._located_lines(trace_id):
            try:
                request = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise StoreError(f"the line at byte {offset} is not JSON ({exc})", path) from None
            if not isinstance(request, dict):
                raise StoreError(f"the line at byte {offset} is not a JSON object", path)
            yield request

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


_O_NOFOLLOW: Final[int] = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK: Final[int] = getattr(os, "O_NONBLOCK", 0)  # opening a named pipe must not wait for a writer
_O_BINARY: Final[int] = getattr(os, "O_BINARY", 0)


def _read_only_and_settled(path: Path) -> bool:
    """True when this process may not write the store directory or its index, and the index has no log beside it.

    No write-ahead log: the last writer closed the index, and nothing is being written there.
    """
    index = path / INDEX
    if os.path.lexists(path / f"{INDEX}-wal") or not os.path.isfile(index):
        return False
    return not (os.access(path, os.W_OK) and os.access(index, os.W_OK))


def _has_replay_column(db: sqlite3.Connection) -> bool:
    """True when the index's ``traces`` table has the ``replay_of`` column (an earlier version's index has not)."""
    row = db.execute("SELECT 1 FROM pragma_table_info('traces') WHERE name = ?", (_REPLAY_COLUMN,)).fetchone()
    return row is not None


_LINES_BY_ID: Final = "trace_id = {trace}"
# The lines of the trace's row (its ref), that are the trace's (a tampered ref never hands over another trace's
# lines), and lines without a ref (written by a version older than the layout, which an old and a new version
# creating one store at the same moment can lead to): both through span_lines_by_ref.
_LINES_BY_REF: Final = (
    "(trace_ref = (SELECT t.ref FROM traces AS t WHERE t.trace_id = {trace}) OR trace_ref IS NULL)"
    " AND trace_id = {trace}"
)


def _key(trace_id: object) -> str:
    """``trace_id`` as the index holds trace ids (lowercase).

    Raises:
        TypeError: it is not a string.
    """
    if not isinstance(trace_id, str):
        raise TypeError(f"a trace id is a str of 32 hex digits, not {type(trace_id).__name__}")
    return trace_id.lower()


def lines_by_ref(db: sqlite3.Connection) -> bool:
    """True when the index finds a trace's span lines by its ``traces`` row's ``ref`` (``chronicle-store/2``).

    False for an index that finds them by trace id (``chronicle-store/1``).
    """
    row = db.execute("SELECT 1 FROM pragma_table_info('span_lines') WHERE name = 'trace_ref'").fetchone()
    return row is not None


def lines_of_trace(db: sqlite3.Connection, trace: str = ":trace_id") -> str:
    """The condition on ``span_lines`` rows that selects the lines of the trace id ``trace``.

    ``trace`` is SQL: the parameter ``:trace_id`` by default, or an expression such as an outer query's column.
    """
    return (_LINES_BY_REF if lines_by_ref(db) else _LINES_BY_ID).format(trace=trace)


def _summary_columns(replays: bool) -> str:
    """The columns of a :class:`TraceSummary` row; ``replay_of`` reads as NULL from an index without it."""
    return f"{_SUMMARY_COLUMNS}, {_REPLAY_COLUMN if replays else 'NULL'}"


def index_error_text(exc: BaseException) -> str:
    """An error of :data:`INDEX_ERRORS` as text for a message, cut short; bytes that are not UTF-8 escaped."""
    text = bytes(exc.object).decode("utf-8", "backslashreplace") if isinstance(exc, UnicodeDecodeError) else str(exc)
    if not text:  # Python 3.10's sqlite3 drops a message it cannot decode
        text = f"{type(exc).__name__} without a readable message: damaged schema or text that is not UTF-8"
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + "…"


def _excerpt(value: object) -> str:
    """``value`` for a message: its repr, cut short (escape sequences appear escaped)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "…"


def _objects(value: Any, path: Path) -> list[dict[str, Any]]:
    """A list of JSON objects from a stored request (None counts as an empty one)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise StoreError("a stored line is not an OTLP/JSON request", path)
    return value


publish(__name__, globals())
