"""``chronicle gen-test`` writes a test that runs as written, from the project root, with plain ``pytest``: the
recorded types its assertions name are imported, a conftest puts the project root on ``sys.path``, and a failed run
gives a test that expects the recorded exception."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Recorder
from tests.unit.cli.command import run

APP = """
import dataclasses
import json
from decimal import Decimal

import chronicle_otel as chronicle


@dataclasses.dataclass
class Refund:
    refunded: Decimal
    note: str


class RefundError(Exception):
    pass


@chronicle.boundary(kind="llm", name="gtr.decide")
def decide(question: str) -> str:
    return "refund" if "refund" in question else "lookup"


@chronicle.boundary(kind="agent", name="gtr.agent")
def agent(question: str, amount: str = "49.99") -> Refund:
    if decide(question) == "lookup":
        return json.loads(question)  # not JSON: json.decoder.JSONDecodeError, a class of no project module
    if "crash" in question:
        raise ValueError("a builtin error")
    if Decimal(amount) > 100:
        raise RefundError(f"amount {amount} too large")
    return Refund(Decimal(amount), "ok")


@chronicle.boundary(kind="agent", name="gtr.tools")
def tools(question, *names):
    return [decide(question), *names]


class Desk:
    @chronicle.boundary(kind="agent", name="gtr.Desk.open")
    @classmethod
    def open(cls, question: str) -> str:
        return decide(question)

    @chronicle.boundary(kind="agent", name="gtr.Desk.answer")
    def answer(self, question: str) -> str:
        return decide(question)
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A project directory with the package ``gtrapp`` (its boundaries): importable, and the working directory."""
    root = tmp_path / "project"
    (root / "gtrapp").mkdir(parents=True)
    (root / "gtrapp" / "__init__.py").write_text("")
    (root / "gtrapp" / "agent.py").write_text(APP)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.chdir(root)
    yield root
    for name in [m for m in sys.modules if m == "gtrapp" or m.startswith("gtrapp.")]:
        del sys.modules[name]


def recorded(recorder: Recorder, question: str, amount: str = "49.99") -> str:
    from gtrapp import agent  # type: ignore[import-not-found]

    with contextlib.suppress(Exception):  # a failure is recorded
        agent.agent(question, amount)
    recorder.config.force_flush()
    return recorder.store.list_traces(limit=1)[0].trace_id


def plain_pytest(project: Path, *paths: str) -> subprocess.CompletedProcess[str]:
    """``pytest`` as a user types it in the project root: the console script, no PYTHONPATH, no ``-m``."""
    script = Path(sys.executable).with_name("pytest")
    if not script.exists():  # pragma: no cover - the virtualenv has it
        pytest.skip("no pytest console script beside the interpreter")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHRONICLE_", "OTEL_", "PYTHON"))}
    return subprocess.run(
        [str(script), *paths, "-q", "-p", "no:cacheprovider"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def gen_test(recorder: Recorder, trace_id: str, *options: str) -> tuple[int, str, str]:
    return run("gen-test", trace_id, "--store", str(recorder.path), *options)


def test_recorded_types_are_imported_and_plain_pytest_runs_it(recorder: Recorder, project: Path) -> None:
    tid = recorded(recorder, "refund please")
    code, out, err = gen_test(
        recorder,
        tid,
        "--name",
        "typed",
        "--expect",
        "result.refunded <= Decimal('49.99')",
        "--expect",
        "isinstance(result, Refund)",
        "--expect",
        "all(isinstance(x, str) for x in [result.note])",
    )
    assert code == 0, err
    source = (project / "tests/regressions/test_typed.py").read_text()
    assert source.startswith('"""Regression test for trace')
    assert "from decimal import Decimal\nfrom pathlib import Path\n\nimport pytest\n" in source
    assert "    import gtrapp.agent  # noqa: F401 - defines the boundaries replayed here\n" in source
    assert "    from gtrapp.agent import Refund\n\n    result = chronicle_replay.rerun()" in source
    conftest = project / "tests/regressions/conftest.py"
    assert "parents[2]" in conftest.read_text()
    assert out.splitlines() == [
        "wrote tests/regressions/test_typed.py",
        "      tests/regressions/traces/typed.jsonl  (the trace it replays, payloads inlined)",
        "      tests/regressions/conftest.py  (puts the project root on sys.path, so plain `pytest` imports it)",
        "imports from decimal import Decimal",
        "imports from gtrapp.agent import Refund",
        "run it: pytest tests/regressions/test_typed.py",
    ]
    assert "x" not in [line.split()[-1] for line in err.splitlines()]  # a comprehension variable is no import
    proc = plain_pytest(project, "tests/regressions")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


