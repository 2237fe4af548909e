from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import gc
import inspect
import json
import sys
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import pytest
import wrapt
from opentelemetry import trace
from opentelemetry.trace import StatusCode

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel.codec import encode
from tests.conftest import Recorder


@dataclasses.dataclass
class Order:
    symbol: str
    qty: int


def sha(value: Any) -> str:
    import hashlib

    return "sha256:" + hashlib.sha256(encode(value)).hexdigest()


# ------------------------------------------------------------------ callable shapes


def test_plain_function_records_input_output_and_contract(recorder: Recorder) -> None:
    @chronicle.boundary(kind="llm", name="plan")
    def plan(request: str, *, model: str = "gpt-4.1-mini", temperature: float = 0.7) -> Order:
        return Order("MSFT", 1000)

    assert plan("Sell $1,000 of MSFT", temperature=0.0) == Order("MSFT", 1000)
    a = recorder.attrs("plan")
    assert a[sc.BOUNDARY_NAME] == "plan"
    assert a[sc.BOUNDARY_KIND] == "llm"
    assert a[sc.CALL_INDEX] == 0
    assert a[sc.CODEC] == "chronicle-json/1"
    assert json.loads(a[sc.INPUT]) == {"request": "Sell $1,000 of MSFT", "model": "gpt-4.1-mini", "temperature": 0.0}
    assert a[sc.INPUT_HASH] == sha({"request": "Sell $1,000 of MSFT", "model": "gpt-4.1-mini", "temperature": 0.0})
    assert json.loads(a[sc.OUTPUT]) == {
        "$type": "dataclass",
        "class": f"{__name__}.Order",
        "data": {"qty": 1000, "symbol": "MSFT"},
    }
    assert a[sc.OUTPUT_HASH] == sha(Order("MSFT", 1000))
    assert sc.INPUT_TRUNCATED not in a and sc.ERROR not in a
    # GenAI conventions on llm boundaries
    assert a[sc.GEN_AI_REQUEST_MODEL] == "gpt-4.1-mini"
    assert a[sc.GEN_AI_REQUEST_TEMPERATURE] == 0.0
    assert a[sc.GEN_AI_OPERATION_NAME] == "chat"


def test_bare_form_defaults_name_and_kind(recorder: Recorder) -> None:
    @chronicle.boundary
    def helper(x: int, y: int = 2) -> int:
        return x + y

    assert helper(1) == 3
    name = f"{__name__}.test_bare_form_defaults_name_and_kind.<locals>.helper"
    a = recorder.attrs(name)
    assert a[sc.BOUNDARY_KIND] == "custom"
    assert json.loads(a[sc.INPUT]) == {"x": 1, "y": 2}
    assert json.loads(a[sc.OUTPUT]) == 3


class Broker:
    fee = 1

    @chronicle.boundary(kind="tool", name="broker.buy")
    def buy(self, symbol: str, qty: int) -> str:
        return f"{symbol}:{qty}:{self.fee}"

    @chronicle.boundary(kind="tool", name="broker.cls_first")
    @classmethod
    def cls_first(cls, qty: int) -> int:
        return qty * cls.fee

    @classmethod
    @chronicle.boundary(kind="tool", name="broker.cls_second")
    def cls_second(cls, qty: int) -> int:
        return qty + cls.fee

    @chronicle.boundary(kind="tool", name="broker.static_first")
    @staticmethod
    def static_first(qty: int) -> int:
        return qty * 10

    @staticmethod
    @chronicle.boundary(kind="tool", name="broker.static_second")
    def static_second(qty: int) -> int:
        return qty * 100


@pytest.mark.parametrize(
    ("call", "name", "expected_input", "expected_output"),
    [
        (lambda b: b.buy("MSFT", qty=3), "broker.buy", {"symbol": "MSFT", "qty": 3}, "MSFT:3:1"),
        (lambda b: Broker.buy(b, "AAPL", 4), "broker.buy", {"symbol": "AAPL", "qty": 4}, "AAPL:4:1"),
        (lambda b: Broker.cls_first(5), "broker.cls_first", {"qty": 5}, 5),
        (lambda b: b.cls_first(6), "broker.cls_first", {"qty": 6}, 6),
        (lambda b: Broker.cls_second(7), "broker.cls_second", {"qty": 7}, 8),
        (lambda b: b.cls_second(qty=3), "broker.cls_second", {"qty": 3}, 4),
        (lambda b: Broker.static_first(8), "broker.static_first", {"qty": 8}, 80),
        (lambda b: b.static_first(9), "broker.static_first", {"qty": 9}, 90),
        (lambda b: Broker.static_second(1), "broker.static_second", {"qty": 1}, 100),
        (lambda b: b.static_second(2), "broker.static_second", {"qty": 2}, 200),
    ],
)
def test_methods_exclude_self_and_cls(
    recorder: Recorder, call: Any, name: str, expected_input: Any, expected_output: Any
) -> None:
    assert call(Broker()) == expected_output
    assert recorder.io(name, sc.INPUT) == expected_input
    assert recorder.io(name) == expected_output


