"""The small agents several test modules share, and the helpers that record them.

- ``record``: call any boundary (awaiting a coroutine), flush, and load the newest trace.
- The stock agent (``t.agent`` -> ``t.llm``, ``t.tool``): a model call counted in ``CALLS``, typed values.
- The refund agent (``cli.support`` -> ``cli.classify``, ``cli.search``, ``cli.refund``): a pydantic model, an enum,
  a dataclass with a ``Decimal``, a stream and a failure path; ``record_support`` records one run of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import inspect
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pydantic
import pytest

import chronicle_otel as chronicle
from tests.conftest import Recorder


def record(
    recorder: Recorder, fn: Any, *args: Any, raises: type[BaseException] | None = None, **kwargs: Any
) -> chronicle.Trace:
    """Call ``fn`` (awaiting a coroutine), flush, and load the newest trace from the recorder's store.

    ``raises``: the exception the call must raise (it is recorded); any other exception fails the test.
    """

    def call() -> None:
        result = fn(*args, **kwargs)
        if inspect.isawaitable(result):
            asyncio.run(_await(result))

    if raises is None:
        call()
    else:
        with pytest.raises(raises):
            call()
    recorder.config.force_flush()
    return chronicle.load_trace(recorder.store, "latest")


async def _await(awaitable: Any) -> Any:
    return await awaitable


# The stock agent.

CALLS = {"llm": 0}


@dataclasses.dataclass(frozen=True)
class Order:
    symbol: str
    qty: int


@chronicle.boundary(kind="llm", name="t.llm")
def llm(prompt: str) -> Order:
    CALLS["llm"] += 1
    return Order("MSFT", 1000 if "$" in prompt else len(prompt))


@chronicle.boundary(kind="tool", name="t.tool")
def tool(order: Order) -> str:
    return f"sold {order.qty} {order.symbol}"


@chronicle.boundary(kind="agent", name="t.agent")
def agent(prompt: str) -> str:
    return tool(llm(prompt))


# The refund agent.


class Intent(pydantic.BaseModel):
    category: str
    confidence: float


class Channel(enum.Enum):
    EMAIL = "email"
    CHAT = "chat"


@dataclasses.dataclass
class Refund:
    refunded: Decimal
    note: str
    channel: Channel = Channel.CHAT


class RefundError(Exception):
    pass


@chronicle.boundary(kind="llm", name="cli.classify")
def classify(text: str) -> Intent:
    return Intent(category="refund" if "refund" in text else "other", confidence=0.75)


@chronicle.boundary(kind="retrieval", name="cli.search")
def search(query: str) -> Iterator[str]:
    for i in range(2):
        yield f"doc-{i} about {query}"


@chronicle.boundary(kind="tool", name="cli.refund")
def refund(amount: Decimal) -> Refund:
    if amount > 100:
        raise RefundError(f"amount {amount} too large")
    return Refund(refunded=amount, note="ok")


@chronicle.boundary(kind="agent", name="cli.support")
def support(question: str, amount: str = "49.99", refunds: int = 1) -> list[Refund]:
    intent = classify(question)
    list(search(intent.category))
    return [refund(Decimal(amount)) for _ in range(refunds)]


def record_support(
    recorder: Recorder, question: str, *, amount: str = "49.99", refunds: int = 1, **session: str
) -> str:
    """One run of the refund agent, in a session with ``session``; the trace id (a failure is recorded, not raised)."""
    with chronicle.session(**session), contextlib.suppress(RefundError):
        support(question, amount=amount, refunds=refunds)
    recorder.config.force_flush()
    return recorder.store.list_traces(limit=1)[0].trace_id
