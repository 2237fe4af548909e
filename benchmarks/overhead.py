"""Per-call overhead of @boundary, as ratios against the bare OpenTelemetry SDK span, measured in one run.

Each variant runs in its own process (same interpreter, same payloads):

  bare        a plain function call
  sdk_span    the same call inside a bare SDK span (BatchSpanProcessor over a discarding exporter)
  sdk_json    the SDK span plus input and output json.dumps-ed by hand into two attributes
  boundary    @boundary, BatchSpanProcessor over the ChronicleExporter writing the local store
  boundary_nostore  @boundary with store=False (the call path alone, same processor as sdk_span)
  nostore_novalues  boundary_nostore with the secret value formats off (key names only): the difference
                    between the two is the cost of scanning each payload for secrets

Input and output are about 1 KB of JSON each. Usage: python benchmarks/overhead.py [--calls N] [--repeats R] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

VARIANTS = ["bare", "sdk_span", "sdk_json", "boundary", "boundary_nostore", "nostore_novalues"]

REQUEST = {
    "messages": [
        {"role": "system", "content": "You are a careful trading assistant. " * 8},
        {"role": "user", "content": "Sell $1,000 of MSFT at market, and confirm the order id back to me. " * 6},
    ],
    "model": "gpt-4.1-mini",
    "temperature": 0.7,
}
RESPONSE = {
    "id": "resp-123",
    "model": "gpt-4.1-mini-2025-04-14",
    "choices": [{"message": {"role": "assistant", "content": "Selling 5 shares of MSFT at $190.42. " * 24}}],
    "usage": {"input_tokens": 212, "output_tokens": 96},
}


def _work(request: dict[str, Any]) -> dict[str, Any]:
    return RESPONSE


def _discarding_exporter() -> Any:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class Discard(SpanExporter):
        exported = 0

        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            Discard.exported += len(spans)
            return SpanExportResult.SUCCESS

    return Discard()


def build(variant: str, store_dir: str) -> tuple[Callable[[], Any], Callable[[], int]]:
    """Return (one call, number of spans exported so far after a flush)."""
    if variant == "bare":
        return (lambda: _work(REQUEST)), (lambda: 0)

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if variant in ("sdk_span", "sdk_json"):
        provider = TracerProvider()
        exporter = _discarding_exporter()
        processor = BatchSpanProcessor(exporter)
        provider.add_span_processor(processor)
        tracer = provider.get_tracer("bench")

        if variant == "sdk_span":

            def call() -> Any:
                with tracer.start_as_current_span("llm"):
                    return _work(REQUEST)
        else:

            def call() -> Any:
                with tracer.start_as_current_span("llm") as span:
                    span.set_attribute("input", json.dumps(REQUEST))
                    result = _work(REQUEST)
                    span.set_attribute("output", json.dumps(result))
                    return result

        def exported() -> int:
            processor.force_flush()
            return type(exporter).exported

        return call, exported

    import chronicle_otel as chronicle

    provider = TracerProvider()
    if variant == "boundary":
        config = chronicle.configure(tracer_provider=provider, store=chronicle.StoreOptions(path=store_dir))
    else:
        exporter = _discarding_exporter()
        provider.add_span_processor(BatchSpanProcessor(exporter))
        redaction = chronicle.RedactionOptions(value_defaults=False) if variant == "nostore_novalues" else None
        config = chronicle.configure(tracer_provider=provider, store=False, redaction=redaction)

    @chronicle.boundary(kind="llm", name="llm")
    def llm(request: dict[str, Any]) -> dict[str, Any]:
        return _work(request)

    def exported() -> int:
        if variant == "boundary":
            config.force_flush()
            assert config.store is not None
            return len(config.store.list_traces())
        provider.force_flush()
        return type(exporter).exported

    return (lambda: llm(REQUEST)), exported


def run_variant(variant: str, calls: int, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        call, exported = build(variant, tmp)
        for _ in range(min(2000, calls)):
            call()
        before = exported()
        per_call = []
        for _ in range(repeats):
            t0 = time.perf_counter_ns()
            for _ in range(calls):
                call()
            per_call.append((time.perf_counter_ns() - t0) / calls / 1000)
            time.sleep(0.05)  # let the export thread drain between repeats
        done = exported() - before
    return {
        "variant": variant,
        "median_us": statistics.median(per_call),
        "min_us": min(per_call),
        "calls": calls * repeats,
        "exported": done,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)

    if args.variant:
        print(json.dumps(run_variant(args.variant, args.calls, args.repeats)))
        return 0

    results = {}
    for variant in VARIANTS:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--variant",
                variant,
                "--calls",
                str(args.calls),
                "--repeats",
                str(args.repeats),
            ],
            check=True,
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parents[1],
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        )
        results[variant] = json.loads(out.stdout.strip().splitlines()[-1])
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    base = results["sdk_span"]["min_us"]
    hand = results["sdk_json"]["min_us"]
    print(f"per-call cost of {args.repeats} x {args.calls} calls, ~1 KB input and output, one process per variant;")
    print("ratios use the fastest repeat of each variant (the least disturbed by the machine)")
    header = ("variant", "median us", "min us", "/ sdk_span", "/ sdk_json", "exported")
    print("{:18s} {:>10s} {:>8s} {:>11s} {:>11s} {:>14s}".format(*header))
    for variant in VARIANTS:
        r = results[variant]
        exported = f"{r['exported']}/{r['calls']}" if variant != "bare" else "-"
        us, best = r["median_us"], r["min_us"]
        print(f"{variant:18s} {us:10.2f} {best:8.2f} {best / base:11.2f} {best / hand:11.2f} {exported:>14s}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
