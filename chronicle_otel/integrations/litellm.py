"""LiteLLM: completions, responses, text completions and embeddings, sync and async, plain and streamed.

``litellm.completion`` / ``acompletion`` (``stream=True`` included), ``responses`` / ``aresponses``,
``text_completion`` / ``atext_completion`` and ``embedding`` / ``aembedding``, whichever provider serves them.

Usage::

    import chronicle_otel as chronicle
    from chronicle_otel.integrations import litellm as chronicle_litellm

    chronicle.configure()
    chronicle_litellm.instrument()      # before or after `from litellm import completion`
    ...
    chronicle_litellm.uninstrument()    # LiteLLM's own functions back everywhere

Each call of one of those functions becomes one ``llm`` boundary named after it (``litellm.completion``,
``litellm.acompletion``, ``litellm.responses``…), whoever calls it: user code, ``litellm.Router`` (which looks the
function up on the ``litellm`` module at every call) or a library. LiteLLM's own calls of these functions inside
one of them (``acompletion`` runs ``completion``, ``responses`` may run ``completion`` for a provider without a
Responses API) are part of that one boundary, never a second one.

* The input is the arguments the caller passed, ``**kwargs`` flattened in (``custom_llm_provider``,
  ``num_retries``…), without the connection settings and credentials (``api_key``, ``api_base``, ``base_url``,
  ``api_version``, headers, clients, ``timeout``, ``model_list``, cloud credentials: :data:`EXCLUDED`); a pydantic
  class given as ``response_format`` is recorded as its name and JSON schema. So a replay compares calls whatever
  server or key served them.
* A plain call records the typed ``ModelResponse`` (``EmbeddingResponse``, ``TextCompletionResponse``,
  ``ResponsesAPIResponse``) whole: the fields LiteLLM leaves out of an object (a ``Message`` without ``audio``),
  the extra fields (``usage``), which fields were set and the hidden params (``response._hidden_params``: cost,
  provider, headers) are rebuilt as they were, so the replayed value equals the recorded one.
* ``stream=True`` records each ``ModelResponseStream`` chunk as it is read, ``for`` or ``async for``; a replay hands
  back a ``CustomStreamWrapper`` (a subclass: ``isinstance`` holds) that yields the recorded chunks either way, so
  ``litellm.stream_chunk_builder(chunks)`` rebuilds the same response. Responses API streams record their events
  the same way.
* The span carries the GenAI attributes: ``gen_ai.provider.name`` as LiteLLM resolves it for the call (``openai``,
  ``anthropic``…), the request model and sampling parameters, the response model and id, finish reasons and usage.

``instrument()`` rebinds every module-level name bound to one of these functions (``from litellm import
completion`` executed before it included); a reference kept elsewhere (a local variable, a default argument, a
``functools.partial``) keeps LiteLLM's unrecorded function. It also registers LiteLLM's response types with the
codec, so call it before replaying a trace in a new process too.

LiteLLM downloads its model price list when it is imported, retrying in a background thread when that fails; a
replay's network guard refuses those requests. ``instrument()`` sets ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (the
price list bundled with LiteLLM) when LiteLLM is not imported yet and neither that variable nor
``LITELLM_OFFLINE_MODE`` is set; when LiteLLM was imported first without them, it says so once in the log.

LiteLLM sends OpenAI-compatible requests through the OpenAI client's low-level ``post`` and its other providers
through its own HTTP client, so :mod:`chronicle_otel.integrations.openai` and ``.anthropic`` see nothing of a LiteLLM
call: with both on, a LiteLLM call is recorded once, at this layer.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import importlib
import importlib.util
import inspect
import os
import sys
import threading
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from opentelemetry import trace as trace_api

from .. import semconv
from .._internal import hooks
from .._internal.errors import warn_once
from ..codec import register_type
from ..record.adapters import (
    Arguments,
    RecordingAsyncStream,
    RecordingStream,
    ReplayedStream,
    StreamAdapter,
    StreamRecorder,
    StreamReplay,
)
from ..record.extension import BoundaryKind, Wrapper, wrap
from ._common import chat_chunk_attributes, require, response_event_attributes

__all__ = ["EXCLUDED", "instrument", "uninstrument"]

EXCLUDED: Final = frozenset(
    {
        # where and how the request goes, not what it asks
        "api_key",
        "api_base",
        "base_url",
        "api_version",
        "organization",
        "extra_headers",
        "headers",
        "client",
        "shared_session",
        "timeout",
        "stream_timeout",
        "model_list",
        # bookkeeping for LiteLLM's logging and litellm.Router (ids made per call, the deployment's hash and URL)
        "metadata",
        "litellm_metadata",
        "model_info",
        "litellm_logging_obj",
        "litellm_call_id",
        "litellm_trace_id",
        "litellm_session_id",
        "litellm_parent_otel_span",
        "proxy_server_request",
        "secret_fields",
        # cloud credentials
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
        "aws_web_identity_token",
        "aws_role_name",
        "aws_session_name",
        "aws_profile_name",
        "azure_ad_token",
        "azure_ad_token_provider",
        "azure_username",
        "azure_password",
        "client_secret",
        "vertex_credentials",
        "vertex_ai_credentials",
    }
)
"""Arguments never recorded (nor any whose name starts with ``_``: LiteLLM's internal state, which Router passes):
connection settings and logging bookkeeping (they differ between the recording and a replay without changing what
the model is asked) and credentials."""

_COST_MAP_VARIABLES: Final = ("LITELLM_LOCAL_MODEL_COST_MAP", "LITELLM_OFFLINE_MODE")

_TYPE_MODULES: Final = ("litellm.types.utils", "litellm.types.llms.openai", "litellm.types.responses.main")
"""The modules of LiteLLM's response types (``ModelResponse``, ``Message``, ``Usage``, ``ResponsesAPIResponse``…),
imported if need be; every other ``litellm.types`` module imported by then is registered too."""

_lock = threading.Lock()

#: Set while a call of one instrumented function runs: the span that was current when it started. LiteLLM's own
#: calls of instrumented functions inside it go straight through.
_INSIDE: contextvars.ContextVar[Any] = contextvars.ContextVar("chronicle_litellm_inside", default=None)


@dataclasses.dataclass(frozen=True)
class _Seam:
    """One public LiteLLM function this integration records."""

    attribute: str
    """Its name on the ``litellm`` module, also its boundary's (``litellm.<attribute>``)."""
    is_async: bool
    stream: str | None = None
    """What ``stream=True`` returns: ``chat`` (a ``CustomStreamWrapper``), ``responses`` (a Responses API
    streaming iterator), ``text`` (a ``TextCompletionStreamWrapper``), or None."""
    async_flag: str | None = None
    """The keyword that makes this sync function return its async twin's coroutine (``acompletion=True``)."""


_SEAMS: Final = (
    _Seam("completion", False, "chat", "acompletion"),
    _Seam("acompletion", True, "chat"),
    _Seam("responses", False, "responses", "aresponses"),
    _Seam("aresponses", True, "responses"),
    _Seam("text_completion", False, "text", "atext_completion"),
    _Seam("atext_completion", True, "text"),
    _Seam("embedding", False, None, "aembedding"),
    _Seam("aembedding", True, None),
)


@dataclasses.dataclass
class _Installed:
    """One instrumented function: LiteLLM's original, the boundary around it and what stands in for it."""

    seam: _Seam
    original: Callable[..., Any]
    boundary: Wrapper
    dispatcher: Callable[..., Any]
    active: bool = True


_installed: dict[str, _Installed] = {}


# ------------------------------------------------------------------------------------ what a call records


@dataclasses.dataclass(frozen=True)
class _CallArguments(Arguments):
    """The arguments the caller passed, ``**kwargs`` flattened in, without :data:`EXCLUDED`.

    Values the codec cannot store as they are (a pydantic class as ``response_format``, a callback) are recorded as
    what they name.
    """

    var_keyword: str = "kwargs"

    def select(self, bound: dict[str, Any]) -> dict[str, Any]:
        """The recorded arguments of one call.

        A call a ``litellm.Router`` makes records the model group it was asked for, not the deployment the router
        picked for it (at random, by load or latency): an unchanged replay then compares equal whichever deployment
        is picked now.
        """
        exclude = self.exclude
        out: dict[str, Any] = {}
        group: Any = None
        for key, value in bound.items():
            if key == self.var_keyword and type(value) is dict:
                group = _model_group(value) if group is None else group
                for name, item in value.items():
                    if name not in exclude and not (type(name) is str and name.startswith("_")):
                        out[name] = _recordable(item)
            elif key not in exclude:
                out[key] = _recordable(value)
        if group is not None and "model" in out:
            out["model"] = group
        return out


def _model_group(kwargs: dict[str, Any]) -> str | None:
    """The model group of a call a Router made (its ``metadata``), or None for a direct call."""
    for key in ("metadata", "litellm_metadata"):
        metadata = kwargs.get(key)
        if isinstance(metadata, dict):
            group = metadata.get("model_group")
            if isinstance(group, str) and group:
                return group
    return None


def _recordable(value: Any) -> Any:
    """``value``, or what it names when it is a class or a function (neither can be stored as a value)."""
    if isinstance(value, type):
        return _class_argument(value)
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial)):
        return {"function": _qualified(value)}
    return value


