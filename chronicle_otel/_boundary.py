"""Boundaries: the calls of agent code that are recorded as OpenTelemetry spans.

Usage::

    import chronicle_otel as chronicle

    @chronicle.boundary(kind="llm", name="plan")
    def plan(request: str, *, model: str = "gpt-4.1-mini", temperature: float = 0.7) -> Order: ...

    @chronicle.boundary(kind="tool")
    async def place_order(order: Order) -> Receipt: ...

    @chronicle.boundary                      # bare form: kind "custom", name "module.qualname"
    def helper(x): ...

    with chronicle.call("legacy.lookup", kind="tool", input={"sku": sku}) as c:
        c.set_output(legacy_lookup(sku))     # code that cannot be decorated

    chronicle.instrument(openai.resources.chat.Completions, "create", kind="llm")  # third-party code

Each call becomes one span, a child of the current span, carrying the attributes of
:mod:`chronicle_otel.semconv`: boundary name and kind, call index, the canonical JSON of the bound
arguments (``self``/``cls`` excluded), of the return value (for generators and async generators: the
list of yielded items) or of the raised exception, their ``sha256:`` hashes, truncation flags, the
codec version and the session variables. An exception is recorded (event, ERROR status,
``chronicle.error``) and re-raised unchanged: same object, same traceback.

Works on functions, methods, classmethods, staticmethods, async functions, generators and async
generators; the wrapper is chosen once, when decorating, and the decorated function keeps its
signature, its type and ``inspect``'s view of it (coroutine function, generator function).

Nothing chronicle does can break the call: a failure to bind, encode or hand over a payload is
logged once and the function still returns its own value or raises its own exception.

API:
    :func:`boundary`, :class:`BoundaryKind`, :func:`call`, :func:`instrument`, :func:`uninstrument`.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import itertools
import threading
import traceback
import warnings
import weakref
from collections.abc import AsyncGenerator, Callable, Generator, Mapping
from enum import Enum
from types import TracebackType
from typing import Any, Protocol, TypeVar, overload

import wrapt
from opentelemetry import context as context_api
from opentelemetry import trace as trace_api
from opentelemetry.trace import Status, StatusCode

from . import semconv
from ._internal import errors as _errors
from ._internal import hooks
from ._internal.errors import log_once
from ._session import _SESSION_ATTRS, AttributeValue
from .codec import CODEC_VERSION, encode
from .config import ChronicleConfig, get_config
from .errors import ChronicleWarning, ConfigError
from .redact import _error_secrets, _redact_json_strings, _scrub_text

__all__ = ["BoundaryDecorator", "BoundaryKind", "call", "boundary", "instrument", "uninstrument"]

F = TypeVar("F", bound=Callable[..., Any])


class BoundaryKind(str, Enum):
    """What a boundary is; may be passed as its string value (``kind="llm"``)."""

    LLM = "llm"
    TOOL = "tool"
    RETRIEVAL = "retrieval"
    GUARDRAIL = "guardrail"
    AGENT = "agent"
    MEMORY = "memory"
    CUSTOM = "custom"


def _kind(value: BoundaryKind | str) -> BoundaryKind:
    try:
        return BoundaryKind(value)
    except ValueError:
        raise ConfigError("kind", value, "one of " + ", ".join(repr(k.value) for k in BoundaryKind)) from None


_OPENINFERENCE_KINDS = {
    BoundaryKind.LLM: "LLM",
    BoundaryKind.TOOL: "TOOL",
    BoundaryKind.RETRIEVAL: "RETRIEVER",
    BoundaryKind.GUARDRAIL: "GUARDRAIL",
    BoundaryKind.AGENT: "AGENT",
    BoundaryKind.MEMORY: "CHAIN",
    BoundaryKind.CUSTOM: "CHAIN",
}

# ------------------------------------------------------------------------------------ call-path state

_FRAME_KEY = context_api.create_key("chronicle-boundary-frame")
_SUPPRESS_KEY: str = getattr(context_api, "_SUPPRESS_INSTRUMENTATION_KEY", "suppress_instrumentation")


class _Frame:
    """Per boundary call: counts calls of each boundary name made under it (for call indexes)."""

    __slots__ = ("__weakref__", "counters")

    def __init__(self) -> None:
        self.counters: dict[str, itertools.count[int]] = {}

    def next_index(self, name: str) -> int:
        counter = self.counters.get(name)
        if counter is None:
            counter = self.counters.setdefault(name, itertools.count())
        return next(counter)  # atomic under the GIL: concurrent siblings get distinct indexes


# Top-level boundaries under a non-boundary span (e.g. an HTTP request span) share a frame per trace. The frame lives
# as long as a parent span that used it: no fixed-size table, so no running request ever has its indexes reset.
_frames_by_trace: weakref.WeakValueDictionary[int, _Frame] = weakref.WeakValueDictionary()
_frames_by_span: weakref.WeakKeyDictionary[trace_api.Span, _Frame] = weakref.WeakKeyDictionary()


def _root_frame(parent: trace_api.Span, trace_id: int) -> _Frame:
    frame = _frames_by_span.get(parent)
    if frame is None:
        frame = _frames_by_trace.setdefault(trace_id, _Frame())
        _frames_by_span[parent] = frame
    return frame


# ------------------------------------------------------------------------------------ argument binding


class _Binder:
    """Maps a call's arguments to ``{param: value}``; precomputed per decorated function."""

    __slots__ = ("defaults", "defaults_skip", "fast", "names", "names_skip", "sig", "sig_skip")

    def __init__(self, func: Callable[..., Any]) -> None:
        try:
            sig = inspect.signature(func)
        except (TypeError, ValueError):
            sig = None
        self.sig = sig
        self.sig_skip = None
        self.fast = False
        self.names: tuple[str, ...] = ()
        self.defaults: dict[str, Any] = {}
        self.names_skip: tuple[str, ...] = ()
        self.defaults_skip: dict[str, Any] = {}
        if sig is None:
            return
        params = list(sig.parameters.values())
        if params:
            self.sig_skip = sig.replace(parameters=params[1:])
        kinds = {p.kind for p in params}
        self.fast = not (kinds & {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD})
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        self.names = tuple(p.name for p in params if p.kind in positional)
        self.defaults = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
        if params:
            first = params[0].name
            self.names_skip = tuple(n for n in self.names if n != first)
            self.defaults_skip = {k: v for k, v in self.defaults.items() if k != first}

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any], skip_first: bool) -> dict[str, Any]:
        if self.fast:
            names = self.names_skip if skip_first else self.names
            if len(args) <= len(names):
                bound = dict(self.defaults_skip if skip_first else self.defaults)
                bound.update(zip(names, args))  # noqa: B905 - len(args) <= len(names) checked above
                if kwargs:
                    bound.update(kwargs)
                return bound
        sig = self.sig_skip if skip_first else self.sig
        if sig is not None:
            try:
                ba = sig.bind(*args, **kwargs)
            except TypeError:
                pass
            else:
                ba.apply_defaults()
                return dict(ba.arguments)
        return {"args": list(args), "kwargs": kwargs}


