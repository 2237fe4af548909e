"""A LangGraph trading agent: a model node and a ``ToolNode`` (quote lookup, and the order tool behind a guardrail).

``run_agent`` (sync graph) and ``arun_agent`` (async graph) build the model from their arguments (``provider``
``openai`` or ``anthropic``, a local server's URL, ``streaming=``) so that a replay reruns them from the recorded
input. ``how`` picks how the model node calls the model:

* ``"invoke"``: ``model.bind_tools(tools).invoke(messages)`` (``ainvoke`` in the async graph);
* ``"stream"``: ``.stream(messages)`` (``astream``) with the chunks added up (``chunk1 + chunk2 + …``);
* ``"structured"``: ``model.with_structured_output(Order).invoke(messages)`` extracts the order, which the next node
  places with ``place_order.invoke``.

The run ends once ``place_order`` ran: the order's outcome is the result, so a fixed guardrail changes the result
and no later model input (the replay has no drift).

What LangChain's callbacks see of the model calls, recorded and replayed: ``stream_events`` (``astream_events`` v1
or v2 over a prompt | model | parser chain, which streams the model, or over the agent's graph, whose model node
invokes it), ``stream_messages`` (LangGraph's ``stream_mode="messages"``) and ``counted`` (a handler of the
caller's own, given in the call's config).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from langchain_anthropic import ChatAnthropic
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    HumanMessage,
    ToolMessage,
    message_chunk_to_message,
)
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from pydantic import BaseModel
from typing_extensions import TypedDict

import chronicle_otel as chronicle

LIMIT: dict[str, int | None] = {"max_shares": None}
"""The guardrail: None while recording (the bug), a number once fixed."""

REQUEST = "sell $1,000 of MSFT"
CALLS: dict[str, int] = {}
"""How often each tool body ran (a stubbed tool does not run)."""

How = Literal["invoke", "stream", "structured"]


class Order(BaseModel):
    """The order the model extracts (``with_structured_output``)."""

    symbol: str
    quantity: int
    side: str


@tool
def lookup_quote(symbol: str) -> dict[str, Any]:
    """The last price of a stock."""
    CALLS["lookup_quote"] = CALLS.get("lookup_quote", 0) + 1
    return {"symbol": symbol, "price": 412.5}


@tool
def place_order(symbol: str, quantity: int, side: str) -> dict[str, Any]:
    """Place a market order, with the guardrail in front of the broker."""
    CALLS["place_order"] = CALLS.get("place_order", 0) + 1
    limit = LIMIT["max_shares"]
    if limit is not None and quantity > limit:
        return {"status": "blocked", "reason": f"{quantity} shares exceeds {limit}"}
    return {"status": "filled", "symbol": symbol, "quantity": quantity, "side": side}


TOOLS = [lookup_quote, place_order]


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    order: Order | None
    result: dict[str, Any] | None


def make_model(provider: str, url: str, streaming: bool = False) -> BaseChatModel:
    """The chat model on a local server (``tests.llm_servers``); ``streaming=`` is passed only when true (a model
    told ``streaming=False`` answers ``stream()`` with ``invoke()``)."""
    options: dict[str, Any] = {"streaming": True} if streaming else {}
    if provider == "openai":
        return ChatOpenAI(model="gpt-test", api_key="sk-test", base_url=url + "/v1", max_retries=0, **options)
    return ChatAnthropic(model="claude-test", api_key="sk-test", base_url=url, max_retries=0, **options)  # type: ignore[call-arg]


def _accumulated(chunks: list[Any]) -> AIMessage:
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    message = message_chunk_to_message(total)
    assert isinstance(message, AIMessage), message
    return message


def _after_model(state: State) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def _after_tools(state: State) -> str:
    for message in reversed(state["messages"]):
        if not isinstance(message, ToolMessage):
            break
        if message.name == "place_order":
            return END
    return "model"


def _result(state: State) -> dict[str, Any]:
    result = state.get("result")
    if result is None:
        for message in reversed(state["messages"]):
            if isinstance(message, ToolMessage) and message.name == "place_order":
                result = json.loads(str(message.content))
                break
    return {
        "result": result,
        "answers": [m for m in state["messages"] if isinstance(m, AIMessage)],
        "tools": [m.content for m in state["messages"] if isinstance(m, ToolMessage)],
        "order": state.get("order"),
    }


def build_graph(model: BaseChatModel, how: How, asynchronous: bool) -> Any:
    """The agent's graph over ``model``."""
    graph = StateGraph(State)
    if how == "structured":
        extractor = model.with_structured_output(Order)

        def extract(state: State) -> State:
            order = extractor.invoke(state["messages"])
            assert isinstance(order, Order), order
            return {"order": order}

        async def aextract(state: State) -> State:
            order = await extractor.ainvoke(state["messages"])
            assert isinstance(order, Order), order
            return {"order": order}

        def execute(state: State) -> State:
            order = state.get("order")
            assert order is not None
            return {"result": place_order.invoke(order.model_dump())}

        graph.add_node("extract", aextract if asynchronous else extract)
        graph.add_node("execute", execute)
        graph.add_edge(START, "extract")
        graph.add_edge("extract", "execute")
        graph.add_edge("execute", END)
        return graph.compile()

    bound = model.bind_tools(TOOLS)

    def call_model(state: State) -> State:
        if how == "stream":
            return {"messages": [_accumulated(list(bound.stream(state["messages"])))]}
        return {"messages": [bound.invoke(state["messages"])]}

    async def acall_model(state: State) -> State:
        if how == "stream":
            return {"messages": [_accumulated([c async for c in bound.astream(state["messages"])])]}
        return {"messages": [await bound.ainvoke(state["messages"])]}

    graph.add_node("model", acall_model if asynchronous else call_model)
    graph.add_node("tools", ToolNode(TOOLS))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", _after_model, ["tools", END])
    graph.add_conditional_edges("tools", _after_tools, ["model", END])
    return graph.compile()


