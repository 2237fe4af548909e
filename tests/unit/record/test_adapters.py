"""``instrument(arguments=..., stream=...)`` for a client whose methods take sentinels and return stream objects."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel.adapters import (
    Arguments,
    AsyncReplayedStream,
    ReplayedStream,
    StreamAdapter,
    StreamRecorder,
    StreamReplay,
)
from tests.conftest import Recorder


class _NotGiven:
    def __repr__(self) -> str:
        return f"<_NotGiven at {id(self):#x}>"  # differs from process to process, like an SDK's sentinel


NOT_GIVEN = _NotGiven()


@dataclass
class Token:
    """A typed stream item."""

    text: str


class TokenStream:
    """A client library's stream object: iterable, closable, a context manager, with a helper property."""

    def __init__(self, texts: list[str], fail_after: int | None = None) -> None:
        self._texts = texts
        self._fail_after = fail_after
        self._index = 0
        self.closed = False

    def __iter__(self) -> Iterator[Token]:
        return self

    def __next__(self) -> Token:
        if self.closed or self._index >= len(self._texts):
            raise StopIteration
        if self._fail_after is not None and self._index >= self._fail_after:
            raise ConnectionError("stream cut")
        self._index += 1
        return Token(self._texts[self._index - 1])

    def close(self) -> None:
        self.closed = True

    def __enter__(self) -> TokenStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def request_id(self) -> str:
        return "req-1"


class AsyncTokenStream:
    def __init__(self, texts: list[str]) -> None:
        self._texts = list(texts)

    def __aiter__(self) -> AsyncTokenStream:
        return self

    async def __anext__(self) -> Token:
        if not self._texts:
            raise StopAsyncIteration
        return Token(self._texts.pop(0))

    async def close(self) -> None:
        self._texts = []


class Client:
    calls = 0

    def generate(
        self,
        prompt: str,
        *,
        temperature: float | _NotGiven = NOT_GIVEN,
        headers: dict[str, str] | None = None,
        stream: bool = False,
        fail_after: int | None = None,
    ) -> Any:
        Client.calls += 1
        words = prompt.split()
        return TokenStream(words, fail_after) if stream else " ".join(words)

    async def agenerate(self, prompt: str, *, stream: bool = False) -> Any:
        Client.calls += 1
        return AsyncTokenStream(prompt.split()) if stream else prompt


ARGUMENTS = Arguments(passed_only=True, skip=lambda v: isinstance(v, _NotGiven), exclude={"headers"})
STREAM = StreamAdapter(
    is_stream=lambda v: isinstance(v, (TokenStream, AsyncTokenStream)),
    attributes=lambda items: {sc.GEN_AI_RESPONSE_ID: f"{len(items)} tokens"},
)


@pytest.fixture
def client() -> Iterator[Client]:
    chronicle.instrument(Client, "generate", kind="llm", name="lib.generate", arguments=ARGUMENTS, stream=STREAM)
    chronicle.instrument(Client, "agenerate", kind="llm", name="lib.agenerate", arguments=ARGUMENTS, stream=STREAM)
    Client.calls = 0
    try:
        yield Client()
    finally:
        chronicle.uninstrument(Client, "generate")
        chronicle.uninstrument(Client, "agenerate")


@chronicle.boundary(kind="agent", name="adapters.agent")
def agent(client: Client, prompt: str) -> dict[str, Any]:
    with client.generate(prompt, temperature=NOT_GIVEN, headers={"authorization": "Bearer s3cr3t"}, stream=True) as s:
        words = [t.text for t in s]
        request_id = s.request_id
    return {"words": words, "plain": client.generate(prompt), "request_id": request_id}


def test_only_the_passed_arguments_are_recorded(recorder: Recorder, client: Client) -> None:
    agent(client, "sell one thousand")
    spans = [s for s in recorder.spans() if s.name == "lib.generate"]
    recorded = [orjson.loads(str((s.attributes or {})[sc.INPUT])) for s in spans]
    assert recorded == [{"prompt": "sell one thousand", "stream": True}, {"prompt": "sell one thousand"}]


def test_a_stream_object_is_recorded_as_read_and_replayed_with_its_interface(
    recorder: Recorder, client: Client
) -> None:
    recorded = agent(client, "sell one thousand")
    assert recorded["words"] == ["sell", "one", "thousand"] and recorded["request_id"] == "req-1"
    stream_span = next(s for s in recorder.spans() if s.name == "lib.generate")
    attrs = dict(stream_span.attributes or {})
    assert attrs[sc.STREAM] is True and attrs[sc.STREAM_STATE] == "complete" and attrs[sc.STREAM_ITEMS] == 3
    assert attrs[sc.GEN_AI_RESPONSE_ID] == "3 tokens"
    trace = chronicle.load_trace(recorder.path, "latest")
    calls = Client.calls

    seen: dict[str, Any] = {}

    @chronicle.boundary(kind="agent", name="adapters.agent")
    def probe(client: Client, prompt: str) -> None:
        stream = client.generate(prompt, stream=True)
        seen["type"] = type(stream).__name__
        seen["items"] = list(stream)
        seen["plain"] = client.generate(prompt)

    with chronicle.replay(trace, on_missing="live") as run:
        probe(client, "sell one thousand")
    assert Client.calls == calls, "the stub answered: the client was not called"
    assert seen == {
        "type": "ReplayedStream",
        "items": [Token("sell"), Token("one"), Token("thousand")],
        "plain": ("sell one thousand"),
    }
    assert run.report.ok and not run.report.drift, run.report


