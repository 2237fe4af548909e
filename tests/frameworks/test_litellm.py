"""The LiteLLM integration with the real ``litellm`` against the local OpenAI and Anthropic servers: an agent loop
recorded (plain, streamed sync and async, ``acompletion``, ``litellm.Router``, the Responses API), loaded and
replayed offline with the guardrail fixed."""

from __future__ import annotations

import os

# LiteLLM downloads its model price list when imported unless told not to: set before the import below.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")

import asyncio
import gc
import json
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel.integrations import anthropic as chronicle_anthropic
from chronicle_otel.integrations import litellm as chronicle_litellm
from chronicle_otel.integrations import openai as chronicle_openai
from chronicle_otel.model import Trace
from tests.conftest import Recorder
from tests.llm_servers import LLMServer, Reply, anthropic_server, openai_server


def _import_litellm() -> None:
    """Binds ``litellm`` and its ``completion`` in this module."""
    global litellm, completion
    import litellm
    from litellm import completion  # before instrument(): instrument() rebinds it


@pytest.fixture(autouse=True, scope="module")
def litellm_imported() -> None:
    """LiteLLM, imported when the first test here runs: at collection it costs seconds in every process, xdist
    workers included."""
    _import_litellm()


if "litellm" in sys.modules:  # a process that loaded LiteLLM first (the fresh-process replay below): bind it now
    _import_litellm()

pytestmark = [
    # LiteLLM's own TypedDicts (pydantic says so when LiteLLM builds their schemas lazily, on a first call)
    pytest.mark.filterwarnings("ignore:Items? .* using the `ReadOnly` qualifier:UserWarning"),
    # LiteLLM's logging dumps a Responses API usage it typed as a dict
    pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning"),
]

OPENAI = "openai/gpt-test"
ANTHROPIC = "anthropic/claude-test"
REQUEST = "sell $1,000 of MSFT"

LIMIT: dict[str, int | None] = {"max_shares": None}
"""The guardrail: None while recording (the bug), 100 once fixed."""

SEEN: list[Any] = []
"""What the agent got from LiteLLM in its last run (responses, and a stream's chunks as a list), to compare the
replayed typed values with the recorded ones."""

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_price",
            "description": "The last price of a stock.",
            "parameters": {"type": "object", "properties": {"symbol": {"type": "string"}}, "required": ["symbol"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "place_order",
            "description": "Place a market order.",
            "parameters": {
                "type": "object",
                "properties": {
                    "symbol": {"type": "string"},
                    "quantity": {"type": "integer"},
                    "side": {"type": "string"},
                },
                "required": ["symbol", "quantity", "side"],
            },
        },
    },
]


@chronicle.boundary(kind="tool", name="litellm_agent.lookup_price")
def lookup_price(symbol: str) -> dict[str, Any]:
    """A read-only tool: its answer goes back to the model."""
    return {"symbol": symbol, "price": 420.0}


@chronicle.boundary(kind="tool", name="litellm_agent.place_order")
def place_order(symbol: str, quantity: int, side: str) -> dict[str, Any]:
    """The broker call, with the guardrail in front of it; the agent's last step."""
    limit = LIMIT["max_shares"]
    if limit is not None and quantity > limit:
        return {"status": "blocked", "reason": f"{quantity} shares exceeds {limit}"}
    return {"status": "filled", "symbol": symbol, "quantity": quantity, "side": side}


_TOOLS = {"lookup_price": lookup_price, "place_order": place_order}


def _connection(model: str, server_url: str) -> dict[str, Any]:
    if model.startswith("anthropic/"):
        return {"api_base": server_url, "api_key": "sk-ant-test", "max_tokens": 200}
    return {"api_base": f"{server_url}/v1", "api_key": "sk-test"}


def _step(response: Any, messages: list[Any]) -> dict[str, Any] | None:
    """Run the tools the model asked for: the agent's answer once it is done (``place_order`` ran, or no tool)."""
    SEEN.append(response)
    message = response.choices[0].message
    if not message.tool_calls:
        return {"answer": message.content, "order": None}
    messages.append(message)
    for call in message.tool_calls:
        result = _TOOLS[call.function.name](**json.loads(call.function.arguments))
        if call.function.name == "place_order":
            return {"answer": message.content, "order": result}
        messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
    return None


