"""Code run with ``python -m package.module`` is recorded under its import name, not ``__main__``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

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
