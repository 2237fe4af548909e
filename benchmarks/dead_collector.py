"""The slowest single call with a live, a dead and a black-hole OTLP collector, measured in one run.

Each run is its own process: ``configure()`` with the local store and the OTLP export to
``OTEL_EXPORTER_OTLP_ENDPOINT``, then a paced loop of agent runs (an agent boundary over a tool boundary) at
``--rate`` runs per second for ``--seconds``. Every call's wall time is measured around the agent boundary.
The collectors:

  live        rotel on 127.0.0.1 (started as the integration tests start it), its exporter a black hole: it
              answers every request at once
  dead        a port on 127.0.0.1 that refuses connections (nothing listens there)
  black-hole  a listener on 127.0.0.1 that accepts connections and never answers (a hung collector)
  none        no OTLP export (the store alone)

The kinds are interleaved (live, dead, black-hole, none, live, …) ``--rounds`` times, so a slow moment of the machine
falls on every kind alike. Reported per kind: the median, p99 and the slowest call of each round, and the longest full
garbage collection seen in the recording process (``gc.callbacks``): spans that wait in memory for a collector that
does not take them are walked by every full collection, on the application's threads.

Usage: python benchmarks/dead_collector.py [--rate R] [--seconds S] [--rounds N] [--rotel PATH] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
KINDS = ["live", "dead", "black-hole", "none"]

CHILD = r"""
import gc, json, os, sys, time
import chronicle_otel as chronicle

pauses = []
started = [0.0]

def on_gc(phase, info):
    if info["generation"] != 2:
        return
    if phase == "start":
        started[0] = time.perf_counter()
    else:
        pauses.append(time.perf_counter() - started[0])

gc.callbacks.append(on_gc)
config = chronicle.configure(store=os.environ["STORE"], exit_timeout=1.0)

@chronicle.boundary(kind="tool", name="lookup")
def lookup(symbol: str, i: int) -> dict:
    return {"symbol": symbol, "price": 190.5 + i % 7, "currency": "USD"}

@chronicle.boundary(kind="agent", name="agent")
def agent(i: int) -> dict:
    quote = lookup("MSFT", i)
    return {"order": {"symbol": "MSFT", "shares": i % 13, "limit": quote["price"]}}

rate, seconds = float(os.environ["RATE"]), float(os.environ["SECONDS"])
count = int(rate * seconds)
times = []
start = time.perf_counter()
for i in range(count):
    due = start + i / rate
    now = time.perf_counter()
    if due > now:
        time.sleep(due - now)
    t0 = time.perf_counter()
    agent(i)
    times.append(time.perf_counter() - t0)
stats = {s.name: {"accepted": s.accepted, "exported": s.exported, "dropped": s.dropped, "failed": s.failed}
         for s in config.stats().processors} if hasattr(config.stats(), "processors") else {}
gc.callbacks.remove(on_gc)
print(json.dumps({"times": times, "gc2": pauses, "stats": stats}), flush=True)
os._exit(0)  # the exit is not measured here: a dead collector's exit has its own bound (exit_timeout)
"""


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def black_hole() -> Iterator[int]:
    """A listener on 127.0.0.1 that accepts connections and never reads or answers; yields its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                conn, _ = server.accept()
                held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


def run_once(endpoint: str | None, rate: float, seconds: float, workdir: Path) -> dict[str, Any]:
    """One recording process; its per-call times and full-collection pauses."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CHRONICLE_"))}
    env.update(STORE=str(Path(tempfile.mkdtemp(dir=workdir)) / "store"), RATE=str(rate), SECONDS=str(seconds))
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    if endpoint is None:
        env["CHRONICLE_OTLP"] = "false"
    else:
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf")
    result = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(result.stderr)
    line = result.stdout.strip().splitlines()[-1]
    data: dict[str, Any] = json.loads(line)
    return data


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "median_ms": statistics.median(ordered) * 1e3,
        "p99_ms": ordered[int(len(ordered) * 0.99)] * 1e3,
        "max_ms": ordered[-1] * 1e3,
        "over_50ms": float(sum(1 for t in ordered if t > 0.05)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=1000.0, help="agent runs per second (default 1000)")
    parser.add_argument("--seconds", type=float, default=15.0, help="seconds per run (default 15)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each kind, interleaved (default 3)")
    parser.add_argument("--kinds", default=",".join(KINDS), help="which collectors, comma-separated")
    parser.add_argument("--rotel", help="the rotel-agent binary (default: .venv-rotel's)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    if args.rotel:
        os.environ["CHRONICLE_TEST_ROTEL"] = args.rotel
    sys.path.insert(0, str(REPO))
    from tests.integration.conftest import find_rotel, run_rotel  # read $CHRONICLE_TEST_ROTEL at import

    rotel = find_rotel()
    if "live" in kinds and (rotel is None or not rotel.exists()):
        print("rotel not found (make install-services): the live kind is left out", file=sys.stderr)
        kinds.remove("live")
    results: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        workdir = Path(tmp)
        endpoints: dict[str, str | None] = {"none": None, "dead": f"http://127.0.0.1:{free_port()}"}
        if "live" in kinds:
            collector = stack.enter_context(run_rotel(None, workdir / "rotel"))
            endpoints["live"] = f"http://127.0.0.1:{collector.http_port}"
        if "black-hole" in kinds:
            endpoints["black-hole"] = f"http://127.0.0.1:{stack.enter_context(black_hole())}"
        for round_ in range(args.rounds):
            for kind in kinds:
                data = run_once(endpoints[kind], args.rate, args.seconds, workdir)
                row = summary(data["times"])
                row["gc2_max_ms"] = max(data["gc2"], default=0.0) * 1e3
                row["gc2_count"] = float(len(data["gc2"]))
                results[kind].append(row)
                if not args.json:
                    print(
                        f"round {round_ + 1} {kind:>10}: median {row['median_ms']:.3f} ms, p99 {row['p99_ms']:.3f} ms, "
                        f"slowest {row['max_ms']:.1f} ms, {row['over_50ms']:.0f} calls > 50 ms; "
                        f"{row['gc2_count']:.0f} full collections, longest {row['gc2_max_ms']:.1f} ms",
                        flush=True,
                    )
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print()
    header = f"{'collector':>10}  {'median ms':>9}  {'p99 ms':>7}  {'slowest ms (each round)':>28}"
    print(f"{header}  {'longest full GC ms':>18}")
    for kind, rows in results.items():
        slowest = ", ".join(f"{r['max_ms']:.1f}" for r in rows)
        print(
            f"{kind:>10}  {statistics.median(r['median_ms'] for r in rows):9.3f}  "
            f"{statistics.median(r['p99_ms'] for r in rows):7.3f}  {slowest:>28}  "
            f"{max(r['gc2_max_ms'] for r in rows):18.1f}"
        )
    if results.get("live"):
        live = max(r["max_ms"] for r in results["live"])
        for kind in ("dead", "black-hole"):
            if results.get(kind):
                worst = max(r["max_ms"] for r in results[kind])
                print(f"slowest call, {kind} / live: {worst / live:.2f}x")


if __name__ == "__main__":
    main()