def _loop(request: str, ask: Callable[[list[Any]], Any], stream: bool) -> dict[str, Any]:
    SEEN.clear()
    messages: list[Any] = [{"role": "user", "content": request}]
    for _ in range(4):
        if stream:
            chunks = list(ask(messages))
            SEEN.append(chunks)
            response = litellm.stream_chunk_builder(chunks, messages=messages)
        else:
            response = ask(messages)
        done = _step(response, messages)
        if done is not None:
            return done
    return {"answer": None, "order": None}


async def _aloop(request: str, ask: Callable[[list[Any]], Any], stream: bool) -> dict[str, Any]:
    SEEN.clear()
    messages: list[Any] = [{"role": "user", "content": request}]
    for _ in range(4):
        if stream:
            chunks = [chunk async for chunk in await ask(messages)]
            SEEN.append(chunks)
            response = litellm.stream_chunk_builder(chunks, messages=messages)
        else:
            response = await ask(messages)
        done = _step(response, messages)
        if done is not None:
            return done
    return {"answer": None, "order": None}


@chronicle.boundary(kind="agent", name="litellm_agent.run")
def run_agent(request: str, model: str, server_url: str, stream: bool = False) -> dict[str, Any]:
    """The agent loop on ``completion``, imported from litellm before instrument()."""
    connection = _connection(model, server_url)
    return _loop(
        request,
        lambda messages: completion(model=model, messages=messages, tools=TOOLS, stream=stream, **connection),
        stream,
    )


@chronicle.boundary(kind="agent", name="litellm_agent.arun")
async def arun_agent(request: str, model: str, server_url: str, stream: bool = False) -> dict[str, Any]:
    """The agent loop on ``litellm.acompletion``, looked up on the module at each call."""
    connection = _connection(model, server_url)

    def ask(messages: list[Any]) -> Any:
        return litellm.acompletion(model=model, messages=messages, tools=TOOLS, stream=stream, **connection)

    return await _aloop(request, ask, stream)


def _router(server_url: str) -> litellm.Router:
    deployment = {"model": OPENAI, "api_base": f"{server_url}/v1", "api_key": "sk-test"}
    return litellm.Router(model_list=[{"model_name": "trader", "litellm_params": deployment}])


@chronicle.boundary(kind="agent", name="litellm_agent.router_run")
def router_agent(request: str, server_url: str, stream: bool = False) -> dict[str, Any]:
    """The agent loop on ``litellm.Router.completion``."""
    router = _router(server_url)
    return _loop(
        request,
        lambda messages: router.completion(model="trader", messages=messages, tools=TOOLS, stream=stream),
        stream,
    )


@chronicle.boundary(kind="agent", name="litellm_agent.router_arun")
async def router_aagent(request: str, server_url: str, stream: bool = False) -> dict[str, Any]:
    """The agent loop on ``litellm.Router.acompletion``."""
    router = _router(server_url)

    def ask(messages: list[Any]) -> Any:
        return router.acompletion(model="trader", messages=messages, tools=TOOLS, stream=stream)

    return await _aloop(request, ask, stream)


@chronicle.boundary(kind="agent", name="litellm_agent.summarise")
def summarise(request: str, openai_url: str, anthropic_url: str) -> dict[str, Any]:
    """The Responses API: plain and streamed, OpenAI and (bridged by LiteLLM onto its messages API) Anthropic."""
    SEEN.clear()
    plain = litellm.responses(model=OPENAI, input=request, **_connection(OPENAI, openai_url))
    events = list(litellm.responses(model=OPENAI, input=request, stream=True, **_connection(OPENAI, openai_url)))
    bridged = litellm.responses(
        model=ANTHROPIC, input=request, api_base=anthropic_url, api_key="k", max_output_tokens=50
    )

    async def streamed() -> list[Any]:
        stream = await litellm.aresponses(model=OPENAI, input=request, stream=True, **_connection(OPENAI, openai_url))
        return [event async for event in stream]

    async_events = asyncio.run(streamed())
    SEEN.extend([plain, events, bridged, async_events])
    return {
        "plain": plain.output[0].content[0].text,
        "streamed": "".join(e.delta for e in events if e.type == "response.output_text.delta"),
        "bridged": bridged.output[0].content[0].text,
        "async_streamed": "".join(e.delta for e in async_events if e.type == "response.output_text.delta"),
    }


