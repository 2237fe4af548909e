"""pydantic-ai: model requests, plain and streamed, and function tool calls, recorded at the framework's seams.

Usage::

    import chronicle_otel as chronicle
    from chronicle_otel.integrations import pydantic_ai as chronicle_pydantic_ai

    chronicle.configure()
    chronicle_pydantic_ai.instrument()     # every model class, defined before or after; every function tool
    ...
    chronicle_pydantic_ai.uninstrument()   # the framework's own methods back

What is recorded:

* ``pydantic_ai.model.request`` (``llm``): each ``Model.request(...)`` of a model that answers requests itself
  (``OpenAIChatModel``, ``OpenAIResponsesModel``, ``AnthropicModel``, ``GoogleModel``, ``TestModel``…, and model
  classes defined after ``instrument()``), whichever provider is behind it. The output is the typed
  ``ModelResponse`` (parts, usage, model name, timestamps…), rebuilt equal on replay. Models that only hand a
  request on (``WrapperModel`` and its subclasses such as ``InstrumentedModel``, ``FallbackModel``) are not
  boundaries themselves: the model they reach is, so each request is recorded once.
* ``pydantic_ai.model.request_stream`` (``llm``): each ``Model.request_stream(...)``. The span covers opening the
  stream (the provider call happens there), then every event the consumer reads (``PartStartEvent``,
  ``PartDeltaEvent``, ``PartEndEvent``, ``FinalResultEvent``), then the final ``ModelResponse`` (``get()``) once the
  request's ``async with`` exits. A replay hands back pydantic-ai's own ``CompletedStreamedResponse`` over the
  recorded events and response, so ``run_stream``, ``iter`` and ``event_stream_handler`` work unchanged.
* ``pydantic_ai.tool.<name>`` (``tool``): each call of a function tool (``FunctionToolset.call_tool``, which
  ``@agent.tool`` / ``@agent.tool_plain`` / ``Tool(...)`` tools go through), input ``{"name", "tool_args"}`` (the
  validated arguments), output what the function returned or the error it raised (``ModelRetry`` included).

The input of a model request is ``{"model", "messages", "model_settings", "model_request_parameters"}`` as JSON:
the messages as pydantic-ai's ``ModelMessagesTypeAdapter`` dumps them and the parameters (tool definitions,
output mode, instructions) as their dataclass dumps, with the fields that change from run to run left out, so a
replayed run compares equal: the ``timestamp``, ``run_id`` and ``conversation_id`` of every message and of every
part. ``extra_headers`` in the settings is never recorded. The span carries the GenAI attributes (provider from
the model's ``system``, request model; response model, id, finish reason and tokens for streams, tokens for
plain requests).

With the ``openai`` / ``anthropic`` SDK integrations on as well, both layers record: the SDK call is a child of
this boundary, and a replay stubbing ``kind:llm`` answers here, so the SDK is never called.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

import wrapt

from .. import semconv
from .._internal import hooks
from .._internal.errors import handle_internal_errors
from ..errors import ReplayDivergence
from ..record.adapters import Arguments, RecordingProxy, StreamAdapter, StreamRecorder, StreamReplay
from ..record.extension import BoundaryKind, Wrapper, usage_attributes, wrap
from ..record.extension import instrument as _instrument_attribute
from ..record.extension import uninstrument as _uninstrument_attribute
from ._common import require

__all__ = ["MODEL_REQUEST", "MODEL_REQUEST_STREAM", "TOOL", "VOLATILE_FIELDS", "instrument", "uninstrument"]

MODEL_REQUEST: Final = "pydantic_ai.model.request"
"""The boundary name of a plain model request."""

MODEL_REQUEST_STREAM: Final = "pydantic_ai.model.request_stream"
"""The boundary name of a streamed model request."""

TOOL: Final = "pydantic_ai.tool"
"""The prefix of the tool boundaries: each call is named ``pydantic_ai.tool.<tool name>``."""

VOLATILE_FIELDS: Final = frozenset({"timestamp", "run_id", "conversation_id"})
"""Fields of each message and each message part left out of a model request's recorded input: they change from
run to run, so a replayed request compares equal to the recorded one."""

_PARAMETERS: Final = ("messages", "model_settings", "model_request_parameters")
_SEAMS: Final = ("request", "request_stream")
_NEVER_RECORDED: Final = frozenset({"extra_headers"})
_ADDRESS: Final = re.compile(r" at 0x[0-9a-fA-F]+")

_lock = threading.Lock()
_INSIDE: contextvars.ContextVar[bool] = contextvars.ContextVar("chronicle_pydantic_ai_request", default=False)
"""True inside a recorded model request: a model that calls another model (or its base class's ``request``) for
the same request is not recorded again."""

_SUBCLASS_HOOK: list[tuple[type, Any]] = []
"""While instrumented: ``(Model, its own __init_subclass__ before, or None)``."""

_guard: Final = handle_internal_errors("recording a pydantic-ai model request")
_class_guard: Final = handle_internal_errors("instrumenting a pydantic-ai model class")


# ------------------------------------------------------------------------------------ the recorded calls


class _Request:
    """The real call behind one recorded model request.

    Never recorded itself (the ``request`` argument is excluded): it carries what the call and a replayed stream
    need.
    """

    __slots__ = ("args", "kwargs", "method", "parameters", "stack")

    def __init__(
        self,
        method: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        parameters: Any,
        stack: contextlib.AsyncExitStack | None = None,
    ) -> None:
        self.method = method
        self.args = args
        self.kwargs = kwargs
        self.parameters = parameters
        self.stack = stack

    def __repr__(self) -> str:
        return "<pydantic-ai model request>"


async def _model_request(
    model: str | None,
    messages: list[Any],
    model_settings: Any,
    model_request_parameters: Any,
    request: _Request,
) -> Any:
    """One plain model request (the body of the ``pydantic_ai.model.request`` boundary)."""
    token = _INSIDE.set(True)
    try:
        return await request.method(*request.args, **request.kwargs)
    finally:
        _INSIDE.reset(token)


async def _model_request_stream(
    model: str | None,
    messages: list[Any],
    model_settings: Any,
    model_request_parameters: Any,
    request: _Request,
) -> Any:
    """Open one streamed model request (the body of the ``pydantic_ai.model.request_stream`` boundary).

    Enters the model's ``request_stream(...)`` context into the request's exit stack and returns the
    ``StreamedResponse``.
    """
    assert request.stack is not None
    token = _INSIDE.set(True)
    try:
        return await request.stack.enter_async_context(request.method(*request.args, **request.kwargs))
    finally:
        _INSIDE.reset(token)


_ARGUMENTS: Final = Arguments(exclude={"request"})
_TOOL_ARGUMENTS: Final = Arguments(exclude={"ctx", "tool"})


@functools.cache
def _stream_adapter() -> StreamAdapter:
    from pydantic_ai.models import StreamedResponse

    def is_stream(value: Any) -> bool:
        return isinstance(value, StreamedResponse)

    return StreamAdapter(is_stream=is_stream, record=_record, replay=_stand_in, attributes=_stream_attributes)


_seams: dict[tuple[bool, str], Wrapper] = {}


def _seam(stream: bool, provider: str) -> Wrapper:
    """The boundary a request of a ``provider`` model is recorded through.

    One per provider: the GenAI provider attribute is fixed when a boundary is made.
    """
    key = (stream, provider)
    seam = _seams.get(key)
    if seam is None:
        seam = wrap(
            _model_request_stream if stream else _model_request,
            name=MODEL_REQUEST_STREAM if stream else MODEL_REQUEST,
            kind=BoundaryKind.LLM,
            attributes=None,
            enabled=None,
            provider=provider or None,
            config=None,
            arguments=_ARGUMENTS,
            stream=_stream_adapter() if stream else None,
        )
        seam = _seams.setdefault(key, seam)
    return seam


# ------------------------------------------------------------------------------------ the recorded input


def _opaque(value: Any) -> str:
    """What a value pydantic cannot serialize is compared as: its repr without memory addresses."""
    return _ADDRESS.sub("", repr(value))[:1000]


_adapters: dict[type, Any] = {}


def _adapter(cls: type) -> Any:
    adapter = _adapters.get(cls)
    if adapter is None:
        import pydantic

        adapter = _adapters.setdefault(cls, pydantic.TypeAdapter(cls))
    return adapter


def _messages_view(messages: Any) -> list[Any]:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    dumped = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json", warnings=False, fallback=_opaque)
    return [_stable(message) for message in dumped]


def _stable(message: Any) -> Any:
    """A dumped message without its volatile fields, nor those of its parts."""
    if not isinstance(message, dict):
        return message
    out = {k: v for k, v in message.items() if k not in VOLATILE_FIELDS}
    parts = out.get("parts")
    if isinstance(parts, list):
        out["parts"] = [
            {k: v for k, v in part.items() if k not in VOLATILE_FIELDS} if isinstance(part, dict) else part
            for part in parts
        ]
    return out


def _settings_view(settings: Any) -> Any:
    if settings is None:
        return None
    import pydantic_core

    kept = {k: v for k, v in dict(settings).items() if k not in _NEVER_RECORDED}
    return pydantic_core.to_jsonable_python(kept, fallback=_opaque)


def _parameters_view(parameters: Any) -> Any:
    return _adapter(type(parameters)).dump_python(parameters, mode="json", warnings=False, fallback=_opaque)


def _identity(model: Any) -> tuple[str | None, str]:
    """The model's name and its provider (``system``), as far as the model knows them."""
    name: str | None = None
    provider = ""
    with contextlib.suppress(Exception):
        found = model.model_name
        name = found if isinstance(found, str) else None
    with contextlib.suppress(Exception):
        found = model.system
        provider = found if isinstance(found, str) else ""
    return name, provider


def _prepare(
    method: Callable[..., Any], model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], stream: bool
) -> tuple[Wrapper, dict[str, Any], _Request] | None:
    """The boundary, the recorded input and the real call of one model request.

    None when it cannot be recorded: it then runs unrecorded.
    """
    with _guard:
        bound = dict(zip(_PARAMETERS, args, strict=False))
        bound.update({k: kwargs[k] for k in _PARAMETERS if k in kwargs})
        parameters = bound["model_request_parameters"]
        name, provider = _identity(model)
        view = {
            "model": name,
            "messages": _messages_view(bound["messages"]),
            "model_settings": _settings_view(bound.get("model_settings")),
            "model_request_parameters": _parameters_view(parameters),
        }
        stack = contextlib.AsyncExitStack() if stream else None
        return _seam(stream, provider), view, _Request(method, args, kwargs, parameters, stack)
    return None


