"""Matching calls to recordings among many siblings: by call key, else the first unused sibling with the same input."""

from __future__ import annotations

import chronicle_otel as chronicle
from tests.conftest import Recorder
from tests.unit.agents import record

ORDER: list[str] = []  # set while replaying: the prompts in another order
ASKED: list[str] = []  # the calls that ran (recording only: replayed calls are stubbed)


@chronicle.boundary(kind="llm", name="many.ask")
def ask(prompt: str) -> str:
    ASKED.append(prompt)
    return f"recorded answer {len(ASKED) - 1} to {prompt}"  # says which recorded call it was


@chronicle.boundary(kind="agent", name="many.run")
def run_all(prompts: list[str]) -> list[str]:
    return [ask(prompt) for prompt in ORDER or prompts]


def test_siblings_with_repeated_inputs_are_answered_by_the_first_unused_recording(recorder: Recorder) -> None:
    prompts = ["A", "B"] * 150  # recorded: A0 B1 A2 B3 …
    ORDER.clear()
    ASKED.clear()
    trace = record(recorder, run_all, prompts)
    ORDER[:] = ["B", "A"] * 150  # replayed in the other order at every position
    try:
        with chronicle.replay(trace, on_input_mismatch="error") as run:
            answers = run.rerun()
    finally:
        ORDER.clear()
    assert len(ASKED) == len(prompts)  # nothing ran again
    # B at call 0 finds recording 1 (B); A at call 1 finds recording 0 (the key's own, 1, is used); and so on
    expected = []
    for i in range(0, 300, 2):
        expected += [f"recorded answer {i + 1} to B", f"recorded answer {i} to A"]
    assert answers == expected
    assert len(run.report.stubbed) == 300
    assert not run.report.drift
    assert not [f for f in run.report.divergences if f.kind != "order"]  # recorded earlier, called later: listed


def test_every_sibling_moved_is_still_found_by_its_input(recorder: Recorder) -> None:
    prompts = [f"question {i}" for i in range(400)]
    ORDER.clear()
    ASKED.clear()
    trace = record(recorder, run_all, prompts)
    ORDER[:] = prompts[::-1]
    try:
        with chronicle.replay(trace, on_input_mismatch="error") as run:
            answers = run.rerun()
    finally:
        ORDER.clear()
    assert len(ASKED) == len(prompts)  # nothing ran again
    assert answers == [f"recorded answer {i} to question {i}" for i in reversed(range(400))]
    assert not run.report.drift and len(run.report.stubbed) == 400
    assert not [f for f in run.report.divergences if f.kind != "order"]
