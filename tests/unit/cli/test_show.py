"""``chronicle show``: values as Python shows them, cut or whole, one call in detail, JSON, colours on a terminal."""

from __future__ import annotations

import concurrent.futures
import contextvars
import json
import threading
import time
from decimal import Decimal
from typing import Any

import orjson
import pytest

import chronicle_otel as chronicle
from chronicle_otel.cli import _render
from chronicle_otel.codec import encode
from tests.conftest import Recorder
from tests.unit.agents import Channel, Refund, record, record_support
from tests.unit.cli.command import TTY, run


def test_typed_values_render_without_their_type_wrappers(recorder: Recorder) -> None:
    tid = record_support(recorder, "refund me big", amount="500", user="bob")
    code, out, err = run("show", tid[:8], "--store", str(recorder.path))
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"trace {tid}  (4 boundaries, 4 spans)"
    assert lines[1].startswith("ERROR  ") and lines[2] == "session: user='bob'"
    assert "agent     cli.support[0]" in out and "  llm       cli.classify[0]" in out
    assert "      out: Intent(category='refund', confidence=0.75)" in out
    assert "      in : amount=Decimal('500')" in out
    assert "      err: RefundError('amount 500 too large')" in out
    assert "    in : amount='500', question='refund me big', refunds=1" in out
    assert "stream complete" in out and "out: ['doc-0 about refund', 'doc-1 about refund']" in out
    assert "$type" not in out and "UNSET" not in out
    assert " OK" in out


def test_values_are_cut_unless_full(recorder: Recorder) -> None:
    question = "please " * 40 + "refund\nsecond line of the question, long enough to be shown on its own line"
    tid = record_support(recorder, question)
    _, out, _ = run("show", tid, "--store", str(recorder.path))
    line = next(x for x in out.splitlines() if "in : amount=" in x)
    assert line.endswith("…") and len(line.strip()) <= 100
    _, full, _ = run("show", tid, "--store", str(recorder.path), "--full")
    assert "second line of the question" in full and "…" not in full
    assert " please refund\\n'\n" in full  # a long text, one line of code per line
    assert "            'second line of the question, long enough to be shown on its own line'\n" in full
    assert "Refund(channel=Channel.CHAT, note='ok', refunded=Decimal('49.99'))" in full  # fields as recorded: sorted


def test_boundary_shows_chosen_calls_whole(recorder: Recorder) -> None:
    tid = record_support(recorder, "refund twice", refunds=2)
    store = str(recorder.path)
    code, out, _ = run("show", tid, "--store", store, "--boundary", "cli.refund")
    assert code == 0
    assert out.count("tool      cli.refund[") == 2 and "cli.classify" not in out
    assert "cli.support[0] > cli.refund[1]" in out
    assert "    function tests.unit.agents.refund" in out
    assert "    input (ok, " in out and "        amount=Decimal('49.99')" in out
    code, out, _ = run("show", tid, "--store", store, "--boundary", "cli.refund[1]", "--boundary", "cli.classify")
    assert "cli.refund[1]" in out and "cli.refund[0]" not in out and "llm       cli.classify[0]" in out
    code, _, err = run("show", tid, "--store", store, "--boundary", "cli.refnud")
    assert code == 2 and "--boundary" in err and "cli.refund" in err  # the closest recorded names


