"""A small stock-trading agent whose every boundary is recorded by chronicle_otel.

The model is a **simulated LLM** (:class:`SimulatedLLM`): seeded randomness and a temperature stand in for a
hosted model's non-determinism, with no network and no weights (asked the same request again, it may answer
otherwise, as a hosted model does). Like the incident it is modelled on, it
sometimes reads "sell $1,000 of MSFT" as "sell 1,000 shares of MSFT".

Boundaries::

    run_agent (agent)
    ├── plan (llm)                 request -> Order
    ├── get_quote (tool)           symbol -> Quote
    ├── place_order (tool, async)  Order, Quote -> Receipt
    │   └── check_order (guardrail)
    └── finalize (llm)             Receipt -> message

The guardrail as shipped (``v1``) only checks that the quantity is positive. The fix (``v2``) also refuses
orders above a notional limit. ``STOCK_AGENT_GUARDRAIL=v1|v2`` picks one (default ``v2``), so the demo can
show a regression test failing before the fix and passing after it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import re
import threading
from decimal import ROUND_DOWN, Decimal
from enum import Enum
from typing import ClassVar

import chronicle_otel as chronicle

PRICES = {"MSFT": Decimal("190.42"), "AAPL": Decimal("231.10"), "NVDA": Decimal("142.87")}
NOTIONAL_LIMIT = Decimal("10000")


class Side(str, Enum):
    BUY = "buy"
    SELL = "sell"


@dataclasses.dataclass(frozen=True)
class Order:
    symbol: str
    side: Side
    quantity: int


@dataclasses.dataclass(frozen=True)
class Quote:
    symbol: str
    price: Decimal


@dataclasses.dataclass(frozen=True)
class Receipt:
    order: Order
    status: str  # "filled" or "blocked"
    value: Decimal
    reason: str | None = None


@dataclasses.dataclass(frozen=True)
class Result:
    status: str  # "filled" or "blocked"
    message: str
    receipt: Receipt


class SimulatedLLM:
    """A SIMULATED language model: seeded sampling, no network. Counts every call it answers.

    Each request's ``seed`` names a random generator, seeded once per process: the first answer to a request with a
    given seed is the same in every process (the demo's runs come out the same each time), and asked again in the
    same process the model draws its next answers from that generator, so the same request gets other answers, as a
    hosted model's do. Sampling a recorded call (``chronicle sample``) therefore gives a distribution, the same one
    in every run. :meth:`reset` starts every generator afresh.
    """

    calls = 0
    _generators: ClassVar[dict[tuple[str, int], random.Random]] = {}
    _lock = threading.Lock()

    def __init__(self, seed: int) -> None:
        self.seed = seed

    @classmethod
    def reset(cls) -> None:
        """Start every generator afresh: the next answer to each seed is its first again."""
        with cls._lock:
            cls._generators.clear()

    def _rng(self, purpose: str) -> random.Random:
        with SimulatedLLM._lock:
            key = (purpose, self.seed)
            rng = SimulatedLLM._generators.get(key)
            if rng is None:
                rng = SimulatedLLM._generators[key] = random.Random(self.seed)
            return rng

    def complete_plan(self, request: str, temperature: float) -> dict[str, object]:
        SimulatedLLM.calls += 1
        m = re.search(r"(buy|sell)\s+(\$?)([\d,]+)\s+(?:shares\s+)?(?:of\s+)?([A-Z]+)", request, re.IGNORECASE)
        if not m:
            raise ValueError(f"cannot plan {request!r}")
        side, dollars, amount, symbol = (
            m.group(1).lower(),
            m.group(2) == "$",
            int(m.group(3).replace(",", "")),
            m.group(4),
        )
        # The failure mode: now and then the model drops the "$" and reads an amount of money as shares.
        misread = dollars and self._rng("plan").random() < 0.05 + 0.25 * temperature
        if dollars and not misread:
            quantity = int((Decimal(amount) / PRICES[symbol]).to_integral_value(ROUND_DOWN))
        else:
            quantity = amount
        return {"symbol": symbol, "side": side, "quantity": quantity}

    def complete_summary(self, receipt: Receipt) -> str:
        SimulatedLLM.calls += 1
        o = receipt.order
        if receipt.status == "blocked":
            return f"I did not place the order to {o.side.value} {o.quantity} {o.symbol}: {receipt.reason}."
        verb = self._rng("summary").choice(["Done:", "Completed:", "Executed:"])
        return f"{verb} {o.side.value} {o.quantity} {o.symbol} for ${receipt.value}."


@chronicle.boundary(kind="llm", name="plan", provider="simulated")
def plan(request: str, *, model: str, temperature: float, seed: int) -> Order:
    data = SimulatedLLM(seed).complete_plan(request, temperature)
    return Order(str(data["symbol"]), Side(data["side"]), int(str(data["quantity"])))


@chronicle.boundary(kind="tool", name="get_quote")
def get_quote(symbol: str) -> Quote:
    return Quote(symbol, PRICES[symbol])


@chronicle.boundary(kind="guardrail", name="check_order")
def check_order(order: Order, quote: Quote) -> str | None:
    """Return why the order must not be placed, or None."""
    if order.quantity <= 0:
        return "the quantity must be positive"
    if os.environ.get("STOCK_AGENT_GUARDRAIL", "v2") == "v2":
        chronicle.changed("guardrail-v2")  # a deliberate change: a replay lists what it explains as intended
        notional = order.quantity * quote.price
        if notional > NOTIONAL_LIMIT:
            return f"${notional:,.2f} is above the ${NOTIONAL_LIMIT:,.0f} limit for one order"
    return None


@chronicle.boundary(kind="tool", name="place_order")
async def place_order(order: Order, quote: Quote) -> Receipt:
    problem = check_order(order, quote)
    if problem:
        return Receipt(order, "blocked", Decimal(0), problem)
    await asyncio.sleep(0)  # the broker call
    return Receipt(order, "filled", order.quantity * quote.price)


@chronicle.boundary(kind="llm", name="finalize", provider="simulated")
def finalize(receipt: Receipt, *, model: str, seed: int) -> str:
    return SimulatedLLM(seed + 1).complete_summary(receipt)


@chronicle.boundary(kind="agent", name="run_agent")
def run_agent(request: str, *, seed: int = 0, temperature: float = 0.7, model: str = "sim-llm-1") -> Result:
    order = plan(request, model=model, temperature=temperature, seed=seed)
    quote = get_quote(order.symbol)
    receipt = asyncio.run(place_order(order, quote))
    return Result(receipt.status, finalize(receipt, model=model, seed=seed), receipt)
