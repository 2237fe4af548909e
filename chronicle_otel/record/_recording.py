"""The call lifecycle: one boundary call as one span, from its start to its end.

:func:`begin` starts the span (a child of the current span, with the boundary's static attributes,
its call index, the session variables and, during a replay, the replay's attributes and links) and
records the bound arguments at once, so later mutation cannot change the record. The runners call
the function with the span current and end it with the result (:meth:`Call.succeed`), the exception
(:meth:`Call.fail`) or, for generators and async generators, the items the stream yielded
(:meth:`Call.finish_stream`, through :mod:`chronicle_otel._internal.streams`). Every attribute is
set on the span in one call, at the end; truncated payloads go to the exporter's buffer.

Nothing here can break the call: each phase (start, input, end) hands what it raises to its
boundary's internal-error guard (``guard.absorb``: the zero-cost ``try`` form of
:class:`~chronicle_otel._internal.errors.handle_internal_errors`), the span is ended whatever
happens, and the user's own value or exception passes through unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import Token
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from opentelemetry import context as context_api
from opentelemetry import trace as trace_api
from opentelemetry.trace import Status, StatusCode

from .. import semconv
from .._internal.compat import set_clean_attributes
from .._internal.errors import warn_once
from .._internal.hooks import ReplayExtra
from .._internal.streams import AsyncStreamDriver, StreamDriver, StreamState
from ..codec import encode_unscanned
from ..config import ChronicleConfig, get_config
from ..redact import collect_json_text_secrets, error_secrets, scrub_text
from ._call_index import enter_frame, next_call_index
from ._genai import add_openinference_io, request_attributes, response_attributes
from ._payloads import (
    Pending,
    add_exception_event,
    encode_stream,
    error_payload,
    exception_message,
    item_snapshot,
    put_payload,
    secrets_of_error,
)
from .adapters import RecordingProxy, StreamAdapter, StreamRecorder
from .session_attrs import SESSION_ATTRIBUTES, AttributeValue

if TYPE_CHECKING:
    from ._spec import Spec

_SUPPRESS_KEY: str = getattr(context_api, "_SUPPRESS_INSTRUMENTATION_KEY", "suppress_instrumentation")

Runner = Callable[["Spec", Callable[..., Any], Any, tuple[Any, ...], dict[str, Any], ReplayExtra | None], Any]
"""Calls ``body(*args, **kwargs)`` as one boundary call: ``(spec, body, instance, args, kwargs, extra)``."""


class Call:
    """One boundary call in progress: its span, its context, its pending attributes and payloads."""

    __slots__ = ("attrs", "config", "ctx", "output", "pending", "recording", "secrets", "span", "spec")

    def __init__(
        self,
        spec: Spec,
        config: ChronicleConfig,
        span: trace_api.Span,
        ctx: context_api.Context,
        attrs: dict[str, Any] | None = None,
    ) -> None:
        self.spec = spec
        self.config = config
        self.span = span
        self.ctx = ctx
        """The context calls made inside this one run in: the span current, a fresh call-index frame."""
        self.recording = span.is_recording()
        self.attrs: dict[str, Any] = {} if attrs is None else attrs
        """The attributes set on the span when it ends (with the starting ones when the sampler never reads them)."""
        self.pending: Pending = []
        self.secrets: list[str] = []
        """The values redacted by key from the input: scrubbed from an error's text."""
        self.output: bytes | None = None
        """The return value already encoded (a replay's stub answering with its recording), else None."""

    def attach(self) -> Token[context_api.Context]:
        """Make this call's context current; detach the token with ``context.detach``."""
        return context_api.attach(self.ctx)

    def _input(self, value: Any) -> None:
        config = self.config
        redactor = config.redact
        data, scan = encode_unscanned(value, redact=redactor, secrets=self.secrets)
        if scan is not None:
            scanned = scan(data)
            if redactor is not None and scanned != data:  # a value redacted, maybe inside JSON text: an error may
                collect_json_text_secrets(value, redactor.redact_key, self.secrets)  # repeat it (rare: walked then)
            data = scanned
        put_payload(self.attrs, self.pending, semconv.INPUT_KEYS, data, config.max_attribute_length)

    def record_input(self, value: Any) -> None:
        """Record ``value`` as the call's input (a ``call(...)`` block's ``{name: value}``)."""
        if self.recording:
            try:
                self._input(value)
            except Exception as exc:
                self.spec.input_guard.absorb(exc)

    def succeed(self, result: Any) -> None:
        """End the call with its return value."""
        try:
            try:
                if self.recording:
                    config = self.config
                    redactor = config.redact
                    if self.output is not None:
                        data = self.output
                    else:
                        by_key: list[str] = []
                        data, scan = encode_unscanned(result, redact=redactor, secrets=by_key)
                        if scan is not None:
                            scanned = scan(data)
                            if scanned is data and not by_key and type(result) is dict:
                                # Nothing redacted, by key or by value, in the whole payload: so nothing in the model
                                # name and response id read from it, which need no scan of their own.
                                redactor = None
                            data = scanned
                    put_payload(self.attrs, self.pending, semconv.OUTPUT_KEYS, data, config.max_attribute_length)
                    if self.spec.genai and config.genai_attributes:
                        self.attrs.update(response_attributes(result, redactor))
            finally:
                self._end()
        except Exception as exc:
            self.spec.end_guard.absorb(exc)

    def fail(self, exc: BaseException, partial: list[Any] | None = None) -> None:
        """End the call with the exception it raised (and, for a stream, the items it yielded before)."""
        try:
            try:
                if self.recording:
                    self._error(exc, partial)
            finally:
                self._end()
        except Exception as err:
            self.spec.end_guard.absorb(err)

    def _error(self, exc: BaseException, partial: list[Any] | None) -> None:
        attrs = self.attrs
        config = self.config
        redactor = config.redact
        secrets = error_secrets(exc, [*self.secrets, *secrets_of_error(exc, redactor)]) if redactor is not None else []

        def scrub(text: str) -> str:
            return text if redactor is None else scrub_text(redactor, text, secrets)

        cap = config.max_attribute_length
        put_payload(attrs, self.pending, semconv.ERROR_KEYS, error_payload(exc, redactor, secrets), cap)
        if partial is not None:
            put_payload(attrs, self.pending, semconv.OUTPUT_KEYS, encode_stream(partial, redactor), cap)
            attrs[semconv.STREAM_STATE] = "error"
            attrs[semconv.STREAM_ITEMS] = len(partial)
        span = self.span
        add_exception_event(span, exc, scrub, absolute_paths=config.absolute_paths)
        span.set_status(Status(StatusCode.ERROR, scrub(f"{type(exc).__name__}: {exception_message(exc)}")))

    def finish_stream(self, items: list[Any], state: StreamState, exc: BaseException | None) -> None:
        """End a generator's call: the items it yielded and how it ended (the stream driver's ``on_done``)."""
        if exc is not None:
            self.fail(exc, items)
            return
        try:
            try:
                if self.recording:
                    config = self.config
                    attrs = self.attrs
                    data = encode_stream(items, config.redact)
                    put_payload(attrs, self.pending, semconv.OUTPUT_KEYS, data, config.max_attribute_length)
                    attrs[semconv.STREAM_STATE] = state
                    attrs[semconv.STREAM_ITEMS] = len(items)
            finally:
                self._end()
        except Exception as err:
            self.spec.end_guard.absorb(err)

    def finish_adapted_stream(
        self, items: list[Any], state: StreamState, exc: BaseException | None, live: list[Any] | None = None
    ) -> None:
        """End the call of a method that returned a stream object, once the consumer is done with it: ``items`` as
        recorded when read, ``live`` the objects themselves (the adapter's attributes are computed from them)."""
        if self.recording:
            self.attrs[semconv.STREAM] = True
            adapter = self.spec.stream_adapter
            if (
                adapter is not None
                and adapter.attributes is not None
                and self.spec.genai
                and self.config.genai_attributes
            ):
                try:
                    self.attrs.update(_scrubbed(adapter.attributes(items if live is None else live), self.config))
                except Exception as err:
                    self.spec.end_guard.absorb(err)
        self.finish_stream(items, state, exc)

    def _keep_all(self, attrs: dict[str, Any]) -> None:
        """Hand over the payloads that fit on the span too (``PayloadOptions.upload="all"``)."""
        for keys in semconv.PAYLOAD_KEYS:
            text, digest = attrs.get(keys.text), attrs.get(keys.hash)
            if isinstance(text, str) and isinstance(digest, str) and not attrs.get(keys.truncated):
                self.pending.append((digest, text.encode()))

    def _end(self) -> None:
        span = self.span
        try:
            if self.recording:
                attrs = self.attrs
                unreplayable = attrs.get(semconv.UNREPLAYABLE)
                if unreplayable:
                    self.config.unreplayable.add(self.spec.name, unreplayable)
                if self.config.openinference:
                    add_openinference_io(attrs)
                if attrs:
                    set_clean_attributes(span, attrs)
                    dropped = getattr(span, "dropped_attributes", 0)  # the SDK's span; another API's has none
                    if dropped:
                        warn_once(
                            "attribute-limit",
                            "chronicle_otel: the span of boundary %r holds more attributes than the span limit "
                            "(OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT, 128 by default): the SDK dropped %d, session variables "
                            "first; raise the limit or set fewer session variables",
                            self.spec.name,
                            dropped,
                        )
                config = self.config
                buffer = config.payload_buffer
                if config.upload_all:
                    self._keep_all(attrs)
                if self.pending and buffer is not None:
                    buffer.put(span.get_span_context().span_id, self.pending)
        finally:
            span.end()


