"""The LlamaIndex integration with real LlamaIndex (its OpenAI LLM, FunctionTool, FunctionAgent) against the local
OpenAI server: record an agent run, load it, replay it offline with the guardrail fixed.

Runs in the ``.venv-llamaindex`` virtualenv (LlamaIndex's OpenAI LLM needs openai<3): ``make test-llamaindex``.
Nothing reaches the network: a network guard refuses every host but loopback for each test (LlamaIndex's
tokenizer for chat memory is the cl100k_base encoding it ships; nothing here asks tiktoken for another).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, ChatResponse, CompletionResponse
from llama_index.core.llms import CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.tools import ToolOutput
from llama_index.llms.openai import OpenAI
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel.integrations import llama_index as chronicle_llama_index
from chronicle_otel.integrations import openai as chronicle_openai
from chronicle_otel.model import Trace
from chronicle_otel.replaying._netguard import guard
from tests.conftest import Recorder
from tests.frameworks.llama_index import agent
from tests.llm_servers import LLMServer, Reply, openai_server

TOOL_CALL = Reply("", tool_call=("place_order", agent.ORDER))


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Loopback only: no proxy variable sends a request elsewhere, and any other host is refused."""
    for name in list(os.environ):
        if name.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
            monkeypatch.delenv(name)
    with guard():
        yield


@pytest.fixture
def server() -> Iterator[LLMServer]:
    with openai_server() as oa:
        yield oa


@pytest.fixture
def instrumented() -> Iterator[list[str]]:
    names = chronicle_llama_index.instrument()
    try:
        yield names
    finally:
        chronicle_llama_index.uninstrument()
        agent.LIMIT["max_shares"] = None


def _unencodable_free(recorder: Recorder, trace: Trace) -> None:
    """Never silent: no payload on any span, and none the store kept, holds an unencodable value."""
    for span in recorder.spans():
        for key in (sc.INPUT, sc.OUTPUT, sc.ERROR):
            text = (span.attributes or {}).get(key)
            assert not isinstance(text, str) or '"unencodable"' not in text, (span.name, key, text[:300])
    for b in trace.boundaries:
        for payload in (b.raw_input, b.raw_output, b.raw_error):
            assert payload is None or '"unencodable"' not in payload.text, (b.name, payload.text[:300])


def _record(recorder: Recorder, server: LLMServer, run: Any, *replies: Reply) -> tuple[Any, Trace]:
    server.reply_with(*replies)
    result = asyncio.run(run(server.url)) if asyncio.iscoroutinefunction(run) else run(server.url)
    assert server.count() == len(replies)
    trace = chronicle.load_trace(recorder.path, "latest")
    _unencodable_free(recorder, trace)
    return result, trace


def _replay(trace: Trace, server: LLMServer, **options: Any) -> tuple[Any, chronicle.ReplayReport]:
    """Rerun the recorded agent with the guardrail fixed; nothing may reach the server."""
    before = server.count()
    agent.LIMIT["max_shares"] = 100
    options.setdefault("stub", {"kind:llm"})
    with chronicle.replay(trace, **options) as run:
        result = asyncio.run(run.arerun()) if trace.root is not None and _is_async(trace) else run.rerun()
    assert server.count() == before, "no request reached the model server"
    return result, run.report


def _is_async(trace: Trace) -> bool:
    assert trace.root is not None
    return trace.root.name in ("llama_agent.arun", "llama_agent.function_agent")


def _llm_calls(trace: Trace) -> list[str]:
    return [b.name for b in trace.boundaries if b.kind == "llm"]


def _changed(report: chronicle.ReplayReport) -> set[str]:
    return {c.call_key[-1][0] for c in report.changes}


def _drift_only_after_the_tool(report: chronicle.ReplayReport, call: int = 1) -> None:
    """The call that reads the tool's (now blocked) outcome sees a new input: answered from the recording, listed
    as drift (expected after a fix); nothing else drifts."""
    expected = [("input-drift", ("llama_index.llm.stream_chat", call))]
    assert [(d.kind, d.call_key[-1]) for d in report.drift] == expected
    assert "blocked" in "\n".join(report.drift[0].details)


def _blocked(outputs: list[ToolOutput]) -> bool:
    return [o.raw_output["status"] for o in outputs] == ["blocked"]


# ------------------------------------------------------------------------------------ the agent paths


