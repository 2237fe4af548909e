"""A trading agent that calls the official OpenAI and Anthropic SDKs every way they are called in production.

``run_agent`` (sync) plans with a plain chat completion, explains with a streamed one, extracts a typed order
with ``chat.completions.parse``, summarises with the Responses API (plain and streamed), and has Claude review it
three ways (``messages.create``, ``messages.create(stream=True)`` and ``messages.stream(...)``); then the
``place_order`` tool runs, guarded by :data:`LIMIT`. ``arun_agent`` does the same with the async clients.
The clients point at the local servers of ``tests.llm_servers``.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

import chronicle_otel as chronicle

# The SDKs are imported where they are used, not when pytest collects this module: importing anthropic
# alone takes about two seconds.
if TYPE_CHECKING:
    import anthropic
    import openai

LIMIT: dict[str, int | None] = {"max_shares": None}
"""The guardrail: None while recording (the bug), a number once fixed."""

ORDER_REQUEST = "sell $1,000 of MSFT"


class Order(BaseModel):
    """The order the model extracts (``chat.completions.parse``)."""

    symbol: str
    quantity: int
    side: str


@chronicle.boundary(kind="tool", name="sdk_agent.place_order")
def place_order(order: Order) -> dict[str, Any]:
    """The broker call, with the guardrail in front of it."""
    limit = LIMIT["max_shares"]
    if limit is not None and order.quantity > limit:
        return {"status": "blocked", "reason": f"{order.quantity} shares exceeds {limit}"}
    return {"status": "filled", "symbol": order.symbol, "quantity": order.quantity}


def _clients(openai_url: str, anthropic_url: str) -> tuple[openai.OpenAI, anthropic.Anthropic]:
    import anthropic
    import openai

    if os.environ.get("SDK_AGENT_KEYS") == "environment":  # as most applications do: the clients read their keys
        return openai.OpenAI(base_url=f"{openai_url}/v1", max_retries=0), anthropic.Anthropic(
            base_url=anthropic_url, max_retries=0
        )
    return (
        openai.OpenAI(base_url=f"{openai_url}/v1", api_key="sk-test-openai-key", max_retries=0),
        anthropic.Anthropic(base_url=anthropic_url, api_key="sk-ant-test-key", max_retries=0),
    )


@chronicle.boundary(kind="agent", name="sdk_agent.run")
def run_agent(request: str, openai_url: str, anthropic_url: str) -> dict[str, Any]:
    """One run of the agent with the sync clients."""
    oa, an = _clients(openai_url, anthropic_url)
    messages = [{"role": "user", "content": request}]
    try:
        plan = oa.chat.completions.create(model="gpt-test", messages=messages, temperature=0)
        stream = oa.chat.completions.create(
            model="gpt-test", messages=messages, stream=True, stream_options={"include_usage": True}
        )
        with stream:
            explanation = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        parsed = oa.chat.completions.parse(model="gpt-test", messages=messages, response_format=Order)
        order = parsed.choices[0].message.parsed
        assert isinstance(order, Order), order
        summary = oa.responses.create(model="gpt-test", input=request)
        summary_stream = oa.responses.create(model="gpt-test", input=request, stream=True)
        streamed_summary = "".join(e.delta for e in summary_stream if e.type == "response.output_text.delta")
        review = an.messages.create(model="claude-test", max_tokens=100, messages=messages)
        raw_events = an.messages.create(model="claude-test", max_tokens=100, messages=messages, stream=True)
        raw_text = "".join(
            e.delta.text for e in raw_events if e.type == "content_block_delta" and e.delta.type == "text_delta"
        )
        with an.messages.stream(model="claude-test", max_tokens=100, messages=messages) as helper:
            helper_text = "".join(helper.text_stream)
            final = helper.get_final_message()
        result = place_order(order)
    finally:
        oa.close()
        an.close()
    return {
        "plan": plan.choices[0].message.content,
        "explanation": explanation,
        "order": order.model_dump(),
        "summary": summary.output_text,
        "streamed_summary": streamed_summary,
        "review": review.content[0].text,
        "review_stream": raw_text,
        "review_helper": helper_text,
        "review_final": final.content[0].text,
        "review_tokens": final.usage.output_tokens,
        "result": result,
    }


@chronicle.boundary(kind="agent", name="sdk_agent.arun")
async def arun_agent(request: str, openai_url: str, anthropic_url: str) -> dict[str, Any]:
    """One run of the agent with the async clients."""
    import anthropic
    import openai

    oa = openai.AsyncOpenAI(base_url=f"{openai_url}/v1", api_key="sk-test-openai-key", max_retries=0)
    an = anthropic.AsyncAnthropic(base_url=anthropic_url, api_key="sk-ant-test-key", max_retries=0)
    messages = [{"role": "user", "content": request}]
    try:
        parsed = await oa.chat.completions.parse(model="gpt-test", messages=messages, response_format=Order)
        order = parsed.choices[0].message.parsed
        assert isinstance(order, Order), order
        stream = await oa.chat.completions.create(model="gpt-test", messages=messages, stream=True)
        explanation = ""
        async with stream:
            async for chunk in stream:
                explanation += chunk.choices[0].delta.content or "" if chunk.choices else ""
        summary_stream = await oa.responses.create(model="gpt-test", input=request, stream=True)
        streamed_summary = ""
        async for event in summary_stream:
            if event.type == "response.output_text.delta":
                streamed_summary += event.delta
        review = await an.messages.create(model="claude-test", max_tokens=100, messages=messages)
        async with an.messages.stream(model="claude-test", max_tokens=100, messages=messages) as helper:
            helper_text = "".join([text async for text in helper.text_stream])
            final = await helper.get_final_message()
        result = place_order(order)
    finally:
        await oa.close()
        await an.close()
    return {
        "order": order.model_dump(),
        "explanation": explanation,
        "streamed_summary": streamed_summary,
        "review": review.content[0].text,
        "review_helper": helper_text,
        "review_final": final.content[0].text,
        "result": result,
    }


def order_json(quantity: int) -> dict[str, Any]:
    """The order the simulated model extracts: shares, where the user asked for dollars."""
    return json.loads(json.dumps({"symbol": "MSFT", "quantity": quantity, "side": "sell"}))