class SubBroker(Broker):
    fee = 2

    @classmethod
    def cls_second(cls, qty: int) -> int:
        return super().cls_second(qty) * 10


def passthrough(func: Any) -> Any:
    @functools.wraps(func)
    def inner(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return inner


class Desk:
    rate = 2

    @classmethod
    @passthrough
    @chronicle.boundary(kind="tool", name="desk.quote")
    def quote(cls, qty: int) -> int:
        return qty * cls.rate


def inputs_of(recorder: Recorder, name: str) -> list[Any]:
    return [orjson.loads((s.attributes or {})[sc.INPUT]) for s in recorder.spans() if s.name == name]


def test_a_classmethod_around_a_boundary_binds_the_class_it_is_called_through(recorder: Recorder) -> None:
    # Python 3.13 calls what a classmethod wraps as a plain function with the class first: cls is still bound.
    assert SubBroker.cls_second(1) == 30  # super() binds SubBroker: (1 + 2) * 10
    assert SubBroker().cls_second(qty=2) == 40
    assert SubBroker.cls_first(3) == 6
    assert Desk.quote(4) == 8 and Desk().quote(qty=5) == 10  # a decorator between: found through __wrapped__
    assert inputs_of(recorder, "broker.cls_second") == [{"qty": 1}, {"qty": 2}]
    assert inputs_of(recorder, "broker.cls_first") == [{"qty": 3}]
    assert inputs_of(recorder, "desk.quote") == [{"qty": 4}, {"qty": 5}]


def test_a_plain_call_with_a_class_first_still_records_it(recorder: Recorder) -> None:
    @chronicle.boundary(name="describe")
    def describe(kind: type, size: int) -> str:
        return f"{kind.__name__}:{size}"

    assert describe(Broker, 2) == "Broker:2"
    assert Broker.__dict__["cls_second"].__func__(Broker, 5) == 6  # the classmethod's function itself, called plainly
    [recorded] = inputs_of(recorder, "describe")
    assert sorted(recorded) == ["kind", "size"] and recorded["size"] == 2
    assert inputs_of(recorder, "broker.cls_second") == [{"qty": 5}]


def test_a_replay_stubs_a_classmethod_around_a_boundary(recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    Broker.cls_second(7)
    recorder.config.force_flush()
    trace = chronicle.load_trace(recorder.store, "latest")
    assert trace.root is not None and trace.root.decode_input() == {"qty": 7}
    monkeypatch.setattr(Broker, "fee", 100)
    with chronicle.replay(trace, stub={"broker.cls_second"}) as run:
        assert Broker.cls_second(7) == 8  # the recorded answer, matched on the recorded input
    assert run.report.ok, run.report
    assert run.report.stubbed == [(("broker.cls_second", 0),)]


class Vendor:
    """A third-party class with a classmethod and a staticmethod, instrumented in place."""

    rate = 3

    @classmethod
    def quote(cls, qty: int) -> int:
        return qty * cls.rate

    @staticmethod
    def fee(qty: int) -> int:
        return qty + 1


def test_instrumented_classmethods_and_staticmethods_record_no_cls(recorder: Recorder) -> None:
    chronicle.instrument(Vendor, "quote", name="vendor.quote")
    chronicle.instrument(Vendor, "fee", name="vendor.fee")
    try:
        assert Vendor.quote(2) == 6 and Vendor().quote(qty=3) == 9
        assert Vendor.fee(1) == 2 and Vendor().fee(qty=2) == 3
    finally:
        assert chronicle.uninstrument(Vendor, "quote") is True
        assert chronicle.uninstrument(Vendor, "fee") is True
    assert isinstance(Vendor.__dict__["quote"], classmethod) and isinstance(Vendor.__dict__["fee"], staticmethod)
    assert inputs_of(recorder, "vendor.quote") == [{"qty": 2}, {"qty": 3}]
    assert inputs_of(recorder, "vendor.fee") == [{"qty": 1}, {"qty": 2}]


def test_varargs_and_kwargs_are_bound_by_name(recorder: Recorder) -> None:
    @chronicle.boundary(name="va")
    def va(a: int, *rest: int, flag: bool = False, **extra: Any) -> int:
        return a + sum(rest)

    assert va(1, 2, 3, flag=True, note="x") == 6
    assert recorder.io("va", sc.INPUT) == {
        "a": 1,
        "rest": {"$type": "tuple", "items": [2, 3]},
        "flag": True,
        "extra": {"note": "x"},
    }


async def test_async_function(recorder: Recorder) -> None:
    @chronicle.boundary(kind="tool", name="place_order")
    async def place_order(order: Order) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"filled": order.qty}

    assert inspect.iscoroutinefunction(place_order)
    assert await place_order(Order("MSFT", 5)) == {"filled": 5}
    assert recorder.io("place_order") == {"filled": 5}
    assert recorder.io("place_order", sc.INPUT)["order"]["data"] == {"qty": 5, "symbol": "MSFT"}


def test_generator_complete(recorder: Recorder) -> None:
    @chronicle.boundary(kind="llm", name="stream")
    def stream(n: int):  # type: ignore[no-untyped-def]
        for i in range(n):
            yield f"tok{i}"
        return "done"

    assert inspect.isgeneratorfunction(stream)
    gen = stream(3)
    assert recorder.spans() == []  # nothing recorded until iteration ends
    assert list(gen) == ["tok0", "tok1", "tok2"]
    a = recorder.attrs("stream")
    assert a[sc.STREAM] is True
    assert a[sc.STREAM_STATE] == "complete"
    assert a[sc.STREAM_ITEMS] == 3
    assert json.loads(a[sc.OUTPUT]) == ["tok0", "tok1", "tok2"]


def test_generator_send_and_return_value_pass_through(recorder: Recorder) -> None:
    @chronicle.boundary(name="echo")
    def echo():  # type: ignore[no-untyped-def]
        got = yield "ready"
        while got != "stop":
            got = yield got.upper()
        return "bye"

    gen = echo()
    assert next(gen) == "ready"
    assert gen.send("a") == "A"
    with pytest.raises(StopIteration) as stop:
        gen.send("stop")
    assert stop.value.value == "bye"
    assert recorder.io("echo") == ["ready", "A"]


def test_generator_abandoned_early(recorder: Recorder) -> None:
    @chronicle.boundary(name="numbers")
    def numbers():  # type: ignore[no-untyped-def]
        yield from range(100)

    gen = numbers()
    assert [next(gen), next(gen)] == [0, 1]
    gen.close()
    a = recorder.attrs("numbers")
    assert a[sc.STREAM_STATE] == "abandoned"
    assert json.loads(a[sc.OUTPUT]) == [0, 1]
    assert recorder.span("numbers").status.status_code is StatusCode.UNSET


def test_generator_left_with_break_is_abandoned_with_its_items(recorder: Recorder) -> None:
    cleanup_parent = []

    @chronicle.boundary(name="ticker")
    def ticker():  # type: ignore[no-untyped-def]
        try:
            yield from range(100)
        finally:
            cleanup_parent.append(trace.get_current_span().get_span_context().span_id)

    for x in ticker():
        if x == 2:
            break
    gc.collect()
    a = recorder.attrs("ticker")
    assert a[sc.STREAM_STATE] == "abandoned" and json.loads(a[sc.OUTPUT]) == [0, 1, 2]
    assert cleanup_parent == [recorder.span("ticker").context.span_id]  # its cleanup ran inside its own span


def test_generator_throw_reaches_the_function(recorder: Recorder) -> None:
    @chronicle.boundary(name="retrying")
    def retrying():  # type: ignore[no-untyped-def]
        try:
            yield "try"
        except TimeoutError:
            yield "retry"

    gen = retrying()
    assert next(gen) == "try"
    assert gen.throw(TimeoutError()) == "retry"
    with pytest.raises(StopIteration):
        next(gen)
    a = recorder.attrs("retrying")
    assert a[sc.STREAM_STATE] == "complete" and json.loads(a[sc.OUTPUT]) == ["try", "retry"]


def test_generator_never_iterated_is_recorded_as_abandoned(recorder: Recorder) -> None:
    @chronicle.boundary(name="idle")
    def idle():  # type: ignore[no-untyped-def]
        yield 1

    gen = idle()
    assert recorder.spans() == []
    del gen
    gc.collect()
    a = recorder.attrs("idle")
    assert a[sc.STREAM_STATE] == "abandoned" and json.loads(a[sc.OUTPUT]) == []


def test_generator_failing_midway(recorder: Recorder) -> None:
    boom = RuntimeError("stream broke")

    @chronicle.boundary(name="flaky")
    def flaky():  # type: ignore[no-untyped-def]
        yield 1
        yield 2
        raise boom

    got = []
    with pytest.raises(RuntimeError) as info:
        for x in flaky():
            got.append(x)
    assert info.value is boom and got == [1, 2]
    a = recorder.attrs("flaky")
    assert a[sc.STREAM_STATE] == "error"
    assert json.loads(a[sc.OUTPUT]) == [1, 2]
    assert json.loads(a[sc.ERROR])["type"] == "builtins.RuntimeError"
    assert recorder.span("flaky").status.status_code is StatusCode.ERROR


async def test_async_generator_complete_and_abandoned(recorder: Recorder) -> None:
    @chronicle.boundary(kind="llm", name="astream")
    async def astream(n: int):  # type: ignore[no-untyped-def]
        for i in range(n):
            await asyncio.sleep(0)
            yield i

    assert inspect.isasyncgenfunction(astream)
    assert [x async for x in astream(3)] == [0, 1, 2]
    agen = astream(10)
    assert await agen.__anext__() == 0
    await agen.aclose()
    spans = [s for s in recorder.spans() if s.name == "astream"]
    states = [(s.attributes or {})[sc.STREAM_STATE] for s in spans]
    outputs = [json.loads((s.attributes or {})[sc.OUTPUT]) for s in spans]
    assert states == ["complete", "abandoned"]
    assert outputs == [[0, 1, 2], [0]]


def test_context_managers_built_on_boundary_generators(recorder: Recorder) -> None:
    released = []

    @contextlib.contextmanager
    @chronicle.boundary(name="tx")
    def tx(name: str):  # type: ignore[no-untyped-def]
        try:
            yield f"tx-{name}"
        finally:
            released.append(name)

    with tx("a") as handle:
        assert handle == "tx-a"
    with pytest.raises(KeyError, match="b"), tx("b"):
        raise KeyError("b")
    assert released == ["a", "b"]
    spans = recorder.spans()
    assert [(s.attributes or {})[sc.STREAM_STATE] for s in spans] == ["complete", "error"]
    assert json.loads((spans[1].attributes or {})[sc.ERROR])["type"] == "builtins.KeyError"


async def test_async_context_managers_built_on_boundary_generators(recorder: Recorder) -> None:
    @contextlib.asynccontextmanager
    @chronicle.boundary(name="atx")
    async def atx():  # type: ignore[no-untyped-def]
        yield "handle"

    async with atx() as handle:
        assert handle == "handle"
    with pytest.raises(ValueError, match="inside"):
        async with atx():
            raise ValueError("inside")
    spans = [s for s in recorder.spans() if s.name == "atx"]
    assert [(s.attributes or {})[sc.STREAM_STATE] for s in spans] == ["complete", "error"]


async def test_async_generator_left_with_break_is_abandoned_with_its_items(recorder: Recorder) -> None:
    @chronicle.boundary(name="aticker")
    async def aticker():  # type: ignore[no-untyped-def]
        for i in range(100):
            yield i

    async for x in aticker():
        if x == 1:
            break
    gc.collect()
    a = recorder.attrs("aticker")
    assert a[sc.STREAM_STATE] == "abandoned" and json.loads(a[sc.OUTPUT]) == [0, 1]


async def test_async_generator_error(recorder: Recorder) -> None:
    @chronicle.boundary(name="abroken")
    async def abroken():  # type: ignore[no-untyped-def]
        yield "a"
        raise ValueError("nope")

    with pytest.raises(ValueError, match="nope"):
        async for _ in abroken():
            pass
    a = recorder.attrs("abroken")
    assert a[sc.STREAM_STATE] == "error" and json.loads(a[sc.OUTPUT]) == ["a"]


def test_signature_and_metadata_preserved() -> None:
    def documented(a: int, b: str = "x") -> str:
        """Docstring."""
        return b * a

    wrapped = chronicle.boundary(kind="tool")(documented)
    assert wrapped.__name__ == "documented"
    assert wrapped.__doc__ == "Docstring."
    assert wrapped.__wrapped__ is documented
    assert inspect.signature(wrapped) == inspect.signature(documented)
    assert list(inspect.signature(wrapped).parameters) == ["a", "b"]


def test_enabled_false_returns_the_function_itself() -> None:
    def f() -> int:
        return 1

    assert chronicle.boundary(enabled=False)(f) is f


def test_enabled_callable_bypasses_per_call(recorder: Recorder) -> None:
    switch = {"on": False}

    @chronicle.boundary(name="gated", enabled=lambda: switch["on"])
    def gated() -> int:
        return 1

    gated()
    assert recorder.spans() == []
    switch["on"] = True
    gated()
    assert len(recorder.spans()) == 1


def test_static_attributes_and_provider(recorder: Recorder) -> None:
    @chronicle.boundary(kind="llm", name="ask", attributes={"team": "risk"}, provider="openai")
    def ask(prompt: str) -> dict[str, Any]:
        return {"id": "resp-1", "model": "gpt-4.1-2025", "usage": {"prompt_tokens": 12, "completion_tokens": 3}}

    ask("hi")
    a = recorder.attrs("ask")
    assert a["team"] == "risk"
    assert a[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert a[sc.GEN_AI_RESPONSE_MODEL] == "gpt-4.1-2025"
    assert a[sc.GEN_AI_RESPONSE_ID] == "resp-1"
    assert a[sc.GEN_AI_USAGE_INPUT_TOKENS] == 12
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 3


def test_bad_kind_lists_valid_values() -> None:
    with pytest.raises(chronicle.ConfigError) as info:
        chronicle.boundary(kind="llama")
    for kind in ("llm", "tool", "retrieval", "guardrail", "agent", "memory", "custom"):
        assert repr(kind) in str(info.value)


def test_bad_static_attribute_is_rejected() -> None:
    with pytest.raises(chronicle.ConfigError, match="attributes"):
        chronicle.boundary(attributes={"x": object()})  # type: ignore[dict-item]


def test_warns_when_stacked_on_contextmanager() -> None:
    @contextlib.contextmanager
    def cm():  # type: ignore[no-untyped-def]
        yield 1

    with pytest.warns(chronicle.ChronicleWarning, match="below @contextmanager"):
        chronicle.boundary(cm)


# ------------------------------------------------------------------ errors


def test_exception_passes_through_unchanged_and_is_recorded(recorder: Recorder) -> None:
    original = ValueError("bad qty", 1000)

    @chronicle.boundary(kind="tool", name="place")
    def place() -> None:
        raise original

    with pytest.raises(ValueError) as info:
        place()
    assert info.value is original
    frames = traceback.extract_tb(info.value.__traceback__)
    assert frames[-1].name == "place" and "raise original" in (frames[-1].line or "")
    span = recorder.span("place")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "ValueError: ('bad qty', 1000)"
    assert [e.name for e in span.events] == ["exception"]
    err = json.loads((span.attributes or {})[sc.ERROR])
    assert err == {"type": "builtins.ValueError", "message": "('bad qty', 1000)", "args": ["bad qty", 1000]}
    assert (span.attributes or {})[sc.ERROR_HASH].startswith("sha256:")
    assert sc.OUTPUT not in (span.attributes or {})


async def test_async_exception_passes_through(recorder: Recorder) -> None:
    class Custom(Exception):
        pass

    exc = Custom("x")

    @chronicle.boundary(name="afail")
    async def afail() -> None:
        raise exc

    with pytest.raises(Custom) as info:
        await afail()
    assert info.value is exc
    assert json.loads(recorder.attrs("afail")[sc.ERROR])["type"].endswith("Custom")


def test_base_exceptions_are_recorded_and_reraised(recorder: Recorder) -> None:
    @chronicle.boundary(name="interrupted")
    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        interrupted()
    assert json.loads(recorder.attrs("interrupted")[sc.ERROR])["type"] == "builtins.KeyboardInterrupt"


# ------------------------------------------------------------------ nesting, call indexes, concurrency


def test_nesting_parents_and_call_indexes(recorder: Recorder) -> None:
    @chronicle.boundary(kind="llm", name="llm")
    def llm(x: int) -> int:
        return x

    @chronicle.boundary(kind="tool", name="tool")
    def tool(x: int) -> int:
        return llm(x) + llm(x + 1)

    @chronicle.boundary(kind="agent", name="agent")
    def agent() -> int:
        return tool(1) + llm(0) + tool(2)

    agent()
    spans = recorder.spans()
    by_id = {s.context.span_id: s for s in spans}
    root = recorder.span("agent")
    assert root.parent is None
    keys = []
    for s in spans:
        chain = []
        cur = s
        while cur is not None:
            a = cur.attributes or {}
            chain.append((a[sc.BOUNDARY_NAME], a[sc.CALL_INDEX]))
            cur = by_id.get(cur.parent.span_id) if cur.parent else None
        keys.append(tuple(reversed(chain)))
    assert sorted(keys) == sorted(
        [
            (("agent", 0),),
            (("agent", 0), ("tool", 0)),
            (("agent", 0), ("tool", 0), ("llm", 0)),
            (("agent", 0), ("tool", 0), ("llm", 1)),
            (("agent", 0), ("llm", 0)),
            (("agent", 0), ("tool", 1)),
            (("agent", 0), ("tool", 1), ("llm", 0)),
            (("agent", 0), ("tool", 1), ("llm", 1)),
        ]
    )
    assert len({s.context.trace_id for s in spans}) == 1


def test_boundaries_nest_under_a_service_span_and_index_per_trace(recorder: Recorder) -> None:
    tracer = recorder.provider.get_tracer("service")

    @chronicle.boundary(name="step")
    def step() -> None:
        pass

    with tracer.start_as_current_span("POST /orders") as request_span:
        step()
        step()
    with tracer.start_as_current_span("POST /orders"):
        step()
    steps = [s for s in recorder.spans() if s.name == "step"]
    assert [s.parent.span_id for s in steps[:2]] == [request_span.get_span_context().span_id] * 2  # type: ignore[union-attr]
    assert [(s.attributes or {})[sc.CALL_INDEX] for s in steps] == [0, 1, 0]


def test_top_level_calls_without_a_parent_each_start_a_trace(recorder: Recorder) -> None:
    @chronicle.boundary(name="solo")
    def solo() -> None:
        pass

    solo()
    solo()
    spans = recorder.spans()
    assert [(s.attributes or {})[sc.CALL_INDEX] for s in spans] == [0, 0]
    assert spans[0].context.trace_id != spans[1].context.trace_id


async def test_100_concurrent_asyncio_tasks_keep_parents_indexes_and_sessions(recorder: Recorder) -> None:
    @chronicle.boundary(kind="llm", name="think")
    async def think(i: int) -> int:
        await asyncio.sleep(0.001 * (i % 7))
        return i

    @chronicle.boundary(kind="agent", name="run")
    async def run(i: int) -> int:
        with chronicle.session(user_id=f"u-{i}"):
            a = await think(i)
            await asyncio.sleep(0)
            b = await think(i + 1000)
        return a + b

    results = await asyncio.gather(*(run(i) for i in range(100)))
    assert results == [2 * i + 1000 for i in range(100)]
    check_runs(recorder, 100)


def test_100_concurrent_threads_keep_parents_indexes_and_sessions(recorder: Recorder) -> None:
    @chronicle.boundary(kind="llm", name="think")
    def think(i: int) -> int:
        return i

    barrier = threading.Barrier(20)

    @chronicle.boundary(kind="agent", name="run")
    def run(i: int) -> int:
        with chronicle.session(user_id=f"u-{i}"):
            a = think(i)
            if i < 20:
                barrier.wait(timeout=10)
            b = think(i + 1000)
        return a + b

    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(run, range(100)))
    assert results == [2 * i + 1000 for i in range(100)]
    check_runs(recorder, 100)


def check_runs(recorder: Recorder, n: int) -> None:
    spans = recorder.spans()
    runs = {s.context.span_id: s for s in spans if s.name == "run"}
    assert len(runs) == n
    thinks = [s for s in spans if s.name == "think"]
    assert len(thinks) == 2 * n
    children: dict[int, list[Any]] = {}
    for s in thinks:
        assert s.parent is not None and s.parent.span_id in runs
        children.setdefault(s.parent.span_id, []).append(s)
    for run_id, kids in children.items():
        run_span = runs[run_id]
        i = json.loads((run_span.attributes or {})[sc.INPUT])["i"]
        kids.sort(key=lambda s: (s.attributes or {})[sc.CALL_INDEX])
        assert [(k.attributes or {})[sc.CALL_INDEX] for k in kids] == [0, 1]
        assert [json.loads((k.attributes or {})[sc.INPUT])["i"] for k in kids] == [i, i + 1000]
        assert {(k.attributes or {})[sc.SESSION_PREFIX + "user_id"] for k in kids} == {f"u-{i}"}
        assert kids[0].context.trace_id == run_span.context.trace_id


def test_threads_started_with_copied_context_nest_under_the_caller(recorder: Recorder) -> None:
    @chronicle.boundary(name="worker")
    def worker(i: int) -> int:
        return i

    @chronicle.boundary(name="fanout")
    def fanout() -> list[int]:
        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(contextvars.copy_context().run, worker, i) for i in range(8)]
            return [f.result() for f in futures]

    assert fanout() == list(range(8))
    parent = recorder.span("fanout").context.span_id
    workers = [s for s in recorder.spans() if s.name == "worker"]
    assert {s.parent.span_id for s in workers if s.parent} == {parent}
    assert sorted((s.attributes or {})[sc.CALL_INDEX] for s in workers) == list(range(8))