def test_a_stream_that_fails_replays_its_items_then_its_error(recorder: Recorder, client: Client) -> None:
    @chronicle.boundary(kind="agent", name="adapters.failing")
    def failing(client: Client) -> list[str]:
        got = []
        try:
            for token in client.generate("a b c d", stream=True, fail_after=2):
                got.append(token.text)
        except ConnectionError as exc:
            got.append(f"error: {exc}")
        return got

    assert failing(client) == ["a", "b", "error: stream cut"]
    span = next(s for s in recorder.spans() if s.name == "lib.generate")
    assert (span.attributes or {})[sc.STREAM_STATE] == "error"
    trace = chronicle.load_trace(recorder.path, "latest")
    with chronicle.replay(trace) as run:
        assert run.rerun(client=client) == ["a", "b", "error: stream cut"]
    assert run.report.ok, run.report


def test_a_consumer_editing_read_items_in_place_never_changes_the_recording(recorder: Recorder, client: Client) -> None:
    @chronicle.boundary(kind="agent", name="adapters.editing")
    def editing(client: Client) -> list[str]:
        tokens: list[Token] = []
        for token in client.generate("sell one thousand", stream=True):
            for earlier in tokens:  # a framework editing chunks in place while it streams, as LlamaIndex does
                earlier.text += "!"
            tokens.append(token)
        return [t.text for t in tokens]

    assert editing(client) == ["sell!!", "one!", "thousand"]
    span = next(s for s in recorder.spans() if s.name == "lib.generate")
    items = orjson.loads(str((span.attributes or {})[sc.OUTPUT]))
    assert [item["data"]["text"] for item in items] == ["sell", "one", "thousand"], "recorded as read"
    assert (span.attributes or {})[sc.GEN_AI_RESPONSE_ID] == "3 tokens", "attributes from the live items"
    trace = chronicle.load_trace(recorder.path, "latest")
    calls = Client.calls
    with chronicle.replay(trace) as run:
        assert run.rerun(client=client) == ["sell!!", "one!", "thousand"]
    assert Client.calls == calls and run.report.ok and not run.report.drift, run.report


def test_an_abandoned_stream_keeps_what_was_read(recorder: Recorder, client: Client) -> None:
    stream = client.generate("a b c d", stream=True)
    assert next(stream) == Token("a")
    del stream
    gc.collect()
    closed = client.generate("a b c", stream=True)
    next(closed)
    closed.close()
    assert closed.closed, "close() reaches the real stream"
    states = [(s.attributes or {})[sc.STREAM_STATE] for s in recorder.spans() if s.name == "lib.generate"]
    assert states == ["abandoned", "abandoned"]


def test_an_async_stream_object(recorder: Recorder, client: Client) -> None:
    @chronicle.boundary(kind="agent", name="adapters.async_agent")
    async def async_agent(client: Client, prompt: str) -> list[str]:
        stream = await client.agenerate(prompt, stream=True)
        return [t.text async for t in stream]

    assert asyncio.run(async_agent(client, "x y")) == ["x", "y"]
    trace = chronicle.load_trace(recorder.path, "latest")
    calls = Client.calls
    with chronicle.replay(trace) as run:
        assert run.rerun(client=client) == ["x", "y"]
    assert Client.calls == calls and run.report.ok


def test_a_custom_replay_builds_the_stand_in() -> None:
    built: list[StreamReplay] = []

    def replay(replayed: StreamReplay) -> Any:
        built.append(replayed)
        return "stand-in"

    adapter = StreamAdapter(is_stream=lambda v: False, replay=replay)
    replayed = StreamReplay([1, 2], None, "complete", False, ("p",), {"stream": True})
    assert adapter.stand_in(replayed) == "stand-in" and built == [replayed]
    default = StreamAdapter(is_stream=lambda v: False)
    assert isinstance(default.stand_in(replayed), ReplayedStream)
    assert isinstance(default.stand_in(StreamReplay([], None, None, True, (), {})), AsyncReplayedStream)


def test_the_recorder_reports_once() -> None:
    ends: list[tuple[list[Any], str]] = []
    recorder = StreamRecorder(lambda items, state, exc: ends.append((list(items), state)))
    recorder.item(1)
    recorder.end("complete")
    recorder.item(2)
    recorder.end("abandoned")
    assert ends == [([1], "complete")]


def test_replayed_streams_behave_like_sdk_streams() -> None:
    stream = ReplayedStream([1, 2, 3], ValueError("cut"))
    with stream as s:
        assert next(s) == 1
    assert list(stream) == [], "closed: nothing more"
    failing = ReplayedStream([1], ValueError("cut"))
    with pytest.raises(ValueError, match="cut"):
        list(failing)

    async def read() -> list[int]:
        out = []
        async with AsyncReplayedStream([4, 5]) as a:
            async for x in a:
                out.append(x)
        return out

    assert asyncio.run(read()) == [4, 5]


def test_a_failing_predicate_keeps_the_value(recorder: Recorder) -> None:
    def boom(value: Any) -> bool:
        raise RuntimeError("cannot judge")

    policy = Arguments(skip=boom)
    assert policy.select({"a": 1}) == {"a": 1}