# ------------------------------------------------------------------------------------ the model seams


if TYPE_CHECKING:
    _FunctionWrapper = wrapt.FunctionWrapper[..., Any]
else:
    _FunctionWrapper = wrapt.FunctionWrapper


class _ModelSeam(_FunctionWrapper):
    """The wrapper :func:`instrument` puts on a model class's own ``request`` / ``request_stream``."""


def _own(wrapped: Any, instance: Any, args: tuple[Any, ...]) -> tuple[Any, Any, tuple[Any, ...]]:
    """``(method, model, args)`` of one call.

    A method called on the class (``OpenAIChatModel.request(model, ...)``) gets its model from the first argument.
    """
    if instance is None and args:
        return functools.partial(wrapped, args[0]), args[0], args[1:]
    return wrapped, instance, args


def _request_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if _INSIDE.get():
        return wrapped(*args, **kwargs)
    method, model, args = _own(wrapped, instance, args)
    return _recorded_request(method, model, args, kwargs)


async def _recorded_request(method: Any, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    prepared = _prepare(method, model, args, kwargs, stream=False)
    if prepared is None:
        return await method(*args, **kwargs)
    seam, view, request = prepared
    return await seam(request=request, **view)


def _stream_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if _INSIDE.get():
        return wrapped(*args, **kwargs)
    method, model, args = _own(wrapped, instance, args)
    return _recorded_stream(method, model, args, kwargs)


@contextlib.asynccontextmanager
async def _recorded_stream(
    method: Any, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> AsyncIterator[Any]:
    """``request_stream(...)`` as the caller enters it.

    The boundary opens the model's own context, the caller gets the stream (recorded as it is read), and the final
    response is recorded once the model's context has exited.
    """
    prepared = _prepare(method, model, args, kwargs, stream=True)
    if prepared is None:
        async with method(*args, **kwargs) as plain:
            yield plain
        return
    seam, view, request = prepared
    assert request.stack is not None
    stream: Any = None
    try:
        async with request.stack:
            stream = await seam(request=request, **view)
            yield stream
    finally:
        if type(stream) is _RecordingStreamedResponse:
            stream._self_finish()


# ------------------------------------------------------------------------------------ recording a stream


class _RecordingStreamedResponse(RecordingProxy):
    """The ``StreamedResponse`` the consumer gets while it is recorded.

    Every attribute is the real stream's; the events it yields are recorded as they are read, and its final
    ``ModelResponse`` when the request ends.
    """

    def __init__(self, wrapped: Any, recorder: StreamRecorder) -> None:
        super().__init__(wrapped, recorder)
        self._self_source: Any = None
        self._self_events: _RecordingEvents | None = None
        self._self_complete = False

    def __aiter__(self) -> Any:
        # pydantic-ai may wrap the iterator it got (a peekable stream primed with the first event) and store it on
        # the stream, whose ``__aiter__`` then hands that one out: it reads through ours, so it is passed on as is.
        iterator = self.__wrapped__.__aiter__()
        events = self._self_events
        if events is None:
            self._self_source = iterator
            events = self._self_events = _RecordingEvents(iterator, self)
            return events
        return events if iterator is self._self_source else iterator

    def _self_response(self) -> Any:
        with _guard:
            return self.__wrapped__.get()
        return None

    def _self_end(self, state: Any, exc: BaseException | None = None) -> None:
        recorder = self._self_recorder
        if recorder.done:
            return
        response = self._self_response()
        if response is not None:
            recorder.item(response)
        recorder.end(state, exc)

    def _self_finish(self) -> None:
        """The request's context has exited: record the final response and how the stream ended."""
        self._self_end("complete" if self._self_complete else "abandoned")


class _RecordingEvents:
    """The events of a recorded stream, recorded as the consumer reads them."""

    __slots__ = ("_iterator", "_stream")

    def __init__(self, iterator: Any, stream: _RecordingStreamedResponse) -> None:
        self._iterator = iterator
        self._stream = stream

    def __aiter__(self) -> _RecordingEvents:
        return self

    async def __anext__(self) -> Any:
        stream = self._stream
        try:
            event = await self._iterator.__anext__()
        except StopAsyncIteration:
            stream._self_complete = True
            raise
        except (asyncio.CancelledError, GeneratorExit):  # the consumer stopped reading
            stream._self_end("abandoned")
            raise
        except BaseException as exc:
            stream._self_end("error", exc)
            raise
        stream._self_recorder.item(event)
        return event

    async def aclose(self) -> None:
        """Close the stream's own iterator."""
        close = getattr(self._iterator, "aclose", None)
        if close is not None:
            await close()


def _record(stream: Any, recorder: StreamRecorder) -> Any:
    return _RecordingStreamedResponse(stream, recorder)


def _stream_attributes(items: list[Any]) -> dict[str, Any]:
    """GenAI attributes of a streamed request, from its final ``ModelResponse``."""
    from pydantic_ai.messages import ModelResponse

    if not items or not isinstance(items[-1], ModelResponse):
        return {}
    response = items[-1]
    out: dict[str, Any] = {}
    if isinstance(response.model_name, str) and response.model_name:
        out[semconv.GEN_AI_RESPONSE_MODEL] = response.model_name
    if isinstance(response.provider_response_id, str) and response.provider_response_id:
        out[semconv.GEN_AI_RESPONSE_ID] = response.provider_response_id
    if isinstance(response.finish_reason, str):
        out[semconv.GEN_AI_RESPONSE_FINISH_REASONS] = (response.finish_reason,)
    out.update(usage_attributes(response.usage))
    return out


# ------------------------------------------------------------------------------------ replaying a stream


class _ReplayedEvents(list[Any]):
    """The recorded events a replayed stream yields, then the recorded error.

    pydantic-ai iterates its ``replay_events`` list once. A stream abandoned while recorded has nothing recorded past
    its events: reading further is a divergence.
    """

    def __init__(self, events: list[Any], error: BaseException | None, abandoned: bool, final: type) -> None:
        super().__init__(events)
        self.error = error
        self.abandoned = abandoned
        self.final = final
        self.owner: Any = None

    def __iter__(self) -> Iterator[Any]:
        for event in super().__iter__():
            if isinstance(event, self.final) and self.owner is not None:
                self.owner.final_result_event = event  # as the live stream sets it
            yield event
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        if self.abandoned:
            raise ReplayDivergence(
                f"the recorded stream was abandoned by its consumer after {len(self)} events; "
                "the replay reads further than the recording goes"
            )


def _stand_in(replayed: StreamReplay) -> Any:
    """pydantic-ai's ``CompletedStreamedResponse`` over the recorded events and final response."""
    from pydantic_ai.messages import FinalResultEvent, ModelResponse
    from pydantic_ai.models import CompletedStreamedResponse

    request = replayed.kwargs.get("request")
    parameters = request.parameters if isinstance(request, _Request) else None
    if parameters is None:
        from pydantic_ai.models import ModelRequestParameters

        parameters = ModelRequestParameters()
    items = list(replayed.items)
    response = items.pop() if items and isinstance(items[-1], ModelResponse) else ModelResponse(parts=[])
    events = _ReplayedEvents(items, replayed.error, replayed.state == "abandoned", FinalResultEvent)
    stream = CompletedStreamedResponse(response, model_request_parameters=parameters, replay_events=events)
    events.owner = stream
    stream.provider_response_id = response.provider_response_id
    stream.provider_details = response.provider_details
    stream.finish_reason = response.finish_reason
    stream.metadata = response.metadata
    return stream


# ------------------------------------------------------------------------------------ tools


def _tool_name(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    name = args[0] if args else kwargs.get("name")
    return f"{TOOL}.{name}" if isinstance(name, str) and name else None


# ------------------------------------------------------------------------------------ instrument / uninstrument


def _subclasses(root: type) -> list[type]:
    found: list[type] = []
    todo = [root]
    seen: set[type] = set()
    while todo:
        cls = todo.pop()
        subclasses: list[type] = cls.__subclasses__()
        for sub in subclasses:
            if sub not in seen:
                seen.add(sub)
                found.append(sub)
                todo.append(sub)
    return found


@functools.cache
def _passing_on() -> tuple[type, ...]:
    """Model classes that hand each request on to another model (recorded there, not here)."""
    from pydantic_ai.models.fallback import FallbackModel
    from pydantic_ai.models.wrapper import WrapperModel

    return (WrapperModel, FallbackModel)


def _patch(cls: type) -> int:
    """Put the seams on a model class's own ``request`` / ``request_stream``; returns how many were put."""
    if issubclass(cls, _passing_on()):
        return 0
    done = 0
    for attribute, wrapper in zip(_SEAMS, (_request_wrapper, _stream_wrapper), strict=True):
        function = cls.__dict__.get(attribute)
        if function is None or isinstance(function, _ModelSeam) or not callable(function):
            continue
        if getattr(function, "__isabstractmethod__", False):
            continue
        setattr(cls, attribute, _ModelSeam(function, wrapper))
        done += 1
    return done


def _hook_subclasses(model: Any) -> None:
    """Model classes defined from now on get their seams when they are created.

    pydantic-ai imports a provider's model module lazily, when an agent first names it.
    """
    if _SUBCLASS_HOOK:
        return
    before = model.__dict__.get("__init_subclass__")

    def __init_subclass__(cls: type, /, **kwargs: Any) -> None:
        if before is not None:
            before.__func__(cls, **kwargs)
        else:
            super(model, cls).__init_subclass__(**kwargs)
        with _class_guard:
            _patch(cls)

    type.__setattr__(model, "__init_subclass__", classmethod(__init_subclass__))
    _SUBCLASS_HOOK.append((model, before))


def _unhook_subclasses() -> None:
    while _SUBCLASS_HOOK:
        model, before = _SUBCLASS_HOOK.pop()
        if before is None:
            type.__delattr__(model, "__init_subclass__")
        else:
            type.__setattr__(model, "__init_subclass__", before)


def instrument() -> list[str]:
    """Record every pydantic-ai model request and every function tool call as a boundary.

    Model requests, plain and streamed, are ``llm`` boundaries; function tool calls ``tool`` boundaries. Patches the
    model classes that answer requests themselves, those defined now and those defined later, and
    ``FunctionToolset.call_tool``: agents and models created before and after are covered. Calling it again is a
    no-op.

    Returns:
        The boundary names instrumented: ``pydantic_ai.model.request``, ``pydantic_ai.model.request_stream`` and
        ``pydantic_ai.tool.*``, a glob of the tool boundaries (each tool call is named
        ``pydantic_ai.tool.<tool name>``) that selects them all in a replay.

    Raises:
        ConfigError: pydantic-ai is not installed (``pip install 'chronicle-otel[pydantic-ai]'``).
    """
    require("pydantic_ai", "pydantic-ai")
    from pydantic_ai.models import Model
    from pydantic_ai.toolsets.function import FunctionToolset

    with _lock:
        hooks.register_packages("pydantic_ai.")
        _stream_adapter()
        _hook_subclasses(Model)
        for cls in _subclasses(Model):
            _patch(cls)
        _instrument_attribute(
            FunctionToolset, "call_tool", name=TOOL, kind="tool", arguments=_TOOL_ARGUMENTS, name_of=_tool_name
        )
    return [MODEL_REQUEST, MODEL_REQUEST_STREAM, f"{TOOL}.*"]


def uninstrument() -> int:
    """Put pydantic-ai's own methods back; returns how many were instrumented."""
    try:
        from pydantic_ai.models import Model
        from pydantic_ai.toolsets.function import FunctionToolset
    except ImportError:
        return 0
    undone = 0
    with _lock:
        _unhook_subclasses()
        for cls in _subclasses(Model):
            for attribute in _SEAMS:
                function = cls.__dict__.get(attribute)
                if isinstance(function, _ModelSeam):
                    setattr(cls, attribute, function.__wrapped__)
                    undone += 1
        if _uninstrument_attribute(FunctionToolset, "call_tool"):
            undone += 1
    return undone
