from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel.replaying import ReplayedError
from tests.conftest import Recorder, make_recorder
from tests.unit.agents import CALLS, Order, agent, llm, record, tool


class BrokerError(Exception):
    pass


def test_stub_llm_and_rerun_with_zero_model_calls(recorder: Recorder) -> None:
    trace = record(recorder, agent, "sell $1,000")
    assert [b.name for b in trace.boundaries] == ["t.agent", "t.llm", "t.tool"]
    before = CALLS["llm"]
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        result = run.rerun()
    assert result == "sold 1000 MSFT"
    assert CALLS["llm"] == before
    assert run.report.ok, run.report
    assert run.report.stubbed == [(("t.agent", 0), ("t.llm", 0))]
    assert sorted(run.report.live) == [(("t.agent", 0),), (("t.agent", 0), ("t.tool", 0))]
    assert run.report.changes == [] and run.report.drift == []


def test_stub_returns_the_recorded_type_when_allowed(recorder: Recorder) -> None:
    trace = record(recorder, llm, "sell $1,000")
    with chronicle.replay(trace) as run:
        value = run.rerun()
    assert value == Order("MSFT", 1000) and type(value) is Order
    with chronicle.replay(trace, allow=[]) as run:
        opaque = run.rerun()
    assert isinstance(opaque, chronicle.codec.UnresolvedObject)
    assert opaque.class_name == "tests.unit.agents.Order" and opaque.data == {"symbol": "MSFT", "qty": 1000}
    assert run.report.ok


def test_changes_list_live_outputs_that_differ(recorder: Recorder) -> None:
    trace = record(recorder, agent, "sell $1,000")

    @chronicle.boundary(kind="tool", name="t.tool")
    def tool_v2(order: Order) -> str:  # the "fix": same name, new behaviour
        return "blocked"

    @chronicle.boundary(kind="agent", name="t.agent")
    def agent_v2(prompt: str) -> str:
        return tool_v2(llm(prompt))

    with chronicle.replay(trace) as run:
        assert agent_v2("sell $1,000") == "blocked"
    assert run.report.ok
    changed = {f.call_key: f for f in run.report.changes}
    assert set(changed) == {(("t.agent", 0),), (("t.agent", 0), ("t.tool", 0))}
    assert "recorded 'sold 1000 MSFT' != now 'blocked'" in str(changed[(("t.agent", 0), ("t.tool", 0))])


def test_unexpected_call_raises_with_nearest_recordings(recorder: Recorder) -> None:
    trace = record(recorder, agent, "sell $1,000")
    with pytest.raises(chronicle.ReplayDivergence) as info, chronicle.replay(trace):
        llm("one")
        llm("two")  # only one llm call under the root was recorded... and none at top level
    message = str(info.value)
    assert "unexpected-call" in message and "t.llm[0]" in message
    assert "nearest recordings" in message and "t.agent[0]" in message


def test_missing_call_is_an_unused_recording(recorder: Recorder) -> None:
    trace = record(recorder, agent, "sell $1,000")

    @chronicle.boundary(kind="agent", name="t.agent")
    def agent_skips_tool(prompt: str) -> str:
        llm(prompt)
        return "skipped"

    with chronicle.replay(trace) as run:
        agent_skips_tool("sell $1,000")
    # The agent ran live: that it no longer calls the tool is a change of the live code, not a divergence.
    assert run.report.ok, run.report
    assert [(f.kind, f.call_key) for f in run.report.changes if f.kind == "not-called"] == [
        ("not-called", (("t.agent", 0), ("t.tool", 0)))
    ]
    assert "no longer makes the recorded tool call 't.tool'" in str(run.report)
    with chronicle.replay(trace) as run:  # nothing called at all: the root is a recording never used
        pass
    assert [(f.kind, f.call_key) for f in run.report.divergences] == [("unused-recording", (("t.agent", 0),))]
    assert "never made" in str(run.report)


