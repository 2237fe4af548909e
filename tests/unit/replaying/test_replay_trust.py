"""Replays that can be trusted: checked selectors, live model calls reported, what-if overrides, session drift, the
one allow-list, inputs kept as recorded, and the report's details."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import subprocess
import sys
import textwrap
import traceback
from pathlib import Path
from typing import Any

import pytest

import chronicle_otel as chronicle
from chronicle_otel.codec import UnresolvedObject
from chronicle_otel.errors import ConfigError, ReplayDivergence, ReplayError
from tests.conftest import Recorder
from tests.unit.agents import record

CALLS = {"llm": 0}


@dataclasses.dataclass(frozen=True)
class Order:
    symbol: str
    qty: int


class Refused(Exception):
    pass


@chronicle.boundary(kind="llm", name="trust.classify")
def classify(prompt: str) -> Order:
    CALLS["llm"] += 1
    return Order("MSFT", 1000 if "$" in prompt else len(prompt))


@chronicle.boundary(kind="guardrail", name="trust.guard")
def guard(order: Order) -> None:
    if order.qty > 50_000:
        raise Refused(f"{order.qty} shares is too many")


@chronicle.boundary(kind="tool", name="trust.place")
def place(order: Order) -> str:
    guard(order)
    return f"sold {order.qty} {order.symbol}"


EXTRA = {"classify": False, "rerank": False}


@chronicle.boundary(kind="agent", name="trust.agent")
def agent(prompt: str) -> str:
    order = classify(prompt)
    if EXTRA["rerank"]:  # a new model call the recording does not have
        order = rerank(order)
    try:
        return place(order)
    except Refused as exc:
        return f"refused: {exc}"


@chronicle.boundary(kind="agent", name="trust.twice")
def twice(prompt: str) -> str:
    return place(classify(prompt)) + " / " + place(classify(prompt + "!"))


@chronicle.boundary(kind="agent", name="trust.async_agent")
async def async_agent(prompt: str) -> str:
    await asyncio.sleep(0)
    return place(classify(prompt))


# ---------------------------------------------------------------------------------------------- checked selectors


@pytest.mark.parametrize(
    ("options", "listed"),
    [
        ({"stub": {"kind:lm"}}, ["'kind:llm'", "'kind:tool'", "'kind:guardrail'"]),
        ({"stub": {"clasify"}}, ["'trust.classify'"]),
        ({"stub": {"crm.*"}}, ["'trust.agent'"]),
        ({"live": {"trust.plac"}}, ["'trust.place'", "defined in this process"]),
    ],
)
def test_a_selector_that_selects_nothing_raises_before_any_call(
    recorder: Recorder, options: dict[str, Any], listed: list[str]
) -> None:
    trace = record(recorder, agent, "sell $1,000")
    before = CALLS["llm"]
    with pytest.raises(ConfigError) as caught, chronicle.replay(trace, **options) as run:
        run.rerun()
    message = str(caught.value)
    for text in listed:
        assert text in message
    assert CALLS["llm"] == before


def test_recorded_names_are_listed_closest_first(recorder: Recorder) -> None:
    trace = record(recorder, agent, "sell $1,000")
    with pytest.raises(ConfigError) as caught:
        chronicle.replay(trace, stub={"trust.clasify"})
    listed = str(caught.value).split("boundary: ", 1)[1]
    assert listed.startswith("'trust.classify'"), listed


def test_valid_kinds_absent_from_the_trace_are_accepted(recorder: Recorder) -> None:
    trace = record(recorder, agent, "sell $1,000")
    with chronicle.replay(trace, stub={"kind:llm", "kind:retrieval", "trust.*"}) as run:
        assert run.rerun() == "sold 1000 MSFT"
    assert run.report.ok, run.report


# ---------------------------------------------------------------------------------------------- live model calls


def test_an_llm_boundary_running_live_unasked_fails_the_report(recorder: Recorder) -> None:
    trace = record(recorder, agent, "sell $1,000")
    before = CALLS["llm"]
    with chronicle.replay(trace, stub=()) as run:
        run.rerun()
    assert CALLS["llm"] == before + 1
    assert not run.report.ok
    assert run.report.live_llm == [(("trust.agent", 0), ("trust.classify", 0))]
    assert [f.kind for f in run.report.divergences] == ["live-llm"]
    assert "1 live" not in str(run.report) and "(1 LLM)" in str(run.report)


def test_an_llm_boundary_selected_live_explicitly_is_allowed(recorder: Recorder) -> None:
    trace = record(recorder, agent, "sell $1,000")
    with chronicle.replay(trace, stub=(), live={"kind:llm"}) as run:
        run.rerun()
    assert run.report.ok, run.report
    assert run.report.live_llm == [(("trust.agent", 0), ("trust.classify", 0))]


def test_a_stub_under_default_live_of_another_kind_still_flags_the_llm(recorder: Recorder) -> None:
    trace = record(recorder, agent, "sell $1,000")
    with chronicle.replay(trace, stub={"trust.place"}) as run:  # the LLM is not stubbed: a model call
        run.rerun()
    assert [f.kind for f in run.report.divergences] == ["live-llm"]


# ---------------------------------------------------------------------------------------------- what-if overrides


def test_an_override_changes_the_downstream_outcome(recorder: Recorder) -> None:
    trace = record(recorder, agent, "sell 5 MSFT")
    assert trace.root is not None and trace.root.output == "sold 11 MSFT"
    what_if = {"trust.classify[0]": lambda order: dataclasses.replace(order, qty=100_000)}
    with chronicle.replay(trace, override=what_if) as run:
        result = run.rerun()
    assert result == "refused: 100000 shares is too many"
    [finding] = run.report.overrides
    assert finding.call_key == (("trust.agent", 0), ("trust.classify", 0))
    assert finding.details == (
        "recorded Order(symbol='MSFT', qty=11)",
        "now Order(symbol='MSFT', qty=100000)",
    )
    assert run.report.stubbed == [(("trust.agent", 0), ("trust.classify", 0))]
    assert "1 overridden" in str(run.report) and "overrides:" in str(run.report)
    # The guardrail now raises where it did not: a change the override asked for (intended), not a divergence.
    assert run.report.ok, run.report
    assert not run.report.changes
    assert {(f.kind, f.change) for f in run.report.intended} == {("output-changed", "override 'trust.classify[0]'")}


def test_an_override_value_an_exception_and_a_full_key(recorder: Recorder) -> None:
    trace = record(recorder, agent, "sell 5 MSFT")
    with chronicle.replay(trace, override={"trust.agent[0] > trust.classify[0]": Order("AAPL", 2)}) as run:
        assert run.rerun() == "sold 2 AAPL"
    what_if = {"trust.classify": RuntimeError("model overloaded")}
    with chronicle.replay(trace, override=what_if) as run, pytest.raises(RuntimeError, match="model overloaded"):
        run.rerun()
    assert run.report.overrides[0].details[1] == "now raises RuntimeError('model overloaded')"


def test_an_override_of_a_call_that_raised_gets_the_recorded_error(recorder: Recorder) -> None:
    trace = record(recorder, place, Order("MSFT", 60_000), raises=Refused)
    seen: list[BaseException] = []

    def accept(error: BaseException) -> None:
        seen.append(error)

    with chronicle.replay(trace, stub=(), override={"trust.guard[0]": accept}) as run:
        assert run.rerun() == "sold 60000 MSFT"
    assert isinstance(seen[0], Refused) and "60000 shares" in str(seen[0])


def test_an_unknown_or_unapplied_override_is_reported(recorder: Recorder) -> None:
    trace = record(recorder, agent, "sell 5 MSFT")
    with pytest.raises(ConfigError) as caught:
        chronicle.replay(trace, override={"trust.clasify[0]": 1})
    assert "trust.agent[0] > trust.classify[0]" in str(caught.value)
    with pytest.raises(ConfigError):
        chronicle.replay(trace, override={"trust.classify[3]": 1})
    # trust.guard runs under trust.place; stubbing place answers for it, so the override never applies.
    with chronicle.replay(trace, stub={"kind:llm", "trust.place"}, override={"trust.guard": None}) as run:
        run.rerun()
    assert [f.kind for f in run.report.divergences] == ["override-unused"]


def test_an_ambiguous_tail_key_is_refused(recorder: Recorder) -> None:
    trace = record(recorder, twice, "sell 5 MSFT")
    with pytest.raises(ConfigError, match=r"names 'trust\.twice"):
        chronicle.replay(trace, override={"trust.guard[0]": None})
    with chronicle.replay(trace, override={"trust.classify": Order("X", 1)}) as run:  # a bare name: every call
        assert run.rerun() == "sold 1 X / sold 1 X"
    assert len(run.report.overrides) == 2


# ---------------------------------------------------------------------------------------------- session drift


def test_session_variables_that_changed_are_listed_as_information(tmp_path: Path) -> None:
    from tests.conftest import make_recorder

    recorder = make_recorder(tmp_path, session={"build_id": "b1", "model_version": "m1"})
    with chronicle.session(prompt_version="v12"):
        trace = record(recorder, agent, "sell 5 MSFT")
    chronicle.configure(session={"build_id": "b2", "model_version": "m1"}, otlp=False, store=False)
    with chronicle.replay(trace) as run:
        run.rerun()
    lines = [f.message for f in run.report.session]
    assert lines == ["build_id: recorded 'b1', now 'b2'", "prompt_version: recorded 'v12', not set now"]
    assert run.report.ok, run.report
    assert "session variables that differ from the recording (information):" in str(run.report)


# ---------------------------------------------------------------------------------------------- fixes


def test_an_async_root_error_has_its_own_traceback_only(recorder: Recorder) -> None:
    trace = record(recorder, async_agent, "sell 5 MSFT")
    what_if = {"trust.classify": Order("MSFT", 70_000)}
    with chronicle.replay(trace, override=what_if) as run, pytest.raises(Refused) as caught:
        run.rerun()
    text = "".join(traceback.format_exception(caught.value))
    assert "no running event loop" not in text
    assert "During handling of the above exception" not in text


@chronicle.boundary(kind="agent", name="trust.changing")
def changing(prompt: str) -> str:
    if EXTRA["classify"]:  # the code changed: one more model call than recorded
        classify(prompt)
    return place(classify(prompt))


def test_nearest_recordings_do_not_list_used_ones(recorder: Recorder) -> None:
    trace = record(recorder, changing, "sell 5 MSFT")
    EXTRA["classify"] = True
    try:
        with chronicle.replay(trace) as run, pytest.raises(ReplayDivergence) as caught:
            run.rerun()
    finally:
        EXTRA["classify"] = False
    message = str(caught.value)
    assert "1 recorded call of 'trust.classify' here already answered" in message
    assert "trust.changing[0] > trust.place[0]" in message  # the unused sibling is listed
    assert "already used" not in message
    [change] = [f for f in run.report.changes if f.call_key == (("trust.changing", 0),)]
    assert change.message.startswith("now raises ReplayDivergence (see above)")
    assert "nearest recordings" not in str(change)


def one_span_file(path: Path, name: str, input_text: str, output_text: str | None = None) -> Path:
    """An OTLP/JSON file holding one boundary span written by another producer."""
    attributes = [
        {"key": "chronicle.boundary.kind", "value": {"stringValue": "tool"}},
        {"key": "chronicle.boundary.name", "value": {"stringValue": name}},
        {"key": "chronicle.input", "value": {"stringValue": input_text}},
    ]
    if output_text is not None:
        attributes.append({"key": "chronicle.output", "value": {"stringValue": output_text}})
    span = {
        "traceId": "ab" * 16,
        "spanId": "cd" * 8,
        "name": name,
        "startTimeUnixNano": "1",
        "endTimeUnixNano": "2",
        "attributes": attributes,
    }
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}))
    return path


def test_a_non_mapping_input_is_kept_as_recorded(tmp_path: Path) -> None:
    trace = chronicle.load_trace(one_span_file(tmp_path / "other.json", "other.tool", "[1, 2, 3]", "6"))
    assert trace.root is not None
    assert trace.root.input == [1, 2, 3]
    assert trace.root.output == 6

    @chronicle.boundary(kind="tool", name="other.tool")
    def total(*numbers: int) -> int:
        return sum(numbers)

    with chronicle.replay(trace) as run:
        assert run.rerun() == 6
    assert run.report.ok, run.report


def test_a_scalar_root_input_is_a_clear_error(tmp_path: Path) -> None:
    trace = chronicle.load_trace(one_span_file(tmp_path / "scalar.json", "scalar.tool", "42"))
    assert trace.root is not None and trace.root.input == 42

    @chronicle.boundary(kind="tool", name="scalar.tool")
    def scalar(x: int) -> int:
        return x

    with pytest.raises(ReplayError, match="is a JSON int, not the call's arguments"), chronicle.replay(trace) as run:
        run.rerun()


MODULE = textwrap.dedent(
    """
    import dataclasses
    import chronicle_otel as chronicle

    @dataclasses.dataclass
    class Verdict:
        allowed: bool
        reason: str

    @chronicle.boundary(kind="guardrail", name="later.check")
    def check(qty: int) -> Verdict:
        return Verdict(qty < 100, "limit")
    """
)

SCRIPT = textwrap.dedent(
    """
    import sys
    import chronicle_otel as chronicle
    from chronicle_otel.codec import UnresolvedObject

    mode, store = sys.argv[1], sys.argv[2]
    if mode == "record":
        import laterpkg
        config = chronicle.configure(store=chronicle.StoreOptions(path=store, processor="simple"), otlp=False)
        laterpkg.check(1000)
        config.shutdown()
        raise SystemExit(0)
    trace = chronicle.load_trace(store, "latest")
    before = trace.root.output
    assert isinstance(before, UnresolvedObject), before
    import laterpkg  # the module that defines the boundary (and the class) is imported after loading
    after = trace.root.output
    assert type(after) is laterpkg.Verdict and after == laterpkg.Verdict(False, "limit"), after
    with chronicle.replay(trace, stub={"later.check"}) as run:
        replayed = run.rerun()
    assert type(replayed) is laterpkg.Verdict and replayed == after
    print("same")
    """
)


def test_loading_and_replay_share_one_allow_list(tmp_path: Path) -> None:
    (tmp_path / "laterpkg.py").write_text(MODULE)
    (tmp_path / "script.py").write_text(SCRIPT)
    store = tmp_path / "store"
    env = {"PYTHONPATH": f"{tmp_path}:{Path.cwd()}", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    for mode in ("record", "load"):
        done = subprocess.run(
            [sys.executable, str(tmp_path / "script.py"), mode, str(store)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "same"


def test_unresolved_objects_stay_unresolved_for_classes_outside_the_allow_list(recorder: Recorder) -> None:
    trace = record(recorder, agent, "sell 5 MSFT")
    classify_call = trace.boundaries[1]
    assert isinstance(classify_call.output, Order)  # tests. defines boundaries: allowed
    assert isinstance(classify_call.decode_output(()), UnresolvedObject)


# ---------------------------------------------------------------------------------------------- no way around it


@chronicle.boundary(kind="agent", name="trust.pooled")
def pooled(prompt: str) -> str:
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # the worker thread does not inherit the context
        order = pool.submit(classify, prompt).result()
    return place(order)


def test_a_call_from_a_thread_without_the_replay_context_still_answers_to_the_replay(recorder: Recorder) -> None:
    record(recorder, pooled, "sell 5 MSFT")
    [summary] = [t for t in recorder.store.list_traces() if t.root_boundary == "trust.pooled"]
    trace = chronicle.load_trace(recorder.store, summary.trace_id)
    assert [b.name for b in trace.boundaries] == ["trust.pooled", "trust.place", "trust.guard"]  # classify: elsewhere
    before = CALLS["llm"]
    with chronicle.replay(trace) as run, pytest.raises(ReplayDivergence):
        run.rerun()
    assert CALLS["llm"] == before  # the model was not called from the pool
    assert [f.kind for f in run.report.divergences][:1] == ["unexpected-call"]


def test_the_decorator_form_fails_on_a_bad_report(recorder: Recorder) -> None:
    trace = record(recorder, agent, "sell 5 MSFT")
    replayed = chronicle.replay(trace, stub=())  # the LLM runs live, unasked

    @replayed
    def scenario() -> str:
        return agent("sell 5 MSFT")

    with pytest.raises(ReplayDivergence, match="live-llm"):
        scenario()
    assert not replayed.report.ok


def test_an_async_root_rerun_outside_a_with_block_runs_inside_the_replay(recorder: Recorder) -> None:
    trace = record(recorder, async_agent, "sell 5 MSFT")
    before = CALLS["llm"]
    run = chronicle.replay(trace)
    assert run.rerun() == "sold 11 MSFT"
    assert CALLS["llm"] == before
    assert run.report.ok and run.report.stubbed, run.report


@chronicle.boundary(kind="agent", name="trust.gen_root")
def gen_root(prompt: str) -> Any:
    yield classify(prompt)


def test_a_generator_root_rerun_outside_a_with_block_is_refused(recorder: Recorder) -> None:
    trace = record(recorder, lambda p: list(gen_root(p)), "sell 5 MSFT")
    before = CALLS["llm"]
    with pytest.raises(ReplayError, match="is a generator"):
        chronicle.replay(trace).rerun()
    with chronicle.replay(trace) as run:
        assert list(run.rerun()) == [Order("MSFT", 11)]
    assert CALLS["llm"] == before and run.report.ok, run.report


@chronicle.boundary(kind="llm", name="lit.a[1]")
def lit_bracket(prompt: str) -> str:
    CALLS["llm"] += 1
    return "bracket"


@chronicle.boundary(kind="llm", name="lit.a1")
def lit_plain(prompt: str) -> str:
    CALLS["llm"] += 1
    return "plain"


@chronicle.boundary(kind="agent", name="lit.agent")
def lit_agent(prompt: str) -> str:
    return lit_bracket(prompt) + lit_plain(prompt)


def test_a_selector_that_is_a_boundary_name_is_not_a_glob(recorder: Recorder) -> None:
    trace = record(recorder, lit_agent, "x")
    with chronicle.replay(trace, live={"lit.a[1]"}) as run:
        run.rerun()
    assert run.report.live_llm == [(("lit.agent", 0), ("lit.a[1]", 0))]  # not lit.a1, which the glob would match
    assert run.report.ok, run.report


def test_an_unrecorded_call_block_is_a_divergence(recorder: Recorder) -> None:
    trace = record(recorder, agent, "sell 5 MSFT")

    @chronicle.boundary(kind="agent", name="trust.agent")
    def with_block(prompt: str) -> str:
        with chronicle.call("trust.lookup", kind="tool", input={"q": prompt}) as c:
            c.set_output("found")
        return "done"

    ran = []
    block = chronicle.call("trust.lookup", kind="tool", input={"q": 1})
    with chronicle.replay(trace) as run, pytest.raises(ReplayDivergence, match=r"call\(\.\.\.\) block"), block:
        ran.append(True)
    assert ran == []  # the block's body did not run
    assert [f.kind for f in run.report.divergences][:1] == ["unexpected-call"]


@chronicle.boundary(kind="llm", name="trust.tokens")
def tokens(prompt: str) -> Any:
    CALLS["llm"] += 1
    yield from prompt.split()


@chronicle.boundary(kind="agent", name="trust.streamer")
def streamer(prompt: str, read: int = 99) -> list[str]:
    out = []
    for i, token in enumerate(tokens(prompt)):
        if i >= read:
            break
        out.append(token)
    return out


def test_stream_overrides_and_reading_past_a_recording(recorder: Recorder) -> None:
    trace = record(recorder, streamer, "a b c")
    with chronicle.replay(trace, override={"trust.tokens": iter(["x", "y"])}) as run:
        assert run.rerun() == ["x", "y"]
    with chronicle.replay(trace, override={"trust.tokens": "x y"}) as run, pytest.raises(ReplayError, match="list"):
        run.rerun()
    short = record(recorder, streamer, "a b c", read=1)  # the consumer stopped after one item
    with chronicle.replay(short) as run, contextlib.suppress(ReplayDivergence):  # a consumer that swallows it
        run.rerun(read=99)
    assert "past-recording" in [f.kind for f in run.report.divergences]


def test_a_stream_override_ending_with_an_exception_raises_it_after_the_items(recorder: Recorder) -> None:
    trace = record(recorder, streamer, "a b c")
    with (
        chronicle.replay(trace, override={"trust.tokens": ["x", ValueError("cut")]}) as run,
        pytest.raises(ValueError, match="cut"),
    ):
        run.rerun()
    assert run.report.overrides[0].details[1] == "now ['x'], then raises ValueError('cut')"
    with (
        chronicle.replay(trace, override={"trust.tokens": ["x", "y", TimeoutError]}) as run,
        pytest.raises(TimeoutError),
    ):
        run.rerun()
    with chronicle.replay(trace, override={"trust.tokens": ["x", "y", TimeoutError]}) as run:
        assert run.rerun(read=1) == ["x"], "a consumer that stops before the error does not see it"


def test_a_refusal_outside_every_boundary_is_said_so(recorder: Recorder) -> None:
    import socket

    from chronicle_otel.errors import NetworkBlockedError

    trace = record(recorder, agent, "sell 5 MSFT")
    with chronicle.replay(trace, allow_hosts=()) as run:
        run.rerun()
        with pytest.raises(NetworkBlockedError, match="outside any boundary of the replay"):
            socket.getaddrinfo("model.invalid", 443)


@chronicle.boundary(kind="llm", name="trust.rerank")
def rerank(order: Order) -> Order:
    CALLS["llm"] += 1
    return order


def test_a_new_boundary_can_be_selected_live(recorder: Recorder) -> None:
    trace = record(recorder, agent, "sell 5 MSFT")
    EXTRA["rerank"] = True
    try:
        with chronicle.replay(trace, live={"trust.rerank"}, on_missing="live") as run:
            run.rerun()
    finally:
        EXTRA["rerank"] = False
    assert run.report.live_llm == [(("trust.agent", 0), ("trust.rerank", 0))]
    assert not [f for f in run.report.divergences if f.kind == "live-llm"], run.report