def test_chat_stream_chat_and_chat_with_tools_replay_typed_with_the_fix(
    recorder: Recorder, server: LLMServer, instrumented: list[str]
) -> None:
    assert instrumented == [
        "llama_index.llm.chat",
        "llama_index.llm.stream_chat",
        "llama_index.llm.complete",
        "llama_index.llm.stream_complete",
        "llama_index.tool",
    ]
    recorded, trace = _record(
        recorder, server, agent.run_chat, Reply("Sell 1,000 shares."), Reply("Selling at market."), TOOL_CALL
    )
    assert [o.raw_output["status"] for o in recorded["outputs"]] == ["filled"], "the incident"
    assert _llm_calls(trace) == ["llama_index.llm.chat", "llama_index.llm.stream_chat", "llama_index.llm.chat"]
    assert [b.name for b in trace.boundaries if b.kind == "tool"] == ["llama_index.tool.place_order"]

    replayed, report = _replay(trace, server)
    assert report.ok and not report.drift, report
    assert len(report.stubbed) == 3
    assert _blocked(replayed["outputs"]), "the fixed guardrail ran live and blocked the order"
    assert _changed(report) == {"llama_index.tool.place_order", "llama_agent.chat"}
    for key in ("plan", "last", "response"):
        assert isinstance(replayed[key], ChatResponse) and replayed[key] == recorded[key], key
    assert isinstance(replayed["plan"].raw, ChatCompletion) and isinstance(replayed["last"].raw, ChatCompletionChunk)
    call = replayed["response"].message.additional_kwargs["tool_calls"][0]
    assert call.function.name == "place_order" and json.loads(call.function.arguments) == agent.ORDER
    assert replayed["explanation"] == recorded["explanation"] == "Selling at market."


def test_stream_chat_with_tools_replays_the_chunks_as_they_were_read(
    recorder: Recorder, server: LLMServer, instrumented: list[str]
) -> None:
    """The reported failure: LlamaIndex accumulates the streamed tool call in place (every item shares one list of
    tool calls, and the first chunk's delta object grows), so chunks recorded after the edits replayed other
    values than the code had read."""
    recorded, trace = _record(recorder, server, agent.run_stream_tools, TOOL_CALL, Reply("Sold 1,000 MSFT."))
    arguments = recorded["arguments"]
    assert arguments[-1] == json.dumps(agent.ORDER) and len(set(arguments)) > 3, "the arguments grew while read"
    stream = next(b for b in trace.boundaries if b.name == "llama_index.llm.stream_chat")
    assert stream.stream and stream.stream_state == "complete"
    items = stream.decode_output()
    assert all(isinstance(item, ChatResponse) for item in items)
    read = [_arguments(item) for item in items]
    assert read == arguments, "each item is recorded as the code read it, not as LlamaIndex left it"

    replayed, report = _replay(trace, server)
    assert report.ok, report
    _drift_only_after_the_tool(report)
    assert replayed["arguments"] == arguments
    assert replayed["generator"] and recorded["generator"], "a generator, as LlamaIndex's streams are"
    assert replayed["last"] == recorded["last"]
    assert isinstance(replayed["last"].message.additional_kwargs["tool_calls"][0], ChoiceDeltaToolCall)
    assert _blocked(replayed["outputs"])
    assert replayed["summary"] == recorded["summary"] == "Sold 1,000 MSFT."


def _arguments(item: ChatResponse) -> str:
    calls = item.message.additional_kwargs.get("tool_calls") or []
    return "".join(c.function.arguments or "" for c in calls)


def test_predict_and_call_records_the_model_request_once_and_the_tool(
    recorder: Recorder, server: LLMServer, instrumented: list[str]
) -> None:
    recorded, trace = _record(recorder, server, agent.run_predict_and_call, TOOL_CALL)
    assert recorded.sources[0].raw_output["status"] == "filled"
    assert _llm_calls(trace) == ["llama_index.llm.chat"], "chat_with_tools under predict_and_call: one request"
    replayed, report = _replay(trace, server)
    assert report.ok and not report.drift, report
    assert _blocked(replayed.sources)


def test_the_async_paths_record_and_replay(recorder: Recorder, server: LLMServer, instrumented: list[str]) -> None:
    recorded, trace = _record(recorder, server, agent.arun, Reply("Plan."), Reply("Async explanation."), TOOL_CALL)
    assert recorded["explanation"] == "Async explanation."
    assert _llm_calls(trace) == ["llama_index.llm.chat", "llama_index.llm.stream_chat", "llama_index.llm.stream_chat"]
    replayed, report = _replay(trace, server)
    assert report.ok and not report.drift, report
    assert replayed["plan"] == recorded["plan"] and replayed["last"] == recorded["last"]
    assert replayed["explanation"] == recorded["explanation"]
    assert _blocked(replayed["outputs"])


