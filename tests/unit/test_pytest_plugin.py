from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from xml.etree import ElementTree

import pytest

import chronicle_otel as chronicle
from chronicle_otel.cli._view._report import report_from_dict

AGENT = textwrap.dedent(
    """
    import asyncio
    import chronicle_otel as chronicle

    CALLS = {"llm": 0}
    PROMPT = {"prefix": ""}

    @chronicle.boundary(kind="llm", name="plug.plan")
    def plan(request):
        CALLS["llm"] += 1
        return {"qty": 1000}

    @chronicle.boundary(kind="tool", name="plug.order")
    def order(plan, limit):
        return "blocked" if plan["qty"] > limit else "filled"

    @chronicle.boundary(kind="agent", name="plug.run")
    def run(request, limit=10_000):
        return order(plan(PROMPT["prefix"] + request), limit)

    @chronicle.boundary(kind="agent", name="plug.arun")
    async def arun(request):
        await asyncio.sleep(0)
        return order(plan(request), 10_000)
    """
)


@pytest.fixture
def project(pytester: pytest.Pytester, tmp_path: Path) -> pytest.Pytester:
    """A pytester project with the agent module and two recorded traces under traces/."""
    pytester.makepyfile(plugagent=AGENT)
    pytester.syspathinsert()
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    sys.modules.pop("plugagent", None)
    import plugagent  # type: ignore[import-not-found]

    config = chronicle.configure(
        store=chronicle.StoreOptions(path=tmp_path / "store", processor="simple"), tracer_provider=_provider()
    )
    assert config.store is not None
    plugagent.run("sell $1,000")
    (pytester.path / "traces").mkdir()
    chronicle.write_trace(chronicle.load_trace(config.store, "latest"), pytester.path / "traces" / "sync.jsonl")
    import asyncio

    asyncio.run(plugagent.arun("sell $1,000"))
    chronicle.write_trace(chronicle.load_trace(config.store, "latest"), pytester.path / "traces" / "async.jsonl")
    return pytester


def _provider() -> object:
    from opentelemetry.sdk.trace import TracerProvider

    return TracerProvider()


def test_marker_and_fixture_replay_with_zero_model_calls(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_inner="""
        import pytest
        import plugagent

        @pytest.mark.chronicle_replay("traces/sync.jsonl", stub={"kind:llm"})
        def test_replay(chronicle_replay):
            before = plugagent.CALLS["llm"]
            assert chronicle_replay.rerun() == "filled"
            assert plugagent.CALLS["llm"] == before
            assert chronicle_replay.report.stubbed == [(("plug.run", 0), ("plug.plan", 0))]

        @pytest.mark.chronicle_replay("traces/sync.jsonl")
        def test_fixed(chronicle_replay):
            assert chronicle_replay.rerun(limit=500) == "blocked"
        """
    )
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_a_failing_test_prints_the_report(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_inner="""
        import pytest

        @pytest.mark.chronicle_replay("traces/sync.jsonl")
        def test_expects_blocked(chronicle_replay):
            assert chronicle_replay.rerun() == "blocked"
        """
    )
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*chronicle replay*", "replay ok: 1 stubbed, 2 live, 0 divergences*"])


def test_a_diverging_replay_fails_the_test(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_inner="""
        import pytest

        @pytest.mark.chronicle_replay("traces/sync.jsonl")
        def test_never_reruns(chronicle_replay):
            pass

        @pytest.mark.chronicle_replay("traces/sync.jsonl", check_report=False)
        def test_unchecked(chronicle_replay):
            pass
        """
    )
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)  # a failure of the test itself, not an error in its teardown
    result.stdout.fnmatch_lines(["*the replay diverged from the recording*", "*unused-recording*plug.run[[]0[]]*"])
    sections = [line for line in result.stdout.lines if line.strip("- ") == "chronicle replay"]
    assert sections == []  # the failure message holds the report: no extra report section


