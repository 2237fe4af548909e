"""An agent with typed values, a stream and a failure path, and helpers to run the ``chronicle`` command, for the
``test_cli_*`` tests."""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import io
import sys
from collections.abc import Iterator
from decimal import Decimal

import pydantic

import chronicle_otel as chronicle
from chronicle_otel.cli import main
from tests.conftest import Recorder


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


def record(recorder: Recorder, question: str, *, amount: str = "49.99", refunds: int = 1, **session: str) -> str:
    """One run of the agent, in a session with ``session``; the trace id (a failure is recorded, not raised)."""
    with chronicle.session(**session), contextlib.suppress(RefundError):
        support(question, amount=amount, refunds=refunds)
    recorder.config.force_flush()
    return recorder.store.list_traces(limit=1)[0].trace_id


class TTY(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def run(*args: str, out: io.StringIO | None = None) -> tuple[int, str, str]:
    """``chronicle ARGS``: the exit status, what it wrote, and what it said on stderr."""
    out = out if out is not None else io.StringIO()
    err = io.StringIO()
    old = sys.stderr
    sys.stderr = err
    try:
        code = main(list(args), out=out)
    finally:
        sys.stderr = old
    return code, out.getvalue(), err.getvalue()
