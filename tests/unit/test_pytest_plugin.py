from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import chronicle_otel as chronicle

AGENT = textwrap.dedent(
    """
    import asyncio
    import chronicle_otel as chronicle

    CALLS = {"llm": 0}

    @chronicle.boundary(kind="llm", name="plug.plan")
    def plan(request):
        CALLS["llm"] += 1
        return {"qty": 1000}

    @chronicle.boundary(kind="tool", name="plug.order")
    def order(plan, limit):
        return "blocked" if plan["qty"] > limit else "filled"

    @chronicle.boundary(kind="agent", name="plug.run")
    def run(request, limit=10_000):
        return order(plan(request), limit)

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