def begin(
    spec: Spec,
    body: Callable[..., Any] | None,
    instance: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    extra: ReplayExtra | None,
    stream: bool = False,
) -> Call | None:
    """Start the span of one call and record its arguments; None when recording is off, suppressed or failed.

    A failure to record the arguments leaves the call recording the rest (its span has no input).
    """
    call = None
    try:
        config = spec.config or get_config()
        if not config.enabled or (spec.enabled is not None and not spec.enabled()):
            return None
        parent_ctx = context_api.get_current()
        if parent_ctx.get(_SUPPRESS_KEY):
            return None
        session = SESSION_ATTRIBUTES.get()
        if config.session or session:
            # Session variables first: past the span's attribute limit the SDK drops the oldest, and the boundary's
            # own attributes (name, kind, call index, payloads) are what a replay cannot do without.
            attrs: dict[str, AttributeValue] = {**config.session, **session} if session else dict(config.session)
            attrs.update(spec.static_for(config.redact))
        else:
            attrs = dict(spec.static_for(config.redact))
        attrs[semconv.CALL_INDEX] = next_call_index(parent_ctx, spec.name)
        if stream:
            attrs[semconv.STREAM] = True
        if config.openinference:
            attrs[semconv.OPENINFERENCE_SPAN_KIND] = spec.openinference_kind
        links = None
        if extra is not None:
            attrs.update(extra.attributes)
            links = extra.links
        if config.start_blind:
            # The SDK's own sampler never reads the starting attributes: they are set with the others when the call
            # ends, in one step, instead of being cleaned one by one by the span's constructor now.
            span = config.tracer.start_span(spec.name, context=parent_ctx, links=links)
            call = Call(spec, config, span, enter_frame(trace_api.set_span_in_context(span, parent_ctx)), attrs)
        else:
            span = config.tracer.start_span(spec.name, context=parent_ctx, attributes=attrs, links=links)
            call = Call(spec, config, span, enter_frame(trace_api.set_span_in_context(span, parent_ctx)))
        if extra is not None:
            call.output = extra.output
            if extra.started is not None:
                extra.started(span)
        binder = spec.binder
        if call.recording and binder is not None:
            bound = binder.bind(args, kwargs, body is not spec.raw and instance is not None)
            if extra is not None and extra.input is not None:  # a replay that already encoded it
                call.secrets.extend(extra.secrets)
                put_payload(call.attrs, call.pending, semconv.INPUT_KEYS, extra.input, config.max_attribute_length)
            else:
                call._input(bound)
            if spec.genai_args and config.genai_attributes:
                call.attrs.update(request_attributes(bound, spec.genai_args, config.redact))
    except Exception as exc:
        spec.start_guard.absorb(exc)
    return call


