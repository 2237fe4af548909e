"""``with_raw_response`` and ``with_streaming_response`` of the OpenAI and Anthropic SDKs, with the real SDKs against
local servers: the parsed typed body, status, request id and headers recorded; replayed offline by stand-ins of the
SDKs' response classes."""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import logging
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import chronicle_otel as chronicle
from chronicle_otel import ReplayDivergence
from chronicle_otel import semconv as sc
from chronicle_otel.integrations import anthropic as chronicle_anthropic
from chronicle_otel.integrations import openai as chronicle_openai
from chronicle_otel.model import Trace
from tests import llm_servers
from tests.conftest import Recorder
from tests.llm_servers import LLMServer, Reply, anthropic_server, openai_server
from tests.unit.integrations.sdk_agent import Order

# The SDKs are imported where they are used, not when pytest collects this module: importing anthropic
# alone takes about two seconds.
if TYPE_CHECKING:
    import anthropic
    import openai

MESSAGES = [{"role": "user", "content": "sell $1,000 of MSFT"}]
SECRET_HEADER_VALUE = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2
SHOWN = (
    "x-request-id",
    "request-id",
    "openai-processing-ms",
    "anthropic-ratelimit-requests-remaining",
    "x-ratelimit-remaining-tokens",
    "retry-after",
    "content-type",
)
"""The headers the agents read (and return, to compare the replay with the recording)."""

LIMIT: dict[str, int | None] = {"max_shares": None}
RESPONSES: list[Any] = []
"""Every response object the agents got, in order (the stand-ins, in a replay)."""
CLIENTS: list[openai.OpenAI] = []

_ids = itertools.count(1)


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[LLMServer, LLMServer]]:
    """The local servers, answering with the headers the real APIs send (a request id each, rate limits…), a
    cookie and a header holding a key."""

    def end_headers(self: BaseHTTPRequestHandler) -> None:
        n = next(_ids)
        for name, value in (
            ("x-request-id", f"req_{n:06d}"),
            ("request-id", f"req_{n:06d}"),
            ("openai-processing-ms", "12"),
            ("anthropic-ratelimit-requests-remaining", "99"),
            ("x-ratelimit-remaining-tokens", "9000"),
            ("retry-after", "0"),
            ("set-cookie", "__session=cookie-secret-value; Path=/"),
            ("openai-echo", SECRET_HEADER_VALUE),
        ):
            self.send_header(name, value)
        BaseHTTPRequestHandler.end_headers(self)

    monkeypatch.setattr(llm_servers._Handler, "end_headers", end_headers)
    with openai_server() as oa, anthropic_server() as an:
        yield oa, an


@pytest.fixture
def instrumented() -> Iterator[None]:
    names = chronicle_openai.instrument() + chronicle_anthropic.instrument()
    assert "anthropic.beta.messages.create" in names and "openai.beta.responses.create" in names
    try:
        yield
    finally:
        chronicle_openai.uninstrument()
        chronicle_anthropic.uninstrument()


@chronicle.boundary(kind="tool", name="raw_agent.place_order")
def place_order(order: Order) -> dict[str, Any]:
    """The broker call, with the guardrail in front of it."""
    limit = LIMIT["max_shares"]
    if limit is not None and order.quantity > limit:
        return {"status": "blocked", "reason": f"{order.quantity} shares exceeds {limit}"}
    return {"status": "filled", "symbol": order.symbol, "quantity": order.quantity}


def _seen(label: str, response: Any, parsed: Any) -> dict[str, Any]:
    """What the agent reads from one response, returned (and so compared by the replay)."""
    RESPONSES.append(response)
    return {
        "label": label,
        "parsed": parsed,
        "status": response.status_code,
        "request_id": response.request_id,
        "headers": {name: response.headers.get(name) for name in SHOWN},
    }


def _clients(openai_url: str, anthropic_url: str) -> tuple[openai.OpenAI, anthropic.Anthropic]:
    import anthropic
    import openai

    return (
        openai.OpenAI(base_url=f"{openai_url}/v1", api_key="sk-test-openai-key", max_retries=0),
        anthropic.Anthropic(base_url=anthropic_url, api_key="sk-ant-test-key", max_retries=0),
    )