# the workflow package lists the agent's members (inspect.getmembers): pydantic warns of each deprecated attribute
# it reads on the way (``__fields__``, ``__fields_set__``, ``model_computed_fields`` on an instance)
@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")
def test_a_function_agent_workflow_records_and_replays(
    recorder: Recorder, server: LLMServer, instrumented: list[str]
) -> None:
    quote = Reply("", tool_call=("quote", {"symbol": "MSFT"}))
    recorded, trace = _record(recorder, server, agent.run_function_agent, quote, TOOL_CALL, Reply("Sold 1,000 MSFT."))
    assert [c.tool_name for c in recorded["tool_calls"]] == ["quote", "place_order"]
    assert recorded["tool_calls"][1].tool_output.raw_output["status"] == "filled"
    assert _llm_calls(trace) == ["llama_index.llm.stream_chat"] * 3
    tools = [b for b in trace.boundaries if b.kind == "tool"]
    assert [b.name for b in tools] == ["llama_index.tool.quote", "llama_index.tool.place_order"]
    assert tools[0].decode_input() == {"kwargs": {"symbol": "MSFT", "ctx": None}}, "the workflow Context: a marker"
    replayed, report = _replay(trace, server)
    assert report.ok, report
    _drift_only_after_the_tool(report, call=2)
    assert [c.tool_output.raw_output["status"] for c in replayed["tool_calls"][1:]] == ["blocked"]
    assert replayed["response"] == recorded["response"]


def test_the_trace_loaded_from_a_collector_file_replays_the_same(
    recorder: Recorder, server: LLMServer, instrumented: list[str], tmp_path: Path
) -> None:
    recorded, trace = _record(recorder, server, agent.run_stream_tools, TOOL_CALL, Reply("Sold."))
    lines = recorder.store.read_requests(trace.trace_id)  # the Collector's file exporter writes these lines
    path = tmp_path / "collector-out.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    loaded = chronicle.load_trace(path, trace.trace_id, store=recorder.path)
    replayed, report = _replay(loaded, server)
    assert report.ok, report
    _drift_only_after_the_tool(report)
    assert replayed["last"] == recorded["last"] and replayed["arguments"] == recorded["arguments"]
    assert _blocked(replayed["outputs"])


@chronicle.boundary(kind="agent", name="llama_agent.complete")
async def run_complete(url: str) -> dict[str, Any]:
    model = agent.llm(url)
    plain = model.complete(agent.REQUEST)
    streamed = [r.text for r in model.stream_complete(agent.REQUEST)]
    aplain = await model.acomplete(agent.REQUEST)
    astreamed = [r.text async for r in await model.astream_complete(agent.REQUEST)]
    return {"plain": plain, "streamed": streamed, "aplain": aplain, "astreamed": astreamed}


def test_complete_and_stream_complete_record_and_replay(
    recorder: Recorder, server: LLMServer, instrumented: list[str]
) -> None:
    recorded, trace = _record(recorder, server, run_complete, Reply("One."), Reply("Two."), Reply("3"), Reply("4"))
    assert _llm_calls(trace) == ["llama_index.llm.complete", "llama_index.llm.stream_complete"] * 2
    assert isinstance(recorded["plain"], CompletionResponse) and recorded["streamed"][-1] == "Two."
    before = server.count()
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        replayed = asyncio.run(run.arerun())
    assert server.count() == before
    assert run.report.ok and not run.report.drift and not run.report.changes, run.report
    assert replayed == recorded


@chronicle.boundary(kind="agent", name="llama_agent.early")
async def run_early(url: str) -> dict[str, Any]:
    """Stops reading both streams after the first item; calls ``chat`` through the class."""
    model = agent.llm(url)
    first = next(iter(model.stream_chat([ChatMessage(role="user", content="a")])))
    stream = await model.astream_chat([ChatMessage(role="user", content="b")])
    afirst = await anext(stream)
    await stream.aclose()
    plain = OpenAI.chat(model, [ChatMessage(role="user", content="c")])
    return {"first": first, "afirst": afirst, "plain": plain}


