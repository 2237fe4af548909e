"""The embedded local store's writing side: ``./.chronicle/`` by default (layout: :mod:`chronicle_otel.store.reader`).

Writes are crash safe: span lines are appended (and fsync-ed when ``durable``) before the SQLite
transaction that indexes them commits, so an index row never points at a torn line; a crash leaves
at most unindexed bytes at the end of a segment. SQLite runs in WAL mode, so several processes can
record into one store. Lookup by trace id reads only that trace's lines.

One batch is written in this order: ``BEGIN IMMEDIATE`` (the index's write lock, waited for up to 30 s; an
index that cannot be written fails here, before any line is appended), append the lines to this process's
segment and fsync them, index them, ``COMMIT``. When a step fails the batch is lost and the store stays as it
was: the transaction is rolled back, the lines of the batch are cut off the segment again (a segment left empty
is removed), and the next batch writes to the same segment. The one exception is a ``COMMIT`` that failed in
a way that may still have committed (an I/O error other than a failed write, such as a failed fsync): its lines
stay in the segment, whole, whether the index ends up pointing at them or not.

Indexing a batch takes one statement per 512 rows (64 with an SQLite older than 3.32), not one per row: the lines
of a batch are written in trace id order, and their ``traces``, ``span_lines`` and ``payloads`` rows go in with
multi-row INSERT statements (a ``chronicle-store/2`` index finds a trace's lines by its row's ``ref``, given in
arrival order, so the lines of new traces go in at the end of that index). The writer checkpoints the WAL every
4,000 pages (a page several batches changed is copied once). The exporter may hand lines in already compressed
(:meth:`LocalStore.encode_lines`); they are appended as they are.

A full volume (ENOSPC, EDQUOT, EFBIG, SQLITE_FULL) fails a batch as a whole only when not even one trace of it
fits: the index's write-ahead log is checkpointed and cut back, then the batch is split, halves, then quarters, down
to one trace with its payloads, and each part is written as above. What fits is stored; the rest is lost and
counted, trace by trace. Below 64 MiB of free space a batch is written in parts of about 1/16 of it, and the log is
checkpointed and cut back after each: the index pages of a part are in the log and, once checkpointed, in the index
file, and a log that cannot be checkpointed for lack of room keeps its room for good.

A store removed while the writer runs (``rm -rf .chronicle``, a cleanup job) is started again at its path: before a
batch the writer checks that the manifest, its index file and the compression dictionary its lines need are there
(re-writing the dictionary's file), and after the ``COMMIT`` that the store and the segment it appended to still are;
a batch whose store went away meanwhile is written once more in the new store, and counted as failed when that one
went too. No trace is listed that cannot be read.

Failures are counted on the store (:attr:`LocalStore.failed_batches`, :attr:`LocalStore.failed_spans`); the
exporter reports them through :meth:`LocalStore.report_write_failure` (a batch stored in part is reported by the
store itself), once per cause, naming it ("disk full", "store is read-only" or the error itself) and the store path,
and once more, with the counts, when writing works again.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from .._api import publish
from .._internal.digest import payload_digest
from .._internal.errors import logger
from ..config.params import STORE_COMPRESS, resolve
from ..errors import StoreError
from ._compression import LineCompressor
from .reader import INDEX, MANIFEST, STORE_FORMAT, StoreReader, _has_replay_column, lines_by_ref, lines_of_trace

try:
    import resource
except ImportError:  # pragma: no cover - Windows has no resource module
    resource = None  # type: ignore[assignment]

_SEGMENT_MAX_BYTES = 64 * 1024 * 1024
_FORMAT_V1: Final = "chronicle-store/1"
_CHECKPOINT_PAGES: Final = 4000  # WAL pages between two automatic checkpoints (the default is 1000)
# Below this much free space on the store's volume, the WAL is checkpointed and cut back to nothing after each batch:
# otherwise a batch's index pages stay in it until the next checkpoint (4,000 pages, 16 MiB, apart) and its file keeps
# the size of the largest batch, room that spans need on a small volume; and a full volume leaves no room to
# checkpoint it then (which grows the index file).
_TIGHT_BELOW: Final = 64 << 20

_SCHEMA_TEMPLATE = """
CREATE TABLE IF NOT EXISTS traces (
    {ref}trace_id TEXT {key},
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
    updated_ns INTEGER NOT NULL,
    replay_of TEXT
);
{by_time}
CREATE TABLE IF NOT EXISTS payloads (
    hash TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS span_lines (
    trace_id TEXT NOT NULL,
    segment TEXT NOT NULL,
    offset INTEGER NOT NULL,
    length INTEGER NOT NULL{trace_ref}
);
"""
# chronicle-store/2: a trace's lines are found by its traces row's ref, a number given in arrival order (an explicit
# INTEGER PRIMARY KEY, which VACUUM keeps): the lines of new traces go in at the end of span_lines_by_ref. The
# traces row is still found by trace id (UNIQUE), the one index that takes an entry at a random place per trace.
# Traces are listed newest first by COALESCE(start_ns, updated_ns) (the root's start, else the last write): an index
# on that expression answers "the latest N" without reading every row (300,000 traces: 0.3 ms, not 250 ms).
_SCHEMA = _SCHEMA_TEMPLATE.format(
    ref="ref INTEGER PRIMARY KEY,\n    ",
    key="NOT NULL UNIQUE",
    by_time="CREATE INDEX IF NOT EXISTS traces_by_time ON traces(COALESCE(start_ns, updated_ns));",
    trace_ref=",\n    trace_ref INTEGER",
)
_SCHEMA_V1 = _SCHEMA_TEMPLATE.format(  # chronicle-store/1
    ref="", key="PRIMARY KEY", by_time="CREATE INDEX IF NOT EXISTS traces_by_start ON traces(start_ns);", trace_ref=""
)
_LINES_INDEX = "CREATE INDEX IF NOT EXISTS span_lines_by_ref ON span_lines(trace_ref)"
_LINES_INDEX_V1 = "CREATE INDEX IF NOT EXISTS span_lines_by_trace ON span_lines(trace_id)"


# One statement per trace and batch. In an UPDATE every right-hand side sees the row as it was.
_NEW_ROOT = "excluded.root_span_id IS NOT NULL"
_OUTER = (
    "excluded.boundary_start_ns IS NOT NULL"
    " AND (boundary_start_ns IS NULL OR excluded.boundary_start_ns < boundary_start_ns)"
)
_UPSERT_TRACE = f"""
INSERT INTO traces(trace_id, root_span_id, root_name, start_ns, end_ns, status, root_boundary, root_boundary_kind,
                   boundary_start_ns, service, span_count, error_count, updated_ns, replay_of)
VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)
ON CONFLICT(trace_id) DO UPDATE SET
    span_count = span_count + excluded.span_count,
    error_count = error_count + excluded.error_count,
    updated_ns = excluded.updated_ns,
    service = COALESCE(service, excluded.service),
    replay_of = COALESCE(replay_of, excluded.replay_of),
    root_span_id = CASE WHEN {_NEW_ROOT} THEN excluded.root_span_id ELSE root_span_id END,
    root_name = CASE WHEN {_NEW_ROOT} THEN excluded.root_name ELSE root_name END,
    start_ns = CASE WHEN {_NEW_ROOT} THEN excluded.start_ns ELSE start_ns END,
    end_ns = CASE WHEN {_NEW_ROOT} THEN excluded.end_ns ELSE end_ns END,
    status = CASE WHEN {_NEW_ROOT} THEN excluded.status ELSE status END,
    root_boundary = CASE WHEN {_OUTER} THEN excluded.root_boundary ELSE root_boundary END,
    root_boundary_kind = CASE WHEN {_OUTER} THEN excluded.root_boundary_kind ELSE root_boundary_kind END,
    boundary_start_ns = CASE WHEN {_OUTER} THEN excluded.boundary_start_ns ELSE boundary_start_ns END
