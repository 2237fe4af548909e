"""A tampered store directory: every read ends in bounded time and memory with a StoreError."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chronicle_otel as chronicle
from chronicle_otel.errors import ChronicleError, StoreError
from chronicle_otel.store import MANIFEST, LocalStore, StoreReader, TraceRecord, payload_digest
from chronicle_otel.store.reader import MAX_LINE_BYTES, MAX_MANIFEST_BYTES
from tests.unit.cli.command import run

TID = "0af7651916cd43dd8448eb211c80319c"
PAYLOAD = payload_digest(b'"an answer"')
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
    return _write_store(tmp_path / "store")


@pytest.fixture(scope="module")
def template_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """:func:`store` with a payload, once per module, for the tests that tamper with copies of it."""
    path = _write_store(tmp_path_factory.mktemp("template") / "store")
    writer = LocalStore(path, durable=False)
    writer.put_payload(PAYLOAD, b'"an answer"')
    writer.close()
    return path


def _write_store(path: Path) -> Path:
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


# ------------------------------------------------------------------ text that is not UTF-8


def _schema_tail(store: Path, table: str, tail: bytes) -> None:
    """Append ``tail`` (any bytes) to the ``CREATE TABLE`` text of ``table`` that the index's schema holds."""
    with contextlib.closing(sqlite3.connect(store / "index.sqlite3", isolation_level=None)) as db:
        db.execute("PRAGMA writable_schema=ON")
        db.execute("UPDATE sqlite_master SET sql = CAST(CAST(sql AS BLOB) || ? AS TEXT) WHERE name = ?", (tail, table))


@pytest.mark.parametrize("table", ["traces", "span_lines", "payloads"])
def test_schema_text_that_is_not_utf8_is_a_store_error_naming_the_index(store: Path, table: str) -> None:
    _schema_tail(store, table, b" \xff\xfe")  # SQLite's message on the schema quotes the bytes
    index = str(store / "index.sqlite3")
    with pytest.raises(StoreError) as info, contextlib.closing(StoreReader(store)) as reader:
        reader.list_traces()
    message = str(info.value)  # "syntax error", "unknown table option": by what precedes
    if sys.version_info >= (3, 11):
        assert message.startswith(f"{index}: unreadable store index (malformed database schema ({table}) - "), message
        assert "\\xff\\xfe" in message
    else:  # Python 3.10's sqlite3 raises the error with no message when it cannot decode SQLite's
        assert (
            message == f"{index}: unreadable store index (DatabaseError without a readable message: damaged "
            "schema or text that is not UTF-8)"
        ), message
    with pytest.raises(StoreError, match="unreadable store index") as info:
        chronicle.load_trace(store, TID)
    assert index in str(info.value)
    regressions = str(store.parent / "regressions")
    for command in (["list"], ["show", TID], ["gen-test", TID, "--out", regressions], ["gc", "--dry-run"]):
        code, out, err = run(*command, "--store", str(store))
        assert (code, out) == (2, ""), command
        assert err.startswith(f"chronicle: {index}: unreadable store index ("), err
        assert "Traceback" not in err


_TEXT_COLUMNS = [
    ("traces", "trace_id"),
    ("traces", "root_name"),
    ("traces", "status"),
    ("traces", "service"),
    ("span_lines", "segment"),
    ("span_lines", "trace_id"),
    ("payloads", "hash"),
]


@settings(max_examples=60, deadline=None)
@given(
    table=st.sampled_from(["traces", "span_lines", "payloads"]),
    tail=st.binary(max_size=8),
    column=st.sampled_from(_TEXT_COLUMNS),
    value=st.binary(max_size=8),
)
def test_bytes_in_schema_or_rows_raise_only_store_errors(
    template_store: Path, table: str, tail: bytes, column: tuple[str, str], value: bytes
) -> None:
    with tempfile.TemporaryDirectory() as work:
        store = Path(work) / "store"
        shutil.copytree(template_store, store)
        with contextlib.closing(sqlite3.connect(store / "index.sqlite3", isolation_level=None)) as db:
            db.execute(f"UPDATE {column[0]} SET {column[1]} = CAST(? AS TEXT)", (value,))
        _schema_tail(store, table, tail)
        with contextlib.closing(StoreReader(store)) as reader:
            for read in (
                reader.list_traces,
                lambda: reader.trace_summary(TID),
                lambda: reader.read_spans(TID),
                lambda: reader.get_payloads([PAYLOAD]),
                lambda: chronicle.load_trace(store, TID),
            ):
                with contextlib.suppress(ChronicleError):
                    read()