def test_streams_stopped_early_and_calls_through_the_class_replay(
    recorder: Recorder, server: LLMServer, instrumented: list[str]
) -> None:
    recorded, trace = _record(recorder, server, run_early, Reply("One two."), Reply("Three four."), Reply("Five."))
    streams = [b for b in trace.boundaries if b.stream]
    assert [(b.name, b.stream_state) for b in streams] == [("llama_index.llm.stream_chat", "abandoned")] * 2
    assert _llm_calls(trace)[-1] == "llama_index.llm.chat"
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        replayed = asyncio.run(run.arerun())
    assert run.report.ok and not run.report.drift and not run.report.changes, run.report
    assert replayed == recorded


def test_a_method_instrumented_by_hand_is_taken_over(recorder: Recorder, server: LLMServer) -> None:
    chronicle.instrument(OpenAI, "chat", kind="llm", name="by_hand.chat")
    try:
        chronicle_llama_index.instrument()
        server.reply_with(Reply("Hi."))
        agent.llm(server.url).chat([ChatMessage(role="user", content="hi")])
        assert [s.name for s in recorder.spans()] == ["llama_index.llm.chat"], "recorded once, by the integration"
    finally:
        chronicle_llama_index.uninstrument()
    assert not chronicle.uninstrument(OpenAI, "chat"), "nothing of the hand-made boundary is left"


# ------------------------------------------------------------------------------------ both layers on


@pytest.fixture
def both_layers(instrumented: list[str]) -> Iterator[None]:
    chronicle_openai.instrument()
    try:
        yield
    finally:
        chronicle_openai.uninstrument()


def test_with_the_openai_sdk_integration_both_layers_record_and_kind_llm_answers_at_llama_index(
    recorder: Recorder, server: LLMServer, both_layers: None
) -> None:
    recorded, trace = _record(recorder, server, agent.run_chat, Reply("Plan."), Reply("Explained."), TOOL_CALL)
    sdk = [b for b in trace.boundaries if b.name == "openai.chat.completions.create"]
    assert [b.stream for b in sdk] == [False, True, False]
    for b in sdk:  # a request made while a LlamaIndex stream is read too: the LlamaIndex call's child
        assert b.parent is not None and b.parent.name.startswith("llama_index.llm."), b.call_key
    assert all(b.parent is trace.root for b in trace.boundaries if b.name.startswith("llama_index.llm."))

    replayed, report = _replay(trace, server)
    assert report.ok and not report.drift, report
    assert {key[-1][0] for key in report.stubbed} == {"llama_index.llm.chat", "llama_index.llm.stream_chat"}
    for key in ("plan", "last", "response"):
        assert replayed[key] == recorded[key], key
    assert _blocked(replayed["outputs"])


def test_both_layers_on_the_async_paths(recorder: Recorder, server: LLMServer, both_layers: None) -> None:
    recorded, trace = _record(recorder, server, agent.arun, Reply("Plan."), Reply("Explained."), TOOL_CALL)
    sdk = [b for b in trace.boundaries if b.name == "openai.chat.completions.create"]
    assert [b.stream for b in sdk] == [False, True, True]
    assert all(b.parent is not None and b.parent.name.startswith("llama_index.llm.") for b in sdk)
    replayed, report = _replay(trace, server)
    assert report.ok and not report.drift, report
    assert replayed["last"] == recorded["last"] and _blocked(replayed["outputs"])


def test_the_reported_failure_chunks_edited_in_place_replay_at_the_sdk_layer(
    recorder: Recorder, server: LLMServer, both_layers: None
) -> None:
    """Reported: "chunks recorded after LlamaIndex edited them in place: report ok, but the rerun raises TypeError".
    LlamaIndex's stream appends each tool-call delta to the first chunk's own delta object; replayed as edited, the
    SDK's chunks made LlamaIndex join the arguments twice, parse nothing, and call ``place_order()`` without
    arguments. Each chunk is now recorded as it was read, at both layers."""
    recorded, trace = _record(recorder, server, agent.run_stream_tools, TOOL_CALL, Reply("Sold."))
    replayed, report = _replay(trace, server, stub={"openai.chat.completions.create"}, live={"llama_index.llm.*"})
    assert report.ok, report
    assert {key[-1][0] for key in report.stubbed} == {"openai.chat.completions.create"}, "LlamaIndex's code ran"
    assert replayed["arguments"] == recorded["arguments"]
    assert replayed["outputs"][0].raw_input == {"args": (), "kwargs": agent.ORDER}
    assert _blocked(replayed["outputs"])

    replayed, report = _replay(trace, server)  # and answered at LlamaIndex's layer
    assert report.ok, report
    _drift_only_after_the_tool(report)
    assert {key[-1][0] for key in report.stubbed} == {"llama_index.llm.stream_chat"}
    assert replayed["last"] == recorded["last"] and _blocked(replayed["outputs"])