"""


# Rows go in with multi-row INSERTs of up to _ROWS_PER_INSERT rows: one statement, and one release of the interpreter
# lock (which the application's thread may then keep for its whole switch interval), per that many rows. SQLite
# takes 32,766 parameters from 3.32 on (512 rows of 14: 7,168), 999 before (64 rows: 896).


def _takes_parameters(count: int) -> bool:
    """Whether one statement of this SQLite library takes ``count`` parameters (builds may lower the limit)."""
    with contextlib.closing(sqlite3.connect(":memory:")) as db:
        which = getattr(sqlite3, "SQLITE_LIMIT_VARIABLE_NUMBER", None)  # Python 3.11+
        if which is not None:
            return int(db.getlimit(which)) >= count  # type: ignore[attr-defined,unused-ignore]
        try:
            db.execute(f"SELECT 1 WHERE 0 IN ({','.join('?' * count)})", [0] * count)
        except sqlite3.Error:
            return False
        return True


_MANY_PARAMETERS: Final = _takes_parameters(512 * 14)
_ROWS_PER_INSERT: Final = 512 if _MANY_PARAMETERS else 64
# A statement returning rows steps (and releases the interpreter lock) once per row: each line's ref is looked up by
# the INSERT itself, from the trace id given a second time.
_LINES = (
    "INSERT INTO span_lines(trace_id, segment, offset, length, trace_ref) VALUES ",
    5,
    "",
    "(?,?,?,?,(SELECT ref FROM traces WHERE trace_id = ?))",
)
_LINES_V1 = ("INSERT INTO span_lines(trace_id, segment, offset, length) VALUES ", 4, "", "")
_TRACES = (
    _UPSERT_TRACE[: _UPSERT_TRACE.index("VALUES")] + "VALUES ",
    14,
    _UPSERT_TRACE[_UPSERT_TRACE.index("ON CONFLICT") :],
    "",
)
_PAYLOADS = ("INSERT OR IGNORE INTO payloads(hash, size, data) VALUES ", 3, "", "")
_statements: dict[tuple[str, int], str] = {}


def _insert(db: sqlite3.Connection, table: tuple[str, int, str, str], rows: list[tuple[Any, ...]]) -> None:
    """Insert ``rows`` (tuples of ``table``'s width) in order, with as few statements as the sizes allow.

    ``table`` is (the statement up to VALUES, the parameters per row, what follows the rows, a row's values when
    they are not ``width`` plain parameters).
    """
    head, width, tail, values = table
    at = 0
    while at < len(rows):
        count = min(_ROWS_PER_INSERT, 1 << ((len(rows) - at).bit_length() - 1))  # 512, 256, ... 1: few statements
        sql = _statements.get((head, count))
        if sql is None:
            marks = values or "(" + ",".join("?" * width) + ")"
            sql = _statements[(head, count)] = head + ",".join([marks] * count) + " " + tail
        db.execute(sql, [value for row in rows[at : at + count] for value in row])
        at += count


@dataclass
class TraceRecord:
    """What the exporter hands the store for one trace in one export batch (internal)."""

    trace_id: str
    line: bytes  # the OTLP/JSON line, or the zstd frame LocalStore.encode_lines made of it
    span_count: int
    error_count: int
    root: dict[str, Any] | None
    outer_boundary: tuple[str, str, int] | None
    service: str | None
    replay_of: str | None = None  # ``chronicle.replay.of`` of its spans: the trace id a replay reran
    payloads: list[tuple[str, bytes]] = field(default_factory=list)  # cut on its spans: stored with its line


class LocalStore(StoreReader):
    """The embedded store of spans (OTLP/JSON lines) and full payloads (content addressed): reads and writes.

    Args:
        path: the store directory; default :func:`default_store_path`. Created on first write.
        durable: fsync span segments and use SQLite ``synchronous=FULL`` so a committed batch
            survives a power loss; ``False`` trades that for speed (a process crash still loses nothing
            that was written).
        compress: write span lines and payloads as zstd frames (``True``) or plain (``False``); default
            ``$CHRONICLE_STORE_COMPRESS``, else ``True``.

    Raises:
        ConfigError: ``$CHRONICLE_STORE_COMPRESS`` is set to something else than a boolean word.

    Attributes:
        failed_batches: calls of :meth:`write_batch` (export batches) that failed, whole or in part (a full volume).
        failed_spans: spans of those batches that are not stored.

    Example::

        store = LocalStore(".chronicle")
        for t in store.list_traces(limit=5):
            print(t.trace_id, t.root_boundary, t.status, t.duration_ns)
        spans = store.read_spans(t.trace_id)
    """

    _writes = True

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, durable: bool = True, compress: bool | None = None
    ) -> None:
        super().__init__(path)
        self.durable = durable
        self.compress: bool = resolve(STORE_COMPRESS, compress)  # a bad $CHRONICLE_STORE_COMPRESS raises here
        self.failed_batches = 0
        self.failed_spans = 0
        self._fd: int | None = None  # the open segment, unbuffered: a failed write leaves nothing pending
        self._segment_rel = ""
        self._segment_size = 0
        self._segment_pid = 0
        self._warned: set[str] = set()  # causes of failures reported at WARNING level
        self._recoveries = 0
        self._compression: LineCompressor | None = None
        self._by_ref = True  # span lines found by their trace's ref (chronicle-store/2); read from the index
        self._index_id: tuple[int, int] | None = None  # (device, inode) of the index file this writer opened
        self._unreported: tuple[int, int, str] | None = None  # batches, spans, cause: failed since the last success

    # ------------------------------------------------------------------------------------ setup

    def _create(self) -> None:
        """Write the manifest of a new store, unless another process wrote one first (theirs stays)."""
        self.path.mkdir(parents=True, exist_ok=True)
        self._write_manifest(replace=False)

    def _write_manifest(self, *, replace: bool) -> None:
        """Write the manifest (``STORE_FORMAT``) whole, in one step; with ``replace``, over the one there."""
        tmp = self.path / f".{MANIFEST}.{os.getpid()}.{threading.get_ident()}.tmp"
        tmp.write_text(json.dumps({"format": STORE_FORMAT}) + "\n", encoding="utf-8")
        try:
            if replace:
                os.replace(tmp, self.path / MANIFEST)
                return
            try:
                os.link(tmp, self.path / MANIFEST)  # fails when the manifest exists: the first writer wins
            except FileExistsError:
                pass
            except OSError:  # a file system without hard links
                if not (self.path / MANIFEST).exists():
                    os.replace(tmp, self.path / MANIFEST)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()

    def _prepare(self, db: sqlite3.Connection) -> None:
        db.execute("PRAGMA journal_mode=WAL")
        self._index_id = _file_id(self.path / INDEX)
        db.execute(f"PRAGMA synchronous={'FULL' if self.durable else 'NORMAL'}")
        # Every trace adds an entry at a random place of the index by trace id, so each batch changes pages all
        # over it: fewer checkpoints copy a page that several batches changed once.
        db.execute(f"PRAGMA wal_autocheckpoint={_CHECKPOINT_PAGES}")
        db.executescript(_SCHEMA_V1 if self._format == _FORMAT_V1 else _SCHEMA)
        self._by_ref = lines_by_ref(db)  # the table decides: an index made before its manifest said otherwise
        db.execute(_LINES_INDEX if self._by_ref else _LINES_INDEX_V1)
        if self._by_ref and self._format == _FORMAT_V1:
            # An index of this layout under the earlier manifest (an earlier version created the store at the same
            # moment): name the layout, so earlier versions refuse the store from now on. Lines they wrote meanwhile
            # have no ref and are found by their trace id.
            self._write_manifest(replace=True)
            self._format = STORE_FORMAT
        if not _has_replay_column(db):  # an index written before replays were told apart
            db.execute("BEGIN IMMEDIATE")  # another writer upgrading it at the same time waits, then finds it done
            try:
                if not _has_replay_column(db):
                    db.execute("ALTER TABLE traces ADD COLUMN replay_of TEXT")
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        db.execute("ROLLBACK")
                raise

    def _compressor(self) -> LineCompressor:
        """How lines and payloads are stored: zstd frames (see :mod:`._compression`), unless ``compress`` is false."""
        if self._compression is None:
            self._compression = LineCompressor(self.path, enabled=self.compress)
        return self._compression

    def _segment(self) -> int:
        """This process's open segment, opened (and created) now if needed."""
        pid = os.getpid()
        if self._fd is not None and self._segment_pid == pid and self._segment_size < _SEGMENT_MAX_BYTES:
            return self._fd
        self._close_segment()
        day = time.strftime("%Y-%m-%d", time.gmtime())
        name = f"{time.strftime('%H%M%S', time.gmtime())}-{pid}-{os.urandom(4).hex()}.jsonl"
        rel = f"spans/{day}/{name}"
        full = self.path / rel
        folder = full.parent
        # readers refuse segments reached through links: lines written there could never be read back
        if folder.parent.is_symlink():
            raise StoreError("span folder is a symbolic link or leads outside the store's spans/", folder.parent)
        folder.mkdir(parents=True, exist_ok=True)
        if folder.is_symlink() or not folder.resolve().is_relative_to(self.path.resolve() / "spans"):
            raise StoreError("span folder is a symbolic link or leads outside the store's spans/", folder)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_BINARY | _O_CLOEXEC
        self._fd = os.open(full, flags, 0o666)  # a new name: never a file or link put there before
        self._segment_rel = rel
        self._segment_size = 0
        self._segment_pid = pid
        return self._fd

    def _intact(self) -> bool:
        """Whether the store this writer has open is still at its path: the manifest is there, and the index file
        is the one it opened (not removed, or removed and made again by another writer)."""
        return os.path.lexists(self.path / MANIFEST) and (
            self._index_id is None or _file_id(self.path / INDEX) == self._index_id
        )

    def _segment_removed(self) -> bool:
        """Whether the open segment was unlinked (its lines can no longer be read)."""
        if self._fd is None or self._segment_pid != os.getpid():
            return False
        try:
            return os.fstat(self._fd).st_nlink == 0
        except OSError:
            return True

    def _start_over(self) -> None:
        """The store directory was removed while this writer had it open (``rm -rf .chronicle``, a cleanup job):
        writing on through the open files would lose every later span with nothing said. Close them; the next
        write creates a new store at the path. The compression dictionary is kept: lines the exporter already
        compressed with it are written to the new store, and its file with them."""
        self._close_segment()
        self._index_id = None
        super().close()
        logger.warning(
            "chronicle_otel: the store %s was removed while recording; a new store is started there (what it held is "
            "gone)",
            self.path,
        )

    def _close_segment(self, *, remove: bool = False) -> None:
        """Close the open segment (a forked child only closes its copy); ``remove`` also deletes the file."""
        fd = self._fd
        if fd is None:
            return
        self._fd = None
        with contextlib.suppress(OSError):
            os.close(fd)
        if remove and self._segment_pid == os.getpid():
            with contextlib.suppress(OSError):
                os.unlink(self.path / self._segment_rel)

    def _cut_segment(self, size: int) -> None:
        """Cut the open segment back to ``size`` bytes: what a failed batch appended goes away."""
        if self._fd is None:
            return
        if size == 0:  # nothing else was ever written to it: no empty segment stays behind
            self._close_segment(remove=True)
            return
        try:
            os.ftruncate(self._fd, size)
        except OSError:
            self._close_segment()  # the next batch starts a new segment; what is left here is never indexed
        else:
            self._segment_size = size

    # ------------------------------------------------------------------------------------ writes

    def encode_lines(self, lines: list[bytes]) -> list[bytes]:
        """``lines`` (OTLP/JSON span lines) as the store writes them, once it has its compression dictionary: zstd
        frames. Until then, and when compression is off or fails, the lines themselves (:meth:`write_batch` then
        encodes them, and counts a failure).

        A :class:`TraceRecord` carries its line in either form; encoding lines as they are made keeps the raw lines
        of a whole export batch from piling up in memory.
        """
        with self._lock:
            try:
                return self._compressor().encode(lines)
            except Exception:  # write_batch compresses them again: a failure is reported and counted there
                return lines

    def write_batch(
        self, records: Iterable[TraceRecord], payloads: Iterable[tuple[str, bytes]] = ()
    ) -> list[TraceRecord]:
        """Append span lines and payloads (``payloads`` and each record's own), then index them in one transaction.

        All of it or nothing, unless the volume is full (ENOSPC, EDQUOT, EFBIG, SQLITE_FULL): then the write-ahead
        log of the index is cut back and the batch is split (halves, quarters… down to one trace with its payloads),
        so that what fits is stored. The records that did not fit are returned, counted in :attr:`failed_spans`,
        and reported here (once per cause, see :meth:`report_write_failure`).

        Returns:
            The records that are not stored because the volume is full; empty when the whole batch is stored.

        Raises:
            OSError, sqlite3.Error: nothing of the batch was stored (counted in :attr:`failed_batches`); the exporter
                reports it with :meth:`report_write_failure`.
        """
        records = list(records)
        payloads = list(payloads)
        if not records and not payloads:
            return []
        units = len(records) + len(payloads)
        with self._lock:
            part = self._part_size(records, payloads)
            error: BaseException | None = None
            if part >= units:
                try:
                    self._write_again_if_locked(records, payloads)
                except Exception as exc:
                    if not _full(exc, self.path) or units < 2:
                        self._count_failure(records, exc)
                        raise
                    self._reclaim()
                    part = (units + 1) // 2
            if part < units:
                unstored, stored_any, error = self._write_what_fits(records, payloads, part)
                if error is not None and not stored_any:  # not one trace (or payload) fitted
                    self._count_failure(records, error)
                    raise error
                if error is not None:
                    self._count_failure(unstored, error)
                    self._report(error, partly=(records, unstored))
                    return unstored
            if self._unreported is not None and self._warned:
                self._report_recovery()
            self._unreported = None
            return []

    def _write_again_if_locked(self, records: list[TraceRecord], payloads: list[tuple[str, bytes]]) -> None:
        """:meth:`_write_checked`, once more after a moment when the index was locked by another process in a way
        SQLite does not wait out (its busy timeout covers a lock held; not every step of another writer creating the
        store, or of a reader opening it, at the same instant). A lock SQLite already waited for (up to its 30 s busy
        timeout) is not waited for again: the batch fails. A failed batch leaves the store as it was."""
        started = time.monotonic()
        try:
            self._write_checked(records, payloads)
        except Exception as exc:
            if not _locked(exc) or time.monotonic() - started > _LOCKED_RETRY_WITHIN:
                raise
            logger.debug("chronicle_otel: the store %s was locked (%s); the batch is written again", self.path, exc)
            time.sleep(_LOCKED_RETRY_SECONDS)
            self._write_checked(records, payloads)

    def _count_failure(self, records: list[TraceRecord], exc: BaseException) -> None:
        spans = sum(rec.span_count for rec in records)
        self.failed_batches += 1
        self.failed_spans += spans
        batches, lost, _ = self._unreported or (0, 0, "")
        self._unreported = (batches + 1, lost + spans, _cause(exc, self.path)[1])

    def _part_size(self, records: list[TraceRecord], payloads: list[tuple[str, bytes]]) -> int:
        """How many records (or loose payloads) one transaction takes: all of them, unless the volume has less than
        64 MiB free. Then a part holds about 1/16 of the free space: the index pages of a committed part stay in the
        write-ahead log until its checkpoint has grown the index file by as much, and a log that cannot be
        checkpointed for lack of room would keep its room for good."""
        units = len(records) + len(payloads)
        free = _free_bytes(self.path)
        if free is None or free >= _TIGHT_BELOW or units < 2:
            return units
        size = sum(len(rec.line) + sum(len(data) for _, data in rec.payloads) for rec in records)
        size += sum(len(data) for _, data in payloads) + _INDEX_BYTES * units
        return max(1, min(units, units * free // 16 // max(size, 1)))

    def _write_what_fits(
        self, records: list[TraceRecord], payloads: list[tuple[str, bytes]], size: int
    ) -> tuple[list[TraceRecord], bool, BaseException | None]:
        """Write a batch in parts of ``size`` records with their payloads (loose payloads one by one); after a part
        that does not fit, in parts of half its size, down to one. Stops at the first part of one that does not
        fit, or at another failure.

        Returns:
            The records not written, whether any part was, and the error that stopped the writing (None when
            everything was written).
        """
        units: list[tuple[TraceRecord | None, list[tuple[str, bytes]]]] = [(rec, []) for rec in records]
        units += [(None, [payload]) for payload in payloads]
        at = 0
        reclaimed = False
        while at < len(units):
            part = units[at : at + size]
            try:
                self._write_checked(
                    [rec for rec, _ in part if rec is not None], [p for _, extra in part for p in extra]
                )
            except Exception as exc:
                if size == 1 or not _full(exc, self.path):
                    return [rec for rec, _ in units[at:] if rec is not None], at > 0, exc
                if not reclaimed:
                    self._reclaim()
                    reclaimed = True
                size = (size + 1) // 2
                continue
            at += size
        return [], True, None

    def _reclaim(self) -> None:
        """Give the volume back what the index's write-ahead log holds (best effort: checkpointing it needs room to
        grow the index file)."""
        with contextlib.suppress(sqlite3.Error, OSError):
            db = self._connect(create=False)
            if db is not None and not db.in_transaction:
                self._truncate_log(db)

    @staticmethod
    def _truncate_log(db: sqlite3.Connection) -> None:
        """Checkpoint the write-ahead log and cut its file to nothing, without waiting for readers (who may hold it:
        then it stays as it is)."""
        with contextlib.suppress(sqlite3.Error):
            db.execute("PRAGMA busy_timeout=0")
            try:
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            finally:
                db.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")

    def _write_checked(self, records: list[TraceRecord], payloads: list[tuple[str, bytes]]) -> None:
        """:meth:`_write`, then make sure what it wrote is still in the store: a store removed meanwhile (an
        ``rm -rf`` racing the writer) took the batch with it, which is then written once more in a new store.

        Raises:
            StoreError: the batch went with a removed store or segment twice, or its segment was removed.
        """
        self._write(records, payloads)
        if not records:
            return
        if self._intact() and not self._segment_removed():
            saved = True
            try:
                self._compressor().save_dictionary()  # the lines need it: was dicts/ removed meanwhile?
            except OSError:
                saved = False
            if not saved:  # raised here, not from the OSError: the batch is in the index, it is not split again
                raise StoreError("the compression dictionary the batch's lines need cannot be written", self.path)
            return
        if self._intact():  # the segment alone was removed: the index points at lines that are gone
            self._close_segment()
            raise StoreError(
                "the span segment was removed while it was written; the spans of the batch are lost",
                self.path / self._segment_rel,
            )
        self._start_over()
        self._write(records, payloads)
        if not self._intact() or self._segment_removed():
            self._close_segment()
            raise StoreError("the store was removed while spans were written to it, twice; they are lost", self.path)

    def _write(self, records: list[TraceRecord], payloads: list[tuple[str, bytes]]) -> None:
        if self._db is not None and not self._intact():
            self._start_over()
        db = self._connect(create=True)
        assert db is not None
        db.execute("BEGIN IMMEDIATE")  # an index that cannot be written fails here, before any line is appended
        appended_at: int | None = None
        committing = False
        try:
            rows: list[tuple[str, str, int, int]] = []
            if records:
                # In trace id order (stable: the lines of one trace keep theirs): the inserts into the indexes by
                # trace id then visit each index page once per batch, in order.
                records.sort(key=_trace_id)
                fd = self._segment()
                # The real end of file: bytes a crash left behind are skipped, never indexed.
                offset = appended_at = os.fstat(fd).st_size
                segment = self._segment_rel
                compressor = self._compressor()
                final = compressor.dict_id != 0  # frames made now are the ones to keep (no better dictionary comes)
                frames = compressor.lines([rec.line for rec in records])  # those not encoded yet
                compressor.save_dictionary()  # a store started again: the dictionary's file before lines that need it
                for rec, frame in zip(records, frames):  # noqa: B905 - one frame per line
                    if final:  # written again in a part of the batch (a full volume): not compressed twice
                        rec.line = frame
                    size = len(frame)
                    rows.append((rec.trace_id, segment, offset, size))
                    offset += size + 1
                frames.append(b"")
                _write_all(fd, b"\n".join(frames))
                if self.durable:
                    os.fsync(fd)
                self._segment_size = offset
            now = time.time_ns()
            if self._by_ref:  # the traces rows first: the lines name them by ref, looked up inside the statement
                _insert(db, _TRACES, [_trace_row(rec, now) for rec in records])
                _insert(db, _LINES, [(*row, row[0]) for row in rows])
            else:
                _insert(db, _LINES_V1, rows)
                _insert(db, _TRACES, [_trace_row(rec, now) for rec in records])
            own = [payload for rec in records for payload in rec.payloads]
            if payloads or own:
                stored_payload = self._compressor().payload
                _insert(db, _PAYLOADS, [(h, len(data), stored_payload(data)) for h, data in payloads + own])
            committing = True
            db.execute("COMMIT")
        except BaseException as exc:
            self._abort(db, exc, appended_at, committing, rows[0] if rows else None)
            raise
        free = _free_bytes(self.path)
        if free is not None and free < _TIGHT_BELOW:  # a small or almost full volume: the log's room is the spans'
            self._truncate_log(db)

    def _abort(
        self,
        db: sqlite3.Connection,
        exc: BaseException,
        appended_at: int | None,
        committing: bool,
        first: tuple[str, str, int, int] | None = None,
    ) -> None:
        """Undo a failed batch without hiding why it failed (SQLite may have rolled back already)."""
        if db.in_transaction:
            try:
                db.execute("ROLLBACK")
            except sqlite3.Error:
                # A connection stuck in a transaction would fail every later batch: closing it rolls back.
                with contextlib.suppress(sqlite3.Error):
                    db.close()
                self._db = None
        if appended_at is not None and (not committing or _not_committed(exc) or not self._indexed(first)):
            self._cut_segment(appended_at)

    def _indexed(self, row: tuple[str, str, int, int] | None) -> bool:
        """Whether the index holds the span line ``row`` (trace id, segment, offset, length) after a ``COMMIT``
        failed with an error that does not say whether it committed (on Python 3.10 an error has no code: every
        I/O error reads "disk I/O error"). True when that cannot be told: lines the index may point to stay."""
        if row is None:
            return True
        try:
            db = self._connect(create=False)
            if db is None:
                return True
            found = db.execute(
                f"SELECT 1 FROM span_lines WHERE {lines_of_trace(db)} AND segment = :segment AND offset = :offset",
                {"trace_id": row[0], "segment": row[1], "offset": row[2]},
            ).fetchone()
        except (sqlite3.Error, UnicodeDecodeError, OSError):  # see INDEX_ERRORS
            return True
        return found is not None

    # ------------------------------------------------------------------------------------ failures

    def report_write_failure(self, exc: BaseException) -> bool:
        """Log a failure of :meth:`write_batch`: a warning the first time per cause, DEBUG with counts after.

        The cause is named: ``disk full (...)``, ``store is read-only (...)``, or the error itself, with the store
        path. When writing works again, one more message says how many batches and spans were lost meanwhile.

        Args:
            exc: what :meth:`write_batch` raised.

        Returns:
            True when ``exc`` is a failure of the store's files or index (reported); False for anything else,
            which the caller handles as a bug.
        """
        return self._report(exc)

    def _report(self, exc: BaseException, partly: tuple[list[TraceRecord], list[TraceRecord]] | None = None) -> bool:
        """:meth:`report_write_failure`; ``partly``: the records of a batch stored in part, and those not stored."""
        if not _is_store_fault(exc):
            return False
        key, cause = _cause(exc, self.path)
        with self._lock:
            first = key not in self._warned
            self._warned.add(key)
            batches, spans = self.failed_batches, self.failed_spans
        if partly is not None:
            given, lost = (sum(rec.span_count for rec in records) for records in partly)
            logger.log(
                logging.WARNING if first else logging.DEBUG,
                "chronicle_otel: cannot write all spans to the store %s: %s (%s: %s); %d of the %d spans of this "
                "export are stored, %d are lost (%d span(s) lost so far, counted in LocalStore.failed_spans); your "
                "code still runs.",
                self.path,
                cause,
                type(exc).__name__,
                exc,
                given - lost,
                given,
                lost,
                spans,
            )
        elif first:
            detail = "" if key.startswith("other:") else f" ({type(exc).__name__}: {exc})"
            logger.warning(
                "chronicle_otel: cannot write spans to the store %s: %s%s; the spans of this export are lost, "
                "your code still runs. Later failures of this kind are logged at DEBUG level and counted in "
                "LocalStore.failed_batches and failed_spans.",
                self.path,
                cause,
                detail,
                exc_info=exc if key.startswith("other:") else None,
            )
        else:
            logger.debug(
                "chronicle_otel: cannot write spans to the store %s: %s (%d export(s) with %d span(s) lost so far)",
                self.path,
                cause,
                batches,
                spans,
            )
        return True

    def _report_recovery(self) -> None:
        assert self._unreported is not None
        batches, spans, cause = self._unreported
        self._recoveries += 1
        logger.log(
            logging.WARNING if self._recoveries == 1 else logging.INFO,
            "chronicle_otel: writing spans to the store %s works again; %d export(s) with %d span(s) failed "
            "before (%s) and are lost.",
            self.path,
            batches,
            spans,
            cause,
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
        """Fsync the open segment (each batch is already written to it)."""
        with self._lock:
            if self._fd is not None and self._segment_pid == os.getpid():
                os.fsync(self._fd)

    def close(self) -> None:
        """Close files; the store can be reopened by the next call."""
        with self._lock:
            self._close_segment()
            super().close()

    # ------------------------------------------------------------------------------------ reads


_BUSY_TIMEOUT_MS: Final = 30_000  # the index connection's (sqlite3.connect(timeout=30))
_INDEX_BYTES: Final = 512  # about what a trace's rows take in the index and its write-ahead log

_O_BINARY: Final[int] = getattr(os, "O_BINARY", 0)
_O_CLOEXEC: Final[int] = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW: Final[int] = getattr(os, "O_NOFOLLOW", 0)

DISK_FULL: Final = "disk full (ENOSPC / SQLITE_FULL / EFBIG file size limit)"
READ_ONLY: Final = "store is read-only (EACCES/EROFS/SQLITE_READONLY)"

_FULL_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)})
_READ_ONLY_ERRNOS: Final = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
_SQLITE_BUSY: Final = 5
_SQLITE_LOCKED: Final = 6
_SQLITE_NOMEM: Final = 7
_SQLITE_READONLY: Final = 8
_SQLITE_IOERR: Final = 10
_SQLITE_FULL: Final = 13
_SQLITE_PROTOCOL: Final = 15
_SQLITE_IOERR_WRITE: Final = 3 << 8 | _SQLITE_IOERR
_NOT_STORE_FAULTS: Final = (sqlite3.ProgrammingError, sqlite3.IntegrityError, sqlite3.DataError)


def _trace_id(rec: TraceRecord) -> str:
    return rec.trace_id


def _trace_row(rec: TraceRecord, now: int) -> tuple[Any, ...]:
    """The values of :data:`_UPSERT_TRACE` for ``rec``."""
    root = rec.root
    outer = rec.outer_boundary
    name, kind, start = outer if outer is not None else (None, None, None)
    head = (
        (None, None, None, None, None)
        if root is None
        else (root.get("span_id"), root.get("name"), root.get("start_ns"), root.get("end_ns"), root.get("status"))
    )
    return (
        rec.trace_id,
        *head,
        name,
        kind,
        start,
        rec.service,
        rec.span_count,
        rec.error_count,
        now,
        rec.replay_of,
    )


def _file_id(path: os.PathLike[str]) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``; None when there is none."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _free_bytes(path: os.PathLike[str]) -> int | None:
    """Bytes this process may still write on the volume of ``path`` (or of its nearest existing parent: a store not
    created yet); None when that cannot be told."""
    where = os.path.abspath(path)
    while True:
        try:
            info = os.statvfs(where)
        except FileNotFoundError:
            parent = os.path.dirname(where)
            if parent == where:
                return None
            where = parent
        except (OSError, AttributeError):  # Windows has no statvfs
            return None
        else:
            return info.f_bavail * info.f_frsize


def _full(exc: BaseException, path: os.PathLike[str]) -> bool:
    """Whether ``exc`` says the volume (or the file size limit) is full: a smaller write may still fit."""
    return _is_store_fault(exc) and _cause(exc, path)[0] == "full"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _sqlite_code(exc: sqlite3.Error) -> int | None:
    """The SQLite result code of ``exc`` (extended when known), from Python 3.11; None before."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code if isinstance(code, int) else None


def _not_committed(exc: BaseException) -> bool:
    """True when a failed ``COMMIT`` surely did not commit (an I/O error of a sync may have, on recovery)."""
    if not isinstance(exc, sqlite3.Error):
        return False
    code = _sqlite_code(exc)
    if code is None:  # Python 3.10: only the message tells
        text = str(exc)
        return any(m in text for m in ("disk is full", "readonly database", "database is locked", "out of memory"))
    return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_NOMEM, _SQLITE_READONLY, _SQLITE_FULL) or (
        code == _SQLITE_IOERR_WRITE
    )


_LOCKED_RETRY_SECONDS: Final = 0.05
_LOCKED_RETRY_WITHIN: Final = 1.0  # a failure this fast was not waited out by SQLite's busy timeout
_LOCKED_TEXTS: Final = ("database is locked", "database table is locked", "locking protocol")


def _locked(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it was raised from) is SQLite's "locked" or "busy" (SQLITE_BUSY, SQLITE_LOCKED,
    SQLITE_PROTOCOL): another connection held the index at that instant."""
    link: BaseException | None = exc
    for _ in range(4):
        if link is None:
            return False
        if isinstance(link, sqlite3.Error):
            code = _sqlite_code(link)
            if code is not None:
                return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_PROTOCOL)
            return any(text in str(link) for text in _LOCKED_TEXTS)
        if isinstance(link, StoreError) and any(text in str(link) for text in _LOCKED_TEXTS):
            return True  # the index could not be opened: its text names SQLite's error
        link = link.__cause__ or link.__context__
    return False


