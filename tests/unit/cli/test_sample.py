"""``chronicle sample``: the demo's bad run sampled with each guardrail, the table and the JSON, recorded samples, the
pass-rate gate, and modules imported only when named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import chronicle_otel as chronicle
from examples.stock_agent import agent
from tests.conftest import Recorder
from tests.unit.cli.command import run

REPO = Path(__file__).resolve().parents[3]
CHECK = "examples.stock_agent.checks:no_oversell"


pytestmark = pytest.mark.usefixtures("fresh_model")


def sample(recorder: Recorder, trace: chronicle.Trace, *args: str) -> tuple[int, str, str]:
    return run("sample", trace.trace_id[:8], "--store", str(recorder.path), "--live", "plan", *args)


def test_the_table_says_how_many_samples_oversell_with_each_guardrail(
    recorder: Recorder, bad_run: chronicle.Trace, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = sample(recorder, bad_run, "-n", "20", "--check", CHECK, "--import", "examples.stock_agent.agent")
    assert code == 0 and err == "", err
    lines = out.splitlines()
    assert lines[0] == (
        f"sampled run_agent[0] > plan[0] of trace {bad_run.trace_id} 20 times, everything before it frozen as recorded "
        "(LLM calls after it: answered from the recording)"
    )
    assert lines[1].split() == ["#", "count", "share", "check", "outcome"]
    assert lines[2].split()[:4] == ["1", "15", "75%", "pass"] and lines[3].split()[:4] == ["2", "5", "25%", "FAIL"]
    assert "  #2 $.receipt.order.quantity: #1 5 != #2 1000" in lines
    assert lines[-1].startswith("pass rate 75% (15/20); live model calls 20 (limit 40); tokens n/a")

    monkeypatch.setenv("STOCK_AGENT_GUARDRAIL", "v2")
    agent.SimulatedLLM.reset()
    code, out, _ = sample(recorder, bad_run, "-n", "20", "--check", CHECK, "--json")
    report = json.loads(out)
    assert code == 0 and report["pass_rate"] == 1.0 and report["live_calls"] == 20
    assert [(o["count"], o["passed"]) for o in report["outcomes"]] == [(15, 15), (5, 5)]
    assert "'blocked'" in report["outcomes"][1]["summary"] and report["samples"][0]["report"]["ok"] is True


def test_min_pass_rate_fails_the_command_below_it(recorder: Recorder, bad_run: chronicle.Trace) -> None:
    code, _, err = sample(recorder, bad_run, "-n", "20", "--check", CHECK, "--min-pass-rate", "0.95")
    assert code == 1 and "chronicle: pass rate 75% is below --min-pass-rate 95%" in err
    agent.SimulatedLLM.reset()
    assert sample(recorder, bad_run, "-n", "20", "--check", CHECK, "--min-pass-rate", "0.75")[0] == 0
    code, _, err = sample(recorder, bad_run, "--min-pass-rate", "0.5")
    assert code == 2 and "--min-pass-rate" in err and "with --check" in err


def test_recorded_samples_are_listed_as_replays(recorder: Recorder, bad_run: chronicle.Trace) -> None:
    code, out, _ = sample(recorder, bad_run, "-n", "3", "--record", "--json")
    assert code == 0
    ids = {s["trace_id"] for s in json.loads(out)["samples"]}
    code, listed, _ = run("list", "--store", str(recorder.path), "--replays", "--json")
    replays = [t for t in map(json.loads, listed.splitlines()) if t.get("replay_of") == bad_run.trace_id]
    assert code == 0 and {t["trace_id"] for t in replays} == ids and len(ids) == 3


def test_bad_arguments_name_their_option(recorder: Recorder, bad_run: chronicle.Trace) -> None:
    for args, said in (
        (["--live", "plam"], "--live"),
        (["-n", "0"], "-n"),
        (["--max-calls", "3"], "--max-calls"),
        (["--check", "examples.stock_agent.checks"], "--check"),
        (["--check", "examples.stock_agent.checks:nothing_here"], "--check"),
        (["--import", "no-such module"], "--import"),
        (["--import", "examples.stock_agent.no_such_module"], "--import examples.stock_agent.no_such_module"),
    ):
        code, out, err = run("sample", bad_run.trace_id, "--store", str(recorder.path), "--live", "plan", *args)
        assert code == 2 and out == "" and said in err, (args, err)


def test_the_agent_is_imported_only_when_named(recorder: Recorder, bad_run: chronicle.Trace) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHRONICLE_", "OTEL_", "STOCK_AGENT_"))}
    env["PYTHONPATH"] = str(REPO)
    command = [sys.executable, "-m", "chronicle_otel.cli", "sample", bad_run.trace_id, "--store", str(recorder.path)]
    command += ["--live", "plan", "-n", "4"]
    proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "no boundary named 'run_agent' is defined in this process" in proc.stderr
    assert proc.stderr.rstrip().endswith("name it with --import MODULE")
    proc = subprocess.run(
        [*command, "--import", "examples.stock_agent.agent"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0 and "sampled run_agent[0] > plan[0]" in proc.stdout, proc.stderr
