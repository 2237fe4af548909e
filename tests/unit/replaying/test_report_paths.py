"""The paths of a drift or diff line name the values' own fields and items, never the codec's tagged layers."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum

import pydantic

from chronicle_otel.codec import encode
from chronicle_otel.replaying import diff_lines


class Function(pydantic.BaseModel):
    name: str
    arguments: str


class ToolCall(pydantic.BaseModel):
    index: int
    function: Function
    extra: object = None  # a model here keeps its tag: its class is not the annotation's


class Delta(pydantic.BaseModel):
    content: str | None = None
    tool_calls: list[ToolCall] = []


@dataclasses.dataclass
class Choice:
    index: int
    delta: Delta
    spans: tuple[int, ...] = ()


@dataclasses.dataclass
class Chunk:
    id: str
    choices: list[Choice]


class Side(enum.Enum):
    BUY = "buy"
    SELL = "sell"


@dataclasses.dataclass
class Other:
    id: str
    choices: list[Choice]


def chunks(arguments: str, extra: str = "a", span: int = 1) -> tuple[Chunk, ...]:
    """Chunks in a tuple: a list of chunks would be compared as the message it carries (``chronicle.assemble``)."""
    call = ToolCall(
        index=0, function=Function(name="place_order", arguments=arguments), extra=Function(name=extra, arguments="")
    )
    return (
        Chunk("c0", [Choice(0, Delta(content="hi"))]),
        Chunk("c1", [Choice(0, Delta(tool_calls=[call]), spans=(0, span))]),
    )


def lines(a: object, b: object) -> list[str]:
    return diff_lines(encode(a).decode(), encode(b).decode())


def test_paths_walk_through_dataclasses_models_and_tuples_in_lists() -> None:
    assert lines(chunks('{"quantity": 1000}'), chunks('{"quantity": 10}')) == [
        "$[1].choices[0].delta.tool_calls[0].function.arguments: "
        """recorded '{"quantity": 1000}' != now '{"quantity": 10}'"""
    ]
    assert lines(chunks("{}", extra="a"), chunks("{}", extra="b")) == [
        "$[1].choices[0].delta.tool_calls[0].extra.name: recorded 'a' != now 'b'"
    ]
    assert lines(chunks("{}", span=1), chunks("{}", span=2)) == ["$[1].choices[0].spans[1]: recorded 1 != now 2"]


def test_tagged_scalars_are_shown_as_their_values_under_their_own_path() -> None:
    assert lines({"amount": decimal.Decimal("49.99")}, {"amount": decimal.Decimal("500")}) == [
        "$.amount: recorded '49.99' != now '500'"
    ]
    day = datetime.date(2026, 1, 2)
    assert lines({"on": day}, {"on": day + datetime.timedelta(days=1)}) == [
        "$.on: recorded '2026-01-02' != now '2026-01-03'"
    ]
    assert lines({"side": Side.BUY}, {"side": Side.SELL}) == ["$.side: recorded 'Side.BUY' != now 'Side.SELL'"]


def test_a_changed_class_or_kind_is_said_at_the_value_itself() -> None:
    changed = lines({"chunk": Chunk("c", [])}, {"chunk": Other("d", [])})
    assert changed == [
        f"$.chunk: recorded '{__name__}.Chunk' != now '{__name__}.Other'",
        "$.chunk.id: recorded 'c' != now 'd'",
    ]
    assert lines({"x": (1, 2)}, {"x": [1, 2]}) == ['$.x: recorded {"$type":"tuple","items":[1,2]} != now [1,2]']
    assert lines({"x": {1: "a"}}, {"x": {1: "b"}}) == ["$.x[1]: recorded 'a' != now 'b'"]
    assert lines(ValueError("a", 1), ValueError("a", 2)) == [
        "$.args[1]: recorded 1 != now 2",
        "$.message: recorded \"('a', 1)\" != now \"('a', 2)\"",
    ]