# ------------------------------------------------------------------ context-manager form and instrument()


def test_call_context_manager(recorder: Recorder) -> None:
    @chronicle.boundary(kind="agent", name="outer")
    def outer() -> str:
        with chronicle.call("crm.lookup", kind="tool", input={"customer": "c-1"}) as c:
            return c.set_output("gold")

    assert outer() == "gold"
    a = recorder.attrs("crm.lookup")
    assert json.loads(a[sc.INPUT]) == {"customer": "c-1"}
    assert json.loads(a[sc.OUTPUT]) == "gold"
    assert a[sc.BOUNDARY_KIND] == "tool" and a[sc.CALL_INDEX] == 0
    assert recorder.span("crm.lookup").parent.span_id == recorder.span("outer").context.span_id  # type: ignore[union-attr]


async def test_call_context_manager_async_and_error(recorder: Recorder) -> None:
    with pytest.raises(KeyError):
        async with chronicle.call("kv.get", kind="memory", input={"key": "k"}):
            raise KeyError("k")
    span = recorder.span("kv.get")
    assert span.status.status_code is StatusCode.ERROR
    assert json.loads((span.attributes or {})[sc.ERROR])["type"] == "builtins.KeyError"


class FakeClient:
    """Stands in for a third-party SDK class."""

    def create(self, model: str, messages: list[dict[str, str]]) -> dict[str, Any]:
        return {
            "model": model,
            "choices": [{"message": messages[-1]}],
            "usage": {"input_tokens": 7, "output_tokens": 2},
        }

    @staticmethod
    def ping() -> str:
        return "pong"