# ------------------------------------------------------------------------------------ GenAI attributes

_GENAI_ARGS = {
    "model": semconv.GEN_AI_REQUEST_MODEL,
    "temperature": semconv.GEN_AI_REQUEST_TEMPERATURE,
    "top_p": semconv.GEN_AI_REQUEST_TOP_P,
    "max_tokens": semconv.GEN_AI_REQUEST_MAX_TOKENS,
    "seed": semconv.GEN_AI_REQUEST_SEED,
}


def _field(obj: Any, name: str) -> Any:
    if type(obj) is dict or isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _genai_result_attributes(result: Any) -> dict[str, AttributeValue]:
    out: dict[str, AttributeValue] = {}
    model = _field(result, "model")
    if isinstance(model, str):
        out[semconv.GEN_AI_RESPONSE_MODEL] = model
    rid = _field(result, "id")
    if isinstance(rid, str):
        out[semconv.GEN_AI_RESPONSE_ID] = rid
    usage = _field(result, "usage")
    if usage is not None:
        for key, names in (
            (semconv.GEN_AI_USAGE_INPUT_TOKENS, ("input_tokens", "prompt_tokens")),
            (semconv.GEN_AI_USAGE_OUTPUT_TOKENS, ("output_tokens", "completion_tokens")),
        ):
            for n in names:
                value = _field(usage, n)
                if isinstance(value, int) and not isinstance(value, bool):
                    out[key] = value
                    break
    return out


