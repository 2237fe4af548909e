"""What the SDK integrations share: instrumenting a list of methods at once, and the SDK-typed replay streams."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import threading
from collections.abc import Callable
from typing import Any

from .. import semconv
from ..errors import ConfigError
from ..record.adapters import Arguments, AsyncReplayedStream, ReplayedStream, StreamAdapter
from ..record.extension import (
    field_of,
    finish_reasons,
    instrument,
    outcome_attributes,
    response_attributes,
    uninstrument,
    usage_attributes,
)

_lock = threading.Lock()


@dataclasses.dataclass(frozen=True)
class Method:
    """One SDK method an integration instruments.

    Attributes:
        module: the module that defines the resource class.
        path: ``Class.method`` in that module.
        name: the boundary name (the same for the sync and async client).
        stream: how the stream objects it returns are recorded and replayed, if it streams.
    """

    module: str
    path: str
    name: str
    stream: StreamAdapter | None = None


@dataclasses.dataclass(frozen=True)
class SdkArguments(Arguments):
    """:class:`Arguments` that record a class passed as an argument (``response_format=Order``,
    ``text_format=Order``, ``output_format=Order``) as its name and JSON schema: a class is not a value the codec
    stores, and a changed schema is a changed request."""

    def select(self, bound: dict[str, Any]) -> dict[str, Any]:
        """``bound`` without the excluded names and skipped values, classes described."""
        selected = super().select(bound)
        if any(isinstance(value, type) for value in selected.values()):
            selected = {k: describe_class(v) if isinstance(v, type) else v for k, v in selected.items()}
        return selected


@functools.lru_cache(maxsize=256)
def describe_class(cls: type) -> dict[str, Any]:
    """``{"class": "module.Qualname", "json_schema": {...}}`` (the schema of a pydantic model only)."""
    described: dict[str, Any] = {"class": f"{cls.__module__}.{cls.__qualname__}"}
    schema = getattr(cls, "model_json_schema", None)
    if callable(schema):
        try:
            described["json_schema"] = schema()
        except Exception:  # a model whose schema cannot be generated: its name alone
            described.pop("json_schema", None)
    return described


def sdk_arguments(sdk: Any) -> Arguments:
    """Only the arguments the caller passed, without the SDK's "not given" sentinels (``NotGiven``, ``Omit``)
    and without extra headers (they may carry credentials); a class argument recorded as its name and schema."""
    found = (getattr(sdk, "NotGiven", None), getattr(sdk, "Omit", None))
    sentinels = tuple(t for t in found if isinstance(t, type))
    return SdkArguments(passed_only=True, skip=lambda value: isinstance(value, sentinels), exclude={"extra_headers"})


def require(package: str, extra: str) -> Any:
    """Import ``package`` or say which extra installs it.

    Raises:
        ConfigError: the SDK is not installed.
    """
    try:
        return importlib.import_module(package)
    except ImportError:
        raise ConfigError(
            "integration", package, f"the {package} package installed (pip install 'chronicle-otel[{extra}]')"
        ) from None


def install(methods: list[Method], *, provider: str, arguments: Arguments) -> list[str]:
    """Instrument every method that exists in the installed SDK version; returns the boundary names."""
    names: list[str] = []
    with _lock:
        for method in methods:
            try:
                module = importlib.import_module(method.module)
            except ImportError:
                continue  # a resource this SDK version does not have (``client.beta.responses`` before openai 3)
            function = _lookup(module, method.path)
            if function is None:
                continue  # a method this SDK version does not have
            uninstrument(module, method.path)  # instrumented by hand before: the integration's settings win
            instrument(
                module,
                method.path,
                name=method.name,
                kind="llm",
                provider=provider,
                arguments=arguments,
                stream=method.stream,
                # The SDKs' argument-checking decorator hides the ``async def`` of their async clients' methods.
                asynchronous=inspect.iscoroutinefunction(inspect.unwrap(function)) or None,
            )
            if method.name not in names:
                names.append(method.name)
    return names


def uninstall(methods: list[Method]) -> int:
    """Put the original methods back; returns how many were instrumented."""
    undone = 0
    with _lock:
        for method in methods:
            try:
                module = importlib.import_module(method.module)
            except ImportError:
                continue
            if _lookup(module, method.path) is not None and uninstrument(module, method.path):
                undone += 1
    return undone


def _lookup(module: Any, path: str) -> Any:
    owner: Any = module
    for part in path.split("."):
        owner = getattr(owner, part, None)
        if owner is None:
            return None
    return owner


@functools.cache
def replayed_stream_class(sdk_stream: type, is_async: bool) -> type:
    """A replay stream class that is also a subclass of the SDK's stream class (``isinstance(s, openai.Stream)``
    holds); every method comes from :class:`ReplayedStream` / :class:`AsyncReplayedStream`, none from the SDK."""
    base = AsyncReplayedStream if is_async else ReplayedStream
    return type(f"Replayed{sdk_stream.__name__}", (base, sdk_stream), {"__module__": __name__})


def default_stand_in(sdk_sync: type, sdk_async: type) -> Callable[[Any], Any]:
    """Builds the SDK-typed replay stream of a recorded ``stream=True`` call."""

    def stand_in(replayed: Any) -> Any:
        cls = replayed_stream_class(sdk_async if replayed.is_async else sdk_sync, replayed.is_async)
        return cls(replayed.items, replayed.error, replayed.state)

    return stand_in


def chat_chunk_attributes(chunks: list[Any]) -> dict[str, Any]:
    """GenAI attributes of a streamed chat completion: id and model from the chunks, the finish reason of each
    choice, and the usage of the last chunk that has one (``stream_options={"include_usage": True}``)."""
    out: dict[str, Any] = {}
    reasons: dict[int, str] = {}
    for chunk in chunks:
        for key, field in ((semconv.GEN_AI_RESPONSE_ID, "id"), (semconv.GEN_AI_RESPONSE_MODEL, "model")):
            value = field_of(chunk, field)
            if isinstance(value, str) and value:
                out.setdefault(key, value)
        for choice in field_of(chunk, "choices") or ():
            reason, index = field_of(choice, "finish_reason"), field_of(choice, "index")
            if isinstance(reason, str):
                reasons[index if isinstance(index, int) else len(reasons)] = reason
        usage = field_of(chunk, "usage")
        if usage is not None:
            out.update(usage_attributes(usage))
    if reasons:
        out[semconv.GEN_AI_RESPONSE_FINISH_REASONS] = tuple(reasons[i] for i in sorted(reasons))
    return out


def response_event_attributes(events: list[Any]) -> dict[str, Any]:
    """GenAI attributes of a streamed OpenAI response: from the response the last ``response.*`` event carries
    (``response.completed``, ``response.incomplete`` or ``response.failed``)."""
    for event in reversed(events):
        response = field_of(event, "response")
        if response is not None:
            out = response_attributes(response)
            status = field_of(response, "status")
            if isinstance(status, str) and semconv.GEN_AI_RESPONSE_FINISH_REASONS not in out:
                out[semconv.GEN_AI_RESPONSE_FINISH_REASONS] = (status,)
            return out
    return {}


def message_event_attributes(events: list[Any]) -> dict[str, Any]:
    """GenAI attributes of a streamed Anthropic message: id, model and input tokens from ``message_start``, the
    stop reason and output tokens from ``message_delta``."""
    out: dict[str, Any] = {}
    for event in events:
        kind = field_of(event, "type")
        if kind == "message_start":
            message = field_of(event, "message")
            out.update(response_attributes(message))
        elif kind == "message_delta":
            out.update(outcome_attributes(finish_reasons(field_of(event, "delta")), field_of(event, "usage")))
    return out
