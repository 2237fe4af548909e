"""A small stock-trading agent whose every boundary is recorded by chronicle_otel.

The model is a **simulated LLM** (``SimulatedLLM``): seeded randomness and a temperature stand in
for a hosted model's non-determinism, with no network and no weights. Like the real incident it is
modelled on, it sometimes reads "sell $1,000 of MSFT" as "sell 1,000 shares of MSFT".

Boundaries: ``run_agent`` (agent) → ``plan`` (llm) → ``get_quote`` (tool) → ``check_order``
(guardrail) → ``place_order`` (tool, async) → ``finalize`` (llm).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import re
from decimal import ROUND_DOWN, Decimal
from enum import Enum

import chronicle_otel as chronicle

PRICES = {"MSFT": Decimal("190.42"), "AAPL": Decimal("231.10"), "NVDA": Decimal("142.87")}


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
    price: Decimal
    value: Decimal


@dataclasses.dataclass(frozen=True)
class Result:
    status: str  # "filled" or "blocked"
    message: str
    receipt: Receipt | None = None


class SimulatedLLM:
    """A SIMULATED language model: seeded sampling, no network. Counts its calls."""

    calls = 0

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def complete_plan(self, request: str, temperature: float) -> dict[str, object]:
        SimulatedLLM.calls += 1
        m = re.search(r"(buy|sell)\s+\$?([\d,]+)\s+(?:of\s+)?([A-Z]+)", request, re.IGNORECASE)
        if not m:
            raise ValueError(f"cannot plan {request!r}")
        side, amount, symbol = m.group(1).lower(), int(m.group(2).replace(",", "")), m.group(3)
        dollars = "$" in request
        # The failure mode: at higher temperature the model sometimes drops the "$" and reads an amount as shares.
        misread = dollars and self.rng.random() < 0.05 + 0.25 * temperature
        if dollars and not misread:
            qty = int((Decimal(amount) / PRICES[symbol]).to_integral_value(ROUND_DOWN))
            return {"symbol": symbol, "side": side, "quantity": qty, "reasoning": f"${amount} / price"}
        return {"symbol": symbol, "side": side, "quantity": amount, "reasoning": f"{amount} shares"}

    def complete_summary(self, receipt: Receipt) -> str:
        SimulatedLLM.calls += 1
        verbs = ["Done:", "Completed:", "Executed:"]
        o = receipt.order
        return (
            f"{self.rng.choice(verbs)} {o.side.value} {o.quantity} {o.symbol} at ${receipt.price} (${receipt.value})."
        )


class StockAgent:
    def __init__(self, seed: int, *, temperature: float = 0.7, model: str = "sim-llm-1") -> None:
        self.llm = SimulatedLLM(seed)
        self.temperature = temperature
        self.model = model

    @chronicle.boundary(kind="llm", name="plan", provider="simulated")
    def plan(self, request: str, *, model: str, temperature: float) -> Order:
        data = self.llm.complete_plan(request, temperature)
        return Order(str(data["symbol"]), Side(data["side"]), int(data["quantity"]))  # type: ignore[call-overload]

    @chronicle.boundary(kind="tool", name="get_quote")
    def get_quote(self, symbol: str) -> Quote:
        return Quote(symbol, PRICES[symbol])

    @chronicle.boundary(kind="guardrail", name="check_order")
    def check_order(self, request: str, order: Order, quote: Quote) -> str | None:
        """The guardrail as shipped: it only checks that the quantity is positive."""
        if order.quantity <= 0:
            return "quantity must be positive"
        return None

    @chronicle.boundary(kind="tool", name="place_order")
    async def place_order(self, order: Order, quote: Quote) -> Receipt:
        await asyncio.sleep(0)
        return Receipt(order, quote.price, quote.price * order.quantity)

    @chronicle.boundary(kind="llm", name="finalize", provider="simulated")
    def finalize(self, receipt: Receipt, *, model: str) -> str:
        return self.llm.complete_summary(receipt)

    @chronicle.boundary(kind="agent", name="run_agent")
    def run(self, request: str) -> Result:
        order = self.plan(request, model=self.model, temperature=self.temperature)
        quote = self.get_quote(order.symbol)
        problem = self.check_order(request, order, quote)
        if problem:
            return Result("blocked", problem)
        receipt = asyncio.run(self.place_order(order, quote))
        return Result("filled", self.finalize(receipt, model=self.model), receipt)
