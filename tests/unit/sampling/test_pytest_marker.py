"""``@pytest.mark.chronicle_sample``: a test that fails when the check's pass rate is below ``min_pass_rate``, with the
table of outcomes; the check in the marker or given to the fixture."""

from __future__ import annotations

import textwrap

import pytest

import chronicle_otel as chronicle

TESTS = textwrap.dedent(
    """
    import pytest

    from examples.stock_agent import agent
    from examples.stock_agent.checks import no_oversell


    @pytest.fixture(autouse=True)
    def fresh_model():
        agent.SimulatedLLM.reset()  # every test sees the model's same 20 answers


    @pytest.mark.chronicle_sample("traces/bad.jsonl", live="plan", n=20, check=no_oversell, min_pass_rate=0.95)
    def test_rarely_oversells(chronicle_sample):
        pass


    @pytest.mark.chronicle_sample("traces/bad.jsonl", live="plan", n=20, min_pass_rate=0.7)
    def test_oversells_at_most_three_times_in_ten(chronicle_sample):
        report = chronicle_sample(no_oversell)
        assert report.live_calls == 20


    @pytest.mark.chronicle_sample("traces/bad.jsonl", live="plan", n=4, min_pass_rate=0.5)
    def test_no_check(chronicle_sample):
        pass
    """
)


@pytest.fixture
def project(pytester: pytest.Pytester, bad_run: chronicle.Trace) -> pytest.Pytester:
    (pytester.path / "traces").mkdir()
    chronicle.write_trace(bad_run, pytester.path / "traces" / "bad.jsonl")
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_sampled=TESTS)
    return pytester


def test_the_old_guardrail_fails_the_strict_test_and_shows_the_outcomes(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = project.runpytest("-p", "no:cacheprovider", "-rP")
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    assert "chronicle sample: pass rate 75% is below min_pass_rate 95%" in out
    result.stdout.fnmatch_lines(["*2      5    25%  FAIL   Result(status='filled'*", "*#2 $.receipt.order.quantity*"])
    assert "min_pass_rate needs a check" in out
    assert "chronicle sample" in out and "pass rate 75% (15/20)" in out  # the passing test's section (-rP)

    monkeypatch.setenv("STOCK_AGENT_GUARDRAIL", "v2")
    result = project.runpytest("-p", "no:cacheprovider", "-k", "not no_check")
    result.assert_outcomes(passed=2)


def test_the_marker_needs_live_and_known_options(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        test_bad="""
        import pytest

        @pytest.mark.chronicle_sample("traces/none.jsonl", n=3)
        def test_no_live(chronicle_sample):
            pass

        @pytest.mark.chronicle_sample("traces/none.jsonl", live="plan", tries=3)
        def test_unknown(chronicle_sample):
            pass
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*needs live=*", "*unknown chronicle_sample options: tries*"])
