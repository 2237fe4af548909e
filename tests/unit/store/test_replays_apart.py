"""Replays recorded into the real store (``replay(..., isolate=False)``) are kept apart from production runs: indexed
with the trace id they reran, hidden from listings and from ``latest`` / ``latest-failed``, marked by the CLI; an
index written before the distinction still reads, and gains the column when a writer opens it."""

from __future__ import annotations

import contextlib
import io
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest

import chronicle_otel as chronicle
from chronicle_otel.cli import main
from chronicle_otel.errors import StoreError
from chronicle_otel.store import LocalStore, StoreReader
from examples.stock_agent import agent
from tests.conftest import Recorder, make_recorder
from tests.unit.store.earlier_index import copy_with_index

REQUEST = "Sell $1,000 of MSFT"
UNPLANNABLE = "what is the weather"  # the model cannot plan it: the run fails

# The index as written before replays were told apart (the traces table has no replay_of column).
OLD_SCHEMA = """
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
OLD_TRACE_COLUMNS = (
    "trace_id, root_span_id, root_name, root_boundary, root_boundary_kind, boundary_start_ns, start_ns, end_ns, "
    "status, service, span_count, error_count, updated_ns"
)


@dataclass(frozen=True)
class Runs:
    """Trace ids, oldest first: a successful run, a failed one, then a replay of each (the replay of the failed run
    fails too, and is the newest trace of the store)."""

    ok: str
    failed: str
    ok_replay: str
    failed_replay: str


def cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(args), out=out)
    return code, out.getvalue()


def newest(store: StoreReader) -> str:
    return store.list_traces(limit=1, include_replays=True)[0].trace_id


def replay_into_the_store(store: StoreReader, trace_id: str) -> str:
    """Replay the recorded run ``trace_id`` into the configured (real) store; the replay's trace id."""
    trace = chronicle.load_trace(store, trace_id)
    before = {t.trace_id for t in store.list_traces(include_replays=True)}
    with chronicle.replay(trace, isolate=False) as run:
        try:
            run.rerun()
        except ValueError:
            assert trace.root is not None and trace.root.status == "ERROR"  # the recorded failure, replayed
    assert run.report.ok, run.report
    [replayed] = {t.trace_id for t in store.list_traces(include_replays=True)} - before
    assert newest(store) == replayed
    return replayed


def record_and_replay(recorder: Recorder) -> Runs:
    store = recorder.store
    agent.run_agent(REQUEST, seed=0)
    ok = newest(store)
    with pytest.raises(ValueError, match="cannot plan"):
        agent.run_agent(UNPLANNABLE, seed=0)
    failed = newest(store)
    ok_replay = replay_into_the_store(store, ok)
    failed_replay = replay_into_the_store(store, failed)
    recorder.config.force_flush()
    return Runs(ok, failed, ok_replay, failed_replay)


@pytest.fixture
def runs(recorder: Recorder) -> Runs:
    return record_and_replay(recorder)


def test_a_replay_is_stored_with_the_trace_id_it_reran(recorder: Recorder, runs: Runs) -> None:
    store = recorder.store
    for replayed, recorded in ((runs.ok_replay, runs.ok), (runs.failed_replay, runs.failed)):
        summary = store.trace_summary(replayed)
        assert summary is not None and summary.replay_of == recorded
        assert summary.root_boundary == "run_agent"
    for recorded in (runs.ok, runs.failed):
        summary = store.trace_summary(recorded)
        assert summary is not None and summary.replay_of is None
    assert store.trace_summary(runs.failed_replay).failed  # type: ignore[union-attr]
    assert store.trace_summary(runs.failed).failed  # type: ignore[union-attr]


