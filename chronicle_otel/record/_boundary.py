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

This module holds the decorator and gathers the recording API for the package's top level. The parts:
``_spec`` (kinds, the per-function spec, the wrapt wrapper), ``_recording`` (one call's span, start to
end), ``_payloads`` (payload attributes and the recorded exception), ``_call_index``, ``_genai``
(GenAI and OpenInference attributes), ``_call_block`` (``call(...)``), ``_instrument``, and in
``_internal``: ``binding``, ``streams`` (the generator driver) and ``errors`` (the failure policy).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar, overload

from .._api import publish
from .._internal import boundary_factory
from .._internal.boundary_factory import BoundaryDecorator
from ..config import ChronicleConfig
from ._call_block import call
from ._instrument import instrument, uninstrument
from ._spec import BoundaryKind, checked_attributes, parse_kind, wrap
from .session_attrs import AttributeValue

__all__ = ["BoundaryDecorator", "BoundaryKind", "boundary", "call", "instrument", "uninstrument"]

F = TypeVar("F", bound=Callable[..., Any])


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
        ConfigError: ``kind`` is not a valid kind, or an attribute value is not a str, bool, int or float.

    Example::

        @boundary(kind="llm", name="plan")
        def plan(request: str, *, model: str = "gpt-4.1-mini") -> Order: ...
    """
    boundary_kind = parse_kind(kind)
    static = checked_attributes(attributes)

    def decorate(target: Any) -> Any:
        if enabled is False:
            return target
        return wrap(
            target,
            name=name,
            kind=boundary_kind,
            attributes=static,
            enabled=enabled if callable(enabled) else None,
            provider=provider,
            config=config,
        )

    if func is not None:
        return decorate(func)
    return decorate


boundary_factory.provide(boundary)  # ChronicleConfig.boundary() reaches the decorator through this registry

publish(__name__, globals())
