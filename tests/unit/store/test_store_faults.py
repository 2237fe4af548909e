"""Store faults: a full disk, a read-only store, an index that fails after the lines were appended.

Each failure loses the batch it happened to, is named once in the log, leaves no pile of segment files and no
span line that the index does not point to; writing works again once the fault is gone.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

import chronicle_otel as chronicle
from chronicle_otel.store import LocalStore, StoreReader, payload_digest
from chronicle_otel.store._local import DISK_FULL, READ_ONLY, TraceRecord
from chronicle_otel.store.reader import INDEX

REPO = Path(__file__).parents[3]

# Runs outer(i) -> inner(i): two boundary spans, two exports per call (simple processor).
PRELUDE = textwrap.dedent(
    """
    import glob, json, logging, os, sys
    logging.basicConfig(stream=sys.stderr, format="%(levelname)s %(message)s")
    logging.getLogger("chronicle_otel").setLevel(logging.DEBUG)
    import chronicle_otel as chronicle
    path = sys.argv[1]
    config = chronicle.configure(store=chronicle.StoreOptions(path=path, processor="simple"), otlp=False)

    @chronicle.boundary(name="inner")
    def inner(i):
        return i * 2

    @chronicle.boundary(kind="agent", name="outer")
    def outer(i):
        return inner(i) + 1

    def segments():
        return sorted(glob.glob(os.path.join(path, "spans", "*", "*.jsonl")))
    """
)

FULL_DISK = PRELUDE + textwrap.dedent(
    """
    import resource, signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
    mode, calls = sys.argv[2], int(sys.argv[3])
    assert outer(0) == 1
    [first] = segments()
    limit, stored = 0, 1
    if mode == "index":  # room for the lines of one batch, none for the index's write-ahead log
        wal = os.path.join(path, "index.sqlite3-wal")
        while stored < 200 and os.path.getsize(wal) <= os.path.getsize(first) + 16384:
            stored += outer(0)
        limit = os.path.getsize(first) + 8192
        assert os.path.getsize(wal) > limit, "the write-ahead log is smaller than expected"
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    results = [outer(i) for i in range(1, calls + 1)]
    during = segments()
    failed = (config.store.failed_batches, config.store.failed_spans)
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    after = outer(1000)
    print(json.dumps({"ok": results == [2 * i + 1 for i in range(1, calls + 1)] and after == 2001,
                      "during": during, "failed": failed, "stored": stored + 1}))
    """
)

# Drops the capabilities that let root ignore file modes, so that a read-only mode is one for root too.
DROP_DAC = textwrap.dedent(
    """
    import ctypes, os, sys
    if os.geteuid() == 0 and not sys.platform.startswith("linux"):
        print(json.dumps({"skip": "only Linux capabilities are dropped here"})); sys.exit(0)
    if os.geteuid() == 0:
        class Header(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
        class Data(ctypes.Structure):
            _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                        ("inheritable", ctypes.c_uint32)]
        libc = ctypes.CDLL(None, use_errno=True)
        header, data = Header(0x20080522, 0), (Data * 2)()
        keep = ~(1 << 1 | 1 << 2) & 0xFFFFFFFF  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.capget(ctypes.byref(header), data) != 0:
            print(json.dumps({"skip": "capget failed"})); sys.exit(0)
        for field in ("effective", "permitted", "inheritable"):
            setattr(data[0], field, getattr(data[0], field) & keep)
        if libc.capset(ctypes.byref(header), data) != 0:
            print(json.dumps({"skip": "cannot drop CAP_DAC_OVERRIDE"})); sys.exit(0)
    """
)

READ_ONLY_RUN = (
    "import json\n"
    + DROP_DAC
    + PRELUDE
    + textwrap.dedent(
        """
        results = [outer(i) for i in range(20)]
        print(json.dumps({"ok": results == [2 * i + 1 for i in range(20)], "during": segments(),
                          "failed": [config.store.failed_batches, config.store.failed_spans]}))
        """
    )
)

SEED = PRELUDE + "assert outer(7) == 15\n"


def run(script: str, *args: object) -> tuple[dict[str, Any], str]:
    proc = subprocess.run(
        [sys.executable, "-c", script, *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = proc.stdout.strip().splitlines()
    return (json.loads(lines[-1]) if lines else {}), proc.stderr


def warnings_in(log: str) -> list[str]:
    return [line for line in log.splitlines() if line.startswith("WARNING ")]


def segment_lines(path: Path) -> list[tuple[Path, bytes]]:
    """Every complete line of every segment."""
    out = []
    for seg in sorted((path / "spans").rglob("*.jsonl")):
        data = seg.read_bytes()
        out.extend((seg, line) for line in data.split(b"\n")[:-1])
    return out


def assert_every_line_indexed(path: Path) -> list[chronicle.TraceSummary]:
    """Each span line is one the index points to (and every trace reads back whole)."""
    reader = StoreReader(path)
    try:
        traces = reader.list_traces()
        indexed = sorted(line for t in traces for line in reader.iter_lines(t.trace_id))
        for t in traces:
            assert len(reader.read_spans(t.trace_id)) == t.span_count
    finally:
        reader.close()
    assert indexed == sorted(line for _, line in segment_lines(path))
    segments = list((path / "spans").rglob("*.jsonl"))
    assert all(seg.stat().st_size > 0 for seg in segments), "an empty segment was left behind"
    return traces


# ------------------------------------------------------------------------------------ full disk (RLIMIT_FSIZE)


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
@pytest.mark.parametrize(
    ("mode", "failed_at"),
    [("spans", "OSError: [Errno 27]"), ("index", "OperationalError: disk I/O error")],
    ids=["segment-write-fails", "index-write-fails-after-append"],
)
def test_a_full_disk_is_named_once_and_writing_resumes_when_there_is_room(
    tmp_path: Path, mode: str, failed_at: str
) -> None:
    store = tmp_path / "store"
    result, log = run(FULL_DISK, store, mode, 100)

    assert result["ok"]  # every call returned its value; the process kept running
    assert result["failed"] == [200, 200]  # 100 calls, two exports (one span each) per call
    [disk_full] = [w for w in warnings_in(log) if DISK_FULL in w and "cannot write" in w]
    assert str(store) in disk_full and failed_at in disk_full and "your code still runs" in disk_full
    assert "cannot rollback" not in log
    assert log.count("lost so far") == 199  # the later failures, at DEBUG level, counted
    [recovered] = [w for w in warnings_in(log) if "works again" in w]
    assert "200 export(s) with 200 span(s)" in recovered
    assert len(warnings_in(log)) == 2

    assert len(result["during"]) == 1  # 200 failed exports: still the one segment
    traces = assert_every_line_indexed(store)
    assert len(list((store / "spans").rglob("*.jsonl"))) == 1
    assert {t.root_boundary for t in traces} == {"outer"}
    assert len(traces) == result["stored"]  # the calls before the limit and the one after it
    assert all(t.span_count == 2 for t in traces)


# ------------------------------------------------------------------------------------ read-only store


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX file modes")
@pytest.mark.parametrize("what", ["index-file", "directory"])
def test_a_read_only_store_is_named_and_gets_no_unindexed_lines(tmp_path: Path, what: str) -> None:
    store = tmp_path / "store"
    run(SEED, store)
    before = segment_lines(store)
    dirs = [store, *(p for p in (store / "spans").rglob("*") if p.is_dir())]
    if what == "index-file":
        (store / "index.sqlite3").chmod(0o444)
    else:
        for d in dirs:
            d.chmod(0o555)
    try:
        result, log = run(READ_ONLY_RUN, store)
    finally:
        for d in dirs:
            d.chmod(0o755)
        for f in store.glob("index.sqlite3*"):
            f.chmod(0o644)
    if "skip" in result:
        pytest.skip(f"running as root and {result['skip']}: file modes cannot make the store read-only")

    assert result["ok"]
    assert result["failed"] == [40, 40]
    [read_only] = [w for w in warnings_in(log) if READ_ONLY in w and "cannot write" in w]
    assert str(store) in read_only
    assert len(warnings_in(log)) == 1
    assert segment_lines(store) == before  # nothing appended while the index could not be written
    assert len(result["during"]) == 1

    run(SEED, store)  # writable again
    traces = assert_every_line_indexed(store)
    assert len(traces) == 2


def test_an_index_that_refuses_writes_gets_no_lines_and_recovers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = chronicle.configure(store=chronicle.StoreOptions(path=tmp_path, processor="simple", durable=False))
    store = config.store
    assert store is not None

    @chronicle.boundary(name="step")
    def step(i: int) -> int:
        return i + 1

    assert step(0) == 1
    before = segment_lines(tmp_path)
    db = store._connect(create=True)
    assert db is not None
    db.execute("PRAGMA query_only=ON")  # SQLITE_READONLY for every write, whoever runs the tests
    with caplog.at_level(logging.DEBUG, logger="chronicle_otel"):
        assert [step(i) for i in range(100)] == list(range(1, 101))
        assert segment_lines(tmp_path) == before
        assert (store.failed_batches, store.failed_spans) == (100, 100)
        db.execute("PRAGMA query_only=OFF")
        assert step(1000) == 1001
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings
    assert READ_ONLY in warnings[0] and str(tmp_path) in warnings[0]
    assert "works again; 100 export(s) with 100 span(s)" in warnings[1] and READ_ONLY in warnings[1]
    assert len(assert_every_line_indexed(tmp_path)) == 2
    assert len(list((tmp_path / "spans").rglob("*.jsonl"))) == 1


# ------------------------------------------------------------------------------------ index fails after the append


def record(i: int, payloads: list[tuple[str, bytes]] | None = None) -> TraceRecord:
    line = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"name": f"s{i}"}]}]}]}).encode()
    return TraceRecord(f"{i:032x}", line, 1, 0, None, None, None, payloads=payloads or [])


def test_an_index_failure_after_the_append_cuts_the_lines_off_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = LocalStore(tmp_path, durable=False)
    store.write_batch([record(1)])
    [segment] = list((tmp_path / "spans").rglob("*.jsonl"))
    size = segment.stat().st_size
    db = store._connect(create=True)
    assert db is not None
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count={pages}")  # SQLITE_FULL once the index needs another page
    blob = os.urandom(256 * 1024)
    for i in range(100):
        with pytest.raises(sqlite3.OperationalError, match="full") as info:
            store.write_batch([record(100 + i, payloads=[(payload_digest(blob), blob)])])
        assert segment.stat().st_size == size  # the lines of the failed batch are gone
    assert not db.in_transaction
    assert (store.failed_batches, store.failed_spans) == (100, 100)
    assert list((tmp_path / "spans").rglob("*.jsonl")) == [segment]
    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        assert store.report_write_failure(info.value)
        assert store.report_write_failure(info.value)  # once per cause
        db.execute("PRAGMA max_page_count=1073741823")
        store.write_batch([record(2)], [(payload_digest(blob), blob)])
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2 and DISK_FULL in messages[0] and "works again" in messages[1]
    store.close()
    assert [t.trace_id for t in assert_every_line_indexed(tmp_path)] == [f"{2:032x}", f"{1:032x}"]
    with contextlib.closing(StoreReader(tmp_path)) as reader:
        assert reader.get_payload(payload_digest(blob)) == blob


class CommitThenFail:
    """A connection whose COMMIT commits and then reports an I/O error of the kind a failed fsync gives."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        cursor = self.db.execute(sql, *args)
        if sql == "COMMIT":
            exc = sqlite3.OperationalError("disk I/O error")
            exc.sqlite_errorcode = 4 << 8 | 10  # type: ignore[attr-defined]  # SQLITE_IOERR_FSYNC
            raise exc
        return cursor


