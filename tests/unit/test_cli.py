from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import chronicle_otel as chronicle
from chronicle_otel.cli import main
from tests.conftest import Recorder

REPO = Path(__file__).resolve().parents[2]


@chronicle.boundary(kind="llm", name="cli.ask")
def ask(question: str) -> str:
    return question.upper()


@chronicle.boundary(kind="agent", name="cli.agent")
def cli_agent(question: str, fail: bool = False) -> str:
    answer = ask(question)
    if fail:
        raise RuntimeError("agent failed")
    return answer


def run(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(args), out=out)
    return code, out.getvalue()


def test_list_show_and_failed_filter(recorder: Recorder) -> None:
    cli_agent("hello")
    with pytest.raises(RuntimeError):
        cli_agent("boom", fail=True)
    recorder.config.force_flush()
    store = str(recorder.path)
    code, out = run("list", "--store", store)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("trace id") and len(lines) == 3
    assert "ERROR" in lines[1] and "cli.agent" in lines[1]
    code, out = run("list", "--store", store, "--failed")
    assert len(out.splitlines()) == 2
    code, out = run("show", "latest-failed", "--store", store)
    assert code == 0
    assert "agent     cli.agent[0]" in out and "llm       cli.ask[0]" in out
    assert "err: " in out and "agent failed" in out


def test_unknown_trace_is_a_clear_error(recorder: Recorder, capsys: pytest.CaptureFixture[str]) -> None:
    cli_agent("x")
    recorder.config.force_flush()
    code, _ = run("show", "0" * 32, "--store", str(recorder.path))
    assert code == 2
    assert "not found" in capsys.readouterr().err


def test_gen_test_writes_a_test_that_runs_as_is(recorder: Recorder, tmp_path: Path) -> None:
    cli_agent("hello")
    recorder.config.force_flush()
    out_dir = tmp_path / "regressions"
    code, out = run("gen-test", "latest", "--store", str(recorder.path), "--out", str(out_dir))
    assert code == 0
    written = json.loads(out)
    test_file, trace_file = Path(written["test"]), Path(written["trace"])
    assert test_file.exists() and trace_file.exists()
    source = test_file.read_text()
    assert "import tests.unit.test_cli" in source
    assert '@pytest.mark.chronicle_replay(TRACE, stub={"kind:llm"})' in source
    assert chronicle.load_trace(trace_file).root is not None  # portable: loads without the store
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHRONICLE_", "OTEL_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(test_file), "-q", "-p", "no:cacheprovider", f"--rootdir={REPO}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


def test_gen_test_with_expectations_and_selectors(recorder: Recorder, tmp_path: Path) -> None:
    cli_agent("hello")
    recorder.config.force_flush()
    args = ["gen-test", "latest", "--store", str(recorder.path), "--out", str(tmp_path), "--name", "Greeting Bug"]
    args += [
        "--stub",
        "cli.ask",
        "--live",
        "cli.agent",
        "--expect",
        "result == 'HELLO'",
        "--expect",
        "len(result) == 5",
    ]
    code, _out = run(*args)
    assert code == 0
    source = (tmp_path / "test_greeting_bug.py").read_text()
    assert 'stub={"cli.ask"}, live={"cli.agent"}' in source
    assert "    assert result == 'HELLO'\n    assert len(result) == 5\n" in source
    compile(source, "test_greeting_bug.py", "exec")


def test_gen_test_from_a_file(recorder: Recorder, tmp_path: Path) -> None:
    cli_agent("hello")
    recorder.config.force_flush()
    saved = chronicle.load_trace(recorder.store, "latest").save(tmp_path / "incident.jsonl")
    code, out = run("gen-test", "-", "--file", str(saved), "--out", str(tmp_path / "t"))
    assert code == 0 and Path(json.loads(out)["test"]).exists()


def test_pull_from_a_collector_file_then_replay(recorder: Recorder, tmp_path: Path) -> None:
    import struct

    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    cli_agent("a question long enough " * 500)  # the input is cut on the span
    recorder.config.force_flush()
    message = encode_spans(recorder.spans()).SerializeToString()
    (tmp_path / "collector.pb").write_bytes(struct.pack(">I", len(message)) + message)
    tid = recorder.store.list_traces()[0].trace_id
    code, out = run(
        "pull",
        tid,
        "--from",
        str(tmp_path / "collector.pb"),
        "-o",
        str(tmp_path / "t.jsonl"),
        "--store",
        str(recorder.path),
    )
    assert code == 0
    summary = json.loads(out)
    assert summary == {
        "trace": tid,
        "file": str(tmp_path / "t.jsonl"),
        "spans": 2,
        "boundaries": 2,
        "rehydrated": 4,  # input and output of both boundaries
        "missing_payloads": 0,
    }
    trace = chronicle.load_trace(tmp_path / "t.jsonl", store=tmp_path / "nowhere")
    with chronicle.replay(trace) as replay_run:
        assert replay_run.rerun() == ("a question long enough " * 500).upper()
    assert replay_run.report.ok
