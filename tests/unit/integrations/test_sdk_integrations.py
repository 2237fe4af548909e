"""The OpenAI and Anthropic integrations with the real SDKs against local servers: record, load, replay offline."""

from __future__ import annotations

import asyncio
import gc
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel.integrations import anthropic as chronicle_anthropic
from chronicle_otel.integrations import openai as chronicle_openai
from chronicle_otel.model import Trace
from tests.conftest import Recorder
from tests.llm_servers import LLMServer, Reply, anthropic_server, openai_server
from tests.unit.integrations import sdk_agent

# The SDKs are imported where they are used, not when pytest collects this module: importing anthropic
# alone takes about two seconds.
if TYPE_CHECKING:
    import openai

OPENAI_CALLS = 5  # chat plain, chat stream, parse, responses plain, responses stream
ANTHROPIC_CALLS = 3  # create, create(stream=True), stream(...)


@pytest.fixture
def servers() -> Iterator[tuple[LLMServer, LLMServer]]:
    with openai_server() as oa, anthropic_server() as an:
        yield oa, an


@pytest.fixture
def instrumented() -> Iterator[None]:
    names = chronicle_openai.instrument() + chronicle_anthropic.instrument()
    assert "openai.chat.completions.create" in names and "anthropic.messages.stream" in names
    try:
        yield
    finally:
        chronicle_openai.uninstrument()
        chronicle_anthropic.uninstrument()


def _queue_sync_run(oa: LLMServer, an: LLMServer, quantity: int = 1000) -> None:
    order = sdk_agent.order_json(quantity)
    oa.reply_with(
        Reply(json.dumps(order), input_tokens=21, output_tokens=9),
        Reply("Selling 1,000 shares of MSFT at market."),
        Reply("", parsed_json=order),
        Reply("Sell order for MSFT."),
        Reply("Streaming summary of the MSFT order."),
    )
    an.reply_with(
        Reply("Looks fine to me.", output_tokens=5),
        Reply("Streamed review: fine."),
        Reply("Helper review: approved.", output_tokens=6),
    )


def _record_sync(recorder: Recorder, oa: LLMServer, an: LLMServer) -> tuple[dict[str, Any], Trace]:
    _queue_sync_run(oa, an)
    result = sdk_agent.run_agent(sdk_agent.ORDER_REQUEST, oa.url, an.url)
    assert (oa.count(), an.count()) == (OPENAI_CALLS, ANTHROPIC_CALLS)
    trace = chronicle.load_trace(recorder.path, "latest")
    return result, trace


def test_a_recorded_run_replays_offline_with_typed_objects_streams_and_no_drift(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None
) -> None:
    oa, an = servers
    recorded, trace = _record_sync(recorder, oa, an)
    assert recorded["result"] == {"status": "filled", "symbol": "MSFT", "quantity": 1000}  # the incident
    assert recorded["explanation"] == "Selling 1,000 shares of MSFT at market."
    assert recorded["review_helper"] == recorded["review_final"] == "Helper review: approved."

    sdk_agent.LIMIT["max_shares"] = 100  # the fix
    try:
        with chronicle.replay(trace, stub={"kind:llm"}) as run:
            replayed = run.rerun()
    finally:
        sdk_agent.LIMIT["max_shares"] = None
    assert (oa.count(), an.count()) == (OPENAI_CALLS, ANTHROPIC_CALLS), "no request reached the servers"
    assert replayed["result"]["status"] == "blocked"
    assert {k: v for k, v in replayed.items() if k != "result"} == {
        k: v for k, v in recorded.items() if k != "result"
    }, "every SDK answer, plain and streamed, came back from the recording"
    report = run.report
    assert report.ok and not report.drift, report
    assert len(report.stubbed) == OPENAI_CALLS + ANTHROPIC_CALLS
    changed = {c.call_key[-1][0] for c in report.changes}
    assert changed == {"sdk_agent.place_order", "sdk_agent.run"}, "only the changed tool (and so the run) differs"