@pytest.mark.parametrize("policy", ["error", "warn", "ignore"])
def test_input_mismatch_policies(recorder: Recorder, policy: str) -> None:
    trace = record(recorder, agent, "sell $1,000")

    @chronicle.boundary(kind="agent", name="t.agent")
    def agent_new_prompt(prompt: str) -> str:
        return tool(llm(prompt + " of MSFT"))

    run = chronicle.replay(trace, on_input_mismatch=policy)
    if policy == "error":
        with pytest.raises(chronicle.ReplayDivergence, match="input-mismatch") as info, run:
            agent_new_prompt("sell $1,000")
        assert "$.prompt: recorded 'sell $1,000' != now 'sell $1,000 of MSFT'" in str(info.value)
        assert not run.report.ok
        return
    with run:
        assert agent_new_prompt("sell $1,000") == "sold 1000 MSFT"  # the stub still answers
    assert run.report.ok
    if policy == "warn":
        assert [f.kind for f in run.report.drift] == ["input-drift"]
        strict = chronicle.replay(trace, on_input_mismatch="warn", strict=True)
        with strict:
            agent_new_prompt("sell $1,000")
        assert not strict.report.ok
    else:
        assert run.report.drift == []


def test_changed_order_is_a_divergence(recorder: Recorder) -> None:
    @chronicle.boundary(kind="tool", name="t.a")
    def a() -> int:
        return 1

    @chronicle.boundary(kind="tool", name="t.b")
    def b() -> int:
        return 2

    @chronicle.boundary(kind="agent", name="t.ordered")
    def ordered(flip: bool) -> int:
        return b() + a() if flip else a() + b()

    trace = record(recorder, ordered, False)
    with chronicle.replay(trace) as run:
        ordered(False)
    assert run.report.ok
    with chronicle.replay(trace, live={"t.ordered"}) as run:
        ordered(True)
    assert [f.kind for f in run.report.divergences] == ["order"]
    assert "recorded before" in str(run.report.divergences[0])


def test_on_missing_live_runs_and_lists_drift(recorder: Recorder) -> None:
    trace = record(recorder, agent, "sell $1,000")

    @chronicle.boundary(kind="tool", name="t.extra")
    def extra() -> str:
        return "new"

    @chronicle.boundary(kind="agent", name="t.agent")
    def agent_with_extra(prompt: str) -> str:
        return tool(llm(prompt)) + extra()

    with chronicle.replay(trace, on_missing="live") as run:
        assert agent_with_extra("sell $1,000") == "sold 1000 MSFTnew"
    assert run.report.ok
    assert [f.kind for f in run.report.drift] == ["unrecorded-live"]


def test_bad_policy_values_list_the_valid_ones() -> None:
    with pytest.raises(chronicle.ConfigError, match="'error', 'warn', 'ignore'"):
        chronicle.replay(_empty_trace(), on_input_mismatch="loud")
    with pytest.raises(chronicle.ConfigError, match="'error', 'live'"):
        chronicle.replay(_empty_trace(), on_missing="skip")
    with pytest.raises(chronicle.ConfigError, match="not a string"):
        chronicle.replay(_empty_trace(), stub="kind:llm")  # type: ignore[arg-type]


def _empty_trace() -> chronicle.Trace:
    return chronicle.Trace("0" * 32, (), (), None)


# ------------------------------------------------------------------ recorded exceptions


def test_stub_reraises_recorded_builtin_exception(recorder: Recorder) -> None:
    @chronicle.boundary(kind="llm", name="t.fails")
    def fails(x: int) -> int:
        raise ValueError("rate limited", 429)

    trace = record(recorder, fails, 1, raises=ValueError)
    assert trace.root is not None and trace.root.failed
    with chronicle.replay(trace) as run, pytest.raises(ValueError) as info:
        run.rerun()
    assert info.value.args == ("rate limited", 429)
    assert run.report.ok


def test_stub_reraises_allowed_custom_exception_or_replayed_error(recorder: Recorder) -> None:
    @chronicle.boundary(kind="llm", name="t.broker")
    def broker() -> None:
        raise BrokerError("insufficient shares")

    trace = record(recorder, broker, raises=BrokerError)
    with chronicle.replay(trace) as run, pytest.raises(BrokerError, match="insufficient shares"):
        run.rerun()
    with chronicle.replay(trace, allow=[]) as run, pytest.raises(ReplayedError) as info:
        run.rerun()
    assert info.value.type_name == f"{__name__}.BrokerError"
    assert info.value.message == "insufficient shares"
    assert info.value.recorded_args == ("insufficient shares",)


