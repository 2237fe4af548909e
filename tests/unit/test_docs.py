"""Every ```python block of README.md and docs/**/*.md runs as written; the generated reference is current.

A block that needs a model service, a network or a framework the dev environment lacks is written ```py instead
and is not run.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
BLOCKS = [
    (page.relative_to(REPO).as_posix(), index, code)
    for page in PAGES
    for index, code in enumerate(re.findall(r"^```python\n(.*?)^```", page.read_text(encoding="utf-8"), re.M | re.S))
]


def run_block(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run one block in a fresh interpreter in ``cwd``, with no CHRONICLE_/OTEL_ setting and no reachable S3."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHRONICLE_", "OTEL_"))}
    env["PYTHONPATH"] = str(REPO)
    # An example that names object storage talks to a dead loopback port, never to a real endpoint.
    env.update(AWS_ENDPOINT_URL_S3="http://127.0.0.1:9", AWS_ACCESS_KEY_ID="example", AWS_SECRET_ACCESS_KEY="example")
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_docs_have_examples() -> None:
    # The README alone had 12 executed blocks before the docs were split out of it; none may be lost.
    assert len(BLOCKS) >= 12


@pytest.mark.parametrize(("page", "index", "code"), BLOCKS, ids=[f"{p}:{i}" for p, i, _ in BLOCKS])
def test_docs_example_runs(page: str, index: int, code: str, tmp_path: Path) -> None:
    result = run_block(code, tmp_path)
    assert result.returncode == 0, f"{page} example {index} failed:\n{code}\n{result.stderr}"
    assert "Traceback" not in result.stderr


def test_environment_reference_is_current() -> None:
    spec = importlib.util.spec_from_file_location("gen_reference", REPO / "scripts" / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    gen_reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_reference)
    committed = (REPO / "docs" / "reference" / "environment.md").read_text(encoding="utf-8")
    assert committed == gen_reference.render(), (
        "docs/reference/environment.md is out of date: run scripts/gen_reference.py"
    )


def test_replay_report_reference_lists_every_finding_kind_once() -> None:
    from chronicle_otel.replaying import DriftCause, FindingKind

    spec = importlib.util.spec_from_file_location("gen_reference", REPO / "scripts" / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    gen_reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_reference)
    committed = (REPO / "docs" / "reference" / "replay-report.md").read_text(encoding="utf-8")
    assert committed == gen_reference.render_findings(), (
        "docs/reference/replay-report.md is out of date: run scripts/gen_reference.py"
    )
    kinds, causes = committed.split("The `cause` of a drift")
    listed = re.findall(r"^\| `([a-z-]+)` \|", kinds, re.M)
    assert listed == [kind.value for kind in FindingKind] and len(set(listed)) == len(listed)
    assert re.findall(r"^\| `([a-z-]+)` \|", causes, re.M) == [cause.value for cause in DriftCause]


def test_zero_code_examples_say_http_protobuf_for_the_otlp_http_port() -> None:
    # Under opentelemetry-instrument the exporter speaks gRPC unless told otherwise: sent to a collector's OTLP/HTTP
    # port (4318) that delivers no trace at all, while the local store still fills up.
    examples = [
        (page, block)
        for page in PAGES
        for block in re.findall(r"^```sh\n(.*?)^```", page.read_text(encoding="utf-8"), re.M | re.S)
        if "opentelemetry-instrument" in block
    ]
    assert examples
    for page, block in examples:
        if ":4318" in block:
            assert "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf" in block, f"{page.relative_to(REPO)}:\n{block}"
