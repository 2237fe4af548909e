"""The README's quickstart records into the store as it says, and its walkthrough, run command by command in a new
project, ends with a passing regression test (tests/unit/test_docs.py runs every block)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from chronicle_otel.store import is_store

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```python\n(.*?)^```", README, re.M | re.S)
QUICKSTART = README[README.index("## Quickstart") :]
WALKTHROUGH = re.search(r"^```sh\n(.*?)^```", QUICKSTART, re.M | re.S)


def test_quickstart_records_into_the_store(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHRONICLE_", "OTEL_"))}
    env["PYTHONPATH"] = str(REPO)
    out = subprocess.run([sys.executable, "-c", BLOCKS[0]], cwd=tmp_path, env=env, capture_output=True, text=True)
    lines = out.stdout.splitlines()
    trace_id, root, count, status = lines[0].split()
    assert len(trace_id) == 32 and root == "__main__.run_agent" and count == "3" and status == "UNSET"
    assert sorted(line.split()[0] for line in lines[1:]) == ["__main__.place_order", "__main__.run_agent", "plan"]
    assert is_store(tmp_path / ".chronicle")


def test_the_quickstart_walkthrough_ends_with_a_passing_regression_test(tmp_path: Path) -> None:
    assert WALKTHROUGH is not None, "the Quickstart has no sh block of commands"
    (tmp_path / "my_agent.py").write_text(BLOCKS[0], encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHRONICLE_", "OTEL_"))}
    env["PYTHONPATH"] = str(REPO)
    programs = {
        "python": [sys.executable],
        "chronicle": [sys.executable, "-m", "chronicle_otel.cli"],
        "pytest": [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"],
    }
    outputs = []
    for line in WALKTHROUGH.group(1).splitlines():
        program, *args = shlex.split(line, comments=True)
        if program == "pip":
            assert args == ["install", "pytest"]  # the dev environment has it
            continue
        command = [*programs[program], *args]
        out = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, f"{line}\n{out.stdout}\n{out.stderr}"
        assert program != "chronicle" or "warning" not in out.stderr, f"{line}\n{out.stderr}"
        outputs.append(out.stdout)
    assert outputs[0].split()[1] == "my_agent.run_agent"  # a module's name, which the test can import
    assert "1 passed" in outputs[-1]