def _attribute_scalar(value: Any) -> AttributeValue | None:
    if isinstance(value, (str, bool, float)):
        return value
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return value
    return None


# ------------------------------------------------------------------------------------ the spec and a call


class _Spec:
    """Everything about a boundary that is known when decorating."""

    __slots__ = (
        "binder",
        "config",
        "enabled",
        "genai",
        "genai_args",
        "kind",
        "name",
        "raw",
        "runner",
        "shape",
        "static",
    )

    def __init__(
        self,
        func: Callable[..., Any] | None,
        name: str,
        kind: BoundaryKind,
        attributes: Mapping[str, AttributeValue] | None,
        config: ChronicleConfig | None,
        enabled: Callable[[], bool] | None,
        provider: str | None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.raw = func
        self.shape = _shape(func)
        self.runner: Any = _RUNNERS[self.shape]
        self.binder = _Binder(func) if func is not None else None
        self.config = config
        self.enabled = enabled
        static: dict[str, AttributeValue] = dict(attributes or {})
        static[semconv.BOUNDARY_NAME] = name
        static[semconv.BOUNDARY_KIND] = kind.value
        static[semconv.CODEC] = CODEC_VERSION
        if func is not None:
            static[semconv.CODE_FUNCTION] = f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', '?')}"
        self.genai = kind is BoundaryKind.LLM
        if self.genai:
            static[semconv.GEN_AI_OPERATION_NAME] = "chat"
            if provider:
                static[semconv.GEN_AI_PROVIDER_NAME] = provider
        self.static = static
        params = set(self.binder.sig.parameters) if self.binder is not None and self.binder.sig is not None else set()
        self.genai_args = {p: k for p, k in _GENAI_ARGS.items() if p in params} if self.genai else {}


def _shape(func: Any) -> str:
    """``sync``, ``async``, ``gen`` or ``agen``: how the function returns, decided once."""
    if func is None:
        return "sync"
    if inspect.isasyncgenfunction(func):
        return "agen"
    if inspect.iscoroutinefunction(func):
        return "async"
    if inspect.isgeneratorfunction(func):
        return "gen"
    return "sync"


def _payload(
    attrs: dict[str, AttributeValue],
    pending: list[tuple[str, bytes]],
    keys: tuple[str, str, str],
    value: Any,
    config: ChronicleConfig,
    secrets: list[str] | None = None,
) -> None:
    """Encode ``value`` (redacted; the values redacted by key name go to ``secrets``) and put it in ``attrs``."""
    _put(attrs, pending, keys, encode(value, redact=config.redact, secrets=secrets), config)


def _put(
    attrs: dict[str, AttributeValue],
    pending: list[tuple[str, bytes]],
    keys: tuple[str, str, str],
    data: bytes,
    config: ChronicleConfig,
) -> None:
    """Put encoded ``data`` (capped), its hash and its truncation flag into ``attrs``."""
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    cap = config.max_attribute_length
    if len(data) <= cap:
        text = data.decode()
    else:
        text = data[: cap * 4].decode("utf-8", "ignore") if len(data) > cap * 4 else data.decode()
        if len(text) > cap:
            text = text[:cap]
            attrs[keys[2]] = True
            pending.append((digest, data))
    attrs[keys[0]] = text
    attrs[keys[1]] = digest


_INPUT_KEYS = (semconv.INPUT, semconv.INPUT_HASH, semconv.INPUT_TRUNCATED)
_OUTPUT_KEYS = (semconv.OUTPUT, semconv.OUTPUT_HASH, semconv.OUTPUT_TRUNCATED)
_ERROR_KEYS = (semconv.ERROR, semconv.ERROR_HASH, semconv.ERROR_TRUNCATED)


def _exc_message(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return f"<{type(exc).__qualname__}: str() failed>"


def _error_envelope(exc: BaseException) -> dict[str, Any]:
    cls = type(exc)
    return {"type": f"{cls.__module__}.{cls.__qualname__}", "message": _exc_message(exc), "args": list(exc.args)}


def _error_payload(exc: BaseException, config: ChronicleConfig, secrets: list[str]) -> bytes:
    """The encoded error envelope without secrets: every string is scrubbed as the exception event's text is
    (the values redacted from the input, then the value formats), so replay can compare a new error's message."""
    redactor = config.redact
    if redactor is None:
        return encode(_error_envelope(exc))
    data = encode(_error_envelope(exc), redact=redactor.redact_key)
    return _redact_json_strings(data, lambda text: _scrub_text(redactor, text, secrets))


# the OpenTelemetry exception event, as the SDK's Span.record_exception writes it
_EXCEPTION_EVENT = "exception"
_EXCEPTION_TYPE = "exception.type"
_EXCEPTION_MESSAGE = "exception.message"
_EXCEPTION_STACKTRACE = "exception.stacktrace"
_EXCEPTION_ESCAPED = "exception.escaped"


def _record_exception(span: trace_api.Span, exc: BaseException, scrub: Callable[[str], str]) -> None:
    """``span.record_exception(exc, escaped=True)``, with the message and stack trace passed through ``scrub``."""
    cls = type(exc)
    module = cls.__module__
    try:
        stacktrace = "".join(traceback.format_exception(cls, exc, exc.__traceback__))
    except Exception:
        stacktrace = ""
    span.add_event(
        _EXCEPTION_EVENT,
        {
            _EXCEPTION_TYPE: f"{module}.{cls.__qualname__}" if module and module != "builtins" else cls.__qualname__,
            _EXCEPTION_MESSAGE: scrub(_exc_message(exc)),
            _EXCEPTION_STACKTRACE: scrub(stacktrace),
            _EXCEPTION_ESCAPED: "True",
        },
    )


class _Call:
    """One boundary call in progress: its span, its context token, its pending attributes and payloads.

    Payloads are encoded when they exist (the input before the call runs, so later mutation of the
    arguments cannot change the record) and all of them are set on the span in one call at the end.
    """

    __slots__ = ("attrs", "config", "ctx", "done", "pending", "recording", "secrets", "span", "spec", "token")

    def __init__(self, spec: _Spec, config: ChronicleConfig, span: trace_api.Span, ctx: context_api.Context) -> None:
        self.spec = spec
        self.config = config
        self.span = span
        self.ctx = ctx
        self.token: object = None
        self.recording = span.is_recording()
        self.attrs: dict[str, AttributeValue] = {}
        self.pending: list[tuple[str, bytes]] = []
        self.secrets: list[str] = []  # values redacted by key from the input: scrubbed from an error's text
        self.done = False

    def activate(self) -> None:
        self.token = context_api.attach(self.ctx)

    def deactivate(self) -> None:
        token, self.token = self.token, None
        if token is not None:
            try:
                context_api.detach(token)  # type: ignore[arg-type]
            except Exception as exc:  # a token from another context (e.g. a generator resumed elsewhere)
                log_once("restoring the OpenTelemetry context", exc)

    def _end(self) -> None:
        self.done = True
        span = self.span
        if self.config.openinference:
            self._openinference()
        if self.attrs:
            span.set_attributes(self.attrs)
        buffer = self.config.payload_buffer
        if self.pending and buffer is not None:
            buffer.put(span.get_span_context().span_id, self.pending)
        span.end()

    def _openinference(self) -> None:
        attrs = self.attrs
        if semconv.INPUT in attrs:
            attrs[semconv.OPENINFERENCE_INPUT_VALUE] = attrs[semconv.INPUT]
            attrs[semconv.OPENINFERENCE_INPUT_MIME_TYPE] = "application/json"
        output = attrs.get(semconv.ERROR, attrs.get(semconv.OUTPUT))
        if output is not None:
            attrs[semconv.OPENINFERENCE_OUTPUT_VALUE] = output
            attrs[semconv.OPENINFERENCE_OUTPUT_MIME_TYPE] = "application/json"

    def succeed(self, result: Any) -> None:
        try:
            if self.recording:
                _payload(self.attrs, self.pending, _OUTPUT_KEYS, result, self.config)
                if self.spec.genai and self.config.genai_attributes:
                    self.attrs.update(_genai_result_attributes(result))
            self._end()
        except Exception as exc:
            self._fallback("recording the result of", exc)

    def fail(self, exc: BaseException, partial: list[Any] | None = None) -> None:
        try:
            if self.recording:
                attrs = self.attrs
                config = self.config
                redactor = config.redact
                secrets = _error_secrets(exc, self.secrets) if redactor is not None else []

                def scrub(text: str) -> str:
                    return text if redactor is None else _scrub_text(redactor, text, secrets)

                _put(attrs, self.pending, _ERROR_KEYS, _error_payload(exc, config, secrets), config)
                if partial is not None:
                    _payload(attrs, self.pending, _OUTPUT_KEYS, partial, config)
                    attrs[semconv.STREAM_STATE] = "error"
                    attrs[semconv.STREAM_ITEMS] = len(partial)
                _record_exception(self.span, exc, scrub)
                self.span.set_status(Status(StatusCode.ERROR, scrub(f"{type(exc).__name__}: {_exc_message(exc)}")))
            self._end()
        except Exception as err:
            self._fallback("recording the exception of", err)

    def finish_stream(self, items: list[Any], state: str) -> None:
        if self.done:
            return
        try:
            if self.recording:
                _payload(self.attrs, self.pending, _OUTPUT_KEYS, items, self.config)
                self.attrs[semconv.STREAM_STATE] = state
                self.attrs[semconv.STREAM_ITEMS] = len(items)
            self._end()
        except Exception as exc:
            self._fallback("recording the stream of", exc)

    def _fallback(self, what: str, exc: Exception) -> None:
        if _errors.RAISE_INTERNAL_ERRORS:
            raise exc
        log_once(f"{what} boundary {self.spec.name!r}", exc)
        with contextlib.suppress(Exception):
            if self.span.is_recording():
                self.span.end()


def _begin(
    spec: _Spec,
    wrapped: Any,
    instance: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    extra: Any = None,
    stream: bool = False,
) -> _Call | None:
    """Start the span of one call; None when recording is off, suppressed or failed."""
    config = spec.config or get_config()
    if not config.enabled:
        return None
    try:
        if spec.enabled is not None and not spec.enabled():
            return None
        parent_ctx = context_api.get_current()
        if parent_ctx.get(_SUPPRESS_KEY):
            return None
        frame = parent_ctx.get(_FRAME_KEY)
        if frame is None:
            parent_span = trace_api.get_current_span(parent_ctx)
            parent_span_ctx = parent_span.get_span_context()
            index = (
                _root_frame(parent_span, parent_span_ctx.trace_id).next_index(spec.name)
                if parent_span_ctx.is_valid
                else 0
            )
        else:
            index = frame.next_index(spec.name)  # type: ignore[attr-defined]
        attrs: dict[str, AttributeValue] = dict(spec.static)
        attrs[semconv.CALL_INDEX] = index
        if stream:
            attrs[semconv.STREAM] = True
        if config.openinference:
            attrs[semconv.OPENINFERENCE_SPAN_KIND] = _OPENINFERENCE_KINDS[spec.kind]
        if config.session:
            attrs.update(config.session)
        ctx_session = _SESSION_ATTRS.get()
        if ctx_session:
            attrs.update(ctx_session)
        links = None
        if extra is not None:  # replay: its own attributes and a link to the original span
            attrs.update(extra.attributes)
            links = extra.links
        span = config.tracer.start_span(spec.name, context=parent_ctx, attributes=attrs, links=links)
        ctx = context_api.set_value(_FRAME_KEY, _Frame(), trace_api.set_span_in_context(span, parent_ctx))
        call = _Call(spec, config, span, ctx)
        if call.recording and spec.binder is not None:
            bound = spec.binder.bind(args, kwargs, wrapped is not spec.raw and instance is not None)
            _payload(call.attrs, call.pending, _INPUT_KEYS, bound, config, call.secrets)
            if spec.genai_args and config.genai_attributes:
                for param, key in spec.genai_args.items():
                    value = _attribute_scalar(bound.get(param))
                    if value is not None:
                        call.attrs[key] = value
        return call
    except Exception as exc:
        if _errors.RAISE_INTERNAL_ERRORS:
            raise
        log_once(f"starting boundary {spec.name!r}", exc)
        return None


# ------------------------------------------------------------------------------------ wrappers


def _run_sync(
    spec: _Spec, wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any], extra: Any
) -> Any:
    call = _begin(spec, wrapped, instance, args, kwargs, extra)
    if call is None:
        return wrapped(*args, **kwargs)
    call.activate()
    try:
        result = wrapped(*args, **kwargs)
    except BaseException as exc:
        call.deactivate()
        call.fail(exc)
        raise
    call.deactivate()
    call.succeed(result)
    return result


async def _run_async(
    spec: _Spec, wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any], extra: Any
) -> Any:
    call = _begin(spec, wrapped, instance, args, kwargs, extra)
    if call is None:
        return await wrapped(*args, **kwargs)
    call.activate()
    try:
        result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        call.deactivate()
        call.fail(exc)
        raise
    call.deactivate()
    call.succeed(result)
    return result


