"""Values recorded as unencodable placeholders are never silent: said once at record time with the remedy,
counted, put on the span, marked by ``chronicle list``, a divergence when a stub would answer with one (even nested
inside a rebuilt object), and refused by ``gen-test`` unless told ``--allow-unreplayable``."""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from typing import Any

import pytest

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel._internal.unreplayable import classes_in, remedy
from tests.conftest import Recorder
from tests.unit.cli.command import run


class Handle:
    """A value the codec cannot record typed (an SDK's response wrapper stands for it)."""

    def __repr__(self) -> str:
        return "<Handle>"


@dataclasses.dataclass
class Reply:
    text: str
    raw: Any


@chronicle.boundary(kind="llm", name="unrep.plan")
def plan(request: str) -> Reply:
    return Reply(text=f"plan for {request}", raw=Handle())


@chronicle.boundary(kind="llm", name="unrep.typed")
def typed(request: str) -> Reply:
    return Reply(text=request, raw={"ok": True})


@chronicle.boundary(kind="agent", name="unrep.agent")
def agent(request: str) -> str:
    reply = plan(request)
    return reply.text + ("" if isinstance(reply.raw, Handle) else " (raw lost)") + typed(request).text


def test_classes_are_found_in_encoded_payloads_only_where_the_codec_wrote_a_placeholder() -> None:
    data = chronicle.codec.encode({"a": Handle(), "b": [threading.Lock(), Handle()], "c": '{"$type":"unencodable"'})
    assert classes_in(data) == (f"{__name__}.Handle", "_thread.lock")
    assert classes_in(chronicle.codec.encode({"text": '{"$type":"unencodable","class":"x"}'})) == ()
    assert "register_type" in remedy("mylib.Thing")
    assert "integrations.openai.instrument()" in remedy("openai._legacy_response.LegacyAPIResponse")
    assert "integrations.langchain" in remedy("langchain_core.runnables.base.RunnableSequence")


def test_recording_a_placeholder_is_said_once_counted_and_put_on_the_span(
    recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        agent("sell")
        agent("buy")
    warnings = [r.getMessage() for r in caplog.records if "unencodable placeholder" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "'unrep.plan'" in warnings[0] and f"{__name__}.Handle" in warnings[0] and "register_type" in warnings[0]
    assert recorder.config.stats().unreplayable == {"unrep.plan": 2}
    spans = [s for s in recorder.spans() if s.name == "unrep.plan"]
    assert [(s.attributes or {}).get(sc.UNREPLAYABLE) for s in spans] == [(f"{__name__}.Handle",)] * 2
    assert all(sc.UNREPLAYABLE not in (s.attributes or {}) for s in recorder.spans() if s.name != "unrep.plan")


def test_a_stub_answering_with_a_placeholder_nested_in_a_rebuilt_object_is_a_divergence(recorder: Recorder) -> None:
    agent("sell")
    trace = chronicle.load_trace(recorder.path, "latest")
    [planned] = [b for b in trace.boundaries if b.name == "unrep.plan"]
    assert planned.unreplayable == (f"{__name__}.Handle",)
    assert all(not b.unreplayable for b in trace.boundaries if b.name != "unrep.plan")
    with chronicle.replay(trace, stub={"kind:llm"}) as run_:
        result = run_.rerun()
    assert result == "plan for sell (raw lost)sell", "the rebuilt Reply holds a placeholder where the Handle was"
    assert not run_.report.ok
    [finding] = [f for f in run_.report.divergences if f.kind == "unresolved"]
    assert finding.call_key[-1][0] == "unrep.plan" and "was never recorded" in str(finding)


def test_gen_test_refuses_to_stub_an_unreplayable_call_unless_told(recorder: Recorder, tmp_path: Any) -> None:
    agent("sell")
    recorder.config.force_flush()
    tid = recorder.store.list_traces(limit=1)[0].trace_id
    store = str(recorder.path)
    out_dir = str(tmp_path / "regressions")
    code, _, err = run("gen-test", tid, "--store", store, "--out", out_dir)
    assert code == 2
    assert "unrep.plan[0]" in err and f"{__name__}.Handle" in err and "--allow-unreplayable" in err
    assert not (tmp_path / "regressions").exists(), "nothing written"
    code, _, err = run("gen-test", tid, "--store", store, "--out", out_dir, "--live", "unrep.plan")
    assert code == 0, err  # the call runs live: its recording is not used
    code, _, err = run(
        "gen-test", tid, "--store", store, "--out", out_dir, "--name", "anyway", "--allow-unreplayable",
        "--allow", "mylib.", "--json",
    )  # fmt: skip
    assert code == 0, err
    source = (tmp_path / "regressions" / "test_anyway.py").read_text()
    assert 'allow=["mylib."]' in source
    code, _, err = run("gen-test", tid, "--store", store, "--out", out_dir, "--name", "bad", "--allow", "x; import os")
    assert code == 2 and "--allow" in err


def test_list_marks_traces_with_unreplayable_calls(recorder: Recorder) -> None:
    agent("sell")
    typed("only typed values")
    recorder.config.force_flush()
    code, out, err = run("list", "--store", str(recorder.path))
    assert code == 0, err
    lines = out.splitlines()
    assert "unreplayable: 1 call" in next(line for line in lines if "unrep.agent" in line)
    assert "unreplayable" not in next(line for line in lines if "unrep.typed" in line)
    code, out, err = run("list", "--store", str(recorder.path), "--json")
    documents = [json.loads(line) for line in out.splitlines()] if not out.startswith("[") else json.loads(out)
    by_root = {d["root"]: d["unreplayable"] for d in documents}
    assert by_root == {"unrep.agent": 1, "unrep.typed": 0}
