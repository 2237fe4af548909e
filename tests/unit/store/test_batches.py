"""One export batch in the local store: many traces, several lines of one trace, lines the exporter already encoded,
many payloads; all of it indexed in one transaction with multi-row statements, and read back as written."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from chronicle_otel.store import LocalStore, StoreReader, TraceRecord, _compression, _local, payload_digest
from chronicle_otel.store._compression import MAGIC


def _line(trace_id: str, name: str, words: int = 40) -> bytes:
    text = " ".join(["sell", "MSFT", "at", "market", name] * words)
    span = {
        "traceId": trace_id,
        "spanId": "00000000000000aa",
        "name": name,
        "attributes": [{"key": "t", "value": {"stringValue": text}}],
    }
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()


def _record(i: int, part: int = 0, **fields: Any) -> TraceRecord:
    trace_id = f"{i:032x}"
    root = {"span_id": f"{i:016x}", "name": f"r{i}", "start_ns": 1000 + i, "end_ns": 2000 + i, "status": "OK"}
    return TraceRecord(
        trace_id,
        _line(trace_id, f"s{i}.{part}"),
        fields.get("spans", 1),
        fields.get("errors", 0),
        root if part == 0 else None,
        (f"b{i}.{part}", "llm", 1000 + i - part),
        "svc",
    )


def _names(reader: StoreReader, trace_id: str) -> list[str]:
    return [span["name"] for span in reader.read_spans(trace_id)]


@pytest.mark.parametrize("rows", [512, 64, 3])  # rows per INSERT: this SQLite's, one older than 3.32, a few
def test_a_batch_of_many_traces_and_several_lines_per_trace_reads_back_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: int
) -> None:
    monkeypatch.setattr(_local, "_ROWS_PER_INSERT", rows)
    store = LocalStore(tmp_path, durable=False)
    records = [_record(i) for i in range(200, 0, -1)]  # 200 traces, written in descending id order
    records += [_record(i, part=1, spans=2, errors=1) for i in range(1, 200, 3)]  # a second line of some
    records += [_record(i, part=2) for i in range(1, 200, 9)]  # and a third
    store.write_batch(records)
    store.write_batch([_record(5, part=3)])  # a later batch of a known trace
    with contextlib.closing(StoreReader(tmp_path)) as reader:
        summaries = {t.trace_id: t for t in reader.list_traces()}
        assert len(summaries) == 200
        ten = summaries[f"{10:032x}"]  # three lines in the first batch
        assert (ten.span_count, ten.error_count, ten.root_name, ten.status) == (1 + 2 + 1, 1, "r10", "OK")
        assert ten.root_boundary == "b10.2"  # the earliest boundary of its lines
        assert _names(reader, f"{10:032x}") == ["s10.0", "s10.1", "s10.2"]
        five = summaries[f"{5:032x}"]  # one line in each batch
        assert (five.span_count, five.root_boundary) == (2, "b5.3")
        assert _names(reader, f"{5:032x}") == ["s5.0", "s5.3"]
        assert _names(reader, f"{200:032x}") == ["s200.0"]
        assert summaries[f"{2:032x}"].span_count == 1
    store.close()


def test_lines_the_store_encoded_beforehand_are_written_as_they_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_compression, "SAMPLE_LINES", 40)
    monkeypatch.setattr(_compression, "DICT_SIZE", 8 * 1024)
    store = LocalStore(tmp_path, durable=False)
    raw = [_record(i).line for i in range(1, 5)]
    assert store.encode_lines(raw) == raw  # no dictionary yet: the lines themselves
    store.write_batch([_record(i) for i in range(1, 61)])  # trains the dictionary
    assert list((tmp_path / "dicts").glob("*.zdict"))
    encoded = store.encode_lines([_record(i).line for i in range(100, 120)])
    assert all(frame.startswith(MAGIC) for frame in encoded)
    mixed = [_record(i) for i in range(100, 140)]
    for rec, frame in zip(mixed, encoded, strict=False):
        rec.line = frame
    store.write_batch(mixed)
    with contextlib.closing(StoreReader(tmp_path)) as reader:
        for i in (100, 119, 120, 139):
            assert _names(reader, f"{i:032x}") == [f"s{i}.0"]
    segment = next((tmp_path / "spans").rglob("*.jsonl")).read_bytes()
    for frame in encoded:
        assert segment.count(frame + b"\n") == 1  # written once, not compressed again
    store.close()


def test_encoding_falls_back_to_the_lines_themselves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHRONICLE_STORE_COMPRESS", "false")
    store = LocalStore(tmp_path, durable=False)
    lines = [_record(i).line for i in range(1, 40)]
    store.write_batch([_record(i) for i in range(1, 40)])
    assert store.encode_lines(lines) == lines
    store.close()

    monkeypatch.setenv("CHRONICLE_STORE_COMPRESS", "true")
    store = LocalStore(tmp_path / "other", durable=False)

    def broken(lines: list[bytes]) -> list[bytes]:
        raise RuntimeError("no memory for the compression context")

    monkeypatch.setattr(store._compressor(), "encode", broken)
    assert store.encode_lines(lines) is lines  # write_batch compresses (and counts a failure) itself
    store.close()


def test_many_payloads_of_one_batch_are_stored_once_each(tmp_path: Path) -> None:
    store = LocalStore(tmp_path, durable=False)
    datas = [json.dumps({"n": i, "text": "x" * (i % 50)}).encode() for i in range(150)]
    payloads = [(payload_digest(d), d) for d in datas]
    store.write_batch([_record(1)], payloads + payloads[:70])  # duplicates within the batch
    store.put_payloads(payloads[100:])  # and stored before
    assert store.get_payloads([d for d, _ in payloads]) == dict(payloads)
    db = store._connect(create=False)
    assert db is not None
    assert db.execute("SELECT COUNT(*) FROM payloads").fetchone()[0] == 150
    store.close()


def test_the_writer_checkpoints_less_often(tmp_path: Path) -> None:
    store = LocalStore(tmp_path, durable=False)
    store.write_batch([_record(1)])
    db = store._connect(create=True)
    assert db is not None
    assert db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] >= 4000
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.close()


def test_the_rows_per_statement_follow_what_this_sqlite_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _local._takes_parameters(14)
    assert not _local._takes_parameters(10**7)  # beyond any build's limit
    monkeypatch.delattr(sqlite3, "SQLITE_LIMIT_VARIABLE_NUMBER", raising=False)  # Python 3.10: no getlimit()
    assert _local._takes_parameters(14)
    assert not _local._takes_parameters(10**7)
    assert (512 if _local._takes_parameters(512 * 14) else 64) == _local._ROWS_PER_INSERT


def test_a_store_removed_while_recording_is_started_again_and_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import shutil

    path = tmp_path / "store"
    writer = LocalStore(path, durable=False)
    writer.write_batch([_record(1)])
    shutil.rmtree(path)  # an operator's `rm -rf .chronicle`, a cleanup job
    with caplog.at_level("WARNING", logger="chronicle_otel"):
        writer.write_batch([_record(2)])
        writer.write_batch([_record(3)])
    assert sum("was removed while recording" in r.getMessage() for r in caplog.records) == 1
    reader = StoreReader(path)  # a new store at the path, holding what came after, readable by anyone
    try:
        assert sorted(t.trace_id for t in reader.list_traces()) == [f"{2:032x}", f"{3:032x}"]
        assert _names(reader, f"{3:032x}") == ["s3.0"]
    finally:
        reader.close()
        writer.close()
