"""The exporter alone: ``ChronicleExporter`` writing ended spans to a new local store, on one thread.

The spans are recorded first, in memory, from ``@boundary`` calls with the payloads of ``overhead.py`` (~1 KB of
JSON in, 1.4 KB out, distinct on every call), and prepared as chronicle's batch processor prepares them. They are
then handed to the exporter in batches of 512 (the batch processor's export size), in two shapes:

  one-span traces  every call is its own trace (a service whose boundaries are roots): one index row per span
  one trace        the calls under one agent boundary: one line per batch

Each shape is exported with the store's default ``durable=True`` and with ``durable=False``, into a new store every
repeat: CPU µs per span (the process; the exporter runs no thread of its own) and spans/s of wall time, medians. The
hand-written span of ``overhead.py`` (an SDK span plus ``json.dumps`` of input and output, over the SDK's
BatchSpanProcessor and a discarding exporter) is measured in the same process for scale: on a slower or busier
machine both move, so the multiple of it compares runs of different days.

Usage: python benchmarks/export_throughput.py [--calls N] [--repeats R] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import overhead  # the payloads and the hand-written span of the call-path benchmark

BATCH = 512
TIMES = "\u00d7"
SHAPES = ("one-span traces", "one trace")


def record(calls: int, shape: str) -> list[Any]:
    """The ended spans of ``calls`` boundary calls of ``shape``, as chronicle's batch processor queues them."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import chronicle_otel as chronicle
    from chronicle_otel._internal.compat import shed_empty_containers

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    chronicle.configure(tracer_provider=provider, store=False, otlp=False, flush_on_signals=False)
    payloads = overhead.Payloads(calls, 1000, 1400)
    payloads.stamp(0)
    llm = chronicle.boundary(kind="llm", name="llm.chat")(payloads.work())
    if shape == "one trace":

        @chronicle.boundary(kind="agent", name="agent.run")
        def agent(requests: list[dict[str, Any]]) -> int:
            return sum(len(llm(request)) for request in requests)

        agent(payloads.requests)
    else:
        for request in payloads.requests:
            llm(request)
    spans = list(memory.get_finished_spans())
    for span in spans:
        shed_empty_containers(span)
    provider.shutdown()
    return spans


def export(spans: list[Any], durable: bool) -> tuple[float, float]:
    """CPU seconds and wall seconds to export ``spans`` into a new store, flushed."""
    from chronicle_otel import ChronicleExporter, LocalStore
    from chronicle_otel.store import StoreReader

    tmp = Path(tempfile.mkdtemp(prefix="chronicle-export-bench-"))
    try:
        exporter = ChronicleExporter(LocalStore(tmp / "store", durable=durable))
        batches = [spans[i : i + BATCH] for i in range(0, len(spans), BATCH)]
        gc.collect()
        c0, t0 = time.process_time(), time.perf_counter()
        for batch in batches:
            exporter.export(batch)
        exporter.force_flush()
        c1, t1 = time.process_time(), time.perf_counter()
        exporter.shutdown()
        reader = StoreReader(tmp / "store")
        try:  # what reached the index: a benchmark of dropped spans would be no benchmark
            stored = sum(t.span_count for t in reader.list_traces(include_replays=True))
        finally:
            reader.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if stored != len(spans):
        raise SystemExit(f"the store holds {stored} of {len(spans)} spans")
    return c1 - c0, t1 - t0


def hand_written_us(calls: int, repeats: int) -> float:
    """Median µs per call of the hand-written span, in this process."""
    payloads = overhead.Payloads(calls, 1000, 1400)
    bench = overhead.build("sdk_json", payloads.work(), "")
    samples = [overhead._measure(bench, payloads, repeat) for repeat in range(1, repeats + 1)]
    return statistics.median(s["loop_ns"] / s["calls"] / 1000 for s in samples)


def run(calls: int, repeats: int) -> dict[str, Any]:
    results: dict[str, Any] = {"calls": calls, "repeats": repeats, "batch": BATCH, "shapes": {}}
    for shape in SHAPES:
        spans = record(calls, shape)
        rows = {}
        for durable in (True, False):
            runs = [export(spans, durable) for _ in range(repeats)]
            cpu = statistics.median(c for c, _ in runs)
            wall = statistics.median(w for _, w in runs)
            rows["durable" if durable else "not durable"] = {
                "cpu_us_per_span": cpu / len(spans) * 1e6,
                "spans_per_s": len(spans) / wall,
                "spans_per_cpu_s": len(spans) / cpu,
                "runs": [[c, w] for c, w in runs],
            }
        results["shapes"][shape] = {"spans": len(spans), "rows": rows}
        del spans
    results["hand_written_us"] = hand_written_us(calls, repeats)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20_000, help="boundary calls per shape (default 20000)")
    parser.add_argument("--repeats", type=int, default=3, help="exports of each shape and setting (default 3)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    results = run(args.calls, args.repeats)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    hand = results["hand_written_us"]
    print(
        f"the exporter alone, batches of {BATCH}, a new store each run; median of {args.repeats}; "
        f"the hand-written span here: {hand:.1f} µs"
    )
    print(f"| shape | store | CPU µs/span | {TIMES} hand-written span | spans/s (wall) |")
    print("|---|---|---:|---:|---:|")
    for shape, entry in results["shapes"].items():
        for setting, row in entry["rows"].items():
            cpu = row["cpu_us_per_span"]
            print(f"| {shape} | {setting} | {cpu:.1f} | {cpu / hand:.2f} | {row['spans_per_s']:,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
