"""A tampered trace, replayed and turned into a test, never runs the code it names."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel.cli import main
from tests.conftest import Recorder
from tests.unit.replaying.trace_files import tamper

AGENT = """
import subprocess  # the module that defines the boundaries imports subprocess, as real code does
from typing import NamedTuple

import chronicle_otel as chronicle


class Plan(NamedTuple):
    symbol: str
    qty: int


@chronicle.boundary(kind="llm", name="evil.plan")
def plan(prompt: str) -> Plan:
    return Plan("MSFT", 1)


@chronicle.boundary(kind="agent", name="evil.agent")
def agent(prompt: str) -> str:
    return f"planned {plan(prompt)!r}"
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A project directory holding the package ``evilapp`` (its boundaries), importable and the working directory."""
    root = tmp_path / "project"
    (root / "evilapp").mkdir(parents=True)
    (root / "evilapp" / "__init__.py").write_text("")
    (root / "evilapp" / "tools.py").write_text(AGENT)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.chdir(root)
    yield root
    for name in [m for m in sys.modules if m == "evilapp" or m.startswith("evilapp.")]:
        del sys.modules[name]


def recorded_file(recorder: Recorder, project: Path) -> Path:
    from evilapp import tools  # type: ignore[import-not-found]

    tools.agent("sell $1,000 of MSFT")
    recorder.config.force_flush()
    return chronicle.write_trace(chronicle.load_trace(recorder.store, "latest"), project / "incident.jsonl")


def popen_payload(marker: Path) -> dict[str, Any]:
    return {
        "$type": "namedtuple",
        "class": "evilapp.tools.subprocess.Popen",
        "data": {"args": ["sh", "-c", f"touch {marker}"]},
    }


def run_pytest(test_file: Path, project: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHRONICLE_", "OTEL_"))}
    env["PYTHONPATH"] = str(project)
    return subprocess.run(
        [sys.executable, "-m", "pytest", str(test_file), "-q", "-p", "no:cacheprovider", f"--rootdir={project}"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_replaying_a_tampered_output_never_runs_it(recorder: Recorder, project: Path) -> None:
    marker = project / "pwned-by-replay"
    path = recorded_file(recorder, project)
    tamper(path, "evil.plan", {sc.OUTPUT: popen_payload(marker)})
    trace = chronicle.load_trace(path)
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        result = run.rerun()
    assert not marker.exists()
    assert [f.kind for f in run.report.divergences] == ["unresolved"]
    assert "UnresolvedObject" in result and "evilapp.tools.subprocess.Popen" in result
    stubbed = trace.find("evil.plan")[0]
    assert isinstance(stubbed.output, chronicle.codec.UnresolvedObject)


def test_a_generated_test_of_a_tampered_trace_never_runs_it(recorder: Recorder, project: Path) -> None:
    marker = project / "pwned-by-generated-test"
    path = recorded_file(recorder, project)
    tamper(path, "evil.plan", {sc.OUTPUT: popen_payload(marker)})
    out = io.StringIO()
    assert main(["gen-test", "-", "--file", str(path), "--out", str(project / "regressions"), "--json"], out=out) == 0
    test_file = Path(json.loads(out.getvalue())["test"])
    assert "import evilapp.tools" in test_file.read_text()
    proc = run_pytest(test_file, project)
    # The test runs to its end and fails on the report: the stub could only answer with a placeholder.
    assert "1 failed" in proc.stdout, proc.stdout + proc.stderr
    assert (
        "[unresolved] evil.agent[0] > evil.plan[0]: the recording holds evilapp.tools.subprocess.Popen" in proc.stdout
    )
    assert not marker.exists()


INJECTED_NAME = 'evil.agent"""\nimport os; os.system("touch {marker}")\n"""'


@pytest.mark.parametrize(
    "field",
    [sc.BOUNDARY_NAME, sc.CODE_FUNCTION],
)
def test_recorded_names_enter_generated_code_only_as_literals(recorder: Recorder, project: Path, field: str) -> None:
    marker = project / "pwned-by-name"
    path = recorded_file(recorder, project)
    injected = INJECTED_NAME.format(marker=marker)
    if field == sc.CODE_FUNCTION:
        injected = f'os; os.system("touch {marker}"); import evilapp.tools.agent'
    tamper(path, "evil.agent", {field: injected})
    out = io.StringIO()
    assert main(["gen-test", "-", "--file", str(path), "--out", str(project / "regressions"), "--json"], out=out) == 0
    test_file = Path(json.loads(out.getvalue())["test"])
    source = test_file.read_text()
    tree = ast.parse(source)  # a name holding quotes and newlines is a literal, not code
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "system"]
    assert calls == []
    if field == sc.BOUNDARY_NAME:
        assigned = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign) for t in n.targets}  # type: ignore[attr-defined]
        assert ast.literal_eval(assigned["ROOT_BOUNDARY"]) == injected
    run_pytest(test_file, project)  # passes or fails: what matters is that nothing recorded ran
    assert not marker.exists()


def test_the_import_is_written_only_for_project_modules(recorder: Recorder, project: Path) -> None:
    path = recorded_file(recorder, project)
    (project / "venv").mkdir()  # a folder without __init__.py loses to the standard library's venv package
    (project / "test").mkdir()
    (project / "setup.py").write_text("raise SystemExit('setup ran')\n")  # a project file that is no boundary module
    (project / "evilapp" / "linked.py").symlink_to(project / "evilapp" / "tools.py")
    (project / "evilapp" / "__main__.py").write_text("import chronicle_otel\n")
    for recorded, expected in [
        ("evilapp.tools.agent", "import evilapp.tools  #"),
        ("antigravity.fly", "# import the module"),  # the standard library: its import has side effects
        ("pytest.main", "# import the module"),  # site-packages
        ("venv.__main__.run_agent", "# import the module"),  # runs the venv tool when imported
        ("test.__main__.agent", "# import the module"),
        ("setup.agent", "# import the module"),  # in the project, but it does not use chronicle_otel
        ("evilapp.linked.agent", "# import the module"),  # a symbolic link
        ("evilapp.__main__.agent", "# import the module"),
        ("evilapp.class.agent", "# import the module"),  # a keyword stops the path at evilapp, which records nothing
        ("évilapp.tools.agent", "# import the module"),  # non-ASCII identifiers are not written
    ]:
        tamper(path, "evil.agent", {sc.CODE_FUNCTION: recorded})
        out = io.StringIO()
        args = ["gen-test", "-", "--file", str(path), "--out", str(project / "t"), "--json", "--force"]
        assert main(args, out=out) == 0
        source = Path(json.loads(out.getvalue())["test"]).read_text()
        assert expected in source, (recorded, source)
        ast.parse(source)


CLEANUP = """
import pathlib