def test_instrument_and_uninstrument(recorder: Recorder) -> None:
    original = FakeClient.__dict__["create"]
    chronicle.instrument(FakeClient, "create", kind="llm", name="client.create")
    chronicle.instrument(FakeClient, "create", kind="llm", name="client.create")  # idempotent
    chronicle.instrument(sys.modules[__name__], "FakeClient.ping", kind="tool")
    try:
        out = FakeClient().create("m-1", [{"role": "user", "content": "hi"}])
        assert FakeClient.ping() == "pong"
    finally:
        assert chronicle.uninstrument(FakeClient, "create") is True
        assert chronicle.uninstrument(sys.modules[__name__], "FakeClient.ping") is True
    assert chronicle.uninstrument(FakeClient, "create") is False
    assert FakeClient.__dict__["create"] is original
    assert isinstance(FakeClient.__dict__["ping"], staticmethod)
    a = recorder.attrs("client.create")
    assert json.loads(a[sc.INPUT]) == {"model": "m-1", "messages": [{"role": "user", "content": "hi"}]}
    assert json.loads(a[sc.OUTPUT]) == out
    assert a[sc.GEN_AI_USAGE_INPUT_TOKENS] == 7
    assert recorder.attrs(f"{__name__}.FakeClient.ping")[sc.BOUNDARY_KIND] == "tool"
    FakeClient().create("m-2", [{"role": "user", "content": "again"}])
    assert len([s for s in recorder.spans() if s.name == "client.create"]) == 1