def test_listings_hide_replays_unless_asked(recorder: Recorder, runs: Runs) -> None:
    for store in (recorder.store, StoreReader(recorder.path)):
        assert [t.trace_id for t in store.list_traces()] == [runs.failed, runs.ok]
        assert [t.trace_id for t in store.list_traces(failed=True)] == [runs.failed]
        assert [t.trace_id for t in store.list_traces(failed=False)] == [runs.ok]
        everything = store.list_traces(include_replays=True)
        assert [t.trace_id for t in everything] == [runs.failed_replay, runs.ok_replay, runs.failed, runs.ok]
        assert [t.replay_of for t in everything] == [runs.failed, runs.ok, None, None]
        failed = store.list_traces(failed=True, include_replays=True)
        assert [t.trace_id for t in failed] == [runs.failed_replay, runs.failed]
        assert [t.trace_id for t in store.list_traces(limit=1, include_replays=True)] == [runs.failed_replay]
        store.close()


def test_latest_and_latest_failed_skip_replays(recorder: Recorder, runs: Runs) -> None:
    assert newest(recorder.store) == runs.failed_replay  # a failed replay is the newest trace of all
    for source in (recorder.store, StoreReader(recorder.path), recorder.path):
        assert chronicle.load_trace(source, "latest").trace_id == runs.failed
        assert chronicle.load_trace(source, "latest-failed").trace_id == runs.failed
        for replayed in (runs.ok_replay, runs.failed_replay):
            assert chronicle.load_trace(source, replayed).trace_id == replayed  # named explicitly, it loads
        if isinstance(source, StoreReader):
            source.close()


def test_cli_list_hides_replays_and_marks_them_with_replays(recorder: Recorder, runs: Runs) -> None:
    store = str(recorder.path)
    code, out = cli("list", "--store", store)
    assert code == 0
    lines = out.splitlines()
    assert [line.split()[0] for line in lines[1:]] == [runs.failed[:8], runs.ok[:8]]  # short ids
    assert "replay" not in out

    code, out = cli("list", "--store", store, "--replays")
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    short = {tid: tid[:8] for tid in (runs.failed_replay, runs.ok_replay, runs.failed, runs.ok)}
    assert list(rows) == [short[runs.failed_replay], short[runs.ok_replay], short[runs.failed], short[runs.ok]]
    assert rows[short[runs.ok_replay]].endswith(f"replay of {runs.ok[:8]}")
    failed_replay = rows[short[runs.failed_replay]]
    assert failed_replay.endswith(f"replay of {runs.failed[:8]}") and failed_replay.split()[1] == "ERROR"
    assert "replay" not in rows[short[runs.ok]] and "replay" not in rows[short[runs.failed]]

    code, out = cli("list", "--store", store, "--replays", "--failed")
    assert [line.split()[0] for line in out.splitlines()[1:]] == [runs.failed_replay[:8], runs.failed[:8]]


def test_cli_latest_skips_replays_and_show_labels_one(recorder: Recorder, runs: Runs) -> None:
    store = str(recorder.path)
    for alias in ("latest", "latest-failed"):
        code, out = cli("show", alias, "--store", store)
        assert code == 0
        first = out.splitlines()[0]
        assert first.startswith(f"trace {runs.failed}  (") and "replay" not in out
    for replayed, recorded in ((runs.ok_replay, runs.ok), (runs.failed_replay, runs.failed)):
        code, out = cli("show", replayed, "--store", store)
        assert code == 0
        assert out.splitlines()[0].startswith(f"trace {replayed}  replay of {recorded}  (")
        assert "agent     run_agent[0]" in out


