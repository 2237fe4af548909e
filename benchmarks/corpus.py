"""Corpus replay: what replaying a whole corpus of recorded traces costs per trace, beyond the agent's own code.

The demo's stock agent (``examples/stock_agent``, its model simulated and seeded) is recorded ``--traces`` times
into a local store with the guardrail as shipped (v1); then, with the fixed guardrail (v2):

  agent_alone     one run of the agent with recording off: the agent's own code (and its simulated model)
  load+replay     in process: each trace loaded from the store and replayed (``replay_for_corpus``): per trace
  overhead        load+replay minus agent_alone: what the corpus adds per trace
  pytest          ``pytest --chronicle-corpus STORE --chronicle-corpus-only`` wall time per trace, in 1 process
                  and with ``-n 2`` (pytest-xdist): the run of the whole corpus minus a run of 2 traces (the
                  start-up, said apart), divided by the traces in between
  outcomes        how the traces came out (fixed / still failing / passed…)

Usage: python benchmarks/corpus.py [--traces N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import chronicle_otel as chronicle  # noqa: E402
from chronicle_otel.corpus import Corpus, replay_for_corpus  # noqa: E402
from examples.stock_agent import agent  # noqa: E402

REQUEST = "Sell $1,000 of MSFT"


def _pytest(store: Path, workers: int | None, cwd: Path, limit: int | None = None) -> float:
    (cwd / "conftest.py").write_text("import examples.stock_agent.agent  # noqa: F401\n")
    (cwd / "pytest.ini").write_text("[pytest]\n")
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--chronicle-corpus", str(store)]
    argv += ["--chronicle-corpus-only", f"--rootdir={cwd}", "-c", str(cwd / "pytest.ini")]
    if workers:
        argv += ["-n", str(workers)]
    if limit:
        argv += ["--chronicle-corpus-limit", str(limit)]
    env = {**os.environ, "PYTHONPATH": str(REPO), "STOCK_AGENT_GUARDRAIL": "v2"}
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if "chronicle corpus" not in proc.stdout:
        raise SystemExit(f"pytest did not run the corpus:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=500)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        os.environ["STOCK_AGENT_GUARDRAIL"] = "v1"
        config = chronicle.configure(store=chronicle.StoreOptions(path=store), otlp=False)
        for seed in range(args.traces):
            agent.run_agent(REQUEST, seed=seed)
        config.force_flush()

        os.environ["STOCK_AGENT_GUARDRAIL"] = "v2"
        chronicle.configure(enabled=False, otlp=False)
        start = time.perf_counter()
        for seed in range(args.traces):
            agent.run_agent(REQUEST, seed=seed)
        alone = (time.perf_counter() - start) / args.traces

        corpus = Corpus(store)
        entries = corpus.entries()
        outcomes: Counter[str] = Counter()
        start = time.perf_counter()
        for entry in entries:
            outcomes[str(replay_for_corpus(corpus.load(entry), options={"emit_spans": False}).outcome)] += 1
        replayed = (time.perf_counter() - start) / len(entries)
        corpus.close()

        work = Path(tmp) / "project"
        work.mkdir()
        n = len(entries)
        fixed = {workers: _pytest(store, workers, work, limit=2) for workers in (None, 2)}  # start-up, collection
        serial = (_pytest(store, None, work) - fixed[None]) / (n - 2)
        parallel = (_pytest(store, 2, work) - fixed[2]) / (n - 2)

    results = {
        "traces": len(entries),
        "agent_alone_ms": alone * 1e3,
        "load_replay_ms": replayed * 1e3,
        "overhead_ms": (replayed - alone) * 1e3,
        "pytest_startup_s": fixed[None],
        "pytest_n2_startup_s": fixed[2],
        "pytest_ms_per_trace": serial * 1e3,
        "pytest_n2_ms_per_trace": parallel * 1e3,
        "outcomes": dict(outcomes),
    }
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"corpus of {results['traces']} traces of the demo agent (fixed guardrail replaying v1 recordings)")
    print(f"  agent alone        {results['agent_alone_ms']:8.2f} ms per run")
    print(f"  load + replay      {results['load_replay_ms']:8.2f} ms per trace (in process)")
    print(f"  overhead           {results['overhead_ms']:8.2f} ms per trace beyond the agent's own code")
    print(
        f"  pytest             {results['pytest_ms_per_trace']:8.2f} ms per trace "
        f"(1 process; start-up {results['pytest_startup_s']:.1f} s once)"
    )
    print(
        f"  pytest -n 2        {results['pytest_n2_ms_per_trace']:8.2f} ms per trace "
        f"(start-up {results['pytest_n2_startup_s']:.1f} s once)"
    )
    print("  outcomes           " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
