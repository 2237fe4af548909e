"""What the spans of a replay record for a stubbed call: the input of the call made now and the recorded answer,
taken from what the replay already encoded, and still redacted by the configuration of the replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel.redact import REDACTED
from tests.conftest import make_recorder
from tests.unit.agents import record

SECRET = "sk-" + "Q" * 40


@chronicle.boundary(kind="llm", name="payloads.model")
def model(prompt: str, note: str = "") -> dict[str, Any]:
    return {"answer": prompt.upper(), "echo": f"key {SECRET}", "n": 3}


@chronicle.boundary(kind="agent", name="payloads.agent")
def agent(prompt: str, note: str = "") -> str:
    return str(model(prompt, note)["answer"])


def _stub_span(rec: Any) -> dict[str, Any]:
    [span] = [s for s in rec.spans() if s.name == "payloads.model"]
    return dict(span.attributes or {})


def test_a_stub_span_holds_the_recorded_answer_and_the_new_input(tmp_path: Path) -> None:
    rec = make_recorder(tmp_path)
    trace = record(rec, agent, "buy", note="first")
    recorded = trace.find("payloads.model")[0]
    assert recorded.raw_output is not None

    rec.memory.clear()
    with chronicle.replay(trace, stub={"kind:llm"}, isolate=False) as run:
        assert run.rerun(note="second") == "BUY"
    attrs = _stub_span(rec)
    assert attrs[sc.OUTPUT] == recorded.raw_output.text  # the recorded bytes, as recorded
    assert attrs[sc.OUTPUT_HASH] == recorded.raw_output.digest
    assert json.loads(attrs[sc.INPUT]) == {"note": "second", "prompt": "buy"}  # the call made now, not the recorded
    assert [f.kind for f in run.report.drift] == ["input-drift"]


def test_a_recording_made_without_redaction_is_redacted_in_the_replay_spans(tmp_path: Path) -> None:
    rec = make_recorder(tmp_path / "plain", redaction=False)
    trace = record(rec, agent, "sell")
    recorded = trace.find("payloads.model")[0]
    assert recorded.raw_output is not None and SECRET in recorded.raw_output.text

    rec = make_recorder(tmp_path / "redacted")  # redaction on (the default) for the replay
    with chronicle.replay(trace, stub={"kind:llm"}, isolate=False) as run:
        assert run.rerun() == "SELL"
    attrs = _stub_span(rec)
    assert SECRET not in attrs[sc.OUTPUT]
    assert json.loads(attrs[sc.OUTPUT])["echo"] == f"key {REDACTED}"
