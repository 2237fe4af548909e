"""Recordings damaged on the way (an attribute a backend dropped, a payload that does not parse, a relabelled kind, a
root input that cannot be rebuilt) never let a replay answer silently: each is a divergence, or a stub anyway."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel._internal.digest import text_digest
from chronicle_otel.errors import ReplayDivergence
from tests.conftest import Recorder

CALLS = {"plan": 0}


class Order:
    """A class the recording holds only as a placeholder."""


@chronicle.boundary(kind="llm", name="damaged.plan")
def plan(request: str) -> dict[str, Any]:
    CALLS["plan"] += 1
    return {"symbol": "MSFT", "shares": 1000}


@chronicle.boundary(kind="agent", name="damaged.agent")
def agent(request: str) -> Any:
    try:
        return plan(request)
    except Exception as exc:  # an app that falls back when the model's answer is unusable
        return f"fallback: {type(exc).__name__}"


@chronicle.boundary(kind="agent", name="damaged.typed_root")
def typed_root(order: Any) -> str:
    return type(order).__name__


def _collector_file(recorder: Recorder, tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """The recorded trace as the Collector writes it, with ``edit`` applied to every span's attributes."""
    recorder.config.force_flush()
    tid = recorder.store.list_traces(limit=1)[0].trace_id
    lines = recorder.store.read_requests(tid)
    for line in lines:
        for resource in line["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    attrs = {a["key"]: a for a in span["attributes"]}
                    edit(attrs)
                    span["attributes"] = list(attrs.values())
    path = tmp_path / "damaged.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _of(name: str, edit: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def on_span(attrs: dict[str, Any]) -> None:
        if attrs.get(sc.BOUNDARY_NAME, {}).get("value", {}).get("stringValue") == name:
            edit(attrs)

    return on_span


def test_an_output_a_backend_dropped_is_a_divergence_and_the_store_restores_it(
    recorder: Recorder, tmp_path: Path
) -> None:
    agent("sell")
    path = _collector_file(recorder, tmp_path, _of("damaged.plan", lambda attrs: attrs.pop(sc.OUTPUT)))
    trace = chronicle.load_trace(path)
    assert any("dropped from the span" in w for w in trace.warnings), trace.warnings
    calls = CALLS["plan"]
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        assert run.rerun() == "fallback: ReplayError", "the app's fallback ran on the error the stub raised"
    assert CALLS["plan"] == calls
    [finding] = run.report.divergences
    assert finding.kind == "undecodable" and "dropped from the span" in str(finding)
    restored = chronicle.load_trace(path, store=recorder.path)
    with chronicle.replay(restored, stub={"kind:llm"}) as run:
        assert run.rerun() == {"symbol": "MSFT", "shares": 1000}
    assert run.report.ok and CALLS["plan"] == calls


@pytest.mark.parametrize("text", ["{not json", "[" * 5000 + "]" * 5000])
def test_a_payload_that_does_not_parse_is_a_divergence_even_when_the_code_catches_it(
    recorder: Recorder, tmp_path: Path, text: str
) -> None:
    agent("sell")

    def damage(attrs: dict[str, Any]) -> None:
        attrs[sc.OUTPUT]["value"] = {"stringValue": text}
        attrs[sc.OUTPUT_HASH]["value"] = {"stringValue": text_digest(text)}  # rehashed: the loader cannot tell

    trace = chronicle.load_trace(_collector_file(recorder, tmp_path, _of("damaged.plan", damage)))
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        assert run.rerun() == "fallback: CodecError"
    assert not run.report.ok
    assert [f.kind for f in run.report.divergences] == ["undecodable"]


def test_a_call_relabelled_as_another_kind_is_still_stubbed_by_the_kind_the_code_declares(
    recorder: Recorder, tmp_path: Path
) -> None:
    agent("sell")

    def relabel(attrs: dict[str, Any]) -> None:
        attrs[sc.BOUNDARY_KIND]["value"] = {"stringValue": "tool"}

    trace = chronicle.load_trace(_collector_file(recorder, tmp_path, _of("damaged.plan", relabel)))
    calls = CALLS["plan"]
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        assert run.rerun() == {"symbol": "MSFT", "shares": 1000}
    assert CALLS["plan"] == calls, "the model was not called"
    assert run.report.ok and not run.report.live_llm, run.report


def test_a_root_input_that_cannot_be_rebuilt_is_refused_unless_given(recorder: Recorder, tmp_path: Path) -> None:
    typed_root(Order())
    trace = chronicle.load_trace(recorder.path, "latest")
    with (
        pytest.raises(ReplayDivergence, match=r"recorded input of the root holds .*Order"),
        chronicle.replay(trace) as run,
    ):
        run.rerun()
    assert [f.kind for f in run.report.divergences] == ["unresolved", "unused-recording"]
    with chronicle.replay(trace, on_missing="live") as run:
        assert run.rerun(order=Order()) == "Order"
    assert not [f for f in run.report.divergences if f.kind == "unresolved"]


def test_two_copies_of_a_span_with_different_payloads_are_said_and_a_divergence(
    recorder: Recorder, tmp_path: Path
) -> None:
    agent("sell")
    honest = _collector_file(recorder, tmp_path, lambda attrs: None)
    lines = honest.read_text().splitlines()
    forged = json.loads(lines[0])
    other = '{"shares":999999,"symbol":"MSFT"}'
    found = False
    for resource in forged["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                attrs = {a["key"]: a for a in span["attributes"]}
                if attrs.get(sc.BOUNDARY_NAME, {}).get("value", {}).get("stringValue") == "damaged.plan":
                    attrs[sc.OUTPUT]["value"] = {"stringValue": other}
                    attrs[sc.OUTPUT_HASH]["value"] = {"stringValue": text_digest(other)}
                    span["attributes"] = list(attrs.values())
                    found = True
    assert found
    path = tmp_path / "forged.jsonl"
    path.write_text(json.dumps(forged) + "\n" + "\n".join(lines) + "\n")  # the forged copy first
    trace = chronicle.load_trace(path)
    [planned] = trace.find("damaged.plan")
    assert trace.conflicts == (planned.span_id,)
    assert any("more than once with different payloads" in w for w in trace.warnings)
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        run.rerun()
    assert not run.report.ok
    assert [f.kind for f in run.report.divergences] == ["conflicting-recordings"]
    retried = tmp_path / "retried.jsonl"  # an exporter's retry: the same copy twice, no conflict
    retried.write_text(honest.read_text() * 2)
    again = chronicle.load_trace(retried)
    assert again.conflicts == () and not again.warnings


@dataclasses.dataclass
class Fill:
    shares: int


@chronicle.boundary(kind="llm", name="damaged.fill")
def fill() -> Fill:
    return Fill(1000)


def test_the_advice_for_a_standard_library_class_is_never_to_allow_it(recorder: Recorder, tmp_path: Path) -> None:
    fill()

    def rename(attrs: dict[str, Any]) -> None:
        text = attrs[sc.OUTPUT]["value"]["stringValue"].replace(f"{__name__}.Fill", "subprocess.Popen")
        attrs[sc.OUTPUT]["value"] = {"stringValue": text}
        attrs[sc.OUTPUT_HASH]["value"] = {"stringValue": text_digest(text)}

    trace = chronicle.load_trace(_collector_file(recorder, tmp_path, _of("damaged.fill", rename)))
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        run.rerun()
    [finding] = run.report.divergences
    assert finding.kind == "unresolved" and "subprocess.Popen" in finding.message
    assert "do not allow it" in finding.message and "allow=" not in finding.message


def test_a_divergence_raised_into_the_code_carries_its_finding(recorder: Recorder) -> None:
    agent("sell")
    trace = chronicle.load_trace(recorder.path, "latest")

    @chronicle.boundary(kind="agent", name="damaged.agent")
    def changed(request: str) -> Any:
        plan(request)
        return plan(request)  # a second model call the recording does not have

    with pytest.raises(ReplayDivergence) as raised, chronicle.replay(trace, stub={"kind:llm"}) as run:
        changed("sell")
    finding = raised.value.finding
    assert finding is not None and finding.kind == "unexpected-call"
    assert finding.call_key == (("damaged.agent", 0), ("damaged.plan", 1))
    assert str(raised.value) == str(finding) and finding in run.report.divergences