def test_live_call_raising_like_the_recording_is_no_change(recorder: Recorder) -> None:
    @chronicle.boundary(kind="tool", name="t.always_fails")
    def always_fails() -> None:
        raise KeyError("k")

    trace = record(recorder, always_fails, raises=KeyError)
    with chronicle.replay(trace) as run, pytest.raises(KeyError):
        run.rerun()
    assert run.report.ok and run.report.changes == []


# ------------------------------------------------------------------ streams and async


def test_stubbed_generator_re_yields_the_recorded_stream(recorder: Recorder) -> None:
    @chronicle.boundary(kind="llm", name="t.tokens")
    def tokens(n: int):  # type: ignore[no-untyped-def]
        CALLS["llm"] += 1
        yield from (f"t{i}" for i in range(n))

    @chronicle.boundary(kind="agent", name="t.join")
    def join(n: int) -> str:
        return "".join(tokens(n))

    trace = record(recorder, join, 3)
    before = CALLS["llm"]
    with chronicle.replay(trace) as run:
        assert run.rerun() == "t0t1t2"
    assert CALLS["llm"] == before and run.report.ok


def test_stubbed_stream_that_failed_midway_fails_again(recorder: Recorder) -> None:
    @chronicle.boundary(kind="llm", name="t.broken_stream")
    def broken_stream():  # type: ignore[no-untyped-def]
        yield "a"
        yield "b"
        raise ConnectionError("stream reset")

    @chronicle.boundary(kind="agent", name="t.consume")
    def consume() -> list[str]:
        got: list[str] = []
        try:
            for item in broken_stream():
                got.append(item)
        except ConnectionError:
            got.append("reset")
        return got

    trace = record(recorder, consume)
    with chronicle.replay(trace) as run:
        assert run.rerun() == ["a", "b", "reset"]
    assert run.report.ok, run.report


async def test_async_and_async_generator_stubs(recorder: Recorder) -> None:
    @chronicle.boundary(kind="llm", name="t.acomplete")
    async def acomplete(prompt: str) -> dict[str, Any]:
        CALLS["llm"] += 1
        await asyncio.sleep(0)
        return {"text": prompt.upper()}

    @chronicle.boundary(kind="llm", name="t.astream")
    async def astream(n: int):  # type: ignore[no-untyped-def]
        CALLS["llm"] += 1
        for i in range(n):
            yield i

    @chronicle.boundary(kind="agent", name="t.aagent")
    async def aagent(prompt: str) -> tuple[str, list[int]]:
        first = await acomplete(prompt)
        return first["text"], [x async for x in astream(3)]

    await aagent("hi")
    recorder.config.force_flush()
    trace = chronicle.load_trace(recorder.store, "latest")
    before = CALLS["llm"]
    with chronicle.replay(trace) as run:
        assert await run.arerun() == ("HI", [0, 1, 2])
    assert CALLS["llm"] == before and run.report.ok, run.report
    with chronicle.replay(trace) as run2, pytest.raises(chronicle.ReplayError, match="arerun"):
        run2.rerun()


def test_rerun_of_an_async_root_without_a_loop(recorder: Recorder) -> None:
    @chronicle.boundary(kind="agent", name="t.async_root")
    async def async_root(x: int) -> int:
        await asyncio.sleep(0)
        return x * 2

    asyncio.run(async_root(21))
    recorder.config.force_flush()
    trace = chronicle.load_trace(recorder.store, "latest")
    with chronicle.replay(trace) as run:
        assert run.rerun() == 42
    assert run.report.ok