def test_async_tests_with_pytest_asyncio(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_inner="""
        import pytest

        @pytest.mark.asyncio
        @pytest.mark.chronicle_replay("traces/async.jsonl")
        async def test_async(chronicle_replay):
            assert await chronicle_replay.arerun() == "filled"
        """
    )
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_traces_directory_option_and_usage_errors(project: pytest.Pytester) -> None:
    (project.path / "elsewhere").mkdir()
    project.makepyfile(
        **{
            "elsewhere/test_inner": """
            import pytest

            @pytest.mark.chronicle_replay("sync.jsonl")
            def test_found_in_traces_dir(chronicle_replay):
                assert chronicle_replay.rerun() == "filled"

            def test_fixture_without_marker(chronicle_replay):
                pass

            @pytest.mark.chronicle_replay("sync.jsonl", stubb={"x"})
            def test_typo(chronicle_replay):
                pass
            """
        }
    )
    result = project.runpytest("-p", "no:cacheprovider", "--chronicle-traces", str(project.path / "traces"))
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(["*needs @pytest.mark.chronicle_replay*", "*unknown chronicle_replay options: stubb*"])


def test_markers_shows_the_whole_marker_description(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers", "-p", "no:asyncio")  # the plugin loads through its entry point
    line = next(line for line in result.outlines if "chronicle_replay" in line)
    assert line.startswith("@pytest.mark.chronicle_replay(source, trace_id=None, stub=..., live=(), ...): replay ")
    assert "(default: every 'kind:llm' call)" in line
    assert line.endswith("the chronicle_replay fixture is the active run")


DRIFTING = """
import pytest
import plugagent

@pytest.mark.chronicle_replay("traces/sync.jsonl")
def test_prompt_changed(chronicle_replay):
    plugagent.PROMPT["prefix"] = "You are careful. "  # the prompt text changed since the recording
    try:
        assert chronicle_replay.rerun() == "filled"  # answered from the recording all the same
    finally:
        plugagent.PROMPT["prefix"] = ""

@pytest.mark.chronicle_replay("traces/sync.jsonl")
def test_unchanged(chronicle_replay):
    assert chronicle_replay.rerun() == "filled"
"""


UNCHANGED = DRIFTING.split("@pytest.mark")[0] + "@pytest.mark" + DRIFTING.split("@pytest.mark")[2]
"""The test of ``DRIFTING`` that does not drift, alone."""

_SHOWN = "always::chronicle_otel.ChronicleWarning"


def test_drift_of_a_passing_test_is_summed_up_warned_and_reported(project: pytest.Pytester) -> None:
    project.makepyfile(test_inner=DRIFTING)
    result = project.runpytest(  # this suite's filterwarnings "error" holds in pytester's run: the warning is shown
        "-p", "no:cacheprovider", "-W", _SHOWN, "--junitxml=junit.xml", "--chronicle-report=out/report.json"
    )
    result.assert_outcomes(passed=2, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*= chronicle replay drift =*",
            "test_inner.py::test_prompt_changed: 1 finding",
            "  plug.run[[]0[]] > plug.plan[[]0[]]: 1 input-drift",
            "    [[]input-drift, unexplained[]] input changed (unexplained: nothing before it changed, so the prompt*",
            "      $*request*: recorded 'sell $1,000' != now 'You are careful. sell $1,000'",
            "1 of 2 replayed tests drifted",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*warnings summary*",
            "test_inner.py::test_prompt_changed",
            "*test_inner.py:4: ChronicleWarning: chronicle replay drift in test_prompt_changed: "
            "1 input-drift (unexplained): "
            "plug.run[[]0[]] > plug.plan[[]0[]]: *",  # the marker's line
        ]
    )
    assert "test_unchanged:" not in result.stdout.str()

    suite = ElementTree.parse(project.path / "junit.xml").getroot()
    properties = {
        case.get("name"): [(p.get("name"), p.get("value")) for p in case.iter("property")]
        for case in suite.iter("testcase")
    }
    assert properties["test_unchanged"] == [("chronicle_replay.drift", "0")]
    drifted = properties["test_prompt_changed"]
    assert drifted[0] == ("chronicle_replay.drift", "1")
    assert drifted[1][0] == "chronicle_replay.input-drift"
    assert drifted[1][1].startswith("plug.run[0] > plug.plan[0]: ")

    entries = json.loads((project.path / "out" / "report.json").read_text())
    assert [(e["test"], e["trace"], len(e["findings"])) for e in entries] == [
        ("test_inner.py::test_prompt_changed", "traces/sync.jsonl", 1),
        ("test_inner.py::test_unchanged", "traces/sync.jsonl", 0),
    ]
    finding = entries[0]["findings"][0]
    assert finding["kind"] == "input-drift"
    assert finding["call_key"] == [["plug.run", 0], ["plug.plan", 0]]
    report = report_from_dict(entries[0])  # the shape `chronicle view --report` reads
    assert [str(f.kind) for f in report.drift] == ["input-drift"]
    assert report.drift[0].details == tuple(finding["details"])
    assert len(entries[0]["trace_id"]) == 32


