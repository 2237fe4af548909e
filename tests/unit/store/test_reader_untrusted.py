"""A tampered store directory: every read ends in bounded time and memory with a StoreError."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
from pathlib import Path

import orjson
import pytest

import chronicle_otel as chronicle
from chronicle_otel.errors import StoreError
from chronicle_otel.store import MANIFEST, LocalStore, StoreReader, TraceRecord
from chronicle_otel.store.reader import MAX_LINE_BYTES, MAX_MANIFEST_BYTES

TID = "0af7651916cd43dd8448eb211c80319c"
needs_symlinks = pytest.mark.skipif(sys.platform == "win32", reason="symbolic links and /dev/zero")


def _line(trace_id: str) -> bytes:
    span = {
        "traceId": trace_id,
        "spanId": "b7ad6b7169203331",
        "name": "root",
        "kind": 1,
        "startTimeUnixNano": "1000",
        "endTimeUnixNano": "2000",
        "status": {},
    }
    request = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": [span]}]}]}
    return orjson.dumps(request)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store holding one trace, written by the writing side and closed."""
    path = tmp_path / "store"
    writer = LocalStore(path, durable=False)
    root = {"span_id": "b7ad6b7169203331", "name": "root", "start_ns": 1000, "end_ns": 2000, "status": "OK"}
    writer.write_batch([TraceRecord(TID, _line(TID), 1, 0, root, ("answer", "llm", 1000), "svc")])
    writer.close()
    return path


def _sql(store: Path, *statements: str) -> None:
    with contextlib.closing(sqlite3.connect(store / "index.sqlite3")) as db, db:
        for statement in statements:
            db.execute(statement)


def _segment(store: Path) -> Path:
    [segment] = sorted((store / "spans").rglob("*.jsonl"))
    return segment


def test_an_untampered_store_reads(store: Path) -> None:
    reader = StoreReader(store)
    [summary] = reader.list_traces()
    assert (summary.trace_id, summary.status, summary.span_count, summary.duration_ns) == (TID, "OK", 1, 1000)
    assert reader.trace_summary(TID) == summary
    assert [span["name"] for span in reader.read_spans(TID)] == ["root"]
    assert chronicle.load_trace(store, TID).trace_id == TID
    reader.close()


# ------------------------------------------------------------------ offsets and lengths


@pytest.mark.parametrize(
    ("offset", "length", "message"),
    [
        (0, 1_000_000_000_000, "more than"),
        (0, MAX_LINE_BYTES + 1, "more than"),
        (0, 1 << 20, "truncated"),
        (1 << 40, 10, "truncated"),
        (-1, 10, "offset"),
        ("0", 10, "offset"),
        (0, 1.5, "length"),
    ],
)
def test_index_offsets_and_lengths_are_checked_before_reading(
    store: Path, offset: object, length: object, message: str
) -> None:
    with contextlib.closing(sqlite3.connect(store / "index.sqlite3")) as db, db:
        db.execute("UPDATE span_lines SET offset=?, length=?", (offset, length))
    reader = StoreReader(store)
    with pytest.raises(StoreError, match=message):
        reader.read_requests(TID)
    reader.close()


def test_rows_repeating_one_line_are_bounded_per_trace(store: Path) -> None:
    segment = _segment(store)
    with segment.open("ab") as fh:  # a sparse segment: 64 MiB without writing them
        fh.truncate(64 << 20)
    rel = segment.relative_to(store).as_posix()
    with contextlib.closing(sqlite3.connect(store / "index.sqlite3")) as db, db:
        db.executemany(
            "INSERT INTO span_lines(trace_id, segment, offset, length, trace_ref) "
            "VALUES (?, ?, ?, ?, (SELECT ref FROM traces WHERE trace_id = ?))",
            [(TID, rel, 0, 64 << 20, TID)] * 5,
        )
    reader = StoreReader(store)
    lines = reader.iter_lines(TID)
    with pytest.raises(StoreError, match=r"bytes of span lines for trace '0af7.*', more than 268435456"):
        next(lines)  # refused before the first line is read
    reader.close()


# ------------------------------------------------------------------ segments that are not files of the store


