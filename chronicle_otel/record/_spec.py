"""What a boundary is, fixed when decorating: its kind, its :class:`Spec` and its wrapt wrapper.

A :class:`Spec` holds everything computed once per decorated function (so per-call work stays
proportional to the payload): the name, kind and shape (``sync``, ``async``, ``gen``, ``agen``), the
argument binder, the static span attributes, the GenAI parameters to look for, the runner of its
shape and its internal-error guards. It is the :class:`~chronicle_otel._internal.hooks.BoundarySpec`
replay sees: the replay engine calls :meth:`Spec.run` to record a call it lets through.

:func:`wrap` puts a function inside a :class:`wrapt.FunctionWrapper` whose wrapper, on each call, hands
the call to the active replay if there is one and otherwise to the runner.
"""

from __future__ import annotations

import copy
import inspect
import warnings
from collections.abc import Callable, Mapping
from enum import Enum
from types import MethodType
from typing import TYPE_CHECKING, Any

import wrapt

from .. import semconv
from .._api import publish
from .._internal import hooks
from .._internal.errors import handle_internal_errors
from .._internal.hooks import ReplayExtra, Shape
from .._internal.names import module_name
from ..codec import CODEC_VERSION
from ..config import ChronicleConfig
from ..errors import ChronicleWarning, ConfigError
from ..redact import REDACTED, Redactor
from ._binding import Binder, SelectingBinder, classmethod_class, may_be_classmethod
from ._genai import OPENINFERENCE_SPAN_KINDS, attribute_scalar, request_parameters, static_attributes
from ._recording import Runner, run_agen, run_async, run_gen, run_sync
from .session_attrs import AttributeValue

if TYPE_CHECKING:
    from .adapters import Arguments, StreamAdapter

    Wrapper = wrapt.FunctionWrapper[..., Any]
else:

    class _BoundWrapper(wrapt.BoundFunctionWrapper):
        """A boundary reached through an object or a class: pickled and copied as a bound method (or, through the
        class, the function) is: by the object or class and the name."""

        def __reduce_ex__(self, protocol: Any) -> Any:
            owner = self._self_instance if self._self_instance is not None else self._self_owner
            return getattr, (owner, self.__name__)

        def __copy__(self) -> Any:
            return self

        def __deepcopy__(self, memo: Any) -> Any:
            if self._self_instance is None:
                return self
            return getattr(copy.deepcopy(self._self_instance, memo), self.__name__)

    class Wrapper(wrapt.FunctionWrapper):
        """The boundary wrapper: pickled by reference and never copied, as the function it wraps is (a process pool
        sends it by name; ``copy.deepcopy`` of a configuration holding it keeps it)."""

        __bound_function_wrapper__ = _BoundWrapper

        def __reduce_ex__(self, protocol: Any) -> Any:
            return self.__qualname__

        def __copy__(self) -> Any:
            return self

        def __deepcopy__(self, memo: Any) -> Any:
            return self


class BoundaryKind(str, Enum):
    """What a boundary is; may be passed as its string value (``kind="llm"``)."""

    LLM = "llm"
    TOOL = "tool"
    RETRIEVAL = "retrieval"
    GUARDRAIL = "guardrail"
    AGENT = "agent"
    MEMORY = "memory"
    CUSTOM = "custom"


def parse_kind(value: BoundaryKind | str) -> BoundaryKind:
    """``value`` as a :class:`BoundaryKind`.

    Raises:
        ConfigError: ``value`` is not a kind (the message lists every valid one).
    """
    try:
        return BoundaryKind(value)
    except ValueError:
        raise ConfigError("kind", value, "one of " + ", ".join(repr(k.value) for k in BoundaryKind)) from None


def checked_attributes(attributes: Mapping[str, AttributeValue] | None) -> dict[str, AttributeValue] | None:
    """A copy of static span ``attributes``, every value checked.

    Raises:
        ConfigError: a value is not a str, bool, int (64-bit) or float.
    """
    if attributes is None:
        return None
    checked = dict(attributes)
    for key, value in checked.items():
        if attribute_scalar(value) is None:
            raise ConfigError(f"attributes[{key!r}]", value, "a str, bool, int or float")
    return checked


def shape_of(func: Callable[..., Any] | None) -> Shape:
    """How ``func`` returns: ``sync``, ``async`` (coroutine), ``gen`` (generator) or ``agen`` (async generator)."""
    if func is None:
        return "sync"
    if inspect.isasyncgenfunction(func):
        return "agen"
    if inspect.iscoroutinefunction(func):
        return "async"
    if inspect.isgeneratorfunction(func):
        return "gen"
    return "sync"