def _stream_runner(drive: Callable[[Any, _Call], Any]) -> Callable[..., Any]:
    """Runner of a generator or async-generator function: the span covers the whole iteration."""

    def run(
        spec: _Spec,
        wrapped: Callable[..., Any],
        instance: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        extra: Any,
    ) -> Any:
        call = _begin(spec, wrapped, instance, args, kwargs, extra, stream=True)
        if call is None:
            return wrapped(*args, **kwargs)
        call.activate()
        try:
            stream = wrapped(*args, **kwargs)
        except BaseException as exc:
            call.deactivate()
            call.fail(exc, [])
            raise
        call.deactivate()
        driver = drive(stream, call)
        # A stream created but never iterated still ends its span, as "abandoned", when it is collected.
        weakref.finalize(driver, call.finish_stream, [], "abandoned")
        return driver

    return run


def _wrapper(spec: _Spec) -> Callable[..., Any]:
    runner = spec.runner

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        replay = hooks.REPLAY.get()
        if replay is not None:
            return replay.call(spec, wrapped, instance, args, kwargs)
        return runner(spec, wrapped, instance, args, kwargs, None)

    return wrapper


def _drive(gen: Generator[Any, Any, Any], call: _Call) -> Generator[Any, Any, Any]:
    """Re-yield ``gen`` with the boundary span current while it runs, collecting the items."""
    items: list[Any] = []
    send: Any = None
    throw: BaseException | None = None
    while True:
        call.activate()
        try:
            item = gen.throw(throw) if throw is not None else gen.send(send)
        except StopIteration as stop:
            call.deactivate()
            call.finish_stream(items, "complete")
            return stop.value
        except BaseException as exc:
            call.deactivate()
            call.fail(exc, items)
            raise
        call.deactivate()
        items.append(item)
        try:
            send = yield item
            throw = None
        except GeneratorExit:
            gen.close()
            call.finish_stream(items, "abandoned")
            raise
        except BaseException as exc:
            throw, send = exc, None