@chronicle.boundary(kind="agent", name="raw_agent.run")
def run_agent(openai_url: str, anthropic_url: str) -> dict[str, Any]:
    """Every raw and streaming-response call of the sync clients, plain and ``stream=True``."""
    import anthropic
    from openai.types.responses import ParsedResponse

    oa, an = _clients(openai_url, anthropic_url)
    seen: list[dict[str, Any]] = []
    try:
        chat = {"model": "gpt-test", "messages": MESSAGES}
        raw = oa.chat.completions.with_raw_response.create(**chat)
        seen.append(_seen("chat raw", raw, raw.parse()))
        raw = oa.chat.completions.with_raw_response.create(**chat, stream=True, stream_options={"include_usage": True})
        seen.append(_seen("chat raw stream", raw, list(raw.parse())))
        with oa.chat.completions.with_streaming_response.create(**chat) as response:
            seen.append(_seen("chat streaming", response, response.parse()))
        with oa.chat.completions.with_streaming_response.create(**chat, stream=True) as response:
            seen.append(_seen("chat streaming stream", response, list(response.parse())))

        summary = {"model": "gpt-test", "input": "summarise the order"}
        raw = oa.responses.with_raw_response.create(**summary)
        seen.append(_seen("responses raw", raw, raw.parse()))
        raw = oa.with_raw_response.responses.create(**summary, stream=True)  # langchain-openai's path
        seen.append(_seen("responses raw stream", raw, list(raw.parse())))
        with oa.responses.with_streaming_response.create(**summary) as response:
            seen.append(_seen("responses streaming", response, response.parse()))
        with oa.responses.with_streaming_response.create(**summary, stream=True) as response:
            seen.append(_seen("responses streaming stream", response, list(response.parse())))

        review = {"model": "claude-test", "max_tokens": 100, "messages": MESSAGES}
        raw = an.messages.with_raw_response.create(**review)
        seen.append(_seen("messages raw", raw, raw.parse()))
        raw = an.messages.with_raw_response.create(**review, stream=True)
        seen.append(_seen("messages raw stream", raw, list(raw.parse())))
        with an.messages.with_streaming_response.create(**review) as response:
            seen.append(_seen("messages streaming", response, response.parse()))
        with an.messages.with_streaming_response.create(**review, stream=True) as response:
            seen.append(_seen("messages streaming stream", response, list(response.parse())))

        raw = oa.chat.completions.with_raw_response.parse(**chat, response_format=Order)
        extracted = raw.parse()
        seen.append(_seen("chat raw parse", raw, extracted))
        raw = oa.responses.with_raw_response.parse(**summary, text_format=Order)
        parsed = raw.parse()
        assert isinstance(parsed, ParsedResponse), parsed
        # Its whole ParsedResponse is not compared: the codec rebuilds ResponseFormatTextJSONSchemaConfig.schema_
        # (alias "schema") as None, on the plain responses.parse path too.
        seen.append(_seen("responses raw parse", raw, parsed.output_parsed))
        raw = an.beta.messages.with_raw_response.create(**review, betas=["context-management-2025-06-27"])
        seen.append(_seen("beta messages raw", raw, raw.parse()))
        raw = oa.beta.chat.completions.with_raw_response.create(**chat)
        seen.append(_seen("beta chat raw", raw, raw.parse()))
        with an.beta.messages.stream(**review, betas=["context-management-2025-06-27"]) as helper:
            helper_text = "".join(helper.text_stream)
            final = helper.get_final_message()
        assert isinstance(final, anthropic.types.beta.BetaMessage) and final.content[0].type == "text"
        order = extracted.choices[0].message.parsed
        assert isinstance(order, Order), order
        result = place_order(order)
    finally:
        oa.close()
        an.close()
    return {"seen": seen, "result": result, "beta_helper": (helper_text, final.content[0].text)}


SYNC_CALLS = {"openai": 11, "anthropic": 6}
SYNC_NAMES = [
    *["openai.chat.completions.create"] * 4,
    *["openai.responses.create"] * 4,
    *["anthropic.messages.create"] * 4,
    "openai.chat.completions.parse",
    "openai.responses.parse",
    "anthropic.beta.messages.create",
    "openai.chat.completions.create",
    "anthropic.beta.messages.stream",
]


