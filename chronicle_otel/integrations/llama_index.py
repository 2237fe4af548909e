"""LlamaIndex: every LLM call and function tool, recorded and replayed at LlamaIndex's own layer.

Usage::

    import chronicle_otel as chronicle
    from chronicle_otel.integrations import llama_index as chronicle_llama_index

    chronicle.configure()
    chronicle_llama_index.instrument()     # every LlamaIndex LLM class, defined before or after, and FunctionTool
    ...
    chronicle_llama_index.uninstrument()   # the original methods back

**LLM calls.** Each call of an LLM's ``chat``, ``stream_chat``, ``complete`` and ``stream_complete`` (and their
``a…`` async twins) is one ``llm`` boundary: ``llama_index.llm.chat``, ``llama_index.llm.stream_chat``,
``llama_index.llm.complete``, ``llama_index.llm.stream_complete`` (sync and async share a name, as the SDK
integrations' do). Concrete LLM classes (``llama_index.llms.openai.OpenAI``…) override these methods, so every class
that defines one is instrumented: those imported when :func:`instrument` runs, and those defined afterwards. The
function-calling helpers (``chat_with_tools``, ``stream_chat_with_tools``, their async twins, ``predict_and_call``,
``structured_predict``…) and agents call these methods underneath: each model request is recorded once, at this
level, whichever helper made it. An LLM method called while another one runs (``CustomLLM.chat`` calls
``complete``, a ``StructuredLLM`` calls its inner LLM) is part of the outer call and not recorded again.

* the input is the messages (or prompt) and the keyword arguments passed (``tools``, ``tool_choice``…);
* a plain call records the typed ``ChatResponse`` / ``CompletionResponse``: the ``ChatMessage`` with its blocks and
  ``additional_kwargs`` (tool calls), ``raw`` (the provider SDK's object, e.g. the openai ``ChatCompletion``),
  ``logprobs``, ``delta``;
* a stream records each ``ChatResponse`` / ``CompletionResponse`` as the consumer reads it (LlamaIndex edits
  earlier items in place while streaming; the recording keeps each as it was when read), with how the stream ended;
  the provider request made while it is read is a child of the LLM call's span;
* a replay answers from the recording with the same types: a generator (async generator) of the recorded items for
  a stream. ``kind:llm`` stubs answer here, and the provider SDK call under it (``chronicle_otel.integrations.openai``
  switched on too) is never made.

**Tools.** ``FunctionTool.call`` / ``acall`` (so ``tool(...)``, agents and ``predict_and_call``) is a ``tool``
boundary named after the tool: ``llama_index.tool.place_order``. The input is the arguments passed, the output the
typed ``ToolOutput``. A workflow ``Context`` handed to a tool is recorded as a marker, not its state.

The spans carry the GenAI attributes: provider (from the LLM's package: ``openai`` for
``llama_index.llms.openai``), request model and temperature, response model and id, finish reasons and token usage
(from the ``raw`` objects).
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import inspect
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Final

from .. import semconv
from .._internal import hooks
from .._internal.errors import handle_internal_errors
from ..codec import register_type
from ..config import get_config
from ..record.adapters import Arguments, AsyncReplayedStream, ReplayedStream, StreamAdapter, StreamReplay
from ..record.extension import (
    BoundaryKind,
    Instrumented,
    Wrapper,
    attribute_scalar,
    field_of,
    response_attributes,
    wrap,
)
from ..record.extension import instrument as _instrument_method
from ..record.extension import uninstrument as _uninstrument_method
from ._common import chat_chunk_attributes, require

__all__ = ["LLM_METHODS", "TOOL_METHODS", "TOOL_PREFIX", "instrument", "uninstrument"]

LLM_METHODS: Final[dict[str, str]] = {
    "chat": "llama_index.llm.chat",
    "achat": "llama_index.llm.chat",
    "stream_chat": "llama_index.llm.stream_chat",
    "astream_chat": "llama_index.llm.stream_chat",
    "complete": "llama_index.llm.complete",
    "acomplete": "llama_index.llm.complete",
    "stream_complete": "llama_index.llm.stream_complete",
    "astream_complete": "llama_index.llm.stream_complete",
}
"""LLM method -> the boundary name of its calls."""

TOOL_METHODS: Final[tuple[str, ...]] = ("call", "acall")
"""The ``FunctionTool`` methods recorded as ``tool`` boundaries."""

TOOL_PREFIX: Final = "llama_index.tool."
"""Tool boundaries are named ``llama_index.tool.<tool name>``."""

_LLM_MODULE = "llama_index.core.base.llms.base"
_TOOL_MODULE = "llama_index.core.tools.function_tool"

# GenAI provider names (OpenTelemetry's) of LlamaIndex's LLM packages whose name differs; others use the package name.
_PROVIDERS: Final[dict[str, str]] = {
    "azure_openai": "azure.ai.openai",
    "bedrock": "aws.bedrock",
    "bedrock_converse": "aws.bedrock",
    "gemini": "gcp.gemini",
    "google_genai": "gcp.gen_ai",
    "vertex": "gcp.vertex_ai",
    "mistralai": "mistral_ai",
    "openai_like": "openai",
}

_INSIDE: contextvars.ContextVar[bool] = contextvars.ContextVar("chronicle_llama_index_llm_call", default=False)
"""True while an instrumented LLM method runs (and while its stream is read): a nested LLM call is part of it."""

_ARGUMENTS: Final = Arguments(passed_only=True)
_MISSING: Final = object()
_lock = threading.RLock()  # the subclass hook may run while instrument() holds it
_registered: list[bool] = [False]


class _Seam(Wrapper):
    """The wrapper an LLM method of a LlamaIndex class is replaced with; ``__wrapped__`` is the original.

    Pickled and copied as the method it replaces (a boundary's wrapper: by reference).
    """


# ------------------------------------------------------------------------------------ switching on and off


def instrument() -> list[str]:
    """Record every LlamaIndex LLM call and ``FunctionTool`` call as a boundary.

    Instruments the LLM classes already defined and, through pydantic's ``__pydantic_init_subclass__`` hook on
    LlamaIndex's ``BaseLLM``, those defined later (an LLM package imported afterwards). Calling it again is a no-op.

    Returns:
        The boundary names instrumented: the ``llama_index.llm.*`` names, and ``llama_index.tool`` (each tool's calls
        are recorded under ``llama_index.tool.<name>``).

    Raises:
        ConfigError: ``llama-index-core`` is not installed (``pip install 'chronicle-otel[llama-index]'``).
    """
    require("llama_index.core", "llama-index")
    base = importlib.import_module(_LLM_MODULE).BaseLLM
    tools = importlib.import_module(_TOOL_MODULE).FunctionTool
    hooks.register_packages("llama_index.", "openai.")
    with _lock:
        _register_types()
        for cls in _classes(base):
            _install_class(cls)
        _install_hook(base)
        for method in TOOL_METHODS:
            _instrument_method(
                tools,
                method,
                name=TOOL_PREFIX.rstrip("."),
                kind="tool",
                arguments=_ARGUMENTS,
                name_of=_tool_name,
            )
    return [*dict.fromkeys(LLM_METHODS.values()), TOOL_PREFIX.rstrip(".")]


def uninstrument() -> int:
    """Put LlamaIndex's original methods back; returns how many were instrumented."""
    try:
        base = importlib.import_module(_LLM_MODULE).BaseLLM
        tools = importlib.import_module(_TOOL_MODULE).FunctionTool
    except ImportError:
        return 0
    undone = 0
    with _lock:
        undone += _remove_hook(base)
        for cls in _classes(base):
            for method in LLM_METHODS:
                current = vars(cls).get(method)
                if isinstance(current, _Seam):
                    setattr(cls, method, current.__wrapped__)
                    undone += 1
        for method in TOOL_METHODS:
            if _uninstrument_method(tools, method):
                undone += 1
    return undone


def _classes(base: type) -> list[type]:
    """``base`` and every subclass of it defined so far, each once."""
    found: dict[type, None] = {}
    stack = [base]
    while stack:
        cls = stack.pop()
        if cls not in found:
            found[cls] = None
            stack.extend(cls.__subclasses__())
    return list(found)


def _install_hook(base: type) -> None:
    """Instrument the LLM classes defined from now on too.

    Pydantic calls the parent's ``__pydantic_init_subclass__`` once a model subclass is complete, after LlamaIndex's
    own ``__init_subclass__`` decorated its methods.
    """
    if isinstance(vars(base).get("__pydantic_init_subclass__"), _SubclassHook):
        return
    setattr(base, "__pydantic_init_subclass__", _SubclassHook(base))  # noqa: B010 - a dunder set on purpose


def _remove_hook(base: type) -> int:
    current = vars(base).get("__pydantic_init_subclass__")
    if not isinstance(current, _SubclassHook):
        return 0
    delattr(base, "__pydantic_init_subclass__")
    return 1


class _SubclassHook:
    """``BaseLLM.__pydantic_init_subclass__`` while instrumented: the parent hook, then the new class's seams."""

    def __init__(self, base: type) -> None:
        self.base = base

    def __get__(self, instance: Any, owner: type | None = None) -> Callable[..., None]:
        cls = owner if owner is not None else type(instance)

        def hook(**kwargs: Any) -> None:
            parent: Any = super(self.base, cls)
            parent.__pydantic_init_subclass__(**kwargs)
            with _lock, handle_internal_errors("instrumenting the LlamaIndex LLM class %r", cls.__qualname__):
                _install_class(cls)

        return hook


# ------------------------------------------------------------------------------------ the LLM seam


def _install_class(cls: type) -> None:
    """Replace each LLM method ``cls`` defines itself (an override, not an abstract declaration) by a seam."""
    provider = _provider(cls)
    for method, name in LLM_METHODS.items():
        if isinstance(vars(cls).get(method), Instrumented):
            _uninstrument_method(cls, method)  # instrumented by hand before: the integration's seam wins
        original = vars(cls).get(method)
        if original is None or isinstance(original, _Seam) or not _plain_method(original):
            continue
        asynchronous = inspect.iscoroutinefunction(_unwrapped(original))
        stream = _ASYNC_STREAM if method.startswith("astream") else _STREAM if method.startswith("stream") else None
        boundary = wrap(
            _inner(original, name, asynchronous),
            name=name,
            kind=BoundaryKind.LLM,
            attributes=None,
            enabled=None,
            provider=provider,
            config=None,
            arguments=_ARGUMENTS,
            stream=stream,
        )
        setattr(cls, method, _Seam(original, _seam(boundary)))


def _plain_method(member: Any) -> bool:
    """A function (or a decorator's wrapper of one) that binds as a method; not abstract, static or a class method."""
    if isinstance(member, (staticmethod, classmethod, property)) or not callable(member):
        return False
    return not getattr(member, "__isabstractmethod__", False) and hasattr(member, "__get__")


def _unwrapped(func: Any) -> Any:
    """The function under decorators that set ``__wrapped__`` (LlamaIndex sets it to True on some: stop there)."""
    for _ in range(32):
        inner = getattr(func, "__wrapped__", None)
        if inner is None or not callable(inner):
            break
        func = inner
    return func


def _provider(cls: type) -> str:
    """The GenAI provider name of an LLM class, from its package (``llama_index.llms.openai`` -> ``openai``)."""
    parts = cls.__module__.split(".")
    if len(parts) >= 3 and parts[0] == "llama_index" and parts[1] == "llms":
        return _PROVIDERS.get(parts[2], parts[2])
    return "llama_index"


def _seam(boundary: Any) -> Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]:
    """Calls the boundary, unless another LLM method is running (a nested call is part of that one)."""

    def seam(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if instance is None and args:  # called on the class: ``OpenAI.chat(llm, messages)``
            instance, args = args[0], args[1:]
            wrapped = functools.partial(wrapped, instance)
        if instance is None or _INSIDE.get():
            return wrapped(*args, **kwargs)
        return boundary.__get__(instance, type(instance))(*args, **kwargs)

    return seam


def _inner(original: Any, name: str, asynchronous: bool) -> Callable[..., Any]:
    """The function the boundary wraps.

    It marks the LLM call as running, runs a returned stream in the context of the call (the provider request it
    makes is the call's child), and writes the GenAI attributes.
    """
    if asynchronous:

        async def inner_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            token = _INSIDE.set(True)
            try:
                _annotate_request(name, self)
                result = await original.__get__(self, type(self))(*args, **kwargs)
                if inspect.isasyncgen(result):
                    return _in_context_async(contextvars.copy_context(), result)
                _annotate_response(name, result)
                return result
            finally:
                _INSIDE.reset(token)

        return functools.update_wrapper(inner_async, original)

    def inner(self: Any, *args: Any, **kwargs: Any) -> Any:
        token = _INSIDE.set(True)
        try:
            _annotate_request(name, self)
            result = original.__get__(self, type(self))(*args, **kwargs)
            if inspect.isgenerator(result):
                return _in_context(contextvars.copy_context(), result)
            _annotate_response(name, result)
            return result
        finally:
            _INSIDE.reset(token)

    return functools.update_wrapper(inner, original)


def _in_context(ctx: contextvars.Context, stream: Iterator[Any]) -> Iterator[Any]:
    """``stream``'s items, each produced in ``ctx`` (the context of the call that returned it)."""
    try:
        while True:
            try:
                item = ctx.run(next, stream)
            except StopIteration:
                return
            yield item
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            ctx.run(close)


async def _in_context_async(ctx: contextvars.Context, stream: Any) -> AsyncIterator[Any]:
    """``stream``'s items, each produced with the context variables of ``ctx`` set.

    ``ctx`` is the context of the call that returned the stream; what the stream sets in one step is not kept for
    the next.
    """
    try:
        while True:
            tokens = _enter(ctx)
            try:
                item = await stream.__anext__()
            except StopAsyncIteration:
                return
            finally:
                _leave(tokens)
            yield item
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            tokens = _enter(ctx)
            try:
                await close()
            finally:
                _leave(tokens)


def _enter(ctx: contextvars.Context) -> list[tuple[contextvars.ContextVar[Any], contextvars.Token[Any]]]:
    return [(var, var.set(value)) for var, value in ctx.items() if var.get(_MISSING) is not value]


def _leave(tokens: list[tuple[contextvars.ContextVar[Any], contextvars.Token[Any]]]) -> None:
    for var, token in reversed(tokens):
        var.reset(token)


# ------------------------------------------------------------------------------------ streams


def _is_stream(value: Any) -> bool:
    return inspect.isgenerator(value)


def _is_async_stream(value: Any) -> bool:
    return inspect.isasyncgen(value)


def _stand_in(replayed: StreamReplay) -> Any:
    """A replayed stream is a generator (an async generator) of the recorded items, as LlamaIndex's are."""
    if replayed.is_async:
        return _replayed_async(AsyncReplayedStream(replayed.items, replayed.error, replayed.state))
    return _replayed(ReplayedStream(replayed.items, replayed.error, replayed.state))


def _replayed(source: ReplayedStream) -> Iterator[Any]:
    yield from source


async def _replayed_async(source: AsyncReplayedStream) -> AsyncIterator[Any]:
    async for item in source:
        yield item


def _stream_attributes(items: list[Any]) -> dict[str, Any]:
    """The GenAI response attributes of a stream, from the provider chunks its items carry (``raw``)."""
    raw = [chunk for chunk in (field_of(item, "raw") for item in items) if chunk is not None]
    return chat_chunk_attributes(raw)


_STREAM: Final = StreamAdapter(is_stream=_is_stream, replay=_stand_in, attributes=_stream_attributes)
_ASYNC_STREAM: Final = StreamAdapter(is_stream=_is_async_stream, replay=_stand_in, attributes=_stream_attributes)


# ------------------------------------------------------------------------------------ GenAI attributes


def _own_span(name: str) -> Any:
    """The span of the boundary ``name`` when it is the current one (recording is on), else None."""
    from opentelemetry import trace

    span = trace.get_current_span()
    if getattr(span, "name", None) != name or not span.is_recording():
        return None
    config = get_config()
    return span if config.genai_attributes else None


def _annotate_request(name: str, llm: Any) -> None:
    with handle_internal_errors("recording the request attributes of boundary %r", name):
        span = _own_span(name)
        if span is None:
            return
        redactor = get_config().redact
        for field, key in (
            ("model", semconv.GEN_AI_REQUEST_MODEL),
            ("temperature", semconv.GEN_AI_REQUEST_TEMPERATURE),
            ("max_tokens", semconv.GEN_AI_REQUEST_MAX_TOKENS),
        ):
            value = attribute_scalar(getattr(llm, field, None))
            if value is not None:
                span.set_attribute(key, redactor.redact_text(value) if redactor and isinstance(value, str) else value)


def _annotate_response(name: str, result: Any) -> None:
    with handle_internal_errors("recording the response attributes of boundary %r", name):
        raw = field_of(result, "raw")
        span = _own_span(name) if raw is not None else None
        if span is not None:
            span.set_attributes(response_attributes(raw, get_config().redact))


# ------------------------------------------------------------------------------------ tools and codec types


def _tool_name(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    name = getattr(getattr(instance, "metadata", None), "name", None)
    return TOOL_PREFIX + name if isinstance(name, str) and name else None


def _register_types() -> None:
    """Teach the codec the LlamaIndex values that are no data: a workflow ``Context`` handed to a tool."""
    if _registered[0]:
        return
    _registered[0] = True
    try:
        context = importlib.import_module("workflows").Context
    except (ImportError, AttributeError):
        return
    register_type(context, encode=_context_marker, decode=_no_context, name="llama_index.workflow.Context")


def _context_marker(value: Any) -> str:
    return "workflow context"


def _no_context(value: Any) -> None:
    return None