def test_inputs_are_what_the_caller_passed_and_never_secrets(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None
) -> None:
    oa, an = servers
    _, trace = _record_sync(recorder, oa, an)
    calls = [b for b in trace.boundaries if b.kind == "llm"]
    assert [b.name for b in calls] == [
        *["openai.chat.completions.create"] * 2,
        "openai.chat.completions.parse",
        *["openai.responses.create"] * 2,
        *["anthropic.messages.create"] * 2,
        "anthropic.messages.stream",
    ]
    first = calls[0].decode_input(("tests.",))
    assert first == {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": sdk_agent.ORDER_REQUEST}],
        "temperature": 0,
    }
    everything = "".join(b.raw_input.text for b in calls if b.raw_input is not None)
    assert "NotGiven" not in everything and "Omit" not in everything and " at 0x" not in everything
    assert "sk-test-openai-key" not in everything and "sk-ant-test-key" not in everything
    stored = json.dumps([s.attributes for s in trace.spans], default=str)
    assert "sk-test-openai-key" not in stored and "sk-ant-test-key" not in stored


def test_streams_record_each_typed_chunk_and_how_they_ended(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None
) -> None:
    oa, an = servers
    _, trace = _record_sync(recorder, oa, an)
    streams = [b for b in trace.boundaries if b.kind == "llm" and b.stream]
    assert [b.name for b in streams] == [
        "openai.chat.completions.create",
        "openai.responses.create",
        "anthropic.messages.create",
        "anthropic.messages.stream",
    ]
    assert [b.stream_state for b in streams] == ["complete"] * 4
    chunks = streams[0].decode_output(("tests.", "openai.", "anthropic."))
    assert all(type(c).__name__ == "ChatCompletionChunk" for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
        "Selling 1,000 shares of MSFT at market."
    )
    events = streams[3].decode_output(("tests.", "openai.", "anthropic."))
    assert events[0].type == "message_start" and events[-1].type == "message_stop"


