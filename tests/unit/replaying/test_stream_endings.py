"""A stream is recorded with exactly the items its consumer received, however it ended, and replays them."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

import chronicle_otel as chronicle
from tests.conftest import Recorder


@chronicle.boundary(kind="llm", name="endings.tokens")
def tokens(n: int, fail_at: int | None = None) -> Iterator[str]:
    for i in range(n):
        if i == fail_at:
            raise ConnectionError("stream cut")
        yield f"tok{i}"


@chronicle.boundary(kind="llm", name="endings.atokens")
async def atokens(n: int, fail_at: int | None = None) -> AsyncIterator[str]:
    for i in range(n):
        if i == fail_at:
            raise ConnectionError("stream cut")
        yield f"tok{i}"


def _break(n: int) -> list[str]:
    got = []
    for t in tokens(n):
        got.append(t)
        if t == "tok2":
            break
    return got


def _close(n: int) -> list[str]:
    stream = tokens(n)
    got = [next(stream), next(stream)]
    stream.close()
    return got


def _dropped(n: int) -> list[str]:
    stream = tokens(n)
    got = [next(stream)]
    del stream
    gc.collect()
    return got


def _consumer_raises(n: int) -> list[str]:
    got: list[str] = []
    try:
        for t in tokens(n):
            got.append(t)
            if t == "tok1":
                raise KeyError("consumer")
    except KeyError:
        got.append("consumer failed")
    return got


def _generator_raises(n: int) -> list[str]:
    got: list[str] = []
    try:
        for t in tokens(n, fail_at=3):
            got.append(t)
    except ConnectionError as exc:
        got.append(f"error: {exc}")
    return got


CASES: dict[str, tuple[Callable[[int], list[str]], list[str], str]] = {
    "break": (_break, ["tok0", "tok1", "tok2"], "abandoned"),
    "close": (_close, ["tok0", "tok1"], "abandoned"),
    "garbage-collected": (_dropped, ["tok0"], "abandoned"),
    "consumer raises": (_consumer_raises, ["tok0", "tok1"], "abandoned"),
    "generator raises": (_generator_raises, ["tok0", "tok1", "tok2"], "error"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_sync_stream_endings_record_what_the_consumer_received_and_replay_it(recorder: Recorder, case: str) -> None:
    consume, items, state = CASES[case]

    @chronicle.boundary(kind="agent", name="endings.agent")
    def agent(n: int) -> list[str]:
        return consume(n)

    recorded = agent(10)
    trace = chronicle.load_trace(recorder.path, "latest")
    stream = trace.find("endings.tokens")[0]
    assert (stream.output, stream.stream_state) == (items, state)
    with chronicle.replay(trace) as run:
        assert run.rerun() == recorded
    assert run.report.ok, run.report


async def _abreak(n: int) -> list[str]:
    got = []
    async for t in atokens(n):
        got.append(t)
        if t == "tok2":
            break
    return got


async def _aclose(n: int) -> list[str]:
    stream = atokens(n)
    got = [await anext(stream), await anext(stream)]
    await stream.aclose()
    return got


async def _aconsumer_raises(n: int) -> list[str]:
    got: list[str] = []
    try:
        async for t in atokens(n):
            got.append(t)
            if t == "tok1":
                raise KeyError("consumer")
    except KeyError:
        got.append("consumer failed")
    return got


async def _agenerator_raises(n: int) -> list[str]:
    got: list[str] = []
    try:
        async for t in atokens(n, fail_at=3):
            got.append(t)
    except ConnectionError as exc:
        got.append(f"error: {exc}")
    return got


ASYNC_CASES: dict[str, tuple[Callable[[int], Any], list[str], str]] = {
    "break": (_abreak, ["tok0", "tok1", "tok2"], "abandoned"),
    "aclose": (_aclose, ["tok0", "tok1"], "abandoned"),
    "consumer raises": (_aconsumer_raises, ["tok0", "tok1"], "abandoned"),
    "generator raises": (_agenerator_raises, ["tok0", "tok1", "tok2"], "error"),
}


@pytest.mark.parametrize("case", list(ASYNC_CASES))
def test_async_stream_endings_record_what_the_consumer_received_and_replay_it(recorder: Recorder, case: str) -> None:
    consume, items, state = ASYNC_CASES[case]

    @chronicle.boundary(kind="agent", name="endings.aagent")
    async def agent(n: int) -> list[str]:
        got: list[str] = await consume(n)
        return got

    recorded = asyncio.run(agent(10))
    trace = chronicle.load_trace(recorder.path, "latest")
    stream = trace.find("endings.atokens")[0]
    assert (stream.output, stream.stream_state) == (items, state)
    with chronicle.replay(trace) as run:
        assert run.rerun() == recorded
    assert run.report.ok, run.report
