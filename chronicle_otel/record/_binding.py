"""Argument binding: one call's arguments as ``{param: value}``, the input a boundary records.

The signature is read once, when decorating; a call to a function without ``*args``/``**kwargs`` is
bound by zipping the positional names (no :meth:`inspect.Signature.bind`). Binding never raises:
arguments that do not fit the signature (the call will fail with the function's own ``TypeError``)
are recorded as ``{"args": [...], "kwargs": {...}}``.

:func:`classmethod_class` finds the class of a call that came through ``@classmethod`` wrapped around a
boundary: from Python 3.13 on, a classmethod no longer hands its binding to the ``__get__`` of what it
wraps, so the wrapper is called as a plain function with the class as its first argument.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_VARIADIC = {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}
_MAX_UNWRAP = 32


def may_be_classmethod(func: Callable[..., Any]) -> bool:
    """Whether ``func`` was defined inside a class or function body (its qualified name is dotted): only such a
    function can sit under ``@classmethod`` in a class body. Read once, when decorating."""
    return "." in str(getattr(func, "__qualname__", ""))


def classmethod_class(func: Callable[..., Any], first: Any) -> type | None:
    """``first`` when it is a class that holds, under ``func``'s name in itself or a base, a classmethod wrapping
    ``func`` (directly or through decorators that set ``__wrapped__``): the call came through that classmethod, and
    ``first`` is its ``cls``. None otherwise, and never raises."""
    if not isinstance(first, type):
        return None
    try:
        name = func.__name__
        for klass in first.__mro__:
            member = vars(klass).get(name)
            if isinstance(member, classmethod):
                inner: Any = member.__func__
                for _ in range(_MAX_UNWRAP):
                    if inner is func:
                        return first
                    inner = getattr(inner, "__wrapped__", None)
                    if inner is None:
                        break
    except Exception:
        return None
    return None


class Binder:
    """Maps a call's arguments to ``{param: value}``; built once per decorated function.

    Args:
        func: the undecorated function (for a method, including ``self``/``cls``).
    """

    __slots__ = ("defaults", "defaults_skip", "fast", "names", "names_skip", "sig", "sig_skip")

    def __init__(self, func: Callable[..., Any]) -> None:
        try:
            sig: inspect.Signature | None = inspect.signature(func)
        except (TypeError, ValueError):
            sig = None
        self.sig = sig
        """The function's signature; None when it has none (some builtins)."""
        self.sig_skip: inspect.Signature | None = None
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
        self.fast = not ({p.kind for p in params} & _VARIADIC)
        self.names = tuple(p.name for p in params if p.kind in _POSITIONAL)
        self.defaults = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
        if params:
            first = params[0].name
            self.names_skip = tuple(n for n in self.names if n != first)
            self.defaults_skip = {k: v for k, v in self.defaults.items() if k != first}

    @property
    def parameters(self) -> tuple[str, ...]:
        """The names of every parameter, in order (empty without a signature)."""
        return tuple(self.sig.parameters) if self.sig is not None else ()

    def bind(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], skip_first: bool, defaults: bool = True
    ) -> dict[str, Any]:
        """The bound arguments; ``skip_first`` drops ``self``/``cls`` (a bound call); ``defaults=False`` leaves out
        the parameters the caller did not pass."""
        if self.fast:
            names = self.names_skip if skip_first else self.names
            if len(args) <= len(names):
                bound = dict(self.defaults_skip if skip_first else self.defaults) if defaults else {}
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
                if defaults:
                    ba.apply_defaults()
                return dict(ba.arguments)
        return {"args": list(args), "kwargs": kwargs}


class SelectingBinder:
    """A :class:`Binder` that records only what an :class:`~chronicle_otel.adapters.Arguments` policy selects.

    Args:
        binder: the function's binder.
        arguments: the policy (``passed_only``, ``skip``, ``exclude``).
    """

    __slots__ = ("arguments", "binder")

    def __init__(self, binder: Binder, arguments: Any) -> None:
        self.binder = binder
        self.arguments = arguments

    @property
    def parameters(self) -> tuple[str, ...]:
        """The names of every parameter, in order."""
        return self.binder.parameters

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any], skip_first: bool) -> dict[str, Any]:
        """The selected arguments of one call."""
        binder = self.binder
        bound = binder.bind(args, kwargs, skip_first, not self.arguments.passed_only)
        selected: dict[str, Any] = self.arguments.select(bound)
        return selected
