"""``chronicle diff``: two traces, or a recording and its replay, aligned by call key; exit 0 same, 1 different."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import chronicle_otel as chronicle
from tests.conftest import Recorder
from tests.unit import agents
from tests.unit.agents import record_support
from tests.unit.cli.command import run


def test_two_traces_changed_added_and_missing(recorder: Recorder) -> None:
    a = record_support(recorder, "refund please", refunds=2)
    b = record_support(recorder, "refund me now", refunds=1, amount="500")
    code, out, err = run("diff", a[:8], b[:8], "--store", str(recorder.path))
    assert code == 1 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith(f"a: {a}  cli.support  OK  ") and lines[1].startswith(f"b: {b}  cli.support  ERROR")
    assert "~ changed  agent     cli.support[0]" in out
    assert "    status: OK -> ERROR" in out
    assert "      $.question: in a 'refund please' != in b 'refund me now'" in out
    assert "- missing  tool      cli.support[0] > cli.refund[1]" in out
    assert "    error: in a -, in b RefundError('amount 500 too large')" in out
    assert "    input: $.amount: in a '49.99' != in b '500'" in out
    assert "~ changed  retrieval" not in out  # the same query, the same documents
    assert lines[-1] == "different: 1 call the same, 3 changed, 0 added, 1 missing"
    code, out, _ = run("diff", b, a, "--store", str(recorder.path))
    assert code == 1 and "+ added    tool      cli.support[0] > cli.refund[1]" in out


def test_the_same_trace_is_the_same(recorder: Recorder) -> None:
    a = record_support(recorder, "refund please")
    code, out, _ = run("diff", a, a, "--store", str(recorder.path))
    assert code == 0 and out.splitlines()[-1] == "the same: 4 calls the same, 0 changed, 0 added, 0 missing"


def test_a_recording_and_its_replay(recorder: Recorder) -> None:
    recorded = record_support(recorder, "refund me big", amount="500")
    trace = chronicle.load_trace(recorder.store, recorded)
    with (
        chronicle.replay(trace, stub={"kind:llm", "cli.refund"}, isolate=False) as replayed,
        pytest.raises(agents.RefundError),
    ):
        replayed.rerun()
    recorder.config.force_flush()
    [summary] = recorder.store.list_traces(replay_of=recorded)
    store = str(recorder.path)
    for args in ((summary.trace_id,), (recorded,), (recorded, summary.trace_id)):
        code, out, _ = run("diff", *args, "--store", store)
        assert code == 0, out
        assert out.splitlines()[1].endswith(f"replay of {recorded[:8]}")
        assert out.splitlines()[-1].startswith("the same: 4 calls the same")
    other = record_support(recorder, "refund please")
    code, out, _ = run("diff", recorded, other, "--store", store, "--json")
    assert code == 1
    doc = json.loads(out)
    assert doc["a"]["trace_id"] == recorded and doc["b"]["trace_id"] == other
    assert (doc["same"], doc["changed"], doc["added"], doc["missing"]) == (1, 3, 0, 0)
    [support] = [c for c in doc["changes"] if c["name"] == "cli.support"]
    assert support["change"] == "changed" and support["details"]["status"] == ["ERROR -> OK"]
    assert "$.amount: in a '500' != in b '49.99'" in support["details"]["input"]
    code, _, err = run("diff", other, "--store", store)
    assert code == 2 and "is not a replay and has no replay in the store" in err


def test_the_changes_of_a_replay_read_recorded_and_now(recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = record_support(recorder, "refund please")
    trace = chronicle.load_trace(recorder.store, recorded)
    monkeypatch.setattr(agents.Refund, "__init__", _note_changed)
    with chronicle.replay(trace, stub={"kind:llm"}, isolate=False) as replayed:
        replayed.rerun()
    recorder.config.force_flush()
    code, out, _ = run("diff", recorded, "--store", str(recorder.path))
    assert code == 1
    assert "$.note: recorded 'ok' != now 'changed'" in out


def _note_changed(self: agents.Refund, refunded: object, note: str, channel: object = None) -> None:
    self.refunded, self.note, self.channel = refunded, "changed", channel or agents.Channel.CHAT  # type: ignore[assignment]


def test_trace_files_compare_too(recorder: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = record_support(recorder, "refund please")
    b = record_support(recorder, "refund please")
    file_a = chronicle.write_trace(chronicle.load_trace(recorder.store, a), tmp_path / "a.jsonl")
    file_b = chronicle.write_trace(chronicle.load_trace(recorder.store, b), tmp_path / "b.jsonl")
    monkeypatch.setenv("CHRONICLE_HOME", str(tmp_path / "none"))  # no local store: the files are enough
    code, out, _ = run("diff", str(file_a), str(file_b))
    assert code == 0 and out.startswith(f"a: {a}")
    code, out, _ = run("diff", str(file_a), b, "--store", str(recorder.path))  # a file and a stored trace
    assert code == 0
    code, _, err = run("diff", str(tmp_path / "missing.jsonl"), a, "--store", str(recorder.path))
    assert code == 2 and "not a trace id" in err