async def test_concurrent_siblings_match_by_input_when_their_order_changes(recorder: Recorder) -> None:
    @chronicle.boundary(kind="llm", name="t.score")
    async def score(item: int) -> int:
        await asyncio.sleep(0.001 * ((item * 7) % 5))
        return item * item

    @chronicle.boundary(kind="agent", name="t.fanout")
    async def fanout(items: list[int]) -> list[int]:
        return list(await asyncio.gather(*(score(i) for i in items)))

    assert await fanout(list(range(10))) == [i * i for i in range(10)]
    recorder.config.force_flush()
    trace = chronicle.load_trace(recorder.store, "latest")

    @chronicle.boundary(kind="agent", name="t.fanout")
    async def fanout_reversed(items: list[int]) -> list[int]:
        results = {}
        for i in reversed(items):  # one at a time, in the other order: call indexes no longer line up
            results[i] = await score(i)
        return [results[i] for i in items]

    with chronicle.replay(trace, on_input_mismatch="error") as run:
        assert await fanout_reversed(list(range(10))) == [i * i for i in range(10)]
    assert run.report.ok, run.report
    assert len(run.report.stubbed) == 10


# ------------------------------------------------------------------ rerun, methods, blocks, spans


class Desk:
    def __init__(self, fee: int) -> None:
        self.fee = fee

    @chronicle.boundary(kind="agent", name="t.desk.trade")
    def trade(self, qty: int) -> int:
        return qty * self.fee


def test_rerun_a_method_root_on_an_instance(recorder: Recorder) -> None:
    trace = record(recorder, Desk(2).trade, 5)
    assert trace.root is not None and trace.root.input == {"qty": 5}
    with chronicle.replay(trace) as run:
        assert run.rerun(Desk(3)) == 15
    assert [f.kind for f in run.report.changes] == ["output-changed"]
    with chronicle.replay(trace) as run:
        assert run.rerun(Desk(2), qty=1) == 2  # overrides


def test_rerun_needs_the_root_defined_in_this_process(recorder: Recorder) -> None:
    trace = record(recorder, agent, "x")
    renamed = dataclasses.replace(trace.root, name="not.defined.anywhere")  # type: ignore[type-var]
    other = chronicle.Trace(trace.trace_id, trace.spans, (renamed,), renamed)
    with chronicle.replay(other) as run, pytest.raises(chronicle.ReplayError, match="never imports"):
        run.rerun()


def test_call_blocks_are_matched_during_replay(recorder: Recorder) -> None:
    @chronicle.boundary(kind="agent", name="t.blocky")
    def blocky() -> str:
        with chronicle.call("t.block", kind="tool", input={"k": 1}) as c:
            c.set_output(llm("abc").qty)
        return tool(Order("X", 1))

    trace = record(recorder, blocky)
    with chronicle.replay(trace) as run:
        assert run.rerun() == "sold 1 X"
    assert run.report.ok, run.report


def test_replay_emits_spans_linked_to_the_original(tmp_path: Any) -> None:
    rec = make_recorder(tmp_path)
    trace = record(rec, agent, "sell $1,000")
    rec.memory.clear()
    with chronicle.replay(trace, isolate=False) as run:  # into the process's own pipeline, as asked
        run.rerun()
    spans = {s.name: s for s in rec.spans()}
    assert set(spans) == {"t.agent", "t.llm", "t.tool"}
    for name, span in spans.items():
        attrs = span.attributes or {}
        assert attrs[sc.REPLAY_OF] == trace.trace_id
        assert attrs[sc.REPLAY_MODE] == ("stub" if name == "t.llm" else "live")
        [link] = span.links
        assert f"{link.context.trace_id:032x}" == trace.trace_id
        assert f"{link.context.span_id:016x}" == trace.find(name)[0].span_id
    assert json.loads((spans["t.llm"].attributes or {})[sc.OUTPUT])["data"] == {"qty": 1000, "symbol": "MSFT"}
    assert spans["t.agent"].status.status_code is StatusCode.UNSET
    rec.memory.clear()
    with chronicle.replay(trace, emit_spans=False, isolate=False) as run:
        run.rerun()
    assert rec.spans() == []


def test_replay_as_a_decorator_is_fresh_per_call(recorder: Recorder) -> None:
    trace = record(recorder, agent, "sell $1,000")
    run = chronicle.replay(trace)

    @run
    def twice() -> str:
        return agent("sell $1,000")

    assert twice() == "sold 1000 MSFT"
    assert twice() == "sold 1000 MSFT"  # a second replay, not a second call of the same one