@chronicle.boundary(kind="agent", name="litellm_agent.embed")
def embed(server_url: str) -> str:
    """A call that fails: the local server has no embeddings route."""
    try:
        litellm.embedding(model="openai/text-embedding-3-small", input=["MSFT"], **_connection(OPENAI, server_url))
    except litellm.NotFoundError as exc:
        return f"not found: {exc.status_code}"
    return "found"


# ------------------------------------------------------------------------------------ fixtures and helpers


@pytest.fixture(autouse=True)
def close_litellm_event_loop() -> Iterator[None]:
    """A sync LiteLLM call makes an event loop for its service logging (``asyncio.get_event_loop()``) and never
    closes it: closed after each test, before the garbage collector finds it open."""
    yield
    policy = asyncio.get_event_loop_policy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            loop = policy.get_event_loop()
        except RuntimeError:
            return
    if not loop.is_running():
        loop.close()
        policy.set_event_loop(None)


@pytest.fixture
def servers() -> Iterator[tuple[LLMServer, LLMServer]]:
    with openai_server() as oa, anthropic_server() as an:
        yield oa, an


@pytest.fixture
def instrumented() -> Iterator[list[str]]:
    names = chronicle_litellm.instrument()
    try:
        yield names
    finally:
        chronicle_litellm.uninstrument()
        LIMIT["max_shares"] = None


def _queue(server: LLMServer, quantity: int = 1000) -> None:
    server.reply_with(
        Reply("Let me check the price.", tool_call=("lookup_price", {"symbol": "MSFT"})),
        Reply("", tool_call=("place_order", {"symbol": "MSFT", "quantity": quantity, "side": "sell"})),
    )


def _assert_complete(recorder: Recorder, trace: Trace) -> None:
    """No payload holds a value the codec could not store: on the spans nor in the store."""
    texts = [
        value
        for span in recorder.spans()
        for key in (sc.INPUT, sc.OUTPUT, sc.ERROR)
        if isinstance(value := (span.attributes or {}).get(key), str)
    ]
    assert texts and not [t for t in texts if '"$type":"unencodable"' in t]
    for boundary in trace.boundaries:
        for payload in (boundary.raw_input, boundary.raw_output, boundary.raw_error):
            if payload is not None:
                assert '"$type":"unencodable"' not in payload.text, (boundary.name, payload.text[:500])


def _dumps(values: list[Any]) -> list[Any]:
    return [[c.model_dump() for c in v] if isinstance(v, list) else v.model_dump() for v in values]


def _replay_fixed(trace: Trace, *servers: LLMServer) -> tuple[Any, Any]:
    """Rerun with every LLM call stubbed and the guardrail fixed; asserts no request reached a server."""
    before = [s.count() for s in servers]
    LIMIT["max_shares"] = 100
    try:
        with chronicle.replay(trace, stub={"kind:llm"}) as run:
            replayed = run.rerun()
    finally:
        LIMIT["max_shares"] = None
    assert [s.count() for s in servers] == before, "no request reached a model server"
    return replayed, run.report


def _check_replay(recorded: dict[str, Any], recorded_seen: list[Any], replayed: Any, report: Any) -> None:
    assert recorded["order"] == {"status": "filled", "symbol": "MSFT", "quantity": 1000, "side": "sell"}
    assert replayed["order"]["status"] == "blocked", "the fixed guardrail runs live and blocks the order"
    assert replayed["answer"] == recorded["answer"]
    assert report.ok and not report.drift, report
    changed = {c.call_key[-1][0] for c in report.changes}
    assert "litellm_agent.place_order" in changed and len(report.changes) == 2, report.changes  # and the root
    assert len(report.stubbed) == 2 and not report.live_llm
    _check_typed(recorded_seen)
    calls = [r for r in SEEN if isinstance(r, litellm.ModelResponse)]
    assert [c.choices[0].message.tool_calls[0].function.name for c in calls] == ["lookup_price", "place_order"]