async def _adrive(agen: AsyncGenerator[Any, Any], call: _Call) -> AsyncGenerator[Any, Any]:
    items: list[Any] = []
    send: Any = None
    throw: BaseException | None = None
    while True:
        call.activate()
        try:
            item = await (agen.athrow(throw) if throw is not None else agen.asend(send))
        except StopAsyncIteration:
            call.deactivate()
            call.finish_stream(items, "complete")
            return
        except BaseException as exc:
            call.deactivate()
            call.fail(exc, items)
            raise
        call.deactivate()
        items.append(item)
        try:
            send = yield item
            throw = None
        except GeneratorExit:
            await agen.aclose()
            call.finish_stream(items, "abandoned")
            raise
        except BaseException as exc:
            throw, send = exc, None


_RUNNERS: dict[str, Any] = {
    "sync": _run_sync,
    "async": _run_async,
    "gen": _stream_runner(_drive),
    "agen": _stream_runner(_adrive),
}


def _raw_function(target: Any) -> Any:
    if isinstance(target, (staticmethod, classmethod)):
        return target.__func__
    return target


def _wrap(
    func: Any,
    *,
    name: str | None,
    kind: BoundaryKind,
    attributes: Mapping[str, AttributeValue] | None,
    enabled: Any,
    provider: str | None,
    config: ChronicleConfig | None,
) -> Any:
    raw = _raw_function(func)
    if not callable(raw):
        raise TypeError(f"@boundary needs a function or method, got {func!r}")
    if isinstance(raw, property):
        raise TypeError("@boundary cannot decorate a property; decorate its getter function instead")
    if getattr(getattr(raw, "__code__", None), "co_filename", "").endswith("contextlib.py"):
        warnings.warn(
            ChronicleWarning(
                f"@boundary is applied on top of @contextmanager for {raw.__qualname__}: the span would cover only the "
                "creation of the context manager. Put @boundary below @contextmanager (on the generator function)."
            ),
            stacklevel=4,
        )
    boundary_name = name or f"{getattr(raw, '__module__', '?')}.{getattr(raw, '__qualname__', repr(raw))}"
    enabled_fn = enabled if callable(enabled) else None
    spec = _Spec(raw, boundary_name, kind, attributes, config, enabled_fn, provider)
    wrapped = wrapt.FunctionWrapper(func, _wrapper(spec))
    hooks.register(boundary_name, wrapped)
    return wrapped