@chronicle.boundary(kind="agent", name="raw_agent.arun")
async def arun_agent(openai_url: str, anthropic_url: str) -> dict[str, Any]:
    """Every raw and streaming-response call of the async clients, plain and ``stream=True``."""
    import anthropic
    import openai

    oa = openai.AsyncOpenAI(base_url=f"{openai_url}/v1", api_key="sk-test-openai-key", max_retries=0)
    an = anthropic.AsyncAnthropic(base_url=anthropic_url, api_key="sk-ant-test-key", max_retries=0)
    seen: list[dict[str, Any]] = []
    try:
        chat = {"model": "gpt-test", "messages": MESSAGES}
        raw = await oa.chat.completions.with_raw_response.create(**chat)
        seen.append(_seen("chat raw", raw, raw.parse()))  # openai's LegacyAPIResponse: parse() is sync
        raw = await oa.chat.completions.with_raw_response.create(**chat, stream=True)
        seen.append(_seen("chat raw stream", raw, [chunk async for chunk in raw.parse()]))
        async with oa.chat.completions.with_streaming_response.create(**chat) as response:
            seen.append(_seen("chat streaming", response, await response.parse()))
        async with oa.chat.completions.with_streaming_response.create(**chat, stream=True) as response:
            seen.append(_seen("chat streaming stream", response, [c async for c in await response.parse()]))

        summary = {"model": "gpt-test", "input": "summarise the order"}
        raw = await oa.responses.with_raw_response.create(**summary)
        seen.append(_seen("responses raw", raw, raw.parse()))
        raw = await oa.responses.with_raw_response.create(**summary, stream=True)
        seen.append(_seen("responses raw stream", raw, [event async for event in raw.parse()]))
        async with oa.responses.with_streaming_response.create(**summary) as response:
            seen.append(_seen("responses streaming", response, await response.parse()))
        async with oa.responses.with_streaming_response.create(**summary, stream=True) as response:
            seen.append(_seen("responses streaming stream", response, [e async for e in await response.parse()]))

        review = {"model": "claude-test", "max_tokens": 100, "messages": MESSAGES}
        raw = await an.messages.with_raw_response.create(**review)
        seen.append(_seen("messages raw", raw, await raw.parse()))  # anthropic's AsyncAPIResponse: parse() awaits
        raw = await an.messages.with_raw_response.create(**review, stream=True)
        seen.append(_seen("messages raw stream", raw, [event async for event in await raw.parse()]))
        async with an.messages.with_streaming_response.create(**review) as response:
            seen.append(_seen("messages streaming", response, await response.parse()))
        async with an.messages.with_streaming_response.create(**review, stream=True) as response:
            seen.append(_seen("messages streaming stream", response, [e async for e in await response.parse()]))

        raw = await an.beta.messages.with_raw_response.create(**review, stream=True, betas=["x-2025-01-01"])
        seen.append(_seen("beta messages raw stream", raw, [event async for event in await raw.parse()]))
    finally:
        await oa.close()
        await an.close()
    return {"seen": seen}


def _no_placeholders(recorder: Recorder, trace: Trace) -> None:
    """Nothing recorded as ``unencodable``: not on any span, not in any stored payload; no cookie, no key."""
    for span in recorder.spans():
        for key in (sc.INPUT, sc.OUTPUT):
            text = str((span.attributes or {}).get(key, ""))
            assert '"$type":"unencodable"' not in text, (span.name, text[:300])
    for boundary in trace.boundaries:
        for payload in (boundary.raw_input, boundary.raw_output, boundary.raw_error):
            if payload is not None:
                assert '"$type":"unencodable"' not in payload.text, boundary.name
                assert "cookie-secret-value" not in payload.text and SECRET_HEADER_VALUE not in payload.text
    stored = json.dumps([s.attributes for s in trace.spans], default=str)
    assert "cookie-secret-value" not in stored and SECRET_HEADER_VALUE not in stored


def _typed(seen: list[dict[str, Any]]) -> None:
    """Each ``.parse()`` gave the SDK's own types."""
    import anthropic
    from openai.types.chat import ChatCompletion, ChatCompletionChunk, ParsedChatCompletion
    from openai.types.responses import Response

    classes = {
        "chat": ChatCompletion,
        "responses": Response,
        "messages": anthropic.types.Message,
        "beta messages": anthropic.types.beta.BetaMessage,
        "beta chat": ChatCompletion,
    }
    for entry in seen:
        label, parsed = entry["label"], entry["parsed"]
        if label.endswith("parse"):
            assert isinstance(parsed, ParsedChatCompletion if label.startswith("chat") else Order), label
        elif label.endswith("stream"):
            assert parsed and all(not isinstance(item, dict) for item in parsed), label
            if label.startswith("chat"):
                assert all(isinstance(item, ChatCompletionChunk) for item in parsed), label
        else:
            assert isinstance(parsed, classes[label.rsplit(" ", 1)[0]]), label