# ------------------------------------------------------------------------------------ the seam


def test_spans_carry_genai_attributes(recorder: Recorder, server: LLMServer, instrumented: list[str]) -> None:
    _record(recorder, server, agent.run_chat, Reply("Plan.", input_tokens=21, output_tokens=9), Reply("x"), TOOL_CALL)
    chat, stream, _ = (dict(s.attributes or {}) for s in recorder.spans() if s.name.startswith("llama_index.llm."))
    assert chat[sc.GEN_AI_PROVIDER_NAME] == "openai" and chat[sc.GEN_AI_REQUEST_MODEL] == "gpt-4o-mini"
    assert chat[sc.GEN_AI_RESPONSE_ID] == "chatcmpl-000001" and chat[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert (chat[sc.GEN_AI_USAGE_INPUT_TOKENS], chat[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (21, 9)
    assert stream[sc.GEN_AI_RESPONSE_ID] == "chatcmpl-000002" and stream[sc.STREAM_STATE] == "complete"
    assert stream[sc.GEN_AI_REQUEST_MODEL] == "gpt-4o-mini"


def test_bytes_per_call_keep_the_raw_sdk_objects(
    recorder: Recorder, server: LLMServer, instrumented: list[str]
) -> None:
    _, trace = _record(recorder, server, agent.run_stream_tools, TOOL_CALL, Reply("Sold 1,000 MSFT."))
    sizes = {b.call_key[-1]: len(b.raw_output.text) for b in trace.boundaries if b.raw_output is not None}
    first = sizes[("llama_index.llm.stream_chat", 0)]
    assert '"openai.types.chat.chat_completion_chunk.ChatCompletionChunk"' in next(
        b.raw_output.text for b in trace.boundaries if b.name == "llama_index.llm.stream_chat"
    )
    assert first < 16_000, sizes  # 9 chunks of a tool call, each with its raw chunk


class EchoLLM(CustomLLM):
    """A custom LLM whose ``chat`` (CustomLLM's) calls its own ``complete``: one request, recorded once."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="echo")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=f"echo: {len(prompt)} characters")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        yield CompletionResponse(text="echo", delta="echo")


@chronicle.boundary(kind="agent", name="llama_agent.echo")
def run_echo(request: str) -> str:
    llm = EchoLLM()
    return str(llm.chat([ChatMessage(role="user", content=request)]).message.content)


def test_a_nested_llm_call_is_part_of_the_outer_one(recorder: Recorder, instrumented: list[str]) -> None:
    recorded = run_echo("hello")
    assert recorded.startswith("echo: ")
    trace = chronicle.load_trace(recorder.path, "latest")
    assert _llm_calls(trace) == ["llama_index.llm.chat"], "CustomLLM.chat -> complete is one call"
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        assert run.rerun() == recorded
    assert run.report.ok and not run.report.drift, run.report


def test_classes_defined_after_instrument_are_covered_and_uninstrument_restores(
    recorder: Recorder, instrumented: list[str]
) -> None:
    class LateLLM(EchoLLM):
        @llm_chat_callback()
        def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
            return ChatResponse(message=ChatMessage(role="assistant", content="late"))

    assert type(vars(LateLLM)["chat"]).__name__ == "_Seam"
    assert type(vars(OpenAI)["chat"]).__name__ == "_Seam"
    assert chronicle_llama_index.instrument() == instrumented, "again: a no-op"
    undone = chronicle_llama_index.uninstrument()
    assert undone > 10
    assert type(vars(LateLLM)["chat"]).__name__ != "_Seam" and type(vars(OpenAI)["chat"]).__name__ != "_Seam"
    assert chronicle_llama_index.uninstrument() == 0
    assert LateLLM().chat([]).message.content == "late"
    assert not recorder.spans(), "nothing recorded once uninstrumented"


def test_a_failure_of_the_model_is_the_callers_and_is_recorded(
    recorder: Recorder, server: LLMServer, instrumented: list[str]
) -> None:
    server.close()  # nothing listens: the SDK's connection error reaches the caller, unchanged
    model = agent.llm(server.url)
    with pytest.raises(Exception, match=re.compile("connection", re.I)):
        model.chat([ChatMessage(role="user", content="hi")])
    (span,) = [s for s in recorder.spans() if s.name == "llama_index.llm.chat"]
    assert span.status.status_code.name == "ERROR"