@pytest.mark.parametrize("held", [0.01, None])
def test_an_index_locked_for_an_instant_gets_the_batch_once_it_is_free(tmp_path: Path, held: float | None) -> None:
    """Another process holding the index at the instant SQLite does not wait for it: the batch is written again a
    moment later. A lock that stays is a failed batch, counted, with nothing of it left in the store."""
    store = LocalStore(tmp_path, durable=False)
    assert store.write_batch([record(0)]) == []
    db = store._connect(create=False)
    assert db is not None
    db.execute("PRAGMA busy_timeout=0")  # the instant SQLite does not wait out, made every time
    other = sqlite3.connect(tmp_path / INDEX, isolation_level=None, check_same_thread=False)
    try:
        other.execute("BEGIN IMMEDIATE")
        if held is None:
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                store.write_batch([record(1)])
            assert (store.failed_batches, store.failed_spans) == (1, 1)
            other.execute("ROLLBACK")
        else:
            timer = threading.Timer(held, other.execute, ("ROLLBACK",))
            timer.start()
            assert store.write_batch([record(1)]) == []
            timer.join()
            assert (store.failed_batches, store.failed_spans) == (0, 0)
    finally:
        other.close()
        store.close()
    stored = assert_every_line_indexed(tmp_path)
    assert len(stored) == (1 if held is None else 2)