def test_json_keeps_the_payloads_as_recorded(recorder: Recorder) -> None:
    tid = record_support(recorder, "refund me big", amount="500", user="bob")
    code, out, _ = run("show", tid, "--store", str(recorder.path), "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["trace_id"] == tid and doc["status"] == "ERROR" and doc["session"] == {"user": "bob"}
    by_name = {b["name"]: b for b in doc["boundaries"]}
    assert by_name["cli.classify"]["output"]["$type"] == "pydantic"
    assert by_name["cli.classify"]["status"] == "OK" and by_name["cli.refund"]["status"] == "ERROR"
    assert by_name["cli.refund"]["error"]["type"].endswith("RefundError")
    assert by_name["cli.refund"]["call_key"] == "cli.support[0] > cli.refund[0]"
    assert by_name["cli.search"]["stream"] == "complete" and by_name["cli.support"]["incomplete"] == []
    _, out, _ = run("show", tid, "--store", str(recorder.path), "--json", "--boundary", "cli.classify")
    assert [b["name"] for b in json.loads(out)["boundaries"]] == ["cli.classify"]


def test_colours_only_on_a_terminal_without_no_color(recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    tid = record_support(recorder, "refund me big", amount="500")
    monkeypatch.delenv("NO_COLOR", raising=False)
    _, plain, _ = run("show", tid, "--store", str(recorder.path))
    assert "\x1b[" not in plain
    _, coloured, _ = run("show", tid, "--store", str(recorder.path), out=TTY())
    assert "\x1b[" in coloured and "Intent(category='refund', confidence=0.75)" in coloured
    _, listed, _ = run("list", "--store", str(recorder.path), out=TTY())
    assert "\x1b[" in listed
    monkeypatch.setenv("NO_COLOR", "1")
    _, uncoloured, _ = run("show", tid, "--store", str(recorder.path), out=TTY())
    assert "\x1b[" not in uncoloured and "Intent(category='refund', confidence=0.75)" in uncoloured
    monkeypatch.setenv("NO_COLOR", "")  # empty: not set (no-color.org)
    assert "\x1b[" in run("show", tid, "--store", str(recorder.path), out=TTY())[1]


def test_recorded_text_cannot_drive_the_terminal(recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    tid = record_support(recorder, "refund \x1b[2J\x1b]0;owned\x07 me", user="\x1b[31mred")
    for out in (None, TTY()):
        _, text, _ = run("show", tid, "--store", str(recorder.path), "--full", out=out)
        assert "\x1b[2J" not in text and "\x07" not in text and "\x1b[31mred" not in text
        assert "\\x1b[2J" in text


def rendered(value: Any, **how: Any) -> list[str]:
    return _render.render(orjson.loads(encode(value)), **how)


def test_render_as_python_writes_values() -> None:
    assert rendered((1,)) == ["(1,)"]
    assert rendered({1: "a", 2: b"\x00z"}) == ["{1: 'a', 2: b'\\x00z'}"]
    assert rendered({"s": {3}, "f": frozenset(), "n": None}) == ["{'f': frozenset(), 'n': None, 's': {3}}"]
    assert rendered(Refund(Decimal("1.5"), "x", Channel.EMAIL)) == [
        "Refund(channel=Channel.EMAIL, note='x', refunded=Decimal('1.5'))"
    ]
    assert rendered(ValueError("bad", 3)) == ["ValueError('bad', 3)"]
    assert rendered(2**80) == [str(2**80)] and rendered(float("nan")) == ["float('nan')"]
    assert rendered(object())[0].startswith("<unencodable builtins.object: <object object at")
    assert _render.render({"$type": "future-tag", "class": "a.B", "x": 1}) == ["<future-tag B: x=1>"]
    assert _render.render(
        {"type": "app.errors.Boom", "message": "m", "args": [], "attrs": {"code": 7}}, error=True
    ) == ["Boom('m', code=7)"]


def test_render_cuts_or_breaks_long_values() -> None:
    value = {"items": list(range(200)), "text": "x" * 500}
    [line] = rendered(value, width=60)
    assert len(line) == 60 and line.endswith("…")
    lines = rendered(value, width=None)
    assert lines[0] == "{" and lines[-1] == "}" and all(len(x) <= 100 for x in lines if "xxx" not in x)
    assert "    'text': '" + "x" * 500 + "'," in lines
    assert rendered({"a": 1}, width=None, args=True) == ["a=1"]


_PARALLEL: dict[str, Any] = {}


@chronicle.boundary(kind="tool", name="cli.lookup")
def _lookup() -> str:
    _PARALLEL["lookup started"].set()
    _PARALLEL["both started"].wait()  # both tools have started before either calls its child
    return _fetch("order")


@chronicle.boundary(kind="tool", name="cli.policy")
def _policy() -> str:
    _PARALLEL["both started"].wait()
    time.sleep(0.05)  # its child starts after the other tool's child
    return _fetch("policy")


@chronicle.boundary(kind="tool", name="cli.fetch")
def _fetch(what: str) -> str:
    return what


@chronicle.boundary(kind="agent", name="cli.parallel")
def _parallel() -> list[str]:
    """Two tools in a thread pool, started in turn, each with a child call: the lines in start order are
    parallel, lookup, policy, fetch (of lookup), fetch (of policy)."""
    _PARALLEL.update({"lookup started": threading.Event(), "both started": threading.Barrier(2)})
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        lookup = pool.submit(contextvars.copy_context().run, _lookup)
        _PARALLEL["lookup started"].wait()
        policy = pool.submit(contextvars.copy_context().run, _policy)
        return [lookup.result(), policy.result()]


def test_the_tree_nests_children_of_parallel_calls_under_their_parent(recorder: Recorder) -> None:
    record(recorder, _parallel)
    code, out, _ = run("show", "latest", "--store", str(recorder.path))
    assert code == 0
    calls = [line for line in out.splitlines() if "cli." in line and " in : " not in line and " out: " not in line]
    names = [(len(line) - len(line.lstrip()), line.split()[1]) for line in calls]
    assert names == [
        (0, "cli.parallel[0]"),
        (2, "cli.lookup[0]"),
        (4, "cli.fetch[0]"),
        (2, "cli.policy[0]"),
        (4, "cli.fetch[0]"),
    ]