_RUNNERS: Mapping[Shape, Runner] = {"sync": run_sync, "async": run_async, "gen": run_gen, "agen": run_agen}


class Spec:
    """Everything about a boundary that is known when decorating; satisfies ``hooks.BoundarySpec``.

    Args:
        func: the undecorated function, or None for a ``call(...)`` block.
        name: the boundary name.
        kind: the boundary kind.
        attributes: static span attributes.
        config: the configuration to record with, or None for the process-wide one (read at call time).
        enabled: asked on each call; the call goes straight through when it returns false.
        provider: the GenAI provider name of an ``llm`` boundary.
        arguments: which arguments are recorded (default: all, defaults applied).
        stream: how a stream object the function returns is recorded and replayed.
        shape: how the function returns, when it cannot be seen from the function (a decorator hides its
            ``async def``).
    """

    __slots__ = (
        "binder",
        "config",
        "enabled",
        "end_guard",
        "genai",
        "genai_args",
        "input_guard",
        "kind",
        "kind_value",
        "name",
        "openinference_kind",
        "raw",
        "runner",
        "shape",
        "start_guard",
        "static",
        "static_redacted",
        "stream_adapter",
        "user_attributes",
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
        arguments: Arguments | None = None,
        stream: StreamAdapter | None = None,
        shape: Shape | None = None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.kind_value: str = kind.value
        self.raw = func
        self.shape: Shape = shape or shape_of(func)
        self.runner: Runner = _RUNNERS[self.shape]
        binder = Binder(func) if func is not None else None
        self.binder: Binder | SelectingBinder | None = (
            SelectingBinder(binder, arguments) if binder is not None and arguments is not None else binder
        )
        self.stream_adapter = stream
        """Records and replays the stream objects the function returns; None for an ordinary function."""
        self.config = config
        self.enabled = enabled
        self.genai = kind is BoundaryKind.LLM
        self.genai_args: dict[str, str] = (
            request_parameters(self.binder.parameters) if self.genai and self.binder is not None else {}
        )
        self.openinference_kind = OPENINFERENCE_SPAN_KINDS[kind.value]
        static: dict[str, AttributeValue] = dict(attributes or {})
        static[semconv.BOUNDARY_NAME] = name
        static[semconv.BOUNDARY_KIND] = kind.value
        static[semconv.CODEC] = CODEC_VERSION
        if func is not None:
            static[semconv.CODE_FUNCTION] = (
                f"{module_name(str(getattr(func, '__module__', '?')))}.{getattr(func, '__qualname__', '?')}"
            )
        if self.genai:
            static.update(static_attributes(provider))
        self.static = static
        self.user_attributes = frozenset(attributes or ())
        self.static_redacted: tuple[object, dict[str, AttributeValue]] | None = None
        self.start_guard = handle_internal_errors("starting boundary %r", name)
        self.input_guard = handle_internal_errors("recording the input of boundary %r", name)
        self.end_guard = handle_internal_errors("recording the outcome of boundary %r", name)

    def renamed(self, name: str) -> Spec:
        """This boundary under another name (a framework's tool seam names each call after its tool)."""
        other = copy.copy(self)
        other.name = name
        other.static = {**self.static, semconv.BOUNDARY_NAME: name}
        other.static_redacted = None
        other.start_guard = handle_internal_errors("starting boundary %r", name)
        other.input_guard = handle_internal_errors("recording the input of boundary %r", name)
        other.end_guard = handle_internal_errors("recording the outcome of boundary %r", name)
        return other

    def static_for(self, redactor: Redactor | None) -> dict[str, AttributeValue]:
        """The static attributes with the user's own (``attributes=``) redacted by ``redactor``; computed once per
        redactor, since they do not change from call to call."""
        cached = self.static_redacted
        if cached is not None and cached[0] is redactor:
            return cached[1]
        static = self.static
        if redactor is not None and self.user_attributes:
            static = dict(static)
            for key in self.user_attributes:
                value = static[key]
                if redactor.redact_key(key):
                    static[key] = REDACTED
                elif isinstance(value, str):
                    static[key] = redactor.redact_text(value)
        self.static_redacted = (redactor, static)
        return static

    def run(
        self,
        body: Callable[..., Any],
        instance: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        extra: ReplayExtra | None,
    ) -> Any:
        """Call ``body(*args, **kwargs)`` as one call of this boundary: one span, recorded as usual, with ``extra``."""
        return self.runner(self, body, instance, args, kwargs, extra)


def _wrapper(spec: Spec) -> Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]:
    runner = spec.runner
    raw = spec.raw
    member = raw is not None and may_be_classmethod(raw)

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if member and instance is None and args and wrapped is raw:
            # Under @classmethod on Python 3.13+, the class arrives as the first argument: bind it as wrapt does
            # on older versions, so ``cls`` is never recorded and replay sees the same call.
            cls = classmethod_class(raw, args[0])
            if cls is not None:
                instance, wrapped, args = cls, MethodType(raw, cls), args[1:]
        replay = hooks.REPLAY.get() or (hooks.current_replay() if hooks._ACTIVE else None)
        if replay is not None:
            return replay.call(spec, wrapped, instance, args, kwargs)
        return runner(spec, wrapped, instance, args, kwargs, None)

    if spec.config is not None or spec.enabled is not None:
        return wrapper
    return _switched(wrapper)


