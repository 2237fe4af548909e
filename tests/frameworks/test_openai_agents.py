"""The OpenAI Agents SDK integration with the real ``openai-agents`` against the local OpenAI server: an agent run
is recorded at the model and tool seams, loaded, and replayed offline with its guardrail fixed."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import agents
import pytest
from agents.items import ModelResponse
from agents.model_settings import ModelSettings
from agents.models.interface import Model, ModelTracing
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from agents.models.openai_responses import OpenAIResponsesModel
from agents.retry import ModelRetrySettings
from agents.tool import FunctionTool, invoke_function_tool
from agents.tool_context import ToolContext
from agents.tracing import Span, Trace, TracingProcessor
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel.integrations import openai as chronicle_openai
from chronicle_otel.integrations import openai_agents as chronicle_agents
from chronicle_otel.model import Trace as RecordedTrace
from tests.conftest import Recorder
from tests.frameworks import openai_agents_agent as app
from tests.llm_servers import LLMServer, Reply, openai_server

ORDER: dict[str, Any] = {"symbol": "MSFT", "quantity": 1000, "side": "sell"}
FILLED = "status='filled' symbol='MSFT' quantity=1000 reason=None"
BLOCKED = "status='blocked' symbol='MSFT' quantity=1000 reason='exceeds 100 shares'"


class Collector(TracingProcessor):
    """The Agents SDK's own tracing, kept on this machine: every trace and span its processors receive."""

    def __init__(self) -> None:
        self.traces: list[str] = []
        self.spans: list[str] = []

    def on_trace_start(self, trace: Trace) -> None:
        self.traces.append(trace.name)

    def on_trace_end(self, trace: Trace) -> None:
        pass

    def on_span_start(self, span: Span[Any]) -> None:
        pass

    def on_span_end(self, span: Span[Any]) -> None:
        data = span.span_data
        self.spans.append(f"{data.type}:{getattr(data, 'name', '') or ''}")

    def shutdown(self) -> None:
        pass

    def force_flush(self) -> None:
        pass


@pytest.fixture(autouse=True)
def sdk_tracing() -> Iterator[Collector]:
    """The SDK's tracing on, with only a local processor: its default exporter (to api.openai.com) never runs."""
    collector = Collector()
    agents.set_trace_processors([collector])
    agents.set_tracing_disabled(False)
    try:
        yield collector
    finally:
        agents.set_trace_processors([])


@pytest.fixture(autouse=True)
def fix_off() -> Iterator[None]:
    app.LIMIT["max_shares"] = None
    yield
    app.LIMIT["max_shares"] = None


@pytest.fixture
def server() -> Iterator[LLMServer]:
    with openai_server() as oa:
        yield oa


@pytest.fixture
def instrumented() -> Iterator[list[str]]:
    names = chronicle_agents.instrument()
    try:
        yield names
    finally:
        chronicle_agents.uninstrument()


def _no_unencodable(recorder: Recorder) -> None:
    for span in recorder.spans():
        attributes = span.attributes or {}
        for key in (sc.INPUT, sc.OUTPUT):
            text = attributes.get(key)
            assert not (isinstance(text, str) and "unencodable" in text), (span.name, key, text)


def _llm_spans(recorder: Recorder) -> list[dict[str, Any]]:
    return [dict(s.attributes or {}) for s in recorder.spans() if (s.attributes or {}).get(sc.BOUNDARY_KIND) == "llm"]


def _replay(trace: RecordedTrace, fixed: bool) -> tuple[Any, chronicle.ReplayReport]:
    app.LIMIT["max_shares"] = 100 if fixed else None
    try:
        with chronicle.replay(trace, stub={"kind:llm"}) as run:
            replayed = run.rerun()
    finally:
        app.LIMIT["max_shares"] = None
    return replayed, run.report


def _changed(report: chronicle.ReplayReport) -> set[str]:
    return {c.call_key[-1][0] for c in report.changes}


def _assert_typed(result: dict[str, Any]) -> None:
    assert result["responses"] and all(type(r) is ModelResponse for r in result["responses"])
    calls = [i for i in result["items"] if isinstance(i, ResponseFunctionToolCall)]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("place_order", ORDER)]


# --------------------------------------------------------------------------------------------- the four runs

