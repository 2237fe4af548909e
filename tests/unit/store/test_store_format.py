"""The index layouts: ``chronicle-store/2`` finds a trace's span lines through its traces row's ``ref``; a store of
``chronicle-store/1`` (lines found by trace id) is read, written, collected and vacuumed in its own layout."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import pytest

import chronicle_otel as chronicle
from chronicle_otel.errors import StoreError
from chronicle_otel.store import (
    MANIFEST,
    STORE_FORMAT,
    LocalStore,
    RetentionPolicy,
    StoreReader,
    TraceSummary,
    apply_retention,
)
from examples.stock_agent import agent
from tests.conftest import make_recorder
from tests.unit.store.earlier_index import copy_with_index

REQUEST = "Sell $1,000 of MSFT"
UNPLANNABLE = "what is the weather"  # the model cannot plan it: the run fails

# The index as chronicle-store/1 wrote it: lines by trace id, the traces row keyed by its trace id.
V1_SCHEMA = """
CREATE TABLE traces (
    trace_id TEXT PRIMARY KEY, root_span_id TEXT, root_name TEXT, root_boundary TEXT, root_boundary_kind TEXT,
    boundary_start_ns INTEGER, start_ns INTEGER, end_ns INTEGER, status TEXT, service TEXT,
    span_count INTEGER NOT NULL DEFAULT 0, error_count INTEGER NOT NULL DEFAULT 0, updated_ns INTEGER NOT NULL,
    replay_of TEXT
);
CREATE INDEX traces_by_start ON traces(start_ns);
CREATE TABLE span_lines (
    trace_id TEXT NOT NULL, segment TEXT NOT NULL, offset INTEGER NOT NULL, length INTEGER NOT NULL
);
CREATE INDEX span_lines_by_trace ON span_lines(trace_id);
CREATE TABLE payloads (hash TEXT PRIMARY KEY, size INTEGER NOT NULL, data BLOB NOT NULL);
"""
TRACE_COLUMNS = (
    "trace_id, root_span_id, root_name, root_boundary, root_boundary_kind, boundary_start_ns, start_ns, end_ns, "
    "status, service, span_count, error_count, updated_ns, replay_of"
)


def _query(store: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    with contextlib.closing(sqlite3.connect(store / "index.sqlite3")) as db:
        return db.execute(sql, params).fetchall()


def _plan(store: Path, sql: str) -> str:
    """SQLite's query plan for ``sql`` (parameters bound to NULL), as one string."""
    marks = sql.count("?")
    return " | ".join(row[-1] for row in _query(store, "EXPLAIN QUERY PLAN " + sql, *([None] * marks)))


def _listed(store: Path) -> list[TraceSummary]:
    with contextlib.closing(StoreReader(store)) as reader:
        return reader.list_traces()


def _record(store: Path, runs: int = 1) -> tuple[list[str], list[str]]:
    """Record ``runs`` successful and ``runs`` failed agent runs into ``store``; (ok ids, failed ids)."""
    recorder = make_recorder(store.parent, store=chronicle.StoreOptions(path=store, processor="simple", durable=False))
    for _ in range(runs):
        agent.run_agent(REQUEST, seed=0)
        with pytest.raises(ValueError, match="cannot plan"):
            agent.run_agent(UNPLANNABLE, seed=0)
    recorder.config.shutdown()
    reader = StoreReader(store)
    failed = [t.trace_id for t in reader.list_traces(failed=True)]
    ok = [t.trace_id for t in reader.list_traces() if t.trace_id not in failed]
    reader.close()
    return ok, failed


def _v1_copy(source: Path, target: Path) -> None:
    """``target``: the store ``source`` as chronicle-store/1 wrote it (manifest and index layout)."""
    copy_with_index(source, target, V1_SCHEMA, TRACE_COLUMNS, manifest="chronicle-store/1")


