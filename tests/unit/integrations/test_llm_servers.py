"""The local OpenAI and Anthropic API servers, driven by the real SDK clients."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import pydantic
import pytest

from tests.llm_servers import LLMServer, Reply, anthropic_server, openai_server

# The SDKs are imported where they are used, not when pytest collects this module: importing anthropic
# alone takes about two seconds.
if TYPE_CHECKING:
    import anthropic
    import openai

PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
MESSAGES: Any = [{"role": "user", "content": "What is the weather?"}]


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both SDKs build their HTTP clients with trust_env: a proxy from the environment would take 127.0.0.1 away."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


@pytest.fixture
def oai_server() -> Iterator[LLMServer]:
    with openai_server() as server:
        yield server


@pytest.fixture
def claude_server() -> Iterator[LLMServer]:
    with anthropic_server() as server:
        yield server


@pytest.fixture
def oai(oai_server: LLMServer) -> Iterator[openai.OpenAI]:
    import openai

    client = openai.OpenAI(base_url=oai_server.url + "/v1", api_key="test-key", max_retries=0)
    yield client
    client.close()


@pytest.fixture
async def async_oai(oai_server: LLMServer) -> AsyncIterator[openai.AsyncOpenAI]:
    import openai

    client = openai.AsyncOpenAI(base_url=oai_server.url + "/v1", api_key="test-key", max_retries=0)
    yield client
    await client.close()


@pytest.fixture
def claude(claude_server: LLMServer) -> Iterator[anthropic.Anthropic]:
    import anthropic

    client = anthropic.Anthropic(base_url=claude_server.url, api_key="test-key", max_retries=0)
    yield client
    client.close()


@pytest.fixture
async def async_claude(claude_server: LLMServer) -> AsyncIterator[anthropic.AsyncAnthropic]:
    import anthropic

    client = anthropic.AsyncAnthropic(base_url=claude_server.url, api_key="test-key", max_retries=0)
    yield client
    await client.close()


class Weather(pydantic.BaseModel):
    city: str
    celsius: int


# --- OpenAI chat completions -------------------------------------------------------------------------------------


def test_chat_completion_plain(oai_server: LLMServer, oai: openai.OpenAI) -> None:
    oai_server.reply_with(Reply("Sunny in Paris.", input_tokens=5, output_tokens=3))

    completion = oai.chat.completions.create(model="gpt-test", messages=MESSAGES, temperature=0)

    assert completion.id == "chatcmpl-000001"
    assert completion.created == 1_700_000_000
    assert completion.model == "gpt-test"
    assert completion.choices[0].message.content == "Sunny in Paris."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens, completion.usage.total_tokens) == (
        5,
        3,
        8,
    )
    assert oai_server.count() == 1
    request = oai_server.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["body"] == {"model": "gpt-test", "messages": MESSAGES, "temperature": 0}
    assert request["headers"]["authorization"] == "Bearer test-key"
    assert request["headers"]["content-type"] == "application/json"


def test_chat_completion_stream_with_usage(oai_server: LLMServer, oai: openai.OpenAI) -> None:
    oai_server.reply_with(Reply("Sunny in Paris.", model="gpt-test-2025"))

    stream = oai.chat.completions.create(
        model="gpt-test", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    with stream:
        chunks = list(stream)

    deltas = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(deltas) >= 3
    assert "".join(deltas) == "Sunny in Paris."
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (11, 7)
    assert all(c.usage is None for c in chunks[:-1])
    assert {c.id for c in chunks} == {"chatcmpl-000001"}
    assert {c.model for c in chunks} == {"gpt-test-2025"}
    assert oai_server.requests[0]["body"]["stream"] is True


def test_chat_completion_stream_without_usage(oai_server: LLMServer, oai: openai.OpenAI) -> None:
    stream = oai.chat.completions.create(model="gpt-test", messages=MESSAGES, stream=True)
    with stream:
        chunks = list(stream)

    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "ok"
    assert all(c.choices and c.usage is None for c in chunks)


def test_chat_completion_tool_call(oai_server: LLMServer, oai: openai.OpenAI) -> None:
    oai_server.reply_with(Reply("", tool_call=("get_weather", {"city": "Paris"})), Reply("", tool_call=("f", {"a": 1})))

    completion = oai.chat.completions.create(model="gpt-test", messages=MESSAGES)
    stream = oai.chat.completions.create(model="gpt-test", messages=MESSAGES, stream=True)
    with stream:
        chunks = list(stream)

    message = completion.choices[0].message
    assert completion.choices[0].finish_reason == "tool_calls"
    assert message.content is None
    assert message.tool_calls is not None
    call = message.tool_calls[0]
    assert call.type == "function"
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == (
        "call_000001",
        "get_weather",
        {"city": "Paris"},
    )
    calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert calls[0].id == "call_000002"
    assert calls[0].function is not None
    assert calls[0].function.name == "f"
    assert json.loads("".join(tc.function.arguments or "" for tc in calls if tc.function)) == {"a": 1}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_chat_completion_stream_helper(oai_server: LLMServer, oai: openai.OpenAI) -> None:
    oai_server.reply_with(Reply("Rain in Oslo."))

    with oai.chat.completions.stream(model="gpt-test", messages=MESSAGES) as stream:
        text = "".join(event.delta for event in stream if event.type == "content.delta")
        final = stream.get_final_completion()

    assert text == "Rain in Oslo."
    assert final.choices[0].message.content == "Rain in Oslo."


def test_chat_completion_parse(oai_server: LLMServer, oai: openai.OpenAI) -> None:
    oai_server.reply_with(Reply("", parsed_json={"city": "Paris", "celsius": 21}))

    completion = oai.chat.completions.parse(model="gpt-test", messages=MESSAGES, response_format=Weather)

    assert completion.choices[0].message.parsed == Weather(city="Paris", celsius=21)
    response_format = oai_server.requests[0]["body"]["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "Weather"


async def test_async_chat_completion(oai_server: LLMServer, async_oai: openai.AsyncOpenAI) -> None:
    oai_server.reply_with(Reply("one"), Reply("Sunny in Paris."))

    completion = await async_oai.chat.completions.create(model="gpt-test", messages=MESSAGES)
    stream = await async_oai.chat.completions.create(
        model="gpt-test", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    async with stream:
        chunks = [chunk async for chunk in stream]

    assert completion.choices[0].message.content == "one"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Sunny in Paris."
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == 18
    assert {c.id for c in chunks} == {"chatcmpl-000002"}
    assert oai_server.requests[0]["headers"]["x-stainless-async"].startswith("async")
    assert oai_server.count() == 2


# --- OpenAI responses --------------------------------------------------------------------------------------------


def test_response_plain(oai_server: LLMServer, oai: openai.OpenAI) -> None:
    oai_server.reply_with(Reply("Sunny in Paris.", input_tokens=4, output_tokens=6))

    response = oai.responses.create(model="gpt-test", input="What is the weather?", instructions="Be brief.")

    assert response.id == "resp_000001"
    assert response.status == "completed"
    assert response.output_text == "Sunny in Paris."
    assert response.output[0].id == "msg_000001"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (4, 6, 10)
    assert response.instructions == "Be brief."
    assert oai_server.requests[0]["path"] == "/v1/responses"
    assert oai_server.requests[0]["body"]["input"] == "What is the weather?"


def test_response_stream(oai_server: LLMServer, oai: openai.OpenAI) -> None:
    oai_server.reply_with(Reply("Sunny in Paris."))

    stream = oai.responses.create(model="gpt-test", input="hi", stream=True)
    with stream:
        events = list(stream)

    assert [e.type for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == "Sunny in Paris."
    completed = events[-1]
    assert completed.type == "response.completed"
    assert completed.response.id == "resp_000001"
    assert completed.response.output_text == "Sunny in Paris."
    assert completed.response.usage is not None
    assert completed.response.usage.total_tokens == 18


def test_response_stream_helper_with_tool_call(oai_server: LLMServer, oai: openai.OpenAI) -> None:
    oai_server.reply_with(Reply("Checking.", tool_call=("get_weather", {"city": "Paris"})))

    with oai.responses.stream(model="gpt-test", input="hi") as stream:
        text = "".join(event.delta for event in stream if event.type == "response.output_text.delta")
        final = stream.get_final_response()

    assert text == "Checking."
    assert final.output_text == "Checking."
    call = final.output[1]
    assert call.type == "function_call"
    assert (call.call_id, call.name, json.loads(call.arguments)) == ("call_000001", "get_weather", {"city": "Paris"})


async def test_async_response_stream(oai_server: LLMServer, async_oai: openai.AsyncOpenAI) -> None:
    oai_server.reply_with(Reply("Sunny in Paris."))

    stream = await async_oai.responses.create(model="gpt-test", input="hi", stream=True)
    async with stream:
        deltas = [e.delta async for e in stream if e.type == "response.output_text.delta"]
    response = await async_oai.responses.create(model="gpt-test", input="again")

    assert "".join(deltas) == "Sunny in Paris."
    assert (response.id, response.output_text) == ("resp_000002", "ok")


# --- Anthropic messages ------------------------------------------------------------------------------------------


def test_message_plain(claude_server: LLMServer, claude: anthropic.Anthropic) -> None:
    claude_server.reply_with(Reply("Sunny in Paris.", input_tokens=9, output_tokens=4))

    message = claude.messages.create(model="claude-test", max_tokens=64, messages=MESSAGES, system="Be brief.")

    assert message.id == "msg_000001"
    assert message.model == "claude-test"
    assert message.stop_reason == "end_turn"
    assert message.content[0].type == "text"
    assert message.content[0].text == "Sunny in Paris."
    assert (message.usage.input_tokens, message.usage.output_tokens) == (9, 4)
    request = claude_server.requests[0]
    assert request["path"] == "/v1/messages"
    assert request["body"] == {"model": "claude-test", "max_tokens": 64, "messages": MESSAGES, "system": "Be brief."}
    assert request["headers"]["authorization"] == "Bearer test-key"  # 2.x sends the key as a bearer token
    assert request["headers"]["anthropic-version"]


def test_message_tool_use(claude_server: LLMServer, claude: anthropic.Anthropic) -> None:
    claude_server.reply_with(Reply("Let me look.", tool_call=("get_weather", {"city": "Paris"})))

    message = claude.messages.create(model="claude-test", max_tokens=64, messages=MESSAGES)

    assert message.stop_reason == "tool_use"
    assert [block.type for block in message.content] == ["text", "tool_use"]
    tool = message.content[1]
    assert tool.type == "tool_use"
    assert (tool.id, tool.name, tool.input) == ("toolu_000001", "get_weather", {"city": "Paris"})


def test_message_raw_stream(claude_server: LLMServer, claude: anthropic.Anthropic) -> None:
    claude_server.reply_with(Reply("Sunny in Paris."))

    stream = claude.messages.create(model="claude-test", max_tokens=64, messages=MESSAGES, stream=True)
    with stream:
        events = list(stream)

    assert [e.type for e in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    start, delta = events[0], events[-2]
    assert start.type == "message_start"
    assert start.message.id == "msg_000001"
    assert start.message.usage.input_tokens == 11
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta" and e.delta.type == "text_delta")
    assert text == "Sunny in Paris."
    assert delta.type == "message_delta"
    assert (delta.delta.stop_reason, delta.usage.output_tokens) == ("end_turn", 7)
    assert claude_server.requests[0]["body"]["stream"] is True


def test_message_stream_helper(claude_server: LLMServer, claude: anthropic.Anthropic) -> None:
    claude_server.reply_with(Reply("Sunny in Paris."), Reply("", tool_call=("get_weather", {"city": "Oslo"})))

    with claude.messages.stream(model="claude-test", max_tokens=64, messages=MESSAGES) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    with claude.messages.stream(model="claude-test", max_tokens=64, messages=MESSAGES) as stream:
        tool_final = stream.get_final_message()

    assert text == "Sunny in Paris."
    assert final.id == "msg_000001"
    assert final.content[0].type == "text"
    assert final.content[0].text == "Sunny in Paris."
    assert (final.usage.input_tokens, final.usage.output_tokens, final.stop_reason) == (11, 7, "end_turn")
    assert tool_final.stop_reason == "tool_use"
    assert [block.type for block in tool_final.content] == ["tool_use"]
    tool = tool_final.content[0]
    assert tool.type == "tool_use"
    assert (tool.id, tool.input) == ("toolu_000002", {"city": "Oslo"})
    assert claude_server.count() == 2


async def test_async_message_stream(claude_server: LLMServer, async_claude: anthropic.AsyncAnthropic) -> None:
    claude_server.reply_with(Reply("Sunny in Paris."))

    async with async_claude.messages.stream(model="claude-test", max_tokens=64, messages=MESSAGES) as stream:
        text = "".join([piece async for piece in stream.text_stream])
        final = await stream.get_final_message()
    message = await async_claude.messages.create(model="claude-test", max_tokens=64, messages=MESSAGES)

    assert text == "Sunny in Paris."
    assert final.id == "msg_000001"
    assert final.usage.output_tokens == 7
    assert message.id == "msg_000002"
    assert message.content[0].type == "text"
    assert message.content[0].text == "ok"


# --- the server itself -------------------------------------------------------------------------------------------


def test_unknown_route_answers_404_in_the_provider_shape(
    oai_server: LLMServer, oai: openai.OpenAI, claude_server: LLMServer, claude: anthropic.Anthropic
) -> None:
    import anthropic
    import openai

    with pytest.raises(openai.NotFoundError) as openai_error:
        oai.embeddings.create(model="embed-test", input="hi")
    with pytest.raises(anthropic.NotFoundError) as anthropic_error:
        claude.messages.count_tokens(model="claude-test", messages=MESSAGES)

    assert openai_error.value.body == {
        "message": "not found",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
    assert anthropic_error.value.body == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "not found"},
    }
    assert oai_server.requests[0]["path"] == "/v1/embeddings"
    assert claude_server.count() == 1


def test_replies_are_used_in_order_then_the_default(oai_server: LLMServer, oai: openai.OpenAI) -> None:
    oai_server.reply_with(Reply("first"))
    oai_server.reply_with(Reply("second"))

    texts = [oai.chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content for _ in range(3)]

    assert texts == ["first", "second", "ok"]
    assert [r["body"]["model"] for r in oai_server.requests] == ["m", "m", "m"]


def test_close_drops_an_idle_keep_alive_connection() -> None:
    import openai

    server = openai_server()
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test-key", max_retries=0)
    try:
        assert client.chat.completions.create(model="m", messages=MESSAGES).id == "chatcmpl-000001"
    finally:
        server.close()
        client.close()

    assert not server._thread.is_alive()
    with (
        openai.OpenAI(base_url=server.url + "/v1", api_key="test-key", max_retries=0) as again,
        pytest.raises(openai.APIConnectionError),
    ):
        again.chat.completions.create(model="m", messages=MESSAGES)
