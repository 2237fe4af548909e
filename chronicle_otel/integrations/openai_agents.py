"""The OpenAI Agents SDK (``openai-agents``, imported as ``agents``): agents recorded at the model and tool seams.

Usage::

    import chronicle_otel as chronicle
    from chronicle_otel.integrations import openai_agents as chronicle_agents

    chronicle.configure()
    chronicle_agents.instrument()      # every Model implementation, defined before or after; every FunctionTool
    ...
    chronicle_agents.uninstrument()    # the SDK's own methods back

Boundaries:

* ``openai_agents.model.get_response`` (``llm``): one call of ``Model.get_response``. The output is the typed
  ``agents.items.ModelResponse`` (its output items, usage, response id), rebuilt typed in a replay.
* ``openai_agents.model.stream_response`` (``llm``, streamed): one call of ``Model.stream_response``. Each
  Responses stream event is recorded as the runner reads it; a replay yields the same typed events, so
  ``Runner.run_streamed(...)`` and ``stream_events()`` run unchanged.
* ``openai_agents.tool.<name>`` (``tool``): one invocation of a ``FunctionTool`` (``@function_tool``, MCP tools,
  agents as tools), named after the tool. The input is ``{"arguments": ...}``: the JSON arguments the model sent,
  parsed (the string itself when it is not JSON); the output is what the tool returned.

Both model methods are patched on every class implementing ``agents.models.interface.Model``, defined before or
after :func:`instrument` (``OpenAIChatCompletionsModel``, ``OpenAIResponsesModel``, ``LitellmModel``, your own).
A subclass whose method calls ``super()``'s is recorded once, at the subclass.
The input of a model call is recorded in a form that compares across runs: the model name (also the span's
``gen_ai.request.model``), ``system_instructions``, ``input``, ``model_settings`` (the fields set, without
``extra_headers``, ``retry`` and the prompt cache key the runner generates per run), ``tools`` (name, description
and JSON schema), ``output_schema`` (name, JSON schema, strictness), ``handoffs`` (tool name, description, schema,
target agent), ``previous_response_id``, ``conversation_id`` and ``prompt`` when set. The ``tracing`` argument is
not recorded: it says how the SDK traces the call, not what the model is asked, and differs between a production
run and its replay.

The SDK's own tracing goes on as before: its processors receive their traces and spans while chronicle records.
In a replay the stubbed model calls are not made, so their ``generation``/``response`` spans are not emitted.

With the ``openai`` SDK integration on too, both record: the SDK's ``openai.responses.create`` /
``openai.chat.completions.create`` boundary is a child of the model boundary, and a replay stubbing ``kind:llm``
answers at the Agents SDK layer.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import inspect
import json
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any

import wrapt

from .._internal import hooks
from .._internal.errors import handle_internal_errors, warn_once
from ..record.adapters import Arguments
from ..record.extension import BoundaryKind, Wrapper, wrap
from ._common import require

__all__ = ["GET_RESPONSE", "STREAM_RESPONSE", "TOOL", "TOOL_PREFIX", "instrument", "uninstrument"]

GET_RESPONSE = "openai_agents.model.get_response"
"""The boundary name of ``Model.get_response`` calls."""

STREAM_RESPONSE = "openai_agents.model.stream_response"
"""The boundary name of ``Model.stream_response`` calls."""

TOOL = "openai_agents.tool"
"""The boundary name of a function tool call whose tool has no name."""

TOOL_PREFIX = TOOL + "."
"""Each function tool call is the boundary ``openai_agents.tool.<tool name>``."""

if TYPE_CHECKING:
    _Proxy = wrapt.ObjectProxy[Any]
    _FunctionWrapper = wrapt.FunctionWrapper[..., Any]
else:
    _Proxy = wrapt.ObjectProxy  # not subscriptable at run time before wrapt 2
    _FunctionWrapper = wrapt.FunctionWrapper

_METHODS = ("get_response", "stream_response")
_NAMES = {"get_response": GET_RESPONSE, "stream_response": STREAM_RESPONSE}
_PARAMETERS = ("system_instructions", "input", "model_settings", "tools", "output_schema", "handoffs", "tracing")
_SETTINGS_NOT_RECORDED = frozenset({"extra_headers", "retry"})
"""``extra_headers`` may carry credentials; ``retry`` is the client's retry policy (callables), not the request."""
_RUN_CACHE_KEY = "agents-sdk:run:"
"""The prefix of the prompt cache key the runner generates anew for each run (``RunGroupingKind`` ``run``)."""
_PROVIDERS = {"OpenAIChatCompletionsModel": "openai", "OpenAIResponsesModel": "openai", "LitellmModel": "litellm"}
_INVOKER = "on_invoke_tool"
_CACHED_INVOKER = "_chronicle_otel_invoker"