def _record(recorder: Recorder, oa: LLMServer, an: LLMServer) -> tuple[dict[str, Any], Trace]:
    oa.reply_with(*[Reply(f"answer {i}") for i in range(8)])
    oa.reply_with(Reply("", parsed_json={"symbol": "MSFT", "quantity": 1000, "side": "sell"}))
    oa.reply_with(Reply("", parsed_json={"symbol": "MSFT", "quantity": 10, "side": "sell"}))
    RESPONSES.clear()
    recorded = run_agent(oa.url, an.url)
    assert (oa.count(), an.count()) == (SYNC_CALLS["openai"], SYNC_CALLS["anthropic"])
    return recorded, chronicle.load_trace(recorder.path, "latest")


def test_raw_and_streaming_responses_record_typed_and_replay_offline(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None
) -> None:
    import anthropic
    import openai
    from openai._legacy_response import LegacyAPIResponse

    oa, an = servers
    recorded, trace = _record(recorder, oa, an)
    assert recorded["result"]["status"] == "filled"  # the incident: 1,000 shares
    _typed(recorded["seen"])
    assert isinstance(RESPONSES[0], LegacyAPIResponse) and isinstance(RESPONSES[2], openai.APIResponse), "unchanged"
    first = recorded["seen"][0]
    assert first["status"] == 200 and first["request_id"] == first["headers"]["x-request-id"]
    assert first["headers"]["openai-processing-ms"] == "12"
    assert recorded["seen"][8]["request_id"] == recorded["seen"][8]["headers"]["request-id"]  # anthropic's header
    _no_placeholders(recorder, trace)
    calls = [b for b in trace.boundaries if b.kind == "llm"]
    assert [b.name for b in calls] == SYNC_NAMES, "a raw call is recorded under its method's name"
    assert all(b.stream and b.stream_state == "complete" for b in calls), [(b.name, b.stream_state) for b in calls]

    LIMIT["max_shares"] = 100  # the fix
    RESPONSES.clear()
    try:
        with chronicle.replay(trace, stub={"kind:llm"}) as run:
            replayed = run.rerun()
    finally:
        LIMIT["max_shares"] = None
    assert (oa.count(), an.count()) == (SYNC_CALLS["openai"], SYNC_CALLS["anthropic"]), "no request reached a server"
    assert replayed["result"]["status"] == "blocked"
    assert replayed["seen"] == recorded["seen"], "every parsed body, status, request id and header as recorded"
    _typed(replayed["seen"])
    report = run.report
    assert report.ok and not report.drift, report
    assert len(report.stubbed) == len(SYNC_NAMES)
    assert {c.call_key[-1][0] for c in report.changes} == {"raw_agent.place_order", "raw_agent.run"}

    assert RESPONSES[0].__class__.__name__ == "ReplayedLegacyAPIResponse"
    assert isinstance(RESPONSES[0], LegacyAPIResponse) and isinstance(RESPONSES[2], openai.APIResponse)
    assert isinstance(RESPONSES[8], anthropic.APIResponse)
    raw = RESPONSES[0]
    assert raw.headers["X-Request-ID"] == first["request_id"], "case-insensitive headers"
    assert "set-cookie" not in raw.headers and raw.headers["openai-echo"] != SECRET_HEADER_VALUE
    assert raw.http_request.method == "POST" and raw.http_request.url.path == "/v1/chat/completions"
    assert json.loads(raw.text)["id"] == raw.parse().id and raw.parse() is raw.parse()
    assert raw.parse()._request_id == first["request_id"]
    assert RESPONSES[8].json()["id"] == RESPONSES[8].parse().id
    assert raw.parse(to=dict)["choices"][0]["message"]["content"] == "answer 0"


