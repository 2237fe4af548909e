"""An agent service deployed the usual way: a FastAPI app run under zero-code OpenTelemetry instrumentation::

    DEPLOY_QUOTES_URL=http://127.0.0.1:PORT \\
    opentelemetry-instrument uvicorn tests.integration.deploy_agent_app:app --host 127.0.0.1 --port PORT

The app has no tracing setup of its own. The OpenTelemetry distro builds the SDK TracerProvider and its OTLP
exporter from the ``OTEL_*`` variables before the app is imported; ``chronicle.configure()`` at import adds
chronicle's processor (the local store in ``$CHRONICLE_HOME``) to that provider, without a second exporter.

``POST /order`` runs the ``agent`` boundary :func:`handle_order`, which calls

* :func:`plan`, an ``llm`` boundary: a SIMULATED model, deterministic per request seed, that now and then reads
  an amount of money ("sell $1,000 of MSFT") as a number of shares (1,000 shares);
* :func:`get_quote`, a ``tool`` boundary calling the quote service with httpx; the httpx instrumentation sends
  the ``traceparent``, so the quote service's server span lands in the same trace, under the tool boundary.

Each response names its trace (``x-trace-id``) and the worker process that served it (``x-worker-pid``).
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import time
import uuid
from decimal import ROUND_DOWN, Decimal
from pathlib import Path

import httpx
from fastapi import FastAPI, Response
from opentelemetry import trace
from pydantic import BaseModel

import chronicle_otel as chronicle

chronicle.configure()

QUOTES_URL = os.environ.get("DEPLOY_QUOTES_URL", "http://127.0.0.1:9")
MISREAD_RATE = 0.2
"""How often the simulated model reads dollars as shares (decided by the request's seed)."""

_ORDER = re.compile(r"(buy|sell)\s+(\$?)([\d,]+)\s+(?:shares\s+)?of\s+([A-Z]+)", re.IGNORECASE)


@chronicle.boundary(kind="llm", name="deploy.plan", provider="simulated")
def plan(request: str, *, seed: int) -> dict[str, object]:
    match = _ORDER.fullmatch(request.strip())
    if match is None:
        raise ValueError(f"cannot plan {request!r}")
    side, dollars, amount, symbol = match.group(1).lower(), match.group(2) == "$", match.group(3), match.group(4)
    unit = "usd" if dollars else "shares"
    if dollars and random.Random(seed).random() < MISREAD_RATE:
        unit = "shares"  # the failure: the "$" is dropped and the amount of money becomes a number of shares
    return {"side": side, "symbol": symbol, "amount": int(amount.replace(",", "")), "unit": unit}


@chronicle.boundary(kind="tool", name="deploy.get_quote")
async def get_quote(symbol: str) -> dict[str, str]:
    async with httpx.AsyncClient(base_url=QUOTES_URL, timeout=10, trust_env=False) as client:
        response = await client.get(f"/quote/{symbol}")
        response.raise_for_status()
        return dict(response.json())


@chronicle.boundary(kind="agent", name="deploy.handle_order")
async def handle_order(request: str, seed: int) -> dict[str, object]:
    order = plan(request, seed=seed)
    quote = await get_quote(str(order["symbol"]))
    price = Decimal(quote["price"])
    amount = int(str(order["amount"]))
    shares = int((Decimal(amount) / price).to_integral_value(ROUND_DOWN)) if order["unit"] == "usd" else amount
    return {
        "status": "filled",
        "side": order["side"],
        "symbol": order["symbol"],
        "shares": shares,
        "value": str(shares * price),
    }


class OrderRequest(BaseModel):
    request: str
    seed: int
    hold: bool = False
    """Wait, before running the agent, until ``$DEPLOY_HOLD_DIR/release`` exists (a request in flight at SIGTERM)."""


app = FastAPI(title="agent")


def _trace_headers(response: Response) -> None:
    context = trace.get_current_span().get_span_context()
    response.headers["x-trace-id"] = format(context.trace_id, "032x")
    response.headers["x-worker-pid"] = str(os.getpid())


@app.post("/order")
async def order(body: OrderRequest, response: Response) -> dict[str, object]:
    _trace_headers(response)
    if body.hold:
        await _hold()
    return await handle_order(body.request, body.seed)


async def _hold() -> None:
    """Say this request has arrived (a file in ``$DEPLOY_HOLD_DIR``), then wait for the release (bounded)."""
    folder = Path(os.environ["DEPLOY_HOLD_DIR"])
    (folder / f"{uuid.uuid4().hex}.held").touch()
    deadline = time.monotonic() + 60
    while not (folder / "release").exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


@app.get("/healthz")
async def healthz(response: Response) -> dict[str, bool]:
    _trace_headers(response)
    return {"ok": True}
