"""``chronicle gen-test`` checks selectors and override keys against the trace, and writes what-if overrides and
extra imports into a test that runs as written."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import chronicle_otel as chronicle
from chronicle_otel.cli import main
from tests.conftest import Recorder

REPO = Path(__file__).resolve().parents[3]


@chronicle.boundary(kind="llm", name="gt.price")
def price(symbol: str) -> float:
    return 190.0


@chronicle.boundary(kind="agent", name="gt.agent")
def gt_agent(symbol: str, budget: float = 1000.0) -> str:
    quantity = int(budget // price(symbol))
    return "too expensive" if quantity == 0 else f"buy {quantity}"


def gen_test(recorder: Recorder, out_dir: Path, *options: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = sys.stderr
    sys.stderr = err
    try:
        argv = ["gen-test", "latest", "--store", str(recorder.path), "--out", str(out_dir), "--json", *options]
        code = main(argv, out=out)
    finally:
        sys.stderr = old
    return code, out.getvalue(), err.getvalue()


def run_pytest(test_file: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHRONICLE_", "OTEL_"))}
    return subprocess.run(
        [sys.executable, "-m", "pytest", test_file, "-q", "-p", "no:cacheprovider", f"--rootdir={REPO}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--stub", "kind:lm", "invalid value for --stub: 'kind:lm'; expected one of 'kind:llm'"),
        ("--stub", "gt.prise", "invalid value for --stub: 'gt.prise'; expected a name or glob matching a recorded"),
        ("--live", "nothing.*", "invalid value for --live: 'nothing.*'"),
        ("--override", "gt.prise[0]=1.0", "invalid value for override: 'gt.prise[0]'"),
        ("--override", "gt.price[0]", "expected KEY=PYTHON_EXPR"),
        ("--override", "gt.price[0]=1 +", "is not a Python expression"),
        ("--import", "os.system('x')", "is not one import statement"),
        ("--ignore", "question", "--ignore: invalid value for ignore: 'question'; expected a path starting with '$'"),
        ("--strict", "kind:llm=inputs", "--strict: invalid value for strict"),
    ],
)
def test_bad_options_write_nothing(recorder: Recorder, tmp_path: Path, option: str, value: str, message: str) -> None:
    gt_agent("MSFT")
    recorder.config.force_flush()
    code, out, err = gen_test(recorder, tmp_path / "out", option, value)
    assert code == 2 and out == ""
    assert message in err
    assert not (tmp_path / "out").exists()


def test_an_override_and_an_import_run_as_written(recorder: Recorder, tmp_path: Path) -> None:
    gt_agent("MSFT")
    recorder.config.force_flush()
    code, out, _err = gen_test(
        recorder,
        tmp_path / "out",
        "--override",
        "gt.price[0]=lambda recorded: recorded * float(Decimal('10'))",
        "--import",
        "from decimal import Decimal",
        "--expect",
        "result == 'too expensive'",
    )
    assert code == 0
    test_file = json.loads(out)["test"]
    source = Path(test_file).read_text()
    assert "from decimal import Decimal\n" in source
    assert "override=OVERRIDES" in source and '"gt.price[0]": (' in source
    proc = run_pytest(test_file)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--import", "from __future__ import annotations", "__future__"),
        ("--import", "import os as pytest", "would replace 'pytest'"),
        ("--import", "from os import *", "no *"),
        ("--expect", "await result", "would not compile"),
        ("--override", "gt.price[0]=(yield 1)", "would not compile"),
    ],
)
def test_a_test_that_would_not_run_is_not_written(
    recorder: Recorder, tmp_path: Path, option: str, value: str, message: str
) -> None:
    gt_agent("MSFT")
    recorder.config.force_flush()
    code, _out, err = gen_test(recorder, tmp_path / "out", option, value)
    assert code == 2 and message in err
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("test_*.py"))


def test_an_overridden_call_is_not_listed_as_live(recorder: Recorder, tmp_path: Path) -> None:
    gt_agent("MSFT")
    recorder.config.force_flush()
    code, _out, err = gen_test(recorder, tmp_path / "a", "--live", "gt.price")
    assert code == 0 and '"gt.price"' in err  # selected live: listed
    code, _out, err = gen_test(recorder, tmp_path / "b", "--live", "gt.price", "--override", "gt.price[0]=1.0")
    assert code == 0 and '"gt.agent"' in err  # the root still runs live
    assert '"gt.price"' not in err  # the override answers it: not a live call


@chronicle.boundary(kind="agent", name="gt.stream_root")
def stream_root(symbol: str) -> Any:
    yield price(symbol)
    yield price(symbol) * 2


@chronicle.boundary(kind="agent", name="gt.astream_root")
async def astream_root(symbol: str) -> Any:
    yield price(symbol)


@pytest.mark.parametrize(
    ("record", "expect"),
    [
        (lambda: list(stream_root("MSFT")), "result == [190.0, 380.0]"),
        (lambda: asyncio.run(_drain(astream_root("MSFT"))), "result == [190.0]"),
    ],
)
def test_a_generator_root_is_asserted_on_its_items(
    recorder: Recorder, tmp_path: Path, record: Any, expect: str
) -> None:
    record()
    recorder.config.force_flush()
    code, out, _err = gen_test(recorder, tmp_path / "out", "--expect", expect, "--json")
    assert code == 0
    proc = run_pytest(json.loads(out)["test"])
    assert proc.returncode == 0, proc.stdout + proc.stderr


async def _drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


def test_an_existing_test_is_not_replaced_without_force(recorder: Recorder, tmp_path: Path) -> None:
    gt_agent("MSFT")
    recorder.config.force_flush()
    assert gen_test(recorder, tmp_path / "out", "--name", "cap")[0] == 0
    edited = tmp_path / "out" / "test_cap.py"
    edited.write_text(edited.read_text() + "\n# my edit\n")
    code, _out, err = gen_test(recorder, tmp_path / "out", "--name", "cap")
    assert code == 2 and "exists" in err and "# my edit" in edited.read_text()
    assert "LIVE" not in err  # refused before anything else is said
    assert gen_test(recorder, tmp_path / "out", "--name", "cap", "--force")[0] == 0
    assert "# my edit" not in edited.read_text()


def test_boundaries_recorded_under_main_are_warned_about(recorder: Recorder, tmp_path: Path) -> None:
    @chronicle.boundary(kind="agent", name="__main__.run_agent")  # what a script run by path records, unnamed
    def run_agent(task: str) -> str:
        return task

    run_agent("sell")
    recorder.config.force_flush()
    code, _out, err = gen_test(recorder, tmp_path / "out")
    assert code == 0
    assert "__main__.run_agent were recorded from a script run by path" in err and "python -m yourapp" in err
