"""The drift policy of a replay: ``ignore=`` paths, ``strict=`` per selector, why each input changed, and declared
intended changes (``chronicle.changed()`` in the code, ``changed=`` in the test)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import chronicle_otel as chronicle
from chronicle_otel import semconv
from chronicle_otel.errors import ConfigError
from chronicle_otel.replaying import DriftCause, FindingKind, ReplayOptions, replay
from chronicle_otel.replaying._paths import PathPattern
from chronicle_otel.replaying._report import filtered_diff, format_path
from tests.conftest import Recorder
from tests.unit.agents import record

SETTINGS: dict[str, Any] = {}


def _defaults() -> dict[str, Any]:
    return {"prompt": "Sell $1,000 of {}", "guard": False, "declare": False, "usage": True, "extra_call": False}


@pytest.fixture(autouse=True)
def _settings() -> Iterator[None]:
    SETTINGS.clear()
    SETTINGS.update(_defaults())
    yield
    SETTINGS.clear()


@chronicle.boundary(kind="llm", name="dp.plan")
def plan(messages: list[str], model: str, stream_options: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"symbol": "MSFT", "qty": 1000}  # what production's model said (a replay answers from the recording)


@chronicle.boundary(kind="guardrail", name="dp.check")
def check(order: dict[str, Any]) -> str:
    if SETTINGS["declare"]:
        chronicle.changed("guardrail-v2")
    if SETTINGS["guard"]:
        return "blocked" if order["qty"] > 100 else "ok"
    return "ok"


@chronicle.boundary(kind="tool", name="dp.audit")
def audit(note: str) -> str:
    return "logged"


@chronicle.boundary(kind="llm", name="dp.summarize")
def summarize(messages: list[str]) -> str:
    return "sold 1000 MSFT"


@chronicle.boundary(kind="agent", name="dp.run")
def run(task: str) -> str:
    options = {"stream_options": {"include_usage": True}} if SETTINGS["usage"] else {}
    order = plan([SETTINGS["prompt"].format(task)], "gpt-x", **options)
    verdict = check(order)
    if SETTINGS["extra_call"]:
        audit(verdict)
    return summarize([f"order {order['qty']} {order['symbol']}", verdict])


def _record(recorder: Recorder, **settings: Any) -> chronicle.Trace:
    SETTINGS.update(settings)
    trace = record(recorder, run, "MSFT")
    SETTINGS.update(_defaults())
    return trace


def _replay(trace: chronicle.Trace, **options: Any) -> chronicle.ReplayReport:
    with replay(trace, **options) as r:
        r.rerun()
    return r.report


def test_an_unchanged_replay_has_no_drift(recorder: Recorder) -> None:
    report = _replay(_record(recorder))
    assert report.ok and not report.drift and not report.changes and not report.intended, report


def test_a_changed_prompt_is_unexplained_drift_and_strict_per_selector_fails_it(recorder: Recorder) -> None:
    trace = _record(recorder)
    SETTINGS["prompt"] = "Sell USD 1,000 worth of {}"
    report = _replay(trace)
    assert report.ok, report  # "warn": listed, not failing
    [drift] = report.drift
    assert drift.kind is FindingKind.INPUT_DRIFT and drift.call_key == (("dp.run", 0), ("dp.plan", 0))
    assert drift.cause is DriftCause.UNEXPLAINED and not drift.strict
    assert (
        "the prompt" in drift.message
        and "unexplained: nothing before it changed" in drift.message
        and any("$.messages[0]" in line for line in drift.details)
    )

    strict = _replay(trace, strict={"kind:llm": "input"})
    assert not strict.ok and strict.drift[0].strict
    assert "strict: fails the replay" in str(strict)
    assert _replay(trace, strict={"dp.summarize": "input"}).ok  # another boundary's inputs only
    assert not _replay(trace, strict=True).ok


def test_drift_after_a_live_change_is_upstream(recorder: Recorder) -> None:
    trace = _record(recorder)
    SETTINGS["guard"] = True  # the fix: the guardrail runs live and now blocks
    report = _replay(trace)
    [change] = report.changes
    assert change.call_key[-1] == ("dp.check", 0) and change.kind is FindingKind.OUTPUT_CHANGED
    [drift] = report.drift
    assert drift.call_key[-1] == ("dp.summarize", 0)
    assert drift.cause is DriftCause.UPSTREAM and "dp.run[0] > dp.check[0] (output changed)" in drift.message
    assert _replay(trace, strict={"dp.plan": "input"}).ok
    assert not _replay(trace, strict={"kind:llm": "input"}).ok


@pytest.mark.parametrize("how", ["code", "test", "test-list"])
def test_a_declared_change_is_listed_apart_and_never_fails(recorder: Recorder, how: str) -> None:
    trace = _record(recorder)
    SETTINGS["guard"] = True
    options: dict[str, Any] = {"strict": {"kind:llm": "input"}}
    if how == "code":
        SETTINGS["declare"] = True
    elif how == "test":
        options["changed"] = {"guardrail-v2": ["dp.check"]}
    else:
        options["changed"] = ["kind:guardrail"]
    report = _replay(trace, **options)
    assert report.ok, report
    assert not report.drift and not report.changes
    name = "kind:guardrail" if how == "test-list" else "guardrail-v2"
    assert [(f.kind, f.call_key[-1][0], f.change) for f in report.intended] == [
        (FindingKind.OUTPUT_CHANGED, "dp.check", name),
        (FindingKind.INPUT_DRIFT, "dp.summarize", name),
    ]
    assert all(f.cause is DriftCause.INTENDED for f in report.intended)
    assert "intended (declared changes):" in str(report)


def test_a_declared_change_does_not_hide_an_unexplained_one(recorder: Recorder) -> None:
    trace = _record(recorder)
    SETTINGS.update(guard=True, declare=True, prompt="Buy {}")  # the fix, and an unintended prompt change before it
    report = _replay(trace, strict={"kind:llm": "input"})
    assert not report.ok
    assert [(f.call_key[-1][0], f.cause) for f in report.drift] == [("dp.plan", DriftCause.UNEXPLAINED)]
    # plan's stub still answered as recorded: summarize's input changed because of the declared change only
    assert [f.call_key[-1][0] for f in report.intended] == ["dp.check", "dp.summarize"]
    assert report.changes == []


def test_a_change_recorded_with_its_declaration_is_no_difference(recorder: Recorder) -> None:
    trace = _record(recorder, guard=True, declare=True)
    check_span = trace.find("dp.check")[0].span
    assert tuple(check_span.attributes[semconv.CHANGES]) == ("guardrail-v2",)
    SETTINGS.update(guard=True, declare=True)
    report = _replay(trace)
    assert report.ok and not report.intended and not report.changes and not report.drift, report
    SETTINGS.update(guard=False)  # the recording has the change; code without it differs, unintended
    assert [f.call_key[-1][0] for f in _replay(trace).changes] == ["dp.check"]


def test_a_new_call_under_a_declared_change_is_intended(recorder: Recorder) -> None:
    trace = _record(recorder)
    SETTINGS.update(extra_call=True)
    report = _replay(trace, on_missing="live")
    [new] = report.drift
    assert new.kind is FindingKind.UNRECORDED_LIVE and new.cause is DriftCause.UNEXPLAINED
    assert not _replay(trace, on_missing="live", strict={"dp.audit": "all"}).ok
    assert _replay(trace, on_missing="live", strict={"dp.audit": "input"}).ok
    report = _replay(trace, on_missing="live", changed={"audit-trail": ["dp.audit"]})
    assert not report.drift and [f.change for f in report.intended] == ["audit-trail"]


def test_changed_outside_every_boundary_covers_the_whole_run(recorder: Recorder) -> None:
    trace = _record(recorder)
    SETTINGS["prompt"] = "Buy {}"
    with replay(trace, strict={"kind:llm": "input"}) as r:
        chronicle.changed("prompt-v3")
        r.rerun()
    assert r.report.ok and [f.change for f in r.report.intended] == ["prompt-v3"]


def test_an_override_is_an_intended_change_for_what_follows(recorder: Recorder) -> None:
    trace = _record(recorder)
    SETTINGS["guard"] = True
    report = _replay(trace, override={"dp.plan[0]": {"symbol": "MSFT", "qty": 5}}, strict={"kind:llm": "input"})
    assert report.ok, report
    [intended] = report.intended
    assert intended.call_key[-1] == ("dp.summarize", 0) and intended.change == "override 'dp.plan[0]'"


@pytest.mark.parametrize(
    "ignore",
    [["$.stream_options"], ["$..stream_options"], ["$['stream_options']"], {"dp.plan": ["$.stream_options"]}],
)
def test_an_ignored_field_never_drifts(recorder: Recorder, ignore: Any) -> None:
    trace = _record(recorder)
    SETTINGS["usage"] = False  # replayed behind another proxy: the SDK leaves stream_options out
    assert [f.call_key[-1][0] for f in _replay(trace).drift] == ["dp.plan"]
    report = _replay(trace, ignore=ignore, strict=True)
    assert report.ok and not report.drift and report.ignored >= 1, report
    assert "differences ignored" in str(report)


def test_ignore_for_another_boundary_or_path_keeps_the_drift(recorder: Recorder) -> None:
    trace = _record(recorder)
    SETTINGS.update(usage=False, prompt="Buy {}")
    report = _replay(trace, ignore={"dp.summarize": ["$.stream_options"]})
    [drift] = report.drift
    assert report.ignored == 0 and any("stream_options" in line for line in drift.details)
    report = _replay(trace, ignore=["$.stream_options"])
    [drift] = report.drift  # the prompt still differs: only that is listed
    assert report.ignored == 1 and not any("stream_options" in line for line in drift.details)
    assert any("$.messages[0]" in line for line in drift.details)


def test_on_input_mismatch_error_spares_ignored_and_intended_differences(recorder: Recorder) -> None:
    trace = _record(recorder)
    SETTINGS.update(usage=False)
    assert _replay(trace, on_input_mismatch="error", ignore=["$.stream_options"]).ok
    with pytest.raises(chronicle.ReplayDivergence, match="unexplained"), replay(trace, on_input_mismatch="error") as r:
        r.rerun()


@pytest.mark.parametrize(
    ("option", "value", "needs"),
    [
        ("ignore", "$.stream_options", "not a string"),
        ("ignore", ["stream_options"], "starting with '$'"),
        ("ignore", ["$.a..", "$.b"], "cannot read"),
        ("ignore", ["$[x]"], "cannot read"),
        ("strict", {"kind:llm": "inputs"}, "'input'"),
        ("strict", "yes", "True, False or"),
        ("changed", "dp.check", "not a string"),
        ("changed", {"": ["dp.check"]}, "change name"),
    ],
)
def test_bad_policy_options_are_config_errors(option: str, value: Any, needs: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(needs)):
        ReplayOptions(**{option: value})


def test_a_changed_selector_that_selects_nothing_is_an_error(recorder: Recorder) -> None:
    trace = _record(recorder)
    with pytest.raises(ConfigError, match="changed"):
        replay(trace, changed=["dp.chek"])


def test_changed_needs_a_name() -> None:
    with pytest.raises(ConfigError, match="change name"):
        chronicle.changed("")
    chronicle.changed("outside-everything")  # no replay, no span: nothing to do, nothing raised


def test_options_keep_their_form_through_replace() -> None:
    import dataclasses

    options = ReplayOptions(ignore=["$.a"], changed={"v2": "dp.check"}, strict={"kind:llm": "input"})
    again = dataclasses.replace(options, stub=("kind:llm",))
    assert again.ignore == (("*", ("$.a",)),) and again.changed == (("v2", ("dp.check",)),)
    assert dict(again.strict) == {"kind:llm": "input"}  # type: ignore[arg-type]


_NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=8)
_SEGMENTS = st.lists(st.one_of(_NAMES, st.integers(0, 50)), max_size=6).map(tuple)


@given(_SEGMENTS, _SEGMENTS)
def test_a_path_pattern_matches_its_path_and_what_is_below(path: tuple[Any, ...], below: tuple[Any, ...]) -> None:
    pattern = PathPattern(format_path(path))
    assert pattern.matches(path) and pattern.matches(path + below)
    if path:
        assert not pattern.matches(path[:-1])
        deep = PathPattern("$.." + format_path(path[-1:])[1:].lstrip("."))
        assert deep.matches(below + path)


@given(st.dictionaries(_NAMES, st.integers(-1000, 1000)), st.dictionaries(_NAMES, st.integers(-1000, 1000)))
def test_ignoring_every_differing_key_leaves_no_difference(a: dict[str, int], b: dict[str, int]) -> None:
    import orjson

    keys = {k for k in set(a) | set(b) if a.get(k) != b.get(k) or (k in a) != (k in b)}
    patterns = [PathPattern(f"$.{k}") for k in keys]
    lines, hidden = filtered_diff(
        orjson.dumps(a).decode(), orjson.dumps(b).decode(), lambda p: any(x.matches(p) for x in patterns)
    )
    assert lines == [] and hidden == len(keys)