class FakeBase:
    """A third-party base class whose methods subclasses inherit."""

    @classmethod
    def build(cls, size: int) -> str:
        return f"{cls.__name__}({size})"

    def run(self, job: str) -> str:
        return f"ran {job}"


class FakeChild(FakeBase):
    pass


def test_instrument_classmethods_and_inherited_methods(recorder: Recorder) -> None:
    original_build = FakeBase.__dict__["build"]
    chronicle.instrument(FakeBase, "build", name="base.build")
    chronicle.instrument(FakeChild, "run", name="child.run")  # inherited: shadowed on the subclass only
    try:
        assert isinstance(FakeBase.__dict__["build"], wrapt.FunctionWrapper)
        assert FakeBase.__dict__["build"].__wrapped__ is original_build
        assert FakeChild.build(3) == "FakeChild(3)"
        assert FakeChild().run("a") == "ran a"
        assert FakeBase().run("b") == "ran b"  # the base class is untouched
        assert chronicle.uninstrument(FakeChild, "build") is False  # instrumented on the base, undone there
    finally:
        assert chronicle.uninstrument(FakeBase, "build") is True
        assert chronicle.uninstrument(FakeChild, "run") is True
    assert FakeBase.__dict__["build"] is original_build
    assert "run" not in FakeChild.__dict__
    assert json.loads(recorder.attrs("base.build")[sc.INPUT]) == {"size": 3}
    assert json.loads(recorder.attrs("child.run")[sc.INPUT]) == {"job": "a"}
    assert [s.name for s in recorder.spans()] == ["base.build", "child.run"]