def _switched(wrapper: Callable[..., Any]) -> Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]:
    through = hooks.PASS_THROUGH

    def switched(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        # recording off process-wide and no replay active anywhere: straight through, as cheaply as wrapt allows
        # (a small function of its own: every local and closure cell of the full wrapper costs here)
        if through[0]:
            return wrapped(*args, **kwargs)
        return wrapper(wrapped, instance, args, kwargs)

    return switched


NameOf = Callable[[Any, tuple[Any, ...], dict[str, Any]], "str | None"]
"""Names one call of a boundary from ``(instance, args, kwargs)``; None (or a failure) keeps the boundary's name."""

MAX_CALL_NAMES = 4096
"""Distinct names one boundary with a :data:`NameOf` gives its calls, at most; later names use the boundary's own."""


def _named_wrapper(
    spec: Spec, name_of: NameOf
) -> Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]:
    """A wrapper that records each call under the name ``name_of`` gives it (one :class:`Spec` per name, made once)."""
    by_name: dict[str, Callable[..., Any]] = {spec.name: _wrapper(spec)}
    guard = handle_internal_errors("naming a call of boundary %r", spec.name)

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        name = None
        with guard:
            name = name_of(instance, args, kwargs)
        inner = by_name.get(name) if isinstance(name, str) and name else by_name[spec.name]
        if inner is None:
            if len(by_name) >= MAX_CALL_NAMES:
                warnings.warn(
                    ChronicleWarning(
                        f"boundary {spec.name!r} named calls {MAX_CALL_NAMES} ways: later names are recorded as "
                        f"{spec.name!r}"
                    ),
                    stacklevel=2,
                )
                inner = by_name[spec.name]
            else:
                inner = by_name.setdefault(str(name), _wrapper(spec.renamed(str(name))))
        return inner(wrapped, instance, args, kwargs)

    return wrapper


def wrap(
    func: Any,
    *,
    name: str | None,
    kind: BoundaryKind,
    attributes: Mapping[str, AttributeValue] | None,
    enabled: Callable[[], bool] | None,
    provider: str | None,
    config: ChronicleConfig | None,
    wrapper_type: type[Wrapper] = Wrapper,
    arguments: Arguments | None = None,
    stream: StreamAdapter | None = None,
    shape: Shape | None = None,
    name_of: NameOf | None = None,
) -> Wrapper:
    """Wrap a function, method, classmethod or staticmethod as a boundary (registered for replay by name).

    With ``name_of``, each call is recorded under the name it returns (``name`` when it returns None).

    Raises:
        TypeError: ``func`` is not callable, or is a property.
    """
    if isinstance(func, property):
        raise TypeError("@boundary cannot decorate a property; decorate its getter function instead")
    raw = func.__func__ if isinstance(func, (staticmethod, classmethod)) else func
    if not callable(raw):
        raise TypeError(f"@boundary needs a function or method, got {func!r}")
    if getattr(getattr(raw, "__code__", None), "co_filename", "").endswith("contextlib.py"):
        warnings.warn(
            ChronicleWarning(
                f"@boundary is applied on top of @contextmanager for {raw.__qualname__}: the span would cover only the "
                "creation of the context manager. Put @boundary below @contextmanager (on the generator function)."
            ),
            stacklevel=4,
        )
    boundary_name = (
        name or f"{module_name(str(getattr(raw, '__module__', '?')))}.{getattr(raw, '__qualname__', repr(raw))}"
    )
    spec = Spec(raw, boundary_name, kind, attributes, config, enabled, provider, arguments, stream, shape)
    wrapped = wrapper_type(func, _wrapper(spec) if name_of is None else _named_wrapper(spec, name_of))
    hooks.register(boundary_name, wrapped)
    return wrapped


publish(__name__, globals())