_lock = threading.RLock()
_tools_on = [False]
_model_guard = handle_internal_errors("recording an openai-agents model call")
_tool_guard = handle_internal_errors("recording an openai-agents tool call")


# ------------------------------------------------------------------------------------ the boundaries


async def _get_response(
    model: str | None,
    system_instructions: str | None,
    input: Any,
    model_settings: Any,
    tools: Any,
    output_schema: Any,
    handoffs: Any,
    previous_response_id: str | None,
    conversation_id: str | None,
    prompt: Any,
    *,
    call: Callable[[], Any],
) -> Any:
    """One ``Model.get_response`` call: the arguments as recorded, and the call itself (never recorded)."""
    return await call()


async def _stream_response(
    model: str | None,
    system_instructions: str | None,
    input: Any,
    model_settings: Any,
    tools: Any,
    output_schema: Any,
    handoffs: Any,
    previous_response_id: str | None,
    conversation_id: str | None,
    prompt: Any,
    *,
    call: Callable[[], Any],
) -> AsyncIterator[Any]:
    """One ``Model.stream_response`` call: its events as the runner reads them; closing it closes the model's."""
    stream = call()
    try:
        async for event in stream:
            yield event
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


async def _invoke_tool(
    arguments: Any, *, tool_name: str | None, invoker: Callable[..., Any], context: Any, raw: str
) -> Any:
    """One function tool invocation: ``arguments`` as recorded; the tool is called with the context and the JSON."""
    result = invoker(context, raw)
    return await result if inspect.isawaitable(result) else result


def _is_none(value: Any) -> bool:
    return value is None


_MODEL_ARGUMENTS = Arguments(skip=_is_none, exclude={"call"})
_TOOL_ARGUMENTS = Arguments(exclude={"tool_name", "invoker", "context", "raw"})
_boundaries: dict[tuple[str, str | None], Wrapper] = {}


def _model_boundary(method: str, provider: str | None) -> Wrapper:
    """The boundary of one model method for one provider (made once)."""
    key = (method, provider)
    found = _boundaries.get(key)
    if found is None:
        with _lock:
            found = _boundaries.get(key)
            if found is None:
                found = wrap(
                    _get_response if method == "get_response" else _stream_response,
                    name=_NAMES[method],
                    kind=BoundaryKind.LLM,
                    attributes=None,
                    enabled=None,
                    provider=provider,
                    config=None,
                    arguments=_MODEL_ARGUMENTS,
                )
                _boundaries[key] = found
    return found


