"""While a replay runs, the objects alive when it began (the loaded trace above all) are set aside from the cyclic
collector's walks, and put back when it ends: nothing is lost, nested and concurrent replays share one set-aside,
and a freeze made by something else is left alone."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import chronicle_otel as chronicle
from chronicle_otel._internal.gc_pause import survivors_set_aside
from tests.conftest import make_recorder
from tests.unit.replay.helpers import record


class _Node:
    """A container the collector tracks, to build reference cycles with."""

    def __init__(self) -> None:
        self.other: Any = None


def _cycle() -> weakref.ref[_Node]:
    """A two-object cycle nothing else refers to; a weak reference to tell when the collector freed it."""
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@chronicle.boundary(kind="llm", name="aside.model")
def model(prompt: str) -> str:
    return prompt.upper()


@chronicle.boundary(kind="agent", name="aside.agent")
def agent(prompt: str) -> str:
    seen.append(gc.get_freeze_count())
    return model(prompt)


seen: list[int] = []


@pytest.fixture(autouse=True)
def _nothing_frozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.enable()


def test_a_replay_sets_the_loaded_trace_aside_and_puts_it_back(tmp_path: Path) -> None:
    trace = record(make_recorder(tmp_path), agent, "sell")
    seen.clear()
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        assert run.rerun() == "SELL"
        assert gc.get_freeze_count() > 0
    assert seen and seen[0] > 0  # the code replayed ran with the older objects set aside
    assert gc.get_freeze_count() == 0
    assert run.report.ok, run.report


def test_garbage_made_during_the_block_is_collected_and_older_cycles_after_it() -> None:
    gc.disable()  # only the collections below: none may run before the block starts
    older = _cycle()
    with survivors_set_aside():
        assert gc.get_freeze_count() > 0
        newer = _cycle()
        gc.collect()
        assert newer() is None  # made during the block: collected as usual
        assert older() is not None  # set aside: not walked while the block runs
    gc.collect()
    assert older() is None  # put back: collected now
    assert gc.get_freeze_count() == 0


def test_blocks_nest_and_overlap_across_threads() -> None:
    inside = threading.Barrier(2)

    def hold() -> None:
        with survivors_set_aside():
            inside.wait(timeout=5)
            inside.wait(timeout=5)

    worker = threading.Thread(target=hold)
    worker.start()
    with survivors_set_aside():
        with survivors_set_aside():
            inside.wait(timeout=5)
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() > 0  # the other thread is still inside
    inside.wait(timeout=5)
    worker.join(timeout=5)
    assert gc.get_freeze_count() == 0


def test_a_freeze_made_by_something_else_is_left_alone() -> None:
    gc.freeze()  # a server about to fork
    frozen = gc.get_freeze_count()
    with survivors_set_aside():
        pass
    assert gc.get_freeze_count() == frozen


def test_a_failing_replay_puts_the_objects_back(tmp_path: Path) -> None:
    trace = record(make_recorder(tmp_path), agent, "sell")
    with pytest.raises(RuntimeError, match="boom"), chronicle.replay(trace, stub={"kind:llm"}):
        assert gc.get_freeze_count() > 0
        raise RuntimeError("boom")
    assert gc.get_freeze_count() == 0
