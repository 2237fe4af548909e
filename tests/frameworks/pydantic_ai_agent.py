"""A trading agent on pydantic-ai, run every way pydantic-ai runs agents, against the local LLM servers.

The model proposes an order and calls the ``place_order`` tool, whose guardrail is :data:`LIMIT`; then it answers
(text, or a typed :class:`Confirmation` with ``output_type``). Each entry point is an ``agent`` boundary that
builds the model for ``kind`` (``chat``: ``OpenAIChatModel``, ``responses``: ``OpenAIResponsesModel``,
``anthropic``: ``AnthropicModel``) on the server at ``url`` and returns the output and the tool results; the
messages of the last run are kept in :data:`LAST_MESSAGES` for the tests to inspect.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.capabilities.instrumentation import Instrumentation
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

import chronicle_otel as chronicle

LIMIT: dict[str, int | None] = {"max_shares": None}
"""The guardrail: None while recording (the bug), a number once fixed."""

ORDER_REQUEST = "sell $1,000 of MSFT"

LAST_MESSAGES: list[ModelMessage] = []
"""The messages of the last run."""

INSTRUMENTATION: dict[str, InstrumentationSettings | None] = {"settings": None}
"""pydantic-ai's own OpenTelemetry instrumentation of the agents built, when set."""


class Confirmation(BaseModel):
    """The structured output (``output_type=Confirmation``)."""

    status: str
    symbol: str
    quantity: int


def place_order(symbol: str, quantity: int, side: str) -> dict[str, Any]:
    """Place an order with the broker.

    Args:
        symbol: the ticker.
        quantity: how many shares.
        side: buy or sell.
    """
    limit = LIMIT["max_shares"]
    if limit is not None and quantity > limit:
        return {"status": "blocked", "reason": f"{quantity} shares exceeds {limit}"}
    return {"status": "filled", "symbol": symbol, "quantity": quantity, "side": side}


def model_for(kind: str, url: str) -> Model:
    """The model of ``kind`` on the local server at ``url``."""
    if kind == "chat":
        return OpenAIChatModel("gpt-test", provider=OpenAIProvider(base_url=f"{url}/v1", api_key="sk-test-openai-key"))
    if kind == "responses":
        return OpenAIResponsesModel(
            "gpt-test", provider=OpenAIProvider(base_url=f"{url}/v1", api_key="sk-test-openai-key")
        )
    if kind == "anthropic":
        return AnthropicModel("claude-test", provider=AnthropicProvider(base_url=url, api_key="sk-ant-test-key"))
    raise ValueError(kind)


def _agent(kind: str, url: str, output_type: Any = str) -> Agent[None, Any]:
    settings = INSTRUMENTATION["settings"]
    agent: Agent[None, Any] = Agent(
        model_for(kind, url),
        instructions="You are a trading assistant. Place the order the user asks for.",
        output_type=output_type,
        capabilities=[Instrumentation(settings=settings)] if settings is not None else None,
    )
    agent.tool_plain(place_order)
    return agent


def _outcome(output: Any, messages: list[ModelMessage]) -> dict[str, Any]:
    LAST_MESSAGES[:] = messages
    results = [
        part.content
        for message in messages
        for part in getattr(message, "parts", ())
        if getattr(part, "part_kind", None) == "tool-return" and part.tool_name == "place_order"
    ]
    return {"output": output, "orders": results}


@chronicle.boundary(kind="agent", name="pydantic_ai_agent.run")
def run(request: str, kind: str, url: str) -> dict[str, Any]:
    """``agent.run_sync``: plain model requests."""
    agent = _agent(kind, url)
    try:
        result = agent.run_sync(request)
    finally:
        _close(agent)
    return _outcome(result.output, result.all_messages())


def _close(agent: Agent[None, Any]) -> None:
    """Close the HTTP client of the model's provider, on the event loop ``run_sync`` ran on."""
    model = agent.model
    assert isinstance(model, Model) and model.provider is not None
    loop = asyncio.get_event_loop_policy().get_event_loop()
    loop.run_until_complete(model.provider.client.close())


@chronicle.boundary(kind="agent", name="pydantic_ai_agent.arun_structured")
async def arun_structured(request: str, kind: str, url: str) -> dict[str, Any]:
    """``await agent.run`` with ``output_type=Confirmation``."""
    agent = _agent(kind, url, output_type=Confirmation)
    async with agent:  # closes the provider's HTTP client at the end
        result = await agent.run(request)
    assert isinstance(result.output, Confirmation), result.output
    return _outcome(result.output, result.all_messages())


@chronicle.boundary(kind="agent", name="pydantic_ai_agent.arun_stream")
async def arun_stream(request: str, kind: str, url: str) -> dict[str, Any]:
    """``agent.run_stream``: streamed model requests, the text read as deltas."""
    agent = _agent(kind, url)
    async with agent, agent.run_stream(request) as result:
        deltas = [delta async for delta in result.stream_text(delta=True, debounce_by=None)]
        output = await result.get_output()
        messages = result.all_messages()
    outcome = _outcome(output, messages)
    outcome["deltas"] = deltas
    return outcome


@chronicle.boundary(kind="agent", name="pydantic_ai_agent.arun_iter")
async def arun_iter(request: str, kind: str, url: str) -> dict[str, Any]:
    """``agent.iter``, each model request streamed through ``node.stream(...)``; returns the event kinds read."""
    agent = _agent(kind, url)
    events: list[str] = []
    async with agent, agent.iter(request) as agent_run:
        async for node in agent_run:
            if Agent.is_model_request_node(node):
                async with node.stream(agent_run.ctx) as stream:
                    async for event in stream:
                        events.append(type(event).__name__)
        assert agent_run.result is not None
        outcome = _outcome(agent_run.result.output, agent_run.result.all_messages())
    outcome["events"] = events
    return outcome