def test_the_async_clients_record_and_replay(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None
) -> None:
    import anthropic
    import openai

    oa, an = servers
    RESPONSES.clear()
    recorded = asyncio.run(arun_agent(oa.url, an.url))
    before = (oa.count(), an.count())
    assert before == (8, 5)
    _typed(recorded["seen"])
    trace = chronicle.load_trace(recorder.path, "latest")
    assert trace.root is not None and trace.root.name == "raw_agent.arun"
    _no_placeholders(recorder, trace)
    assert all(b.stream_state == "complete" for b in trace.boundaries if b.kind == "llm")

    RESPONSES.clear()
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        replayed = run.rerun()
    assert (oa.count(), an.count()) == before
    assert replayed == recorded
    _typed(replayed["seen"])
    assert run.report.ok and not run.report.drift and not run.report.changes, run.report
    assert isinstance(RESPONSES[2], openai.AsyncAPIResponse) and isinstance(RESPONSES[8], anthropic.AsyncAPIResponse)


def test_the_trace_loaded_from_a_collector_file_replays_the_same(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None, tmp_path: Path
) -> None:
    oa, an = servers
    recorded, trace = _record(recorder, oa, an)
    lines = recorder.store.read_requests(trace.trace_id)  # the Collector's file exporter writes these lines
    path = tmp_path / "collector-out.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    loaded = chronicle.load_trace(path, trace.trace_id, store=recorder.path)
    with chronicle.replay(loaded, stub={"kind:llm"}) as run:
        replayed = run.rerun()
    assert replayed == recorded
    assert run.report.ok and not run.report.drift and not run.report.changes, run.report
    assert (oa.count(), an.count()) == (SYNC_CALLS["openai"], SYNC_CALLS["anthropic"])


@chronicle.boundary(kind="agent", name="raw_agent.langchain_style")
def langchain_style(openai_url: str, anthropic_url: str, stream: bool) -> dict[str, Any]:
    """The call sequence of langchain-openai's and langchain-anthropic's chat models."""
    oa, an = _clients(openai_url, anthropic_url)
    try:
        payload: dict[str, Any] = {"model": "gpt-test", "messages": MESSAGES, "stream": stream}
        raw_response = oa.chat.completions.with_raw_response.create(**payload)
        response = raw_response.parse()
        text = "".join(c.choices[0].delta.content or "" for c in response) if stream else response.model_dump()
        openai_headers = dict(raw_response.headers)
        payload = {"model": "claude-test", "max_tokens": 100, "messages": MESSAGES, "stream": stream}
        raw_response = an.messages.with_raw_response.create(**payload)
        message = raw_response.parse()
        if stream:
            claude = "".join(e.delta.text for e in message if e.type == "content_block_delta")
        else:
            claude = message.content[0].text
        return {"openai": text, "claude": claude, "openai_request_id": openai_headers.get("x-request-id")}
    finally:
        oa.close()
        an.close()


@pytest.mark.parametrize("stream", [False, True])
def test_the_langchain_call_sequence_replays(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None, stream: bool
) -> None:
    oa, an = servers
    recorded = langchain_style(oa.url, an.url, stream)
    assert recorded["openai_request_id"].startswith("req_")
    trace = chronicle.load_trace(recorder.path, "latest")
    _no_placeholders(recorder, trace)
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        replayed = run.rerun()
    assert replayed == recorded
    assert run.report.ok and not run.report.drift and not run.report.changes, run.report
    assert (oa.count(), an.count()) == (1, 1)


def test_a_raw_recording_answers_a_plain_call_and_a_plain_stream_answers_a_raw_call(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None
) -> None:
    import openai
    from openai.types.chat import ChatCompletion

    oa, _ = servers
    mode = {"raw": True}

    @chronicle.boundary(kind="agent", name="raw_agent.switch")
    def agent(url: str) -> list[Any]:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0)
        try:
            if mode["raw"]:
                plain = client.chat.completions.with_raw_response.create(model="m", messages=MESSAGES).parse()
                stream = list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))
            else:
                plain = client.chat.completions.create(model="m", messages=MESSAGES)
                raw = client.chat.completions.with_raw_response.create(model="m", messages=MESSAGES, stream=True)
                assert raw.status_code == 200 and raw.headers["content-type"].startswith("text/event-stream")
                stream = list(raw.parse())
            return [plain, stream]
        finally:
            client.close()

    recorded = agent(oa.url)
    trace = chronicle.load_trace(recorder.path, "latest")
    mode["raw"] = False  # the code now calls the other way: the inputs compare equal (no extra_headers)
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        replayed = run.rerun()
    assert replayed == recorded and isinstance(replayed[0], ChatCompletion)
    assert run.report.ok and not run.report.drift, run.report
    assert oa.count() == 2