import chronicle_otel  # a project script that uses the package, and does its work when it runs

pathlib.Path(__file__).with_name("cleanup-ran").touch()


@chronicle_otel.boundary(kind="agent", name="cleanup.main")
def main() -> None:
    pass
"""

OTHER_NAMES = """
from chronicle_otel import boundary as traced


@traced(kind="agent", name="evil.other")
def agent(prompt: str) -> str:
    return prompt


class Desk:
    @traced
    def agent(self, prompt: str) -> str:
        return prompt
"""


def write_scripts(project: Path) -> Path:
    """``scripts.cleanup`` (runs when imported; its boundary is not the trace's) and ``evilapp.other`` (boundaries
    of other names); the file that shows the cleanup ran."""
    (project / "scripts").mkdir()
    (project / "scripts" / "__init__.py").write_text("")
    (project / "scripts" / "cleanup.py").write_text(CLEANUP)
    (project / "evilapp" / "other.py").write_text(OTHER_NAMES)
    return project / "scripts" / "cleanup-ran"


def gen_test_json(path: Path, project: Path, *options: str) -> tuple[dict[str, Any], str]:
    """``chronicle gen-test`` of the trace file ``path`` (exit status 0): what it says it wrote, and its stderr."""
    out, err = io.StringIO(), io.StringIO()
    args = ["gen-test", "-", "--file", str(path), "--out", str(project / "regressions"), "--json", "--force"]
    with contextlib.redirect_stderr(err):
        assert main([*args, *options], out=out) == 0, err.getvalue()
    return json.loads(out.getvalue()), err.getvalue()


def test_a_module_the_trace_names_is_imported_only_when_it_defines_the_root_boundary(
    recorder: Recorder, project: Path
) -> None:
    path = recorded_file(recorder, project)
    ran = write_scripts(project)
    for recorded in ("scripts.cleanup.main", "evilapp.other.agent", "evilapp.other.Desk.agent"):
        tamper(path, "evil.agent", {sc.CODE_FUNCTION: recorded})
        result, err = gen_test_json(path, project)
        run_pytest(Path(result["test"]), project)  # fails: nothing defines the boundary it replays
        assert not ran.exists()
        source = Path(result["test"]).read_text()
        assert "import scripts" not in source and "import evilapp" not in source
        assert result["root_module"] is None
        assert "# again with gen-test --root-module MODULE\n" in source
        module = recorded.rsplit(".", 2 if "Desk" in recorded else 1)[0]
        assert (
            f'gen-test: the test does not import {module}, which the trace names for the root boundary "evil.agent": '
            "its source defines no function decorated as that boundary (read, not imported); name the module that "
            "defines it with --root-module MODULE"
        ) in err

    result, err = gen_test_json(path, project, "--root-module", "evilapp.tools")  # the user names it
    assert result["root_module"] == "evilapp.tools" and "root-module" not in err
    assert "    import evilapp.tools  # noqa: F401" in Path(result["test"]).read_text()
    proc = run_pytest(Path(result["test"]), project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not ran.exists()

    result, err = gen_test_json(path, project, "--root-module", "scripts.cleanup")  # named: imported, said
    assert result["root_module"] == "scripts.cleanup"
    assert (
        "gen-test: --root-module scripts.cleanup: its source defines no function decorated as the root boundary "
        '"evil.agent" (read, not imported); the test imports it as asked'
    ) in err


@pytest.mark.parametrize("named", ["os; import sys", "evilapp..tools", "evilapp.class", "__main__", ""])
def test_a_root_module_that_is_no_module_name_is_refused(recorder: Recorder, project: Path, named: str) -> None:
    path = recorded_file(recorder, project)
    err = io.StringIO()
    args = ["gen-test", "-", "--file", str(path), "--out", str(project / "t"), "--root-module", named]
    with contextlib.redirect_stderr(err):
        assert main(args, out=io.StringIO()) == 2
    assert f"--root-module {named!r}: expected a module name such as 'myapp.agent'" in err.getvalue()
    assert not (project / "t").exists()


def test_a_recorded_exception_class_is_imported_only_from_a_module_that_defines_it(
    recorder: Recorder, project: Path
) -> None:
    path = recorded_file(recorder, project)
    ran = write_scripts(project)
    tamper(path, "evil.agent", {sc.ERROR: {"type": "scripts.cleanup.Boom", "message": "boom", "args": ["boom"]}})
    result, _ = gen_test_json(path, project)
    source = Path(result["test"]).read_text()
    assert result["expects_error"] == "scripts.cleanup.Boom"
    assert "from scripts" not in source and 'RECORDED_ERROR = "scripts.cleanup.Boom"' in source  # compared by name
    run_pytest(Path(result["test"]), project)
    assert not ran.exists()


def test_a_bad_expectation_is_refused_before_writing(recorder: Recorder, project: Path) -> None:
    path = recorded_file(recorder, project)
    code = main(["gen-test", "-", "--file", str(path), "--out", str(project / "t"), "--expect", "result ==="])
    assert code == 2
    assert not (project / "t").exists()


def test_show_escapes_terminal_control_sequences(recorder: Recorder, project: Path) -> None:
    path = recorded_file(recorder, project)
    tamper(path, "evil.agent", {sc.BOUNDARY_NAME: "evil\x1b[2J\x1b]0;owned\x07\r\u202eagent"})
    tamper(path, "evil.plan", {sc.OUTPUT: "\x1b[31mred\x1b[0m", "chronicle.session.note": "a\x1bb"})
    out = io.StringIO()
    assert main(["show", "-", "--file", str(path)], out=out) == 0
    text = out.getvalue()
    assert "\x1b" not in text and "\r" not in text and "\x07" not in text and "\u202e" not in text
    assert "evil\\x1b[2J\\x1b]0;owned\\x07\\r\\u202eagent" in text
    assert textwrap.dedent(text).count("\n") >= 3


@pytest.mark.parametrize(
    ("recorded", "complaint"),
    [
        ({"prompt": "sell", "evil": 2}, "unexpected keyword argument 'evil'"),
        ({}, "missing a required argument: 'prompt'"),
        ([1, 2, 3], "too many positional arguments"),
    ],
)
def test_a_root_input_the_signature_does_not_take_is_a_replay_error(
    recorder: Recorder, project: Path, recorded: Any, complaint: str
) -> None:
    path = recorded_file(recorder, project)
    tamper(path, "evil.agent", {sc.INPUT: orjson.dumps(recorded).decode()})
    trace = chronicle.load_trace(path)
    with chronicle.replay(trace) as run, pytest.raises(chronicle.ReplayError) as caught:
        run.rerun()
    assert complaint in str(caught.value)
    assert "'evil.agent'" in str(caught.value) and trace.trace_id in str(caught.value)


def test_the_function_s_own_type_error_is_not_turned_into_a_replay_error(recorder: Recorder) -> None:
    @chronicle.boundary(kind="agent", name="strict.agent")
    def agent(prompt: str) -> str:
        if prompt.startswith("sell"):
            raise TypeError("the agent's own complaint")
        return prompt

    agent("buy")
    recorder.config.force_flush()
    trace = chronicle.load_trace(recorder.store, "latest")
    with chronicle.replay(trace) as run, pytest.raises(TypeError, match="the agent's own complaint"):
        run.rerun(prompt="sell")


def test_replaying_a_trace_without_boundaries_is_a_replay_error(tmp_path: Path) -> None:
    span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "GET /", "startTimeUnixNano": "1", "endTimeUnixNano": "2"}
    path = tmp_path / "plain.jsonl"
    path.write_bytes(orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}) + b"\n")
    trace = chronicle.load_trace(path)
    assert trace.boundaries == ()
    with chronicle.replay(trace) as run, pytest.raises(chronicle.ReplayError, match="has no boundary to rerun"):
        run.rerun()


def test_a_decorator_under_the_boundary_may_supply_arguments_itself(recorder: Recorder) -> None:
    import functools

    def inject_db(fn: Any) -> Any:
        @functools.wraps(fn)  # shows fn's signature, (prompt, db), though it takes prompt alone
        def wrapper(prompt: str) -> str:
            return fn(prompt, db="the db")

        return wrapper

    @chronicle.boundary(kind="agent", name="injected.agent")
    @inject_db
    def agent(prompt: str, db: str) -> str:
        return f"{prompt} with {db}"

    assert agent("sell") == "sell with the db"
    recorder.config.force_flush()
    trace = chronicle.load_trace(recorder.store, "latest")
    with chronicle.replay(trace) as run:
        assert run.rerun() == "sell with the db"