@functools.lru_cache(maxsize=256)
def _class_argument(cls: type) -> dict[str, Any]:
    """A class argument as its name, and for a pydantic model (``response_format=Order``) its JSON schema."""
    described: dict[str, Any] = {"class": _qualified(cls)}
    schema = getattr(cls, "model_json_schema", None)
    if callable(schema):
        with contextlib.suppress(Exception):  # a model whose schema cannot be generated: its name only
            described["json_schema"] = schema()
    return described


def _qualified(obj: Any) -> str:
    target = obj.func if isinstance(obj, functools.partial) else obj
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', type(target).__qualname__)}"


def _provider_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """The provider LiteLLM routes a call to (``openai``, ``anthropic``…), or None when it cannot tell."""
    model = kwargs.get("model", args[0] if args else None)
    if not isinstance(model, str):
        return None
    litellm = sys.modules.get("litellm")
    resolve = getattr(litellm, "get_llm_provider", None)
    if resolve is None:
        return None
    try:
        found = resolve(
            model=model,
            custom_llm_provider=kwargs.get("custom_llm_provider"),
            api_base=kwargs.get("api_base") or kwargs.get("base_url"),
        )
    except Exception:  # a model LiteLLM cannot route: the call fails on its own, the span has no provider
        return None
    provider = found[1] if isinstance(found, tuple) and len(found) > 1 else None
    return provider if isinstance(provider, str) and provider else None


