"""A replay of a large trace, and what the cyclic garbage collector costs it.

One recorded run is built into a local store in a temporary directory: an agent (the root boundary) that runs
``--calls`` LLM boundaries through one live ``tool`` step per ``--fanout`` calls. Each LLM answer is a large JSON
value (``--items`` dicts of a few fields: many objects once decoded); each tool step keeps what it read, as agent code
does. The trace is loaded once, then replayed ``--repeats`` times with every LLM call stubbed (``stub={"kind:llm"}``,
the default ``emit_spans=True``), each replay timed from ``replay(...)`` to the end of its ``with`` block:

  replay         wall-clock seconds of the whole replay (building the run, the rerun, the report), and the CPU
                 seconds of this process meanwhile (steadier on a busy machine)
  gc             seconds spent in the collector's passes during it (``gc.callbacks``), and how many full (oldest
                 generation) passes it made

and, for scale, the same for the recorded run itself (the program run once, recording).

The median of the repeats is printed (every run with ``--json``).
Usage: python benchmarks/replay_gc.py [--calls N] [--fanout K] [--items I] [--repeats R] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _answer(call: int, items: int) -> dict[str, Any]:
    return {
        "id": f"resp-{call}",
        "model": "gpt-4.1-mini-2025-04-14",
        "rows": [
            {"symbol": f"S{i % 97}", "price": 190.42 + i, "tags": ["equity", f"lot-{i}"], "note": "fill " * 4}
            for i in range(items)
        ],
        "usage": {"input_tokens": 212 + call % 7, "output_tokens": 96},
    }


def _define(chronicle: Any, items: int) -> tuple[Callable[..., int], list[Any]]:
    """The recorded program: ``agent.run`` calls ``llm.chat`` ``calls`` times, in live ``tool.step``s of ``fanout``;
    and the list in which the agent keeps what it read (until its next run)."""

    @chronicle.boundary(kind="llm", name="llm.chat")
    def chat(prompt: str, call: int) -> dict[str, Any]:
        return _answer(call, items)

    kept: list[Any] = []

    @chronicle.boundary(kind="tool", name="tool.step")
    def step(first: int, count: int) -> int:
        total = 0
        for call in range(first, first + count):
            answer = chat(f"step {call}: sell $1,000 of MSFT", call)
            kept.append({row["symbol"]: row for row in answer["rows"]})  # the agent's own objects
            total += len(answer["rows"])
        return total

    @chronicle.boundary(kind="agent", name="agent.run")
    def run_agent(task: str, calls: int, fanout: int) -> int:
        kept.clear()
        return sum(step(first, min(fanout, calls - first)) for first in range(0, calls, fanout))

    return run_agent, kept


class _Collections:
    """Time spent in the collector's passes, and the number of full passes, while counting."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full = 0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
            return
        self.seconds += time.perf_counter() - self._start
        self.full += info["generation"] == 2


def run(calls: int, fanout: int, items: int, repeats: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="chronicle-replay-gc-bench-"))
    store = tmp / "store"
    os.environ["CHRONICLE_HOME"] = str(store)  # the default local store: never the working directory's
    os.environ.pop("CHRONICLE_PAYLOADS", None)
    import chronicle_otel as chronicle

    results: dict[str, Any] = {"calls": calls, "fanout": fanout, "items": items, "repeats": repeats}
    try:
        config = chronicle.configure(
            service_name="replay-gc-bench",
            store=chronicle.StoreOptions(path=store, durable=False),
            otlp=False,
            flush_on_signals=False,
        )
        run_agent, kept = _define(chronicle, items)
        collections = _Collections()
        gc.callbacks.append(collections)
        try:
            t0 = time.perf_counter()
            expected = run_agent("sell MSFT", calls, fanout)
            results["record_s"] = time.perf_counter() - t0
        finally:
            gc.callbacks.remove(collections)
        results["record_gc_s"] = collections.seconds
        results["record_full_collections"] = collections.full
        config.force_flush()
        kept.clear()
        t0 = time.perf_counter()
        trace = chronicle.load_trace(store, "latest")
        results["load_s"] = time.perf_counter() - t0
        results["boundaries"] = len(trace.boundaries)
        results["output_chars"] = sum(len(b.raw_output.text) for b in trace.boundaries if b.raw_output is not None)

        wall, cpu, spent, full = [], [], [], []
        for _ in range(repeats):
            gc.collect()
            collections = _Collections()
            gc.callbacks.append(collections)
            try:
                c0, t0 = time.process_time(), time.perf_counter()
                with chronicle.replay(trace, stub={"kind:llm"}) as replay_run:
                    assert replay_run.rerun() == expected
                wall.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
            finally:
                gc.callbacks.remove(collections)
            assert replay_run.report.ok, replay_run.report
            spent.append(collections.seconds)
            full.append(collections.full)
        results["replay_s"] = wall
        results["replay_cpu_s"] = cpu
        results["gc_s"] = spent
        results["full_collections"] = full
        config.shutdown()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=5_000, help="LLM boundaries in the trace (default 5000)")
    parser.add_argument("--fanout", type=int, default=50, help="LLM calls per live tool step (default 50)")
    parser.add_argument("--items", type=int, default=40, help="rows in each LLM answer (default 40: about 4 KB)")
    parser.add_argument("--repeats", type=int, default=5, help="replays timed (default 5)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    results = run(args.calls, args.fanout, args.items, args.repeats)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    med = statistics.median
    print(
        f"one trace: {results['boundaries']} boundaries, {results['output_chars']:,} characters of recorded output, "
        f"loaded in {results['load_s']:.2f} s; median of {args.repeats} replays"
    )
    print(f"  replay                {med(results['replay_s']):8.2f} s ({med(results['replay_cpu_s']):.2f} s of CPU)")
    print(
        f"  in the collector      {med(results['gc_s']):8.2f} s, "
        f"{med(results['full_collections']):.0f} full collections"
    )
    print(
        f"  for scale, the recorded run itself: {results['record_s']:.2f} s, {results['record_gc_s']:.2f} s in the "
        f"collector, {results['record_full_collections']} full collections"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