RUNS = [
    pytest.param("chat", False, id="chat-run"),
    pytest.param("responses", False, id="responses-run"),
    pytest.param("responses", True, id="responses-streamed"),
    pytest.param("chat", True, id="chat-streamed"),
]


def _record_trader(recorder: Recorder, server: LLMServer, api: app.Api, streamed: bool) -> tuple[Any, RecordedTrace]:
    server.reply_with(Reply("Placing the order." if streamed else "", tool_call=("place_order", ORDER)))
    recorded = asyncio.run(app.run_trader(app.ORDER_REQUEST, server.url, api, streamed))
    assert server.count() == 1
    return recorded, chronicle.load_trace(recorder.path, "latest")


@pytest.mark.parametrize(("api", "streamed"), RUNS)
def test_a_run_replays_offline_typed_and_the_fixed_guardrail_blocks(
    recorder: Recorder, server: LLMServer, instrumented: list[str], api: app.Api, streamed: bool
) -> None:
    recorded, trace = _record_trader(recorder, server, api, streamed)
    assert _outcome(recorded) == FILLED  # the incident
    _assert_typed(recorded)
    if streamed:
        assert recorded["text"] == "Placing the order."
        assert "response.completed" in recorded["events"] and "item:tool_output" in recorded["events"]
    model_call = chronicle_agents.STREAM_RESPONSE if streamed else chronicle_agents.GET_RESPONSE
    assert [b.name for b in trace.boundaries] == [
        "openai_agents_agent.trade",
        model_call,
        "openai_agents.tool.place_order",
    ]
    assert [b.kind for b in trace.boundaries] == ["agent", "llm", "tool"]
    _no_unencodable(recorder)

    replayed, report = _replay(trace, fixed=False)
    assert server.count() == 1, "no request reached the server"
    assert report.ok and not report.drift and not report.changes, report
    assert replayed == recorded, "every value came back from the recording, typed"
    _assert_typed(replayed)

    replayed, report = _replay(trace, fixed=True)
    assert server.count() == 1
    assert report.ok and not report.drift, report
    assert [key[-1][0] for key in report.stubbed] == [model_call]
    assert _outcome(replayed) == BLOCKED, "the fixed guardrail ran live and blocked the order"
    assert _changed(report) == {"openai_agents.tool.place_order", "openai_agents_agent.trade"}
    assert replayed["responses"] == recorded["responses"]


def _outcome(result: dict[str, Any]) -> Any:
    """The final output: what ``place_order`` returned, as the SDK hands it to the model (``str`` of the result)."""
    return result["final_output"]


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_structured_output_replays_typed(
    recorder: Recorder, server: LLMServer, instrumented: list[str], api: app.Api
) -> None:
    server.reply_with(Reply("", parsed_json=ORDER), Reply("", tool_call=("place_order", ORDER)))
    recorded = asyncio.run(app.run_structured(app.ORDER_REQUEST, server.url, api))
    assert server.count() == 2
    assert recorded["order"] == app.Order(**ORDER) and _outcome(recorded) == FILLED
    trace = chronicle.load_trace(recorder.path, "latest")
    extract = trace.boundaries[1]
    assert extract.name == chronicle_agents.GET_RESPONSE
    schema = extract.decode_input()["output_schema"]
    assert schema["name"] == "Order" and schema["plain_text"] is False and schema["strict"] is True
    assert schema["json_schema"]["properties"]["quantity"]["type"] == "integer"
    _no_unencodable(recorder)

    replayed, report = _replay(trace, fixed=False)
    assert server.count() == 2
    assert report.ok and not report.drift and not report.changes, report
    assert replayed == recorded
    assert type(replayed["order"]) is app.Order
    assert all(type(r) is ModelResponse for r in replayed["extracted"])

    replayed, report = _replay(trace, fixed=True)
    assert server.count() == 2
    assert report.ok and not report.drift, report
    assert _outcome(replayed) == BLOCKED and replayed["order"] == recorded["order"]