def _note_provider(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Put the call's provider on its span (the boundary's own span only: not when recording is off)."""
    parent = _INSIDE.get()
    span = trace_api.get_current_span()
    if span is parent or not span.is_recording():
        return
    provider = _provider_of(args, kwargs)
    if provider is not None:
        span.set_attribute(semconv.GEN_AI_PROVIDER_NAME, provider)


def _body(original: Callable[..., Any], is_async: bool) -> Callable[..., Any]:
    """What the boundary runs: LiteLLM's function, the provider noted on the span first."""
    if is_async:

        async def call_async(*args: Any, **kwargs: Any) -> Any:
            with contextlib.suppress(Exception):  # an attribute the span lacks, never the call
                _note_provider(args, kwargs)
            return await original(*args, **kwargs)

        return functools.update_wrapper(call_async, original)

    def call(*args: Any, **kwargs: Any) -> Any:
        with contextlib.suppress(Exception):
            _note_provider(args, kwargs)
        return original(*args, **kwargs)

    return functools.update_wrapper(call, original)


def _dispatcher(entry: _Installed) -> Callable[..., Any]:
    """What the instrumented names hold.

    The boundary; or LiteLLM's function itself when uninstrumented, or inside another instrumented call.
    """
    original, seam = entry.original, entry.seam
    flag = seam.async_flag

    if seam.is_async:

        async def dispatch_async(*args: Any, **kwargs: Any) -> Any:
            if not entry.active or _INSIDE.get() is not None:
                return await original(*args, **kwargs)
            token = _INSIDE.set(trace_api.get_current_span())
            try:
                return await entry.boundary(*args, **kwargs)
            finally:
                _INSIDE.reset(token)

        return functools.update_wrapper(dispatch_async, original)

    def dispatch(*args: Any, **kwargs: Any) -> Any:
        # ``completion(..., acompletion=True)`` returns the coroutine of ``acompletion``, recorded there
        if not entry.active or _INSIDE.get() is not None or (flag is not None and kwargs.get(flag)):
            return original(*args, **kwargs)
        token = _INSIDE.set(trace_api.get_current_span())
        try:
            return entry.boundary(*args, **kwargs)
        finally:
            _INSIDE.reset(token)

    return functools.update_wrapper(dispatch, original)