def _scrubbed(attributes: Any, config: ChronicleConfig) -> dict[str, Any]:
    """Attributes an adapter computed, checked (scalars or lists of strings) and with strings redacted."""
    redactor = config.redact
    out: dict[str, Any] = {}
    for key, value in dict(attributes).items():
        if isinstance(value, str):
            out[key] = redactor.redact_text(value) if redactor is not None else value
        elif isinstance(value, (bool, int, float)) or (
            isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
        ):
            out[key] = tuple(value) if isinstance(value, list) else value
    return out


def _is_proxy(value: Any) -> bool:
    """True for a stream another boundary is recording. Reads the value's real type: ``isinstance`` would ask the
    value's ``__class__``, which an object may compute, and raise from."""
    return issubclass(type(value), RecordingProxy)


_PASSED_ON: Final = StreamAdapter(is_stream=_is_proxy)
"""For a boundary that returns a stream another boundary is recording (a function returning ``create(stream=True)``):
recorded as a stream too, as the consumer reads it; replayed as a :class:`~chronicle_otel.adapters.ReplayedStream`."""


def _adapt(spec: Spec, adapter: StreamAdapter, call: Call, result: Any) -> Any:
    """``result`` as the caller receives it: a stream wrapped to be recorded as it is read (the span ends with the
    stream), anything else recorded as the return value."""
    try:
        streaming = call.recording and bool(adapter.is_stream(result))
    except Exception as exc:
        spec.end_guard.absorb(exc)
        streaming = False
    if not streaming:
        call.succeed(result)
        return result

    def done(items: list[Any], state: StreamState, exc: BaseException | None) -> None:
        call.finish_adapted_stream(items, state, exc, recorder.items)

    recorder = StreamRecorder(done, item_snapshot(call.config.redact))
    try:
        return adapter.wrap(result, recorder)
    except Exception as exc:  # the SDK's own object goes back unrecorded
        spec.end_guard.absorb(exc)
        recorder.end("abandoned")
        return result