def test_a_new_store_finds_a_traces_lines_by_its_ref_through_indexes(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ok, failed = _record(store)
    assert json.loads((store / MANIFEST).read_text()) == {"format": STORE_FORMAT} == {"format": "chronicle-store/2"}
    indexes = {name for (name,) in _query(store, "SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "span_lines_by_ref" in indexes and "span_lines_by_trace" not in indexes
    # every line names its trace's row, and that row is the one of its trace id
    assert _query(
        store, "SELECT COUNT(*) FROM span_lines s JOIN traces t ON t.ref = s.trace_ref WHERE t.trace_id != s.trace_id"
    ) == [(0,)]
    assert _query(store, "SELECT COUNT(*) FROM span_lines WHERE trace_ref IS NULL") == [(0,)]
    for trace_id in ok + failed:
        assert chronicle.load_trace(store, trace_id).trace_id == trace_id
    # the look-ups by trace id the reader and the collector run search indexes, never scan span_lines
    by_ref = "trace_ref = (SELECT ref FROM traces WHERE trace_id = ?)"
    for sql in (
        f"SELECT segment, offset, length FROM span_lines WHERE {by_ref} ORDER BY rowid",
        f"DELETE FROM span_lines WHERE {by_ref}",
        "SELECT 1 FROM span_lines s WHERE s.trace_ref = (SELECT t.ref FROM traces t WHERE t.trace_id = ?)",
    ):
        plan = _plan(store, sql)
        assert "span_lines_by_ref" in plan and "SCAN s" not in plan and "SCAN span_lines" not in plan, plan
    # the newest traces are listed from an index, not by sorting every row
    latest = (
        "SELECT trace_id FROM traces WHERE replay_of IS NULL ORDER BY COALESCE(start_ns, updated_ns) DESC, trace_id"
    )
    assert "USING INDEX traces_by_time" in _plan(store, latest + " LIMIT 10")
    assert [t.trace_id for t in _listed(store)[:1]] == [_query(store, latest)[0][0]]


def test_a_store_of_format_1_is_read_written_collected_and_vacuumed_in_its_layout(tmp_path: Path) -> None:
    source = tmp_path / "source"
    ok, failed = _record(source)
    old = tmp_path / "old"
    _v1_copy(source, old)

    assert {t.trace_id for t in _listed(old)} == set(ok + failed)
    for trace_id in ok + failed:
        assert chronicle.load_trace(old, trace_id).trace_id == trace_id

    more_ok, more_failed = _record(old)  # written by this version, in the layout of the store
    new_ids = set(more_ok + more_failed) - set(ok + failed)
    assert len(new_ids) == 2
    assert json.loads((old / MANIFEST).read_text()) == {"format": "chronicle-store/1"}
    columns = {row[1] for row in _query(old, "PRAGMA table_info(span_lines)")}
    assert "trace_ref" not in columns
    assert ("span_lines_by_trace",) in _query(old, "SELECT name FROM sqlite_master WHERE type = 'index'")
    for trace_id in new_ids:
        assert chronicle.load_trace(old, trace_id).trace_id == trace_id

    report = apply_retention(old, RetentionPolicy(success_rate=0.0), grace="0s", vacuum=True)
    kept = {t.trace_id for t in _listed(old)}
    assert kept == set(more_failed) == set(failed) | (new_ids & set(more_failed))
    assert report.traces_removed == len(more_ok) == 2
    for trace_id in kept:
        assert len(chronicle.load_trace(old, trace_id).spans) > 1
    assert _query(old, "SELECT COUNT(*) FROM span_lines WHERE trace_id NOT IN (SELECT trace_id FROM traces)") == [(0,)]


def test_collecting_and_vacuuming_a_new_store_keeps_every_line_with_its_trace(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _, failed = _record(store, runs=3)
    apply_retention(store, RetentionPolicy(success_rate=0.0), grace="0s", vacuum=True)
    kept = [t.trace_id for t in _listed(store)]
    assert sorted(kept) == sorted(failed)
    more_ok, _ = _record(store)  # new traces after the collection take refs of their own
    for trace_id in kept + more_ok:
        trace = chronicle.load_trace(store, trace_id)
        assert {span.trace_id for span in trace.spans} == {trace_id}
    assert _query(
        store,
        "SELECT COUNT(*) FROM span_lines s LEFT JOIN traces t ON t.ref = s.trace_ref "
        "WHERE t.trace_id IS NULL OR t.trace_id != s.trace_id",
    ) == [(0,)]


def test_a_manifest_of_format_2_over_an_index_of_format_1_is_written_in_the_index_layout(tmp_path: Path) -> None:
    source = tmp_path / "source"
    _record(source)
    odd = tmp_path / "odd"
    _v1_copy(source, odd)
    (odd / MANIFEST).write_text(json.dumps({"format": STORE_FORMAT}))
    store = LocalStore(odd, durable=False)
    assert store.list_traces()
    store.close()
    ok, _ = _record(odd)
    for trace_id in ok:
        assert chronicle.load_trace(odd, trace_id).trace_id == trace_id


@pytest.mark.parametrize("value", [["chronicle-store/2"], {"v": 2}, 2, None, True])
def test_a_manifest_whose_format_is_not_text_is_refused_by_name(tmp_path: Path, value: object) -> None:
    (tmp_path / MANIFEST).write_text(json.dumps({"format": value}))
    with contextlib.closing(StoreReader(tmp_path)) as reader, pytest.raises(StoreError, match="not a chronicle store"):
        reader.list_traces()
    with (
        contextlib.closing(LocalStore(tmp_path, durable=False)) as store,
        pytest.raises(StoreError, match="not a chronicle store"),
    ):
        store.list_traces()


def test_the_first_writer_of_a_manifest_wins(tmp_path: Path) -> None:
    (tmp_path / MANIFEST).write_text(json.dumps({"format": "chronicle-store/1"}))
    store = LocalStore(tmp_path, durable=False)
    store._create()  # what a second process creating the store at the same moment does
    assert json.loads((tmp_path / MANIFEST).read_text()) == {"format": "chronicle-store/1"}
    assert not list(tmp_path.glob(".*.tmp"))
    store.close()


def test_lines_an_earlier_version_wrote_into_this_layout_are_found_and_collected(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ok, failed = _record(store, runs=2)
    # an earlier version writing into this layout (it created the store at the same moment as this one): its lines
    # have no ref, and its manifest names the earlier format
    with contextlib.closing(sqlite3.connect(store / "index.sqlite3")) as db, db:
        db.execute("UPDATE span_lines SET trace_ref = NULL WHERE trace_id IN (?, ?)", (ok[0], failed[0]))
    (store / MANIFEST).write_text(json.dumps({"format": "chronicle-store/1"}))
    counts = {t: len(chronicle.load_trace(store, t).spans) for t in ok + failed}
    assert all(n > 1 for n in counts.values())

    writer = LocalStore(store, durable=False)
    writer.list_traces()  # opening the index to write names its layout: earlier versions now refuse the store
    assert json.loads((store / MANIFEST).read_text()) == {"format": STORE_FORMAT}
    writer.close()

    apply_retention(store, RetentionPolicy(success_rate=0.0), grace="0s")
    assert sorted(t.trace_id for t in _listed(store)) == sorted(failed)
    assert _query(store, "SELECT COUNT(*) FROM span_lines WHERE trace_id NOT IN (SELECT trace_id FROM traces)") == [
        (0,)
    ]
    for trace_id in failed:
        assert len(chronicle.load_trace(store, trace_id).spans) == counts[trace_id]


def test_a_line_pointed_at_another_traces_ref_is_not_handed_over_or_deleted_with_it(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ok, failed = _record(store)
    (kept,), (removed,) = failed, ok
    with contextlib.closing(sqlite3.connect(store / "index.sqlite3")) as db, db:
        db.execute(
            "UPDATE span_lines SET trace_ref = (SELECT ref FROM traces WHERE trace_id = ?) WHERE trace_id = ?",
            (removed, kept),
        )
    reader = StoreReader(store)
    assert {span["traceId"] for span in reader.read_spans(removed)} == {removed}
    reader.close()
    before = _query(store, "SELECT COUNT(*) FROM span_lines WHERE trace_id = ?", kept)
    apply_retention(store, RetentionPolicy(success_rate=0.0), grace="0s")
    assert [t.trace_id for t in _listed(store)] == [kept]
    assert _query(store, "SELECT COUNT(*) FROM span_lines WHERE trace_id = ?", kept) == before