@needs_symlinks
@pytest.mark.parametrize("target", ["/dev/zero", "outside"])
def test_segment_symlinks_are_refused(store: Path, target: str) -> None:
    outside = store.parent / "outside.jsonl"
    outside.write_bytes(_line(TID) + b"\n")
    link = store / "spans" / "zero"
    link.symlink_to(target if target.startswith("/") else outside)
    _sql(store, "UPDATE span_lines SET segment='spans/zero', offset=0, length=10")
    reader = StoreReader(store)
    with pytest.raises(StoreError, match="symbolic link"):
        reader.read_requests(TID)
    reader.close()


@needs_symlinks
def test_a_symlinked_day_directory_is_refused(store: Path) -> None:
    outside = store.parent / "elsewhere"
    outside.mkdir()
    (outside / "seg.jsonl").write_bytes(_line(TID) + b"\n")
    (store / "spans" / "day").symlink_to(outside, target_is_directory=True)
    _sql(store, "UPDATE span_lines SET segment='spans/day/seg.jsonl', offset=0, length=10")
    reader = StoreReader(store)
    with pytest.raises(StoreError, match="outside the store's spans/"):
        reader.read_requests(TID)
    reader.close()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_a_segment_that_is_a_pipe_or_directory_is_refused(store: Path) -> None:
    os.mkfifo(store / "spans" / "pipe")
    (store / "spans" / "dir").mkdir()
    reader = StoreReader(store)
    for name in ("pipe", "dir"):
        _sql(store, f"UPDATE span_lines SET segment='spans/{name}', offset=0, length=10")
        with pytest.raises(StoreError, match="not a regular file"):
            reader.read_requests(TID)
    reader.close()


# ------------------------------------------------------------------ the manifest


@needs_symlinks
def test_a_manifest_linked_to_a_device_is_refused(store: Path) -> None:
    (store / MANIFEST).unlink()
    (store / MANIFEST).symlink_to("/dev/zero")
    with pytest.raises(StoreError, match="not a regular file"):
        StoreReader(store).list_traces()


@pytest.mark.parametrize("shape", ["directory", "dangling link"] + (["pipe"] if hasattr(os, "mkfifo") else []))
def test_a_manifest_that_is_no_file_is_named_by_every_way_in(store: Path, shape: str) -> None:
    from chronicle_otel.cli import main

    (store / MANIFEST).unlink()
    if shape == "directory":
        (store / MANIFEST).mkdir()
    elif shape == "pipe":
        os.mkfifo(store / MANIFEST)
    else:
        (store / MANIFEST).symlink_to(store / "gone.json")
    with pytest.raises(StoreError, match=r"store manifest (is not a regular file|\(No such file)"):
        StoreReader(store).list_traces()
    with pytest.raises(StoreError, match=r"store manifest (is not a regular file|\(No such file)"):
        chronicle.load_trace(store, TID)
    assert main(["list", "--store", str(store)]) != 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"[" * 200_000 + b"]" * 200_000, "larger than"),
        (b"[" * 2000 + b"]" * 2000, "unreadable store manifest"),
        (b" " * (MAX_MANIFEST_BYTES + 1), "larger than"),
        (b"[1, 2]", "not a chronicle store"),
        (
            b'{"format": "chronicle-store/\\u001b[31m"}',
            r"not a chronicle store \(format 'chronicle-store/\\x1b\[31m'\)",
        ),
        (b'{"format": "chronicle-store/9"}', "newer"),
        (b"\xff\xfe", "unreadable store manifest"),
    ],
)
def test_manifests_of_the_wrong_shape(store: Path, content: bytes, message: str) -> None:
    (store / MANIFEST).write_bytes(content)
    with pytest.raises(StoreError, match=message):
        StoreReader(store).list_traces()


# ------------------------------------------------------------------ tables and query time


@pytest.mark.parametrize("table", ["traces", "span_lines", "payloads"])
def test_tables_replaced_by_endless_views_are_refused(store: Path, table: str) -> None:
    _sql(
        store,
        f"ALTER TABLE {table} RENAME TO old_{table}",
        f"CREATE VIEW {table} AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
        f"SELECT * FROM old_{table}, n",
    )
    reader = StoreReader(store)
    with pytest.raises(StoreError, match=f"'{table}' in the index is a 'view', not a table"):
        reader.list_traces()
    reader.close()


