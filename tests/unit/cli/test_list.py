"""``chronicle list``: filters answered by the index (status, root, time, id prefix) and by reading the traces
(session variables, payload text), a readable table, and JSON."""

from __future__ import annotations

import argparse
import calendar
import json

import pytest

from chronicle_otel.cli import _list
from tests.conftest import Recorder, make_recorder
from tests.unit.agents import record_support
from tests.unit.cli.command import run


@pytest.fixture
def runs(recorder: Recorder) -> dict[str, str]:
    return {
        "alice": record_support(recorder, "I want a refund", user="alice", plan="pro"),
        "bob": record_support(recorder, "refund me big", amount="500", user="bob"),
        "carol": record_support(recorder, "where is my parcel " + "padding " * 2000 + "NEEDLE-7", user="carol"),
    }


def rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines()[1:]]


def test_the_table_says_ok_or_error_never_unset(recorder: Recorder, runs: dict[str, str]) -> None:
    code, out, err = run("list", "--store", str(recorder.path))
    assert code == 0 and err == ""
    header, *_lines = out.splitlines()
    assert header.split() == ["ID", "STATUS", "STARTED", "(UTC)", "DURATION", "BOUNDARIES", "ROOT"]
    table = rows(out)
    assert [r[0] for r in table] == [runs["carol"][:8], runs["bob"][:8], runs["alice"][:8]]  # newest first
    assert [r[1] for r in table] == ["OK", "ERROR", "OK"]
    assert "UNSET" not in out
    assert all(r[-1] == "cli.support" for r in table)
    assert [r[-2] for r in table] == ["4", "4", "4"]  # support, classify, search, refund
    assert all(r[2].count("-") == 2 and r[3].count(":") == 2 for r in table)  # date and time
    assert all(r[5] in ("µs", "ms", "s") for r in table)  # "1.3 ms"


def test_index_filters_failed_root_since_and_prefix(recorder: Recorder, runs: dict[str, str]) -> None:
    store = str(recorder.path)
    assert [r[0] for r in rows(run("list", "--store", store, "--failed")[1])] == [runs["bob"][:8]]
    assert len(rows(run("list", "--store", store, "--root", "cli.support")[1])) == 3
    assert len(rows(run("list", "--store", store, "--root", "cli.sup*")[1])) == 3
    code, out, err = run("list", "--store", store, "--root", "other")
    assert code == 0 and out == "" and "no trace matches" in err
    assert len(rows(run("list", "--store", store, "--since", "1h")[1])) == 3
    code, out, err = run("list", "--store", store, "--since", "2999-01-01")
    assert out == "" and "no trace matches" in err
    assert [r[0] for r in rows(run("list", "--store", store, runs["bob"][:6])[1])] == [runs["bob"][:8]]
    assert len(rows(run("list", "--store", store, "-n", "2")[1])) == 2


def test_where_matches_session_variables(recorder: Recorder, runs: dict[str, str]) -> None:
    store = str(recorder.path)
    code, out, _ = run("list", "--store", store, "--where", "session.user=bob")
    assert code == 0 and [r[0] for r in rows(out)] == [runs["bob"][:8]]
    code, out, _ = run("list", "--store", store, "--where", "session.user=alice", "--where", "session.plan=pro")
    assert [r[0] for r in rows(out)] == [runs["alice"][:8]]
    code, out, err = run("list", "--store", store, "--where", "session.user=alice", "--where", "session.plan=free")
    assert out == "" and "no trace matches" in err
    code, _, err = run("list", "--store", store, "--where", "user=bob")
    assert code == 2 and "expected session.KEY=VALUE" in err


def test_contains_searches_payloads_whole_even_when_cut_on_the_span(recorder: Recorder, runs: dict[str, str]) -> None:
    store = str(recorder.path)
    code, out, _ = run("list", "--store", store, "--contains", "needle-7")  # case-insensitive, past the cut
    assert code == 0 and [r[0] for r in rows(out)] == [runs["carol"][:8]]
    code, out, _ = run("list", "--store", store, "--contains", "too large")  # in an error
    assert [r[0] for r in rows(out)] == [runs["bob"][:8]]
    code, out, _ = run("list", "--store", store, "--contains", "refund", "--failed")
    assert [r[0] for r in rows(out)] == [runs["bob"][:8]]


