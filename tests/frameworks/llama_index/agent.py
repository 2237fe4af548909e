"""A trading agent on LlamaIndex, calling its OpenAI LLM every way agents do, with a guarded ``place_order`` tool.

Each entry point is an ``agent`` boundary (what a replay reruns). The LLM is LlamaIndex's own
``llama_index.llms.openai.OpenAI`` pointed at the local server of ``tests.llm_servers``; ``place_order`` is a
``FunctionTool`` whose guardrail, :data:`LIMIT`, is off while recording (the incident) and set for the replay (the
fix): an order of 1,000 shares is then blocked.
"""

from __future__ import annotations

import inspect
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, ChatResponse
from llama_index.core.tools import FunctionTool, ToolOutput
from llama_index.core.workflow import Context
from llama_index.llms.openai import OpenAI

import chronicle_otel as chronicle

LIMIT: dict[str, int | None] = {"max_shares": None}
"""The guardrail: None while recording (the bug), a number once fixed."""

REQUEST = "sell $1,000 of MSFT"
ORDER = {"symbol": "MSFT", "quantity": 1000, "side": "sell"}
"""The order the simulated model asks for: shares, where the user asked for dollars."""


def place_order(symbol: str, quantity: int, side: str) -> dict[str, Any]:
    """Place a market order with the broker."""
    limit = LIMIT["max_shares"]
    if limit is not None and quantity > limit:
        return {"status": "blocked", "reason": f"{quantity} shares exceeds {limit}"}
    return {"status": "filled", "symbol": symbol, "quantity": quantity, "side": side}


PLACE_ORDER = FunctionTool.from_defaults(fn=place_order)


async def quote(ctx: Context, symbol: str) -> dict[str, Any]:
    """The last price of a symbol (a tool that takes the workflow's context: it remembers what it quoted)."""
    await ctx.store.set("quoted", symbol)
    return {"symbol": symbol, "price": 410.5}


quote.__annotations__ = {"ctx": Context, "symbol": str, "return": dict}  # resolved: LlamaIndex reads the types
QUOTE = FunctionTool.from_defaults(async_fn=quote)


def llm(url: str) -> OpenAI:
    """LlamaIndex's OpenAI LLM against the local server (a model name LlamaIndex knows; the server echoes it)."""
    return OpenAI(model="gpt-4o-mini", api_base=f"{url}/v1", api_key="sk-test", max_retries=0)


def _messages() -> list[ChatMessage]:
    return [ChatMessage(role="system", content="You trade for the user."), ChatMessage(role="user", content=REQUEST)]


def _run_tools(model: OpenAI, response: ChatResponse) -> list[ToolOutput]:
    calls = model.get_tool_calls_from_response(response, error_on_no_tool_call=False)
    return [PLACE_ORDER.call(**call.tool_kwargs) for call in calls]


@chronicle.boundary(kind="agent", name="llama_agent.chat")
def run_chat(url: str) -> dict[str, Any]:
    """Plan with ``chat``, explain with ``stream_chat``, then order with ``chat_with_tools`` and run the tool."""
    model = llm(url)
    plan = model.chat(_messages())
    last: ChatResponse | None = None
    explanation = ""
    for last in model.stream_chat(_messages()):
        explanation += last.delta or ""
    response = model.chat_with_tools([PLACE_ORDER], chat_history=_messages())
    outputs = _run_tools(model, response)
    return {"plan": plan, "explanation": explanation, "last": last, "response": response, "outputs": outputs}


@chronicle.boundary(kind="agent", name="llama_agent.stream_tools")
def run_stream_tools(url: str) -> dict[str, Any]:
    """Order with ``stream_chat_with_tools`` (LlamaIndex edits the streamed tool calls in place), run the tool, and
    tell the model the outcome (a second, plain stream)."""
    model = llm(url)
    history = _messages()
    last: ChatResponse | None = None
    arguments: list[str] = []  # the tool call's arguments as each item is read: they grow while streaming
    stream = model.stream_chat_with_tools([PLACE_ORDER], chat_history=history)
    generator = inspect.isgenerator(stream)
    for last in stream:
        calls = last.message.additional_kwargs.get("tool_calls") or []
        arguments.append("".join(call.function.arguments or "" for call in calls))
    assert last is not None
    outputs = _run_tools(model, last)
    history.append(last.message)
    for call, output in zip(last.message.additional_kwargs.get("tool_calls", []), outputs, strict=True):
        history.append(ChatMessage(role="tool", content=output.content, additional_kwargs={"tool_call_id": call.id}))
    summary = "".join(r.delta or "" for r in model.stream_chat(history))
    return {"last": last, "outputs": outputs, "summary": summary, "arguments": arguments, "generator": generator}


@chronicle.boundary(kind="agent", name="llama_agent.predict_and_call")
def run_predict_and_call(url: str) -> Any:
    """``predict_and_call``: the model picks the tool, LlamaIndex runs it."""
    return llm(url).predict_and_call([PLACE_ORDER], chat_history=_messages())


@chronicle.boundary(kind="agent", name="llama_agent.arun")
async def arun(url: str) -> dict[str, Any]:
    """The async paths: ``achat``, ``astream_chat``, ``astream_chat_with_tools`` and the tool's ``acall``."""
    model = llm(url)
    plan = await model.achat(_messages())
    explanation = ""
    async for chunk in await model.astream_chat(_messages()):
        explanation += chunk.delta or ""
    last: ChatResponse | None = None
    async for chunk in await model.astream_chat_with_tools([PLACE_ORDER], chat_history=_messages()):
        last = chunk
    assert last is not None
    calls = model.get_tool_calls_from_response(last, error_on_no_tool_call=False)
    outputs = [await PLACE_ORDER.acall(**call.tool_kwargs) for call in calls]
    return {"plan": plan, "explanation": explanation, "last": last, "outputs": outputs}


@chronicle.boundary(kind="agent", name="llama_agent.function_agent")
async def run_function_agent(url: str) -> dict[str, Any]:
    """LlamaIndex's ``FunctionAgent`` workflow: it streams the model's tool calls (a quote, then the order), runs the
    tools, streams the answer."""
    agent = FunctionAgent(tools=[QUOTE, PLACE_ORDER], llm=llm(url), system_prompt="You trade for the user.")
    result = await agent.run(user_msg=REQUEST)
    return {"response": result.response, "tool_calls": result.tool_calls}
