"""A stub answers what the recorded call answered, as it was: errors with their recorded attributes, streams with
the items as they were yielded, a cancelled call cancelled again; and the report says when it cannot."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pydantic
import pytest

import chronicle_otel as chronicle
from chronicle_otel.errors import ReplayDivergence, ReplayError
from chronicle_otel.model import format_key
from tests.conftest import Recorder
from tests.unit.agents import record

# ------------------------------------------------------------------ errors rebuilt as raised


class QuotaError(Exception):
    """An SDK-style error: a keyword with a default, the message formatted from the argument."""

    def __init__(self, model: str, status_code: int = 500) -> None:
        super().__init__(f"quota exceeded for {model!r}")
        self.model, self.status_code = model, status_code


@chronicle.boundary(kind="llm", name="fid.plan")
def plan(request: str) -> str:
    raise QuotaError("gpt-x", status_code=429)


@chronicle.boundary(kind="agent", name="fid.agent")
def agent(request: str) -> list[Any]:
    try:
        plan(request)
    except QuotaError as e:
        return [e.status_code, str(e)]
    return []


def test_a_stubbed_error_keeps_its_recorded_attributes_and_message(recorder: Recorder) -> None:
    trace = record(recorder, agent, "sell")
    with chronicle.replay(trace) as run:
        assert run.rerun() == [429, "quota exceeded for 'gpt-x'"]  # not the default 500, not formatted twice
    assert run.report.ok and not run.report.changes, run.report


# ------------------------------------------------------------------ streams: the items as they were yielded


@chronicle.boundary(kind="llm", name="fid.partials")
def partials(words: list[str]) -> Iterator[dict[str, str]]:
    message = {"text": ""}  # one partial message, updated and yielded again
    for word in words:
        message["text"] += word
        yield message


@chronicle.boundary(kind="llm", name="fid.apartials")
async def apartials(words: list[str]) -> AsyncIterator[dict[str, str]]:
    message = {"text": ""}
    for word in words:
        message["text"] += word
        yield message


@chronicle.boundary(kind="agent", name="fid.reader")
def reader(words: list[str]) -> list[str]:
    seen = []
    for chunk in partials(words):
        seen.append(chunk["text"])
        chunk["read"] = "yes"  # the consumer marks what it read
    return seen


@chronicle.boundary(kind="agent", name="fid.areader")
async def areader(words: list[str]) -> list[str]:
    return [chunk["text"] async for chunk in apartials(words)]


@pytest.mark.parametrize("root", [reader, areader], ids=["sync", "async"])
def test_a_stream_records_each_item_as_it_was_yielded(recorder: Recorder, root: Any) -> None:
    trace = record(recorder, root, ["Sold ", "5 ", "shares"])
    assert [item["text"] for item in trace.boundaries[1].output] == ["Sold ", "Sold 5 ", "Sold 5 shares"]
    assert "read" not in trace.boundaries[1].output[0]  # marked by the consumer after it was yielded
    expected = ["Sold ", "Sold 5 ", "Sold 5 shares"]
    with chronicle.replay(trace) as run:  # the stream stubbed
        assert run.rerun() == expected
    assert run.report.ok and not run.report.changes, run.report
    name = trace.boundaries[1].name
    with chronicle.replay(trace, stub=(), live={name}) as run:  # the stream live: compared item by item as yielded
        assert run.rerun() == expected
    assert run.report.ok and not run.report.changes, run.report


# ------------------------------------------------------------------ a call its caller cancelled


@chronicle.boundary(kind="llm", name="fid.slow")
async def slow(prompt: str) -> str:
    await asyncio.sleep(5)
    return "late"


TIMEOUT = {"seconds": 0.05}


@chronicle.boundary(kind="agent", name="fid.timed")
async def timed(prompt: str) -> str:
    try:
        return await asyncio.wait_for(slow(prompt), timeout=TIMEOUT["seconds"])
    except asyncio.TimeoutError:
        return "fallback"


def test_a_call_cancelled_by_a_timeout_is_cancelled_again_in_the_replay(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = record(recorder, timed, "hi")
    assert trace.find("fid.slow")[0].failed
    with chronicle.replay(trace) as run:
        assert run.rerun() == "fallback"  # the caller's timeout fires on the stub, as it fired on the call
    assert run.report.ok and not run.report.divergences and not run.report.drift, run.report

    monkeypatch.setitem(TIMEOUT, "seconds", 30)  # the code no longer times out first
    with pytest.raises(ReplayDivergence), chronicle.replay(trace) as run:
        run.rerun()
    assert [f.kind for f in run.report.divergences] == ["not-cancelled"], run.report
    assert "cancelled by its caller" in run.report.divergences[0].message


@chronicle.boundary(kind="tool", name="fid.interrupted")
def interrupted() -> None:
    raise KeyboardInterrupt


@chronicle.boundary(kind="agent", name="fid.stopper")
def stopper() -> str:
    try:
        interrupted()
    except BaseException as e:  # what the stub raises instead
        return type(e).__name__
    return "went on"


def test_a_base_exception_is_never_rebuilt_and_the_report_does_not_suggest_allow(recorder: Recorder) -> None:
    trace = record(recorder, stopper)
    with chronicle.replay(trace, stub={"kind:tool"}) as run:
        assert run.rerun() == "ReplayedError"
    (finding,) = run.report.divergences
    assert finding.kind == "unresolved" and "builtins.KeyboardInterrupt is never rebuilt" in finding.message
    assert "allow=" not in finding.message and "pass add" not in finding.message


# ------------------------------------------------------------------ a stub that cannot answer


@dataclasses.dataclass
class Order:
    symbol: str


@chronicle.boundary(kind="llm", name="fid.order")
def order(request: str) -> Order:
    return Order("MSFT")


@chronicle.boundary(kind="agent", name="fid.careful")
def careful(request: str) -> str:
    try:
        return order(request).symbol
    except Exception:  # the agent's usual fallback when the model call fails
        return "no order"


def test_a_stub_that_cannot_answer_is_a_divergence_even_when_the_code_catches_it(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = record(recorder, careful, "sell")
    fields = dict(Order.__dataclass_fields__)
    added = dataclasses.field()
    added.name, added.type, added._field_type = "qty", int, dataclasses._FIELD  # type: ignore[attr-defined]
    monkeypatch.setattr(Order, "__dataclass_fields__", {**fields, "qty": added})  # a required field added since
    with chronicle.replay(trace) as run:
        assert run.rerun() == "no order"
    assert not run.report.ok
    assert [f.kind for f in run.report.divergences] == ["undecodable"], run.report
    assert "no value for the field 'qty'" in run.report.divergences[0].message


# ------------------------------------------------------------------ names that look like syntax


@chronicle.boundary(kind="tool", name="fid.search[v2]")
def search(q: str) -> list[str]:
    return ["doc-1"]


@chronicle.boundary(kind="llm", name="fid.a->b")
def rerank(docs: list[str]) -> list[str]:
    return sorted(docs)


@chronicle.boundary(kind="llm", name="fid.tokens")
def tokens(prompt: str) -> Iterator[str]:
    yield from ["Sold", " 5"]


@chronicle.boundary(kind="agent", name="fid.pipeline")
def pipeline(q: str) -> Any:
    try:
        return [*search(q), *rerank(["b", "a"]), "".join(tokens(q))]
    except QuotaError as e:
        return f"quota: {e.status_code}"


def test_exact_names_with_glob_or_key_characters_are_selected_and_overridden(recorder: Recorder) -> None:
    trace = record(recorder, pipeline, "q")
    with chronicle.replay(trace, stub={"fid.search[v2]", "kind:llm"}) as run:  # an exact name, never a glob
        assert run.rerun() == ["doc-1", "a", "b", "Sold 5"]
    assert run.report.stubbed and all(k[-1][0] != "fid.pipeline" for k in run.report.stubbed)
    key = format_key(trace.find("fid.a->b")[0].call_key)
    for override in ({key: ["z"]}, {"fid.a->b": ["z"]}, {"fid.a->b[0]": ["z"]}):
        with chronicle.replay(trace, override=override) as run:
            assert run.rerun() == ["doc-1", "z", "Sold 5"], override
    with chronicle.replay(trace, override={"fid.tokens": QuotaError("m", 429)}) as run:  # a stream that raises
        assert run.rerun() == "quota: 429"
    with chronicle.replay(trace, override={"fid.tokens": TimeoutError}) as run, pytest.raises(TimeoutError):
        run.rerun()  # a class: built bare, raised


# ------------------------------------------------------------------ roots


@chronicle.boundary(kind="llm", name="fid.upper")
def upper(x: str) -> str:
    return x.upper()


@chronicle.boundary(kind="agent", name="fid.star")
def star(query: str, *tools: str, limit: int = 3) -> list[str]:
    return [upper(query), *tools][:limit]


class Bot:
    @chronicle.boundary(kind="agent", name="fid.Bot.create")
    @classmethod
    def create(cls, x: str) -> str:
        return cls.__name__ + upper(x)

    @classmethod
    @chronicle.boundary(kind="agent", name="fid.Bot.make")
    def make(cls, x: str) -> str:
        return cls.__name__ + upper(x)

    @chronicle.boundary(kind="agent", name="fid.Bot.static")
    @staticmethod
    def static(x: str) -> str:
        return upper(x)

    @chronicle.boundary(kind="agent", name="fid.Bot.run")
    def run(self, x: str) -> str:
        return upper(x)


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda: star("q", "search", "calc", limit=2), ["Q", "search"]),
        (lambda: Bot.create("c"), "BotC"),
        (lambda: Bot.make("m"), "BotM"),
        (lambda: Bot.static("s"), "S"),
    ],
    ids=["star-args", "boundary-over-classmethod", "classmethod-over-boundary", "staticmethod"],
)
def test_rerun_calls_roots_with_star_args_and_class_level_methods(recorder: Recorder, call: Any, expected: Any) -> None:
    trace = record(recorder, call)
    with chronicle.replay(trace) as run:
        assert run.rerun() == expected
    assert run.report.ok, run.report


def test_a_method_root_asks_for_the_instance(recorder: Recorder) -> None:
    trace = record(recorder, Bot().run, "r")
    refused = r"a method of Bot: pass the object to call it on, rerun\(instance="
    with pytest.raises(ReplayError, match=refused), chronicle.replay(trace) as run:
        run.rerun()
    with chronicle.replay(trace) as run:
        assert run.rerun(instance=Bot()) == "R"
    assert run.report.ok, run.report


@chronicle.boundary(kind="tool", name="fid.frames")
def frames(count: int) -> Iterator[str]:
    for i in range(count):
        yield str(i) * 300  # audio frames, file chunks


def test_a_long_stream_keeps_a_bounded_part_and_says_so(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from chronicle_otel.codec import UnresolvedObject
    from chronicle_otel.record import _payloads

    monkeypatch.setattr(_payloads, "MAX_STREAM_BYTES", 1_000)
    with caplog.at_level("WARNING", logger="chronicle_otel"):
        assert len(list(frames(8))) == 8  # the consumer gets every item
    recorder.config.force_flush()
    items = chronicle.load_trace(recorder.store.path, "latest").boundaries[0].output
    assert items[:3] == ["0" * 300, "1" * 300, "2" * 300] and len(items) == 8
    assert all(isinstance(i, UnresolvedObject) and i.tag == "unencodable" for i in items[3:])
    assert any("more than the" in r.getMessage() for r in caplog.records)
    trace = chronicle.load_trace(recorder.store.path, "latest")
    with chronicle.replay(trace, stub={"fid.frames"}) as run:  # the stream is the root here: call it in the replay
        assert len(list(frames(8))) == 8
    (finding,) = run.report.divergences
    assert finding.kind == "unresolved" and "stream item was never recorded" in finding.message
    assert "allow=" not in finding.message


@chronicle.boundary(kind="llm", name="fid.slow_stream")
async def slow_stream(n: int) -> AsyncIterator[str]:
    for i in range(n):
        yield f"tok{i}"
        await asyncio.sleep(0.02)


@chronicle.boundary(kind="agent", name="fid.timed_reader")
async def timed_reader(n: int) -> str:
    got: list[str] = []

    async def consume() -> None:
        async for token in slow_stream(n):
            got.append(token)

    try:
        await asyncio.wait_for(consume(), timeout=TIMEOUT["seconds"])
    except asyncio.TimeoutError:
        return f"timed out after {len(got)} tokens"
    return "whole answer"


def test_a_stream_cancelled_by_a_timeout_yields_its_items_then_is_cancelled_again(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = record(recorder, timed_reader, 100)
    recorded = trace.root.output if trace.root is not None else None
    assert isinstance(recorded, str) and recorded.startswith("timed out after")
    with chronicle.replay(trace) as run:
        assert run.rerun() == recorded  # the recorded tokens, then the caller's timeout, as it fired
    assert run.report.ok and not run.report.drift, run.report

    monkeypatch.setitem(TIMEOUT, "seconds", 30)
    with pytest.raises(ReplayDivergence), chronicle.replay(trace) as run:
        run.rerun()
    assert [f.kind for f in run.report.divergences] == ["not-cancelled"], run.report


class _Order(pydantic.BaseModel):
    symbol: str
    quantity: int

    @pydantic.field_validator("quantity")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("must be positive")
        return value


@chronicle.boundary(kind="llm", name="fidelity.extract")
def _extract(answer: dict[str, Any]) -> _Order:
    return _Order.model_validate(answer)  # structured output: the model's answer may not fit the schema


@chronicle.boundary(kind="agent", name="fidelity.extracting")
def _extracting(answer: dict[str, Any]) -> str:
    try:
        return f"order {_extract(answer).quantity}"
    except pydantic.ValidationError as exc:  # the app's fallback when the model's answer does not fit
        return f"invalid: {[(e['type'], e['loc']) for e in exc.errors()]}"


@pytest.mark.parametrize(
    "answer",
    [{"symbol": "MSFT", "quantity": "many"}, {"symbol": "MSFT"}, {"symbol": "MSFT", "quantity": -1}],
    ids=["int_parsing", "missing", "value_error"],
)
def test_a_schema_failure_replays_as_the_validation_error_it_was(recorder: Recorder, answer: dict[str, Any]) -> None:
    recorded = _extracting(answer)
    assert recorded.startswith("invalid: ")
    trace = chronicle.load_trace(recorder.path, "latest")
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        assert run.rerun() == recorded, "the except clause for pydantic.ValidationError ran again"
    assert run.report.ok and not run.report.drift, run.report
