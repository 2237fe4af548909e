"""``sample()``: the demo's bad run sampled with the old guardrail and the fixed one, the frozen prefix, the bounds on
model calls, checks, stored samples, and a real SDK call sampled against a local OpenAI-compatible server."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

import chronicle_otel as chronicle
from chronicle_otel.integrations import openai as chronicle_openai
from examples.stock_agent import agent
from examples.stock_agent.checks import no_oversell
from tests.conftest import Recorder
from tests.llm_servers import LLMServer, Reply, openai_server

REQUEST = "Sell $1,000 of MSFT"
PLAN = "run_agent[0] > plan[0]"


pytestmark = pytest.mark.usefixtures("fresh_model")


def oversold(report: chronicle.SampleReport) -> int:
    """Samples that filled an order worth more than the $1,000 asked."""
    return sum(
        1
        for s in report.samples
        if s.result is not None and s.result.receipt.status == "filled" and s.result.receipt.value > 1000
    )


def test_the_bad_run_oversells_one_time_in_four_with_the_old_guardrail_and_never_with_the_fix(
    bad_run: chronicle.Trace, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = agent.SimulatedLLM.calls
    old = chronicle.sample(bad_run, live="plan", n=20, check=no_oversell)
    assert agent.SimulatedLLM.calls - before == 20  # plan, live once per sample; finalize answered from the recording
    assert (old.n, old.counted, old.live_calls, old.max_calls, old.live) == (20, 20, 20, 40, PLAN)
    assert oversold(old) == 5 and (old.passed, old.pass_rate) == (15, 0.75)
    assert [(o.count, o.passed) for o in old.outcomes] == [(15, 15), (5, 0)]
    [failed] = {s.check_message for s in old.samples if s.passed is False}
    assert failed == "sold $190,420.00, not $1,000"
    assert all(s.report.live_llm == [(("run_agent", 0), ("plan", 0))] for s in old.samples)

    monkeypatch.setenv("STOCK_AGENT_GUARDRAIL", "v2")
    agent.SimulatedLLM.reset()
    fixed = chronicle.sample(bad_run, live="plan", n=20, check=no_oversell)
    assert oversold(fixed) == 0 and fixed.pass_rate == 1.0
    blocked = [s for s in fixed.samples if s.result.status == "blocked"]
    assert len(blocked) == 5  # the model misreads as often; the fixed guardrail blocks each misread order
    assert {s.result.receipt.order.quantity for s in blocked} == {1000}

    text = str(old)
    assert text.splitlines()[0].startswith(f"sampled {PLAN} of trace {bad_run.trace_id} 20 times")
    assert re.search(r"^2 +5 +25% +FAIL +Result\(status='filled'", text, re.M), text
    assert "#2 $.receipt.order.quantity: #1 5 != #2 1000" in text
    assert "pass rate 75% (15/20); live model calls 20 (limit 40); tokens n/a" in text
    assert json.loads(json.dumps(old.to_dict()))["outcomes"][1]["samples"] == list(old.outcomes[1].samples)


def test_the_same_distribution_one_sample_at_a_time(bad_run: chronicle.Trace) -> None:
    one = chronicle.sample(bad_run, live="plan", n=20, concurrency=1)
    assert [o.count for o in one.outcomes] == [15, 5] and oversold(one) == 5 and not one.checked


def test_after_live_the_later_model_calls_run_too(bad_run: chronicle.Trace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STOCK_AGENT_GUARDRAIL", "v2")
    report = chronicle.sample(bad_run, live="plan", n=8, after="live", concurrency=1, check=no_oversell)
    assert report.live_calls == 16 and report.max_calls == 32 and report.pass_rate == 1.0
    messages = {s.result.status: s.result.message for s in report.samples}
    assert messages["blocked"].startswith("I did not place the order to sell 1000 MSFT")  # finalize said it live


def test_what_the_recording_shows_before_the_live_call_answers_from_it(
    bad_run: chronicle.Trace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STOCK_AGENT_GUARDRAIL", "v2")  # the fixed guardrail, which the frozen prefix never runs
    report = chronicle.sample(bad_run, live="finalize", n=6, concurrency=1)
    for s in report.samples:
        assert s.result.status == "filled" and s.result.receipt.order.quantity == 1000  # as recorded
        assert sorted(s.report.stubbed) == sorted(
            [(("run_agent", 0), (name, 0)) for name in ("plan", "get_quote", "place_order")]
        )
    verbs = Counter(s.result.message.split()[0] for s in report.samples)
    assert set(verbs) <= {"Done:", "Completed:", "Executed:"} and len(verbs) > 1  # the live call, sampled


def test_max_calls_bounds_the_model_calls_of_every_sample(
    bad_run: chronicle.Trace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STOCK_AGENT_GUARDRAIL", "v1")
    before = agent.SimulatedLLM.calls
    report = chronicle.sample(bad_run, live="plan", n=5, after="live", max_calls=5, check=no_oversell)
    assert agent.SimulatedLLM.calls - before == 5 == report.live_calls  # plan ran; each finalize was refused
    assert report.cut == 5 and report.counted == 0 and report.pass_rate is None and report.outcomes == ()
    assert all(isinstance(s.error, chronicle.ReplayDivergence) for s in report.samples)
    assert "5 not counted (5 cut at the model-call limit)" in report.totals()
    with pytest.raises(chronicle.ConfigError, match="max_calls"):
        chronicle.sample(bad_run, live="plan", n=5, max_calls=4)


def test_a_check_fails_on_false_on_an_assertion_and_on_its_own_errors(bad_run: chronicle.Trace) -> None:
    def check(result: Any, error: BaseException | None) -> bool:
        if result.receipt.order.quantity == 1000:
            return result.missing  # type: ignore[no-any-return]  # AttributeError: the check's own
        assert result.receipt.value < 900, "too much"
        return True

    report = chronicle.sample(bad_run, live="plan", n=20, check=check)
    messages = Counter((s.check_message or "").splitlines()[0] for s in report.samples)
    assert messages == {
        "too much": 15,
        "the check raised AttributeError: 'Result' object has no attribute 'missing'": 5,
    }
    assert report.passed == 0
    report = chronicle.sample(bad_run, live="plan", n=2, check=lambda result, error: 0)
    assert {s.check_message for s in report.samples} == {"the check returned 0"} and report.pass_rate == 0.0


def test_samples_are_stored_as_replays_of_the_trace_when_asked(bad_run: chronicle.Trace, recorder: Recorder) -> None:
    store = recorder.store
    before = {t.trace_id for t in store.list_traces(include_replays=True)}
    chronicle.sample(bad_run, live="plan", n=3)
    assert {t.trace_id for t in store.list_traces(include_replays=True)} == before  # kept nowhere by default
    report = chronicle.sample(bad_run, live="plan", n=4, store=store)
    assert report.store == store.path
    stored = {t.trace_id for t in store.list_traces(replay_of=bad_run.trace_id)}
    assert stored == {s.trace_id for s in report.samples} and len(stored) == 4
    sample_trace = chronicle.load_trace(store, report.samples[0].trace_id)
    assert [b.name for b in sample_trace.boundaries][:2] == ["run_agent", "plan"]


def test_arguments_are_checked_before_any_model_call(bad_run: chronicle.Trace) -> None:
    before = agent.SimulatedLLM.calls
    for kwargs, name in (
        ({"live": "plam"}, "live"),
        ({"live": "plan", "stub": "place_order"}, "stub"),
        ({"live": "plan", "n": 0}, "n"),
        ({"live": "plan", "after": "maybe"}, "after"),
        ({"live": "plan", "concurrency": 0}, "concurrency"),
        ({"live": "plan", "check": "no_oversell"}, "check"),
        ({"live": "plan", "store": 3}, "store"),
    ):
        with pytest.raises(chronicle.ConfigError) as info:
            chronicle.sample(bad_run, **kwargs)
        assert info.value.name == name
    assert agent.SimulatedLLM.calls == before


@chronicle.boundary(kind="agent", name="sampled.maybe")
def maybe(request: str, plan_it: bool = True) -> str:
    return agent.plan(request, model="sim", temperature=0.7, seed=3).symbol if plan_it else "nothing planned"


def test_a_first_sample_that_never_makes_the_live_call_stops_the_sampling(recorder: Recorder) -> None:
    maybe(REQUEST)
    recorder.config.force_flush()
    trace = chronicle.load_trace(recorder.store, "latest")
    before = agent.SimulatedLLM.calls
    with pytest.raises(chronicle.ReplayError, match=r"sample 1 of trace \w+ never made sampled.maybe\[0\] > plan\[0\]"):
        chronicle.sample(trace, live="plan", n=20, arguments={"plan_it": False})
    assert agent.SimulatedLLM.calls == before


# A real SDK call, sampled: the OpenAI client against a local server whose answers are drawn from a seeded generator.

PRICE_CALLS = Counter[str]()


@chronicle.boundary(kind="tool", name="sampled.price")
def price(symbol: str) -> str:
    PRICE_CALLS[symbol] += 1
    return "190.42"


@chronicle.boundary(kind="agent", name="sampled.trade")
def trade(request: str, base_url: str) -> dict[str, Any]:
    import openai

    quote = price("MSFT")
    client = openai.OpenAI(base_url=base_url, api_key="sk-test-openai-key", max_retries=0)
    try:
        answer = client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": f"{request} (MSFT at {quote})"}], temperature=1
        )
    finally:
        client.close()
    shares = int(answer.choices[0].message.content or "0")
    return {"shares": shares, "value": str(shares * Decimal(quote))}


@pytest.fixture
def server() -> Iterator[LLMServer]:
    names = chronicle_openai.instrument()
    assert "openai.chat.completions.create" in names
    try:
        with openai_server() as running:
            yield running
    finally:
        chronicle_openai.uninstrument()


def test_a_real_sdk_call_sampled_against_a_local_server_counts_its_tokens(
    recorder: Recorder, server: LLMServer
) -> None:
    server.reply_with(Reply("1000", input_tokens=40, output_tokens=2))
    trade(REQUEST, server.url + "/v1")
    recorder.config.force_flush()
    trace = chronicle.load_trace(recorder.store, "latest")
    rng = random.Random(7)
    replies = [
        Reply(rng.choice(["5", "5", "5", "1000"]), input_tokens=40, output_tokens=rng.randint(1, 9)) for _ in range(8)
    ]
    server.reply_with(*replies)
    PRICE_CALLS.clear()

    def within_budget(result: dict[str, Any], error: BaseException | None) -> bool:
        return error is None and Decimal(result["value"]) <= 1000

    report = chronicle.sample(trace, live="openai.chat.completions.create", n=8, check=within_budget)
    assert server.count() == 1 + 8 and Counter() == PRICE_CALLS  # every model call reached the server; price frozen
    want = Counter(r.text for r in replies)
    assert {o.summary: o.count for o in report.outcomes} == {
        repr({"shares": int(text), "value": str(int(text) * Decimal("190.42"))}): count for text, count in want.items()
    }
    assert report.passed == want["5"] and report.live_calls == 8
    assert report.input_tokens == 8 * 40 and report.output_tokens == sum(r.output_tokens for r in replies)
    assert {s.input_tokens for s in report.samples} == {40}
    assert "tokens 320 in" in report.totals()


@chronicle.boundary(kind="llm", name="sampled.hosted")
def hosted(prompt: str) -> str:
    import socket

    socket.create_connection(("203.0.113.9", 443), timeout=0.5).close()  # TEST-NET-3: refused before any packet
    return "answer"


@chronicle.boundary(kind="agent", name="sampled.ask")
def ask(prompt: str) -> str:
    return hosted(prompt)


def test_the_network_guard_stays_on_while_sampling(recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    def unreachable(*args: Any, **kwargs: Any) -> Any:
        raise OSError("no network while recording in a test")

    with monkeypatch.context() as patched:
        patched.setattr(socket, "create_connection", unreachable)
        with pytest.raises(OSError):
            ask("hello")
    recorder.config.force_flush()
    trace = chronicle.load_trace(recorder.store, "latest")
    report = chronicle.sample(trace, live="sampled.hosted", n=2)
    [outcome] = report.outcomes
    assert outcome.count == 2 and outcome.summary.startswith("raised NetworkBlockedError:"), outcome.summary
    assert "203.0.113.9" in outcome.summary
    assert all([f.kind for f in s.report.divergences] == ["network"] for s in report.samples)
