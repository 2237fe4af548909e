"""The shortcuts of a boundary call keep its behaviour: recording off calls straight through only while no replay is
active, and the starting attributes reach a sampler that reads them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider, sampling
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind
from opentelemetry.util.types import Attributes

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel._internal import hooks
from chronicle_otel._internal.compat import attribute_blind
from tests.conftest import Recorder, make_recorder
from tests.unit.agents import record


def test_recording_off_calls_through_until_a_replay_starts(recorder: Recorder, tmp_path: Path) -> None:
    calls: list[str] = []

    @chronicle.boundary(kind="llm", name="callpath.live")
    def live(prompt: str) -> str:
        calls.append(prompt)
        return prompt.upper()

    @chronicle.boundary(kind="agent", name="callpath.root")
    def root(prompt: str) -> str:
        return live(prompt)

    trace = record(recorder, root, "buy")
    assert calls == ["buy"]

    chronicle.configure(enabled=False, store=False)
    assert hooks.PASS_THROUGH[0]
    assert root("sell") == "SELL"
    assert calls == ["buy", "sell"]  # straight through, nothing recorded
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        assert not hooks.PASS_THROUGH[0]
        assert run.rerun() == "BUY"  # the replay still answers while recording is off
    assert calls == ["buy", "sell"]
    assert hooks.PASS_THROUGH[0]

    make_recorder(tmp_path / "again")
    assert not hooks.PASS_THROUGH[0]


class _Reading(sampling.Sampler):
    """A sampler that decides on a starting attribute."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: Any = None,
    ) -> sampling.SamplingResult:
        self.seen.append(dict(attributes or {}))
        keep = (attributes or {}).get(sc.BOUNDARY_KIND) != "tool"
        return sampling.SamplingResult(sampling.Decision.RECORD_AND_SAMPLE if keep else sampling.Decision.DROP)

    def get_description(self) -> str:
        return "reading"


def test_a_sampler_of_your_own_sees_the_starting_attributes(tmp_path: Path) -> None:
    sampler = _Reading()
    provider = TracerProvider(sampler=sampler)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    config = chronicle.configure(tracer_provider=provider, store=False)
    assert not config.start_blind

    @chronicle.boundary(kind="tool", name="callpath.tool")
    def tool(x: int) -> int:
        return x

    @chronicle.boundary(kind="llm", name="callpath.llm")
    def llm(x: int) -> int:
        return tool(x)

    assert llm(3) == 3
    assert [seen[sc.BOUNDARY_NAME] for seen in sampler.seen] == ["callpath.llm", "callpath.tool"]
    assert [span.name for span in memory.get_finished_spans()] == ["callpath.llm"]


def test_the_sdk_samplers_get_the_same_span(recorder: Recorder) -> None:
    assert recorder.config.start_blind
    recorder.memory.clear()

    @chronicle.boundary(kind="tool", name="callpath.blind", attributes={"team": "desk"})
    def blind(x: int) -> int:
        return x * 2

    assert blind(4) == 8
    attrs = recorder.attrs("callpath.blind")
    assert attrs[sc.BOUNDARY_NAME] == "callpath.blind"
    assert attrs[sc.BOUNDARY_KIND] == "tool"
    assert attrs["team"] == "desk"
    assert attrs[sc.CALL_INDEX] == 0
    assert sc.INPUT in attrs and sc.OUTPUT in attrs


def test_which_samplers_never_read_attributes() -> None:
    def tracer(sampler: sampling.Sampler) -> Any:
        return TracerProvider(sampler=sampler).get_tracer("t")

    assert attribute_blind(tracer(sampling.ParentBased(sampling.ALWAYS_ON)))
    assert attribute_blind(tracer(sampling.TraceIdRatioBased(0.5)))
    assert attribute_blind(tracer(sampling.ParentBasedTraceIdRatio(0.25)))
    assert not attribute_blind(tracer(_Reading()))
    assert not attribute_blind(tracer(sampling.ParentBased(_Reading())))
    assert not attribute_blind(tracer(sampling.ParentBased(sampling.ALWAYS_ON, local_parent_sampled=_Reading())))

    class Sub(sampling.TraceIdRatioBased):
        pass

    assert not attribute_blind(tracer(Sub(0.5)))
    assert not attribute_blind(object())


def test_response_attributes_stay_redacted_when_the_payload_scan_is_reused(tmp_path: Path) -> None:
    secret = "sk-" + "Z" * 40
    rec = make_recorder(tmp_path / "values")

    @chronicle.boundary(kind="llm", name="callpath.genai")
    def chat(prompt: str) -> dict[str, Any]:
        return {"model": secret, "id": "resp-1", "choices": [{"finish_reason": "stop"}]}

    chat("x")
    attrs = rec.attrs("callpath.genai")
    assert secret not in attrs[sc.GEN_AI_RESPONSE_MODEL]
    assert attrs[sc.GEN_AI_RESPONSE_ID] == "resp-1"

    # the model's key is redacted in the payload: the payload scan never saw the value, the attribute is still scanned
    rec = make_recorder(tmp_path / "keys", redaction=chronicle.RedactionOptions(keys=["model"]))
    chat("y")
    attrs = rec.attrs("callpath.genai")
    assert secret not in attrs[sc.GEN_AI_RESPONSE_MODEL]
    assert secret not in attrs[sc.OUTPUT]