def _check_typed(recorded_seen: list[Any]) -> None:
    """The values the replayed run got from LiteLLM equal the recorded ones, typed."""
    assert len(SEEN) == len(recorded_seen)
    for got, was in zip(SEEN, recorded_seen, strict=True):
        if isinstance(was, list):  # a stream's chunks
            assert [type(c) for c in got] == [type(c) for c in was]
        else:
            assert type(got) is type(was) and type(got).__module__.startswith("litellm.")
        assert got == was
    assert _dumps(SEEN) == _dumps(recorded_seen)
    for got, was in zip(SEEN, recorded_seen, strict=True):
        if isinstance(was, litellm.ModelResponse):
            assert got.choices[0].message.content == was.choices[0].message.content
            assert got.choices[0].message.tool_calls == was.choices[0].message.tool_calls
            assert got._hidden_params == was._hidden_params  # cost, provider, headers


# ------------------------------------------------------------------------------------ the agent loop


@pytest.mark.parametrize(
    ("model", "stream"),
    [(OPENAI, False), (OPENAI, True), (ANTHROPIC, False), (ANTHROPIC, True)],
    ids=["openai", "openai-stream", "anthropic", "anthropic-stream"],
)
def test_the_sync_agent_records_and_replays_offline_with_the_guardrail_fixed(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: list[str], model: str, stream: bool
) -> None:
    oa, an = servers
    server = an if model == ANTHROPIC else oa
    _queue(server)
    recorded = run_agent(REQUEST, model, server.url, stream)
    recorded_seen = list(SEEN)
    assert server.count() == 2
    trace = chronicle.load_trace(recorder.path, "latest")
    _assert_complete(recorder, trace)
    llm = [b for b in trace.boundaries if b.kind == "llm"]
    assert [b.name for b in llm] == ["litellm.completion"] * 2
    assert [b.stream for b in llm] == [stream] * 2
    if stream:
        assert [b.stream_state for b in llm] == ["complete"] * 2
        attrs = [dict(s.attributes or {}) for s in recorder.spans() if s.name == "litellm.completion"]
        assert [a[sc.GEN_AI_RESPONSE_FINISH_REASONS] for a in attrs] == [("tool_calls",)] * 2
        assert attrs[0][sc.GEN_AI_PROVIDER_NAME] == model.split("/")[0]

    replayed, report = _replay_fixed(trace, server)
    _check_replay(recorded, recorded_seen, replayed, report)


@pytest.mark.parametrize(
    ("model", "stream"),
    [(OPENAI, False), (OPENAI, True), (ANTHROPIC, True)],
    ids=["openai", "openai-stream", "anthropic-stream"],
)
def test_the_async_agent_records_and_replays_acompletion(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: list[str], model: str, stream: bool
) -> None:
    oa, an = servers
    server = an if model == ANTHROPIC else oa
    _queue(server)
    recorded = asyncio.run(arun_agent(REQUEST, model, server.url, stream))
    recorded_seen = list(SEEN)
    assert server.count() == 2
    trace = chronicle.load_trace(recorder.path, "latest")
    _assert_complete(recorder, trace)
    assert [b.name for b in trace.boundaries if b.kind == "llm"] == ["litellm.acompletion"] * 2
    replayed, report = _replay_fixed(trace, server)
    _check_replay(recorded, recorded_seen, replayed, report)