def test_spans_carry_genai_attributes_from_the_real_responses(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None
) -> None:
    oa, an = servers
    _record_sync(recorder, oa, an)
    spans = [s for s in recorder.spans() if (s.attributes or {}).get(sc.BOUNDARY_KIND) == "llm"]
    attrs = [dict(s.attributes or {}) for s in spans]
    plan, stream, parse, summary, summary_stream, review, review_stream, helper = attrs
    assert plan[sc.GEN_AI_PROVIDER_NAME] == "openai" and plan[sc.GEN_AI_REQUEST_MODEL] == "gpt-test"
    assert plan[sc.GEN_AI_REQUEST_TEMPERATURE] == 0
    assert plan[sc.GEN_AI_RESPONSE_ID] == "chatcmpl-000001" and plan[sc.GEN_AI_RESPONSE_MODEL] == "gpt-test"
    assert plan[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert (plan[sc.GEN_AI_USAGE_INPUT_TOKENS], plan[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (21, 9)
    assert stream[sc.GEN_AI_RESPONSE_ID] == "chatcmpl-000002" and stream[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert stream[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 7, "usage from the last chunk (include_usage)"
    assert parse[sc.GEN_AI_RESPONSE_ID] == "chatcmpl-000003"
    assert summary[sc.GEN_AI_RESPONSE_ID] == "resp_000004" and summary[sc.GEN_AI_USAGE_INPUT_TOKENS] == 11
    assert summary_stream[sc.GEN_AI_RESPONSE_ID] == "resp_000005"
    assert summary_stream[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("completed",)
    assert review[sc.GEN_AI_PROVIDER_NAME] == "anthropic" and review[sc.GEN_AI_RESPONSE_ID] == "msg_000001"
    assert review[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",) and review[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 5
    assert review_stream[sc.GEN_AI_RESPONSE_ID] == "msg_000002" and review_stream[sc.STREAM_STATE] == "complete"
    assert helper[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 6 and helper[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)


def test_the_trace_loaded_from_a_collector_file_replays_the_same(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None, tmp_path: Path
) -> None:
    oa, an = servers
    recorded, trace = _record_sync(recorder, oa, an)
    lines = recorder.store.read_requests(trace.trace_id)  # the Collector's file exporter writes these lines
    path = tmp_path / "collector-out.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    loaded = chronicle.load_trace(path, trace.trace_id, store=recorder.path)
    with chronicle.replay(loaded) as run:
        replayed = run.rerun()
    assert replayed == recorded
    assert run.report.ok and not run.report.drift and not run.report.changes, run.report
    assert (oa.count(), an.count()) == (OPENAI_CALLS, ANTHROPIC_CALLS)


def test_the_async_clients_record_and_replay(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None
) -> None:
    oa, an = servers
    order = sdk_agent.order_json(1000)
    oa.reply_with(Reply("", parsed_json=order), Reply("Async explanation."), Reply("Async summary."))
    an.reply_with(Reply("Async review."), Reply("Async helper review."))
    recorded = asyncio.run(sdk_agent.arun_agent(sdk_agent.ORDER_REQUEST, oa.url, an.url))
    assert recorded["explanation"] == "Async explanation." and recorded["review_helper"] == "Async helper review."
    before = (oa.count(), an.count())
    trace = chronicle.load_trace(recorder.path, "latest")
    assert trace.root is not None and trace.root.name == "sdk_agent.arun"
    with chronicle.replay(trace) as run:
        replayed = run.rerun()
    assert replayed == recorded
    assert (oa.count(), an.count()) == before == (3, 2)
    assert run.report.ok and not run.report.drift, run.report


def test_replayed_streams_have_the_sdk_interface(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None
) -> None:
    import anthropic
    import openai

    oa, an = servers
    _, trace = _record_sync(recorder, oa, an)
    seen: dict[str, Any] = {}

    @chronicle.boundary(kind="agent", name="sdk_agent.run")
    def probe(request: str, openai_url: str, anthropic_url: str) -> dict[str, Any]:
        client = openai.OpenAI(base_url=f"{openai_url}/v1", api_key="k", max_retries=0)
        claude = anthropic.Anthropic(base_url=anthropic_url, api_key="k", max_retries=0)
        messages = [{"role": "user", "content": request}]
        client.chat.completions.create(model="gpt-test", messages=messages, temperature=0)
        stream = client.chat.completions.create(
            model="gpt-test", messages=messages, stream=True, stream_options={"include_usage": True}
        )
        seen["is_openai_stream"] = isinstance(stream, openai.Stream)
        seen["first"] = next(stream)
        stream.close()
        seen["after_close"] = list(stream)
        seen["response_headers"] = dict(stream.response.headers)
        client.chat.completions.parse(model="gpt-test", messages=messages, response_format=sdk_agent.Order)
        client.responses.create(model="gpt-test", input=request)
        with client.responses.create(model="gpt-test", input=request, stream=True) as events:
            seen["event_types"] = [e.type for e in events][:2]
        claude.messages.create(model="claude-test", max_tokens=100, messages=messages)
        raw = claude.messages.create(model="claude-test", max_tokens=100, messages=messages, stream=True)
        seen["is_anthropic_stream"] = isinstance(raw, anthropic.Stream)
        raw.close()
        with claude.messages.stream(model="claude-test", max_tokens=100, messages=messages) as helper:
            final = helper.get_final_message()
            seen["final_text"] = helper.get_final_text()
            seen["snapshot"] = helper.current_message_snapshot.id
            seen["final_type"] = type(final).__name__
        client.close()
        claude.close()
        return {}

    with chronicle.replay(trace, on_missing="live"):
        probe(sdk_agent.ORDER_REQUEST, oa.url, an.url)
    assert seen["is_openai_stream"] and seen["is_anthropic_stream"]
    assert type(seen["first"]).__name__ == "ChatCompletionChunk"
    assert seen["after_close"] == [] and seen["response_headers"] == {}
    assert seen["event_types"] == ["response.created", "response.in_progress"]
    assert seen["final_text"] == "Helper review: approved." and seen["snapshot"] == "msg_000003"
    assert seen["final_type"] == "ParsedMessage"
    assert (oa.count(), an.count()) == (OPENAI_CALLS, ANTHROPIC_CALLS)


def test_a_stream_stopped_early_is_recorded_as_abandoned_with_what_was_read(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None
) -> None:
    import openai

    oa, _ = servers
    oa.reply_with(Reply("one two three"), Reply("four five six"))
    client = openai.OpenAI(base_url=f"{oa.url}/v1", api_key="k", max_retries=0)
    try:
        stream = client.chat.completions.create(model="m", messages=[], stream=True)
        for _ in stream:
            break  # the consumer stops after the first chunk and drops the stream
        del stream
        gc.collect()
        closed = client.chat.completions.create(model="m", messages=[], stream=True)
        next(closed)
        next(closed)
        closed.close()
    finally:
        client.close()
    spans = [s for s in recorder.spans() if s.name == "openai.chat.completions.create"]
    assert [(s.attributes or {})[sc.STREAM_STATE] for s in spans] == ["abandoned", "abandoned"]
    assert [(s.attributes or {})[sc.STREAM_ITEMS] for s in spans] == [1, 2]


def test_an_sdk_error_is_recorded_and_replayed(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None
) -> None:
    import openai

    oa, _ = servers

    @chronicle.boundary(kind="agent", name="sdk_agent.failing")
    def failing(url: str) -> str:
        client = openai.OpenAI(base_url=f"{url}/v1/missing", api_key="k", max_retries=0)
        try:
            client.chat.completions.create(model="m", messages=[])
        except openai.NotFoundError as exc:
            return f"not found: {exc.status_code}"
        finally:
            client.close()
        return "found"

    assert failing(oa.url) == "not found: 404"
    trace = chronicle.load_trace(recorder.path, "latest")
    count = oa.count()
    error = trace.find("openai.chat.completions.create")[0].decode_error(("tests.", "openai."))
    assert isinstance(error, openai.NotFoundError) and error.status_code == 404, repr(error)
    with chronicle.replay(trace) as run:
        assert run.rerun() == "not found: 404", "the handler catches the SDK's own error class, as recorded"
    assert oa.count() == count
    assert run.report.ok and not run.report.drift, run.report


def test_uninstrument_restores_the_sdk_methods() -> None:
    from anthropic.resources.messages import AsyncMessages
    from openai.resources.chat.completions import Completions

    originals = (Completions.create, AsyncMessages.stream)
    chronicle_openai.instrument()
    chronicle_anthropic.instrument()
    assert Completions.create is not originals[0]
    assert chronicle_openai.instrument() == chronicle_openai.instrument()  # a no-op the second time
    assert (
        chronicle_openai.uninstrument() == 10
    )  # chat completions and responses, sync and async, and beta.responses.create
    assert chronicle_anthropic.uninstrument() == 12  # messages and beta.messages: create, parse, stream, sync and async
    assert (Completions.create, AsyncMessages.stream) == originals
    assert chronicle_openai.uninstrument() == 0


def test_the_openai_stream_helpers_are_recorded_through_create(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None
) -> None:
    import openai

    oa, _ = servers

    @chronicle.boundary(kind="agent", name="sdk_agent.helpers")
    def helpers(url: str) -> dict[str, Any]:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0)
        messages = [{"role": "user", "content": "sell"}]
        try:
            with client.chat.completions.stream(model="gpt-test", messages=messages) as chat:
                deltas = [e.delta for e in chat if e.type == "content.delta"]
                completion = chat.get_final_completion()
            with client.responses.stream(model="gpt-test", input="sell") as events:
                texts = [e.delta for e in events if e.type == "response.output_text.delta"]
                response = events.get_final_response()
        finally:
            client.close()
        return {
            "deltas": deltas,
            "content": completion.choices[0].message.content,
            "texts": texts,
            "output_text": response.output_text,
            "response_id": response.id,
        }

    oa.reply_with(Reply("Chat helper text."), Reply("Responses helper text."))
    recorded = helpers(oa.url)
    assert recorded["content"] == "Chat helper text." and recorded["output_text"] == "Responses helper text."
    trace = chronicle.load_trace(recorder.path, "latest")
    assert [b.name for b in trace.boundaries if b.kind == "llm"] == [
        "openai.chat.completions.create",
        "openai.responses.create",
    ]
    count = oa.count()
    with chronicle.replay(trace) as run:
        assert run.rerun() == recorded
    assert oa.count() == count
    assert run.report.ok and not run.report.drift, run.report


def test_a_failed_messages_stream_request_is_recorded_as_the_error_and_raised_on_entering(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None
) -> None:
    import anthropic

    _, an = servers

    @chronicle.boundary(kind="agent", name="sdk_agent.stream_fails")
    def stream_fails(url: str) -> str:
        client = anthropic.Anthropic(base_url=f"{url}/missing", api_key="k", max_retries=0)
        try:
            with client.messages.stream(model="claude-test", max_tokens=10, messages=[]) as stream:
                return stream.get_final_text()
        except anthropic.NotFoundError as exc:
            return f"request failed: {exc.status_code}"
        finally:
            client.close()

    assert stream_fails(an.url) == "request failed: 404"
    span = next(s for s in recorder.spans() if s.name == "anthropic.messages.stream")
    assert span.status.status_code.name == "ERROR"
    assert (span.attributes or {})[sc.STREAM_STATE] == "error"
    trace = chronicle.load_trace(recorder.path, "latest")
    with chronicle.replay(trace) as run:
        assert run.rerun() == "request failed: 404"
    assert run.report.ok, run.report


def test_reading_further_than_an_abandoned_recording_is_a_divergence(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None
) -> None:
    import openai

    oa, _ = servers
    oa.reply_with(Reply("one two three four five six"))

    @chronicle.boundary(kind="agent", name="sdk_agent.reads")
    def reads(url: str, limit: int) -> list[str]:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0)
        got = []
        try:
            stream = client.chat.completions.create(model="m", messages=[], stream=True)
            for chunk in stream:
                got.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
                if len(got) == limit:
                    break
            stream.close()
        finally:
            client.close()
        return got

    recorded = reads(oa.url, 2)
    trace = chronicle.load_trace(recorder.path, "latest")
    with chronicle.replay(trace) as run:
        assert run.rerun() == recorded, "reading as far as the recording: the same answer"
    with chronicle.replay(trace) as run, pytest.raises(chronicle.ReplayDivergence, match="abandoned"):
        run.rerun(limit=10)


def test_a_method_instrumented_by_hand_gets_the_integration_settings(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer]
) -> None:
    import openai
    from openai.resources.chat.completions import Completions

    chronicle.instrument(Completions, "create", kind="llm")
    try:
        assert "openai.chat.completions.create" in chronicle_openai.instrument()
        oa, _ = servers
        client = openai.OpenAI(base_url=f"{oa.url}/v1", api_key="k", max_retries=0)
        try:
            client.chat.completions.create(model="m", messages=[], extra_headers={"X-Session": "s"})
        finally:
            client.close()
        span = next(s for s in recorder.spans() if s.name == "openai.chat.completions.create")
        assert json.loads(str((span.attributes or {})[sc.INPUT])) == {"messages": [], "model": "m"}
    finally:
        chronicle_openai.uninstrument()
        chronicle.uninstrument(Completions, "create")


def test_replayed_models_keep_which_fields_were_set_aliases_and_generic_parameters(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None
) -> None:
    import anthropic
    import openai

    oa, an = servers
    order = sdk_agent.order_json(7)
    oa.reply_with(
        Reply("", tool_call=("place_order", order)),
        Reply("", tool_call=("place_order", order)),
        Reply("", parsed_json=order),
    )
    an.reply_with(Reply("", parsed_json=order))
    seen: dict[str, Any] = {}

    @chronicle.boundary(kind="agent", name="sdk_agent.shapes")
    def shapes(openai_url: str, anthropic_url: str) -> dict[str, Any]:
        client = openai.OpenAI(base_url=f"{openai_url}/v1", api_key="k", max_retries=0)
        claude = anthropic.Anthropic(base_url=anthropic_url, api_key="k", max_retries=0)
        tools = [{"type": "function", "function": {"name": "place_order", "parameters": {"type": "object"}}}]
        try:
            plain = client.chat.completions.create(model="m", messages=[], tools=tools)
            with client.chat.completions.stream(model="m", messages=[], tools=tools) as stream:
                final = stream.get_final_completion()
            parsed = client.responses.parse(model="m", input="x", text_format=sdk_agent.Order)
            message = claude.messages.parse(
                model="claude-test", max_tokens=10, messages=[], output_format=sdk_agent.Order
            )
        finally:
            client.close()
            claude.close()
        seen["message"] = plain.choices[0].message.to_dict()
        return {
            "plain_call": plain.choices[0].message.tool_calls[0].function.arguments,
            "streamed_call": final.choices[0].message.tool_calls[0].function.arguments,
            "responses_parsed": parsed.output_parsed.model_dump() if parsed.output_parsed else None,
            "claude_parsed": message.parsed_output.model_dump() if message.parsed_output else None,
        }

    recorded = shapes(oa.url, an.url)
    recorded_message = seen["message"]
    assert json.loads(recorded["plain_call"]) == order == recorded["claude_parsed"]
    trace = chronicle.load_trace(recorder.path, "latest")
    with chronicle.replay(trace, strict=True) as run:
        assert run.rerun() == recorded
    assert seen["message"] == recorded_message, "to_dict() leaves out the same unset fields"
    assert run.report.ok, run.report


@chronicle.boundary(kind="llm", name="sdk_agent.stream_plan")
def _stream_plan(client: openai.OpenAI, request: str) -> Any:
    """An application's own llm boundary that hands the SDK stream on."""
    return client.chat.completions.create(model="m", messages=[{"role": "user", "content": request}], stream=True)


def test_a_boundary_that_returns_the_sdk_stream_records_and_replays_it_as_a_stream(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None
) -> None:
    import openai

    oa, _ = servers
    oa.reply_with(Reply("Sell 5 shares."))

    @chronicle.boundary(kind="agent", name="sdk_agent.streams_on")
    def streams_on(url: str) -> str:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0)
        try:
            return "".join(c.choices[0].delta.content or "" for c in _stream_plan(client, "sell") if c.choices)
        finally:
            client.close()

    assert streams_on(oa.url) == "Sell 5 shares."
    trace = chronicle.load_trace(recorder.path, "latest")
    outer = trace.find("sdk_agent.stream_plan")[0]
    assert outer.stream and outer.stream_state == "complete"
    assert outer.raw_output is not None and " at 0x" not in outer.raw_output.text
    count = oa.count()
    with chronicle.replay(trace) as run:
        assert run.rerun() == "Sell 5 shares."
    assert oa.count() == count and run.report.ok, run.report


def test_a_generated_test_switches_the_integrations_on_and_replays_offline(
    recorder: Recorder,
    servers: tuple[LLMServer, LLMServer],
    instrumented: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The generated test runs where no API key is set (CI): the SDK clients, which read their keys from the
    environment, get placeholders, and nothing is sent."""
    import subprocess
    import sys

    from chronicle_otel.cli import main

    oa, an = servers
    monkeypatch.setenv("SDK_AGENT_KEYS", "environment")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-recording-machine")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-recording-machine")
    _, trace = _record_sync(recorder, oa, an)
    out = tmp_path / "regressions"
    code = main(["gen-test", trace.trace_id, "--store", str(recorder.path), "--out", str(out)])
    assert code == 0
    test_file = next(out.glob("test_*.py"))
    source = test_file.read_text()
    assert "chronicle_openai.instrument()" in source and "chronicle_anthropic.instrument()" in source
    assert '("OPENAI_API_KEY", "ANTHROPIC_API_KEY")' in source and "monkeypatch.setenv(name" in source
    assert "sk-recording-machine" not in test_file.read_text() + next((out / "traces").iterdir()).read_text()
    oa.close()
    an.close()  # nothing to answer: the replay must not need them
    repo = Path(__file__).resolve().parents[3]
    no_keys = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CHRONICLE_", "OTEL_")) and k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    }
    result = subprocess.run(
        [sys.executable, "-m", "pytest", str(test_file), "-q", "-p", "no:cacheprovider", "--rootdir", str(out)],
        cwd=repo,
        env=no_keys | {"PYTHONPATH": str(repo), "CHRONICLE_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("asynchronous", [False, True])
def test_the_network_guard_refuses_a_live_sdk_call_and_names_its_boundary(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None, asynchronous: bool
) -> None:
    from chronicle_otel.replaying._netguard import find_refusal

    oa, an = servers
    if asynchronous:
        order = sdk_agent.order_json(1000)
        oa.reply_with(Reply("", parsed_json=order), Reply("Async explanation."), Reply("Async summary."))
        an.reply_with(Reply("Async review."), Reply("Async helper review."))
        asyncio.run(sdk_agent.arun_agent(sdk_agent.ORDER_REQUEST, oa.url, an.url))
        trace = chronicle.load_trace(recorder.path, "latest")
    else:
        _, trace = _record_sync(recorder, oa, an)
    before = (oa.count(), an.count())
    live_model_no_network = chronicle.replay(trace, stub=(), live={"kind:llm"}, allow_hosts=())
    with live_model_no_network as run, pytest.raises(Exception) as caught:
        run.rerun()
    refusal = find_refusal(caught.value)
    assert refusal is not None, repr(caught.value)
    assert refusal.host == "127.0.0.1" and "(llm)" in refusal.boundary
    assert (oa.count(), an.count()) == before, "no request reached the servers"
    network = [f for f in run.report.divergences if f.kind == "network"]
    assert network and network[0].call_key[-1][0].startswith("openai.")
    assert not run.report.ok


def _where(stage: list[str], exc: BaseException) -> str:
    return f"{type(exc).__name__} {exc} at {stage[0]}"


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_an_exception_override_of_an_sdk_stream_is_raised_where_the_sdk_raises_it(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None, is_async: bool
) -> None:
    import anthropic
    import openai

    oa, an = servers
    oa.reply_with(Reply("one two three"))
    an.reply_with(Reply("raw events"), Reply("helper events"))
    messages = [{"role": "user", "content": "hi"}]

    def sync_calls(openai_url: str, anthropic_url: str) -> list[str]:
        client = openai.OpenAI(base_url=f"{openai_url}/v1", api_key="k", max_retries=0)
        claude = anthropic.Anthropic(base_url=anthropic_url, api_key="k", max_retries=0)
        out = []
        for call in ("openai", "anthropic", "helper"):
            stage = ["call"]
            try:
                if call == "helper":
                    manager = claude.messages.stream(model="c", max_tokens=10, messages=messages)
                    stage[0] = "enter"
                    with manager as helper:
                        stage[0] = "item"
                        out.append(helper.get_final_text())
                    continue
                if call == "openai":
                    stream: Any = client.chat.completions.create(model="m", messages=messages, stream=True)
                else:
                    stream = claude.messages.create(model="c", max_tokens=10, messages=messages, stream=True)
                stage[0] = "item"
                out.append(str(len(list(stream))))
            except TimeoutError as exc:
                out.append(_where(stage, exc))
        client.close()
        claude.close()
        return out

    async def async_calls(openai_url: str, anthropic_url: str) -> list[str]:
        client = openai.AsyncOpenAI(base_url=f"{openai_url}/v1", api_key="k", max_retries=0)
        claude = anthropic.AsyncAnthropic(base_url=anthropic_url, api_key="k", max_retries=0)
        out = []
        for call in ("openai", "anthropic", "helper"):
            stage = ["call"]
            try:
                if call == "helper":
                    manager = claude.messages.stream(model="c", max_tokens=10, messages=messages)
                    stage[0] = "enter"
                    async with manager as helper:
                        stage[0] = "item"
                        out.append(await helper.get_final_text())
                    continue
                if call == "openai":
                    stream: Any = await client.chat.completions.create(model="m", messages=messages, stream=True)
                else:
                    stream = await claude.messages.create(model="c", max_tokens=10, messages=messages, stream=True)
                stage[0] = "item"
                out.append(str(len([item async for item in stream])))
            except TimeoutError as exc:
                out.append(_where(stage, exc))
        await client.close()
        await claude.close()
        return out

    if is_async:

        @chronicle.boundary(kind="agent", name="sdk_agent.streams")
        def streams(openai_url: str, anthropic_url: str) -> list[str]:
            return asyncio.run(async_calls(openai_url, anthropic_url))
    else:

        @chronicle.boundary(kind="agent", name="sdk_agent.streams")
        def streams(openai_url: str, anthropic_url: str) -> list[str]:
            return sync_calls(openai_url, anthropic_url)

    recorded = streams(oa.url, an.url)
    assert recorded[2] == "helper events" and not any("Timeout" in r for r in recorded)
    trace = chronicle.load_trace(recorder.path, "latest")
    keys = ("openai.chat.completions.create[0]", "anthropic.messages.create[0]", "anthropic.messages.stream[0]")

    # an exception: raised where the SDK raises a connection error or a timeout (the call; entering the block)
    with chronicle.replay(trace, override=dict.fromkeys(keys, TimeoutError("t"))) as run:
        assert run.rerun() == ["TimeoutError t at call", "TimeoutError t at call", "TimeoutError t at enter"]
    assert len(run.report.overrides) == 3 and run.report.ok, run.report
    # asked for at the first item: a list of the items (none) and the exception after them
    with chronicle.replay(trace, override={key: [TimeoutError] for key in keys[:2]}) as run:
        assert run.rerun() == ["TimeoutError  at item", "TimeoutError  at item", "helper events"]
    assert run.report.ok, run.report


def test_a_generated_test_with_an_exception_override_of_a_stream_raises_it(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None, tmp_path: Path
) -> None:
    import subprocess
    import sys

    from chronicle_otel.cli import main

    oa, an = servers
    _, trace = _record_sync(recorder, oa, an)
    out = tmp_path / "regressions"
    override = "openai.chat.completions.create[1]=TimeoutError('t')"
    code = main(["gen-test", trace.trace_id, "--store", str(recorder.path), "--out", str(out), "--override", override])
    assert code == 0
    test_file = next(out.glob("test_*.py"))
    repo = Path(__file__).resolve().parents[3]
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
    output = result.stdout + result.stderr
    assert "must be the list of items" not in output, output
    assert "TimeoutError: t" in output, output  # the agent's create(stream=True) raised it: the test fails there
