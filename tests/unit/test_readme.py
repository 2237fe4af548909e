"""The README's quickstart records into the store as it says (tests/unit/test_docs.py runs every block)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from chronicle_otel.store import is_store

REPO = Path(__file__).resolve().parents[2]
BLOCKS = re.findall(r"^```python\n(.*?)^```", (REPO / "README.md").read_text(encoding="utf-8"), re.M | re.S)


def test_quickstart_records_into_the_store(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHRONICLE_", "OTEL_"))}
    env["PYTHONPATH"] = str(REPO)
    out = subprocess.run([sys.executable, "-c", BLOCKS[0]], cwd=tmp_path, env=env, capture_output=True, text=True)
    lines = out.stdout.splitlines()
    trace_id, root, count, status = lines[0].split()
    assert len(trace_id) == 32 and root == "__main__.run_agent" and count == "3" and status == "UNSET"
    assert sorted(line.split()[0] for line in lines[1:]) == ["__main__.place_order", "__main__.run_agent", "plan"]
    assert is_store(tmp_path / ".chronicle")