def test_the_span_of_a_streaming_response_ends_when_its_block_closes(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None
) -> None:
    import openai

    oa, _ = servers
    client = openai.OpenAI(base_url=f"{oa.url}/v1", api_key="k", max_retries=0)
    try:
        with client.chat.completions.with_streaming_response.create(model="m", messages=MESSAGES) as response:
            assert not recorder.spans(), "the body is not read yet"
            parsed = response.parse()
            assert response.parse() is parsed, "the SDK's cached parse, unchanged"
            assert parsed._request_id == response.request_id
        with client.chat.completions.with_streaming_response.create(model="m", messages=MESSAGES, stream=True) as r:
            chunks = r.parse()
            assert r.parse() is chunks, "the same recording stream each time"
            next(iter(chunks))
            assert len(recorder.spans()) == 1, "the stream is being read"
        stream = client.chat.completions.with_raw_response.create(model="m", messages=MESSAGES, stream=True).parse()
        gc.collect()  # the response is gone: the stream it gave is still read, and recorded to its end
        assert len(recorder.spans()) == 2
        assert len(list(stream)) == 5
        spans = recorder.spans()
    finally:
        client.close()
    assert [(s.attributes or {})[sc.STREAM_STATE] for s in spans] == ["complete", "abandoned", "complete"]
    assert [(s.attributes or {})[sc.STREAM_ITEMS] for s in spans] == [2, 2, 6], "the head, then the body or chunks"
    attrs = dict(spans[0].attributes or {})
    assert attrs[sc.GEN_AI_RESPONSE_ID].startswith("chatcmpl-") and attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 7


def test_a_body_read_without_parse_is_said_and_replays_as_a_divergence(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None, caplog: pytest.LogCaptureFixture
) -> None:
    import openai

    oa, _ = servers

    @chronicle.boundary(kind="agent", name="raw_agent.lines")
    def agent(url: str) -> dict[str, Any]:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0)
        try:
            with client.chat.completions.with_streaming_response.create(model="m", messages=MESSAGES) as response:
                lines = list(response.iter_lines())
            with client.chat.completions.with_streaming_response.create(model="m", messages=MESSAGES) as response:
                body = response.json()  # read, then parsed by the integration to be recorded typed
            assert isinstance(body, dict)
            return {"lines": len(lines), "id": body["id"]}
        finally:
            client.close()

    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        recorded = agent(oa.url)
    assert recorded["lines"] == 1
    warnings = [r.getMessage() for r in caplog.records if "before its .parse()" in r.getMessage()]
    assert len(warnings) == 1 and "openai.chat.completions.create" in warnings[0], warnings
    trace = chronicle.load_trace(recorder.path, "latest")
    _no_placeholders(recorder, trace)
    calls = [b for b in trace.boundaries if b.kind == "llm"]
    assert [(b.stream_state, len(b.decode_output(()))) for b in calls] == [("abandoned", 1), ("complete", 2)]
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        replayed = run.rerun()
    assert replayed["id"] == recorded["id"], "json() answers from the recorded body"
    assert replayed["lines"] == 0, "the body read line by line was not recorded (and said so)"
    assert oa.count() == 2

    @chronicle.boundary(kind="agent", name="raw_agent.lines")
    def parsing(url: str) -> None:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0)
        try:
            with client.chat.completions.with_streaming_response.create(model="m", messages=MESSAGES) as response:
                response.parse()
        finally:
            client.close()

    with chronicle.replay(trace, stub={"kind:llm"}), pytest.raises(ReplayDivergence, match="never parsed"):
        parsing(oa.url)
    assert oa.count() == 2


# ------------------------------------------------------------------ the frameworks that call the wrappers, SDK-only


