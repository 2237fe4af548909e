"""An agent run for the pipeline tests: the stock agent plus a retrieval with a payload larger than the span cap.

Run as ``python -m tests.integration.pipeline_agent STORE``: records one run (OTLP to wherever the standard
``OTEL_EXPORTER_OTLP_*`` variables point, and the local store) and prints its trace id.
"""

from __future__ import annotations

import sys
from typing import Any

import chronicle_otel as chronicle
from examples.stock_agent import agent

FILINGS = "10-K MSFT revenue segment note " * 8000  # ~250 KB: cut on the span, whole in the payload store


@chronicle.boundary(kind="retrieval", name="research")
def research(symbol: str) -> dict[str, Any]:
    return {"symbol": symbol, "filings": FILINGS}


@chronicle.boundary(kind="agent", name="desk")
def desk(request: str, seed: int) -> agent.Result:
    notes = research("MSFT")
    assert notes["filings"] == FILINGS
    return agent.run_agent(request, seed=seed)


def main() -> None:
    config = chronicle.configure(service_name="stock-desk", store=sys.argv[1])
    desk("Sell $1,000 of MSFT", 1)  # seed 1: the simulated model reads $1,000 as 1,000 shares
    config.force_flush()
    assert config.store is not None
    print(config.store.list_traces(limit=1)[0].trace_id)


if __name__ == "__main__":
    main()
