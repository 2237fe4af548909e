"""Soak of the local store path: a million boundary spans, resident memory, drops and exit time, measured in one run.

Each run is its own process (a fresh store in a temporary directory, the default configuration except the policy):

  block x1, block x2    ``on_full="block"``, 1 and 2 recording threads, as fast as the machine goes: the
                        application waits for the exporter when the queue is full, so no span is dropped
  drop x1, drop x2      ``on_full="drop"``, the same: the application never waits, spans the exporter cannot
                        keep up with are dropped and counted
  rate                  ``on_full="drop"`` at a stated, paced rate (default 5,000 spans/s for 20 s): no drop

The boundary is a small tool call (``@boundary(kind="tool")``, a three-key dict in, a three-key dict out).

Resident memory (VmRSS; RssAnon too in the JSON) is sampled every 50,000 spans. What chronicle holds is bounded and
fills early: the export queue (16,384 spans, about 50 MiB here) within seconds, the store exporter's memory of the last
50,000 to 100,000 traces it wrote (two generations of dicts, a few MiB) within the first ~150,000 spans. ``warm`` is
the sample at a quarter of the run, after both; ``flat`` means the last sample is within 5% (at least 8 MiB) of it
(not judged for the paced run, which is short).

``spans/s`` is the application's rate over the whole run, ``last 10%`` over its last tenth (writes to the store slow
down as its index grows). ``stored`` counts the traces indexed in the store (its SQLite index, opened read-only);
``blocked s`` is the time the recording threads waited for room in the queue (summed over threads); ``exit s`` is
the time ``config.shutdown()`` took to write what was still queued.

Usage: python benchmarks/soak.py [--spans N] [--rate R] [--seconds S] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RUNS = ["block:1", "block:2", "drop:1", "drop:2"]
SAMPLE_EVERY = 50_000
WARM_FRACTION = 0.25
SYMBOLS = ["MSFT", "AAPL", "NVDA", "AMZN", "GOOG", "META", "TSLA", "ORCL"]


def rss_bytes(field: str = "VmRSS") -> int:
    """Resident memory of this process (``VmRSS``, or ``RssAnon``: the heap alone), from /proc/self/status."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def stored_traces(store: Path) -> tuple[int, int]:
    """(traces, spans) indexed in the store, read from its SQLite index opened read-only."""
    uri = (store / "index.sqlite3").resolve().as_uri() + "?mode=ro"
    connection = sqlite3.connect(uri, uri=True)
    try:
        traces, spans = connection.execute("SELECT COUNT(*), COALESCE(SUM(span_count), 0) FROM traces").fetchone()
    finally:
        connection.close()
    return int(traces), int(spans)


