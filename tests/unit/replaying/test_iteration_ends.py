"""A tampered trace cannot end the replayed code's iterations: a recorded ``StopIteration`` or
``StopAsyncIteration`` is never raised into it by a stub, which would end a ``map()``, ``next()`` or ``async for``
silently; the stub raises a ``ReplayedError`` naming the call instead, and the report says why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel.model import ReplayedError
from tests.conftest import Recorder
from tests.unit.agents import record
from tests.unit.replaying.trace_files import rewrite_spans, set_attribute


@chronicle.boundary(kind="tool", name="stop.page")
def page(n: int) -> list[str]:
    if n == 3:
        raise LookupError(f"no page {n}")
    return [f"item{n}"]


@chronicle.boundary(kind="agent", name="stop.collect")
def collect(pages: int) -> list[str]:
    items: list[str] = []
    try:
        for found in map(page, range(pages)):
            items += found
    except LookupError as e:
        items.append(f"failed: {e}")
    return items


@chronicle.boundary(kind="tool", name="stop.next_event")
async def next_event(n: int) -> str:
    if n == 2:
        raise LookupError("no more events")
    return f"event{n}"


class Events:
    """An async iterator whose items come from a boundary: what it raises ends or fails the ``async for``."""

    def __init__(self) -> None:
        self.n = 0

    def __aiter__(self) -> Events:
        return self

    async def __anext__(self) -> str:
        self.n += 1
        return await next_event(self.n - 1)


@chronicle.boundary(kind="agent", name="stop.listen")
async def listen() -> list[str]:
    seen: list[str] = []
    try:
        async for event in Events():
            seen.append(event)
    except LookupError as e:
        seen.append(f"failed: {e}")
    return seen


def with_error_type(path: Path, type_name: str) -> None:
    """Rewrite the recorded error of every span that has one to ``type_name``; its hash is recomputed."""

    def change(span: dict[str, Any], attrs: dict[str, dict[str, Any]]) -> None:
        if sc.ERROR in attrs:
            error = json.loads(attrs[sc.ERROR]["value"]["stringValue"])
            set_attribute(span, attrs, sc.ERROR, {**error, "type": type_name})

    rewrite_spans(path, change)


CASES: dict[str, tuple[Any, tuple[Any, ...], str, str]] = {
    "StopIteration in map()": (collect, (5,), "builtins.StopIteration", "stop.collect[0] > stop.page[3]"),
    "StopAsyncIteration in async for": (
        listen,
        (),
        "builtins.StopAsyncIteration",
        "stop.listen[0] > stop.next_event[2]",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_recorded_stop_is_never_raised_into_the_code(recorder: Recorder, tmp_path: Path, case: str) -> None:
    root, args, type_name, key = CASES[case]
    trace = record(recorder, root, *args)
    path = chronicle.write_trace(trace, tmp_path / "incident.jsonl")
    with chronicle.replay(chronicle.load_trace(path), stub={"kind:tool"}) as run:
        recorded = run.rerun()
    assert recorded[-1].startswith("failed: no"), recorded  # untampered: the code's own error path, as recorded

    with_error_type(path, type_name)
    with pytest.raises(ReplayedError) as info, chronicle.replay(chronicle.load_trace(path), stub={"kind:tool"}) as run:
        run.rerun()  # a StopIteration would have ended the loop here, the run "succeeding" with fewer items
    error = info.value
    assert error.type_name == type_name
    assert str(error).startswith(f"{type_name}: ")
    assert f"(recorded by {key}; a stub never raises {type_name}, which would end the caller's iteration" in str(error)
    (finding,) = run.report.divergences
    assert finding.kind == "unresolved" and chronicle.model.format_key(finding.call_key) == key
    assert f"{type_name} is never rebuilt (raised by a stub it would end the caller's iteration silently" in (
        finding.message
    )
    assert not run.report.ok
