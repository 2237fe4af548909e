"""The whole story on the embedded store, no server needed (``make demo``).

1. Record several runs of "Sell $1,000 of MSFT" with the guardrail as shipped (v1). The model is SIMULATED.
2. Find the run that sold 1,000 shares, and show it as recorded.
3. Generate its regression test with ``chronicle gen-test``.
4. Run that test against the old guardrail (it fails) and the fixed one (it passes), with zero model calls.
5. Ask "what if": replay a good run as if the model had said 100,000 shares, against each guardrail.
6. Sample the bad run's model call 20 times from its frozen prefix: how often does it over-sell with each guardrail?
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import chronicle_otel as chronicle
from chronicle_otel.cli import main as chronicle_cli
from examples.stock_agent import agent, checks

REQUEST = "Sell $1,000 of MSFT"
REPO = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--store", default=None, help="store directory (default: $CHRONICLE_HOME or ./.chronicle)")
    parser.add_argument("--out", default="demo-output/regressions", help="where the generated test goes")
    args = parser.parse_args(argv)

    config = chronicle.configure(
        service_name="stock-agent",
        session={"build_id": "2026.11.29+g3e1a7c4", "model_version": "sim-llm-1"},
        store=chronicle.StoreOptions(path=args.store, processor="simple"),
        otlp=False,
    )
    store = config.store
    assert store is not None
    os.environ["STOCK_AGENT_GUARDRAIL"] = "v1"  # the guardrail as it was in production

    print(f"1. Recording {args.runs} runs of {REQUEST!r} (SIMULATED LLM, seeded, temperature 0.7, guardrail v1)")
    print(f"   store: {store.path.resolve()}")
    bad_trace = good_trace = None
    for seed in range(args.runs):
        with chronicle.session(user_id=f"u-{seed}", prompt_version="v12"):
            result = agent.run_agent(REQUEST, seed=seed)
        flag = ""
        if result.receipt.order.quantity > 100:
            flag = f"   <-- sold ${result.receipt.value:,.0f}, not $1,000"
            bad_trace = bad_trace or store.list_traces(limit=1)[0].trace_id
        elif result.status == "filled":
            good_trace = good_trace or store.list_traces(limit=1)[0].trace_id
        print(f"   run {seed}: {result.status:7s} {result.message}{flag}")
    if bad_trace is None:
        print("   no run misread the amount this time; try --runs 12")
        return 1

    print(f"\n2. The bad run, {bad_trace}, as recorded:\n")
    chronicle_cli(["show", bad_trace, "--store", str(store.path)])

    out = Path(args.out)
    print(f"\n3. chronicle gen-test {bad_trace[:8]}… --expect \"result.status == 'blocked'\"")
    written = io.StringIO()
    chronicle_cli(
        [
            "gen-test",
            bad_trace,
            "--store",
            str(store.path),
            "--out",
            str(out),
            "--expect",
            "result.status == 'blocked'",
            "--json",
        ],
        out=written,
    )
    test_file = json.loads(written.getvalue())["test"]
    print(f"   wrote {test_file}:\n")
    print("   " + Path(test_file).read_text().replace("\n", "\n   "))

    print("\n4. The regression test against each guardrail:")
    # Run as in a project of one's own: pytest with an empty configuration, not this repository's development one.
    ini = out / "pytest.ini"
    ini.write_text("[pytest]\n")
    outcomes = {}
    for version in ("v1", "v2"):
        env = {**os.environ, "STOCK_AGENT_GUARDRAIL": version}
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                test_file,
                "-q",
                "-p",
                "no:cacheprovider",
                "-c",
                str(ini),
                f"--rootdir={REPO}",
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
        )
        outcomes[version] = proc.returncode
        summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr.strip()[-200:]
        label = "old guardrail (v1)" if version == "v1" else "fixed guardrail (v2)"
        print(f"   {label:22s} -> {'FAILS' if proc.returncode else 'passes'}   ({summary})")

    trace = chronicle.load_trace(store, bad_trace)
    before = agent.SimulatedLLM.calls
    os.environ["STOCK_AGENT_GUARDRAIL"] = "v2"
    with chronicle.replay(trace, stub={"kind:llm"}, emit_spans=False) as run:
        fixed = run.rerun()
    print(
        f"\n   Replayed in-process with the fix: {fixed.status}; simulated model calls during replay: "
        f"{agent.SimulatedLLM.calls - before}"
    )
    print("   " + str(run.report).replace("\n", "\n   "))
    what_if = _what_if(store, good_trace)
    oversold = _sample(store, bad_trace)
    ok = (
        outcomes == {"v1": 1, "v2": 0}
        and fixed.status == "blocked"
        and what_if in (None, {"v1": "filled", "v2": "blocked"})
        and oversold["v1"] > 0
        and oversold["v2"] == 0
    )
    print("\nThe production failure is now a regression test." if ok else "\nUNEXPECTED: the story did not hold.")
    return 0 if ok else 1


def _what_if(store: chronicle.LocalStore, good_trace: str | None) -> dict[str, str] | None:
    """Step 5: a good run replayed with the model's answer edited, against each guardrail."""
    if good_trace is None:
        return None
    trace = chronicle.load_trace(store, good_trace)
    recorded = next(b for b in trace.boundaries if b.name == "plan").output
    print(
        f"\n5. What if the model had said 100,000 shares? Run {good_trace[:8]}… planned {recorded.quantity} "
        "shares; replayed with override={'plan[0]': ...quantity=100_000}:"
    )
    outcomes = {}
    for version in ("v1", "v2"):
        os.environ["STOCK_AGENT_GUARDRAIL"] = version
        override = {"plan[0]": lambda order: dataclasses.replace(order, quantity=100_000)}
        with chronicle.replay(trace, override=override, emit_spans=False) as run:
            result = run.rerun()
        outcomes[version] = result.status
        label = "old guardrail (v1)" if version == "v1" else "fixed guardrail (v2)"
        receipt = result.receipt
        outcome = receipt.reason if receipt.status == "blocked" else f"sold for ${receipt.value:,.0f}"
        print(f"   {label:22s} -> {result.status:7s} {outcome}")
    return outcomes


def _sample(store: chronicle.LocalStore, bad_trace: str) -> dict[str, int]:
    """Step 6: the bad run's model call sampled live 20 times, everything before it frozen, against each guardrail."""
    print(
        f"\n6. How often does the model still over-sell? chronicle sample {bad_trace[:8]}… --live plan -n 20 "
        f"--check {checks.__name__}:no_oversell --import {agent.__name__}\n"
        "   (plan[0] live 20 times, everything recorded before it frozen; the LLM call after it answered from the "
        "recording):\n"
    )
    trace = chronicle.load_trace(store, bad_trace)
    oversold = {}
    for version in ("v1", "v2"):
        os.environ["STOCK_AGENT_GUARDRAIL"] = version
        agent.SimulatedLLM.reset()  # the model's same 20 answers for each guardrail
        report = chronicle.sample(trace, live="plan", n=20, check=checks.no_oversell)
        if version == "v1":
            print("   " + str(report).replace("\n", "\n   ") + "\n")
        oversold[version] = sum(1 for s in report.samples if s.passed is False)
        blocked = sum(1 for s in report.samples if s.result is not None and s.result.status == "blocked")
        label = "old guardrail (v1)" if version == "v1" else "fixed guardrail (v2)"
        print(f"   {label:22s} -> {oversold[version]} of {report.n} samples over-sell ({blocked} blocked)")
    return oversold


if __name__ == "__main__":
    raise SystemExit(main())