def run(policy: str, threads: int, spans: int, rate: float, seconds: float) -> dict[str, Any]:
    """One run in this process: record, sample, shut down, count. ``rate`` > 0 paces one thread for ``seconds``."""
    import chronicle_otel as chronicle

    with tempfile.TemporaryDirectory(prefix="chronicle-soak-") as tmp:
        store = Path(tmp) / ".chronicle"
        config = chronicle.configure(
            service_name="soak",
            store=chronicle.StoreOptions(path=store, on_full="drop" if policy == "drop" else "block"),
            otlp=False,
            flush_on_signals=False,
        )

        @chronicle.boundary(kind="tool", name="lookup_quote")
        def lookup_quote(request: dict[str, Any]) -> dict[str, Any]:
            return {"symbol": request["symbol"], "price": 190.42, "currency": "USD"}

        def queued() -> int:
            return config.stats().exports["store"].queued

        samples: list[tuple[int, int, int, float]] = []  # (spans recorded, VmRSS, RssAnon, seconds)
        clock = [time.perf_counter()]

        def sample(at: int) -> None:
            samples.append((at, rss_bytes(), rss_bytes("RssAnon"), time.perf_counter() - clock[0]))

        sample(0)
        queue_peak = 0
        progress = [0] * threads

        def record(index: int, count: int) -> None:
            nonlocal queue_peak
            sample_every = SAMPLE_EVERY // threads
            for i in range(count):
                lookup_quote({"symbol": SYMBOLS[i % len(SYMBOLS)], "request": i, "fields": ["price", "currency"]})
                if i % 1000 == 999:
                    progress[index] = i + 1
                    if index == 0 and (i + 1) % sample_every == 0:
                        sample(sum(progress))
                        queue_peak = max(queue_peak, queued())
            progress[index] = count

        def paced(total: int) -> None:
            nonlocal queue_peak
            tick = 0.01
            per_tick = max(1, round(rate * tick))
            started = time.perf_counter()
            done = 0
            while done < total:
                for _ in range(min(per_tick, total - done)):
                    lookup_quote({"symbol": SYMBOLS[done % len(SYMBOLS)], "request": done, "fields": ["price"]})
                    done += 1
                if done % SAMPLE_EVERY < per_tick:
                    sample(done)
                queue_peak = max(queue_peak, queued())
                wait = started + done / rate - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
            progress[0] = done

        for i in range(1000):  # imports, the first segment, the index's first pages
            lookup_quote({"symbol": "MSFT", "request": i, "fields": ["price"]})
        config.force_flush()
        base = config.stats().exports["store"]
        started = clock[0] = time.perf_counter()
        if rate > 0:
            paced(round(rate * seconds))
        else:
            workers = [
                threading.Thread(target=record, args=(n, spans // threads + (n < spans % threads)))
                for n in range(threads)
            ]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
        elapsed = time.perf_counter() - started
        sample(sum(progress))
        calls = sum(progress)
        exit_started = time.perf_counter()
        config.shutdown()
        exit_seconds = time.perf_counter() - exit_started
        final = config.stats()
        batch = final.exports["store"]
        traces, stored_spans = stored_traces(store)

    accepted = batch.accepted - base.accepted
    dropped = batch.dropped - base.dropped
    first = samples[1] if len(samples) > 1 else samples[0]
    last = samples[-1]
    warm = next((s for s in samples if s[0] >= WARM_FRACTION * last[0]), last)
    tail = [s for s in samples if s[0] <= 0.9 * last[0]][-1]  # the rate over the last tenth of the run
    return {
        "run": "rate" if rate > 0 else f"{policy}:{threads}",
        "policy": policy,
        "threads": threads,
        "calls": calls,
        "seconds": round(elapsed, 3),
        "spans_per_s": round(calls / elapsed),
        "spans_per_s_last_10pct": round((samples[-1][0] - tail[0]) / max(1e-9, samples[-1][3] - tail[3])),
        "stated_rate": rate or None,
        "accepted": accepted,
        "exported": batch.exported - base.exported,
        "dropped": dropped,
        "failed": batch.failed,
        "undelivered": batch.undelivered,
        "stats_dropped": final.dropped,
        "blocked_seconds": round(batch.blocked_seconds - base.blocked_seconds, 3),
        "stored_traces": traces - base.exported,
        "stored_spans": stored_spans - base.exported,
        "queue_peak": queue_peak,
        "exit_seconds": round(exit_seconds, 3),
        "rss_first_mib": _mib(first[1]),
        "rss_warm_mib": _mib(warm[1]),
        "rss_peak_mib": _mib(max(s[1] for s in samples)),
        "rss_last_mib": _mib(last[1]),
        "anon_warm_mib": _mib(warm[2]),
        "anon_last_mib": _mib(last[2]),
        "rss_flat": None if rate > 0 else last[1] - warm[1] <= max(0.05 * warm[1], 8 * 1024 * 1024),
        "accounted": calls == accepted + dropped and traces - base.exported == accepted,
        "rss_samples_mib": [(at, _mib(rss), _mib(anon), round(t, 1)) for at, rss, anon, t in samples],
    }


def _flat(value: bool | None) -> str:
    return "-" if value is None else "yes" if value else "NO"


def _mib(value: int) -> float:
    return round(value / (1024 * 1024), 1)


def _child(args: list[str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, *args],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CHRONICLE_"))},
            "PYTHONPATH": str(REPO),
        },
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=1_000_000, help="spans per run (default 1,000,000)")
    parser.add_argument("--rate", type=float, default=5_000.0, help="spans/s of the paced run (default 5,000)")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the paced run (default 20)")
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    parser.add_argument("--run", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.run:
        policy, _, threads = args.run.partition(":")
        rate = args.rate if policy == "rate" else 0.0
        print(json.dumps(run("drop" if rate else policy, int(threads or 1), args.spans, rate, args.seconds)))
        return 0

    results = []
    started = time.perf_counter()
    for name in [*RUNS, "rate"]:
        results.append(
            _child(
                ["--run", name, "--spans", str(args.spans), "--rate", str(args.rate), "--seconds", str(args.seconds)]
            )
        )
        if not args.json:
            r = results[-1]
            print(f"  {r['run']:8s} {r['calls']:>9,} spans in {r['seconds']:.1f}s", file=sys.stderr, flush=True)
    total = time.perf_counter() - started
    summary = {
        "spans": args.spans,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "total_seconds": round(total, 1),
        "runs": [{k: v for k, v in r.items() if k != "rss_samples_mib"} for r in results],
        "rss_samples_mib": {r["run"]: r["rss_samples_mib"] for r in results},
    }
    if not args.json:
        print(
            f"soak: {args.spans:,} boundary spans per run into a fresh local store; {os.cpu_count()} CPUs, "
            f"Python {summary['python']}, {total:.0f}s in all"
        )
        header = ("run", "spans/s", "last 10%", "stored", "dropped", "blocked s", "exit s", "queue", "RSS MiB", "flat")
        print("{:9s} {:>8s} {:>8s} {:>10s} {:>8s} {:>9s} {:>6s} {:>6s}  {:21s} {:>4s}".format(*header))
        for r in results:
            rss = f"{r['rss_first_mib']:.0f}/{r['rss_warm_mib']:.0f}/{r['rss_peak_mib']:.0f}/{r['rss_last_mib']:.0f}"
            name = f"{r['run']}@{r['stated_rate']:.0f}" if r["stated_rate"] else r["run"]
            print(
                f"{name:9s} {r['spans_per_s']:>8,} {r['spans_per_s_last_10pct']:>8,} {r['stored_traces']:>10,} "
                f"{r['dropped']:>8,} {r['blocked_seconds']:>9.1f} {r['exit_seconds']:>6.2f} {r['queue_peak']:>6,}  "
                f"{rss:21s} {_flat(r['rss_flat']):>4s}"
            )
        print("RSS MiB: first/warm/peak/last sample; queue: spans waiting, the most seen at a sample")
        accounted = all(r["accounted"] for r in results)
        print(
            "every call stored or counted as dropped (calls == accepted + dropped, stored == accepted): "
            + ("yes" if accounted else "NO")
        )
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