def _var_keyword(func: Callable[..., Any]) -> str:
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return "kwargs"
    return next((p.name for p in parameters if p.kind is inspect.Parameter.VAR_KEYWORD), "kwargs")


# ------------------------------------------------------------------------------------ streams


class _RecordingStreamWrapper(RecordingStream, RecordingAsyncStream):
    """A ``CustomStreamWrapper`` (or a Responses API iterator) recorded as it is read, ``for`` or ``async for``."""

    async def aclose(self) -> Any:
        """Close the stream; it is recorded as abandoned unless it had already ended."""
        try:
            close = getattr(self.__wrapped__, "aclose", None)
            result = close() if close is not None else self.__wrapped__.close()
            if inspect.isawaitable(result):
                result = await result
            return result
        finally:
            self._self_recorder.end("abandoned")


class _DeferredRecorder:
    """Hands a chunk to the stream's recorder when the next one is read (or the stream ends), not at once.

    LiteLLM completes the last chunk it returned when the stream ends (the usage in its hidden params, which
    ``stream_chunk_builder`` reads): the recording holds each chunk as the consumer is left with it.
    """

    __slots__ = ("_pending", "_recorder")

    _NOTHING: Final = object()

    def __init__(self, recorder: StreamRecorder) -> None:
        self._recorder = recorder
        self._pending: Any = self._NOTHING

    @property
    def done(self) -> bool:
        """True once the stream has ended."""
        return self._recorder.done

    @property
    def items(self) -> list[Any]:
        """The items handed to the recorder so far."""
        return self._recorder.items

    def item(self, value: Any) -> None:
        """One chunk read: the one before it is complete."""
        self._flush()
        self._pending = value

    def end(self, state: Any, exc: BaseException | None = None) -> None:
        """The stream ended: the last chunk, then its end."""
        self._flush()
        self._recorder.end(state, exc)

    def _flush(self) -> None:
        pending, self._pending = self._pending, self._NOTHING
        if pending is not self._NOTHING:
            self._recorder.item(pending)


def _record(stream: Any, recorder: StreamRecorder) -> Any:
    deferred: Any = _DeferredRecorder(recorder)
    return _RecordingStreamWrapper(stream, deferred)


class _ReplayedLogging:
    """What a replayed stream offers as LiteLLM's logging object.

    The call details ``litellm.Router`` reads when it wraps a stream; a replay logs nothing through LiteLLM.
    """

    def __init__(self, provider: str | None) -> None:
        self.model_call_details: dict[str, Any] = {"litellm_params": {}, "custom_llm_provider": provider}
        self.optional_params: dict[str, Any] = {}
        self.stream_options = None
        self.messages = None


