"""The LangChain integration with real LangChain / LangGraph against the local servers: record, load, replay offline."""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel.integrations import langchain as chronicle_langchain
from chronicle_otel.integrations import openai as chronicle_openai
from chronicle_otel.model import Trace
from tests.conftest import Recorder
from tests.llm_servers import LLMServer, Reply, anthropic_server, openai_server

INVOKE = chronicle_langchain.CHAT_MODEL_INVOKE
STREAM = chronicle_langchain.CHAT_MODEL_STREAM
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture(autouse=True, scope="module")
def frameworks() -> None:
    """LangChain, LangGraph and the agent, imported when the first test here runs: at collection they cost seconds
    in every process, xdist workers included."""
    global agent, BaseChatModel, AIMessage, AIMessageChunk, HumanMessage, ToolMessage, BaseTool, tool, ChatOpenAI
    global Command, Send
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
    from langchain_core.tools import BaseTool, tool
    from langchain_openai import ChatOpenAI
    from langgraph.types import Command, Send

    from tests.frameworks import langchain_agent as agent


@pytest.fixture(autouse=True)
def fresh_agent() -> Iterator[None]:
    agent.LIMIT["max_shares"] = None
    agent.CALLS.clear()
    yield
    agent.LIMIT["max_shares"] = None


@pytest.fixture
def instrumented() -> Iterator[None]:
    names = chronicle_langchain.instrument()
    assert names == [INVOKE, STREAM, "langchain.tool.*"]
    try:
        yield
    finally:
        chronicle_langchain.uninstrument()


@pytest.fixture
def oa() -> Iterator[LLMServer]:
    with openai_server() as server:
        yield server


@pytest.fixture
def an() -> Iterator[LLMServer]:
    with anthropic_server() as server:
        yield server


# ------------------------------------------------------------------------------------ helpers


def _no_unencodable(recorder: Recorder, trace: Trace) -> None:
    """Never silent: no payload, on a span or in the store, holds a value recorded as unencodable."""
    for span in recorder.spans():
        for key in (sc.INPUT, sc.OUTPUT, sc.ERROR):
            text = str((span.attributes or {}).get(key, ""))
            assert "unencodable" not in text, (span.name, key, text[text.find("unencodable") - 20 :][:600])
    for b in trace.boundaries:
        for payload in (b.raw_input, b.raw_output, b.raw_error):
            if payload is not None:
                assert "unencodable" not in payload.text, (b.name, payload.text[:2000])


def _run(asynchronous: bool, **kwargs: Any) -> dict[str, Any]:
    if asynchronous:
        return asyncio.run(agent.arun_agent(agent.REQUEST, **kwargs))
    return agent.run_agent(agent.REQUEST, **kwargs)


def _rerun(run: Any, asynchronous: bool) -> dict[str, Any]:
    result: dict[str, Any] = asyncio.run(run.arerun()) if asynchronous else run.rerun()
    return result


def _queue_tool_run(server: LLMServer) -> None:
    server.reply_with(
        Reply("Checking the price.", tool_call=("lookup_quote", {"symbol": "MSFT"}), input_tokens=21, output_tokens=9),
        Reply("", tool_call=("place_order", agent.order_args())),
    )


def _llm_names(trace: Trace) -> list[str]:
    return [b.name for b in trace.boundaries if b.kind == "llm"]


# ------------------------------------------------------------------------------------ the agent, every way


@dataclass(frozen=True)
class Scenario:
    provider: str
    how: agent.How = "invoke"
    streaming: bool = False
    asynchronous: bool = False

    @property
    def llm_name(self) -> str:
        return STREAM if self.how == "stream" else INVOKE


SCENARIOS = [
    Scenario("openai"),  # (a) ChatOpenAI, plain: the SDK through with_raw_response
    Scenario("openai", streaming=True),  # (b) streams inside invoke: one boundary, the final AIMessage
    Scenario("openai", how="stream"),  # (b) .stream() read chunk by chunk and added up
    Scenario("anthropic"),  # (c)
    Scenario("anthropic", streaming=True),  # (c)
    Scenario("anthropic", how="stream"),  # (c)
    Scenario("openai", how="structured"),  # (d) with_structured_output(Order)
    Scenario("openai", asynchronous=True),  # (f) ainvoke
    Scenario("openai", how="stream", streaming=True, asynchronous=True),  # (f) astream
    Scenario("anthropic", how="stream", asynchronous=True),  # (f)
    Scenario("openai", how="structured", asynchronous=True),  # (f) ainvoke through the structured-output chain
]