def test_the_trace_loaded_from_a_collector_file_replays_the_same(
    recorder: Recorder, server: LLMServer, instrumented: list[str], tmp_path: Path
) -> None:
    recorded, trace = _record_trader(recorder, server, "responses", True)
    lines = recorder.store.read_requests(trace.trace_id)  # the Collector's file exporter writes these lines
    path = tmp_path / "collector-out.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    loaded = chronicle.load_trace(path, trace.trace_id, store=recorder.path)

    replayed, report = _replay(loaded, fixed=False)
    assert replayed == recorded
    assert report.ok and not report.drift and not report.changes, report
    replayed, report = _replay(loaded, fixed=True)
    assert _outcome(replayed) == BLOCKED and replayed["events"] == recorded["events"]
    assert report.ok and not report.drift, report
    assert server.count() == 1


# --------------------------------------------------------------------------------------------- what is recorded


def test_model_and_tool_inputs_are_stable_and_carry_genai_attributes(
    recorder: Recorder, server: LLMServer, instrumented: list[str]
) -> None:
    _, trace = _record_trader(recorder, server, "chat", False)
    _, model_call, tool_call = trace.boundaries
    tool_schema = app.place_order.params_json_schema
    assert model_call.decode_input() == {
        "model": "gpt-test",
        "system_instructions": "Place the order the user asks for with place_order.",
        "input": [{"content": app.ORDER_REQUEST, "role": "user"}],
        "model_settings": {},
        "tools": [
            {
                "type": "function",
                "name": "place_order",
                "description": "Place an order with the broker.",
                "parameters": tool_schema,
                "strict": True,
            }
        ],
        "handoffs": [],
    }, "no tracing flag, no None values, tools as name and schema"
    assert tool_call.decode_input() == {"arguments": ORDER}, "the JSON arguments, parsed"
    fill = tool_call.decode_output()
    assert type(fill) is app.OrderResult and str(fill) == FILLED, "the tool's own typed result"

    attrs = dict(recorder.span(chronicle_agents.GET_RESPONSE).attributes or {})
    assert attrs[sc.GEN_AI_REQUEST_MODEL] == "gpt-test" and attrs[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert (attrs[sc.GEN_AI_USAGE_INPUT_TOKENS], attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (11, 7)
    stored = json.dumps([s.attributes for s in trace.spans], default=str)
    assert "sk-test" not in stored and " at 0x" not in stored


def test_model_settings_leave_out_headers_retry_and_the_per_run_cache_key(
    recorder: Recorder, server: LLMServer, instrumented: list[str]
) -> None:
    settings = ModelSettings(
        temperature=0.0,
        extra_headers={"X-Team-Token": "team-secret-1234"},
        extra_args={"prompt_cache_key": "agents-sdk:run:" + "0" * 32, "user": "u-1"},
        retry=ModelRetrySettings(max_retries=0),
    )

    async def ask() -> None:
        openai_client = app.client(server.url)
        try:
            model = OpenAIChatCompletionsModel(app.MODEL, openai_client)
            await model.get_response(
                None,
                "hi",
                settings,
                [],
                None,
                [],
                ModelTracing.DISABLED,
                previous_response_id=None,
                conversation_id=None,
                prompt=None,
            )
        finally:
            await openai_client.close()

    asyncio.run(ask())
    recorded = recorder.io(chronicle_agents.GET_RESPONSE, sc.INPUT)
    assert recorded["model_settings"] == {"temperature": 0.0, "extra_args": {"user": "u-1"}}
    assert "team-secret-1234" not in json.dumps([s.attributes for s in recorder.spans()], default=str)
    assert server.requests[0]["body"]["prompt_cache_key"].startswith("agents-sdk:run:"), "the call itself unchanged"


# --------------------------------------------------------------------------------------------- with other layers


@pytest.mark.parametrize(("api", "streamed"), RUNS[:2] + RUNS[3:])
def test_both_on_with_the_openai_sdk_integration_replay_answers_at_the_agents_layer(
    recorder: Recorder, server: LLMServer, instrumented: list[str], api: app.Api, streamed: bool
) -> None:
    assert "openai.chat.completions.create" in chronicle_openai.instrument()
    model_call = chronicle_agents.STREAM_RESPONSE if streamed else chronicle_agents.GET_RESPONSE
    try:
        recorded, trace = _record_trader(recorder, server, api, streamed)
        sdk_name = "openai.chat.completions.create" if api == "chat" else "openai.responses.create"
        assert [b.name for b in trace.boundaries] == [
            "openai_agents_agent.trade",
            model_call,
            sdk_name,
            "openai_agents.tool.place_order",
        ]
        model_span, sdk_span = recorder.span(model_call), recorder.span(sdk_name)
        assert sdk_span.parent is not None and sdk_span.parent.span_id == model_span.context.span_id
        _no_unencodable(recorder)

        replayed, report = _replay(trace, fixed=True)
    finally:
        chronicle_openai.uninstrument()
    assert server.count() == 1
    assert report.ok and not report.drift and not report.live_llm, report
    assert [key[-1][0] for key in report.stubbed] == [model_call], "answered at the Agents SDK layer only"
    assert _outcome(replayed) == BLOCKED and replayed["responses"] == recorded["responses"]


def test_the_sdk_tracing_processors_still_receive_their_spans(
    recorder: Recorder, server: LLMServer, instrumented: list[str], sdk_tracing: Collector
) -> None:
    _, trace = _record_trader(recorder, server, "responses", False)
    assert sdk_tracing.traces == ["Agent workflow"]
    assert sdk_tracing.spans == ["response:", "function:place_order", "turn:", "agent:trader", "task:Agent workflow"]

    sdk_tracing.spans.clear()
    _replay(trace, fixed=True)
    assert sdk_tracing.traces == ["Agent workflow"] * 2
    assert sdk_tracing.spans == ["function:place_order", "turn:", "agent:trader", "task:Agent workflow"], (
        "the stubbed call made no response span"
    )
    assert server.count() == 1


# --------------------------------------------------------------------------------------------- instrument


def test_instrument_is_idempotent_and_uninstrument_puts_everything_back(recorder: Recorder, server: LLMServer) -> None:
    originals = {
        (cls, name): vars(cls)[name]
        for cls in (OpenAIChatCompletionsModel, OpenAIResponsesModel)
        for name in ("get_response", "stream_response")
    }
    names = chronicle_agents.instrument()
    assert (
        names
        == chronicle_agents.instrument()
        == [
            "openai_agents.model.get_response",
            "openai_agents.model.stream_response",
            "openai_agents.tool.*",
        ]
    )
    invoker = app.place_order.on_invoke_tool
    assert invoker is app.place_order.on_invoke_tool, "the SDK compares invokers by identity"
    assert vars(app.place_order)["on_invoke_tool"] is not invoker and invoker == vars(app.place_order)["on_invoke_tool"]
    assert all(vars(cls)[name] is not original for (cls, name), original in originals.items())

    assert chronicle_agents.uninstrument() >= 5
    assert all(vars(cls)[name] is original for (cls, name), original in originals.items())
    assert "on_invoke_tool" not in vars(FunctionTool) and "__init_subclass__" not in vars(Model)
    assert chronicle_agents.uninstrument() == 0

    _record_trader(recorder, server, "chat", False)
    assert [s.name for s in recorder.spans()] == ["openai_agents_agent.trade"], "nothing of the SDK recorded"


def test_models_defined_later_and_subclasses_calling_super_are_recorded_once(
    recorder: Recorder, server: LLMServer, instrumented: list[str]
) -> None:
    class Audited(OpenAIChatCompletionsModel):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            return await super().get_response(*args, **kwargs)

    class Echo(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            return ModelResponse(output=[], usage=Usage(requests=1), response_id="echo-1")

        async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            raise NotImplementedError
            yield

    async def ask() -> None:
        openai_client = app.client(server.url)
        try:
            for model in (Audited(app.MODEL, openai_client), Echo()):
                await model.get_response(
                    "be brief",
                    "hi",
                    ModelSettings(),
                    [],
                    None,
                    [],
                    ModelTracing.ENABLED,
                    previous_response_id=None,
                    conversation_id=None,
                    prompt=None,
                )
        finally:
            await openai_client.close()

    asyncio.run(ask())
    spans = [dict(s.attributes or {}) for s in recorder.spans()]
    assert [a[sc.BOUNDARY_NAME] for a in spans] == [chronicle_agents.GET_RESPONSE] * 2
    assert spans[0][sc.GEN_AI_PROVIDER_NAME] == "openai" and sc.GEN_AI_PROVIDER_NAME not in spans[1]
    echoed = chronicle.load_trace(recorder.path, "latest").boundaries[0].decode_output()
    assert type(echoed) is ModelResponse and echoed.response_id == "echo-1"


# --------------------------------------------------------------------------------------------- handoffs, agent tools


def test_a_handoff_is_recorded_as_the_model_sees_it_and_tools_can_be_stubbed_too(
    recorder: Recorder, server: LLMServer, instrumented: list[str]
) -> None:
    server.reply_with(Reply("", tool_call=("transfer_to_trader", {})), Reply("", tool_call=("place_order", ORDER)))
    recorded = asyncio.run(app.run_triage(app.ORDER_REQUEST, server.url, "responses"))
    assert _outcome(recorded) == FILLED and server.count() == 2
    trace = chronicle.load_trace(recorder.path, "latest")
    assert [b.name for b in trace.boundaries] == [
        "openai_agents_agent.triage",
        chronicle_agents.GET_RESPONSE,
        chronicle_agents.GET_RESPONSE,
        "openai_agents.tool.place_order",
    ]
    triage_call = trace.boundaries[1].decode_input()
    assert [(h["tool_name"], h["agent_name"]) for h in triage_call["handoffs"]] == [("transfer_to_trader", "trader")]
    _no_unencodable(recorder)

    replayed, report = _replay(trace, fixed=True)
    assert _outcome(replayed) == BLOCKED and report.ok and not report.drift, report

    app.LIMIT["max_shares"] = 100
    with chronicle.replay(trace, stub={"kind:llm", *instrumented[2:]}) as run:
        replayed = run.rerun()
    assert _outcome(replayed) == FILLED, "the tool answered from the recording: the fix did not run"
    assert run.report.ok and not run.report.drift and not run.report.changes, run.report
    assert server.count() == 2


def test_an_agent_as_a_tool_runs_live_with_its_model_stubbed_and_downstream_drift_is_listed(
    recorder: Recorder, server: LLMServer, instrumented: list[str]
) -> None:
    server.reply_with(
        Reply("", tool_call=("trade", {"input": "sell 1000 MSFT"})),
        Reply("", tool_call=("place_order", ORDER)),
        Reply("Your order is placed."),
    )
    recorded = asyncio.run(app.run_orchestrator(app.ORDER_REQUEST, server.url, "chat"))
    assert recorded["final_output"] == "Your order is placed." and server.count() == 3
    trace = chronicle.load_trace(recorder.path, "latest")
    keys = [tuple(name for name, _ in b.call_key) for b in trace.boundaries]
    root, model, trade = "openai_agents_agent.orchestrate", chronicle_agents.GET_RESPONSE, "openai_agents.tool.trade"
    assert keys == [
        (root,),
        (root, model),
        (root, trade),
        (root, trade, model),
        (root, trade, "openai_agents.tool.place_order"),
        (root, model),
    ], "the nested run is recorded under the tool that ran it"
    _no_unencodable(recorder)

    replayed, report = _replay(trace, fixed=False)
    assert replayed == recorded and report.ok and not report.drift and not report.changes, report

    replayed, report = _replay(trace, fixed=True)
    assert server.count() == 3
    assert report.ok, report
    assert replayed["final_output"] == "Your order is placed.", "the stub still answers"
    assert [f.call_key for f in report.drift] == [((root, 0), (model, 1))], "the answer's model call saw the fix"
    assert BLOCKED in str(replayed["items"])


def test_copied_and_renamed_tools_record_under_their_own_names(recorder: Recorder, instrumented: list[str]) -> None:
    renamed = dataclasses.replace(app.place_order, name="place_order_v2")
    copied = copy.copy(app.place_order)
    arguments = json.dumps(ORDER)

    async def invoke() -> list[Any]:
        results = []
        for tool in (renamed, copied, app.place_order):
            context = ToolContext(None, tool_name=tool.name, tool_call_id="call_1", tool_arguments=arguments)
            results.append(await invoke_function_tool(function_tool=tool, context=context, arguments=arguments))
        return results

    results = asyncio.run(invoke())
    assert [str(r) for r in results] == [FILLED] * 3
    assert [s.name for s in recorder.spans()] == [
        "openai_agents.tool.place_order_v2",
        "openai_agents.tool.place_order",
        "openai_agents.tool.place_order",
    ]
    assert vars(renamed)["on_invoke_tool"] is not vars(app.place_order)["on_invoke_tool"], "each tool its own invoker"
    _no_unencodable(recorder)
