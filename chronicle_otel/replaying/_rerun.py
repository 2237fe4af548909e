"""The root boundary called again: found by its recorded name in this process, its recorded input made into arguments
that fit its signature now. Chronicle never imports a module named in a trace."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import sys
from typing import Any

from .._internal import hooks
from .._internal.names import qualified_name
from ..errors import ReplayError
from ..model import Trace


def root_function(trace: Trace) -> Any:
    """The live function of the trace's root boundary, found by its recorded name in this process.

    Raises:
        ReplayError: the trace has no boundary, no boundary of that name is defined in this process, or several
            different functions are.
    """
    root = trace.root
    if root is None:
        raise ReplayError(f"trace {trace.trace_id} has no boundary to rerun")
    found = hooks.boundaries(root.name)
    if root.function:
        exact = [f for f in found if qualified_name(f) == root.function]
        found = exact or found
    if not found:
        hint = f" (recorded from {root.function})" if root.function else ""
        raise ReplayError(
            f"no boundary named {root.name!r} is defined in this process{hint}; import the module that "
            "defines it before replaying (chronicle never imports modules named in a trace)"
        )
    qualnames = {qualified_name(f) for f in found}
    if len(qualnames) > 1:
        raise ReplayError(
            f"{len(qualnames)} different functions are named {root.name!r} ({', '.join(sorted(qualnames))}); "
            "give them distinct boundary names"
        )
    return found[-1]  # the latest definition (a module reloaded, a function redefined)


def unbound_target(fn: Any, name: str) -> Any:
    """What ``rerun()`` calls without an instance: a classmethod or staticmethod through its class (found by the
    function's own module and qualified name, in modules already imported), else the function itself. A method
    needs the object to call it on: a :class:`ReplayError` saying so."""
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    path = str(getattr(fn, "__qualname__", "")).split(".")
    owner: Any = module
    for part in path[:-1] if module is not None and "<locals>" not in path else ():
        owner = inspect.getattr_static(owner, part, None)
    if not isinstance(owner, type):
        return fn
    attr = inspect.getattr_static(owner, path[-1], None)
    if isinstance(attr, (classmethod, staticmethod)):
        return getattr(owner, path[-1])
    if attr is not None:
        raise ReplayError(
            f"root boundary {name!r} is a method of {owner.__qualname__}: pass the object to call it on, "
            f"rerun(instance=...) (self is never recorded)"
        )
    return fn


def arguments(fn: Any, values: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Turn recorded ``{param: value}`` into arguments of the callable ``fn`` (bound when it is a method), honouring
    positional-only parameters and ``*args``/``**kw``: the parameters before a recorded ``*args`` go by position."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return [], dict(values)
    star = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), None)
    by_position = star is not None and bool(values.get(star))
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    rest = dict(values)
    for p in params:
        if p.name not in rest:
            if by_position and p.kind is p.POSITIONAL_OR_KEYWORD and p.default is not p.empty:
                args.append(p.default)  # a gap before *args: its default, as the call had it
            continue
        value = rest.pop(p.name)
        if p.kind is p.POSITIONAL_ONLY or (by_position and p.kind is p.POSITIONAL_OR_KEYWORD):
            args.append(value)
        elif p.kind is p.VAR_POSITIONAL:
            if not isinstance(value, (list, tuple)):
                raise ReplayError(f"the recorded *{p.name} is a {type(value).__name__}, not a list of arguments")
            args.extend(value)
        elif p.kind is p.VAR_KEYWORD:
            if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
                raise ReplayError(f"the recorded **{p.name} is not an object of keyword arguments")
            kwargs.update(value)
        else:
            kwargs[p.name] = value
    kwargs.update(rest)
    return args, kwargs


def check_arguments(target: Any, args: list[Any], kwargs: dict[str, Any], name: str, trace_id: str) -> None:
    """Refuse, before the call, recorded arguments the function's signature does not take now (a parameter renamed
    since the recording, or a tampered trace): a ``TypeError`` from the call itself would be the function's own."""
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # not introspectable: the call decides
        return
    # Under another decorator (``functools.wraps``) the signature shown is the inner function's, which may take
    # arguments the decorator supplies itself: then only names and counts it cannot take are refused here.
    wrapped = getattr(target, "__wrapped__", None)
    exact = wrapped is not None and not hasattr(wrapped, "__wrapped__")
    try:
        (signature.bind if exact else signature.bind_partial)(*args, **kwargs)
    except TypeError as exc:
        raise ReplayError(
            f"the recorded input of root boundary {name!r} (trace {trace_id}) does not fit its signature now: {exc}; "
            "pass the arguments to rerun(...), or call the function yourself inside `with replay(...)`"
        ) from None


def loop_running() -> bool:
    """An event loop runs in this thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def close(stream: Any) -> None:
    """Close a generator (or async generator) the root returned, never raising."""
    close = getattr(stream, "close", None) or getattr(stream, "aclose", None)
    if close is not None:
        with contextlib.suppress(Exception):
            result = close()
            if inspect.isawaitable(result):
                result.close()  # type: ignore[attr-defined]


async def await_(awaitable: Any) -> Any:
    """``awaitable``'s result, as a coroutine for ``asyncio.run``."""
    return await awaitable


async def collect(stream: Any) -> list[Any]:
    """The items of an async iterator, read to the end."""
    return [item async for item in stream]