def test_a_replay_saved_to_a_file_is_still_labelled(
    recorder: Recorder, runs: Runs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = chronicle.write_trace(chronicle.load_trace(recorder.store, runs.ok_replay), tmp_path / "replay.jsonl")
    monkeypatch.setenv("CHRONICLE_HOME", str(tmp_path / "nowhere"))  # the file alone: no local store
    code, out = cli("show", "latest", "--file", str(path))
    assert code == 0
    assert out.splitlines()[0].startswith(f"trace {runs.ok_replay}  replay of {runs.ok}  (")


def test_gc_keeps_working_with_replays(recorder: Recorder, runs: Runs) -> None:
    recorder.config.force_flush()
    code, out = cli("gc", "--store", str(recorder.path), "--success-rate", "0", "--grace", "0", "--json")
    assert code == 0, out
    kept = recorder.store.list_traces(include_replays=True)
    assert {t.trace_id for t in kept} == {runs.failed, runs.failed_replay}  # every failure kept, successes gone
    assert recorder.store.trace_summary(runs.failed_replay).replay_of == runs.failed  # type: ignore[union-attr]
    assert [t.trace_id for t in recorder.store.list_traces()] == [runs.failed]


# ------------------------------------------------------------------ an index of the earlier schema


def columns(path: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(path / "index.sqlite3")) as db:
        return [row[1] for row in db.execute("PRAGMA table_info(traces)")]


def old_store_from(source: Path, target: Path) -> None:
    """``target``: the traces of the store ``source``, indexed with the earlier schema (no replay_of column)."""
    copy_with_index(source, target, OLD_SCHEMA, OLD_TRACE_COLUMNS)


def test_an_index_of_the_earlier_schema_lists_loads_and_gains_the_column(tmp_path: Path) -> None:
    recorder = make_recorder(tmp_path / "recording")
    agent.run_agent(REQUEST, seed=0)
    with pytest.raises(ValueError, match="cannot plan"):
        agent.run_agent(UNPLANNABLE, seed=0)
    recorded = [t.trace_id for t in recorder.store.list_traces()]
    assert len(recorded) == 2
    recorder.config.shutdown()
    old = tmp_path / "old-store"
    old_store_from(recorder.path, old)
    assert "replay_of" not in columns(old)

    # read-only: every trace is a production run, and nothing is changed
    reader = StoreReader(old)
    summaries = reader.list_traces()
    assert [t.trace_id for t in summaries] == recorded
    assert [t.replay_of for t in summaries] == [None, None]
    assert [t.trace_id for t in reader.list_traces(include_replays=True)] == recorded
    assert reader.trace_summary(recorded[1]) == summaries[1]
    assert chronicle.load_trace(reader, "latest").trace_id == recorded[0]
    assert chronicle.load_trace(old, "latest-failed").trace_id == recorded[0]
    assert chronicle.load_trace(old, recorded[1]).root.name == "run_agent"  # type: ignore[union-attr]
    reader.close()
    code, out = cli("list", "--store", str(old), "--replays")
    assert code == 0 and [line.split()[0] for line in out.splitlines()[1:]] == [tid[:8] for tid in recorded]
    assert "replay_of" not in columns(old)

    # a writer adds the column; the rows indexed before it stay production runs
    writer = LocalStore(old, durable=False)
    assert [t.trace_id for t in writer.list_traces()] == recorded
    writer.close()
    assert columns(old)[-1] == "replay_of"
    again = LocalStore(old, durable=False)  # opening an upgraded index again changes nothing
    assert [t.trace_id for t in again.list_traces(include_replays=True)] == recorded
    again.close()
    assert columns(old).count("replay_of") == 1

    # and a replay recorded into it now is kept apart
    upgraded = make_recorder(
        tmp_path / "upgraded", store=chronicle.StoreOptions(path=old, processor="simple", durable=False)
    )
    replayed = replay_into_the_store(upgraded.store, recorded[1])
    assert upgraded.store.trace_summary(replayed).replay_of == recorded[1]  # type: ignore[union-attr]
    assert [t.trace_id for t in upgraded.store.list_traces()] == recorded
    assert chronicle.load_trace(upgraded.store, "latest").trace_id == recorded[0]


def test_a_replay_of_that_is_not_text_is_refused_by_name(recorder: Recorder, runs: Runs) -> None:
    recorder.config.shutdown()
    with contextlib.closing(sqlite3.connect(recorder.path / "index.sqlite3")) as db, db:
        db.execute("UPDATE traces SET replay_of = X'07' WHERE trace_id = ?", (runs.ok_replay,))
    reader = StoreReader(recorder.path)
    with pytest.raises(StoreError, match=r"replay_of is b'\\x07', not text"):
        reader.list_traces(include_replays=True)
    assert [t.trace_id for t in reader.list_traces()] == [runs.failed, runs.ok]  # production runs still list
    reader.close()