class _ReplayedStreamWrapper:
    """The replayed stream of a ``stream=True`` call: the recorded chunks, ``for`` or ``async for``.

    Made a subclass of LiteLLM's stream class (``isinstance(stream, litellm.CustomStreamWrapper)`` holds); none of
    LiteLLM's own stream code runs.
    """

    def __init__(self, replayed: StreamReplay, model: Any, provider: str | None) -> None:
        self._chronicle_items = ReplayedStream(replayed.items, replayed.error, replayed.state)
        self.model = model
        self.custom_llm_provider = provider
        self.completion_stream = None
        self.make_call = None
        self.logging_obj = _ReplayedLogging(provider)
        self.response_id = None
        self.chunks: list[Any] = []
        self.responses_api_response = None
        self.completed_response = None
        self.finished = False
        with contextlib.suppress(AttributeError):
            self.hidden_params: dict[str, Any] = {}  # CustomStreamWrapper's public property; the attribute elsewhere

    def __iter__(self) -> _ReplayedStreamWrapper:
        return self

    def __next__(self) -> Any:
        item = next(self._chronicle_items)
        self.chunks.append(item)
        return item

    def __aiter__(self) -> _ReplayedStreamWrapper:
        return self

    async def __anext__(self) -> Any:
        try:
            return self.__next__()
        except StopIteration:
            raise StopAsyncIteration from None

    def close(self) -> None:
        """Stop the stream: later reads end at once."""
        self._chronicle_items.close()

    async def aclose(self) -> None:
        """Stop the stream: later reads end at once."""
        self._chronicle_items.close()

    def __enter__(self) -> _ReplayedStreamWrapper:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> _ReplayedStreamWrapper:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        """Nothing to release: LiteLLM's own clean-up never runs for a replayed stream."""


@functools.cache
def _replayed_class(base: type) -> type:
    return type(f"Replayed{base.__name__}", (_ReplayedStreamWrapper, base), {"__module__": __name__})


def _stream_adapter(kind: str, classes: tuple[type, ...], stand_in_base: type) -> StreamAdapter:
    def is_stream(value: Any) -> bool:
        return isinstance(value, classes)

    def stand_in(replayed: StreamReplay) -> Any:
        model = replayed.kwargs.get("model", replayed.args[0] if replayed.args else None)
        provider = _provider_of(replayed.args, replayed.kwargs)
        return _replayed_class(stand_in_base)(replayed, model, provider)

    attributes = response_event_attributes if kind == "responses" else chat_chunk_attributes
    return StreamAdapter(is_stream=is_stream, record=_record, replay=stand_in, attributes=attributes)


def _adapters() -> dict[str, StreamAdapter]:
    from litellm import CustomStreamWrapper

    adapters = {"chat": _stream_adapter("chat", (CustomStreamWrapper,), CustomStreamWrapper)}
    text = _optional_class("litellm.text_completions.streaming_iterator", "TextCompletionStreamWrapper")
    if text is not None:
        adapters["text"] = _stream_adapter("text", (text,), text)
    responses = _optional_class("litellm.responses.streaming_iterator", "BaseResponsesAPIStreamingIterator")
    if responses is not None:
        adapters["responses"] = _stream_adapter("responses", (responses,), responses)
    return adapters


def _optional_class(module: str, name: str) -> type | None:
    """A LiteLLM class that not every version has (checked with 1.110.2); None without it."""
    try:
        found = getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None
    return found if isinstance(found, type) else None


# ------------------------------------------------------------------------------------ LiteLLM's types


def _register_types() -> None:
    """Teach the codec LiteLLM's response models.

    Their custom ``__init__``s delete the optional fields they were not given (``Message.audio``), which the codec's
    pydantic encoding expects every instance to have.
    """
    pydantic = require("pydantic", "pydantic")
    base = pydantic.BaseModel
    for module_name in _TYPE_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(module_name)
    for module_name, module in list(sys.modules.items()):
        if not (module_name == "litellm.types" or module_name.startswith("litellm.types.")):
            continue
        for value in list(getattr(module, "__dict__", {}).values()):
            if isinstance(value, type) and issubclass(value, base) and value.__module__ == module_name:
                register_type(value, encode=_encode_model, decode=_decoder(value))