def _tool_name_of(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    name = kwargs.get("tool_name")
    return name if isinstance(name, str) else None


def _tool_boundary() -> Wrapper:
    key = ("tool", None)
    found = _boundaries.get(key)
    if found is None:
        with _lock:
            found = _boundaries.get(key)
            if found is None:
                found = wrap(
                    _invoke_tool,
                    name=TOOL,
                    kind=BoundaryKind.TOOL,
                    attributes=None,
                    enabled=None,
                    provider=None,
                    config=None,
                    arguments=_TOOL_ARGUMENTS,
                    name_of=_tool_name_of,
                )
                _boundaries[key] = found
    return found


# ------------------------------------------------------------------------------------ model inputs, comparable


def _data(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is plain data the codec records by value (no callables, clients or other live objects)."""
    if value is None or isinstance(value, (str, int, float, bool, enum.Enum)):
        return True
    if depth > 16:
        return False
    if isinstance(value, (list, tuple)):
        return all(_data(v, depth + 1) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _data(v, depth + 1) for k, v in value.items())
    return hasattr(type(value), "model_fields")  # a pydantic model


def _model_settings(settings: Any) -> Any:
    """The settings that were set, without credentials, the retry policy and the per-run prompt cache key."""
    if settings is None or not dataclasses.is_dataclass(settings) or isinstance(settings, type):
        return settings
    out: dict[str, Any] = {}
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name, None)
        if value is not None and field.name not in _SETTINGS_NOT_RECORDED:
            out[field.name] = value
    extra = out.get("extra_args")
    if isinstance(extra, Mapping):
        key = extra.get("prompt_cache_key")
        if isinstance(key, str) and key.startswith(_RUN_CACHE_KEY):
            rest = {k: v for k, v in extra.items() if k != "prompt_cache_key"}
            if rest:
                out["extra_args"] = rest
            else:
                del out["extra_args"]
    return out


def _tool_spec(tool: Any) -> Any:
    """A tool as the model sees it: a function tool's name, description and schema; a hosted tool's settings."""
    spec: dict[str, Any]
    name = getattr(tool, "name", None)
    if isinstance(getattr(tool, "params_json_schema", None), dict):
        qualified = getattr(tool, "qualified_name", None)
        spec = {
            "type": "function",
            "name": qualified if isinstance(qualified, str) else name,
            "description": getattr(tool, "description", None),
            "parameters": tool.params_json_schema,
            "strict": getattr(tool, "strict_json_schema", None),
        }
        return spec
    spec = {"type": type(tool).__name__, "name": name if isinstance(name, str) else None}
    if dataclasses.is_dataclass(tool) and not isinstance(tool, type):
        for field in dataclasses.fields(tool):
            if field.name.startswith("_") or field.name in spec:
                continue
            value = getattr(tool, field.name, None)
            if value is not None and _data(value):
                spec[field.name] = value
    return spec


def _output_schema(schema: Any) -> Any:
    """An output schema as the model sees it: its name, whether it is plain text, its JSON schema, strictness."""
    if schema is None:
        return None
    spec: dict[str, Any] = {"type": type(schema).__name__}
    for key, method in (("name", "name"), ("plain_text", "is_plain_text"), ("strict", "is_strict_json_schema")):
        try:
            spec[key] = getattr(schema, method)()
        except Exception:  # a schema that cannot say: left out, the same in every run
            continue
    if not spec.get("plain_text"):
        try:
            spec["json_schema"] = schema.json_schema()
        except Exception:  # a schema that cannot give one: None, the same in every run
            spec["json_schema"] = None
    return spec


def _handoff_spec(handoff: Any) -> Any:
    """A handoff as the model sees it (a tool) and the agent it hands off to."""
    return {
        key: getattr(handoff, key, None)
        for key in ("tool_name", "tool_description", "input_json_schema", "agent_name", "strict_json_schema")
    }


def _model_name(model: Any) -> str | None:
    name = getattr(model, "model", None)
    return None if name is None else str(name)


def _provider(cls: type) -> str | None:
    for klass in cls.__mro__:
        provider = _PROVIDERS.get(klass.__name__)
        if provider is not None and klass.__module__.startswith("agents."):
            return provider
    return None


def _recorded(model: Any, bound: Mapping[str, Any]) -> dict[str, Any]:
    """The recorded arguments of one model call, from the arguments the runner passed."""
    input_value = bound.get("input")
    return {
        "model": _model_name(model),
        "system_instructions": bound.get("system_instructions"),
        "input": list(input_value) if isinstance(input_value, (list, tuple)) else input_value,
        "model_settings": _model_settings(bound.get("model_settings")),
        "tools": [_tool_spec(t) for t in bound.get("tools") or ()],
        "output_schema": _output_schema(bound.get("output_schema")),
        "handoffs": [_handoff_spec(h) for h in bound.get("handoffs") or ()],
        "previous_response_id": bound.get("previous_response_id"),
        "conversation_id": bound.get("conversation_id"),
        "prompt": bound.get("prompt"),
    }


# ------------------------------------------------------------------------------------ the model seam


class _Patched(_FunctionWrapper):
    """A model class's ``get_response``/``stream_response`` as :func:`instrument` patched it."""


def _bind(signature: inspect.Signature | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments by name: by the method's own signature (``self`` first), else by the interface's."""
    if signature is not None:
        try:
            bound = signature.bind_partial(None, *args, **kwargs)
        except TypeError:
            pass
        else:
            named = dict(bound.arguments)
            for parameter in signature.parameters.values():
                if parameter.kind is inspect.Parameter.VAR_KEYWORD and isinstance(named.get(parameter.name), dict):
                    named.update(named.pop(parameter.name))
            return named
    return {**dict(zip(_PARAMETERS, args, strict=False)), **kwargs}


def _overridden(cls: type, method: str, owner: type) -> bool:
    """Whether a subclass of ``owner`` overrides ``method`` with its own patched one.

    That one records the call: ``owner``'s method is then reached through ``super()`` and records nothing.
    """
    for klass in cls.__mro__:
        member = vars(klass).get(method)
        if member is not None:
            return klass is not owner and isinstance(member, _Patched)
    return False


def _model_wrapper(
    owner: type, method: str, function: Any
) -> Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]:
    try:
        signature: inspect.Signature | None = inspect.signature(function)
    except (TypeError, ValueError):
        signature = None

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if instance is None or isinstance(instance, type):
            return wrapped(*args, **kwargs)  # reached through the class: not a model call this seam knows
        recorded: dict[str, Any] | None = None
        boundary: Wrapper | None = None
        with _model_guard:
            if not _overridden(type(instance), method, owner):
                recorded = _recorded(instance, _bind(signature, args, kwargs))
                boundary = _model_boundary(method, _provider(type(instance)))
        if boundary is None or recorded is None:
            return wrapped(*args, **kwargs)

        def call() -> Any:
            return wrapped(*args, **kwargs)

        return boundary(**recorded, call=call)

    return wrapper


def _model_classes(base: type) -> list[type]:
    """``base`` and every subclass of it defined so far, parents before children."""
    found: list[type] = []
    pending = [base]
    while pending:
        cls = pending.pop(0)
        if cls in found:
            continue
        found.append(cls)
        try:
            pending.extend(cls.__subclasses__())
        except TypeError:
            continue
    return found


def _patch_model(cls: type) -> None:
    """Put the seam on a model class's own ``get_response`` / ``stream_response``."""
    for method in _METHODS:
        current = vars(cls).get(method)
        if current is None or isinstance(current, _Patched) or getattr(current, "__isabstractmethod__", False):
            continue
        if not callable(current):
            continue  # a staticmethod, classmethod or other descriptor: not the interface's method
        setattr(cls, method, _Patched(current, _model_wrapper(cls, method, current)))


_subclass_hook: list[tuple[type, Any]] = []
"""While instrumented: ``(Model, its own __init_subclass__ before, or None)``."""
_class_guard = handle_internal_errors("instrumenting an openai-agents model class")


def _hook_subclasses(model: type) -> None:
    """Model classes defined from now on (``LitellmModel`` imported later, your own) get the seam when created."""
    if _subclass_hook:
        return
    before = model.__dict__.get("__init_subclass__")
    base: Any = model

    def __init_subclass__(cls: type[Any], /, **kwargs: Any) -> None:
        if before is not None:
            before.__func__(cls, **kwargs)
        else:
            super(base, cls).__init_subclass__(**kwargs)
        with _class_guard:
            _patch_model(cls)

    type.__setattr__(model, "__init_subclass__", classmethod(__init_subclass__))
    _subclass_hook.append((model, before))


def _unhook_subclasses() -> None:
    while _subclass_hook:
        model, before = _subclass_hook.pop()
        if before is None:
            type.__delattr__(model, "__init_subclass__")
        else:
            type.__setattr__(model, "__init_subclass__", before)


def _patch_models(base: type) -> None:
    _hook_subclasses(base)
    for cls in _model_classes(base):
        _patch_model(cls)


def _unpatch_models(base: type) -> int:
    _unhook_subclasses()
    undone = 0
    for cls in _model_classes(base):
        for method in _METHODS:
            current = vars(cls).get(method)
            if isinstance(current, _Patched):
                setattr(cls, method, current.__wrapped__)
                undone += 1
    return undone


# ------------------------------------------------------------------------------------ the tool seam


def _parsed(arguments: Any) -> Any:
    """The JSON arguments the model sent, parsed; the string itself when it is not JSON."""
    if isinstance(arguments, (str, bytes, bytearray)):
        try:
            return json.loads(arguments or "{}")
        except ValueError:
            return arguments
    return arguments


def _tool_label(tool: Any) -> str:
    qualified = getattr(tool, "qualified_name", None)
    name = qualified if isinstance(qualified, str) and qualified else getattr(tool, "name", None)
    return TOOL_PREFIX + name if isinstance(name, str) and name else TOOL


class _ToolInvoker(_Proxy):
    """A function tool's ``on_invoke_tool`` as the runner reads it while instrumented.

    It is the tool's own invoker (every attribute, ``isinstance`` and the signature are the invoker's), each call
    recorded as the tool's boundary.
    """

    def __init__(self, wrapped: Any, tool: Any) -> None:
        super().__init__(wrapped)
        self._self_tool = weakref.ref(tool)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tool = self._self_tool()
        if not _tools_on[0] or tool is None or len(args) != 2 or kwargs:
            return self.__wrapped__(*args, **kwargs)
        context, raw = args
        name: str | None = None
        arguments: Any = raw
        with _tool_guard:
            name = _tool_label(tool)
            arguments = _parsed(raw)
        return _tool_boundary()(arguments, tool_name=name, invoker=self.__wrapped__, context=context, raw=raw)

    def __repr__(self) -> str:
        return repr(self.__wrapped__)

    def __copy__(self) -> Any:
        return copy.copy(self.__wrapped__)  # a copy is the invoker's: reading it from a tool records again

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return copy.deepcopy(self.__wrapped__, memo)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return self.__wrapped__.__reduce_ex__(protocol)


class _InvokerSlot:
    """Installed as ``FunctionTool.on_invoke_tool``, a dataclass field kept in each tool's ``__dict__``.

    Reading it gives the tool's invoker behind a recording proxy, made once per tool and invoker (the SDK compares
    invokers by identity); writing it stores the invoker itself. Tools made before :func:`instrument` are covered.
    """

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            raise AttributeError(_INVOKER)
        state = instance.__dict__
        try:
            raw = state[_INVOKER]
        except KeyError:
            raise AttributeError(_INVOKER) from None
        cached = state.get(_CACHED_INVOKER)
        if type(cached) is _ToolInvoker and cached.__wrapped__ is raw and cached._self_tool() is instance:
            return cached
        if not callable(raw):
            return raw
        proxy = _ToolInvoker(raw, instance)
        state[_CACHED_INVOKER] = proxy
        return proxy

    def __set__(self, instance: Any, value: Any) -> None:
        instance.__dict__[_INVOKER] = value.__wrapped__ if type(value) is _ToolInvoker else value

    def __delete__(self, instance: Any) -> None:
        try:
            del instance.__dict__[_INVOKER]
        except KeyError:
            raise AttributeError(_INVOKER) from None


def _patch_tools(function_tool: type) -> None:
    current = vars(function_tool).get(_INVOKER)
    if isinstance(current, _InvokerSlot):
        _tools_on[0] = True
        return
    if current is not None:  # checked with openai-agents 0.24: the field has no default, so no class attribute
        warn_once(
            "openai-agents-invoker",
            "chronicle_otel: this openai-agents version's FunctionTool has a class attribute on_invoke_tool; "
            "function tool calls are not recorded as boundaries",
        )
        return
    setattr(function_tool, _INVOKER, _InvokerSlot())
    _tools_on[0] = True


def _unpatch_tools(function_tool: type) -> int:
    _tools_on[0] = False
    if isinstance(vars(function_tool).get(_INVOKER), _InvokerSlot):
        delattr(function_tool, _INVOKER)
        return 1
    return 0


# ------------------------------------------------------------------------------------ instrument


def instrument() -> list[str]:
    """Record the Agents SDK's model calls as ``llm`` boundaries and its function tool calls as ``tool`` boundaries.

    Patches ``get_response`` and ``stream_response`` of every ``Model`` implementation, defined before or after,
    and ``FunctionTool``'s invoker, so agents, models and tools created before and after are covered. Calling it
    again is a no-op.

    Returns:
        The boundary names: ``openai_agents.model.get_response``, ``openai_agents.model.stream_response`` and
        ``openai_agents.tool.*`` (each tool call is named after its tool; the glob selects them all in a replay).

    Raises:
        ConfigError: the ``openai-agents`` package is not installed (``pip install 'chronicle-otel[openai-agents]'``).
    """
    require("agents", "openai-agents")
    from agents.models import openai_chatcompletions, openai_responses  # noqa: F401 - their classes are patched
    from agents.models.interface import Model
    from agents.tool import FunctionTool

    hooks.register_packages("agents.", "openai.")
    with _lock:
        _patch_models(Model)
        _patch_tools(FunctionTool)
    return [GET_RESPONSE, STREAM_RESPONSE, TOOL_PREFIX + "*"]


def uninstrument() -> int:
    """Put the SDK's own methods back; returns how many were patched.

    Raises:
        ConfigError: the ``openai-agents`` package is not installed.
    """
    require("agents", "openai-agents")
    from agents.models.interface import Model
    from agents.tool import FunctionTool

    with _lock:
        return _unpatch_models(Model) + _unpatch_tools(FunctionTool)
