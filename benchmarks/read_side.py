"""Read-side throughput: loading a large recorded trace, saving it, and replaying it with its model calls stubbed.

One recorded run is built into a local store in a temporary directory: an agent (the root boundary) that calls
``--spans`` LLM boundaries (about 1 KB of input and 1.3 KB of output each), directly or, with ``--fanout K``,
through one ``tool`` step per K calls. Then, on that trace:

  load_store      load_trace() from the local store, spans/s
  save            write_trace() to a .jsonl file: seconds and bytes
  load_saved      load_trace() of that file, spans/s
  load_gzip       load_trace() of the same trace saved as .jsonl.gz, spans/s
  load_collector  load_trace() of the store's lines written out as one file (the Collector file exporter's shape:
                  one request per line and export batch), spans/s
  replay          the root rerun with every LLM call stubbed (stub={"kind:llm"}), per stubbed call, with
                  emit_spans=False and emit_spans=True
  peak_rss        the process's peak resident memory

Each timed measure runs ``--repeats`` times; the median is printed (and every run with ``--json``).
Usage: python benchmarks/read_side.py [--spans N] [--fanout K] [--repeats R] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None  # type: ignore[assignment]

SYSTEM = "You are a careful trading assistant. Answer with the order you place and its id. " * 5
QUESTION = "Sell $1,000 of MSFT at market, then confirm the order id back to me, quoting the fill price. " * 5
ANSWER = "Selling 5 shares of MSFT at $190.42; the order id follows below with the fill report. " * 14


def _request(call: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"step {call}: {QUESTION}"},
    ]


def _response(call: int) -> dict[str, Any]:
    return {
        "id": f"resp-{call}",
        "model": "gpt-4.1-mini-2025-04-14",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": f"{call}: {ANSWER}"}}],
        "usage": {"input_tokens": 212 + call % 7, "output_tokens": 96},
    }


def _define(chronicle: Any) -> Callable[..., int]:
    """The recorded program: ``agent.run`` calls ``llm.chat`` ``calls`` times (in ``tool.step``s of ``fanout``)."""

    @chronicle.boundary(kind="llm", name="llm.chat")
    def chat(messages: list[dict[str, str]], call: int) -> dict[str, Any]:
        return _response(call)

    @chronicle.boundary(kind="tool", name="tool.step")
    def step(first: int, count: int) -> int:
        total = 0
        for call in range(first, first + count):
            total += len(chat(_request(call), call)["id"])
        return total

    @chronicle.boundary(kind="agent", name="agent.run")
    def run_agent(task: str, calls: int, fanout: int) -> int:
        total = 0
        if fanout <= 0:
            for call in range(calls):
                total += len(chat(_request(call), call)["id"])
            return total
        for first in range(0, calls, fanout):
            total += step(first, min(fanout, calls - first))
        return total

    return run_agent


def _timed(repeats: int, run: Callable[[], Any]) -> tuple[list[float], list[float], Any]:
    """Wall-clock and CPU seconds (this process, every thread) of each of ``repeats`` runs, and the last result."""
    wall, cpu, result = [], [], None
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        result = run()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return wall, cpu, result


def _store(results: dict[str, Any], name: str, wall: list[float], cpu: list[float], count: int | None = None) -> None:
    results[f"{name}_s"] = wall
    results[f"{name}_cpu_s"] = cpu
    if count is not None:
        results[f"{name}_spans_per_s"] = count / statistics.median(wall)
        results[f"{name}_spans_per_cpu_s"] = count / statistics.median(cpu)


def _peak_rss_mb() -> float | None:
    if resource is None:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if sys.platform != "darwin" else peak / (1 << 20)


def run(spans: int, fanout: int, repeats: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="chronicle-read-bench-"))
    store = tmp / "store"
    os.environ["CHRONICLE_HOME"] = str(store)  # the default local store: never the working directory's
    os.environ.pop("CHRONICLE_PAYLOADS", None)
    import chronicle_otel as chronicle
    from chronicle_otel.store import StoreReader

    results: dict[str, Any] = {"spans_requested": spans, "fanout": fanout, "repeats": repeats}
    try:
        config = chronicle.configure(
            service_name="read-side-bench",
            store=chronicle.StoreOptions(path=store, durable=False),
            otlp=False,
            flush_on_signals=False,
        )
        run_agent = _define(chronicle)
        c0, t0 = time.process_time(), time.perf_counter()
        run_agent("sell MSFT", spans, fanout)
        config.force_flush()
        results["record_us_per_call"] = (time.perf_counter() - t0) / spans * 1e6
        results["record_cpu_us_per_call"] = (time.process_time() - c0) / spans * 1e6

        reader = StoreReader(store)
        (summary,) = reader.list_traces()
        trace_id = summary.trace_id

        wall, cpu, trace = _timed(repeats, lambda: chronicle.load_trace(store, trace_id))
        count = len(trace.spans)
        results["span_count"] = count
        results["boundary_count"] = len(trace.boundaries)
        results["bytes_per_span"] = sum(len(line) for line in reader.iter_lines(trace_id)) / count
        _store(results, "load_store", wall, cpu, count)

        saved = tmp / "trace.jsonl"
        wall, cpu, _ = _timed(repeats, lambda: chronicle.write_trace(trace, saved))
        _store(results, "save", wall, cpu)
        results["save_bytes"] = saved.stat().st_size

        wall, cpu, again = _timed(repeats, lambda: chronicle.load_trace(saved))
        assert len(again.spans) == count and len(again.boundaries) == len(trace.boundaries)
        _store(results, "load_saved", wall, cpu, count)

        zipped = tmp / "trace.jsonl.gz"
        chronicle.write_trace(trace, zipped)
        results["gzip_bytes"] = zipped.stat().st_size
        wall, cpu, _ = _timed(repeats, lambda: chronicle.load_trace(zipped))
        _store(results, "load_gzip", wall, cpu, count)

        collector = tmp / "collector-out.jsonl"
        with open(collector, "wb") as out:
            lines = 0
            for line in reader.iter_lines(trace_id):
                out.write(line + b"\n")
                lines += 1
        reader.close()
        results["collector_lines"] = lines
        wall, cpu, _ = _timed(repeats, lambda: chronicle.load_trace(collector, trace_id))
        _store(results, "load_collector", wall, cpu, count)

        stubbed = sum(1 for b in trace.boundaries if b.kind == "llm")
        for emit in (False, True):

            def rerun(emit: bool = emit) -> tuple[float, float]:
                with chronicle.replay(trace, stub={"kind:llm"}, emit_spans=emit) as replay_run:
                    c0, t0 = time.process_time(), time.perf_counter()
                    replay_run.rerun()
                    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                assert replay_run.report.ok, replay_run.report
                assert len(replay_run.report.stubbed) == stubbed
                return wall, cpu

            runs = [rerun() for _ in range(repeats)]
            key = "replay_emit" if emit else "replay_noemit"
            results[f"{key}_total_s"] = [wall for wall, _ in runs]
            results[f"{key}_total_cpu_s"] = [cpu for _, cpu in runs]
            results[f"{key}_us_per_call"] = statistics.median(wall / stubbed * 1e6 for wall, _ in runs)
            results[f"{key}_cpu_us_per_call"] = statistics.median(cpu / stubbed * 1e6 for _, cpu in runs)
        results["peak_rss_mb"] = _peak_rss_mb()
        config.shutdown()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=20_000, help="LLM boundaries in the trace (default 20000)")
    parser.add_argument("--fanout", type=int, default=0, help="LLM calls per tool step (default 0: all under the root)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each timed measure (default 3)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    results = run(args.spans, args.fanout, args.repeats)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    med = statistics.median
    print(
        f"one trace: {results['span_count']} spans, {results['boundary_count']} boundaries, "
        f"{results['bytes_per_span']:.0f} bytes of OTLP/JSON per span; median of {args.repeats} run(s), "
        "wall clock (CPU time of this process in brackets)"
    )

    def rate(name: str) -> str:
        return f"{results[name + '_spans_per_s']:>10,.0f} spans/s ({results[name + '_spans_per_cpu_s']:,.0f})"

    print(
        f"  recording, flushed         {results['record_us_per_call']:10.1f} us per boundary "
        f"({results['record_cpu_us_per_call']:.1f}), for reference"
    )
    print("  load_trace(store)         ", rate("load_store"))
    print(
        f"  write_trace                {med(results['save_s']):10.2f} s ({med(results['save_cpu_s']):.2f}), "
        f"{results['save_bytes']:,} bytes"
    )
    print("  load_trace(saved file)    ", rate("load_saved"))
    print(
        "  load_trace(gzip file)     ",
        rate("load_gzip"),
        f"{results['gzip_bytes']:,} bytes",
    )
    print(
        "  load_trace(collector file)",
        rate("load_collector"),
        f"{results['collector_lines']} lines",
    )
    for key, label in (("replay_noemit", "emit_spans=False"), ("replay_emit", "emit_spans=True ")):
        print(
            f"  replay, {label}   {results[f'{key}_us_per_call']:10.1f} us per stubbed call "
            f"({results[f'{key}_cpu_us_per_call']:.1f})"
        )
    rss = results["peak_rss_mb"]
    print(f"  peak RSS                   {rss:10.0f} MB" if rss is not None else "  peak RSS: unknown")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