def _is_store_fault(exc: BaseException) -> bool:
    """A failure of the store's files or index (not a bug in the code writing to it)."""
    if isinstance(exc, OSError):
        return True
    return isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, _NOT_STORE_FAULTS)


def _cause(exc: BaseException, path: os.PathLike[str]) -> tuple[str, str]:
    """The cause of a failed write, as (key, text for a message): disk full, read-only, or the error itself."""
    seen: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and len(seen) < 4:  # a StoreError raised "from None" still carries its context
        seen.append(link)
        link = link.__cause__ or link.__context__
    io_error = False
    for err in seen:
        if isinstance(err, OSError) and err.errno in _FULL_ERRNOS:
            return "full", DISK_FULL
        if isinstance(err, OSError) and err.errno in _READ_ONLY_ERRNOS:
            return "read-only", READ_ONLY
        if isinstance(err, sqlite3.Error):
            code = _sqlite_code(err)
            text = str(err)
            if (code is not None and code & 0xFF == _SQLITE_FULL) or "disk is full" in text:
                return "full", DISK_FULL
            if (code is not None and code & 0xFF == _SQLITE_READONLY) or "readonly database" in text:
                return "read-only", READ_ONLY
            io_error = io_error or (code is not None and code & 0xFF == _SQLITE_IOERR) or "disk I/O error" in text
    if io_error and _out_of_room(path):  # SQLite reports a write past RLIMIT_FSIZE as a plain I/O error
        return "full", DISK_FULL
    if not _writable(path):
        return "read-only", READ_ONLY
    code = getattr(exc, "errno", None) or (_sqlite_code(exc) if isinstance(exc, sqlite3.Error) else None)
    return f"other:{type(exc).__name__}:{code}", f"{type(exc).__name__}: {exc}"


def _out_of_room(path: os.PathLike[str]) -> bool:
    """True when the file system under ``path`` is full or the index files reach the file size limit."""
    with contextlib.suppress(OSError, AttributeError):
        if os.statvfs(path).f_bavail == 0:
            return True
    if resource is None:
        return False
    with contextlib.suppress(OSError, ValueError):
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if limit != resource.RLIM_INFINITY:
            sizes = [0]
            for name in (INDEX, INDEX + "-wal", INDEX + "-journal"):
                with contextlib.suppress(OSError):
                    sizes.append(os.stat(os.path.join(path, name)).st_size)
            return max(sizes) + 65536 >= limit  # a WAL frame or page more would not fit
    return False


def _writable(path: os.PathLike[str]) -> bool:
    """False when the store directory or its index exists but this process may not write it."""
    for target in (path, os.path.join(path, INDEX)):
        with contextlib.suppress(OSError):
            if os.path.exists(target) and not os.access(target, os.W_OK):
                return False
    return True


publish(__name__, globals())
