"""Every ```python block of the README runs as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from chronicle_otel.store import is_store

REPO = Path(__file__).resolve().parents[2]
BLOCKS = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(encoding="utf-8"), re.DOTALL)


def test_readme_has_examples() -> None:
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index: int, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHRONICLE_", "OTEL_"))}
    env["PYTHONPATH"] = str(REPO)
    # An example that names object storage talks to a dead loopback port, never to a real endpoint.
    env.update(AWS_ENDPOINT_URL_S3="http://127.0.0.1:9", AWS_ACCESS_KEY_ID="example", AWS_SECRET_ACCESS_KEY="example")
    result = subprocess.run(
        [sys.executable, "-c", BLOCKS[index]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"README example {index} failed:\n{BLOCKS[index]}\n{result.stderr}"
    assert "Traceback" not in result.stderr


def test_quickstart_records_into_the_store(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHRONICLE_", "OTEL_"))}
    env["PYTHONPATH"] = str(REPO)
    out = subprocess.run([sys.executable, "-c", BLOCKS[0]], cwd=tmp_path, env=env, capture_output=True, text=True)
    lines = out.stdout.splitlines()
    trace_id, root, count, status = lines[0].split()
    assert len(trace_id) == 32 and root == "__main__.run_agent" and count == "3" and status == "UNSET"
    assert sorted(line.split()[0] for line in lines[1:]) == ["__main__.place_order", "__main__.run_agent", "plan"]
    assert is_store(tmp_path / ".chronicle")
