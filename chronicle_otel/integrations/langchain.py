"""LangChain chat models and tools, and so every LangGraph agent built on them.

Usage::

    import chronicle_otel as chronicle
    from chronicle_otel.integrations import langchain as chronicle_langchain

    chronicle.configure()
    chronicle_langchain.instrument()      # every chat model and tool, created before or after
    graph.invoke({"messages": [("user", "sell $1,000 of MSFT")]})
    ...
    chronicle_langchain.uninstrument()    # the original methods back

The seams are LangChain's own base classes, so one switch covers every provider behind LangChain (``ChatOpenAI``,
``ChatAnthropic``, Ollama, Bedrock…) and everything built on them:

* ``langchain.chat_model.invoke`` (kind ``llm``): each ``invoke`` / ``ainvoke`` of a ``BaseChatModel``, and so
  ``batch`` / ``abatch``, ``bind_tools``, ``with_structured_output``, LangGraph model nodes and
  ``create_react_agent``. The output is the typed ``AIMessage`` (tool calls, ``usage_metadata``,
  ``response_metadata``). A model with ``streaming=True`` (or under ``astream_events`` or LangGraph's
  ``stream_mode="messages"``) streams inside ``invoke``: still one boundary, whose output is the final ``AIMessage``
  with the chunks it streamed in its extra field ``chronicle_chunks`` (for the replay; the caller never sees it).
* ``langchain.chat_model.stream`` (kind ``llm``): each ``stream`` / ``astream`` (and what reads through them: a
  chain's ``stream``, ``astream_events``). The output is each ``AIMessageChunk`` as the consumer read it. A model
  that cannot stream answers ``stream`` with ``invoke``: recorded once, as the stream.
* ``langchain.tool.<tool name>`` (kind ``tool``): each ``BaseTool.run`` / ``arun``, which ``invoke`` / ``ainvoke``
  and LangGraph's ``ToolNode`` call once per tool call, so ``live={"langchain.tool.place_order"}`` or
  ``stub={"langchain.tool.lookup_quote"}`` selects one tool. The output is what the tool returned (a
  ``ToolMessage`` for a tool call, a ``Command``, or the raw value).

What a call records as its input is what decides its answer, stable from run to run: the messages (any input form
normalised to a list of messages, each without its ``id``: LangGraph gives every message a fresh UUID), the model
name, temperature and max tokens, and the call's options (``stop``, ``tools``, ``tool_choice``,
``response_format``…; a schema class as its name and JSON schema). Never the ``RunnableConfig`` (callbacks, run ids,
tags, metadata), the client or the API key. A tool records the arguments the model gave it (not the state, store or
runtime LangGraph injects) and the tool call id. The span carries the GenAI attributes: the provider (``openai``,
``anthropic``, ``aws.bedrock``…), request model, temperature, max tokens, and from the answer the response model and
id, finish reasons and token usage.

Replay: ``stub={"kind:llm"}`` answers every chat model call from the recording (a stubbed ``stream`` yields the
recorded chunks, so ``chunk1 + chunk2 + …`` accumulates as before); tools run live (they are the code under test)
unless selected. A stubbed call fires the callbacks the call fired, through LangChain's callback manager configured
as the call's own (the config's callbacks, tags, metadata and run name; the model's callbacks, tags and metadata):
``on_chat_model_start``, ``on_llm_new_token`` for each recorded chunk (a stream's, and an ``invoke``'s that
streamed), then ``on_llm_end`` or ``on_llm_error``. So ``astream_events`` yields the recorded ``on_chat_model_*``
events, LangGraph's ``stream_mode="messages"`` the recorded chunks, and LangSmith sees the model run. A call that
runs (recording, or live in a replay) fires its own callbacks: never these as well. With the OpenAI or Anthropic
SDK integration on too, both record (the SDK call is a child of the LangChain boundary) and a ``kind:llm`` replay
answers at the LangChain layer.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, Final

import wrapt
from opentelemetry import trace as trace_api

from .. import semconv
from .._internal import hooks
from .._internal.errors import handle_internal_errors, warn_once
from ..codec import register_type
from ..config import get_config
from ..errors import ChronicleError
from ..record.adapters import Arguments
from ..record.extension import BoundaryKind, usage_attributes, wrap
from ._common import require

__all__ = ["CHAT_MODEL_INVOKE", "CHAT_MODEL_STREAM", "PACKAGES", "TOOL", "instrument", "uninstrument"]

CHAT_MODEL_INVOKE: Final = "langchain.chat_model.invoke"
"""The boundary of ``invoke`` / ``ainvoke`` of every chat model."""

CHAT_MODEL_STREAM: Final = "langchain.chat_model.stream"
"""The boundary of ``stream`` / ``astream`` of every chat model."""

TOOL: Final = "langchain.tool"
"""The prefix of the tools' boundaries: a tool named ``lookup_order`` is ``langchain.tool.lookup_order``."""

PACKAGES: Final = (
    "langchain_core.",
    "langgraph.",
    "langchain_openai.",
    "langchain_anthropic.",
    "openai.",
    "anthropic.",
)
"""The packages whose types a replay rebuilds without ``allow=``: LangChain's messages, LangGraph's ``Command``, and
the errors of the provider SDKs that ``langchain-openai`` / ``langchain-anthropic`` raise."""

_CHAT_MODULE: Final = "langchain_core.language_models.chat_models"
_TOOL_MODULE: Final = "langchain_core.tools.base"

_PROVIDERS: Final[Mapping[str, str]] = {
    "azure": "azure.ai.openai",
    "azure_openai": "azure.ai.openai",
    "amazon_bedrock": "aws.bedrock",
    "bedrock": "aws.bedrock",
    "google_genai": "gcp.gen_ai",
    "google_vertexai": "gcp.vertex_ai",
    "mistralai": "mistral_ai",
    "xai": "x_ai",
    "ibm": "ibm.watsonx.ai",
}
"""LangChain's ``ls_provider`` names that differ from the GenAI ``gen_ai.provider.name`` values."""

