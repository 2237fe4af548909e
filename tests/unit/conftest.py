"""Fixtures of the demo's stock agent, shared by the tests that record and sample it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import chronicle_otel as chronicle
from examples.stock_agent import agent
from tests.conftest import Recorder


@pytest.fixture
def fresh_model() -> Iterator[None]:
    """The simulated model's generators start afresh, before and after the test: each seed's next answer is its first
    (the same in every process), whatever ran before in this process."""
    agent.SimulatedLLM.reset()
    yield
    agent.SimulatedLLM.reset()


@pytest.fixture
def bad_run(recorder: Recorder, monkeypatch: pytest.MonkeyPatch, fresh_model: None) -> chronicle.Trace:
    """The demo's bad run, recorded: the old guardrail, and the model reading $1,000 as 1,000 shares. The model's
    generators start afresh after it."""
    monkeypatch.setenv("STOCK_AGENT_GUARDRAIL", "v1")
    result = agent.run_agent("Sell $1,000 of MSFT", seed=1)
    assert result.status == "filled" and result.receipt.order.quantity == 1000
    recorder.config.force_flush()
    agent.SimulatedLLM.reset()
    return chronicle.load_trace(recorder.store, "latest")