def test_instrument_module_functions_and_instances(recorder: Recorder) -> None:
    import types

    module = types.ModuleType("thirdparty")
    exec("def lookup(sku):\n    return {'sku': sku}", module.__dict__)
    original = module.lookup
    client = FakeClient()
    chronicle.instrument(module, "lookup", kind="tool", name="tp.lookup")
    chronicle.instrument(client, "create", kind="llm", name="one.client")
    try:
        assert module.lookup("A-1") == {"sku": "A-1"}
        assert client.create("m", [{"role": "user", "content": "x"}])["model"] == "m"
        other = FakeClient()  # other instances are untouched
        assert other.create("m", [{"role": "user", "content": "y"}])["model"] == "m"
    finally:
        assert chronicle.uninstrument(module, "lookup") is True
        assert chronicle.uninstrument(client, "create") is True
    assert module.lookup is original and "create" not in vars(client)
    assert [s.name for s in recorder.spans()] == ["tp.lookup", "one.client"]


def test_instrument_leaves_decorated_functions_alone(recorder: Recorder) -> None:
    import types

    module = types.ModuleType("decorated")

    @chronicle.boundary(name="own")
    def own() -> int:
        return 1

    module.own = own  # type: ignore[attr-defined]
    assert chronicle.uninstrument(module, "own") is False  # @boundary is not undone by uninstrument
    assert module.own is own  # type: ignore[attr-defined]