def test_a_lock_sqlite_already_waited_for_is_not_waited_for_again(tmp_path: Path) -> None:
    """The index stayed locked through SQLite's whole busy timeout: the batch fails then, with no second wait."""
    store = LocalStore(tmp_path, durable=False)
    assert store.write_batch([record(0)]) == []
    db = store._connect(create=False)
    assert db is not None
    db.execute("PRAGMA busy_timeout=1200")  # SQLite's own wait, longer than a lock it does not wait out
    other = sqlite3.connect(tmp_path / INDEX, isolation_level=None)
    attempts = 0
    write_checked = store._write_checked

    def counted(*args: Any) -> None:
        nonlocal attempts
        attempts += 1
        write_checked(*args)

    store._write_checked = counted  # type: ignore[method-assign]
    try:
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            store.write_batch([record(1)])
        assert attempts == 1
        assert (store.failed_batches, store.failed_spans) == (1, 1)
        other.execute("ROLLBACK")
    finally:
        other.close()
        store.close()


def test_a_commit_that_may_have_committed_keeps_its_lines(tmp_path: Path) -> None:
    store = LocalStore(tmp_path, durable=False)
    store.write_batch([record(1)])
    db = store._connect(create=True)
    assert db is not None
    store._db = CommitThenFail(db)  # type: ignore[assignment]
    with pytest.raises(sqlite3.OperationalError):
        store.write_batch([record(2)])
    store._db = db
    store.write_batch([record(3)])
    store.close()
    # the index holds the "failed" batch: its line must still be there, whole, and later lines after it
    assert len(assert_every_line_indexed(tmp_path)) == 3