def test_a_failing_test_lists_its_drift_too_without_a_warning(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_inner=DRIFTING.replace('== "filled"  # answered', '== "blocked"  # answered').replace(
            "def test_unchanged", "def _unused"
        )
    )
    result = project.runpytest("-p", "no:cacheprovider", "-W", "error::UserWarning")
    result.assert_outcomes(failed=1)  # the test's own failure, and no warning turned into a teardown error
    result.stdout.fnmatch_lines(["*= chronicle replay drift =*", "test_inner.py::test_prompt_changed: 1 finding"])


def test_a_drift_warning_under_filterwarnings_error_fails_the_test_itself(project: pytest.Pytester) -> None:
    project.makepyfile(test_inner=DRIFTING)
    result = project.runpytest("-p", "no:cacheprovider", "-W", "error::UserWarning")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*ChronicleWarning: chronicle replay drift in test_prompt_changed*"])


def test_no_drift_section_when_nothing_drifted(project: pytest.Pytester) -> None:
    project.makepyfile(test_inner=UNCHANGED)
    result = project.runpytest("-p", "no:cacheprovider", "--chronicle-report=report.json")
    result.assert_outcomes(passed=1)
    assert "chronicle replay drift" not in result.stdout.str()
    entries = json.loads((project.path / "report.json").read_text())
    assert [(e["test"], e["findings"]) for e in entries] == [("test_inner.py::test_unchanged", [])]


def test_drift_of_xdist_workers_is_summed_up_by_the_controller(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    project.makepyfile(test_inner=DRIFTING)
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--chronicle-report=report.json")
    result.assert_outcomes(passed=2, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*= chronicle replay drift =*",
            "test_inner.py::test_prompt_changed: 1 finding",
            "1 of 2 replayed tests drifted",
        ]
    )
    entries = json.loads((project.path / "report.json").read_text())
    assert sorted((e["test"], len(e["findings"])) for e in entries) == [
        ("test_inner.py::test_prompt_changed", 1),
        ("test_inner.py::test_unchanged", 0),
    ]


def test_a_report_that_cannot_be_written_is_said(project: pytest.Pytester) -> None:
    project.makepyfile(test_inner=UNCHANGED)
    (project.path / "taken").write_text("a file, not a directory")
    result = project.runpytest("-p", "no:cacheprovider", "--chronicle-report=taken/report.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["--chronicle-report taken/report.json: not written: *"])


def test_strict_per_selector_fails_the_prompt_change(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_inner=DRIFTING.replace(
            '@pytest.mark.chronicle_replay("traces/sync.jsonl")\ndef test_prompt_changed',
            '@pytest.mark.chronicle_replay("traces/sync.jsonl", strict={"kind:llm": "input"})\ndef test_prompt_changed',
        )
    )
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*the replay diverged from the recording*",
            "*[[]input-drift, unexplained[]] plug.run[[]0[]] > plug.plan[[]0[]]: input changed (unexplained: *"
            "(strict: fails the replay)",
            "*= chronicle replay drift =*",
            "    [[]input-drift, unexplained[]] * (strict: fails the test)",
        ]
    )


INTENDED = """
import chronicle_otel as chronicle
import pytest
import plugagent

@pytest.mark.chronicle_replay("traces/sync.jsonl", changed={"tighter-limit": ["plug.order"]})
def test_declared_in_the_marker(chronicle_replay):
    assert chronicle_replay.rerun(limit=100) == "blocked"

@pytest.mark.chronicle_replay("traces/sync.jsonl")
def test_not_declared(chronicle_replay):
    assert chronicle_replay.rerun(limit=100) == "blocked"
"""