@chronicle.boundary(kind="agent", name="raw_agent.langchain")
def langchain_run(openai_url: str, anthropic_url: str) -> dict[str, Any]:
    """langchain-openai and langchain-anthropic chat models, invoked and streamed (only the SDKs are recorded)."""
    from langchain_anthropic import ChatAnthropic
    from langchain_openai import ChatOpenAI

    gpt = ChatOpenAI(
        model="gpt-test",
        api_key="sk-test",  # type: ignore[arg-type]
        base_url=f"{openai_url}/v1",
        max_retries=0,
        include_response_headers=True,
    )
    claude = ChatAnthropic(model="claude-test", api_key="sk-test", base_url=anthropic_url, max_retries=0)  # type: ignore[call-arg]
    answer = gpt.invoke("sell $1,000 of MSFT")
    review = claude.invoke("review the order")

    async def both_async() -> tuple[Any, Any]:
        try:
            return await gpt.ainvoke("again"), await claude.ainvoke("again")
        finally:  # their async HTTP clients belong to this event loop
            await gpt.root_async_client.close()
            await claude._async_client.close()

    gpt_async, claude_async = asyncio.run(both_async())
    return {
        "gpt_async": gpt_async.content,
        "claude_async": claude_async.content,
        "gpt": answer.content,
        "gpt_request_id": answer.response_metadata["headers"]["x-request-id"],
        "gpt_stream": "".join(str(chunk.content) for chunk in gpt.stream("explain")),
        "claude": review.content,
        "claude_id": review.response_metadata["id"],
        "claude_stream": "".join(str(chunk.text) for chunk in claude.stream("explain")),
    }


def test_langchain_models_recorded_through_the_sdks_replay_offline(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None
) -> None:
    pytest.importorskip("langchain_openai")
    pytest.importorskip("langchain_anthropic")
    oa, an = servers
    oa.reply_with(Reply("Selling MSFT."), Reply("Async GPT."), Reply("Because you asked."))
    an.reply_with(Reply("Looks fine."), Reply("Async Claude."), Reply("Streamed review."))
    recorded = langchain_run(oa.url, an.url)
    assert recorded["gpt"] == "Selling MSFT." and recorded["claude_stream"] == "Streamed review."
    assert recorded["gpt_request_id"].startswith("req_")
    trace = chronicle.load_trace(recorder.path, "latest")
    _no_placeholders(recorder, trace)
    assert recorded["gpt_async"] == "Async GPT." and recorded["claude_async"] == "Async Claude."
    assert [b.name for b in trace.boundaries if b.kind == "llm"] == [
        "openai.chat.completions.create",
        "anthropic.messages.create",
    ] * 3
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        replayed = run.rerun()
    assert replayed == recorded
    assert run.report.ok and not run.report.drift and not run.report.changes, run.report
    assert (oa.count(), an.count()) == (3, 3)


@pytest.fixture
def agents_tracing_off() -> Iterator[None]:
    """The Agents SDK's own tracing exporter (to api.openai.com) never runs."""
    agents = pytest.importorskip("agents")
    agents.set_tracing_disabled(True)
    try:
        yield
    finally:
        agents.set_tracing_disabled(False)


@chronicle.boundary(kind="agent", name="raw_agent.agents_streamed")
async def agents_streamed(base_url: str) -> dict[str, Any]:
    """``Runner.run_streamed`` on the Responses model: ``responses.with_streaming_response.create``."""
    from tests.frameworks import openai_agents_agent as app

    result = await app.run_trader(app.ORDER_REQUEST, base_url, "responses", True)
    return {"final_output": str(result["final_output"]), "events": result["events"], "text": result["text"]}


def test_the_agents_sdk_streamed_run_recorded_through_the_sdk_replays_offline(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None, agents_tracing_off: None
) -> None:
    from tests.frameworks import openai_agents_agent as app

    oa, _ = servers
    order = {"symbol": "MSFT", "quantity": 1000, "side": "sell"}
    oa.reply_with(Reply("Placing the order.", tool_call=("place_order", order)))
    recorded = asyncio.run(agents_streamed(oa.url))
    assert "status='filled'" in recorded["final_output"] and recorded["text"] == "Placing the order."
    trace = chronicle.load_trace(recorder.path, "latest")
    _no_placeholders(recorder, trace)
    calls = [b for b in trace.boundaries if b.kind == "llm"]
    assert [(b.name, b.stream_state) for b in calls] == [("openai.responses.create", "complete")]
    app.LIMIT["max_shares"] = 100  # the fix
    try:
        with chronicle.replay(trace, stub={"kind:llm"}) as run:
            replayed = run.rerun()
    finally:
        app.LIMIT["max_shares"] = None
    assert oa.count() == 1
    assert "status='blocked'" in replayed["final_output"]
    assert (replayed["events"], replayed["text"]) == (recorded["events"], recorded["text"])
    assert run.report.ok and not run.report.drift, run.report