def _encode_model(model: Any) -> dict[str, Any]:
    """A LiteLLM model as the state it has.

    Its fields present (``_absent`` the others), its extra fields, the fields set, its private attributes and other
    instance attributes.
    """
    cls = type(model)
    fields = cls.model_fields
    namespace = object.__getattribute__(model, "__dict__")
    data: dict[str, Any] = {}
    attrs: dict[str, Any] = {}
    for key, value in namespace.items():
        if key in fields:
            data[key] = value
        else:
            attrs[key] = value
    absent = [name for name in fields if name not in namespace]
    if absent:
        data["_absent"] = absent
    extra = model.__pydantic_extra__
    if extra:
        data["_extra"] = dict(extra)
    fields_set = model.__pydantic_fields_set__
    if fields_set != {*(k for k in data if k in fields), *(extra or ())}:  # else the rebuild derives it
        data["_set"] = sorted(fields_set)
    private = model.__pydantic_private__
    if private:
        changed = _changed_private(cls, private)
        if changed:
            data["_private"] = changed
    if attrs:
        data["_attrs"] = attrs
    return data


def _changed_private(cls: Any, private: dict[str, Any]) -> dict[str, Any]:
    """The private attributes whose value is not the class's default (the rebuild starts from the defaults)."""
    declared = getattr(cls, "__private_attributes__", None) or {}
    changed: dict[str, Any] = {}
    for key, value in private.items():
        attribute = declared.get(key)
        try:
            if attribute is not None and value == attribute.get_default():
                continue
        except Exception:  # a default that cannot be made or compared: the value is recorded
            pass
        changed[key] = value
    return changed


def _undefined() -> Any:
    try:
        from pydantic_core import PydanticUndefined
    except ImportError:  # pragma: no cover - pydantic 2 always has it
        return object()
    return PydanticUndefined


_UNDEFINED: Final = _undefined()


def _decoder(cls: Any) -> Callable[[Any], Any]:
    def decode(data: Any) -> Any:
        return _decode_model(cls, data)

    return decode


def _decode_model(cls: Any, data: Any) -> Any:
    """The model :func:`_encode_model` recorded.

    Only the class's own fields, its declared private attributes and instance attributes that shadow nothing of the
    class are set (the data comes from a trace: untrusted).
    """
    if type(data) is not dict:
        raise TypeError("a LiteLLM model is recorded as a mapping")
    fields = cls.model_fields
    model = cls.model_construct(**{k: v for k, v in data.items() if k in fields})
    namespace = object.__getattribute__(model, "__dict__")
    for name in _names(data.get("_absent")):
        if name in fields:
            namespace.pop(name, None)
    extra = data.get("_extra")
    if type(extra) is dict and model.__pydantic_extra__ is not None:
        object.__setattr__(model, "__pydantic_extra__", {k: v for k, v in extra.items() if type(k) is str})
    fields_set = data.get("_set")
    if fields_set is None:  # every field present and every extra field was set
        fields_set = [*(k for k in namespace if k in fields), *(model.__pydantic_extra__ or ())]
    object.__setattr__(model, "__pydantic_fields_set__", set(_names(fields_set)))
    declared = getattr(cls, "__private_attributes__", None) or {}
    if declared:
        store = model.__pydantic_private__
        if store is None:  # a class whose model_construct leaves its private attributes to __init__
            store = {}
            for key, attribute in declared.items():
                with contextlib.suppress(Exception):
                    default = attribute.get_default()
                    if default is not _UNDEFINED:
                        store[key] = default
            object.__setattr__(model, "__pydantic_private__", store)
        private = data.get("_private")
        if type(private) is dict:
            for key, value in private.items():
                if key in declared:
                    store[key] = value
    attrs = data.get("_attrs")
    if type(attrs) is dict:
        class_names = {name for klass in cls.__mro__ for name in vars(klass)}
        for key, value in attrs.items():
            if type(key) is str and key.startswith("_") and not key.startswith("__") and key not in class_names:
                namespace[key] = value
    return model


def _names(value: Any) -> Iterator[str]:
    if type(value) is list:
        yield from (v for v in value if type(v) is str)


# ------------------------------------------------------------------------------------ module-level names