def test_a_declared_change_is_listed_apart_without_a_warning(project: pytest.Pytester) -> None:
    project.makepyfile(test_inner=INTENDED)
    result = project.runpytest(
        "-p", "no:cacheprovider", "-W", _SHOWN, "--junitxml=junit.xml", "--chronicle-report=r.json"
    )
    result.assert_outcomes(passed=2)  # output changes are no drift: no warning either way
    result.stdout.fnmatch_lines(
        [
            "*= chronicle replay drift =*",
            "test_inner.py::test_declared_in_the_marker: 2 intended",
            "  intended (declared changes):",
            "    plug.run[[]0[]] > plug.order[[]0[]]: 1 output-changed",
            "      [[]output-changed[]] output differs (intended: tighter-limit)",
            "    plug.run[[]0[]]: 1 output-changed",  # the root's output changed because of it alone
            "test_inner.py::test_not_declared: 2 findings",
            "  plug.run[[]0[]] > plug.order[[]0[]]: 1 output-changed",
            "1 of 2 replayed tests drifted; 1 with declared intended changes",
        ]
    )
    suite = ElementTree.parse(project.path / "junit.xml").getroot()
    properties = {
        case.get("name"): [(p.get("name"), p.get("value")) for p in case.iter("property")]
        for case in suite.iter("testcase")
    }
    declared = dict(properties["test_declared_in_the_marker"])
    assert declared["chronicle_replay.drift"] == "0" and declared["chronicle_replay.intended"] == "2"
    entries = {e["test"]: e for e in json.loads((project.path / "r.json").read_text())}
    intended, _ = entries["test_inner.py::test_declared_in_the_marker"]["intended"]
    assert intended["change"] == "tighter-limit" and intended["cause"] == "intended"
    report = report_from_dict(entries["test_inner.py::test_declared_in_the_marker"])
    assert [f.change for f in report.intended] == ["tighter-limit", "tighter-limit"]


SUITE_DRIFT = """
import pytest
import plugagent

@pytest.mark.chronicle_replay("traces/sync.jsonl")
def test_prompt_changed(chronicle_replay):
    plugagent.PROMPT["prefix"] = "You are careful. "
    try:
        assert chronicle_replay.rerun() == "filled"
    finally:
        plugagent.PROMPT["prefix"] = ""
"""


_PYTEST_TABLE = '[tool.pytest.ini_options]\nasyncio_default_fixture_loop_scope = "function"\n\n'


def test_the_suite_policy_comes_from_pyproject(project: pytest.Pytester) -> None:
    project.makepyfile(test_inner=SUITE_DRIFT)
    (project.path / "tox.ini").unlink()
    project.makepyprojecttoml(_PYTEST_TABLE + '[tool.chronicle]\nstrict = {"kind:llm" = "input"}\n')
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    project.makepyprojecttoml(
        _PYTEST_TABLE + '[tool.chronicle]\nstrict = {"kind:llm" = "input"}\nignore = ["$.request"]\n'
    )
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)  # the only difference is ignored
    assert "chronicle replay drift" not in result.stdout.str()
    # a marker's ignore adds to the suite's, its strict selectors to the suite's
    project.makepyfile(test_inner=SUITE_DRIFT.replace('sync.jsonl")', 'sync.jsonl", ignore={"plug.order": ["$.x"]})'))
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ("stirct = true", "[tool.chronicle] has no option 'stirct'"),
        ('ignore = "$.x"', "invalid value for ignore"),
        ('strict = {"kind:llm" = "yes"}', "'input' (a changed input"),
        ("strict = [", "pyproject.toml"),
    ],
)
def test_a_bad_suite_policy_is_a_usage_error(project: pytest.Pytester, table: str, says: str) -> None:
    project.makepyfile(test_inner=UNCHANGED)
    (project.path / "tox.ini").unlink()
    project.makepyprojecttoml(f"{_PYTEST_TABLE}[tool.chronicle]\n{table}\n")
    result = project.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert says in result.stderr.str()