def test_a_failed_run_gives_a_test_that_expects_its_exception(recorder: Recorder, project: Path) -> None:
    cases = {
        "project": recorded(recorder, "refund a lot", amount="500"),
        "builtin": recorded(recorder, "refund crash"),
        "other": recorded(recorder, "what is this"),
    }
    sources = {}
    for name, tid in cases.items():
        code, out, err = gen_test(recorder, tid, "--name", name, "--json")
        assert code == 0, err
        written = json.loads(out)
        sources[name] = Path(written["test"]).read_text()
        assert written["expects_error"] is not None
    assert "    from gtrapp.agent import RefundError\n" in sources["project"]
    assert "    with pytest.raises(RefundError):\n        chronicle_replay.rerun()" in sources["project"]
    assert (
        '# The recorded run failed with "gtrapp.agent.RefundError": this test expects the replay to raise it'
        in (sources["project"])
    )
    assert "    with pytest.raises(ValueError):\n" in sources["builtin"]
    assert 'RECORDED_ERROR = "json.decoder.JSONDecodeError"\n' in sources["other"]
    assert "    with pytest.raises(BaseException) as raised:\n" in sources["other"]
    assert all("result = " not in source for source in sources.values())
    proc = plain_pytest(project, "tests/regressions")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 passed" in proc.stdout
    code, out, _ = gen_test(recorder, cases["project"], "--name", "fixed", "--expect", "result.note == 'ok'", "--json")
    assert json.loads(out)["expects_error"] is None  # --expect says what the fixed code does instead
    assert "pytest.raises" not in (project / "tests/regressions/test_fixed.py").read_text()


def test_names_nothing_defines_are_said(recorder: Recorder, project: Path) -> None:
    tid = recorded(recorder, "refund please")
    code, _, err = gen_test(recorder, tid, "--expect", "result.note == EXPECTED_NOTE", "--expect", "len(result.note)")
    assert code == 0
    assert "gen-test: --expect uses EXPECTED_NOTE, which nothing defines: add --import" in err.splitlines()
    assert "len" not in err and "result" not in err.split("EXPECTED_NOTE")[1]
    tid = recorded(recorder, "refund please")
    code, _, err = gen_test(recorder, tid, "--import", "from decimal import Decimal", "--expect", "Decimal(1) > 0")
    assert code == 0 and "Decimal" not in err  # imported by --import: not twice


