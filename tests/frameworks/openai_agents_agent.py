"""A trading agent on the OpenAI Agents SDK, against the local OpenAI server of ``tests.llm_servers``.

``run_trader`` runs the ``trader`` agent (one function tool, ``place_order``, whose result is the final output)
with ``Runner.run`` or ``Runner.run_streamed`` on the chat completions or the Responses model.
``run_structured`` first has the ``extractor`` agent read the order as structured output (``output_type=Order``),
then hands it to the trader. ``place_order`` is guarded by :data:`LIMIT`: None while recording (the bug), a number
once fixed.
"""

from __future__ import annotations

from typing import Any, Literal

from agents import Agent, Runner, function_tool
from agents.models.interface import Model
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI
from pydantic import BaseModel

import chronicle_otel as chronicle

LIMIT: dict[str, int | None] = {"max_shares": None}
"""The guardrail: None while recording (the bug), a number once fixed."""

ORDER_REQUEST = "sell $1,000 of MSFT"
MODEL = "gpt-test"

Api = Literal["chat", "responses"]


class Order(BaseModel):
    """The order the extractor reads from the request (structured output)."""

    symbol: str
    quantity: int
    side: str


class OrderResult(BaseModel):
    """What the broker (or the guardrail in front of it) says."""

    status: str
    symbol: str
    quantity: int
    reason: str | None = None


@function_tool
def place_order(symbol: str, quantity: int, side: str) -> OrderResult:
    """Place an order with the broker.

    Args:
        symbol: the ticker.
        quantity: how many shares.
        side: buy or sell.
    """
    limit = LIMIT["max_shares"]
    if limit is not None and quantity > limit:
        return OrderResult(status="blocked", symbol=symbol, quantity=quantity, reason=f"exceeds {limit} shares")
    return OrderResult(status="filled", symbol=symbol, quantity=quantity)


def client(base_url: str) -> AsyncOpenAI:
    """A client of the local server (never the real API)."""
    return AsyncOpenAI(base_url=f"{base_url}/v1", api_key="sk-test", max_retries=0)


def model(api: Api, openai_client: AsyncOpenAI) -> Model:
    """The chat completions or the Responses model over ``openai_client``."""
    if api == "chat":
        return OpenAIChatCompletionsModel(MODEL, openai_client)
    return OpenAIResponsesModel(MODEL, openai_client)


def trader(agent_model: Model) -> Agent[Any]:
    """The agent with the guardrail tool; the tool's result is its final output."""
    return Agent(
        name="trader",
        instructions="Place the order the user asks for with place_order.",
        tools=[place_order],
        model=agent_model,
        tool_use_behavior="stop_on_first_tool",
    )


def extractor(agent_model: Model) -> Agent[Any]:
    """The agent that reads the order as structured output."""
    return Agent(name="extractor", instructions="Read the order.", model=agent_model, output_type=Order)


async def _run(agent: Agent[Any], request: str, streamed: bool) -> dict[str, Any]:
    if not streamed:
        result: Any = await Runner.run(agent, request)
        return {"final_output": result.final_output, "responses": result.raw_responses, "items": _items(result)}
    result = Runner.run_streamed(agent, request)
    events: list[str] = []
    text = ""
    async for event in result.stream_events():
        if event.type == "raw_response_event":
            events.append(event.data.type)
            if event.data.type == "response.output_text.delta":
                text += event.data.delta
        elif event.type == "run_item_stream_event":
            events.append(f"item:{event.name}")
    return {
        "final_output": result.final_output,
        "responses": result.raw_responses,
        "items": _items(result),
        "events": events,
        "text": text,
    }


def _items(result: Any) -> list[Any]:
    return [item.raw_item for item in result.new_items]


@chronicle.boundary(kind="agent", name="openai_agents_agent.trade")
async def run_trader(request: str, base_url: str, api: Api, streamed: bool) -> dict[str, Any]:
    """One run of the trader."""
    openai_client = client(base_url)
    try:
        return await _run(trader(model(api, openai_client)), request, streamed)
    finally:
        await openai_client.close()


@chronicle.boundary(kind="agent", name="openai_agents_agent.structured")
async def run_structured(request: str, base_url: str, api: Api) -> dict[str, Any]:
    """The extractor reads the order (``output_type=Order``), the trader places it."""
    openai_client = client(base_url)
    try:
        agent_model = model(api, openai_client)
        extracted = await Runner.run(extractor(agent_model), request)
        order = extracted.final_output
        assert isinstance(order, Order), order
        placed = await _run(trader(agent_model), f"Place this order: {order.model_dump_json()}", False)
    finally:
        await openai_client.close()
    return {"order": order, "extracted": extracted.raw_responses, **placed}


@chronicle.boundary(kind="agent", name="openai_agents_agent.triage")
async def run_triage(request: str, base_url: str, api: Api) -> dict[str, Any]:
    """A triage agent hands off to the trader."""
    openai_client = client(base_url)
    try:
        agent_model = model(api, openai_client)
        triage = Agent(
            name="triage", instructions="Hand trades to the trader.", handoffs=[trader(agent_model)], model=agent_model
        )
        return await _run(triage, request, False)
    finally:
        await openai_client.close()


@chronicle.boundary(kind="agent", name="openai_agents_agent.orchestrate")
async def run_orchestrator(request: str, base_url: str, api: Api) -> dict[str, Any]:
    """An orchestrator calls the trader as a tool, then answers the user."""
    openai_client = client(base_url)
    try:
        agent_model = model(api, openai_client)
        trade = trader(agent_model).as_tool(tool_name="trade", tool_description="Trade for the user.")
        orchestrator = Agent(name="orchestrator", instructions="Use the trade tool.", tools=[trade], model=agent_model)
        return await _run(orchestrator, request, False)
    finally:
        await openai_client.close()