class BoundaryDecorator(Protocol):
    """The decorator returned by ``boundary(...)``: keeps the decorated function's type."""

    def __call__(self, func: F, /) -> F:
        """Wrap ``func``."""
        ...


@overload
def boundary(func: F, /) -> F: ...


@overload
def boundary(
    *,
    name: str | None = None,
    kind: BoundaryKind | str = "custom",
    attributes: Mapping[str, AttributeValue] | None = None,
    enabled: bool | Callable[[], bool] = True,
    provider: str | None = None,
    config: ChronicleConfig | None = None,
) -> BoundaryDecorator: ...


def boundary(
    func: Any = None,
    /,
    *,
    name: str | None = None,
    kind: BoundaryKind | str = "custom",
    attributes: Mapping[str, AttributeValue] | None = None,
    enabled: bool | Callable[[], bool] = True,
    provider: str | None = None,
    config: ChronicleConfig | None = None,
) -> Any:
    """Record every call of a function as a boundary span.

    Args:
        func: the function (bare form ``@boundary``).
        name: stable boundary name, the key replay matches calls by. Default: ``module.qualname``.
        kind: ``llm``, ``tool``, ``retrieval``, ``guardrail``, ``agent``, ``memory`` or ``custom``.
        attributes: static span attributes added to every call.
        enabled: ``False`` leaves the function unwrapped (zero cost); a callable is asked on each call and
            the call goes straight through when it returns false.
        provider: for ``llm`` boundaries, the GenAI provider name (``openai``, ``anthropic``…).
        config: record with this configuration instead of the process-wide one (see ``configure(local=True)``).

    Returns:
        The wrapped function (bare form) or a decorator.

    Raises:
        ConfigError: ``kind`` is not a valid kind.

    Example::

        @boundary(kind="llm", name="plan")
        def plan(request: str, *, model: str = "gpt-4.1-mini") -> Order: ...
    """
    boundary_kind = _kind(kind)
    if attributes is not None:
        attributes = dict(attributes)
        for key, value in attributes.items():
            if _attribute_scalar(value) is None:
                raise ConfigError(f"attributes[{key!r}]", value, "a str, bool, int or float")

    def decorate(target: Any) -> Any:
        if enabled is False:
            return target
        return _wrap(
            target,
            name=name,
            kind=boundary_kind,
            attributes=attributes,
            enabled=enabled,
            provider=provider,
            config=config,
        )

    if func is not None:
        return decorate(func)
    return decorate