def test_a_query_past_its_deadline_is_interrupted(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _sql(
        store,
        "CREATE TABLE extra(x)",
        "INSERT INTO extra VALUES (1)",
        "CREATE TRIGGER never AFTER INSERT ON extra BEGIN SELECT 1; END",
    )
    reader = StoreReader(store)
    monkeypatch.setattr(reader, "query_timeout", 0.2)
    reader.list_traces()  # the handler is in place and normal reads finish
    db = reader._connect(create=False)
    assert db is not None
    endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"
    with pytest.raises(StoreError, match="took too long"), reader._lock, reader._reading():
        db.execute(endless).fetchall()
    assert reader.list_traces()[0].trace_id == TID  # the next read has a fresh deadline
    reader.close()


# ------------------------------------------------------------------ rows of the wrong type


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ("span_count='abc', start_ns='zz'", "start_ns is 'zz'"),
        ("span_count='abc'", "span_count is 'abc'"),
        ("start_ns=1e300", "start_ns is 1e\\+300"),
        ("end_ns=-5", "end_ns is -5"),
        ("error_count=2.5", "error_count is 2.5"),
        ("root_name=x'00ff'", "root_name is b'\\\\x00\\\\xff', not text"),
        ("status='\u001b[2J'", r"status is '\\x1b\[2J', not UNSET, OK or ERROR"),
        ("trace_id='\u001b]0;owned\u0007' || substr(trace_id, 9)", r"trace id '\\x1b\]0;owned\\x07"),
        ("trace_id=upper(trace_id)", "not 32 lowercase hex digits"),
        ("trace_id=x'00'", r"trace id b'\\x00'"),
    ],
)
def test_summary_rows_of_the_wrong_type(store: Path, update: str, message: str) -> None:
    _sql(store, f"UPDATE traces SET {update}")
    reader = StoreReader(store)
    with pytest.raises(StoreError, match=message) as info:
        reader.list_traces()
    assert str(store / "index.sqlite3") in str(info.value)
    assert "\x1b" not in str(info.value)
    reader.close()


def test_summary_errors_name_the_trace(store: Path) -> None:
    _sql(store, "UPDATE traces SET start_ns=1e300")
    reader = StoreReader(store)
    with pytest.raises(StoreError, match=f"trace {TID}: start_ns"):
        reader.trace_summary(TID)
    reader.close()


@pytest.mark.parametrize("trace_id", [12345, b"0af7651916cd43dd8448eb211c80319c", None, ["latest"]])
def test_a_trace_id_that_is_not_a_string_is_a_clear_type_error(store: Path, trace_id: object) -> None:
    with contextlib.closing(StoreReader(store)) as reader:
        for method in (reader.read_spans, reader.read_requests, reader.trace_summary):
            with pytest.raises(TypeError, match="a trace id is a str of 32 hex digits"):
                method(trace_id)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="a trace id is a str"):
            list(reader.iter_lines(trace_id))  # type: ignore[arg-type]
    if trace_id is not None:
        with pytest.raises(TypeError, match="trace_id is a str"):
            chronicle.load_trace(store, trace_id)  # type: ignore[arg-type]


def test_an_index_with_a_trigger_is_read_but_never_written(store: Path) -> None:
    from chronicle_otel.store import apply_retention

    _sql(store, "CREATE TRIGGER wipe AFTER INSERT ON span_lines BEGIN DELETE FROM payloads; END")
    with contextlib.closing(StoreReader(store)) as reader:
        assert [t.trace_id for t in reader.list_traces()] == [TID]  # reading runs no trigger
    writer = LocalStore(store, durable=False)
    with pytest.raises(StoreError, match="holds trigger 'wipe', which chronicle never creates"):
        writer.write_batch([TraceRecord("1" * 32, _line("1" * 32), 1, 0, None, None, None)])
    writer.close()
    with pytest.raises(StoreError, match="holds trigger"):
        apply_retention(store, grace=0)