def _record(
    recorder: Recorder, scenario: Scenario, oa: LLMServer, an: LLMServer
) -> tuple[dict[str, Any], Trace, LLMServer]:
    server = oa if scenario.provider == "openai" else an
    if scenario.how == "structured":
        server.reply_with(Reply("", parsed_json=agent.order_args()))
    else:
        _queue_tool_run(server)
    recorded = _run(
        scenario.asynchronous,
        provider=scenario.provider,
        url=server.url,
        how=scenario.how,
        streaming=scenario.streaming,
    )
    return recorded, chronicle.load_trace(recorder.path, "latest"), server


@pytest.mark.parametrize(
    "scenario",
    SCENARIOS,
    ids=[
        f"{s.provider}-{s.how}{'-streaming' if s.streaming else ''}{'-async' if s.asynchronous else ''}"
        for s in SCENARIOS
    ],
)
def test_a_recorded_graph_replays_offline_with_typed_messages_and_the_fixed_guardrail(
    recorder: Recorder, instrumented: None, oa: LLMServer, an: LLMServer, scenario: Scenario
) -> None:
    recorded, trace, server = _record(recorder, scenario, oa, an)
    assert recorded["result"] == {"status": "filled", **agent.order_args()}, "the incident: 1,000 shares sold"
    calls = 1 if scenario.how == "structured" else 2
    assert server.count() == calls
    assert _llm_names(trace) == [scenario.llm_name] * calls, "each model call recorded once, at LangChain's seam"
    _no_unencodable(recorder, trace)
    tools = [b.name for b in trace.boundaries if b.kind == "tool"]
    assert tools == (
        ["langchain.tool.place_order"]
        if scenario.how == "structured"
        else ["langchain.tool.lookup_quote", "langchain.tool.place_order"]
    )
    outputs = [b.decode_output() for b in trace.boundaries if b.kind == "llm"]
    if scenario.how == "stream":
        assert all(isinstance(c, AIMessageChunk) for chunks in outputs for c in chunks), outputs
        total = outputs[0][0]
        for chunk in outputs[0][1:]:
            total = total + chunk
        assert [c["name"] for c in total.tool_calls] == ["lookup_quote"], "the recorded chunks add up"
    else:
        assert all(isinstance(m, AIMessage) for m in outputs)

    agent.LIMIT["max_shares"] = 100  # the fix
    before = (oa.count(), an.count())
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        replayed = _rerun(run, scenario.asynchronous)
    assert (oa.count(), an.count()) == before, "no request reached a server"
    assert replayed["result"] == {"status": "blocked", "reason": "1000 shares exceeds 100"}
    report = run.report
    assert report.ok and not report.drift, report
    assert len(report.stubbed) == calls
    assert {c.call_key[-1][0] for c in report.changes} == {
        "langchain.tool.place_order",
        "langchain_agent.arun" if scenario.asynchronous else "langchain_agent.run",
    }, "only the fixed tool (and so the run's result) differs"
    assert replayed["answers"] == recorded["answers"], "the stubs answered with the recorded AIMessages"
    assert all(type(m) is AIMessage for m in replayed["answers"])
    if scenario.how == "structured":
        assert isinstance(replayed["order"], agent.Order) and replayed["order"] == recorded["order"]
    else:
        first = replayed["answers"][0]
        assert first.tool_calls[0]["name"] == "lookup_quote" and first.tool_calls[0]["args"] == {"symbol": "MSFT"}
        if scenario.how != "stream" and not scenario.streaming:
            assert first.usage_metadata is not None and first.usage_metadata["output_tokens"] in (7, 9)
            assert first.response_metadata["model_name"] in ("gpt-test", "claude-test")


# ------------------------------------------------------------------------------------ (e) parallel tool calls


@dataclass
class ParallelReply(Reply):
    """An answer with several tool calls at once (the server's ``Reply`` has one)."""

    calls: tuple[tuple[str, dict[str, Any]], ...] = ()