# ------------------------------------------------------------------------------------ context-manager form

_T = TypeVar("_T")


class call:
    """Record a block of code as a boundary call, for code that cannot be decorated.

    Usage::

        with chronicle.call("crm.lookup", kind="tool", input={"customer": cid}) as c:
            row = legacy_client.lookup(cid)
            c.set_output(row)

    The block is one span, nested and indexed like a decorated call. An exception leaving the block
    is recorded and propagates unchanged. Works with ``async with`` too.

    Args:
        name: the boundary name.
        kind: the boundary kind.
        input: the inputs to record, as ``{name: value}``.
        attributes: static span attributes.
        config: record with this configuration instead of the process-wide one.
    """

    def __init__(
        self,
        name: str,
        *,
        kind: BoundaryKind | str = "custom",
        input: Mapping[str, Any] | None = None,
        attributes: Mapping[str, AttributeValue] | None = None,
        config: ChronicleConfig | None = None,
    ) -> None:
        self._spec = _Spec(None, name, _kind(kind), attributes, config, None, None)
        self._input = dict(input or {})
        self._call: _Call | None = None
        self._output: Any = None
        self._replay: Any = None

    def set_output(self, value: _T) -> _T:
        """Record ``value`` as the block's output, and return it."""
        self._output = value
        return value

    def __enter__(self) -> call:
        replay = hooks.REPLAY.get()
        if replay is not None:
            self._replay = (replay, *replay.enter_block(self._spec, self._input))
        c = _begin(self._spec, None, None, (), {})
        if c is not None:
            if c.recording:
                try:
                    _payload(c.attrs, c.pending, _INPUT_KEYS, self._input, c.config, c.secrets)
                except Exception as exc:
                    if _errors.RAISE_INTERNAL_ERRORS:
                        raise
                    log_once(f"recording the input of boundary {self._spec.name!r}", exc)
            c.activate()
        self._call = c
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        c, self._call = self._call, None
        if self._replay is not None:
            replay, token, recording = self._replay
            self._replay = None
            replay.exit_block(token, recording, self._output, exc)
        if c is None:
            return
        c.deactivate()
        if exc is not None:
            c.fail(exc)
        else:
            c.succeed(self._output)

    async def __aenter__(self) -> call:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)