def test_scan_bounds_what_is_read_and_says_so(recorder: Recorder, runs: dict[str, str]) -> None:
    code, out, err = run("list", "--store", str(recorder.path), "--where", "session.user=alice", "--scan", "2")
    assert code == 0 and out == ""  # alice's run is the third most recent
    assert "searched the 2 most recent traces" in err and "--scan N" in err
    code, out, err = run("list", "--store", str(recorder.path), "--where", "session.user=alice", "--scan", "3")
    assert [r[0] for r in rows(out)] == [runs["alice"][:8]] and err == ""


def test_json_lines(recorder: Recorder, runs: dict[str, str]) -> None:
    code, out, _ = run("list", "--store", str(recorder.path), "--json")
    assert code == 0
    docs = [json.loads(line) for line in out.splitlines()]
    assert [d["trace_id"] for d in docs] == [runs["carol"], runs["bob"], runs["alice"]]
    bob = docs[1]
    assert bob["status"] == "ERROR" and docs[0]["status"] == "OK"
    assert bob["root"] == "cli.support" and bob["root_kind"] == "agent"
    assert bob["boundaries"] == 4 and bob["spans"] == 4 and bob["errors"] == 2
    assert bob["session"] == {"user": "bob"} and bob["replay_of"] is None
    assert bob["duration_ms"] > 0 and bob["start"].endswith("+00:00")


def test_replays_are_hidden_then_marked(recorder: Recorder, runs: dict[str, str]) -> None:
    import chronicle_otel as chronicle

    trace = chronicle.load_trace(recorder.store, runs["alice"])
    with chronicle.replay(trace, isolate=False) as replayed:
        replayed.rerun()
    recorder.config.force_flush()
    _, out, _ = run("list", "--store", str(recorder.path))
    assert len(rows(out)) == 3 and "replay" not in out
    _, out, _ = run("list", "--store", str(recorder.path), "--replays")
    table = rows(out)
    assert len(table) == 4 and table[0][-3:] == ["replay", "of", runs["alice"][:8]]
    _, out, _ = run("list", "--store", str(recorder.path), "--replays", "--json")
    docs = [json.loads(line) for line in out.splitlines()]
    assert docs[0]["replay_of"] == runs["alice"]


def test_a_missing_store_and_an_empty_one_say_different_things(
    tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # type: ignore[arg-type]
    code, out, err = run("list")
    assert code == 2 and out == ""
    assert "no chronicle store at" in err and "configure()" in err and "CHRONICLE_HOME" in err
    code, _, err = run("list", "--store", "elsewhere")
    assert code == 2 and "no chronicle store at" in err and "--store" in err
    recorder = make_recorder(tmp_path)  # type: ignore[arg-type]
    recorder.store._connect(create=True)  # the store exists, nothing recorded yet
    code, out, err = run("list", "--store", str(recorder.path))
    assert code == 0 and out == "" and "has no traces yet" in err and "configure()" not in err


def test_since_reads_ages_and_dates() -> None:
    now = 1_800_000_000.0
    assert _list.since("2h", now=lambda: now) == int((now - 7200) * 1e9)
    assert _list.since("3d", now=lambda: now) == int((now - 3 * 86400) * 1e9)
    assert _list.since("2026-11-30") == calendar.timegm((2026, 11, 30, 0, 0, 0)) * 10**9  # UTC
    assert _list.since("2026-11-30T10:00+01:00") == _list.since("2026-11-30T09:00")
    assert _list.since("2999-01-01") == 2**63 - 1  # past what a store holds: nothing is that recent
    with pytest.raises(argparse.ArgumentTypeError, match="neither an age"):
        _list.since("yesterday")