def _parallel_completion(body: dict[str, Any], reply: Reply, n: int, model: str) -> dict[str, Any]:
    calls = reply.calls if isinstance(reply, ParallelReply) else ((reply.tool_call,) if reply.tool_call else ())
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None, "refusal": None}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{n:06d}_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for i, (name, args) in enumerate(calls)
        ]
    return {
        "id": f"chatcmpl-{n:06d}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def _not_streamed(body: dict[str, Any], reply: Reply, n: int, model: str) -> Iterator[tuple[str | None, Any]]:
    raise NotImplementedError("the parallel server answers plain requests only")


def test_parallel_tool_calls_of_one_answer_run_live_and_match_their_recordings(
    recorder: Recorder, instrumented: None
) -> None:
    server = LLMServer(
        {"/v1/chat/completions": (_parallel_completion, _not_streamed)},
        lambda message: {"error": {"message": message, "type": "invalid_request_error"}},
    )
    with server:
        server.reply_with(
            ParallelReply("", calls=(("lookup_quote", {"symbol": "MSFT"}), ("lookup_quote", {"symbol": "AAPL"}))),
            ParallelReply("", calls=(("place_order", agent.order_args()),)),
        )
        recorded = agent.run_agent(agent.REQUEST, "openai", server.url)
        assert recorded["result"]["status"] == "filled"
        trace = chronicle.load_trace(recorder.path, "latest")
        _no_unencodable(recorder, trace)
        lookups = trace.find("langchain.tool.lookup_quote")
        assert sorted(b.decode_input()["tool_input"]["symbol"] for b in lookups) == ["AAPL", "MSFT"]
        assert len(recorded["answers"][0].tool_calls) == 2

        agent.LIMIT["max_shares"] = 100
        count = server.count()
        with chronicle.replay(trace, stub={"kind:llm"}) as run:
            replayed = run.rerun()
        assert server.count() == count == 2
    assert replayed["result"]["status"] == "blocked"
    assert run.report.ok and not run.report.drift, run.report
    assert replayed["answers"] == recorded["answers"]
    assert {c.call_key[-1][0] for c in run.report.changes} == {"langchain.tool.place_order", "langchain_agent.run"}
    assert agent.CALLS["lookup_quote"] == 4, "both lookups ran live in both runs"


# ------------------------------------------------------------------------------------ a Collector file


def test_the_trace_from_a_collector_file_replays_the_same(
    recorder: Recorder, instrumented: None, oa: LLMServer, an: LLMServer, tmp_path: Path
) -> None:
    recorded, trace, _ = _record(recorder, Scenario("openai", how="stream"), oa, an)
    lines = recorder.store.read_requests(trace.trace_id)  # the Collector's file exporter writes these lines
    path = tmp_path / "collector-out.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    loaded = chronicle.load_trace(path, trace.trace_id, store=recorder.path)
    assert _llm_names(loaded) == [STREAM, STREAM]
    agent.LIMIT["max_shares"] = 100
    count = oa.count()
    with chronicle.replay(loaded, stub={"kind:llm"}) as run:
        replayed = run.rerun()
    assert oa.count() == count
    assert run.report.ok and not run.report.drift, run.report
    assert replayed["result"]["status"] == "blocked"
    assert replayed["answers"] == recorded["answers"]


# ------------------------------------------------------------------------------------ with the SDK integration


def test_with_the_openai_sdk_integration_both_record_and_the_replay_answers_at_langchain(
    recorder: Recorder, instrumented: None, oa: LLMServer, an: LLMServer
) -> None:
    chronicle_openai.instrument()
    try:
        recorded, trace, _ = _record(recorder, Scenario("openai", streaming=True), oa, an)
        sdk = trace.find("openai.chat.completions.create")
        outer = trace.find(INVOKE)
        assert len(sdk) == len(outer) == 2
        assert [b.parent for b in sdk] == outer, "the SDK call is a child of LangChain's"
        assert all(b.stream for b in sdk)
        _no_unencodable(recorder, trace)

        agent.LIMIT["max_shares"] = 100
        count = oa.count()
        with chronicle.replay(trace, stub={"kind:llm"}) as run:
            replayed = run.rerun()
    finally:
        chronicle_openai.uninstrument()
    assert oa.count() == count
    report = run.report
    assert report.ok and not report.drift, report
    assert [key[-1][0] for key in report.stubbed] == [INVOKE, INVOKE], "answered at the LangChain layer"
    assert replayed["result"]["status"] == "blocked"
    assert replayed["answers"] == recorded["answers"]


def test_a_replay_may_stub_the_sdk_layer_and_run_langchain_live(
    recorder: Recorder, instrumented: None, oa: LLMServer, an: LLMServer
) -> None:
    chronicle_openai.instrument()
    try:
        recorded, trace, _ = _record(recorder, Scenario("openai", streaming=True), oa, an)
        count = oa.count()
        with chronicle.replay(trace, stub={"openai.chat.completions.create"}, live={INVOKE}) as run:
            replayed = run.rerun()
    finally:
        chronicle_openai.uninstrument()
    assert oa.count() == count, "LangChain ran live on the SDK's recorded stream"
    assert [key[-1][0] for key in run.report.stubbed] == ["openai.chat.completions.create"] * 2
    assert run.report.ok, run.report
    assert [m.tool_calls for m in replayed["answers"]] == [m.tool_calls for m in recorded["answers"]]


# ------------------------------------------------------------------------------------ what is recorded


def test_inputs_are_the_messages_and_options_and_stable_from_run_to_run(
    recorder: Recorder, instrumented: None, oa: LLMServer, an: LLMServer
) -> None:
    _, trace, _ = _record(recorder, Scenario("openai"), oa, an)
    calls = [b for b in trace.boundaries if b.kind == "llm"]
    first = calls[0].decode_input()
    assert set(first) == {"messages", "model", "options"}
    assert first["model"] == "gpt-test"
    assert first["messages"] == [HumanMessage(agent.REQUEST)]
    assert [t["function"]["name"] for t in first["options"]["tools"]] == ["lookup_quote", "place_order"]
    second = calls[1].decode_input()
    assert [type(m) for m in second["messages"]] == [HumanMessage, AIMessage, ToolMessage]
    assert all(m.id is None for m in second["messages"]), "LangGraph's fresh message ids are not recorded"
    everything = "".join(b.raw_input.text for b in trace.boundaries if b.raw_input is not None and b.kind != "agent")
    assert not UUID.search(everything), "no run id, message id or other UUID in a model or tool input"
    assert "callbacks" not in everything and "sk-test" not in everything and " at 0x" not in everything
    tool = trace.find("langchain.tool.place_order")[0]
    assert tool.decode_input() == {"tool_input": agent.order_args(), "tool_call_id": "call_000002"}
    output = tool.decode_output()
    assert isinstance(output, ToolMessage) and output.tool_call_id == "call_000002"


def test_structured_output_records_the_schema_class_by_name_and_schema(
    recorder: Recorder, instrumented: None, oa: LLMServer, an: LLMServer
) -> None:
    _, trace, _ = _record(recorder, Scenario("openai", how="structured"), oa, an)
    (call,) = [b for b in trace.boundaries if b.kind == "llm"]
    options = call.decode_input()["options"]
    assert options["response_format"]["class"] == "tests.frameworks.langchain_agent.Order"
    assert options["response_format"]["json_schema"]["required"] == ["symbol", "quantity", "side"]
    message = call.decode_output()
    assert isinstance(message, AIMessage) and message.additional_kwargs["parsed"] == agent.Order(**agent.order_args())


def test_spans_carry_the_provider_model_and_usage(
    recorder: Recorder, instrumented: None, oa: LLMServer, an: LLMServer
) -> None:
    _record(recorder, Scenario("openai"), oa, an)
    _record(recorder, Scenario("anthropic", how="stream"), oa, an)
    spans = [dict(s.attributes or {}) for s in recorder.spans() if s.name in (INVOKE, STREAM)]
    plan, _, claude, _ = spans
    assert plan[sc.GEN_AI_PROVIDER_NAME] == "openai" and plan[sc.GEN_AI_REQUEST_MODEL] == "gpt-test"
    assert plan[sc.GEN_AI_RESPONSE_MODEL] == "gpt-test"
    assert (plan[sc.GEN_AI_USAGE_INPUT_TOKENS], plan[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (21, 9)
    assert plan[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_calls",)
    assert claude[sc.GEN_AI_PROVIDER_NAME] == "anthropic" and claude[sc.GEN_AI_REQUEST_MODEL] == "claude-test"
    assert claude[sc.GEN_AI_REQUEST_MAX_TOKENS] == 4096
    assert claude[sc.GEN_AI_RESPONSE_MODEL] == "claude-test"
    assert claude[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_use",), "from the chunks, as they were read"
    assert claude[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 9
    assert claude[sc.STREAM_STATE] == "complete" and claude[sc.STREAM_ITEMS] > 3


# ------------------------------------------------------------------------------------ seams and selectors


def test_a_stream_answered_by_invoke_is_recorded_once(recorder: Recorder, instrumented: None, oa: LLMServer) -> None:
    oa.reply_with(Reply("Sell 5 shares."))

    @chronicle.boundary(kind="agent", name="langchain_agent.no_stream")
    def no_stream(url: str) -> str:
        model = ChatOpenAI(
            model="gpt-test", api_key="sk-test", base_url=url + "/v1", max_retries=0, disable_streaming=True
        )
        return "".join(str(chunk.content) for chunk in model.stream("sell"))

    assert no_stream(oa.url) == "Sell 5 shares."
    trace = chronicle.load_trace(recorder.path, "latest")
    assert _llm_names(trace) == [STREAM], "stream() fell back to invoke(): one boundary, not two"
    (item,) = trace.find(STREAM)[0].decode_output()
    assert isinstance(item, AIMessage)
    count = oa.count()
    with chronicle.replay(trace) as run:
        assert run.rerun() == "Sell 5 shares."
    assert oa.count() == count and run.report.ok and not run.report.drift, run.report


def test_batch_records_one_invoke_per_input(recorder: Recorder, instrumented: None, oa: LLMServer) -> None:
    oa.reply_with(Reply("one"), Reply("two"), Reply("three"))

    @chronicle.boundary(kind="agent", name="langchain_agent.batch")
    def batch(url: str) -> list[str]:
        model = ChatOpenAI(model="gpt-test", api_key="sk-test", base_url=url + "/v1", max_retries=0)
        return sorted(str(m.content) for m in model.batch(["a", "b", "c"]))

    recorded = batch(oa.url)
    assert recorded == ["one", "three", "two"]
    trace = chronicle.load_trace(recorder.path, "latest")
    assert _llm_names(trace) == [INVOKE] * 3
    count = oa.count()
    with chronicle.replay(trace) as run:
        assert run.rerun() == recorded
    assert oa.count() == count and run.report.ok and not run.report.drift, run.report


def test_selectors_pick_one_tool(recorder: Recorder, instrumented: None, oa: LLMServer, an: LLMServer) -> None:
    recorded, trace, _ = _record(recorder, Scenario("openai"), oa, an)
    agent.CALLS.clear()
    agent.LIMIT["max_shares"] = 100
    with chronicle.replay(trace, stub={"kind:llm", "langchain.tool.lookup_quote"}) as run:
        replayed = run.rerun()
    assert agent.CALLS == {"place_order": 1}, "the stubbed tool did not run; the other one did"
    assert replayed["result"]["status"] == "blocked" and run.report.ok, run.report
    assert replayed["tools"][0] == recorded["tools"][0], "the stubbed tool answered with its recorded ToolMessage"

    agent.CALLS.clear()
    with chronicle.replay(trace, stub={"kind:llm", "kind:tool"}, live={"langchain.tool.place_order"}) as run:
        run.rerun()
    assert agent.CALLS == {"place_order": 1}
    assert run.report.ok, run.report


def test_a_provider_error_is_recorded_and_replayed_as_its_own_class(
    recorder: Recorder, instrumented: None, oa: LLMServer
) -> None:
    @chronicle.boundary(kind="agent", name="langchain_agent.failing")
    def failing(url: str) -> str:
        model = ChatOpenAI(model="gpt-test", api_key="sk-test", base_url=url + "/v1/missing", max_retries=0)
        try:
            model.invoke("sell")
        except openai.NotFoundError as exc:
            return f"not found: {exc.status_code}"
        return "found"

    assert failing(oa.url) == "not found: 404"
    trace = chronicle.load_trace(recorder.path, "latest")
    count = oa.count()
    with chronicle.replay(trace) as run:
        assert run.rerun() == "not found: 404"
    assert oa.count() == count and run.report.ok, run.report


def test_uninstrument_restores_langchain_and_instrument_is_idempotent() -> None:
    def methods() -> tuple[Any, ...]:
        return (vars(BaseChatModel)["invoke"], vars(BaseChatModel)["astream"], vars(BaseTool)["run"])

    originals = methods()
    first = chronicle_langchain.instrument()
    patched = methods()
    assert all(p is not o for p, o in zip(patched, originals, strict=True))
    assert chronicle_langchain.instrument() == first
    assert methods() == patched, "a no-op the second time"
    assert chronicle_langchain.uninstrument() == 6
    assert methods() == originals
    assert chronicle_langchain.uninstrument() == 0


def test_with_recording_off_the_seams_call_straight_through(tmp_path: Path, oa: LLMServer) -> None:
    chronicle.configure(enabled=False)
    chronicle_langchain.instrument()
    try:
        oa.reply_with(Reply("hello"))
        model = ChatOpenAI(model="gpt-test", api_key="sk-test", base_url=oa.url + "/v1", max_retries=0)
        assert model.invoke("hi").content == "hello"
    finally:
        chronicle_langchain.uninstrument()


def test_a_tool_that_hands_off_with_a_command_records_it_typed(recorder: Recorder, instrumented: None) -> None:
    @tool
    def hand_off(desk: str) -> Command:
        """Send the order to another desk."""
        return Command(goto=[Send(desk, {"symbol": "MSFT"})], update={"desk": desk})

    @chronicle.boundary(kind="agent", name="langchain_agent.hand_off")
    def route(desk: str) -> Any:
        return hand_off.invoke({"desk": desk})

    recorded = route("risk")
    trace = chronicle.load_trace(recorder.path, "latest")
    _no_unencodable(recorder, trace)
    with chronicle.replay(trace, stub={"kind:tool"}) as run:
        replayed = run.rerun()
    assert isinstance(replayed, Command) and replayed == recorded
    assert isinstance(replayed.goto[0], Send) and replayed.goto[0].node == "risk"
    assert run.report.ok and not run.report.drift, run.report


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved:DeprecationWarning")
def test_create_react_agent_is_recorded_through_the_same_seams(
    recorder: Recorder, instrumented: None, oa: LLMServer
) -> None:
    from langgraph.prebuilt import create_react_agent

    @chronicle.boundary(kind="agent", name="langchain_agent.react")
    def react(url: str) -> list[Any]:
        graph = create_react_agent(agent.make_model("openai", url), agent.TOOLS)
        state = graph.invoke({"messages": [HumanMessage(agent.REQUEST)]})
        return [m for m in state["messages"] if isinstance(m, (AIMessage, ToolMessage))]

    _queue_tool_run(oa)
    oa.reply_with(Reply("Done."))
    recorded = react(oa.url)
    trace = chronicle.load_trace(recorder.path, "latest")
    assert [b.name for b in trace.boundaries if b.kind != "agent"] == [
        INVOKE,
        "langchain.tool.lookup_quote",
        INVOKE,
        "langchain.tool.place_order",
        INVOKE,
    ]
    _no_unencodable(recorder, trace)
    count = oa.count()
    agent.LIMIT["max_shares"] = 100
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        replayed = run.rerun()
    assert oa.count() == count
    assert run.report.ok, run.report
    drift = {f.call_key[-1] for f in run.report.drift}
    assert drift == {(INVOKE, 2)}, "the model's last call sees the blocked order: listed as drift, answered anyway"
    assert json.loads(str(replayed[3].content))["status"] == "blocked"
    assert [m for m in replayed if isinstance(m, AIMessage)] == [m for m in recorded if isinstance(m, AIMessage)]


def test_a_generated_test_switches_the_integration_on_and_replays_offline(
    recorder: Recorder, instrumented: None, oa: LLMServer, an: LLMServer, tmp_path: Path
) -> None:
    import subprocess
    import sys

    from chronicle_otel.cli import main

    _, trace, _ = _record(recorder, Scenario("anthropic", how="stream"), oa, an)
    out = tmp_path / "regressions"
    assert main(["gen-test", trace.trace_id, "--store", str(recorder.path), "--out", str(out)]) == 0
    test_file = next(out.glob("test_*.py"))
    assert "chronicle_langchain.instrument()" in test_file.read_text()
    an.close()  # nothing to answer: the replay must not need it
    repo = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", str(test_file), "-q", "-p", "no:cacheprovider", "--rootdir", str(out)],
        cwd=repo,
        env={k: v for k, v in os.environ.items() if not k.startswith(("CHRONICLE_", "OTEL_"))}
        | {"PYTHONPATH": str(repo), "CHRONICLE_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_failure_inside_the_integration_leaves_the_call_alone(
    recorder: Recorder,
    instrumented: None,
    oa: LLMServer,
    monkeypatch: pytest.MonkeyPatch,
    swallow_internal_errors: None,
) -> None:
    def broken(*args: Any) -> Any:
        raise RuntimeError("integration bug")

    monkeypatch.setattr(chronicle_langchain, "_model_call", broken)
    monkeypatch.setattr(chronicle_langchain, "_tool_call", broken)
    oa.reply_with(Reply("hello"))
    model = ChatOpenAI(model="gpt-test", api_key="sk-test", base_url=oa.url + "/v1", max_retries=0)
    assert model.invoke("hi").content == "hello"
    assert agent.lookup_quote.invoke({"symbol": "MSFT"}) == {"symbol": "MSFT", "price": 412.5}
    assert not [s for s in recorder.spans() if s.name.startswith("langchain.")], "unrecorded, not broken"


# ------------------------------------------------------------------------------------ callbacks of stubbed calls


EVENT_CASES = [
    ("chain", "openai", False),  # the chain streams the model: astream, its chunks recorded as the stream's items
    ("chain", "openai", True),
    ("chain", "anthropic", False),
    ("graph", "openai", False),  # the graph's node invokes the model, which streams for astream_events' handler
    ("graph", "openai", True),
    ("graph", "anthropic", False),
]


@pytest.mark.filterwarnings("ignore:astream_events version='v1' is deprecated")
@pytest.mark.parametrize("version", ["v2", "v1"])
@pytest.mark.parametrize(
    ("source", "provider", "streaming"),
    EVENT_CASES,
    ids=[f"{src}-{p}{'-streaming' if st else ''}" for src, p, st in EVENT_CASES],
)
def test_astream_events_of_a_stubbed_replay_are_the_recorded_ones(
    recorder: Recorder,
    instrumented: None,
    oa: LLMServer,
    an: LLMServer,
    source: str,
    provider: str,
    streaming: bool,
    version: str,
) -> None:
    server = oa if provider == "openai" else an
    if source == "chain":
        server.reply_with(Reply("Ships in 3 days.", input_tokens=21, output_tokens=9))
    else:
        _queue_tool_run(server)
    coro = agent.stream_events(agent.REQUEST, provider, server.url, streaming, source, version)  # type: ignore[arg-type]
    recorded = asyncio.run(coro)
    assert recorded["streamed"] > 2, "live: the model's tokens, one event each"
    if source == "chain":
        assert recorded["text"] == "Ships in 3 days."
    assert ("on_chat_model_start", type(agent.make_model(provider, server.url)).__name__) in {
        e[:2] for e in recorded["events"]
    }
    trace = chronicle.load_trace(recorder.path, "latest")
    _no_unencodable(recorder, trace)
    count = server.count()
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        replayed = asyncio.run(run.arerun())
    assert server.count() == count, "no request"
    assert run.report.ok and not run.report.drift and not run.report.changes, run.report
    assert replayed["text"] == recorded["text"], "the streamed text, as the consumer collects it"
    assert replayed["streamed"] == recorded["streamed"]
    assert replayed["events"] == recorded["events"], "the same events, names and nesting, in the same order"


def test_stream_mode_messages_yields_the_recorded_chunks_of_stubbed_calls(
    recorder: Recorder, instrumented: None, oa: LLMServer, an: LLMServer
) -> None:
    cases = [("openai", True, "invoke"), ("anthropic", True, "invoke"), ("openai", False, "stream")]
    for provider, streaming, how in cases:
        server = oa if provider == "openai" else an
        _queue_tool_run(server)
        recorded = agent.stream_messages(agent.REQUEST, provider, server.url, streaming, how)  # type: ignore[arg-type]
        chunks = [m for m in recorded if m[0] == "AIMessageChunk"]
        assert len(chunks) > 6 and len(chunks) == len(recorded), "live: token by token, through LangChain's callbacks"
        assert "".join("".join(m[2]) for m in chunks) == json.dumps({"symbol": "MSFT"}) + json.dumps(agent.order_args())
        trace = chronicle.load_trace(recorder.path, "latest")
        count = server.count()
        with chronicle.replay(trace, stub={"kind:llm"}) as run:
            replayed = run.rerun()
        assert server.count() == count
        assert run.report.ok and not run.report.drift and not run.report.changes, run.report
        assert replayed == recorded, (provider, how)


def test_a_streamed_invoke_records_its_chunks_with_the_message_and_replays_them(
    recorder: Recorder, instrumented: None, oa: LLMServer, an: LLMServer
) -> None:
    recorded, trace, _ = _record(recorder, Scenario("openai", streaming=True), oa, an)
    first = trace.find(INVOKE)[0]
    message = first.decode_output()
    assert type(message) is AIMessage
    chunks = message.model_extra["chronicle_chunks"]
    assert all(type(c) is AIMessageChunk and c.id is None for c in chunks), "without LangChain's run ids"
    assert UUID.findall(first.raw_output.text) == [UUID.search(str(message.id))[0]], "no run id but the message's"
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    assert total.content == message.content and total.tool_calls == message.tool_calls, "the chunks add up"
    assert "chronicle_chunks" not in (recorded["answers"][0].model_extra or {}), "the caller got the message alone"
    size = len(first.raw_output.text)
    assert size < 6000, size

    plain = chronicle.load_trace(recorder.path, _record(recorder, Scenario("openai"), oa, an)[1].trace_id)
    assert "chronicle_chunks" not in plain.find(INVOKE)[0].raw_output.text, "an invoke that did not stream: as it was"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_handler_of_the_caller_gets_the_same_callbacks_once_recorded_live_or_stubbed(
    recorder: Recorder, oa: LLMServer, an: LLMServer, provider: str
) -> None:
    server = oa if provider == "openai" else an
    server.reply_with(Reply("Ships in 3 days."), Reply("Ships in 3 days."))
    baseline = agent.counted(agent.REQUEST, provider, server.url)  # LangChain alone
    assert baseline["counts"]["start"] == baseline["counts"]["end"] == 2
    assert baseline["counts"]["token"] > 6 and "".join(baseline["tokens"]) == "Ships in 3 days." * 2

    chronicle_langchain.instrument()
    try:
        server.reply_with(Reply("Ships in 3 days."), Reply("Ships in 3 days."))
        recorded = agent.counted(agent.REQUEST, provider, server.url)
        assert recorded == baseline, "recording fires nothing of its own"
        trace = chronicle.load_trace(recorder.path, "latest")
        assert _llm_names(trace) == [INVOKE, STREAM]

        count = server.count()
        with chronicle.replay(trace, stub={"kind:llm"}) as run:
            assert run.rerun() == baseline, "a stubbed call fires what the call fired"
        assert server.count() == count and run.report.ok, run.report

        server.reply_with(Reply("Ships in 3 days."), Reply("Ships in 3 days."))
        with chronicle.replay(trace, live={"kind:llm"}) as run:
            assert run.rerun() == baseline, "a live call fires its own callbacks, once"
        assert server.count() == count + 2 and run.report.ok, run.report
    finally:
        chronicle_langchain.uninstrument()


def test_a_stubbed_provider_error_fires_on_llm_error(recorder: Recorder, instrumented: None, oa: LLMServer) -> None:
    recorded = agent.counted(agent.REQUEST, "openai", oa.url, path="/missing")
    assert recorded["answers"] == ["OpenAIModelNotFoundError", "OpenAIModelNotFoundError"]
    assert recorded["counts"] == {"start": 2, "error:OpenAIModelNotFoundError": 2}
    trace = chronicle.load_trace(recorder.path, "latest")
    count = oa.count()
    with chronicle.replay(trace) as run:
        assert run.rerun() == recorded
    assert oa.count() == count and run.report.ok, run.report


def test_a_model_s_own_handlers_are_told_of_its_stubbed_calls(
    recorder: Recorder, instrumented: None, oa: LLMServer
) -> None:
    counter = agent.Counter()

    @chronicle.boundary(kind="agent", name="langchain_agent.own_handlers")
    def own(url: str) -> str:
        model = ChatOpenAI(
            model="gpt-test", api_key="sk-test", base_url=url + "/v1", max_retries=0, callbacks=[counter], tags=["t"]
        )
        return str(model.invoke("hi").content) + str(model.bind(stop=["x"]).invoke("hi").content)

    oa.reply_with(Reply("one"), Reply("two"))
    assert own(oa.url) == "onetwo"
    assert counter.counts == {"start": 2, "end": 2}
    trace = chronicle.load_trace(recorder.path, "latest")
    with chronicle.replay(trace) as run:
        assert run.rerun() == "onetwo"
    assert counter.counts == {"start": 4, "end": 4}, "the model's own callbacks are told of a stubbed call"
    assert run.report.ok, run.report