_MODEL_FIELDS: Final = ("model_name", "model", "model_id", "deployment_name")
"""Public fields of chat model classes that name the model (ChatOpenAI, ChatAnthropic, Ollama, Bedrock, Azure)."""

_MAX_PROVIDERS: Final = 64
"""Distinct provider names given their own boundary specs; later ones are recorded without a provider."""

_MAX_DEPTH: Final = 32
"""How deep :func:`_stable` looks into an option value."""

_lock = threading.Lock()
_guard = handle_internal_errors("recording a LangChain call")

_IN_STREAM: contextvars.ContextVar[object | None] = contextvars.ContextVar("chronicle_langchain_stream", default=None)
"""The model whose ``stream`` / ``astream`` is reading its next chunk in this context: its ``invoke`` / ``ainvoke``
(a model that cannot stream answers the stream with it) is part of that recorded stream, not a call of its own."""

_CHUNKS: Final = "chronicle_chunks"
"""The extra field of a recorded ``AIMessage`` that holds the chunks its ``invoke`` streamed (never returned)."""

_MAX_CHUNKS: Final = 100_000
"""Chunks of one ``invoke`` kept for its replay; an answer streamed in more is recorded without them."""

_LC_RUN: Final = "lc_run-"
"""LangChain's prefix of the ids it gives messages after their run (``langchain_core.utils.utils.LC_ID_PREFIX``)."""

_UNTRACED_PARAMS: Final = frozenset({"tools", "functions", "messages", "response_format"})
"""The invocation parameters LangChain leaves out of LangSmith's inheritable metadata."""

_MODEL_ARGUMENTS: Final = Arguments(passed_only=True, skip=lambda value: value is None, exclude={"call"})
_TOOL_ARGUMENTS: Final = _MODEL_ARGUMENTS


# ------------------------------------------------------------------------------------ the calls, as recorded


