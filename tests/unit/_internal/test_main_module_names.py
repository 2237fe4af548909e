"""Code run with ``python -m package.module`` is recorded under its import name, not ``__main__``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

APP = """
import dataclasses
import chronicle_otel as chronicle


@dataclasses.dataclass
class Reply:
    text: str


@chronicle.boundary(kind="tool")
def answer(question: str) -> Reply:
    return Reply(question.upper())


if __name__ == "__main__":
    config = chronicle.configure(store="store")
    answer("hi")
    config.force_flush()
    boundary = chronicle.load_trace("store", "latest").boundaries[0]
    print(boundary.name)
    print(boundary.raw_output.text)
"""


def _run(tmp_path: Path, *args: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHRONICLE_", "OTEL_"))}
    env["PYTHONPATH"] = f"{REPO}{os.pathsep}{tmp_path}"
    out = subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def test_a_module_run_with_dash_m_is_recorded_under_its_import_name(tmp_path: Path) -> None:
    (tmp_path / "deskapp").mkdir()
    (tmp_path / "deskapp" / "__init__.py").write_text("")
    (tmp_path / "deskapp" / "agent.py").write_text(APP)
    name, output = _run(tmp_path, "-m", "deskapp.agent")
    assert name == "deskapp.agent.answer"
    assert '"class":"deskapp.agent.Reply"' in output


def test_a_script_run_by_path_stays_main(tmp_path: Path) -> None:
    (tmp_path / "script.py").write_text(APP)
    name, output = _run(tmp_path, "script.py")
    assert name == "__main__.answer"
    assert '"class":"__main__.Reply"' in output


FAILING_APP = """
import chronicle_otel as chronicle


class RateLimited(Exception):
    pass


@chronicle.boundary(kind="llm", name="ask")
def ask(question: str) -> str:
    raise RateLimited("429 slow down")


@chronicle.boundary(kind="agent", name="agent")
def agent(question: str) -> str:
    try:
        return ask(question)
    except RateLimited:
        return "fallback"


if __name__ == "__main__":
    config = chronicle.configure(store="store")
    print(agent("hi"))
    config.force_flush()
"""

REPLAY = """
import chronicle_otel as chronicle
import bot.main

trace = chronicle.load_trace("store", "latest")
(ask,) = [b for b in trace.boundaries if b.name == "ask"]
print(ask.raw_error.text)
with chronicle.replay(trace) as run:
    print(run.rerun())
print(run.report.ok, [str(f) for f in run.report.divergences])
"""


def test_an_exception_raised_under_dash_m_is_recorded_under_its_import_name_and_replays(tmp_path: Path) -> None:
    (tmp_path / "bot").mkdir()
    (tmp_path / "bot" / "__init__.py").write_text("")
    (tmp_path / "bot" / "main.py").write_text(FAILING_APP)
    assert _run(tmp_path, "-m", "bot.main") == ["fallback"]
    (tmp_path / "replay_it.py").write_text(REPLAY)
    error, result, report = _run(tmp_path, "replay_it.py")
    assert '"type":"bot.main.RateLimited"' in error
    # the stub raises the real class again, so the agent's ``except RateLimited`` takes the same branch
    assert result == "fallback"
    assert report == "True []"
