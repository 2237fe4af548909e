"""``instrument``/``uninstrument``: third-party functions and methods wrapped in place as boundaries.

Usage::

    import openai.resources.chat.completions as completions

    chronicle.instrument(completions, "Completions.create", kind="llm", provider="openai")
    ...
    chronicle.uninstrument(completions, "Completions.create")

The patch is wrapt's (:func:`wrapt.wrap_object`, as OpenTelemetry's contrib instrumentations do):
the attribute is replaced by a function wrapper whose ``__wrapped__`` is the original, looked up in
the defining class's ``__dict__`` so classmethods and staticmethods keep their kind. Undoing puts the
original back, or removes the wrapper when it shadowed an inherited attribute. The wrapper itself
marks an attribute as instrumented: no registry.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, cast

import wrapt

from .._api import publish
from ._spec import BoundaryKind, NameOf, Wrapper, checked_attributes, parse_kind, wrap
from .adapters import Arguments, StreamAdapter
from .session_attrs import AttributeValue

_lock = threading.Lock()


class Instrumented(Wrapper):
    """The function wrapper :func:`instrument` installs; knows whether it created the attribute it occupies."""

    _self_created: bool


def _defines(owner: Any, attribute: str) -> bool:
    try:
        return attribute in vars(owner)
    except TypeError:  # no __dict__
        return False


def _factory(
    name: str | None,
    kind: BoundaryKind,
    attributes: Mapping[str, AttributeValue] | None,
    provider: str | None,
    created: bool,
    arguments: Arguments | None = None,
    stream: StreamAdapter | None = None,
    asynchronous: bool | None = None,
    name_of: NameOf | None = None,
) -> Callable[..., Instrumented]:
    def factory(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Instrumented:
        wrapper = cast(
            Instrumented,
            wrap(
                original,
                name=name,
                kind=kind,
                attributes=attributes,
                enabled=None,
                provider=provider,
                config=None,
                wrapper_type=Instrumented,
                arguments=arguments,
                stream=stream,
                shape="async" if asynchronous else None,
                name_of=name_of,
            ),
        )
        wrapper._self_created = created
        return wrapper

    return factory


def instrument(
    target: Any,
    path: str,
    *,
    name: str | None = None,
    kind: BoundaryKind | str = "custom",
    attributes: Mapping[str, AttributeValue] | None = None,
    provider: str | None = None,
    arguments: Arguments | None = None,
    stream: StreamAdapter | None = None,
    asynchronous: bool | None = None,
    name_of: NameOf | None = None,
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
        arguments: which arguments are recorded (:class:`~chronicle_otel.adapters.Arguments`: only those passed,
            without an SDK's "not given" sentinels or excluded names). Default: every parameter, defaults applied.
        stream: for a method that returns a stream object (``stream=True``), how it is recorded as the consumer
            reads it and what stands in for it in a replay (:class:`~chronicle_otel.adapters.StreamAdapter`).
        asynchronous: True for a method that returns a coroutine although it is not an ``async def`` itself (a
            decorator hides it: ``inspect.iscoroutinefunction`` is false); the span then covers the await, and a
            replay answers with a coroutine. Default: seen from the function.
        name_of: names each call from ``(instance, args, kwargs)`` (a framework's tool seam: one boundary name per
            tool, ``langchain.tool.lookup_order``); a call it names None keeps ``name``. Each name is a boundary of
            its own for call indexes, selectors and replay.

    Raises:
        AttributeError: ``path`` does not exist on ``target``.
        TypeError: the attribute is not callable.
        ConfigError: ``kind`` is not a valid kind, or an attribute value is not a str, bool, int or float.
    """
    boundary_kind = parse_kind(kind)
    static = checked_attributes(attributes)
    with _lock:
        parent, attribute, current = wrapt.resolve_path(target, path)
        if isinstance(current, Instrumented):
            return
        factory = _factory(
            name,
            boundary_kind,
            static,
            provider,
            not _defines(parent, attribute),
            arguments=arguments,
            stream=stream,
            asynchronous=asynchronous,
            name_of=name_of,
        )
        wrapt.wrap_object(parent, attribute, factory)


def uninstrument(target: Any, path: str) -> bool:
    """Undo :func:`instrument`; returns False when the attribute was not instrumented.

    Raises:
        AttributeError: ``path`` does not exist on ``target``.
    """
    with _lock:
        parent, attribute, current = wrapt.resolve_path(target, path)
        if not isinstance(current, Instrumented) or not _defines(parent, attribute):
            return False  # not instrumented, or instrumented on a base class: undo it there
        if current._self_created:
            delattr(parent, attribute)
        else:
            setattr(parent, attribute, current.__wrapped__)
    return True


publish(__name__, globals())
