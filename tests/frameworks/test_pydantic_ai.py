"""The pydantic-ai integration with real pydantic-ai agents against the local LLM servers: record, load, replay."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import wrapt
from pydantic_ai.messages import ModelMessage, ModelResponse, PartStartEvent, TextPart, ToolCallPart
from pydantic_ai.models import Model

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel.integrations import openai as chronicle_openai
from chronicle_otel.integrations import pydantic_ai as chronicle_pydantic_ai
from chronicle_otel.model import Trace
from tests.conftest import Recorder
from tests.frameworks import pydantic_ai_agent as agent
from tests.llm_servers import LLMServer, Reply, anthropic_server, openai_server

ALLOW = ("tests.", "pydantic_ai.")
ORDER = {"symbol": "MSFT", "quantity": 1000, "side": "sell"}
FILLED = {"status": "filled", "symbol": "MSFT", "quantity": 1000, "side": "sell"}
BLOCKED = {"status": "blocked", "reason": "1000 shares exceeds 100"}


@pytest.fixture
def servers() -> Iterator[dict[str, LLMServer]]:
    with openai_server() as oa, anthropic_server() as an:
        yield {"chat": oa, "responses": oa, "anthropic": an}


@pytest.fixture
def instrumented() -> Iterator[None]:
    names = chronicle_pydantic_ai.instrument()
    assert names == ["pydantic_ai.model.request", "pydantic_ai.model.request_stream", "pydantic_ai.tool.*"]
    try:
        yield
    finally:
        assert chronicle_pydantic_ai.uninstrument() >= 1
        agent.LIMIT["max_shares"] = None
        agent.INSTRUMENTATION["settings"] = None


def _url(servers: dict[str, LLMServer], kind: str) -> str:
    return servers[kind].url


def _requests(servers: dict[str, LLMServer]) -> int:
    return servers["chat"].count() + servers["anthropic"].count()


def _sync(call: Callable[[], Any]) -> Any:
    """Run ``call``, then its coroutine if it returns one; ``run_sync`` inside gets an event loop of its own, closed
    afterwards."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        result = call()
        return loop.run_until_complete(result) if asyncio.iscoroutine(result) else result
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def _call(entry: Callable[..., Any], *args: Any) -> Any:
    return _sync(lambda: entry(*args))


def _rerun(run: Any) -> Any:
    return _sync(run.rerun)


def _assert_encodable(trace: Trace) -> None:
    """No payload of any span holds a value the codec could not encode."""
    for span in trace.spans:
        for key in (sc.INPUT, sc.OUTPUT, sc.ERROR):
            text = span.attributes.get(key)
            assert not (isinstance(text, str) and '"unencodable"' in text), (span.name, key, text[:500])
    for boundary in trace.boundaries:
        for payload in (boundary.raw_input, boundary.raw_output):
            assert payload is None or '"unencodable"' not in payload.text, boundary.name


def _responses(messages: list[ModelMessage]) -> list[ModelResponse]:
    """The model's responses, without the fields the agent stamps on them per run."""
    return [
        dataclasses.replace(m, run_id=None, conversation_id=None, model_id=None)
        for m in messages
        if isinstance(m, ModelResponse)
    ]


SCENARIOS: dict[str, tuple[Callable[..., Any], str, list[Reply], Any]] = {
    # name: (entry point, model kind, replies, expected output)
    "chat-run_sync": (
        agent.run,
        "chat",
        [Reply("", tool_call=("place_order", ORDER)), Reply("Sold 1,000 shares of MSFT.")],
        "Sold 1,000 shares of MSFT.",
    ),
    "chat-run_stream": (
        agent.arun_stream,
        "chat",
        [Reply("", tool_call=("place_order", ORDER)), Reply("Streamed: sold 1,000 MSFT.")],
        "Streamed: sold 1,000 MSFT.",
    ),
    "responses-run_sync": (
        agent.run,
        "responses",
        [Reply("", tool_call=("place_order", ORDER)), Reply("Responses: sold.")],
        "Responses: sold.",
    ),
    "responses-iter-stream": (
        agent.arun_iter,
        "responses",
        [Reply("", tool_call=("place_order", ORDER)), Reply("Iterated: sold.")],
        "Iterated: sold.",
    ),
    "anthropic-structured-async": (
        agent.arun_structured,
        "anthropic",
        [
            Reply("", tool_call=("place_order", ORDER)),
            Reply("", tool_call=("final_result", {"status": "filled", "symbol": "MSFT", "quantity": 1000})),
        ],
        agent.Confirmation(status="filled", symbol="MSFT", quantity=1000),
    ),
    "anthropic-run_stream": (
        agent.arun_stream,
        "anthropic",
        [Reply("", tool_call=("place_order", ORDER)), Reply("Claude: sold 1,000 MSFT.")],
        "Claude: sold 1,000 MSFT.",
    ),
}