@chronicle.boundary(kind="llm", name="raw_agent.call_model")
def call_model(url: str, stream: bool) -> Any:
    """A helper of the user's that returns the raw response (to read its headers), a boundary of its own."""
    import openai

    client = openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0)
    CLIENTS.append(client)
    return client.chat.completions.with_raw_response.create(model="m", messages=MESSAGES, stream=stream)


@chronicle.boundary(kind="agent", name="raw_agent.returns")
def returns_raw(url: str, stream: bool) -> dict[str, Any]:
    raw = call_model(url, stream)
    parsed = raw.parse()
    content = "".join(c.choices[0].delta.content or "" for c in parsed) if stream else parsed.choices[0].message.content
    return {"content": content, "request_id": raw.request_id, "status": raw.status_code}


def test_a_boundary_that_returns_the_raw_response_records_and_replays_it(
    recorder: Recorder,
    servers: tuple[LLMServer, LLMServer],
    instrumented: None,
    caplog: pytest.LogCaptureFixture,
    request: pytest.FixtureRequest,
) -> None:
    oa, _ = servers
    oa.reply_with(Reply("From the helper."), Reply("Streamed from the helper."))
    request.addfinalizer(lambda: [client.close() for client in CLIENTS])
    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        recorded = returns_raw(oa.url, False)
        trace = chronicle.load_trace(recorder.path, "latest")
        assert not [r for r in caplog.records if "returned a response of" in r.getMessage()]
        streamed = returns_raw(oa.url, True)
        streamed_trace = chronicle.load_trace(recorder.path, "latest")
    assert recorded["content"] == "From the helper." and streamed["content"] == "Streamed from the helper."
    said = [r.getMessage() for r in caplog.records if "returned a response of" in r.getMessage()]
    assert len(said) == 1 and "openai.chat.completions.create" in said[0], "the stream returned unread is said"
    _no_placeholders(recorder, trace)
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        replayed = run.rerun()
    assert replayed == recorded
    assert run.report.ok and not run.report.drift and not run.report.changes, run.report
    with chronicle.replay(streamed_trace, stub={"kind:llm"}) as run, pytest.raises(ReplayDivergence):
        run.rerun()
    assert oa.count() == 2


def test_an_error_status_raised_through_the_raw_wrapper_replays(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None
) -> None:
    import openai

    oa, _ = servers

    @chronicle.boundary(kind="agent", name="raw_agent.failing")
    def failing(url: str) -> str:
        client = openai.OpenAI(base_url=f"{url}/v1/missing", api_key="k", max_retries=0)
        try:
            with client.chat.completions.with_streaming_response.create(model="m", messages=MESSAGES):
                return "found"
        except openai.NotFoundError as exc:
            try:
                client.chat.completions.with_raw_response.create(model="m", messages=MESSAGES)
            except openai.NotFoundError as again:
                return f"not found: {exc.status_code}, {again.status_code}"
            return "found"
        finally:
            client.close()

    recorded = failing(oa.url)
    assert recorded == "not found: 404, 404"
    trace = chronicle.load_trace(recorder.path, "latest")
    assert [b.failed for b in trace.boundaries if b.kind == "llm"] == [True, True]
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        assert run.rerun() == recorded
    assert run.report.ok and oa.count() == 2


def test_a_raw_call_answered_by_an_override_is_a_response_around_it(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: None
) -> None:
    oa, an = servers
    recorded = langchain_style(oa.url, an.url, False)
    trace = chronicle.load_trace(recorder.path, "latest")
    call = next(b for b in trace.boundaries if b.name == "openai.chat.completions.create")
    plain = call.decode_output(("openai.",))[1]
    edited = plain.model_copy(update={"id": "chatcmpl-edited"})
    what_if = {"openai.chat.completions.create[0]": [edited]}  # a raw call is recorded as its items: head, body
    with chronicle.replay(trace, stub={"kind:llm"}, override=what_if) as run:
        replayed = run.rerun()
    assert replayed["openai"]["id"] == "chatcmpl-edited" and replayed["claude"] == recorded["claude"]
    assert replayed["openai_request_id"] is None, "an override's response has no recorded head"
    assert (oa.count(), an.count()) == (1, 1)