class CommitFailsUntold:
    """A connection whose COMMIT commits (or rolls back) and then raises an I/O error with no code, as Python 3.10
    raises every error: the message alone does not say whether the batch is in the index."""

    def __init__(self, db: sqlite3.Connection, commits: bool) -> None:
        self.db = db
        self.commits = commits

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql != "COMMIT":
            return self.db.execute(sql, *args)
        self.db.execute("COMMIT" if self.commits else "ROLLBACK")
        raise sqlite3.OperationalError("disk I/O error")


@pytest.mark.parametrize("commits", [True, False], ids=["committed", "rolled-back"])
def test_a_commit_error_without_a_code_keeps_the_lines_only_when_indexed(tmp_path: Path, commits: bool) -> None:
    store = LocalStore(tmp_path, durable=False)
    store.write_batch([record(1)])
    db = store._connect(create=True)
    assert db is not None
    store._db = CommitFailsUntold(db, commits)  # type: ignore[assignment]
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        store.write_batch([record(2)])
    store._db = db
    store.write_batch([record(3)])
    store.close()
    # every line is one the index points to: the batch's line is kept when it was committed, cut when it was not
    assert len(assert_every_line_indexed(tmp_path)) == (3 if commits else 2)


def test_failures_that_are_not_the_stores_are_left_to_the_caller(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    assert not store.report_write_failure(ValueError("a bug"))
    assert not store.report_write_failure(sqlite3.ProgrammingError("a bug"))


def test_an_unknown_cause_is_reported_with_its_own_text(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = LocalStore(tmp_path)
    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        assert store.report_write_failure(sqlite3.DatabaseError("database disk image is malformed"))
        assert store.report_write_failure(OSError(5, "Input/output error"))
        assert store.report_write_failure(OSError(5, "Input/output error"))
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert "DatabaseError: database disk image is malformed" in messages[0] and str(tmp_path) in messages[0]
    assert "OSError: [Errno 5] Input/output error" in messages[1]


def test_a_segment_that_never_held_a_stored_line_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    store = LocalStore(tmp_path, durable=True)
    monkeypatch.setattr(os, "fsync", no_space)
    for i in range(100):
        with pytest.raises(OSError, match="No space") as info:
            store.write_batch([record(i)])
    assert list((tmp_path / "spans").rglob("*.jsonl")) == []
    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        assert store.report_write_failure(info.value)
    [message] = [r.getMessage() for r in caplog.records]
    assert DISK_FULL in message and "OSError: [Errno 28]" in message
    monkeypatch.undo()
    store.write_batch([record(1000)])
    store.close()
    assert len(assert_every_line_indexed(tmp_path)) == 1
    assert len(list((tmp_path / "spans").rglob("*.jsonl"))) == 1


@pytest.fixture(autouse=True)
def plain_store_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read, size or damage segment bytes by hand: the store writes them as plain JSON lines here
    (tests/unit/store/test_compression.py covers the compressed form)."""
    monkeypatch.setenv("CHRONICLE_STORE_COMPRESS", "false")


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="symbolic links")
@pytest.mark.parametrize("linked", ["day", "spans"])
def test_a_span_folder_that_is_a_link_is_never_written_through(tmp_path: Path, linked: str) -> None:
    import time

    store_dir, outside = tmp_path / "store", tmp_path / "outside"
    outside.mkdir()
    store_dir.mkdir()
    day = time.strftime("%Y-%m-%d", time.gmtime())
    if linked == "day":
        (store_dir / "spans").mkdir()
        os.symlink(outside, store_dir / "spans" / day)
    else:
        os.symlink(outside, store_dir / "spans")
    store = LocalStore(store_dir, durable=False)
    with pytest.raises(chronicle.StoreError, match="symbolic link or leads outside") as caught:
        store.write_batch([record(1)])
    assert str(store_dir / "spans") in str(caught.value)
    assert store.failed_spans == 1  # counted, and reported by the exporter once
    store.close()
    assert list(outside.rglob("*")) == []
    with contextlib.closing(StoreReader(store_dir)) as reader:
        assert reader.list_traces() == []  # nothing indexed that could not be read back


def test_a_segment_name_taken_by_a_link_is_never_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    store = LocalStore(tmp_path / "store", durable=False)
    store.write_batch([record(1)])
    [segment] = list((tmp_path / "store" / "spans").rglob("*.jsonl"))
    store.close()
    monkeypatch.setattr(os, "urandom", lambda n: bytes.fromhex(segment.name.split("-")[-1][:8]))
    monkeypatch.setattr(os, "getpid", lambda: int(segment.name.split("-")[1]))
    monkeypatch.setattr(
        "time.strftime", lambda fmt, *a: segment.name.split("-")[0] if fmt == "%H%M%S" else segment.parent.name
    )
    segment.unlink()
    os.symlink(victim, segment)
    store = LocalStore(tmp_path / "store", durable=False)
    with pytest.raises(OSError):
        store.write_batch([record(2)])
    store.close()
    assert victim.read_text() == "precious"
