"""One trace replayed for a corpus and judged: each outcome, and what a check may say."""

from __future__ import annotations

from typing import Any

import pytest

import chronicle_otel as chronicle
from chronicle_otel.corpus import CorpusOutcome, replay_for_corpus
from tests.conftest import Recorder
from tests.unit.agents import record

MODE: dict[str, Any] = {}


@pytest.fixture(autouse=True)
def _mode() -> Any:
    MODE.clear()
    MODE.update(limit=None, declare=False)
    yield
    MODE.clear()


@chronicle.boundary(kind="llm", name="co.plan")
def plan(request: str) -> int:
    return int(request.split()[1])


@chronicle.boundary(kind="guardrail", name="co.check")
def check(qty: int) -> str:
    if MODE["limit"] is not None:
        if MODE["declare"]:
            chronicle.changed("limit-v2")
        if qty > MODE["limit"]:
            return "blocked"
    if qty > 500:
        raise ValueError(f"{qty} is too many")
    return "ok"


@chronicle.boundary(kind="agent", name="co.run")
def run(request: str) -> str:
    return check(plan(request))


def test_a_success_replays_as_recorded_or_changes_as_declared(recorder: Recorder) -> None:
    trace = record(recorder, run, "sell 200")
    result = replay_for_corpus(trace)
    assert result.outcome is CorpusOutcome.PASSED and result.reason == "replays as recorded"
    MODE.update(limit=100)
    result = replay_for_corpus(trace)
    assert result.outcome is CorpusOutcome.NEWLY_BROKEN
    assert "output differs" in result.reason and any("'ok'" in line for line in result.details)
    MODE.update(declare=True)
    result = replay_for_corpus(trace)
    assert result.outcome is CorpusOutcome.PASSED and "intended changes limit-v2" in result.reason


def test_a_failure_is_judged_by_the_check(recorder: Recorder) -> None:
    trace = record(recorder, run, "sell 900", raises=ValueError)
    assert replay_for_corpus(trace).outcome is CorpusOutcome.STILL_FAILING
    MODE.update(limit=800)
    assert replay_for_corpus(trace).outcome is CorpusOutcome.FIXED
    assert replay_for_corpus(trace, lambda result: result == "blocked").outcome is CorpusOutcome.FIXED
    refused = replay_for_corpus(trace, lambda result: result == "filled")
    assert refused.outcome is CorpusOutcome.STILL_FAILING and refused.reason == "the check says still failing"

    def broken(run: Any) -> None:
        raise KeyError("oops")

    raised = replay_for_corpus(trace, broken)
    assert raised.outcome is CorpusOutcome.STILL_FAILING and "the check raised KeyError" in raised.reason


def test_a_divergence_or_an_unknown_root_is_said(recorder: Recorder) -> None:
    trace = record(recorder, run, "sell 5")
    diverged = replay_for_corpus(trace, options={"stub": ["kind:guardrail"], "live": ["kind:llm"]})
    assert diverged.outcome is CorpusOutcome.PASSED  # a model call asked for live is no divergence
    diverged = replay_for_corpus(trace, options={"stub": [], "default": "live"})
    assert diverged.outcome is CorpusOutcome.DIVERGED and "live-llm" in diverged.reason
    bad = replay_for_corpus(trace, options={"stub": ["kind:nothing"]})
    assert bad.outcome is CorpusOutcome.UNREPLAYABLE and "cannot replay" in bad.reason
