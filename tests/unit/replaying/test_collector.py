"""A replay leaves the cyclic garbage collector as the process set it while the code it reruns runs: chronicle
pauses the collector only around building its own objects (a trace loaded, the index of the recordings), and those
pauses nest and overlap across threads."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import chronicle_otel as chronicle
from chronicle_otel._internal import hooks
from chronicle_otel._internal.gc_pause import gc_paused
from tests.conftest import make_recorder
from tests.unit.agents import record

DEFAULT = (700, 10, 10)


@chronicle.boundary(kind="llm", name="collector.model")
def model(prompt: str) -> str:
    seen.append((gc.isenabled(), gc.get_threshold()))
    return prompt.upper()


@chronicle.boundary(kind="agent", name="collector.agent")
def agent(prompt: str) -> str:
    seen.append((gc.isenabled(), gc.get_threshold()))
    return model(prompt)


seen: list[tuple[bool, tuple[int, ...]]] = []


@pytest.fixture(autouse=True)
def _default_thresholds() -> Iterator[None]:
    gc.set_threshold(*DEFAULT)
    yield
    gc.set_threshold(*DEFAULT)
    gc.enable()


@pytest.mark.parametrize("thresholds", [DEFAULT, (5000, 20, 20)], ids=["default", "tuned by the application"])
def test_the_code_replayed_runs_with_the_collector_as_the_process_set_it(
    tmp_path: Path, thresholds: tuple[int, int, int]
) -> None:
    trace = record(make_recorder(tmp_path), agent, "sell")
    gc.set_threshold(*thresholds)
    seen.clear()
    with chronicle.replay(trace, stub={"kind:tool"}, live={"kind:llm"}) as run:
        assert (gc.isenabled(), gc.get_threshold()) == (True, thresholds)
        assert run.rerun() == "SELL"
    assert seen == [(True, thresholds)] * 2  # the root and the live model call
    assert (gc.isenabled(), gc.get_threshold()) == (True, thresholds)
    assert run.report.ok, run.report


def test_thresholds_the_code_sets_during_a_replay_are_kept(tmp_path: Path) -> None:
    trace = record(make_recorder(tmp_path), agent, "sell")
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        gc.set_threshold(5000, 20, 20)  # a server module imported during the replay tunes the collector
        assert run.rerun() == "SELL"
    assert gc.get_threshold() == (5000, 20, 20)


def test_building_a_replay_resumes_a_collector_that_ran_and_leaves_one_that_was_off(tmp_path: Path) -> None:
    trace = record(make_recorder(tmp_path), agent, "sell")
    chronicle.replay(trace)  # its index of the recordings is built with the collector paused
    assert gc.isenabled()
    gc.disable()
    chronicle.replay(trace)
    assert not gc.isenabled()


def test_pauses_nest_and_overlap_across_threads() -> None:
    """The collector's switch is process-wide: it stays off until the last block, in any thread, ends."""
    inside = threading.Barrier(2)

    def hold() -> None:
        with gc_paused():
            inside.wait(timeout=5)
            inside.wait(timeout=5)

    worker = threading.Thread(target=hold)
    worker.start()
    with gc_paused(), gc_paused():
        inside.wait(timeout=5)
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread is still inside
    inside.wait(timeout=5)
    worker.join(timeout=5)
    assert gc.isenabled()


def test_a_replay_left_in_another_task_than_it_was_entered_in_ends(tmp_path: Path) -> None:
    """An async fixture enters the replay in its setup task and leaves it in its teardown task."""
    trace = record(make_recorder(tmp_path), agent, "sell")
    run = chronicle.replay(trace, stub={"kind:llm"})

    async def main() -> None:
        async def enter() -> None:
            run.__enter__()
            assert hooks.REPLAY.get() is run

        await asyncio.create_task(enter())
        await asyncio.create_task(asyncio.to_thread(lambda: None))  # an unrelated task in between
        await asyncio.create_task(_leave())

    async def _leave() -> None:
        run.__exit__(None, None, None)
        assert hooks.REPLAY.get() is None

    asyncio.run(main())
    assert hooks.current_replay() is None
    with chronicle.replay(trace, stub={"kind:llm"}) as again:  # nothing is left held: a next replay works
        assert again.rerun() == "SELL"
    assert gc.get_threshold() == DEFAULT and gc.isenabled()