def _rebind(replacements: Mapping[int, tuple[Any, Any]]) -> int:
    """In every imported module, each global bound to a key object (by identity) rebound to its replacement.

    Returns how many were.
    """
    count = 0
    for module in list(sys.modules.values()):
        if not isinstance(module, types.ModuleType):
            continue
        try:
            namespace = vars(module)
        except TypeError:
            continue
        for name, value in list(namespace.items()):
            pair = replacements.get(id(value))
            if pair is None or pair[0] is not value:
                continue
            try:
                setattr(module, name, pair[1])
            except Exception:  # a module that refuses assignment keeps LiteLLM's function there
                warn_once(
                    f"litellm-rebind-{module.__name__}.{name}",
                    "chronicle_otel: could not instrument %s.%s (LiteLLM calls through it are not recorded)",
                    module.__name__,
                    name,
                )
                continue
            count += 1
    return count


def _cost_map() -> None:
    """LiteLLM's price list from its own package, not the internet (see the module documentation)."""
    if any(os.environ.get(name) for name in _COST_MAP_VARIABLES):
        return
    if "litellm" not in sys.modules:
        if importlib.util.find_spec("litellm") is not None:  # installed: it reads the variable when imported
            os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        return
    warn_once(
        "litellm-cost-map",
        "chronicle_otel: litellm was imported without LITELLM_LOCAL_MODEL_COST_MAP=True: it downloads its model "
        "price list (retrying in a background thread when offline), which a replay's network guard refuses; set "
        "the variable before importing litellm",
    )


# ------------------------------------------------------------------------------------ instrument / uninstrument


def instrument() -> list[str]:
    """Record every call of LiteLLM's completion, responses, text completion and embedding functions.

    Each call is an ``llm`` boundary named after the function.

    Rebinds those functions on the ``litellm`` module and in every module that imported them by name, so calls
    through ``litellm.completion``, ``from litellm import completion`` and ``litellm.Router`` are recorded. Calling
    it again is a no-op.

    Returns:
        The boundary names instrumented (``litellm.completion``, ``litellm.acompletion``…).

    Raises:
        ConfigError: the ``litellm`` package is not installed (``pip install 'chronicle-otel[litellm]'``).
    """
    with _lock:
        _cost_map()
        litellm = require("litellm", "litellm")
        hooks.register_packages("litellm.", "openai.")  # LiteLLM's responses hold OpenAI SDK types too
        _register_types()
        adapters = _adapters()
        replacements: dict[int, tuple[Any, Any]] = {}
        for seam in _SEAMS:
            current = getattr(litellm, seam.attribute, None)
            entry = _installed.get(seam.attribute)
            if entry is not None and current is entry.dispatcher:
                continue  # instrumented already
            if not callable(current):
                continue  # a function this LiteLLM version does not have
            entry = _install(seam, current, adapters)
            replacements[id(current)] = (current, entry.dispatcher)
        if replacements:
            _rebind(replacements)
        return [f"litellm.{seam.attribute}" for seam in _SEAMS if seam.attribute in _installed]


def _install(seam: _Seam, original: Callable[..., Any], adapters: Mapping[str, StreamAdapter]) -> _Installed:
    body = _body(original, seam.is_async)
    boundary = wrap(
        body,
        name=f"litellm.{seam.attribute}",
        kind=BoundaryKind.LLM,
        attributes=None,
        enabled=None,
        provider=None,
        config=None,
        arguments=_CallArguments(passed_only=True, exclude=EXCLUDED, var_keyword=_var_keyword(original)),
        stream=adapters.get(seam.stream) if seam.stream is not None else None,
    )
    entry = _Installed(seam, original, boundary, original)
    entry.dispatcher = _dispatcher(entry)
    _installed[seam.attribute] = entry
    return entry


def uninstrument() -> int:
    """Put LiteLLM's own functions back wherever :func:`instrument` put its stand-ins.

    Returns:
        How many functions were instrumented.
    """
    with _lock:
        entries = list(_installed.values())
        _installed.clear()
        for entry in entries:
            entry.active = False  # a stand-in still held somewhere calls LiteLLM's function straight through
        if entries:
            _rebind({id(e.dispatcher): (e.dispatcher, e.original) for e in entries})
        return len(entries)