def test_instrument_unknown_attribute_raises() -> None:
    with pytest.raises(AttributeError):
        chronicle.instrument(FakeClient, "missing", kind="tool")
    with pytest.raises(chronicle.ConfigError, match="attributes"):
        chronicle.instrument(FakeClient, "create", attributes={"bad": [1]})  # type: ignore[dict-item]
    assert not isinstance(FakeClient.__dict__["create"], wrapt.FunctionWrapper)


# ------------------------------------------------------------------ configuration read at call time


def test_boundary_defined_before_configure_obeys_later_configure(tmp_path: Any) -> None:
    @chronicle.boundary(name="early")
    def early() -> int:
        return 1

    from tests.conftest import make_recorder

    rec = make_recorder(tmp_path)
    early()
    assert [s.name for s in rec.spans()] == ["early"]


def test_unconfigured_boundaries_use_the_global_provider_without_store() -> None:
    @chronicle.boundary(name="lonely")
    def lonely() -> int:
        return 5

    assert lonely() == 5  # no configure(): spans go to the global provider; nothing is stored locally
    config = chronicle.get_config()
    assert config.enabled and config.store is None and config.exporter is None


def test_redaction_of_secret_arguments(recorder: Recorder) -> None:
    @chronicle.boundary(kind="llm", name="secret_call")
    def secret_call(prompt: str, api_key: str, headers: dict[str, str], max_tokens: int = 5) -> dict[str, str]:
        return {"access_token": "t0k", "text": "ok"}

    secret_call("hi", "sk-live-123", {"Authorization": "Bearer abc", "Accept": "json"})
    raw = recorder.attrs("secret_call")
    for value in ("sk-live-123", "Bearer abc", "t0k"):
        assert value not in raw[sc.INPUT] + raw[sc.OUTPUT]
    assert json.loads(raw[sc.INPUT]) == {
        "prompt": "hi",
        "api_key": "[REDACTED]",
        "headers": {"Authorization": "[REDACTED]", "Accept": "json"},
        "max_tokens": 5,
    }
    assert orjson.loads(raw[sc.OUTPUT]) == {"access_token": "[REDACTED]", "text": "ok"}


