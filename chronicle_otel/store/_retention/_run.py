"""One retention run's state, and its access to the store: the index, short write transactions, and the payload
references read from span lines."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from ...errors import StoreError
from .._compression import inflate
from ..reader import MAX_LINE_BYTES, StoreReader
from ._policy import RetentionPolicy
from ._report import Counts

_DIGEST = re.compile(rb"sha256:[0-9a-f]{64}")
INSERT_BATCH: Final = 1_000
"""Rows inserted into the run's temporary tables per statement."""


class Run(StoreReader):
    """One retention run over a store: its settings, what it has counted, and the index it plans and writes on.

    The steps (``_plan``, ``_removal``, ``_segments``) take the run; the order is :func:`~._collect`'s.
    """

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
        self.counts = Counts()
        self.mark = 0  # every span_lines row above this rowid was written after the references were read

    def _prepare(self, db: sqlite3.Connection) -> None:
        db.execute("PRAGMA temp_store=FILE")  # the plan spills to a temporary file, not to memory

    def _create(self) -> None:
        raise StoreError("there is no store here", self.path)

    def index(self) -> sqlite3.Connection:
        """The index connection (opened once, closed by :meth:`close`)."""
        db = self._connect(create=False)
        if db is None:
            raise StoreError("there is no store here", self.path)
        return db

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A short write transaction: writers wait for it (their timeout is 30 s), so each one does little."""
        assert not self.dry_run
        db = self.index()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def record_references(self, db: sqlite3.Connection, rows: Any, target: str) -> None:
        """Read the lines of ``rows`` (trace_id, segment, offset, length) and record the stored payloads they name.

        ``target`` is ``temp.trefs(trace_id, hash)`` or ``temp.keep(hash)``.
        """
        per_trace = target.startswith("temp.trefs")
        if per_trace:
            sql = f"INSERT OR IGNORE INTO {target} SELECT ?, ? WHERE EXISTS (SELECT 1 FROM payloads WHERE hash = ?)"
        else:
            sql = f"INSERT OR IGNORE INTO {target} SELECT ? WHERE EXISTS (SELECT 1 FROM payloads WHERE hash = ?)"
        batch: list[tuple[str, ...]] = []
        for trace_id, digests in self.line_digests(rows):
            for digest in digests:
                batch.append((trace_id, digest, digest) if per_trace else (digest, digest))
            if len(batch) >= INSERT_BATCH:
                db.executemany(sql, batch)
                batch.clear()
        db.executemany(sql, batch)

    def line_digests(self, rows: Any) -> Iterator[tuple[str, set[str]]]:
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

    def read_new_lines(self, db: sqlite3.Connection) -> None:
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
        self.keep_references(db, iter(rows))

    def keep_references(self, db: sqlite3.Connection, rows: Any) -> None:
        """Record the payloads the lines of ``rows`` name as kept; an unreadable line stops the payload sweep."""
        try:
            self.record_references(db, rows, "temp.keep(hash)")
        except StoreError as exc:
            self.counts.warnings.append(f"payload removal stopped: a span line is unreadable ({exc})")
            self.sweep = False
