"""While a replay runs, full collections (which walk the whole loaded trace) are spaced ten times further apart, and
the thresholds come back when it ends: nothing is set aside or lost, nested and concurrent replays share one
change, and thresholds set by something else meanwhile are kept."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

import chronicle_otel as chronicle
from chronicle_otel._internal import hooks
from chronicle_otel._internal.gc_pause import FULL_COLLECTIONS_SPACED, full_collections_spaced, gc_paused
from tests.conftest import make_recorder
from tests.unit.replaying.helpers import record

DEFAULT = (700, 10, 10)
SPACED = (700, 10, 10 * FULL_COLLECTIONS_SPACED)


class _Node:
    """A container the collector tracks, to build reference cycles with."""

    def __init__(self) -> None:
        self.other: Any = None


def _cycle() -> weakref.ref[_Node]:
    """A two-object cycle nothing else refers to; a weak reference to tell when the collector freed it."""
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@chronicle.boundary(kind="llm", name="spaced.model")
def model(prompt: str) -> str:
    return prompt.upper()


@chronicle.boundary(kind="agent", name="spaced.agent")
def agent(prompt: str) -> str:
    seen.append(gc.get_threshold())
    return model(prompt)


seen: list[tuple[int, ...]] = []


@pytest.fixture(autouse=True)
def _default_thresholds() -> Iterator[None]:
    gc.set_threshold(*DEFAULT)
    yield
    gc.set_threshold(*DEFAULT)
    gc.enable()


def test_a_replay_spaces_full_collections_and_puts_the_thresholds_back(tmp_path: Path) -> None:
    trace = record(make_recorder(tmp_path), agent, "sell")
    seen.clear()
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        assert run.rerun() == "SELL"
    assert seen == [SPACED]  # the code replayed ran with full collections spaced
    assert gc.get_threshold() == DEFAULT
    assert run.report.ok, run.report


def test_garbage_made_before_the_block_is_still_collected() -> None:
    gc.disable()  # only the collections below
    try:
        older = _cycle()
        with full_collections_spaced():
            newer = _cycle()
            gc.collect()
            assert older() is None and newer() is None  # nothing set aside: an explicit collection frees both
    finally:
        gc.enable()


@pytest.mark.parametrize(
    ("block", "changed", "unchanged"),
    [
        (full_collections_spaced, lambda: gc.get_threshold() == SPACED, lambda: gc.get_threshold() == DEFAULT),
        (gc_paused, lambda: not gc.isenabled(), gc.isenabled),
    ],
    ids=["spaced while replaying", "paused while loading"],
)
def test_blocks_nest_and_overlap_across_threads(
    block: Callable[[], AbstractContextManager[None]], changed: Callable[[], bool], unchanged: Callable[[], bool]
) -> None:
    """Both process-wide collector switches: the change holds until the last block, in any thread, ends."""
    inside = threading.Barrier(2)

    def hold() -> None:
        with block():
            inside.wait(timeout=5)
            inside.wait(timeout=5)

    worker = threading.Thread(target=hold)
    worker.start()
    with block(), block():
        inside.wait(timeout=5)
        assert changed()
    assert changed()  # the other thread is still inside
    inside.wait(timeout=5)
    worker.join(timeout=5)
    assert unchanged()


def test_thresholds_set_meanwhile_are_kept_and_collection_off_is_left_alone() -> None:
    with full_collections_spaced():
        gc.set_threshold(5000, 20, 20)  # a server module imported during the replay tunes the collector
    assert gc.get_threshold() == (5000, 20, 20)
    gc.set_threshold(0, 10, 10)  # automatic collection off
    with full_collections_spaced():
        assert gc.get_threshold() == (0, 10, 10)
    assert gc.get_threshold() == (0, 10, 10)


def test_a_failing_replay_puts_the_thresholds_back(tmp_path: Path) -> None:
    trace = record(make_recorder(tmp_path), agent, "sell")
    with pytest.raises(RuntimeError, match="boom"), chronicle.replay(trace, stub={"kind:llm"}):
        assert gc.get_threshold() == SPACED
        raise RuntimeError("boom")
    assert gc.get_threshold() == DEFAULT


def test_a_replay_left_in_another_task_than_it_was_entered_in_ends(tmp_path: Path) -> None:
    """An async fixture enters the replay in its setup task and leaves it in its teardown task."""
    trace = record(make_recorder(tmp_path), agent, "sell")
    run = chronicle.replay(trace, stub={"kind:llm"})

    async def main() -> None:
        async def enter() -> None:
            run.__enter__()
            assert hooks.REPLAY.get() is run

        await asyncio.create_task(enter())
        assert gc.get_threshold() == SPACED
        await asyncio.create_task(asyncio.to_thread(lambda: None))  # an unrelated task in between
        await asyncio.create_task(_leave())

    async def _leave() -> None:
        run.__exit__(None, None, None)
        assert hooks.REPLAY.get() is None

    asyncio.run(main())
    assert gc.get_threshold() == DEFAULT
    with chronicle.replay(trace, stub={"kind:llm"}) as again:  # nothing is left held: a next replay works
        assert again.rerun() == "SELL"
    assert gc.get_threshold() == DEFAULT