@chronicle.boundary(kind="agent", name="langchain_agent.run")
def run_agent(request: str, provider: str, url: str, how: How = "invoke", streaming: bool = False) -> dict[str, Any]:
    """One run of the agent on the sync graph."""
    graph = build_graph(make_model(provider, url, streaming), how, asynchronous=False)
    return _result(graph.invoke({"messages": [HumanMessage(request)]}))


@chronicle.boundary(kind="agent", name="langchain_agent.arun")
async def arun_agent(
    request: str, provider: str, url: str, how: How = "invoke", streaming: bool = False
) -> dict[str, Any]:
    """One run of the agent on the async graph."""
    graph = build_graph(make_model(provider, url, streaming), how, asynchronous=True)
    return _result(await graph.ainvoke({"messages": [HumanMessage(request)]}))


def order_args(quantity: int = 1000) -> dict[str, Any]:
    """The order the simulated model places: shares, where the user asked for dollars."""
    return {"symbol": "MSFT", "quantity": quantity, "side": "sell"}


# ------------------------------------------------------------------------------------ what the callbacks see


def text_of(content: Any) -> str:
    """A message's text: its content, or the text blocks of a list of content blocks (Anthropic's chunks)."""
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict)) if isinstance(content, list) else ""


def summarize_events(events: list[Any]) -> dict[str, Any]:
    """``astream_events`` as ``(event, name, run, parents)`` and the text of its ``on_chat_model_stream`` events.

    Runs are numbered in the order they first appear (their ids are new on every run), so the nesting compares.
    """
    runs: dict[str, int] = {}

    def number(run_id: Any) -> int:
        return runs.setdefault(str(run_id), len(runs))

    seen, text, streamed = [], [], 0
    for event in events:
        parents = tuple(number(p) for p in event.get("parent_ids", ()))
        seen.append((event["event"], event["name"], number(event["run_id"]), parents))
        if event["event"] == "on_chat_model_stream":
            streamed += 1
            text.append(text_of(event["data"]["chunk"].content))
    return {"events": seen, "text": "".join(text), "streamed": streamed}


@chronicle.boundary(kind="agent", name="langchain_agent.events")
async def stream_events(
    request: str,
    provider: str,
    url: str,
    streaming: bool = False,
    source: Literal["chain", "graph"] = "chain",
    version: Literal["v1", "v2"] = "v2",
) -> dict[str, Any]:
    """``astream_events`` over a chain that streams the model, or over the agent's graph that invokes it."""
    model = make_model(provider, url, streaming)
    runnable: Any
    if source == "chain":
        runnable = ChatPromptTemplate.from_messages([("human", "{request}")]) | model | StrOutputParser()
        given: Any = {"request": request}
    else:
        runnable = build_graph(model, "invoke", asynchronous=True)
        given = {"messages": [HumanMessage(request)]}
    return summarize_events([event async for event in runnable.astream_events(given, version=version)])


@chronicle.boundary(kind="agent", name="langchain_agent.messages")
def stream_messages(request: str, provider: str, url: str, streaming: bool = False, how: How = "invoke") -> list[Any]:
    """What LangGraph's ``stream_mode="messages"`` yields of the model's answers: each message or chunk's type,
    text and tool-call argument pieces, and the node and model it came from."""
    graph = build_graph(make_model(provider, url, streaming), how, asynchronous=False)
    seen = []
    for message, meta in graph.stream({"messages": [HumanMessage(request)]}, stream_mode="messages"):
        if isinstance(message, (AIMessage, AIMessageChunk)):
            pieces = tuple(c.get("args") or "" for c in getattr(message, "tool_call_chunks", ()))
            origin = (meta["langgraph_node"], meta["ls_model_name"])
            seen.append((type(message).__name__, text_of(message.content), pieces, *origin))
    return seen


class Counter(BaseCallbackHandler):
    """Counts the model callbacks it gets, and keeps the tokens' text."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.tokens: list[str] = []

    def _count(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self._count("start")

    def on_llm_new_token(self, token: Any, **kwargs: Any) -> None:
        self._count("token")
        self.tokens.append(text_of(token))

    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        self._count("end")

    def on_llm_error(self, error: BaseException, **kwargs: Any) -> None:
        self._count("error:" + type(error).__name__)


@chronicle.boundary(kind="agent", name="langchain_agent.counted")
def counted(request: str, provider: str, url: str, path: str = "") -> dict[str, Any]:
    """An ``invoke`` of a streaming model and a ``stream`` of a plain one, with the caller's own handler."""
    counter = Counter()
    config: Any = {"callbacks": [counter]}
    answers = []
    for streaming, how in ((True, "invoke"), (False, "stream")):
        model = make_model(provider, url + path, streaming)
        try:
            if how == "invoke":
                answers.append(text_of(model.invoke(request, config=config).content))
            else:
                answers.append("".join(text_of(c.content) for c in model.stream(request, config=config)))
        except Exception as exc:  # a provider's error: the handler was told
            answers.append(type(exc).__name__)
    return {"counts": counter.counts, "tokens": counter.tokens, "answers": answers}
