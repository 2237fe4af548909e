"""What the ``chronicle`` command writes around its results: a reader that stops early (``| head -1``) ends it quietly,
progress bars only on a terminal's stderr, ``pull`` in words by default and in JSON on request."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import chronicle_otel as chronicle
from chronicle_otel.cli import _commands, _output
from tests.conftest import Recorder
from tests.unit.agents import record_support
from tests.unit.cli.command import TTY, run

REPO = Path(__file__).resolve().parents[3]


@chronicle.boundary(kind="tool", name="pipe.step")
def step(i: int) -> str:
    return f"step {i} " + "x" * 80


@chronicle.boundary(kind="agent", name="pipe.agent")
def many_steps(n: int) -> int:
    return sum(len(step(i)) for i in range(n))


def chronicle_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "chronicle_otel.cli", *args]


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("CHRONICLE_", "OTEL_"))} | {"NO_COLOR": "1"}


@pytest.fixture
def big_store(recorder: Recorder) -> str:
    """A store whose trace shows as far more than a pipe's buffer (64 KiB), so writes go on after a reader quits."""
    many_steps(1500)
    recorder.config.force_flush()
    return str(recorder.path)


def test_a_closed_pipe_ends_every_command_quietly(big_store: str) -> None:
    for args in (["show", "latest"], ["show", "latest", "--full"], ["list"], ["diff", "latest", "latest"]):
        read, write = os.pipe()
        os.close(read)  # the reader is gone before the first write: every write fails
        try:
            proc = subprocess.run(
                chronicle_cmd(*args, "--store", big_store),
                stdout=write,
                stderr=subprocess.PIPE,
                text=True,
                env=env(),
                timeout=120,
            )
        finally:
            os.close(write)
        assert proc.returncode == _commands.EXIT_BROKEN_PIPE == 141, (args, proc.stderr)
        assert proc.stderr == "", (args, proc.stderr)


def test_head_one_reads_a_line_and_the_command_ends_quietly(big_store: str) -> None:
    for _ in range(5):
        proc = subprocess.Popen(
            chronicle_cmd("show", "latest", "--store", big_store),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env(),
        )
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()
        proc.stdout.close()  # what head -1 does after its line
        err = proc.stderr.read()
        proc.stderr.close()
        assert proc.wait(timeout=120) == 141  # the output is larger than the pipe: writes go on after the close
        assert first.startswith(b"trace ") and err == b""


def test_the_python_api_caller_sees_the_broken_pipe_as_an_exit_status(recorder: Recorder) -> None:
    record_support(recorder, "refund")

    class Closed(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError

    assert _commands.main(["show", "latest", "--store", str(recorder.path)], out=Closed()) == 141


def test_progress_only_on_a_terminal(recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    record_support(recorder, "refund")
    tty = TTY()
    monkeypatch.setattr(sys, "stderr", tty)
    out = io.StringIO()
    assert _commands.main(["list", "--store", str(recorder.path), "--contains", "refund"], out=out) == 0
    assert "searching traces" in tty.getvalue() and "\x1b[" in tty.getvalue()
    assert "searching" not in out.getvalue()
    plain = io.StringIO()
    monkeypatch.setattr(sys, "stderr", plain)
    assert _commands.main(["list", "--store", str(recorder.path), "--contains", "refund"], out=io.StringIO()) == 0
    assert plain.getvalue() == ""
    with _output.progress("counting", 3, stream=io.StringIO()) as update:
        update(1)  # not a terminal: nothing drawn, nothing raised


def test_pull_says_what_it_wrote_and_gives_json_on_request(recorder: Recorder, tmp_path: Path) -> None:
    tid = record_support(recorder, "refund")
    source = chronicle.write_trace(chronicle.load_trace(recorder.store, tid), tmp_path / "incident.jsonl")
    code, out, err = run("pull", tid, "--from", str(source), "-o", str(tmp_path / "p.jsonl"))
    assert code == 0
    assert out == f"wrote {tmp_path / 'p.jsonl'}: trace {tid}, 4 spans, 4 boundaries; complete\n"
    assert err == "fetched 4 spans\n"
    code, out, err = run("pull", tid, "--from", str(source), "-o", str(tmp_path / "q.jsonl"), "--json", "--quiet")
    assert code == 0 and err == ""
    assert json.loads(out)["complete"] is True and json.loads(out)["boundaries"] == 4


def test_pull_draws_its_progress_on_a_terminal(
    recorder: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tid = record_support(recorder, "refund")
    source = chronicle.write_trace(chronicle.load_trace(recorder.store, tid), tmp_path / "incident.jsonl")
    tty = TTY()
    monkeypatch.setattr(sys, "stderr", tty)
    assert _commands.main(["pull", tid, "--from", str(source), "-o", str(tmp_path / "p.jsonl")], out=io.StringIO()) == 0
    assert "fetching spans" in tty.getvalue() and tty.getvalue().endswith("fetched 4 spans\n")