def _record(
    recorder: Recorder, servers: dict[str, LLMServer], scenario: str
) -> tuple[dict[str, Any], list[ModelMessage], Trace]:
    entry, kind, replies, expected = SCENARIOS[scenario]
    servers[kind].reply_with(*replies)
    before = _requests(servers)
    recorded = _call(entry, agent.ORDER_REQUEST, kind, _url(servers, kind))
    assert _requests(servers) - before == 2
    assert recorded["output"] == expected and recorded["orders"] == [FILLED]  # the incident
    trace = chronicle.load_trace(recorder.path, "latest")
    return recorded, list(agent.LAST_MESSAGES), trace


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_an_agent_run_replays_offline_typed_and_without_drift(
    recorder: Recorder, servers: dict[str, LLMServer], instrumented: None, scenario: str, tmp_path: Path
) -> None:
    recorded, messages, trace = _record(recorder, servers, scenario)
    _assert_encodable(trace)
    streamed = "stream" in scenario or "iter" in scenario
    llm = [b for b in trace.boundaries if b.kind == "llm"]
    name = "pydantic_ai.model.request_stream" if streamed else "pydantic_ai.model.request"
    assert [b.name for b in llm] == [name, name]
    assert [b.name for b in trace.boundaries if b.kind == "tool"] == ["pydantic_ai.tool.place_order"]
    if streamed:
        assert all(b.stream and b.stream_state == "complete" for b in llm)
        items = llm[-1].decode_output(ALLOW)
        assert isinstance(items[-1], ModelResponse) and any(isinstance(e, PartStartEvent) for e in items[:-1])
        outputs = [b.decode_output(ALLOW)[-1] for b in llm]
    else:
        outputs = [b.decode_output(ALLOW) for b in llm]
    assert all(isinstance(o, ModelResponse) for o in outputs)
    assert isinstance(outputs[0].parts[0], ToolCallPart) and outputs[0].parts[0].tool_name == "place_order"
    assert outputs == _responses(messages), "the recorded responses rebuild equal to the ones the agent got"

    # Unchanged code: every model answer comes from the recording, the inputs compare equal.
    before = _requests(servers)
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        replayed = _rerun(run)
    assert _requests(servers) == before, "no request reached the server"
    assert replayed == recorded
    assert _responses(agent.LAST_MESSAGES) == _responses(messages)
    report = run.report
    assert report.ok and not report.drift and not report.changes, report
    assert len(report.stubbed) == 2

    # The fix: the guardrail blocks the order; the model's answers still come from the recording.
    agent.LIMIT["max_shares"] = 100
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        fixed = _rerun(run)
    assert _requests(servers) == before
    assert fixed["orders"] == [BLOCKED]
    assert run.report.ok, run.report
    assert {c.call_key[-1][0] for c in run.report.changes} >= {"pydantic_ai.tool.place_order"}
    # the only input that changed is the request that carries the tool's new result back to the model
    assert [d.call_key[-1] for d in run.report.drift] == [(name, 1)], run.report
    agent.LIMIT["max_shares"] = None

    # The same trace as the Collector's file exporter writes it.
    lines = recorder.store.read_requests(trace.trace_id)
    path = tmp_path / "collector-out.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    loaded = chronicle.load_trace(path, trace.trace_id, store=recorder.path)
    with chronicle.replay(loaded, stub={"kind:llm"}) as run:
        again = _rerun(run)
    assert again == recorded
    assert run.report.ok and not run.report.drift and not run.report.changes, run.report
    assert _requests(servers) == before


def _span_tree(recorder: Recorder) -> dict[int, tuple[str, int | None]]:
    """span id -> (name, parent span id) of every finished span."""
    return {
        s.context.span_id: (s.name, s.parent.span_id if s.parent is not None else None)
        for s in recorder.spans()
        if s.context is not None
    }


def _parents(tree: dict[int, tuple[str, int | None]], name: str) -> list[str]:
    """The names of the ancestors of each span called ``name``, nearest first (the first such span)."""
    span_id = next(i for i, (n, _) in tree.items() if n == name)
    chain: list[str] = []
    parent = tree[span_id][1]
    while parent is not None and parent in tree:
        chain.append(tree[parent][0])
        parent = tree[parent][1]
    return chain


