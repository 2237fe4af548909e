"""The stream driver: forwarding of the (async) generator protocol, the step hook, and exactly one end report."""

from __future__ import annotations

import contextvars
import gc
from collections.abc import AsyncGenerator, Generator
from typing import Any

import pytest

from chronicle_otel._internal.streams import AsyncStreamDriver, StreamDriver, drive

STEP: contextvars.ContextVar[str] = contextvars.ContextVar("step", default="outside")


class Ends:
    """Records every ``on_done`` call, and what the inner stream saw of the step hook."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[Any], str, BaseException | None]] = []
        self.entered = 0
        self.exited = 0

    def __call__(self, items: list[Any], state: str, exc: BaseException | None) -> None:
        self.calls.append((list(items), state, exc))

    def enter(self) -> contextvars.Token[str]:
        self.entered += 1
        return STEP.set("inside")

    def exit(self, token: contextvars.Token[str]) -> None:
        self.exited += 1
        STEP.reset(token)

    @property
    def one(self) -> tuple[list[Any], str, BaseException | None]:
        assert len(self.calls) == 1, self.calls
        return self.calls[0]


def driven(gen: Generator[Any, Any, Any], ends: Ends) -> StreamDriver:
    driver = drive(gen, on_done=ends, enter=ends.enter, exit=ends.exit)
    assert isinstance(driver, StreamDriver)
    return driver


def adriven(agen: AsyncGenerator[Any, Any], ends: Ends) -> AsyncStreamDriver:
    driver = drive(agen, on_done=ends, enter=ends.enter, exit=ends.exit)
    assert isinstance(driver, AsyncStreamDriver)
    return driver


# ------------------------------------------------------------------ generators


def test_complete_stream_returns_its_value_and_reports_once() -> None:
    seen: list[str] = []

    def numbers() -> Generator[int, None, str]:
        for i in range(3):
            seen.append(STEP.get())
            yield i
        return "done"

    ends = Ends()
    stream = driven(numbers(), ends)
    assert next(stream) == 0
    assert STEP.get() == "outside"
    with pytest.raises(StopIteration) as stop:
        while True:
            next(stream)
    assert stop.value.value == "done"
    assert ends.one == ([0, 1, 2], "complete", None)
    assert seen == ["inside"] * 3 and ends.entered == ends.exited == 4
    stream.close()
    with pytest.raises(StopIteration):
        next(stream)
    assert len(ends.calls) == 1


def test_send_reaches_the_inner_stream() -> None:
    def echo() -> Generator[str, str, None]:
        got = yield "ready"
        while got != "stop":
            got = yield got.upper()

    ends = Ends()
    stream = driven(echo(), ends)
    assert next(stream) == "ready"
    assert stream.send("a") == "A"
    assert stream.send("b") == "B"
    with pytest.raises(StopIteration):
        stream.send("stop")
    assert ends.one == (["ready", "A", "B"], "complete", None)


def test_throw_handled_by_the_stream_goes_on() -> None:
    def resilient() -> Generator[str, None, None]:
        try:
            yield "first"
        except KeyError as exc:
            yield f"recovered from {exc.args[0]}"
        yield "last"

    ends = Ends()
    stream = driven(resilient(), ends)
    assert next(stream) == "first"
    assert stream.throw(KeyError("k")) == "recovered from k"
    assert list(stream) == ["last"]
    assert ends.one == (["first", "recovered from k", "last"], "complete", None)


def test_throw_not_handled_ends_the_stream_with_that_exception() -> None:
    def plain() -> Generator[int, None, None]:
        yield 1
        yield 2

    ends = Ends()
    stream = driven(plain(), ends)
    next(stream)
    boom = ValueError("from the consumer")
    with pytest.raises(ValueError) as info:
        stream.throw(boom)
    assert info.value is boom
    assert ends.one == ([1], "error", boom)


def test_error_midway_passes_through_unchanged() -> None:
    boom = RuntimeError("stream broke")

    def flaky() -> Generator[int, None, None]:
        yield 1
        raise boom

    ends = Ends()
    got = []
    with pytest.raises(RuntimeError) as info:
        for x in driven(flaky(), ends):
            got.append(x)
    assert info.value is boom and got == [1]
    assert ends.one == ([1], "error", boom)
    assert ends.entered == ends.exited


def test_close_runs_the_streams_cleanup_inside_the_hook() -> None:
    cleanup: list[str] = []

    def guarded() -> Generator[int, None, None]:
        try:
            yield from range(10)
        finally:
            cleanup.append(STEP.get())

    ends = Ends()
    stream = driven(guarded(), ends)
    assert [next(stream), next(stream)] == [0, 1]
    stream.close()
    assert cleanup == ["inside"]
    assert ends.one == ([0, 1], "abandoned", None)
    stream.close()
    assert len(ends.calls) == 1


def test_a_failing_cleanup_is_the_streams_error() -> None:
    boom = OSError("cannot release")

    def leaky() -> Generator[int, None, None]:
        try:
            yield 1
        finally:
            raise boom

    ends = Ends()
    stream = driven(leaky(), ends)
    next(stream)
    with pytest.raises(OSError) as info:
        stream.close()
    assert info.value is boom
    assert ends.one == ([1], "error", boom)


def test_break_abandons_with_the_items_yielded_so_far() -> None:
    cleanup: list[str] = []

    def numbers() -> Generator[int, None, None]:
        try:
            yield from range(100)
        finally:
            cleanup.append(STEP.get())

    ends = Ends()
    for x in driven(numbers(), ends):
        if x == 2:
            break
    gc.collect()
    assert ends.one == ([0, 1, 2], "abandoned", None)
    assert cleanup == ["inside"]


def test_a_stream_never_iterated_is_abandoned_when_collected() -> None:
    started: list[bool] = []

    def idle() -> Generator[int, None, None]:
        started.append(True)
        yield 1

    ends = Ends()
    stream = driven(idle(), ends)
    del stream
    gc.collect()
    assert ends.one == ([], "abandoned", None)
    assert started == []


def test_yield_from_a_driver_forwards_close() -> None:
    def inner() -> Generator[int, None, None]:
        yield from range(5)

    ends = Ends()

    def outer() -> Generator[int, None, None]:
        yield from driven(inner(), ends)

    gen = outer()
    assert next(gen) == 0
    gen.close()
    assert ends.one == ([0], "abandoned", None)


# ------------------------------------------------------------------ async generators


async def test_async_complete_and_asend() -> None:
    seen: list[str] = []

    async def echo() -> AsyncGenerator[str, str]:
        got = yield "ready"
        while got != "stop":
            seen.append(STEP.get())
            got = yield got.upper()

    ends = Ends()
    stream = adriven(echo(), ends)
    assert await stream.__anext__() == "ready"
    assert await stream.asend("a") == "A"
    assert STEP.get() == "outside"
    with pytest.raises(StopAsyncIteration):
        await stream.asend("stop")
    assert ends.one == (["ready", "A"], "complete", None)
    assert seen == ["inside"] and ends.entered == ends.exited == 3


async def test_async_iteration_collects_items() -> None:
    async def numbers() -> AsyncGenerator[int, None]:
        for i in range(3):
            yield i

    ends = Ends()
    assert [x async for x in adriven(numbers(), ends)] == [0, 1, 2]
    assert ends.one == ([0, 1, 2], "complete", None)


async def test_async_athrow_handled_and_not_handled() -> None:
    async def resilient() -> AsyncGenerator[str, None]:
        try:
            yield "first"
        except KeyError:
            yield "recovered"
        yield "last"

    ends = Ends()
    stream = adriven(resilient(), ends)
    assert await stream.__anext__() == "first"
    assert await stream.athrow(KeyError("k")) == "recovered"
    boom = ValueError("from the consumer")
    with pytest.raises(ValueError) as info:
        await stream.athrow(boom)
    assert info.value is boom
    assert ends.one == (["first", "recovered"], "error", boom)


async def test_async_error_midway() -> None:
    async def flaky() -> AsyncGenerator[str, None]:
        yield "a"
        raise LookupError("nope")

    ends = Ends()
    with pytest.raises(LookupError, match="nope"):
        async for _ in adriven(flaky(), ends):
            pass
    items, state, exc = ends.one
    assert (items, state, type(exc)) == (["a"], "error", LookupError)


async def test_async_aclose_runs_cleanup_inside_the_hook() -> None:
    cleanup: list[str] = []

    async def guarded() -> AsyncGenerator[int, None]:
        try:
            for i in range(10):
                yield i
        finally:
            cleanup.append(STEP.get())

    ends = Ends()
    stream = adriven(guarded(), ends)
    assert await stream.__anext__() == 0
    await stream.aclose()
    assert cleanup == ["inside"]
    assert ends.one == ([0], "abandoned", None)
    await stream.aclose()
    assert len(ends.calls) == 1


async def test_async_break_and_never_iterated_are_abandoned_when_collected() -> None:
    async def numbers() -> AsyncGenerator[int, None]:
        for i in range(100):
            yield i

    broken = Ends()
    async for x in adriven(numbers(), broken):
        if x == 1:
            break
    idle = Ends()
    stream = adriven(numbers(), idle)
    del stream
    gc.collect()
    assert broken.one == ([0, 1], "abandoned", None)
    assert idle.one == ([], "abandoned", None)


def test_drive_needs_no_hook() -> None:
    ends = Ends()
    stream = drive(iter_gen(), on_done=ends)
    assert list(stream) == [1, 2]
    assert ends.one == ([1, 2], "complete", None)
    assert "StreamDriver of <generator object iter_gen" in repr(stream)


def iter_gen() -> Generator[int, None, None]:
    yield 1
    yield 2