@pytest.mark.parametrize("use_async", [False, True], ids=["completion", "acompletion"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_litellm_router_calls_are_recorded_and_replayed(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: list[str], use_async: bool, stream: bool
) -> None:
    oa, _ = servers
    _queue(oa)
    recorded = (
        asyncio.run(router_aagent(REQUEST, oa.url, stream)) if use_async else router_agent(REQUEST, oa.url, stream)
    )
    recorded_seen = list(SEEN)
    assert oa.count() == 2
    trace = chronicle.load_trace(recorder.path, "latest")
    _assert_complete(recorder, trace)
    name = "litellm.acompletion" if use_async else "litellm.completion"
    assert [b.name for b in trace.boundaries if b.kind == "llm"] == [name] * 2
    first = trace.find(name)[0].decode_input()
    assert first["model"] == "trader", "the model group asked for, not the deployment the router picked"
    assert not {"model_info", "metadata", "litellm_trace_id"} & set(first)
    replayed, report = _replay_fixed(trace, oa)  # no drift: the Router's per-call ids and hashes are not recorded
    _check_replay(recorded, recorded_seen, replayed, report)


def test_a_router_picking_among_deployments_replays_without_drift(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: list[str]
) -> None:
    oa, _ = servers
    deployments = [
        {"model_name": "trader", "litellm_params": {"model": f"openai/gpt-{name}", "api_base": f"{oa.url}/v1"}}
        for name in ("a", "b", "c")
    ]
    router = litellm.Router(model_list=deployments)

    @chronicle.boundary(kind="agent", name="litellm_agent.routed")
    def routed(question: str) -> list[str]:
        return [
            str(router.completion(model="trader", messages=[{"role": "user", "content": f"{question} {i}"}],
                                  api_key="sk-test").choices[0].message.content)
            for i in range(4)
        ]  # fmt: skip

    oa.reply_with(*(Reply(f"answer {i}") for i in range(4)))
    recorded = routed("which deployment?")
    trace = chronicle.load_trace(recorder.path, "latest")
    assert {b.decode_input()["model"] for b in trace.boundaries if b.kind == "llm"} == {"trader"}
    before = oa.count()
    for _ in range(4):  # the router picks other deployments each time: the recorded inputs still compare equal
        with chronicle.replay(trace, stub={"kind:llm"}, strict=True) as run:
            assert run.rerun() == recorded
        assert run.report.ok and not run.report.drift, run.report
    assert oa.count() == before


# ------------------------------------------------------------------------------------ what a call records


def test_inputs_are_the_callers_arguments_without_connection_settings(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: list[str]
) -> None:
    oa, _ = servers
    _queue(oa)
    run_agent(REQUEST, OPENAI, oa.url)
    trace = chronicle.load_trace(recorder.path, "latest")
    first, second = (b.decode_input() for b in trace.find("litellm.completion"))
    assert first == {
        "model": OPENAI,
        "messages": [{"role": "user", "content": REQUEST}],
        "tools": TOOLS,
        "stream": False,
    }
    assert isinstance(second["messages"][1], litellm.Message), "the model's message, typed"
    inputs = "".join(b.raw_input.text for b in trace.boundaries if b.kind == "llm" and b.raw_input is not None)
    assert oa.url not in inputs and "api_base" not in inputs and "api_key" not in inputs
    assert "sk-test" not in json.dumps([s.attributes for s in trace.spans], default=str)
    attrs = [dict(s.attributes or {}) for s in recorder.spans() if s.name == "litellm.completion"]
    assert attrs[0][sc.GEN_AI_PROVIDER_NAME] == "openai" and attrs[0][sc.GEN_AI_REQUEST_MODEL] == OPENAI
    assert attrs[0][sc.GEN_AI_RESPONSE_ID] == "chatcmpl-000001" and attrs[0][sc.GEN_AI_RESPONSE_MODEL] == "gpt-test"
    assert attrs[1][sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_calls",)
    assert (attrs[0][sc.GEN_AI_USAGE_INPUT_TOKENS], attrs[0][sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (11, 7)


def test_a_pydantic_response_format_is_recorded_as_its_schema(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: list[str]
) -> None:
    from pydantic import BaseModel

    class Order(BaseModel):
        symbol: str
        quantity: int

    oa, _ = servers
    oa.reply_with(Reply("", parsed_json={"symbol": "MSFT", "quantity": 3}))
    response = litellm.completion(model=OPENAI, messages=[], response_format=Order, **_connection(OPENAI, oa.url))
    assert Order.model_validate_json(response.choices[0].message.content).quantity == 3
    recorded = json.loads(str(recorder.attrs("litellm.completion")[sc.INPUT]))
    assert recorded["response_format"]["class"].endswith("Order")
    assert recorded["response_format"]["json_schema"] == Order.model_json_schema()


def test_the_responses_api_records_and_replays_typed_and_streamed(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: list[str]
) -> None:
    oa, an = servers
    oa.reply_with(Reply("Sell 1,000 MSFT."), Reply("Streamed: sell."), Reply("Async: sell."))
    an.reply_with(Reply("Claude: sell."))
    recorded = summarise(REQUEST, oa.url, an.url)
    recorded_seen = list(SEEN)
    assert recorded == {
        "plain": "Sell 1,000 MSFT.",
        "streamed": "Streamed: sell.",
        "bridged": "Claude: sell.",
        "async_streamed": "Async: sell.",
    }
    trace = chronicle.load_trace(recorder.path, "latest")
    _assert_complete(recorder, trace)

    def plain_response_id(index: int) -> str:
        return str(recorded_seen[index].id)  # LiteLLM's own id: the provider's, with the provider encoded in it

    assert [b.name for b in trace.boundaries if b.kind == "llm"] == [
        *["litellm.responses"] * 3,  # LiteLLM's completion under the bridged call is part of it
        "litellm.aresponses",
    ]
    plain, streamed, bridged, async_streamed = (
        dict(s.attributes or {}) for s in recorder.spans() if s.name in ("litellm.responses", "litellm.aresponses")
    )
    assert plain[sc.GEN_AI_RESPONSE_ID] == plain_response_id(0) and plain[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert streamed[sc.GEN_AI_RESPONSE_ID].startswith("resp_") and streamed[sc.STREAM_STATE] == "complete"
    assert streamed[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("completed",)
    assert bridged[sc.GEN_AI_PROVIDER_NAME] == "anthropic" and async_streamed[sc.STREAM_ITEMS] > 3
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        assert run.rerun() == recorded
    assert (oa.count(), an.count()) == (3, 1)
    assert run.report.ok and not run.report.drift and not run.report.changes, run.report
    _check_typed(recorded_seen)


def test_an_error_is_recorded_and_replayed_as_litellms_exception(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: list[str]
) -> None:
    oa, _ = servers
    assert embed(oa.url) == "not found: 404"
    trace = chronicle.load_trace(recorder.path, "latest")
    error = trace.find("litellm.embedding")[0].decode_error()
    assert isinstance(error, litellm.NotFoundError) and error.status_code == 404, repr(error)
    count = oa.count()
    with chronicle.replay(trace) as run:
        assert run.rerun() == "not found: 404", "the handler catches LiteLLM's own exception class, as recorded"
    assert oa.count() == count and run.report.ok, run.report


def test_a_stream_read_in_part_replays_as_far_as_it_was_read(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: list[str]
) -> None:
    oa, _ = servers
    oa.reply_with(Reply("one two three four five six"))

    @chronicle.boundary(kind="agent", name="litellm_agent.reads")
    def reads(url: str, limit: int) -> list[str]:
        stream = completion(model=OPENAI, messages=[], stream=True, **_connection(OPENAI, url))
        got = []
        for chunk in stream:
            got.append(chunk.choices[0].delta.content or "")
            if len(got) == limit:
                break
        del stream
        gc.collect()
        return got

    recorded = reads(oa.url, 2)
    trace = chronicle.load_trace(recorder.path, "latest")
    (call,) = trace.find("litellm.completion")
    assert call.stream_state == "abandoned" and len(call.decode_output()) == 2
    with chronicle.replay(trace) as run:
        assert run.rerun() == recorded
    with chronicle.replay(trace) as run, pytest.raises(chronicle.ReplayDivergence, match="abandoned"):
        run.rerun(limit=10)


# ------------------------------------------------------------------------------------ import styles, layers, files


def test_every_way_of_reaching_the_functions_is_instrumented_and_uninstrument_puts_them_back() -> None:
    import litellm.chat_completions.dispatch as dispatch

    originals = (litellm.completion, litellm.acompletion, dispatch.completion, litellm.Router)
    assert completion is originals[0], "this module imported LiteLLM's function before instrument()"
    names = chronicle_litellm.instrument()
    try:
        assert names == [
            "litellm.completion",
            "litellm.acompletion",
            "litellm.responses",
            "litellm.aresponses",
            "litellm.text_completion",
            "litellm.atext_completion",
            "litellm.embedding",
            "litellm.aembedding",
        ]
        from litellm import completion as imported_after

        stand_in = litellm.completion
        assert stand_in is not originals[0] and stand_in is dispatch.completion is imported_after
        assert globals()["completion"] is stand_in, "a name imported before instrument() is rebound"
        assert asyncio.iscoroutinefunction(litellm.acompletion)
        assert chronicle_litellm.instrument() == names and litellm.completion is stand_in  # a no-op
    finally:
        assert chronicle_litellm.uninstrument() == 8
    assert (litellm.completion, litellm.acompletion, dispatch.completion, litellm.Router) == originals
    assert globals()["completion"] is originals[0]
    assert chronicle_litellm.uninstrument() == 0


@pytest.mark.parametrize("model", [OPENAI, ANTHROPIC], ids=["openai", "anthropic"])
def test_with_the_sdk_integrations_on_each_call_is_recorded_once(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: list[str], model: str
) -> None:
    oa, an = servers
    server = an if model == ANTHROPIC else oa
    chronicle_openai.instrument()
    chronicle_anthropic.instrument()
    try:
        _queue(server)
        recorded = run_agent(REQUEST, model, server.url, stream=True)
        recorded_seen = list(SEEN)
        trace = chronicle.load_trace(recorder.path, "latest")
        assert [b.name for b in trace.boundaries if b.kind == "llm"] == ["litellm.completion"] * 2
        replayed, report = _replay_fixed(trace, server)
        _check_replay(recorded, recorded_seen, replayed, report)
    finally:
        chronicle_openai.uninstrument()
        chronicle_anthropic.uninstrument()


def test_the_trace_loaded_from_a_collector_file_replays_the_same(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: list[str], tmp_path: Path
) -> None:
    oa, _ = servers
    _queue(oa)
    recorded = run_agent(REQUEST, OPENAI, oa.url, stream=True)
    recorded_seen = list(SEEN)
    trace = chronicle.load_trace(recorder.path, "latest")
    lines = recorder.store.read_requests(trace.trace_id)  # the Collector's file exporter writes these lines
    path = tmp_path / "collector-out.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    loaded = chronicle.load_trace(path, trace.trace_id, store=recorder.path)
    replayed, report = _replay_fixed(loaded, oa)
    _check_replay(recorded, recorded_seen, replayed, report)


_FRESH_PROCESS = """
import json, os, sys
assert not any(v in os.environ for v in ("LITELLM_LOCAL_MODEL_COST_MAP", "LITELLM_OFFLINE_MODE"))
import chronicle_otel as chronicle
from chronicle_otel.integrations import litellm as chronicle_litellm
chronicle_litellm.instrument()  # before LiteLLM is imported: it sets LITELLM_LOCAL_MODEL_COST_MAP
assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
from litellm.litellm_core_utils.get_model_cost_map import get_model_cost_map_source_info
from tests.frameworks import test_litellm as agent
trace = chronicle.load_trace(sys.argv[1], sys.argv[2])
agent.LIMIT["max_shares"] = 100
with chronicle.replay(trace, stub={"kind:llm"}) as run:  # the network guard is on
    replayed = run.rerun()
print(json.dumps({"ok": run.report.ok, "report": str(run.report), "order": replayed["order"],
                  "cost_map": get_model_cost_map_source_info()["source"]}))
"""


def test_a_new_process_replays_offline_with_the_bundled_price_list(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: list[str]
) -> None:
    oa, _ = servers
    _queue(oa)
    run_agent(REQUEST, OPENAI, oa.url, stream=True)
    trace = chronicle.load_trace(recorder.path, "latest")
    count = oa.count()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LITELLM_", "CHRONICLE_", "OTEL_"))}
    done = subprocess.run(
        [sys.executable, "-c", _FRESH_PROCESS, str(recorder.path), trace.trace_id],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ok"], result["report"]  # a request to any host but this one would be a divergence
    assert result["order"]["status"] == "blocked" and result["cost_map"] == "local"
    assert oa.count() == count


def test_a_recorded_stream_is_shown_as_the_message_it_carries(
    recorder: Recorder, servers: tuple[LLMServer, LLMServer], instrumented: list[str]
) -> None:
    oa, _ = servers
    oa.reply_with(Reply("Sold 1000 shares of MSFT"))
    stream = litellm.completion(
        model=OPENAI, messages=[{"role": "user", "content": "sell"}], stream=True, **_connection(OPENAI, oa.url)
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream) == "Sold 1000 shares of MSFT"
    trace = chronicle.load_trace(recorder.path, "latest")
    [call] = trace.find("litellm.completion")
    assert call.raw_output is not None
    message = chronicle.assemble(json.loads(call.raw_output.text))  # as `chronicle show` reads it: no class rebuilt
    assert message is not None and message.text == "Sold 1000 shares of MSFT" and message.finish_reason == "stop"
