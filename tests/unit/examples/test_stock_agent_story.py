"""The README's first command: the whole story, end to end, on the embedded store."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

import chronicle_otel as chronicle
from examples.stock_agent import agent
from tests.conftest import Recorder

REPO = Path(__file__).resolve().parents[3]


# The simulated model answers each seed's first request the same in every process: these tests record first answers.
pytestmark = pytest.mark.usefixtures("fresh_model")


def test_demo_story_end_to_end(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHRONICLE_", "OTEL_", "STOCK_AGENT_"))}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "examples.stock_agent.demo",
            "--store",
            str(tmp_path / "store"),
            "--out",
            str(tmp_path / "reg"),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "<-- sold $190,420, not $1,000" in out
    assert "old guardrail (v1)     -> FAILS" in out
    assert "fixed guardrail (v2)   -> passes" in out
    assert "simulated model calls during replay: 0" in out
    assert len(list((tmp_path / "reg").glob("test_run_agent_*.py"))) == 1
    assert "5. What if the model had said 100,000 shares?" in out
    assert "old guardrail (v1)     -> filled  sold for $19,042,000" in out
    assert "fixed guardrail (v2)   -> blocked $19,042,000.00 is above the $10,000 limit" in out
    assert "6. How often does the model still over-sell?" in out
    assert "  2      5    25%  FAIL   Result(status='filled'" in out
    assert "old guardrail (v1)     -> 5 of 20 samples over-sell (0 blocked)" in out
    assert "fixed guardrail (v2)   -> 0 of 20 samples over-sell (5 blocked)" in out


def test_generated_style_replay_in_process_counts_zero_model_calls(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STOCK_AGENT_GUARDRAIL", "v1")
    bad = agent.run_agent("Sell $1,000 of MSFT", seed=1)
    assert bad.status == "filled" and bad.receipt.order.quantity == 1000
    recorder.config.force_flush()
    trace = chronicle.load_trace(recorder.store, "latest")
    before = agent.SimulatedLLM.calls
    with chronicle.replay(trace, stub={"kind:llm"}, live={"place_order"}) as run:
        assert run.rerun().status == "filled"  # v1 reproduces the incident
    assert run.report.ok and run.report.changes == []
    monkeypatch.setenv("STOCK_AGENT_GUARDRAIL", "v2")
    with chronicle.replay(trace, stub={"kind:llm"}, live={"place_order"}) as run:
        result = run.rerun()
    assert result.status == "blocked"
    assert run.report.ok, run.report  # no divergence, no unused recording
    # the fix declares itself (chronicle.changed("guardrail-v2")): what it explains is intended, not drift
    assert run.report.drift == [] and run.report.changes == []
    assert {(f.call_key[-1][0], f.change) for f in run.report.intended} == {
        (name, "guardrail-v2") for name in ("check_order", "place_order", "finalize", "run_agent")
    }
    assert agent.SimulatedLLM.calls == before


def test_what_if_the_model_had_said_100000_shares(recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STOCK_AGENT_GUARDRAIL", "v2")
    good = agent.run_agent("Sell $1,000 of MSFT", seed=0)
    assert good.status == "filled" and good.receipt.order.quantity < 100
    recorder.config.force_flush()
    trace = chronicle.load_trace(recorder.store, "latest")
    before = agent.SimulatedLLM.calls
    what_if = {"plan[0]": lambda order: dataclasses.replace(order, quantity=100_000)}
    with chronicle.replay(trace, override=what_if) as run:
        result = run.rerun()
    assert result.status == "blocked" and result.receipt.order.quantity == 100_000
    assert "is above the $10,000 limit" in str(result.receipt.reason)
    assert [f.call_key for f in run.report.overrides] == [(("run_agent", 0), ("plan", 0))]
    assert "quantity=100000" in run.report.overrides[0].details[1]
    assert run.report.ok, run.report
    assert agent.SimulatedLLM.calls == before