# ------------------------------------------------------------------------------------ instrument third-party code

_instrumented: dict[tuple[int, str], tuple[Any, str, Any]] = {}
_instrument_lock = threading.Lock()


def _resolve(target: Any, path: str) -> tuple[Any, str]:
    parts = path.split(".")
    owner = target
    for part in parts[:-1]:
        owner = getattr(owner, part)
    return owner, parts[-1]


def instrument(
    target: Any,
    path: str,
    *,
    name: str | None = None,
    kind: BoundaryKind | str = "custom",
    attributes: Mapping[str, AttributeValue] | None = None,
    provider: str | None = None,
) -> None:
    """Wrap a third-party function or method in place as a boundary.

    Example::

        import openai.resources.chat.completions as completions
        chronicle.instrument(completions, "Completions.create", kind="llm", provider="openai")
        ...
        chronicle.uninstrument(completions, "Completions.create")

    Instrumenting the same attribute twice is a no-op. Pair every ``instrument`` with :func:`uninstrument`.

    Args:
        target: a module or class.
        path: dotted attribute path from ``target`` to the function (``"Completions.create"``).
        name: boundary name. Default: ``module.qualname`` of the original function.
        kind: boundary kind.
        attributes: static span attributes.
        provider: GenAI provider name for ``llm`` boundaries.

    Raises:
        AttributeError: ``path`` does not exist on ``target``.
        TypeError: the attribute is not callable.
    """
    owner, attr = _resolve(target, path)
    original = owner.__dict__[attr] if isinstance(owner, type) and attr in owner.__dict__ else getattr(owner, attr)
    key = (id(owner), attr)
    with _instrument_lock:
        if key in _instrumented:
            return
        wrapped = boundary(name=name, kind=kind, attributes=attributes, provider=provider)(original)
        setattr(owner, attr, wrapped)
        _instrumented[key] = (owner, attr, original)


def uninstrument(target: Any, path: str) -> bool:
    """Undo :func:`instrument`; returns False when the attribute was not instrumented."""
    owner, attr = _resolve(target, path)
    with _instrument_lock:
        entry = _instrumented.pop((id(owner), attr), None)
    if entry is None:
        return False
    setattr(owner, attr, entry[2])
    return True
