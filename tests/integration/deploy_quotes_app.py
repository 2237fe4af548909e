"""The downstream quote service of the deployment test: a FastAPI app with no tracing code of its own.

Run under zero-code instrumentation, as the agent service is::

    opentelemetry-instrument uvicorn tests.integration.deploy_quotes_app:app --host 127.0.0.1 --port PORT

Its server spans continue the trace of the caller (the ``traceparent`` header the instrumented httpx client of
the agent's tool boundary sends) and leave through the OTLP exporter the OpenTelemetry distro builds.
"""

from __future__ import annotations

import os

from fastapi import FastAPI, HTTPException, Response

PRICES = {"MSFT": "190.42", "AAPL": "231.10", "NVDA": "142.87"}

app = FastAPI(title="quotes")
served = {"quote": 0}


@app.get("/quote/{symbol}")
async def quote(symbol: str, response: Response) -> dict[str, str]:
    if symbol not in PRICES:
        raise HTTPException(status_code=404, detail=f"no quote for {symbol}")
    served["quote"] += 1
    response.headers["x-worker-pid"] = str(os.getpid())
    return {"symbol": symbol, "price": PRICES[symbol]}


@app.get("/healthz")
async def healthz() -> dict[str, object]:
    return {"ok": True, "served": served["quote"]}
