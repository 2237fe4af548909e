"""Record several runs of the stock agent in the embedded store, then find and show the bad one.

Run with ``make demo`` (or ``python -m examples.stock_agent.demo``). No server is needed: spans and
payloads go to ``./.chronicle/`` (or ``$CHRONICLE_HOME``). The model is SIMULATED.
"""

from __future__ import annotations

import argparse
import json
from decimal import Decimal

import chronicle_otel as chronicle
from chronicle_otel import semconv
from examples.stock_agent.agent import SimulatedLLM, StockAgent

REQUEST = "Sell $1,000 of MSFT"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--store", default=None, help="store directory (default: $CHRONICLE_HOME or ./.chronicle)")
    args = parser.parse_args(argv)

    config = chronicle.configure(
        service_name="stock-agent",
        session={"build_id": "2026.11.29+g3e1a7c4", "model_version": "sim-llm-1"},
        store=chronicle.StoreOptions(path=args.store),
        otlp=False,
    )
    assert config.store is not None
    print(f"Recording {args.runs} runs of {REQUEST!r} with a SIMULATED LLM (seeded, temperature 0.7)")
    print(f"store: {config.store.path.resolve()}\n")
    outcomes = []
    for seed in range(args.runs):
        with chronicle.session(user_id=f"u-{seed}", prompt_version="v12", seed=seed):
            result = StockAgent(seed).run(REQUEST)
        value = result.receipt.value if result.receipt else Decimal(0)
        outcomes.append(value)
        flag = f"  <-- sold ~${value:,.0f}, not $1,000" if value > 10_000 else ""
        print(f"  run {seed}: {result.status:7s} {result.message}{flag}")
    config.force_flush()
    print(f"\nsimulated model calls: {SimulatedLLM.calls}")

    traces = config.store.list_traces(limit=args.runs)
    print(f"\n{'trace id':32s}  {'root boundary':13s} {'spans':>5s} {'ms':>7s}  status")
    for t in traces:
        ms = (t.duration_ns or 0) / 1e6
        print(f"{t.trace_id}  {t.root_boundary or '-':13s} {t.span_count:5d} {ms:7.2f}  {t.status}")

    bad = None
    for t in traces:
        for span in config.store.read_spans(t.trace_id):
            attrs = {kv["key"]: kv["value"] for kv in span.get("attributes", [])}
            if attrs.get(semconv.BOUNDARY_NAME, {}).get("stringValue") == "place_order":
                order = json.loads(attrs[semconv.INPUT]["stringValue"])["order"]["data"]
                if order["quantity"] > 100:
                    bad = t
    if bad is None:
        print("\nno run sold more than 100 shares this time; try --runs 12")
        return 0
    print(f"\nThe bad run is {bad.trace_id}. Its boundaries, as recorded:")
    spans = sorted(config.store.read_spans(bad.trace_id), key=lambda s: int(s["startTimeUnixNano"]))
    for span in spans:
        attrs = {kv["key"]: next(iter(kv["value"].values())) for kv in span.get("attributes", [])}
        print(f"  {attrs[semconv.BOUNDARY_KIND]:9s} {attrs[semconv.BOUNDARY_NAME]}[{attrs[semconv.CALL_INDEX]}]")
        print(f"      in : {_short(attrs.get(semconv.INPUT))}")
        print(f"      out: {_short(attrs.get(semconv.OUTPUT))}")
    build, user = attrs[semconv.SESSION_PREFIX + "build_id"], attrs[semconv.SESSION_PREFIX + "user_id"]
    print(f"\nsession: build_id={build} user_id={user}")
    return 0


def _short(text: object, width: int = 110) -> str:
    s = str(text)
    return s if len(s) <= width else s[: width - 1] + "…"


if __name__ == "__main__":
    raise SystemExit(main())