def test_openinference_attributes_on_request(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conftest import make_recorder

    rec = make_recorder(tmp_path, capture=chronicle.CaptureOptions(openinference=True))

    @chronicle.boundary(kind="retrieval", name="oi.search")
    def search(q: str) -> list[str]:
        return ["doc"]

    @chronicle.boundary(kind="tool", name="oi.fail")
    def fail() -> None:
        raise ValueError("no")

    search("x")
    with pytest.raises(ValueError):
        fail()
    a = rec.attrs("oi.search")
    assert a[sc.OPENINFERENCE_SPAN_KIND] == "RETRIEVER"
    assert a[sc.OPENINFERENCE_INPUT_VALUE] == a[sc.INPUT] and a[sc.OPENINFERENCE_INPUT_MIME_TYPE] == "application/json"
    assert a[sc.OPENINFERENCE_OUTPUT_VALUE] == a[sc.OUTPUT] == '["doc"]'
    assert rec.attrs("oi.fail")[sc.OPENINFERENCE_OUTPUT_VALUE] == rec.attrs("oi.fail")[sc.ERROR]
    monkeypatch.setenv("CHRONICLE_OPENINFERENCE", "true")
    rec2 = make_recorder(tmp_path / "env")
    search("y")
    assert rec2.attrs("oi.search")[sc.OPENINFERENCE_SPAN_KIND] == "RETRIEVER"
    rec3 = make_recorder(tmp_path / "off", capture=chronicle.CaptureOptions(openinference=False))
    search("z")
    assert sc.OPENINFERENCE_SPAN_KIND not in rec3.attrs("oi.search")


@chronicle.boundary(kind="tool", name="pickled.square")
def pickled_square(x: int) -> int:
    return x * x


class PickledTools:
    @chronicle.boundary(kind="tool", name="pickled.lookup")
    def lookup(self, key: str) -> str:
        return key.upper()

    @chronicle.boundary(kind="tool", name="pickled.venue")
    @classmethod
    def venue(cls, symbol: str) -> str:
        return cls.__name__ + symbol

    @chronicle.boundary(kind="tool", name="pickled.normalize")
    @staticmethod
    def normalize(symbol: str) -> str:
        return symbol.upper()

    def __init__(self, market: str = "XNAS") -> None:
        self.market = market


def test_a_boundary_pickles_and_copies_as_the_function_it_wraps() -> None:
    import copy
    import pickle

    assert pickle.loads(pickle.dumps(pickled_square)) is pickled_square  # by reference, as a function
    assert pickle.loads(pickle.dumps(PickledTools().lookup))("k") == "K"  # as a bound method
    assert pickle.loads(pickle.dumps(PickledTools.venue))("X") == "PickledToolsX"
    assert pickle.loads(pickle.dumps(PickledTools.normalize))("x") == "X"  # through the class
    assert pickle.loads(pickle.dumps(PickledTools.lookup))(PickledTools(), "k") == "K"
    settings = {"tools": [pickled_square], "temperature": 0.2}
    assert copy.deepcopy(settings)["tools"][0] is pickled_square and copy.copy(pickled_square) is pickled_square
    tools = PickledTools("XNAS")
    assert copy.copy(tools.lookup)("k") == "K"
    agent = {"callback": tools.lookup}
    copied = copy.deepcopy(agent)["callback"]  # as a bound method is: bound to a copy of its object
    assert copied("k") == "K" and copied.__self__ is not tools and copied.__self__.market == "XNAS"


@dataclasses.dataclass
class _FrameworkResponse:
    """The shape of pydantic-ai's and the Agents SDK's model responses: other field names than the providers'."""

    model_name: str
    provider_response_id: str
    finish_reason: str


def test_genai_attributes_are_read_from_framework_response_field_names(recorder: Recorder) -> None:
    @chronicle.boundary(kind="llm", name="framework.request")
    def request() -> _FrameworkResponse:
        return _FrameworkResponse("gpt-test-2", "chatcmpl-7", "tool_call")

    request()
    a = recorder.attrs("framework.request")
    assert a[sc.GEN_AI_RESPONSE_MODEL] == "gpt-test-2"
    assert a[sc.GEN_AI_RESPONSE_ID] == "chatcmpl-7"
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_call",)