# ------------------------------------------------------------------------------------ runners, one per shape


def run_sync(
    spec: Spec,
    body: Callable[..., Any],
    instance: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    extra: ReplayExtra | None,
) -> Any:
    """Run a function that returns a value."""
    call = begin(spec, body, instance, args, kwargs, extra)
    if call is None:
        return body(*args, **kwargs)
    token = context_api.attach(call.ctx)
    try:
        result = body(*args, **kwargs)
    except BaseException as exc:
        try:
            context_api.detach(token)
            call.fail(exc)
        except RecursionError:  # at the recursion limit the record is lost, never the function's own exception
            pass
        raise
    try:
        context_api.detach(token)
        adapter = spec.stream_adapter
        if adapter is not None:
            return _adapt(spec, adapter, call, result)
        if _is_proxy(result):
            return _adapt(spec, _PASSED_ON, call, result)
        call.succeed(result)
    except RecursionError:  # at the recursion limit the record is lost, never the value
        pass
    return result


async def run_async(
    spec: Spec,
    body: Callable[..., Any],
    instance: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    extra: ReplayExtra | None,
) -> Any:
    """Run a coroutine function; the span covers the whole await."""
    call = begin(spec, body, instance, args, kwargs, extra)
    if call is None:
        return await body(*args, **kwargs)
    token = context_api.attach(call.ctx)
    try:
        result = await body(*args, **kwargs)
    except BaseException as exc:
        try:
            context_api.detach(token)
            call.fail(exc)
        except RecursionError:  # at the recursion limit the record is lost, never the function's own exception
            pass
        raise
    try:
        context_api.detach(token)
        adapter = spec.stream_adapter
        if adapter is not None:
            return _adapt(spec, adapter, call, result)
        if _is_proxy(result):
            return _adapt(spec, _PASSED_ON, call, result)
        call.succeed(result)
    except RecursionError:  # at the recursion limit the record is lost, never the value
        pass
    return result


def _stream_runner(driver: type[StreamDriver] | type[AsyncStreamDriver]) -> Runner:
    def run(
        spec: Spec,
        body: Callable[..., Any],
        instance: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        extra: ReplayExtra | None,
    ) -> Any:
        call = begin(spec, body, instance, args, kwargs, extra, stream=True)
        if call is None:
            return body(*args, **kwargs)
        token = context_api.attach(call.ctx)
        try:
            stream = body(*args, **kwargs)
        except BaseException as exc:
            context_api.detach(token)
            call.fail(exc, [])
            raise
        context_api.detach(token)
        snapshot = item_snapshot(call.config.redact) if call.recording else None
        return driver(stream, call.finish_stream, partial(context_api.attach, call.ctx), context_api.detach, snapshot)

    return run


run_gen = _stream_runner(StreamDriver)
"""Run a generator function: the span covers the whole iteration (see :class:`StreamDriver`)."""

run_agen = _stream_runner(AsyncStreamDriver)
"""Run an async-generator function: the span covers the whole iteration (see :class:`AsyncStreamDriver`)."""
