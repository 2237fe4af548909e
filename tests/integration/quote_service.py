"""A small HTTP service for the correlation test: an ASGI app behind OpenTelemetry's ASGI middleware.

Run with ``uvicorn tests.integration.quote_service:app``; it records its spans into ``$CHRONICLE_HOME``.
"""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

import chronicle_otel as chronicle

# No boundary runs here: its spans join the callers' traces in the shared store only with keep="all".
config = chronicle.configure(
    service_name="quote-service", store=chronicle.StoreOptions(processor="simple", keep="all"), otlp=False
)
REQUESTS = {"quote": 0}


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path.startswith("/quote/"):
        REQUESTS["quote"] += 1
        body = {"symbol": path.rsplit("/", 1)[-1], "price": "190.42"}
    elif path == "/count":
        body = dict(REQUESTS)
    else:
        body = {"error": "not found"}
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": data})


app = OpenTelemetryMiddleware(_app, tracer_provider=config.tracer_provider)