class _ModelCall:
    """One chat model call.

    The original method and its arguments (never recorded), and the span current when it was made (the boundary's
    own span is another one).
    """

    __slots__ = ("args", "kwargs", "model", "parent", "ran", "result", "wrapped")

    def __init__(self, wrapped: Callable[..., Any], model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.wrapped = wrapped
        self.model = model
        self.args = args
        self.kwargs = kwargs
        self.parent = trace_api.get_current_span()
        self.ran = False
        """Whether LangChain's method ran (it fired its own callbacks); False for a call answered from a recording."""
        self.result: Any = None
        """What LangChain's ``invoke`` returned (the boundary records it with its chunks)."""

    def run(self) -> Any:
        """Make the call."""
        self.ran = True
        return self.wrapped(*self.args, **self.kwargs)

    def describe(self, outcome: _Outcome) -> None:
        """Put the GenAI attributes of the answer on the boundary's span.

        Not on another one: when recording is off or suppressed, the current span is the caller's.
        """
        try:
            span = trace_api.get_current_span()
            if span is self.parent or not span.is_recording():
                return
            config = get_config()
            if not config.genai_attributes:
                return
            attributes = outcome.attributes()
            redactor = config.redact
            if redactor is not None:
                attributes = {k: redactor.redact_text(v) if isinstance(v, str) else v for k, v in attributes.items()}
            if attributes:
                span.set_attributes(attributes)
        except Exception as exc:
            _guard.absorb(exc)


class _ToolCall:
    """One tool run: the original method and its arguments (never recorded), and the tool's name."""

    __slots__ = ("args", "kwargs", "name", "wrapped")

    def __init__(self, wrapped: Callable[..., Any], name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.wrapped = wrapped
        self.name = name
        self.args = args
        self.kwargs = kwargs

    def run(self) -> Any:
        """Run the tool."""
        return self.wrapped(*self.args, **self.kwargs)


class _Outcome:
    """The GenAI attributes of an answer, gathered from its message or chunks as they come."""

    __slots__ = ("input_tokens", "model", "output_tokens", "reasons", "response_id")

    def __init__(self) -> None:
        self.model: str | None = None
        self.response_id: str | None = None
        self.reasons: list[str] = []
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None

    def add(self, message: Any) -> None:
        """One answer message, or one chunk of a streamed answer (token counts add up, as LangChain merges them)."""
        try:
            meta = getattr(message, "response_metadata", None)
            if isinstance(meta, Mapping):
                model = meta.get("model_name") or meta.get("model")
                if isinstance(model, str) and model:
                    self.model = model
                rid = meta.get("id")
                if isinstance(rid, str) and rid:
                    self.response_id = rid
                reason = meta.get("finish_reason") or meta.get("stop_reason")
                if isinstance(reason, str) and reason:
                    self.reasons.append(reason)
            usage = getattr(message, "usage_metadata", None)
            if usage is not None:
                counts = usage_attributes(usage)
                if semconv.GEN_AI_USAGE_INPUT_TOKENS in counts:
                    self.input_tokens = (self.input_tokens or 0) + counts[semconv.GEN_AI_USAGE_INPUT_TOKENS]
                if semconv.GEN_AI_USAGE_OUTPUT_TOKENS in counts:
                    self.output_tokens = (self.output_tokens or 0) + counts[semconv.GEN_AI_USAGE_OUTPUT_TOKENS]
        except Exception as exc:
            _guard.absorb(exc)

    def attributes(self) -> dict[str, Any]:
        """The span attributes found."""
        out: dict[str, Any] = {}
        if self.model is not None:
            out[semconv.GEN_AI_RESPONSE_MODEL] = self.model
        if self.response_id is not None:
            out[semconv.GEN_AI_RESPONSE_ID] = self.response_id
        if self.reasons:
            out[semconv.GEN_AI_RESPONSE_FINISH_REASONS] = tuple(self.reasons)
        if self.input_tokens is not None:
            out[semconv.GEN_AI_USAGE_INPUT_TOKENS] = self.input_tokens
        if self.output_tokens is not None:
            out[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] = self.output_tokens
        return out


# ------------------------------------------------------------------------------------ the boundaries' functions
# Their parameters are what a call records (``call`` never is); ``model``, ``temperature`` and ``max_tokens`` are
# also the GenAI request attributes.


def _invoke(
    messages: Any,
    *,
    model: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    options: dict[str, Any] | None = None,
    call: _ModelCall,
) -> Any:
    capture = _capture()
    token = _CAPTURE.set(capture) if capture is not None else None
    try:
        result = call.run()
    finally:
        if token is not None:
            _CAPTURE.reset(token)
    call.result = result
    outcome = _Outcome()
    outcome.add(result)
    call.describe(outcome)
    return _with_chunks(result, capture)


async def _ainvoke(
    messages: Any,
    *,
    model: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    options: dict[str, Any] | None = None,
    call: _ModelCall,
) -> Any:
    capture = _capture()
    token = _CAPTURE.set(capture) if capture is not None else None
    try:
        result = await call.run()
    finally:
        if token is not None:
            _CAPTURE.reset(token)
    call.result = result
    outcome = _Outcome()
    outcome.add(result)
    call.describe(outcome)
    return _with_chunks(result, capture)


def _stream(
    messages: Any,
    *,
    model: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    options: dict[str, Any] | None = None,
    call: _ModelCall,
) -> Iterator[Any]:
    chunks = call.run()
    outcome = _Outcome()
    try:
        while True:
            token = _IN_STREAM.set(call.model)
            try:
                chunk = next(chunks)
            except StopIteration:
                break
            finally:
                _IN_STREAM.reset(token)
            outcome.add(chunk)
            yield chunk
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    call.describe(outcome)


async def _astream(
    messages: Any,
    *,
    model: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    options: dict[str, Any] | None = None,
    call: _ModelCall,
) -> AsyncIterator[Any]:
    chunks = call.run()
    outcome = _Outcome()
    try:
        while True:
            token = _IN_STREAM.set(call.model)
            try:
                chunk = await chunks.__anext__()
            except StopAsyncIteration:
                break
            finally:
                _IN_STREAM.reset(token)
            outcome.add(chunk)
            yield chunk
    finally:
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()
    call.describe(outcome)


def _tool(tool_input: Any, *, tool_call_id: str | None = None, call: _ToolCall) -> Any:
    return call.run()


async def _atool(tool_input: Any, *, tool_call_id: str | None = None, call: _ToolCall) -> Any:
    return await call.run()


def _tool_name(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    name = getattr(kwargs.get("call"), "name", None)
    return f"{TOOL}.{name}" if isinstance(name, str) and name else None


_BODIES: Final[Mapping[str, tuple[Callable[..., Any], str]]] = {
    "invoke": (_invoke, CHAT_MODEL_INVOKE),
    "ainvoke": (_ainvoke, CHAT_MODEL_INVOKE),
    "stream": (_stream, CHAT_MODEL_STREAM),
    "astream": (_astream, CHAT_MODEL_STREAM),
}

_model_boundaries: dict[tuple[str, str], Callable[..., Any]] = {}
"""(method, provider) -> the boundary: the provider is a static attribute of a boundary, so one per provider."""
_tool_boundaries: dict[bool, Callable[..., Any]] = {}


def _model_boundary(method: str, provider: str) -> Callable[..., Any]:
    key = (method, provider)
    found = _model_boundaries.get(key)
    if found is not None:
        return found
    with _lock:
        if key not in _model_boundaries and len(_model_boundaries) >= _MAX_PROVIDERS * len(_BODIES):
            key = (method, "")
        found = _model_boundaries.get(key)
        if found is None:
            body, name = _BODIES[method]
            found = wrap(
                body,
                name=name,
                kind=BoundaryKind.LLM,
                attributes=None,
                enabled=None,
                provider=key[1] or None,
                config=None,
                arguments=_MODEL_ARGUMENTS,
            )
            _model_boundaries[key] = found
    return found


def _tool_boundary(asynchronous: bool) -> Callable[..., Any]:
    found = _tool_boundaries.get(asynchronous)
    if found is not None:
        return found
    with _lock:
        found = _tool_boundaries.get(asynchronous)
        if found is None:
            found = wrap(
                _atool if asynchronous else _tool,
                name=TOOL,
                kind=BoundaryKind.TOOL,
                attributes=None,
                enabled=None,
                provider=None,
                config=None,
                arguments=_TOOL_ARGUMENTS,
                name_of=_tool_name,
            )
            _tool_boundaries[asynchronous] = found
    return found


# ------------------------------------------------------------------------------------ what a call records


def _stable(value: Any, message_type: type, tool_type: type, depth: int = 0) -> Any:
    """``value`` as recorded.

    Messages without their ids, a tool as the definition the model is sent, a class as its name (and JSON schema
    for a pydantic model), a function as its name; containers walked.
    """
    if depth > _MAX_DEPTH:
        return value
    if isinstance(value, message_type):
        return _without_id(value)
    if isinstance(value, tool_type):
        return _tool_description(value)
    if type(value) is dict:
        return {k: _stable(v, message_type, tool_type, depth + 1) for k, v in value.items()}
    if type(value) is list:
        return [_stable(v, message_type, tool_type, depth + 1) for v in value]
    if type(value) is tuple:
        return tuple(_stable(v, message_type, tool_type, depth + 1) for v in value)
    if isinstance(value, type):
        return _class_description(value)
    if callable(value) and hasattr(value, "__qualname__") and not hasattr(type(value), "model_fields"):
        return {"function": f"{getattr(value, '__module__', '?')}.{value.__qualname__}"}
    return value


def _class_description(cls: type) -> dict[str, Any]:
    described: dict[str, Any] = {"class": f"{cls.__module__}.{cls.__qualname__}"}
    schema = getattr(cls, "model_json_schema", None)
    if callable(schema):
        with contextlib.suppress(Exception):  # a model whose schema cannot be generated: its name alone
            described["json_schema"] = schema()
    return described


def _tool_description(tool: Any) -> Any:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    try:
        return convert_to_openai_tool(tool)
    except Exception:  # a tool LangChain cannot describe: its name
        return {"tool": str(getattr(tool, "name", type(tool).__name__))}


def _without_id(message: Any) -> Any:
    if getattr(message, "id", None) is None:
        return message
    return message.model_copy(update={"id": None})


def _messages(value: Any) -> Any:
    """A chat model's input as the list of messages it sends, without their ids."""
    from langchain_core.messages import BaseMessage, HumanMessage, convert_to_messages
    from langchain_core.prompt_values import PromptValue
    from langchain_core.tools import BaseTool

    try:
        if isinstance(value, PromptValue):
            messages = value.to_messages()
        elif isinstance(value, str):
            messages = [HumanMessage(content=value)]
        else:
            messages = convert_to_messages(value)
    except Exception:  # not a model input: the call fails with LangChain's own error; the input as it came
        return _stable(value, BaseMessage, BaseTool)
    return [_without_id(m) for m in messages]


def _ls_params(model: Any, options: dict[str, Any]) -> Mapping[str, Any]:
    """LangChain's own summary of a call: ``ls_provider``, ``ls_model_name``, ``ls_temperature``, ``ls_max_tokens``.

    PRIVATE ACCESS: ``BaseChatModel._get_ls_params`` (checked on langchain-core 1.8.3; there since 0.2), which
    LangChain calls on every ``invoke`` and ``stream`` for LangSmith and every provider package overrides; there is
    no public equivalent. Gone: an empty mapping (warned once), and the provider and model come from the model's
    package and public fields. Failing for a call: the same, for that call.
    """
    method = getattr(model, "_get_ls_params", None)
    if not callable(method):
        warn_once(
            "langchain-ls-params",
            "chronicle_otel: this langchain-core's chat models have no _get_ls_params; LangChain spans take the "
            "provider from the model's package and the model from its public fields",
        )
        return {}
    try:
        params = method(**options)
    except Exception:
        return {}
    return params if isinstance(params, Mapping) else {}


def _provider(params: Mapping[str, Any], model: Any) -> str:
    provider = params.get("ls_provider")
    if not isinstance(provider, str) or not provider:
        package = type(model).__module__.split(".")[0]
        provider = package.removeprefix("langchain_") if package.startswith("langchain_") else package
    return _PROVIDERS.get(provider, provider)[:64]


def _model_name(params: Mapping[str, Any], model: Any) -> str | None:
    name = params.get("ls_model_name")
    if isinstance(name, str) and name:
        return name
    for field in _MODEL_FIELDS:
        value = getattr(model, field, None)
        if isinstance(value, str) and value:
            return value
    return None


def _model_call(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The provider and the recorded arguments of ``model.invoke(input, config=None, *, stop=None, **kwargs)``.

    ``stream`` takes the same. None for arguments the method does not take (it raises its own error).
    """
    from langchain_core.messages import BaseMessage
    from langchain_core.tools import BaseTool

    rest = dict(kwargs)
    if len(args) > 2:
        return None
    if args:
        value = args[0]
    elif "input" in rest:
        value = rest.pop("input")
    else:
        return None
    if len(args) < 2:
        rest.pop("config", None)
    params = _ls_params(model, rest)
    recorded: dict[str, Any] = {"messages": _messages(value), "model": _model_name(params, model)}
    for key, source, kind in (("temperature", "ls_temperature", (int, float)), ("max_tokens", "ls_max_tokens", int)):
        number = params.get(source)
        if isinstance(number, kind) and not isinstance(number, bool):
            recorded[key] = number
    options = _stable(rest, BaseMessage, BaseTool)
    if options:
        recorded["options"] = options
    return _provider(params, model), recorded


def _tool_call(tool: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The recorded arguments of ``tool.run(tool_input, ..., tool_call_id=None, ...)``.

    The arguments the model gave (those of the tool's call schema: LangGraph's injected state, store and runtime
    left out) and the tool call id; None for arguments the method does not take.
    """
    from langchain_core.messages import BaseMessage
    from langchain_core.tools import BaseTool

    if args:
        value = args[0]
    elif "tool_input" in kwargs:
        value = kwargs["tool_input"]
    else:
        return None
    if isinstance(value, dict):
        visible = _model_arguments(tool)
        if visible is not None:
            value = {k: v for k, v in value.items() if k in visible}
    recorded: dict[str, Any] = {"tool_input": _stable(value, BaseMessage, BaseTool)}
    tool_call_id = kwargs.get("tool_call_id")
    if tool_call_id is not None:
        recorded["tool_call_id"] = tool_call_id
    return recorded


def _model_arguments(tool: Any) -> frozenset[str] | None:
    """The names of the arguments a model gives ``tool``; None when it cannot be told.

    From ``BaseTool.tool_call_schema`` (public): the tool's schema without its injected arguments.
    """
    try:
        schema = tool.tool_call_schema
    except Exception:
        return None
    if isinstance(schema, dict):
        properties = schema.get("properties")
        return frozenset(properties) if isinstance(properties, dict) else None
    fields = getattr(schema, "model_fields", None)
    if isinstance(fields, dict):
        names = set(fields)
        names.update(f.alias for f in fields.values() if isinstance(getattr(f, "alias", None), str))
        return frozenset(names)
    return None


# ------------------------------------------------------------------------------------ callbacks of a stubbed call
# A call answered from the recording runs none of LangChain's code, so the seam fires the callbacks LangChain's own
# ``invoke`` / ``stream`` fire, through LangChain's public callback API and with the same callback manager (the
# call's RunnableConfig callbacks, tags and metadata; the model's own callbacks, tags, metadata and verbose): so
# ``astream_events``, LangGraph's ``stream_mode="messages"``, LangSmith and every handler see the call as it was.
# A call that ran fires its own callbacks: never these too.


class _Capture:
    """Collects the chunks an ``invoke`` streams while it is recorded.

    Its replay fires them again (``on_llm_new_token``). Made a LangChain callback handler by
    :func:`_register_capture`.
    """

    run_inline = True  # called in order, on the caller's thread (not in an executor)

    def __init__(self) -> None:
        self.run_id: Any = None
        self.chunks: list[Any] = []

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: Any, **kwargs: Any) -> None:
        """The model's run starts: the chunks of this run are the ones kept."""
        if self.run_id is None:
            self.run_id = run_id

    def on_llm_new_token(self, token: Any, *, chunk: Any = None, run_id: Any = None, **kwargs: Any) -> None:
        """One chunk streamed."""
        message = getattr(chunk, "message", None)
        if run_id is not None and run_id == self.run_id and message is not None and len(self.chunks) <= _MAX_CHUNKS:
            self.chunks.append(message)


_CAPTURE: contextvars.ContextVar[Any] = contextvars.ContextVar("chronicle_langchain_capture", default=None)
"""The :class:`_Capture` of the ``invoke`` recorded in this context: LangChain adds it to the callback manager it
configures (a configure hook, registered once)."""

_capture_type: list[type] = []
"""The :class:`_Capture` handler class, once registered with LangChain."""


def _register_capture() -> None:
    """Register :data:`_CAPTURE` with LangChain's public ``register_configure_hook``.

    Once per process: LangChain keeps its hooks, and the variable holds a handler only while an ``invoke`` is
    recorded.
    """
    if _capture_type:
        return
    try:
        from langchain_core.callbacks import BaseCallbackHandler
        from langchain_core.tracers.context import register_configure_hook
    except ImportError:
        warn_once(
            "langchain-configure-hook",
            "chronicle_otel: this langchain-core has no register_configure_hook; the chunks an invoke streams are "
            "not recorded, and its replay fires no on_llm_new_token",
        )
        return

    class _CaptureHandler(_Capture, BaseCallbackHandler):
        def __init__(self) -> None:
            BaseCallbackHandler.__init__(self)
            _Capture.__init__(self)

    register_configure_hook(_CAPTURE, inheritable=False)
    _capture_type.append(_CaptureHandler)


def _capture() -> _Capture | None:
    """A fresh chunk collector for one recorded ``invoke`` (None without the configure hook)."""
    if not _capture_type:
        return None
    try:
        made = _capture_type[0]()
    except Exception as exc:
        _guard.absorb(exc)
        return None
    return made if isinstance(made, _Capture) else None


def _with_chunks(result: Any, capture: _Capture | None) -> Any:
    """What an ``invoke`` records: its ``AIMessage``, with the chunks it streamed if it did.

    The chunks go in the extra field ``chronicle_chunks``, each without LangChain's run id (``lc_run-…``, new on
    every run). The caller gets the message itself (:func:`_answer`).
    """
    if capture is None or not capture.chunks or len(capture.chunks) > _MAX_CHUNKS:
        return result
    try:
        from langchain_core.messages import AIMessage, BaseMessageChunk

        if not isinstance(result, AIMessage):
            return result
        kept = [_without_run_id(c) for c in capture.chunks if isinstance(c, BaseMessageChunk)]
        return result.model_copy(update={_CHUNKS: kept}) if kept else result
    except Exception as exc:
        _guard.absorb(exc)
        return result


def _without_run_id(chunk: Any) -> Any:
    """``chunk`` without the id LangChain gave it after its run (``lc_run-…``): as if never set."""
    if not (isinstance(chunk.id, str) and chunk.id.startswith(_LC_RUN)):
        return chunk
    kept = chunk.model_copy(update={"id": None})
    kept.model_fields_set.discard("id")
    return kept


def _without_chunks(value: Any) -> tuple[Any, list[Any] | None]:
    """A recorded ``invoke`` answer as the caller gets it (without ``chronicle_chunks``), and its chunks.

    The chunks are None when the call did not stream or was recorded without them.
    """
    extra = getattr(value, "model_extra", None)
    if not isinstance(extra, dict) or _CHUNKS not in extra:
        return value, None
    try:
        from langchain_core.messages import BaseMessageChunk

        message = value.model_copy()
        chunks = message.model_extra.pop(_CHUNKS, None)
        message.model_fields_set.discard(_CHUNKS)
    except Exception as exc:
        _guard.absorb(exc)
        return value, None
    kept = [c for c in chunks if isinstance(c, BaseMessageChunk)] if isinstance(chunks, list) else []
    return message, kept


class _Prepared:
    """The LangChain run of one call, ready to start.

    Its callback manager, ``on_chat_model_start``'s arguments, and the model and options (whether ``invoke``
    streams depends on them).
    """

    __slots__ = ("manager", "messages", "model", "options", "serialized", "start")

    def __init__(
        self,
        manager: Any,
        model: Any,
        serialized: Any,
        messages: list[Any],
        start: dict[str, Any],
        options: dict[str, Any],
    ) -> None:
        self.manager = manager
        self.model = model
        self.serialized = serialized
        self.messages = messages
        self.start = start
        self.options = options


def _split(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, Any, dict[str, Any]]:
    """``invoke(input, config=None, *, stop=None, **kwargs)``'s arguments (``stream`` takes the same)."""
    rest = dict(kwargs)
    value = args[0] if args else rest.pop("input")
    config = args[1] if len(args) > 1 else rest.pop("config", None)
    stop = rest.pop("stop", None)
    return value, config, stop, rest


def _input_messages(value: Any) -> list[Any]:
    """A chat model's input as the list of messages it sends (as ``BaseChatModel`` converts it)."""
    from langchain_core.messages import HumanMessage, convert_to_messages
    from langchain_core.prompt_values import PromptValue

    if isinstance(value, PromptValue):
        return value.to_messages()
    if isinstance(value, str):
        return [HumanMessage(content=value)]
    return convert_to_messages(value)


def _invocation_params(model: Any, stop: Any, options: dict[str, Any]) -> dict[str, Any]:
    """The ``invocation_params`` LangChain gives ``on_chat_model_start`` (LangSmith shows them).

    PRIVATE ACCESS: ``BaseChatModel._get_invocation_params`` (checked on langchain-core 1.8.3; there since 0.1),
    which provider packages override with the request's parameters; there is no public equivalent. Gone: the model's
    public ``dict()`` with the stop words and options (warned once). Failing for a call: the same, for that call.
    """
    method = getattr(model, "_get_invocation_params", None)
    if callable(method):
        with contextlib.suppress(Exception):
            params = method(stop=stop, **options)
            if isinstance(params, dict):
                return params
    else:
        warn_once(
            "langchain-invocation-params",
            "chronicle_otel: this langchain-core's chat models have no _get_invocation_params; a stubbed call's "
            "callbacks get the model's dict() as its invocation parameters",
        )
    public: Any = {}
    with contextlib.suppress(Exception):
        public = model.dict()
    return {**(public if isinstance(public, dict) else {}), "stop": stop, **options}


def _structured_format(given: Any) -> dict[str, Any]:
    """``options["ls_structured_output_format"]`` as LangChain gives it: the schema as a JSON schema."""
    if not isinstance(given, Mapping) or "schema" not in given:
        return {}
    from langchain_core.utils.function_calling import convert_to_json_schema

    try:
        schema = convert_to_json_schema(given["schema"])
    except Exception:
        return {}
    return {"ls_structured_output_format": {"kwargs": given.get("kwargs", {}), "schema": schema}}


def _prepare(call: _ModelCall, stream: bool, asynchronous: bool) -> _Prepared | None:
    """The run of ``call`` as ``BaseChatModel.invoke`` (``stream``) configures it.

    None when no handler listens (nothing to fire), or when it cannot be made (the call goes on without callbacks).
    """
    try:
        from langchain_core.callbacks import AsyncCallbackManager, CallbackManager
        from langchain_core.load import dumpd
        from langchain_core.runnables import ensure_config

        model = call.model
        value, given, stop, options = _split(call.args, call.kwargs)
        config = ensure_config(given)
        structured = options.pop("ls_structured_output_format", None) or options.pop("structured_output_format", None)
        params = _invocation_params(model, stop, options)
        run_options: dict[str, Any] = {"stop": stop}
        if stream:
            run_options.update({k: params[k] for k in options if k in params})
        run_options.update(_structured_format(structured))
        metadata = {
            **(config.get("metadata") or {}),
            **_ls_params(model, {"stop": stop, **options}),
            "ls_integration": "langchain_chat_model",
        }
        manager_type = AsyncCallbackManager if asynchronous else CallbackManager
        manager = manager_type.configure(
            inheritable_callbacks=config.get("callbacks"),
            local_callbacks=model.callbacks,
            verbose=model.verbose,
            inheritable_tags=config.get("tags"),
            local_tags=model.tags,
            inheritable_metadata=metadata,
            local_metadata=model.metadata,
            langsmith_inheritable_metadata={k: v for k, v in params.items() if k not in _UNTRACED_PARAMS},
        )
        if not manager.handlers:
            return None
        start = {
            "invocation_params": params,
            "options": run_options,
            "name": config.get("run_name"),
            "run_id": config.pop("run_id", None),
            "batch_size": 1,
        }
        return _Prepared(manager, model, dumpd(model), [_input_messages(value)], start, options)
    except Exception as exc:
        _guard.absorb(exc)
        return None


def _streaming_handler(handler: Any) -> bool:
    """Whether ``handler`` makes ``invoke`` stream.

    ``astream_events``' and LangGraph's ``stream_mode="messages"`` handlers do. LangChain tells them by the two
    methods of its (runtime-checkable) streaming-handler protocol; so does this.
    """
    return callable(getattr(handler, "tap_output_iter", None)) and callable(getattr(handler, "tap_output_aiter", None))


def _streams(model: Any, options: Mapping[str, Any], handlers: Any) -> bool:
    """Whether LangChain's ``invoke`` of ``model`` with ``options`` streams, and so fires ``on_llm_new_token``.

    As ``BaseChatModel`` decides it: ``disable_streaming`` and ``stream=False`` say no; ``stream=True``, the
    model's ``streaming=True`` or a streaming handler among ``handlers`` say yes.
    """
    disabled = getattr(model, "disable_streaming", False)
    if disabled is True or (disabled == "tool_calling" and options.get("tools")):
        return False
    if "stream" in options and not options["stream"]:
        return False
    streaming = getattr(model, "streaming", None)
    explicit = "streaming" in (getattr(model, "model_fields_set", None) or ())
    if explicit and streaming is False:
        return False
    if options.get("stream") or (explicit and streaming is True):
        return True
    return any(_streaming_handler(h) for h in handlers or ())


class _Fired:
    """The LangChain run of one call answered from the recording, started: what its callbacks are given."""

    __slots__ = ("chunks", "messages", "prepared", "run")

    def __init__(self, run: Any, prepared: _Prepared) -> None:
        self.run = run
        self.prepared = prepared
        self.chunks: list[Any] = []
        self.messages: list[Any] = []

    def item(self, item: Any) -> Any:
        """The ``ChatGenerationChunk`` of one item of a stream, kept for the end.

        None for a whole message (a model that cannot stream answers ``stream`` with ``invoke``, which fires no
        token) or anything else.
        """
        from langchain_core.messages import BaseMessage, BaseMessageChunk
        from langchain_core.outputs import ChatGenerationChunk

        try:
            if isinstance(item, BaseMessageChunk):
                generation = ChatGenerationChunk(message=item)
                if not _closing(item):
                    self.chunks.append(generation)
                return generation
            if isinstance(item, BaseMessage):
                self.messages.append(item)
        except Exception as exc:
            _guard.absorb(exc)
        return None

    def tokens(self, message: Any, chunks: list[Any] | None) -> list[Any]:
        """The ``ChatGenerationChunk`` of each chunk an ``invoke`` streamed, when the call streams now.

        The chunks were recorded without LangChain's run id: each gets the message's id when that is one (LangChain
        gives the chunks and the message its run's id), else this run's.
        """
        if not chunks or not _streams(self.prepared.model, self.prepared.options, getattr(self.run, "handlers", ())):
            return []
        from langchain_core.outputs import ChatGenerationChunk

        generations = []
        try:
            given = getattr(message, "id", None)
            fallback = given if isinstance(given, str) and given.startswith(_LC_RUN) else f"{_LC_RUN}-{self.run.run_id}"
            for chunk in chunks:
                generations.append(
                    ChatGenerationChunk(
                        message=chunk if chunk.id is not None else chunk.model_copy(update={"id": fallback})
                    )
                )
        except Exception as exc:
            _guard.absorb(exc)
            return []
        return generations

    def result(self) -> Any:
        """The ``LLMResult`` of a stream at its end: its chunks merged (or its whole message); None without either."""
        from langchain_core.outputs import ChatGeneration, LLMResult
        from langchain_core.outputs.chat_generation import merge_chat_generation_chunks

        try:
            merged = merge_chat_generation_chunks(self.chunks) if self.chunks else None
            if merged is not None:
                return LLMResult(generations=[[merged]])
            if self.messages:
                return LLMResult(generations=[[ChatGeneration(message=self.messages[-1])]])
        except Exception as exc:
            _guard.absorb(exc)
        return None

    def failed(self) -> Any:
        """The ``LLMResult`` given with an error: what was streamed before it."""
        from langchain_core.outputs import LLMResult
        from langchain_core.outputs.chat_generation import merge_chat_generation_chunks

        merged = None
        with contextlib.suppress(Exception):
            merged = merge_chat_generation_chunks(self.chunks) if self.chunks else None
        return LLMResult(generations=[[merged], []] if merged is not None else [[]])


def _closing(chunk: Any) -> bool:
    """Whether ``chunk`` is the empty closing chunk LangChain's ``stream`` adds after the model's own.

    It is yielded and fired as a token, but not merged into the run's result. LangChain makes it with its content,
    ``chunk_position="last"`` and id only; every chunk of the model's has its ``response_metadata`` set.
    """
    fields = getattr(chunk, "model_fields_set", None) or ()
    return getattr(chunk, "chunk_position", None) == "last" and not chunk.content and "response_metadata" not in fields


def _answer_result(message: Any) -> Any:
    """The ``LLMResult`` of an ``invoke`` that answered ``message``."""
    from langchain_core.outputs import ChatGeneration, LLMResult

    return LLMResult(generations=[[ChatGeneration(message=message)]])


def _no_chunks() -> BaseException:
    return ValueError("No generation chunks were returned")  # LangChain's own error for a stream without chunks


def _from_recording(exc: BaseException) -> bool:
    """Whether an error a stub raised is the recorded one (not the replay refusing the call: no run to tell of)."""
    return not isinstance(exc, ChronicleError)


def _is_message(value: Any) -> bool:
    from langchain_core.messages import BaseMessage

    return isinstance(value, BaseMessage)


# The callbacks are fired outside the integration's guard: a handler with ``raise_error=True`` raises into the
# caller, as it would from LangChain's own call. What prepares them is guarded: a failure there fires nothing.


def _start(call: _ModelCall, stream: bool) -> _Fired | None:
    prepared = _prepare(call, stream, asynchronous=False)
    if prepared is None:
        return None
    (run,) = prepared.manager.on_chat_model_start(prepared.serialized, prepared.messages, **prepared.start)
    return _Fired(run, prepared)


async def _astart(call: _ModelCall, stream: bool) -> _Fired | None:
    prepared = _prepare(call, stream, asynchronous=True)
    if prepared is None:
        return None
    (run,) = await prepared.manager.on_chat_model_start(prepared.serialized, prepared.messages, **prepared.start)
    return _Fired(run, prepared)


def _answer(boundary: Callable[..., Any], recorded: dict[str, Any], call: _ModelCall) -> Any:
    """``invoke`` through its boundary.

    LangChain's own answer when the call ran; else the recorded one, with the callbacks the call fires (start, a
    token per chunk if it streams, end; or start and error).
    """
    try:
        value = boundary(**recorded, call=call)
    except BaseException as exc:
        if not call.ran and _from_recording(exc):
            fired = _start(call, stream=False)
            if fired is not None:
                fired.run.on_llm_error(exc, response=fired.failed())
        raise
    if call.ran:
        return call.result
    message, chunks = _without_chunks(value)
    if not _is_message(message):
        return message
    fired = _start(call, stream=False)
    if fired is not None:
        for generation in fired.tokens(message, chunks):
            fired.run.on_llm_new_token(generation.message.content, chunk=generation)
        fired.run.on_llm_end(_answer_result(message))
    return message


async def _aanswer(pending: Any, call: _ModelCall) -> Any:
    """``ainvoke`` through its boundary (:func:`_answer`)."""
    try:
        value = await pending
    except BaseException as exc:
        if not call.ran and _from_recording(exc):
            fired = await _astart(call, stream=False)
            if fired is not None:
                await fired.run.on_llm_error(exc, response=fired.failed())
        raise
    if call.ran:
        return call.result
    message, chunks = _without_chunks(value)
    if not _is_message(message):
        return message
    fired = await _astart(call, stream=False)
    if fired is not None:
        for generation in fired.tokens(message, chunks):
            await fired.run.on_llm_new_token(generation.message.content, chunk=generation)
        await fired.run.on_llm_end(_answer_result(message))
    return message


def _observed(stream: Any, call: _ModelCall) -> Iterator[Any]:
    """A ``stream`` through its boundary, during a replay.

    When the recording answers it, the callbacks LangChain's ``stream`` fires: start, a token before each chunk is
    yielded, end (or error, also when the consumer stops early).
    """
    fired: _Fired | None = None
    decided = False
    try:
        for item in stream:
            if not decided:
                decided = True
                fired = None if call.ran else _start(call, stream=True)
            if fired is not None:
                generation = fired.item(item)
                if generation is not None:
                    fired.run.on_llm_new_token(item.content, chunk=generation)
            yield item
    except BaseException as exc:
        if not decided and not call.ran and _from_recording(exc):
            decided = True
            fired = _start(call, stream=True)
        if fired is not None:
            fired.run.on_llm_error(exc, response=fired.failed())
        raise
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
    if not decided and not call.ran:
        fired = _start(call, stream=True)
    if fired is not None:
        result = fired.result()
        if result is None:
            fired.run.on_llm_error(_no_chunks(), response=fired.failed())
        else:
            fired.run.on_llm_end(result)


async def _aobserved(stream: Any, call: _ModelCall) -> AsyncIterator[Any]:
    """An ``astream`` through its boundary (:func:`_observed`)."""
    fired: _Fired | None = None
    decided = False
    try:
        async for item in stream:
            if not decided:
                decided = True
                fired = None if call.ran else await _astart(call, stream=True)
            if fired is not None:
                generation = fired.item(item)
                if generation is not None:
                    await fired.run.on_llm_new_token(item.content, chunk=generation)
            yield item
    except BaseException as exc:
        if not decided and not call.ran and _from_recording(exc):
            decided = True
            fired = await _astart(call, stream=True)
        if fired is not None:
            await fired.run.on_llm_error(exc, response=fired.failed())
        raise
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()
    if not decided and not call.ran:
        fired = await _astart(call, stream=True)
    if fired is not None:
        result = fired.result()
        if result is None:
            await fired.run.on_llm_error(_no_chunks(), response=fired.failed())
        else:
            await fired.run.on_llm_end(result)


# ------------------------------------------------------------------------------------ the seams


def _model_seam(method: str) -> Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]:
    def seam(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if hooks.PASS_THROUGH[0] or instance is None or _IN_STREAM.get() is instance:
            return wrapped(*args, **kwargs)
        boundary, recorded = None, None
        try:
            prepared = _model_call(instance, args, kwargs)
            if prepared is not None:
                boundary, recorded = _model_boundary(method, prepared[0]), prepared[1]
        except Exception as exc:
            _guard.absorb(exc)
        if boundary is None or recorded is None:
            return wrapped(*args, **kwargs)
        call = _ModelCall(wrapped, instance, args, kwargs)
        if method == "invoke":
            return _answer(boundary, recorded, call)
        if method == "ainvoke":
            return _aanswer(boundary(**recorded, call=call), call)
        if hooks.current_replay() is None:  # nothing answers for the model: LangChain's stream fires its callbacks
            return boundary(**recorded, call=call)
        if method == "stream":
            return _observed(boundary(**recorded, call=call), call)
        return _aobserved(boundary(**recorded, call=call), call)

    return seam


def _tool_seam(asynchronous: bool) -> Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]:
    def seam(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if hooks.PASS_THROUGH[0] or instance is None:
            return wrapped(*args, **kwargs)
        boundary, recorded, name = None, None, ""
        try:
            recorded = _tool_call(instance, args, kwargs)
            name = str(getattr(instance, "name", "") or type(instance).__name__)
            boundary = _tool_boundary(asynchronous)
        except Exception as exc:
            _guard.absorb(exc)
        if boundary is None or recorded is None:
            return wrapped(*args, **kwargs)
        return boundary(**recorded, call=_ToolCall(wrapped, name, args, kwargs))

    return seam


_SEAMS: Final = (
    (_CHAT_MODULE, "BaseChatModel", "invoke", _model_seam("invoke")),
    (_CHAT_MODULE, "BaseChatModel", "ainvoke", _model_seam("ainvoke")),
    (_CHAT_MODULE, "BaseChatModel", "stream", _model_seam("stream")),
    (_CHAT_MODULE, "BaseChatModel", "astream", _model_seam("astream")),
    (_TOOL_MODULE, "BaseTool", "run", _tool_seam(False)),
    (_TOOL_MODULE, "BaseTool", "arun", _tool_seam(True)),
)

_patched: dict[tuple[type, str], tuple[Any, Any]] = {}
"""(class, method) -> (the original, the wrapper put in its place)."""


def _owner(module: str, cls: str) -> type:
    import importlib

    owner = getattr(importlib.import_module(module), cls)
    if not isinstance(owner, type):
        raise TypeError(f"{module}.{cls} is not a class")
    return owner


def _register_types() -> None:
    """Teach the codec LangGraph's ``Send`` (a plain class, not a dataclass), which a tool's ``Command`` may hold."""
    try:
        from langgraph.types import Send
    except ImportError:  # LangChain without LangGraph
        return

    def decode(data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("node"), str):
            raise TypeError(f"not a recorded Send: {data!r}"[:200])
        return Send(data["node"], data.get("arg"))

    register_type(Send, encode=lambda send: {"node": send.node, "arg": send.arg}, decode=decode)


def instrument() -> list[str]:
    """Record every LangChain chat model call as an ``llm`` boundary and every tool run as a ``tool`` boundary.

    Patches ``BaseChatModel`` (``invoke``, ``ainvoke``, ``stream``, ``astream``) and ``BaseTool`` (``run``,
    ``arun``), so every model and tool, created before or after, is covered. Calling it again is a no-op.

    Returns:
        The boundary names instrumented: ``langchain.chat_model.invoke``, ``langchain.chat_model.stream`` and
        ``langchain.tool.*`` (one name per tool).

    Raises:
        ConfigError: ``langchain-core`` is not installed (``pip install 'chronicle-otel[langchain]'``).
    """
    require("langchain_core", "langchain")
    hooks.register_packages(*PACKAGES)
    _register_types()
    with _lock:
        _register_capture()
        for module, cls, method, seam in _SEAMS:
            owner = _owner(module, cls)
            current = vars(owner).get(method)
            if current is None:
                continue  # a langchain-core without this method
            known = _patched.get((owner, method))
            if known is not None and known[1] is current:
                continue
            wrapper = wrapt.FunctionWrapper(current, seam)
            setattr(owner, method, wrapper)
            _patched[(owner, method)] = (current, wrapper)
    return [CHAT_MODEL_INVOKE, CHAT_MODEL_STREAM, f"{TOOL}.*"]


def uninstrument() -> int:
    """Put LangChain's original methods back; returns how many were instrumented."""
    undone = 0
    with _lock:
        for (owner, method), (original, wrapper) in list(_patched.items()):
            if vars(owner).get(method) is wrapper:
                setattr(owner, method, original)
                undone += 1
            del _patched[(owner, method)]
    return undone