def test_a_recorded_class_outside_the_project_is_not_imported(
    recorder: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.unit.agents import record_support

    tid = record_support(recorder, "refund please")  # its classes live in tests.unit.agents, not in tmp_path
    project = tmp_path / "elsewhere"
    project.mkdir()
    monkeypatch.chdir(project)
    code, out, err = gen_test(recorder, tid, "--expect", "isinstance(result[0], Refund)", "--json")
    assert code == 0
    assert json.loads(out)["imports"] == []
    assert (
        "gen-test: --expect uses Refund, recorded as tests.unit.agents.Refund, which gen-test does not import "
        "(not a module of this project; an --override runs outside the replay): "
        "add --import 'from tests.unit.agents import Refund'"
    ) in err


def test_the_conftest_is_written_once_and_never_over_another(recorder: Recorder, project: Path) -> None:
    tid = recorded(recorder, "refund please")
    mine = project / "tests" / "own" / "conftest.py"
    mine.parent.mkdir(parents=True)
    mine.write_text("# the project's own\n")
    code, out, _ = gen_test(recorder, tid, "--out", "tests/own", "--json")
    assert code == 0 and json.loads(out)["conftest"] is None
    assert mine.read_text() == "# the project's own\n"
    code, out, _ = gen_test(recorder, tid, "--out", ".", "--json")
    assert json.loads(out)["conftest"] == "conftest.py"
    assert "parents[0]" in (project / "conftest.py").read_text()
    outside = project.parent / "outside"
    code, out, _ = gen_test(recorder, tid, "--out", str(outside))
    assert code == 0 and not (outside / "conftest.py").exists()
    assert f"note: {outside} is outside the project ({project})" in out


def test_roots_that_are_methods_classmethods_or_take_star_args_give_tests_that_pass(
    recorder: Recorder, project: Path
) -> None:
    from gtrapp import agent

    calls = {
        "tools": lambda: agent.tools("refund please", "search", "calc"),
        "open": lambda: agent.Desk.open("refund please"),
        "answer": lambda: agent.Desk().answer("refund please"),
    }
    for name, call in calls.items():
        call()
        recorder.config.force_flush()
        code, _, err = gen_test(recorder, recorder.store.list_traces(limit=1)[0].trace_id, "--name", name)
        assert code == 0, err
        method_note = "the root is a method of Desk" in err
        assert method_note == (name == "answer"), err
    source = (project / "tests/regressions/test_answer.py").read_text()
    assert "    instance = gtrapp.agent.Desk()\n" in source  # self is never recorded: the test builds the object
    assert "chronicle_replay.rerun(instance=instance)" in source
    assert "instance" not in (project / "tests/regressions/test_open.py").read_text()  # a classmethod needs none
    proc = plain_pytest(project, "tests/regressions")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 passed" in proc.stdout


def test_a_generated_test_whose_prompt_changed_passes_and_prints_the_diff(recorder: Recorder, project: Path) -> None:
    tid = recorded(recorder, "refund please")
    code, _, err = gen_test(recorder, tid, "--name", "prompt")
    assert code == 0, err
    agent = project / "gtrapp" / "agent.py"
    agent.write_text(APP.replace('if decide(question) == "lookup"', 'if decide("Be brief. " + question) == "lookup"'))
    proc = plain_pytest(project, "tests/regressions", "--chronicle-report", "drift.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr  # answered from the recording: the test passes
    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if re.fullmatch(r"=+ chronicle replay drift =+", line))
    assert lines[start + 1 : start + 5] == [
        "tests/regressions/test_prompt.py::test_prompt: 1 finding",
        "  gtr.agent[0] > gtr.decide[0]: 1 input-drift",
        "    [input-drift, unexplained] input changed (unexplained: nothing before it changed, so the prompt, the "
        "model settings or the code building the request did); answered from the recording",
        "      $.question: recorded 'refund please' != now 'Be brief. refund please'",
    ]
    assert "chronicle replay drift in test_prompt: 1 input-drift (unexplained): gtr.agent[0] > gtr.decide[0]" in (
        proc.stdout
    )
    (entry,) = json.loads((project / "drift.json").read_text())
    assert [f["kind"] for f in entry["findings"]] == ["input-drift"]


def test_generated_strict_and_ignore_options_decide_the_prompt_change(recorder: Recorder, project: Path) -> None:
    tid = recorded(recorder, "refund please")
    assert gen_test(recorder, tid, "--name", "strict", "--strict", "kind:llm")[0] == 0
    code, _, err = gen_test(recorder, tid, "--name", "ignored", "--strict", "kind:llm", "--ignore", "$.question")
    assert code == 0, err
    source = (project / "tests/regressions/test_ignored.py").read_text()
    assert 'ignore=["$.question"], strict={"kind:llm": "input"}' in source
    agent = project / "gtrapp" / "agent.py"
    agent.write_text(APP.replace('if decide(question) == "lookup"', 'if decide("Be brief. " + question) == "lookup"'))
    proc = plain_pytest(project, "tests/regressions")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed, 1 passed" in proc.stdout
    assert "test_strict.py::test_strict" in proc.stdout and "(strict: fails the replay)" in proc.stdout
    assert "test_ignored.py::test_ignored:" not in proc.stdout  # its only difference is ignored: no drift