def test_inputs_leave_out_what_changes_from_run_to_run_and_never_secrets(
    recorder: Recorder, servers: dict[str, LLMServer], instrumented: None
) -> None:
    _, _, trace = _record(recorder, servers, "chat-run_stream")
    calls = [b for b in trace.boundaries if b.kind == "llm"]
    first, second = (b.decode_input(ALLOW) for b in calls)
    assert set(first) == {"model", "messages", "model_settings", "model_request_parameters"}
    assert first["model"] == "gpt-test"
    assert [t["name"] for t in first["model_request_parameters"]["function_tools"]] == ["place_order"]
    assert first["messages"][0]["parts"][0] == {"content": agent.ORDER_REQUEST, "part_kind": "user-prompt"}
    for message in second["messages"]:  # the request, the model's tool call, the tool's result
        for fields in (message, *message["parts"]):
            assert not set(fields) & chronicle_pydantic_ai.VOLATILE_FIELDS, fields
    assert second["messages"][-1]["parts"][0]["content"] == FILLED
    everything = json.dumps([s.attributes for s in trace.spans], default=str)
    assert "sk-test-openai-key" not in everything
    span = calls[-1].span  # the second streamed request: GenAI attributes from its final response
    assert span.attributes[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert span.attributes[sc.GEN_AI_REQUEST_MODEL] == "gpt-test"
    assert span.attributes[sc.GEN_AI_RESPONSE_MODEL] == "gpt-test"
    assert span.attributes[sc.GEN_AI_RESPONSE_ID] == "chatcmpl-000002"
    assert list(span.attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["stop"]
    assert span.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 7
    tool = next(b for b in trace.boundaries if b.kind == "tool")
    assert tool.decode_input(ALLOW) == {"name": "place_order", "tool_args": ORDER}
    assert tool.decode_output(ALLOW) == FILLED

    # Tools can answer from the recording too: the fix then changes nothing, and nothing drifts.
    agent.LIMIT["max_shares"] = 100
    with chronicle.replay(trace, stub={"kind:llm", "pydantic_ai.tool.*"}) as run:
        replayed = _rerun(run)
    assert replayed["orders"] == [FILLED]
    assert run.report.ok and not run.report.drift, run.report
    assert len(run.report.stubbed) == 3


@pytest.mark.parametrize("scenario", ["chat-run_sync", "chat-run_stream"])
def test_with_the_openai_sdk_integration_both_record_and_the_replay_answers_at_pydantic_ai(
    recorder: Recorder, servers: dict[str, LLMServer], instrumented: None, scenario: str
) -> None:
    assert "openai.chat.completions.create" in chronicle_openai.instrument()
    try:
        recorded, _, trace = _record(recorder, servers, scenario)
        _assert_encodable(trace)
        name = "pydantic_ai.model.request_stream" if "stream" in scenario else "pydantic_ai.model.request"
        sdk = [b for b in trace.boundaries if b.name == "openai.chat.completions.create"]
        assert len(sdk) == 2 and all(b.parent is not None and b.parent.name == name for b in sdk), "a child each"
        before = _requests(servers)
        with chronicle.replay(trace, stub={"kind:llm"}) as run:
            replayed = _rerun(run)
        assert _requests(servers) == before, "no request reached the server"
        assert replayed == recorded
        report = run.report
        assert report.ok and not report.drift and not report.changes, report
        assert {key[-1][0] for key in report.stubbed} == {name}, "answered at pydantic-ai's layer only"
    finally:
        chronicle_openai.uninstrument()


def test_pydantic_ai_own_instrumentation_on_the_same_provider_nests_sensibly(
    recorder: Recorder, servers: dict[str, LLMServer], instrumented: None
) -> None:
    from pydantic_ai.models.instrumented import InstrumentationSettings

    agent.INSTRUMENTATION["settings"] = InstrumentationSettings(tracer_provider=recorder.provider)
    recorded, _, trace = _record(recorder, servers, "chat-run_sync")
    tree = _span_tree(recorder)
    llm_parents = _parents(tree, "pydantic_ai.model.request")
    assert llm_parents[0].startswith("chat "), llm_parents  # pydantic-ai's model request span
    assert llm_parents[-1] == "pydantic_ai_agent.run"  # everything under the agent boundary, one trace
    tool_parents = _parents(tree, "pydantic_ai.tool.place_order")
    assert tool_parents[-1] == "pydantic_ai_agent.run" and any("place_order" in n for n in tool_parents), tool_parents
    assert [b.name for b in trace.boundaries if b.kind == "llm"] == ["pydantic_ai.model.request"] * 2
    before = _requests(servers)
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        replayed = _rerun(run)
    assert _requests(servers) == before
    assert replayed == recorded
    assert run.report.ok and not run.report.drift and not run.report.changes, run.report


def test_instrument_covers_model_classes_defined_later_once_each_and_uninstrument_restores(
    recorder: Recorder,
) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.fallback import FallbackModel
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.toolsets.function import FunctionToolset

    originals = (OpenAIChatModel.__dict__["request"], OpenAIChatModel.__dict__["request_stream"])
    call_tool = FunctionToolset.__dict__["call_tool"]
    names = chronicle_pydantic_ai.instrument()
    assert chronicle_pydantic_ai.instrument() == names  # idempotent
    try:
        assert OpenAIChatModel.__dict__["request"].__wrapped__ is originals[0]

        class EchoModel(Model):  # defined after instrument(): gets its seams when created
            @property
            def model_name(self) -> str:
                return "echo"

            @property
            def system(self) -> str:
                return "echo-provider"

            async def request(self, messages: Any, model_settings: Any, model_request_parameters: Any) -> Any:
                return ModelResponse(parts=[TextPart(f"echo {len(messages)}")], model_name="echo")

        class LoudEchoModel(EchoModel):  # calls its base class for the same request: recorded once
            async def request(self, messages: Any, model_settings: Any, model_request_parameters: Any) -> Any:
                response = await super().request(messages, model_settings, model_request_parameters)
                return dataclasses.replace(response, parts=[TextPart(response.parts[0].content.upper())])

        @chronicle.boundary(kind="agent", name="pydantic_ai_test.echo")
        def echo(prompt: str) -> str:
            fallback = FallbackModel(LoudEchoModel())  # hands the request on: not a boundary itself
            return str(Agent(fallback).run_sync(prompt).output)

        assert _sync(lambda: echo("hi")) == "ECHO 1"
        trace = chronicle.load_trace(recorder.path, "latest")
        llm = [b for b in trace.boundaries if b.kind == "llm"]
        assert [b.name for b in llm] == ["pydantic_ai.model.request"]
        span = llm[0].span
        assert span.attributes[sc.GEN_AI_PROVIDER_NAME] == "echo-provider"
        assert isinstance(llm[0].decode_output(ALLOW), ModelResponse)
        with chronicle.replay(trace, stub={"kind:llm"}) as run:
            assert _rerun(run) == "ECHO 1"
        assert run.report.ok and not run.report.drift, run.report
    finally:
        assert chronicle_pydantic_ai.uninstrument() >= 3
    assert (OpenAIChatModel.__dict__["request"], OpenAIChatModel.__dict__["request_stream"]) == originals
    assert FunctionToolset.__dict__["call_tool"] is call_tool
    assert not isinstance(EchoModel.__dict__["request"], wrapt.ObjectProxy)
    assert chronicle_pydantic_ai.uninstrument() == 0


@chronicle.boundary(kind="agent", name="pydantic_ai_test.failing_stream")
async def _failing_stream(prompt: str, stop_after: int | None) -> dict[str, Any]:
    from pydantic_ai import Agent
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    async def stream(messages: Any, info: AgentInfo) -> Any:
        yield "Hel"
        yield "lo, "
        raise ConnectionResetError("the provider hung up")

    deltas: list[str] = []
    try:
        async with Agent(FunctionModel(stream_function=stream)).run_stream(prompt) as result:
            async for delta in result.stream_text(delta=True, debounce_by=None):
                deltas.append(delta)
                if stop_after is not None and len(deltas) >= stop_after:
                    break
    except ConnectionResetError as exc:
        return {"deltas": deltas, "error": str(exc)}
    return {"deltas": deltas, "error": None}


@pytest.mark.parametrize(("stop_after", "state"), [(None, "error"), (1, "abandoned")])
def test_a_stream_that_failed_or_was_left_replays_the_same_way(
    recorder: Recorder, instrumented: None, stop_after: int | None, state: str
) -> None:
    recorded = _sync(lambda: _failing_stream("hi", stop_after))
    assert recorded["deltas"] == (["Hel", "lo, "] if stop_after is None else ["Hel"])
    assert recorded["error"] == ("the provider hung up" if stop_after is None else None)
    trace = chronicle.load_trace(recorder.path, "latest")
    _assert_encodable(trace)
    (llm,) = [b for b in trace.boundaries if b.kind == "llm"]
    assert llm.name == "pydantic_ai.model.request_stream" and llm.stream_state == state
    assert isinstance(llm.decode_output(ALLOW)[-1], ModelResponse), "what the stream had produced"
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        replayed = _rerun(run)
    assert replayed == recorded
    assert run.report.ok and not run.report.drift and not run.report.changes, run.report


def test_a_failure_inside_the_integration_leaves_the_request_unrecorded_and_the_agent_running(
    recorder: Recorder, instrumented: None, swallow_internal_errors: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    def broken(messages: Any) -> Any:
        raise RuntimeError("cannot dump these messages")

    monkeypatch.setattr(chronicle_pydantic_ai, "_messages_view", broken)

    @chronicle.boundary(kind="agent", name="pydantic_ai_test.plain")
    def plain(prompt: str) -> str:
        return str(Agent(TestModel(custom_output_text="fine")).run_sync(prompt).output)

    assert _sync(lambda: plain("hi")) == "fine"
    trace = chronicle.load_trace(recorder.path, "latest")
    assert [b.name for b in trace.boundaries] == ["pydantic_ai_test.plain"]
