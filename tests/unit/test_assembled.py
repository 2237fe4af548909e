"""Streams shown as what the model said: the assembled message of each kind of stream, in ``chronicle show``,
``view`` and ``diff`` and in the replay report, with values recorded as placeholders marked the same way everywhere."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

import chronicle_otel as chronicle
from chronicle_otel._assembled import Assembled, ToolCall, assemble, diff_messages
from chronicle_otel.cli import _view
from chronicle_otel.codec import encode
from chronicle_otel.integrations import openai as chronicle_openai
from chronicle_otel.replaying._report import diff_lines, short_repr
from tests.conftest import Recorder
from tests.llm_servers import LLMServer, Reply, openai_server
from tests.unit.cli.command import run
from tests.unit.codec.test_compact import (
    ARGS,
    TEXT,
    _route,
    chat_chunks,
    message_events,
    old_encode,
    read_streams,
    response_events,
)

ORDER = json.loads(ARGS)
CALL = "place_order " + json.dumps(ORDER)


@pytest.fixture(scope="module")
def streams() -> dict[str, list[Any]]:
    return read_streams()


EXPECTED = {
    "chat-tool": ("openai.chat", "", "tool_calls", "gpt-4.1-2025-04-14", "chatcmpl-C3x9QkPz8d2VYh1mLr0TnQe5WbXs"),
    "chat-text": ("openai.chat", TEXT, "stop", "gpt-4.1-2025-04-14", "chatcmpl-C3x9QkPz8d2VYh1mLr0TnQe5WbXs"),
    "responses-tool": ("openai.responses", "", "completed", "gpt-4.1-2025-04-14", None),
    "responses-text": ("openai.responses", TEXT, "completed", "gpt-4.1-2025-04-14", None),
    "anthropic-tool": ("anthropic", "", "tool_use", "claude-sonnet-4-20250514", "msg_01XFDUDYJgAACzvnptvVoYEL"),
    "anthropic-text": ("anthropic", TEXT, "end_turn", "claude-sonnet-4-20250514", "msg_01XFDUDYJgAACzvnptvVoYEL"),
    "langchain-tool": ("langchain", "", "tool_calls", "gpt-4.1-2025-04-14", "run-abc"),
    "langchain-text": ("langchain", TEXT, None, None, "run-abc"),
}


# ------------------------------------------------------------------------------------------------------------------
# Assembling


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_every_kind_of_stream_assembles_typed_and_as_recorded_json(streams: dict[str, list[Any]], case: str) -> None:
    items = streams[case]
    kind, text, finish, model, ident = EXPECTED[case]
    message = assemble(items)
    assert message is not None
    assert (message.kind, message.text, message.finish_reason, message.model) == (kind, text, finish, model)
    assert message.items == len(items)
    if ident is not None:
        assert message.id == ident
    if case.endswith("-tool"):
        [call] = message.tool_calls
        assert call.name == "place_order" and call.args == ORDER and call.arguments == ARGS
        assert call.id is not None and call.id.startswith(("call_", "toolu_"))
    else:
        assert message.tool_calls == []
    assert message.usage is not None and 412 in message.usage.values()
    # the CLI reads a payload as JSON without rebuilding any class, as this version or an earlier one wrote it
    assert assemble(orjson.loads(encode(items))) == message
    assert assemble(orjson.loads(old_encode(items))) == message


@pytest.mark.parametrize(
    "wire", [chat_chunks(True), response_events(True), message_events(True)], ids=["chat", "responses", "anthropic"]
)
def test_plain_wire_json_assembles_too(wire: list[dict[str, Any]]) -> None:
    message = assemble(wire)
    assert message is not None and [c.name for c in message.tool_calls] == ["place_order"]
    assert message.tool_calls[0].args == ORDER


def test_langgraph_message_pairs_and_plain_strings() -> None:
    from langchain_core.messages import AIMessageChunk

    pairs = [(AIMessageChunk(content=piece, id="run-1"), {"langgraph_node": "agent"}) for piece in ("Sel", "ling")]
    message = assemble(pairs)
    assert message is not None and message.kind == "langchain" and message.text == "Selling"
    strings = assemble(["Sel", "ling"])
    assert strings is not None and strings.kind == "text" and strings.text == "Selling" and strings.items == 2
    assert assemble(["doc-0", "doc-1"], strings=False) is None, "a retriever's documents are not one text"


@pytest.mark.parametrize("items", [[], [1, 2], [{"a": 1}], ["text", {"object": "chat.completion.chunk"}], "text"])
def test_what_is_no_known_stream_is_not_assembled(items: Any) -> None:
    assert assemble(items) is None


def test_an_item_recorded_as_a_placeholder_is_named() -> None:
    items = [*chat_chunks(False)[:3], {"$type": "unencodable", "class": "stream item", "repr": "past the 16 MiB"}]
    message = assemble(items)
    assert message is not None and message.placeholders == ("stream item",) and message.items == 4


def test_tool_calls_are_joined_by_index_with_parallel_calls_apart() -> None:
    def chunk(calls: list[dict[str, Any]]) -> dict[str, Any]:
        return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"tool_calls": calls}}]}

    items = [
        chunk([{"index": 0, "id": "call_a", "function": {"name": "quote", "arguments": '{"sym'}}]),
        chunk([{"index": 1, "id": "call_b", "function": {"name": "place_", "arguments": ""}}]),
        chunk([{"index": 1, "function": {"name": "order", "arguments": '{"quantity": 5}'}}]),
        chunk([{"index": 0, "function": {"arguments": 'bol": "MSFT"}'}}]),
    ]
    message = assemble(items)
    assert message is not None
    assert [c.to_dict() for c in message.tool_calls] == [
        {"name": "quote", "arguments": {"symbol": "MSFT"}, "id": "call_a"},
        {"name": "place_order", "arguments": {"quantity": 5}, "id": "call_b"},
    ]


def test_two_messages_differ_by_what_the_model_said() -> None:
    recorded = Assembled("openai.chat", tool_calls=[ToolCall("place_order", ARGS)], finish_reason="tool_calls")
    now = Assembled(
        "openai.chat", tool_calls=[ToolCall("place_order", json.dumps({**ORDER, "quantity": 10}))], finish_reason="stop"
    )
    assert diff_messages(recorded, now) == [
        'tool call place_order arguments: {"quantity": 1000} -> {"quantity": 10}',
        "finish reason: tool_calls -> stop",
    ]
    assert diff_messages(recorded, recorded) == []
    said = Assembled("anthropic", text="Hello")
    assert diff_messages(said, Assembled("anthropic", text="Hi", tool_calls=[ToolCall("stop", "{}")])) == [
        "text: 'Hello' -> 'Hi'",
        "tool call stop: not called -> called with {}",
    ]


def test_the_lines_show_prints(streams: dict[str, list[Any]]) -> None:
    message = assemble(streams["chat-tool"])
    assert message is not None
    assert message.lines(100) == [
        "assembled from 20 chunks, model gpt-4.1-2025-04-14, finish tool_calls",
        "tool call " + CALL,
        "usage: completion_tokens=31, prompt_tokens=412, total_tokens=443",
    ]
    assert all(len(line) <= 60 for line in message.lines(60)) and message.lines(60)[1].endswith("…")
    assert message.lines()[0].endswith(", id chatcmpl-C3x9QkPz8d2VYh1mLr0TnQe5WbXs")
    assert message.lines()[1] == f"tool call {CALL}  (id call_Xq7Tb2mN4pL9sK1vR8wYc3Jd)"
    assert message.summary().startswith(f"stream of 20 chunks: tool call {CALL}; finish tool_calls")


# ------------------------------------------------------------------------------------------------------------------
# The command: a recorded agent that streams a tool call through the real OpenAI SDK

TOOLS: Any = [{"type": "function", "function": {"name": "place_order", "parameters": {"type": "object"}}}]


@chronicle.boundary(kind="tool", name="asm.place_order")
def place_order(symbol: str, quantity: int, **rest: Any) -> dict[str, Any]:
    return {"status": "filled", "symbol": symbol, "quantity": quantity}


@chronicle.boundary(kind="agent", name="asm.agent")
def agent(url: str) -> dict[str, Any]:
    import openai
    from openai.lib.streaming.chat import ChatCompletionStreamState

    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test-key", max_retries=0)
    try:
        stream = client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "sell"}], tools=TOOLS, stream=True
        )
        state = ChatCompletionStreamState()
        for chunk in stream:
            state.handle_chunk(chunk)
        message = state.get_final_completion().choices[0].message
    finally:
        client.close()
    if not message.tool_calls:
        return {"status": "answered", "text": message.content}
    return place_order(**json.loads(message.tool_calls[0].function.arguments))


@pytest.fixture
def instrumented() -> Iterator[None]:
    chronicle_openai.instrument()
    try:
        yield
    finally:
        chronicle_openai.uninstrument()


def record_agent(recorder: Recorder, server: LLMServer, quantity: int) -> str:
    server.reply_with(Reply("", tool_call=("place_order", {"symbol": "MSFT", "quantity": quantity})))
    agent(server.url)
    recorder.config.force_flush()
    return recorder.store.list_traces(limit=1)[0].trace_id


LLM = "asm.agent[0] > openai.chat.completions.create[0]"


def test_show_prints_the_message_full_adds_the_items_raw_shows_them_only(
    recorder: Recorder, instrumented: None
) -> None:
    with openai_server() as server:
        tid = record_agent(recorder, server, 1000)
    store = str(recorder.path)
    code, out, _ = run("show", tid, "--store", store)
    assert code == 0
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if "openai.chat.completions.create[0]" in line)
    assert lines[at + 2 : at + 5] == [
        "      out:",
        "          assembled from 9 chunks, model gpt-test, finish tool_calls",
        '          tool call place_order {"symbol": "MSFT", "quantity": 1000}',
    ]
    assert "ChatCompletionChunk(" not in out
    code, full, _ = run("show", tid, "--store", store, "--full")
    assert "assembled from 9 chunks" in full and "the 9 chunks:" in full and full.count("ChatCompletionChunk(") == 9
    code, raw, _ = run("show", tid, "--store", store, "--raw")
    assert "assembled from" not in raw and "out: [ChatCompletionChunk(" in raw
    code, chosen, _ = run("show", tid, "--store", store, "--boundary", "openai.chat.completions.create")
    assert "assembled from 9 chunks" in chosen and "ChatCompletionChunk(" in chosen
    code, doc, _ = run("show", tid, "--store", store, "--json")
    [llm] = [b for b in json.loads(doc)["boundaries"] if b["kind"] == "llm"]
    assert llm["assembled"]["tool_calls"] == [
        {"name": "place_order", "arguments": {"symbol": "MSFT", "quantity": 1000}, "id": "call_000001"}
    ]
    assert llm["unreplayable"] is None


def test_the_page_shows_the_message_before_the_items(recorder: Recorder, instrumented: None) -> None:
    with openai_server() as server:
        tid = record_agent(recorder, server, 1000)
    page = _view.render_html(chronicle.load_trace(recorder.store, tid))
    data = json.loads(re.search(r'id="chronicle-data">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
    [llm] = [b for b in data["boundaries"] if b["kind"] == "llm"]
    readable = llm["output"]["readable"]
    assert readable.startswith("assembled from 9 chunks, model gpt-test, finish tool_calls")
    assert 'tool call place_order {"symbol": "MSFT", "quantity": 1000}' in readable
    assert "the 9 chunks:" in readable and "ChatCompletionChunk(" in readable
    assert llm["output"]["assembled"]["finish_reason"] == "tool_calls"
    assert llm["unreplayable"] == ""


def test_diff_says_which_tool_call_argument_changed(recorder: Recorder, instrumented: None) -> None:
    with openai_server() as server:
        a = record_agent(recorder, server, 1000)
        b = record_agent(recorder, server, 10)
    code, out, _ = run("diff", a, b, "--store", str(recorder.path))
    assert code == 1
    assert '    output: tool call place_order arguments: {"quantity": 1000} -> {"quantity": 10}' in out
    assert "$.[" not in out and "fields" not in out, "no chunk paths"
    code, out, _ = run("diff", a, b, "--store", str(recorder.path), "--json")
    [llm] = [c for c in json.loads(out)["changes"] if c["kind"] == "llm"]
    assert llm["details"]["output"] == ['tool call place_order arguments: {"quantity": 1000} -> {"quantity": 10}']


# ------------------------------------------------------------------------------------------------------------------
# Placeholders: marked the same way in show, view and diff

MARK = "unreplayable: _thread.lock recorded as unencodable"


@chronicle.boundary(kind="tool", name="asm.locked")
def locked(n: int) -> Any:
    return {"lock": threading.Lock(), "n": n}


def test_a_value_recorded_as_a_placeholder_is_marked_everywhere(recorder: Recorder) -> None:
    locked(1)
    recorder.config.force_flush()
    a = recorder.store.list_traces(limit=1)[0].trace_id
    locked(2)
    recorder.config.force_flush()
    b = recorder.store.list_traces(limit=1)[0].trace_id
    store = str(recorder.path)
    code, out, _ = run("show", a, "--store", store)
    assert out.splitlines()[2].startswith("tool      asm.locked[0]") and out.splitlines()[2].endswith(MARK)
    data = json.loads(run("show", a, "--store", store, "--json")[1])
    assert data["boundaries"][0]["unreplayable"] == MARK
    page = _view.render_html(chronicle.load_trace(recorder.store, a))
    view = json.loads(re.search(r'id="chronicle-data">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
    assert view["boundaries"][0]["unreplayable"] == MARK and view["boundaries"][0]["input"]["note"] == MARK
    code, out, _ = run("diff", a, b, "--store", store)
    assert code == 1 and f"~ changed  tool      asm.locked[0]  {MARK}" in out


# ------------------------------------------------------------------------------------------------------------------
# The replay report


def chunks_of(arguments: dict[str, Any]) -> list[Any]:
    from openai.types.chat import ChatCompletionChunk

    wire = chat_chunks(True)
    for chunk in wire[1:-2]:
        chunk["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] = ""
    wire[1]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] = json.dumps(arguments)
    return [ChatCompletionChunk.construct(**c) for c in wire]


SAID: dict[str, Any] = {"arguments": ORDER}


@chronicle.boundary(kind="llm", name="asm.model")
def model(prompt: str) -> Iterator[Any]:
    yield from chunks_of(SAID["arguments"])


def test_a_changed_live_stream_is_described_by_its_message(recorder: Recorder) -> None:
    list(model("sell"))
    recorder.config.force_flush()
    trace = chronicle.load_trace(recorder.store, "latest")
    SAID["arguments"] = {**ORDER, "quantity": 10}
    try:
        with chronicle.replay(trace, live={"asm.model"}) as run_:
            list(run_.rerun_items())
    finally:
        SAID["arguments"] = ORDER
    [change] = run_.report.changes
    assert change.details == ('tool call place_order arguments: {"quantity": 1000} -> {"quantity": 10}',)


def test_report_lines_of_streams(streams: dict[str, list[Any]]) -> None:
    text = encode(streams["chat-tool"]).decode()
    other = encode(chunks_of({**ORDER, "side": "buy"})).decode()
    assert diff_lines(text, other) == ['tool call place_order arguments: {"side": "sell"} -> {"side": "buy"}']
    assert diff_lines(old_encode(streams["chat-tool"]).decode(), text) == []
    assert short_repr(streams["anthropic-text"]).startswith("stream of 21 events: text 'Selling 1,000 shares")
    assert short_repr([1, 2]) == "[1, 2]"


def test_the_realistic_stream_shows_in_a_few_lines(recorder: Recorder, instrumented: None) -> None:
    """The lines ``chronicle show --full`` prints for a 20-chunk streamed tool call: the message, then the items."""
    import openai

    wire = {"gpt-4.1": chat_chunks(True)}
    with LLMServer({"/v1/chat/completions": _route(wire, chat=True)}, lambda m: {"error": m}) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-test", max_retries=0)
        try:
            list(client.chat.completions.create(model="gpt-4.1", messages=[], stream=True))
        finally:
            client.close()
    recorder.config.force_flush()
    tid = recorder.store.list_traces(limit=1)[0].trace_id
    store = str(recorder.path)
    short = run("show", tid, "--store", store)[1].splitlines()
    full = run("show", tid, "--store", store, "--full")[1].splitlines()
    raw = run("show", tid, "--store", store, "--full", "--raw")[1].splitlines()
    print(f"show: {len(short)} lines, show --full: {len(full)}, show --full --raw: {len(raw)}")
    assert len(short) == 8 and any(line.strip().startswith("tool call place_order {") for line in short)
    assert len(raw) < len(full) < len(raw) + 8
    assert len(raw) < 400, "every chunk, without the fields left to their defaults (653 lines before)"


# ------------------------------------------------------------------------------------------------------------------
# What if the model had said…: a streamed call overridden with a message


def replay_agent(trace: Any, override: dict[str, Any], function: Any, *args: Any) -> tuple[Any, Any]:
    with chronicle.replay(trace, override=override) as run_:
        result = function(*args)
    return result, run_.report


SMALL = {"tool_calls": [{"name": "place_order", "arguments": {"symbol": "MSFT", "quantity": 10}}]}


def test_an_openai_chat_stream_overridden_with_a_message(recorder: Recorder, instrumented: None) -> None:
    with openai_server() as server:
        tid = record_agent(recorder, server, 1000)
        trace = chronicle.load_trace(recorder.store, tid)
        before = server.count()
        result, report = replay_agent(trace, {LLM: SMALL}, agent, server.url)
        assert result == {"status": "filled", "symbol": "MSFT", "quantity": 10}, "the SDK's accumulator read it"
        said, _ = replay_agent(trace, {LLM: "I will not place that order."}, agent, server.url)
        assert said == {"status": "answered", "text": "I will not place that order."}
        usage = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
        as_function, _ = replay_agent(trace, {LLM: lambda chunks: {**SMALL, "usage": usage}}, agent, server.url)
        assert as_function == result
        recorded = assemble(trace.find("openai.chat.completions.create")[0].output)
        assert recorded is not None
        recorded.tool_calls[0].arguments = json.dumps({"symbol": "MSFT", "quantity": 7})
        edited, _ = replay_agent(trace, {LLM: recorded}, agent, server.url)
        assert edited["quantity"] == 7
        assert server.count() == before, "no request reached the server"
    assert report.ok, report
    [override] = report.overrides
    assert override.details[0].startswith('recorded stream of 9 chunks: tool call place_order {"symbol": "MSFT", "q')
    now = 'now stream of 4 chunks: tool call place_order {"symbol": "MSFT", "quantity": 10}; finish tool_calls'
    assert override.details[1] == now
    [change] = [c for c in report.intended if c.call_key[-1][0] == "asm.place_order"]  # what the override explains
    assert "$.quantity: recorded 1000 != now 10" in change.details


@chronicle.boundary(kind="agent", name="asm.claude")
def claude(url: str) -> dict[str, Any]:
    import anthropic

    client = anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0)
    try:
        with client.messages.stream(
            model="claude-test", max_tokens=99, messages=[{"role": "user", "content": "sell"}]
        ) as stream:
            streamed = "".join(stream.text_stream)
            final = stream.get_final_message()
        raw = client.messages.create(
            model="claude-test", max_tokens=99, messages=[{"role": "user", "content": "sell"}], stream=True
        )
        events = list(raw)
    finally:
        client.close()
    tool = next((block for block in final.content if block.type == "tool_use"), None)
    return {
        "streamed": streamed,
        "text": "".join(block.text for block in final.content if block.type == "text"),
        "input": tool.input if tool is not None else None,
        "stop": final.stop_reason,
        "raw": assemble(events).to_dict() if assemble(events) is not None else None,  # type: ignore[union-attr]
    }


def test_an_anthropic_stream_overridden_with_a_message(recorder: Recorder) -> None:
    from chronicle_otel.integrations import anthropic as chronicle_anthropic
    from tests.llm_servers import anthropic_server

    chronicle_anthropic.instrument()
    try:
        with anthropic_server() as server:
            order = ("place_order", {"symbol": "MSFT", "quantity": 1000})
            server.reply_with(Reply("", tool_call=order), Reply("", tool_call=order))
            recorded = claude(server.url)
            assert recorded["input"] == order[1] and recorded["stop"] == "tool_use"
            recorder.config.force_flush()
            trace = chronicle.load_trace(recorder.store, "latest")
            before = server.count()
            message = {"content": "Selling fewer.", **SMALL}
            override = {"anthropic.messages.stream[0]": message, "anthropic.messages.create[0]": "No."}
            result, report = replay_agent(trace, override, claude, server.url)
            assert server.count() == before
    finally:
        chronicle_anthropic.uninstrument()
    assert result["input"] == {"symbol": "MSFT", "quantity": 10}, "MessageStream.get_final_message() built it"
    assert result["stop"] == "tool_use" and result["text"] == result["streamed"] == "Selling fewer."
    assert result["raw"]["text"] == "No." and result["raw"]["finish_reason"] == "end_turn"
    assert report.ok and len(report.overrides) == 2, report


@chronicle.boundary(kind="agent", name="asm.responder")
def responder(url: str) -> dict[str, Any]:
    import openai

    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
    try:
        events = list(client.responses.create(model="gpt-test", input="sell", stream=True))
    finally:
        client.close()
    [done] = [e for e in events if e.type == "response.completed"]
    calls = [item for item in done.response.output if item.type == "function_call"]
    return {"text": done.response.output_text, "calls": [(c.name, json.loads(c.arguments)) for c in calls]}


def test_an_openai_responses_stream_overridden_with_a_message(recorder: Recorder, instrumented: None) -> None:
    with openai_server() as server:
        server.reply_with(Reply("Selling.", tool_call=("place_order", {"symbol": "MSFT", "quantity": 1000})))
        recorded = responder(server.url)
        assert recorded == {"text": "Selling.", "calls": [("place_order", {"symbol": "MSFT", "quantity": 1000})]}
        recorder.config.force_flush()
        trace = chronicle.load_trace(recorder.store, "latest")
        before = server.count()
        message = {"content": "Selling fewer.", **SMALL}
        result, report = replay_agent(trace, {"openai.responses.create[0]": message}, responder, server.url)
        assert server.count() == before
    assert result == {"text": "Selling fewer.", "calls": [("place_order", {"symbol": "MSFT", "quantity": 10})]}
    assert report.ok, report


def test_an_override_that_is_no_message_says_what_a_message_is(recorder: Recorder, instrumented: None) -> None:
    with openai_server() as server:
        tid = record_agent(recorder, server, 1000)
        trace = chronicle.load_trace(recorder.store, tid)
        with pytest.raises(chronicle.ReplayError, match="a message has no key 'tool'; its keys are content, text"):
            replay_agent(trace, {LLM: {"tool": "place_order"}}, agent, server.url)


@chronicle.boundary(kind="llm", name="asm.tokens")
def tokens(prompt: str) -> Iterator[str]:
    yield from prompt.split()


@chronicle.boundary(kind="agent", name="asm.writer")
def writer(prompt: str) -> str:
    return " ".join(tokens(prompt))


def test_a_stream_of_text_pieces_overridden_with_a_message(recorder: Recorder) -> None:
    writer("sell all shares")
    recorder.config.force_flush()
    trace = chronicle.load_trace(recorder.store, "latest")
    with chronicle.replay(trace, override={"asm.tokens": {"content": "hold"}}) as run_:
        assert run_.rerun() == "hold"
    with chronicle.replay(trace, override={"asm.tokens": "hold"}) as run_, pytest.raises(chronicle.ReplayError):
        run_.rerun()  # a string for a stream of strings: its pieces, or {"content": ...}
