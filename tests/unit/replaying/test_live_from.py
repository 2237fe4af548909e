"""``live_from=``: the frozen prefix (every call recorded before the chosen one answers from its recording), the chosen
call live with what encloses it and what it makes; ``max_live_llm=``; the replay's own trace ids."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

import chronicle_otel as chronicle
from chronicle_otel.replaying import FindingKind
from tests.conftest import Recorder
from tests.unit.agents import record

ANSWERS: dict[str, Any] = {}
CALLED: Counter[str] = Counter()

AGENT = ("lf.agent", 0)
LOOKUP = (AGENT, ("lf.lookup", 0))
DRAFT = (AGENT, ("lf.draft", 0))
PLAN = (AGENT, ("lf.plan", 0))
INNER = (*PLAN, ("lf.inner", 0))
ACT = (AGENT, ("lf.act", 0))
SUMMARY = (AGENT, ("lf.summarise", 0))


def _answer(name: str) -> Any:
    CALLED[name] += 1
    return ANSWERS[name]


@chronicle.boundary(kind="tool", name="lf.lookup")
def lookup(symbol: str) -> float:
    return float(_answer("lookup"))


@chronicle.boundary(kind="llm", name="lf.draft")
def draft(request: str) -> str:
    return str(_answer("draft"))


@chronicle.boundary(kind="llm", name="lf.inner")
def inner(prompt: str) -> int:
    return int(_answer("inner"))


@chronicle.boundary(kind="llm", name="lf.plan")
def plan(prompt: str) -> dict[str, Any]:
    return {"quantity": inner(prompt), "note": _answer("plan")}


@chronicle.boundary(kind="tool", name="lf.act")
def act(quantity: int, price: float) -> float:
    CALLED["act"] += 1
    return quantity * price


@chronicle.boundary(kind="llm", name="lf.summarise")
def summarise(value: float) -> str:
    return f"{_answer('summary')} {value}"


@chronicle.boundary(kind="agent", name="lf.agent")
def run(request: str) -> str:
    price = lookup("MSFT")
    prompt = draft(request)
    order = plan(prompt)
    return summarise(act(order["quantity"], price))


RECORDED = {"lookup": 2.0, "draft": "sell 1000", "inner": 1000, "plan": "as asked", "summary": "sold"}
NOW = {"lookup": 3.0, "draft": "sell 5", "inner": 5, "plan": "read again", "summary": "done"}


@pytest.fixture
def trace(recorder: Recorder) -> Iterator[chronicle.Trace]:
    ANSWERS.clear()
    ANSWERS.update(RECORDED)
    recorded = record(recorder, run, "sell $1,000")
    ANSWERS.update(NOW)  # the live code now answers otherwise: a stub is told apart from a live call
    CALLED.clear()
    yield recorded


def test_the_calls_recorded_before_the_chosen_one_answer_from_the_recording(trace: chronicle.Trace) -> None:
    with chronicle.replay(trace, live_from="lf.plan") as run_:
        assert run_.rerun() == "sold 2000.0"  # the summary after the live call answers from the recording
    report = run_.report
    assert report.ok, report
    assert Counter({"plan": 1, "inner": 1, "act": 1}) == CALLED  # the prefix and the later LLM call never ran
    assert sorted(report.stubbed) == sorted([LOOKUP, DRAFT, SUMMARY])
    assert sorted(report.live) == sorted([(AGENT,), PLAN, INNER, ACT])
    assert report.live_llm == [PLAN, INNER]  # the chosen call and the model call it makes: asked for, no divergence
    changes = {f.call_key: f for f in report.changes}
    assert set(changes) == {PLAN, INNER, ACT}
    assert "recorded 2000.0 != now 10.0" in str(changes[ACT])  # 5 shares (live) at the recorded price 2.0


def test_the_prefix_stays_frozen_whatever_live_selects(trace: chronicle.Trace) -> None:
    with chronicle.replay(trace, stub=(), live={"kind:llm"}, live_from="lf.plan[0]") as run_:
        assert run_.rerun() == "done 10.0"  # the LLM call after the chosen one runs live, as live= says
    assert Counter({"plan": 1, "inner": 1, "act": 1, "summary": 1}) == CALLED
    assert sorted(run_.report.stubbed) == sorted([LOOKUP, DRAFT])
    assert run_.report.ok, run_.report


def test_without_live_from_the_same_selectors_run_the_prefix_live(trace: chronicle.Trace) -> None:
    with chronicle.replay(trace, stub=(), live={"kind:llm"}) as run_:
        assert run_.rerun() == "done 15.0"
    assert CALLED["lookup"] == CALLED["draft"] == 1


def test_a_glob_or_a_key_chooses_the_call_and_a_typo_lists_the_recorded_keys(trace: chronicle.Trace) -> None:
    with chronicle.replay(trace, live_from="lf.pl*") as run_:
        run_.rerun()
    assert PLAN in run_.report.live
    with chronicle.replay(trace, live_from="lf.agent[0] > lf.plan[0]") as run_:
        run_.rerun()
    assert sorted(run_.report.stubbed) == sorted([LOOKUP, DRAFT, SUMMARY])
    with pytest.raises(chronicle.ConfigError) as info:
        chronicle.replay(trace, live_from="lf.plam")
    assert info.value.name == "live_from" and "lf.agent[0] > lf.plan[0]" in str(info.value)
    with pytest.raises(chronicle.ConfigError, match="live_from"):
        chronicle.replay(trace, live_from="  ")


def test_choosing_an_inner_call_runs_what_encloses_it_live(trace: chronicle.Trace) -> None:
    with chronicle.replay(trace, live_from="lf.inner") as run_:
        assert run_.rerun() == "sold 2000.0"
    assert Counter({"plan": 1, "inner": 1, "act": 1}) == CALLED
    assert run_.report.live_llm == [PLAN, INNER] and run_.report.ok, run_.report


def test_max_live_llm_raises_instead_of_calling_the_model(trace: chronicle.Trace) -> None:
    with (
        pytest.raises(chronicle.ReplayDivergence, match="live-llm-limit"),
        chronicle.replay(trace, stub=(), live={"kind:llm"}, live_from="lf.plan", max_live_llm=1) as run_,
    ):
        run_.rerun()
    assert Counter() == CALLED  # the model call under the chosen one was refused before it ran
    [limit] = [f for f in run_.report.divergences if f.kind is FindingKind.LIVE_LLM_LIMIT]
    assert limit.call_key == INNER and "max_live_llm" in limit.message
    assert run_.report.live_llm == [PLAN]
    with pytest.raises(chronicle.ConfigError, match="max_live_llm"):
        chronicle.replay(trace, max_live_llm=-1)


def test_a_replay_notes_the_trace_ids_of_its_own_spans(trace: chronicle.Trace, recorder: Recorder) -> None:
    with chronicle.replay(trace, isolate=False) as run_:
        run_.rerun()
    recorder.config.force_flush()
    [replayed] = run_.replay_trace_ids
    summary = recorder.store.trace_summary(replayed)
    assert summary is not None and summary.replay_of == trace.trace_id
    with chronicle.replay(trace, emit_spans=False) as run_:
        run_.rerun()
    assert run_.replay_trace_ids == ()
