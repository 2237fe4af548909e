"""Where replay plugs into the recording hot path, and the registry of boundaries defined in this process.

A boundary call checks one context variable (:data:`REPLAY`); when it holds a :class:`ReplayHook`, the call is
handed to it with the boundary's :class:`BoundarySpec`. The recording path never imports the replay machinery, and
the replay engine sees boundaries only through these protocols.
"""

from __future__ import annotations

import contextvars
import dataclasses
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from opentelemetry.trace import Link

Shape = Literal["sync", "async", "gen", "agen"]
"""How a boundary returns: a value, a coroutine, a generator or an async generator (decided when decorating)."""


class Binder(Protocol):
    """Maps one call's arguments to ``{param: value}``."""

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any], skip_first: bool) -> dict[str, Any]:
        """The bound arguments; ``skip_first`` drops ``self``/``cls``."""
        ...


@dataclasses.dataclass(frozen=True)
class ReplayExtra:
    """What the spans of calls made during a replay carry besides the usual attributes."""

    attributes: Mapping[str, Any]
    links: list[Link]
    input: bytes | None = None
    """The call's input as the replay already encoded it (secret values redacted), or None to encode it again."""
    secrets: tuple[str, ...] = ()
    """The values redacted by key name from that input (to scrub an error's text)."""
    output: bytes | None = None
    """The encoded value the call returns (a stub answering with its recording), or None to encode the result."""
    started: Callable[[Any], None] | None = None
    """Called with the call's span once it has started (the replay notes the trace ids of its own spans)."""


class BoundarySpec(Protocol):
    """What replay may know of a decorated boundary (fixed when decorating)."""

    @property
    def name(self) -> str:
        """The boundary name."""
        ...

    @property
    def kind_value(self) -> str:
        """The boundary kind as a string (``llm``, ``tool``…)."""
        ...

    @property
    def shape(self) -> Shape:
        """How the function returns."""
        ...

    @property
    def raw(self) -> Callable[..., Any] | None:
        """The undecorated function (None for ``call(...)`` blocks)."""
        ...

    @property
    def binder(self) -> Binder | None:
        """Binds a call's arguments (None for ``call(...)`` blocks)."""
        ...

    @property
    def stream_adapter(self) -> Any:
        """Records and replays the stream objects the function returns (a ``StreamAdapter``), or None."""
        ...

    @property
    def config(self) -> Any:
        """The configuration the boundary is bound to (``configure(local=True)``), or None for the process-wide one."""
        ...

    def run(
        self,
        body: Callable[..., Any],
        instance: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        extra: ReplayExtra | None,
    ) -> Any:
        """Call ``body`` as this boundary would call its function: one span, recorded as usual, with ``extra``."""
        ...


class ReplayHook(Protocol):
    """An active replay: receives every boundary call made in its context."""

    def call(
        self,
        spec: BoundarySpec,
        wrapped: Callable[..., Any],
        instance: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """Handle one call of a decorated boundary: answer it from the recording or run it."""
        ...

    def enter_block(self, spec: BoundarySpec, input_value: Any) -> object:
        """A ``call(...)`` block starts; returns what :meth:`exit_block` gets back."""
        ...

    def exit_block(self, state: object, output: Any, exc: BaseException | None) -> None:
        """A ``call(...)`` block ends."""
        ...

    def declare(self, name: str) -> None:
        """``changed(name)`` ran in this context: the call in progress changed on purpose."""
        ...


#: The active replay of this context, or None.
REPLAY: contextvars.ContextVar[ReplayHook | None] = contextvars.ContextVar("chronicle_replay", default=None)

#: True while the process-wide configuration has recording off (``configure(enabled=False)``) and no replay is
#: active: a boundary without a configuration or ``enabled=`` of its own then calls straight through.
PASS_THROUGH: list[bool] = [False]
_recording_off = False


def set_recording_off(off: bool) -> None:
    """The process-wide configuration now has recording off (or on)."""
    global _recording_off
    with _lock:
        _recording_off = off
        PASS_THROUGH[0] = off and not _ACTIVE


#: Replays active anywhere in the process, oldest first: a thread that did not inherit the context of the one that
#: entered the replay (a thread pool, ``run_in_executor``) still answers to the latest of them.
_ACTIVE: list[ReplayHook] = []


def current_replay() -> ReplayHook | None:
    """The replay of this context; else, in a thread without it, the replay entered last in the process."""
    hook = REPLAY.get()
    if hook is None and _ACTIVE:
        with _lock:
            return _ACTIVE[-1] if _ACTIVE else None
    return hook


def activate(hook: ReplayHook) -> None:
    """``hook`` starts: calls in threads without its context answer to it too."""
    with _lock:
        _ACTIVE.append(hook)
        PASS_THROUGH[0] = False


def deactivate(hook: ReplayHook) -> None:
    """``hook`` ends."""
    with _lock:
        for i in range(len(_ACTIVE) - 1, -1, -1):
            if _ACTIVE[i] is hook:
                del _ACTIVE[i]
                break
        PASS_THROUGH[0] = _recording_off and not _ACTIVE


#: Boundary name -> weak references to the wrapped callables defined under that name, oldest first.
_BOUNDARIES: dict[str, list[weakref.ref[Any]]] = {}
#: Top-level packages (``"examples."``) of the modules that ever defined a boundary in this process.
_PACKAGES: set[str] = set()
#: :data:`_PACKAGES` sorted, replaced (never changed) when a package is added: read without the lock on every call.
_PACKAGES_SORTED: tuple[str, ...] = ()
_lock = threading.Lock()


def register(name: str, wrapped: Any) -> None:
    """Remember a decorated callable under its boundary name (replay finds the root to rerun here)."""
    with _lock:
        refs = [r for r in _BOUNDARIES.get(name, []) if r() is not None]
        refs.append(weakref.ref(wrapped))
        _BOUNDARIES[name] = refs
        module = getattr(wrapped, "__module__", None)
        if isinstance(module, str) and module and module != "builtins":
            package = module.split(".")[0] + "."
            if package != "chronicle_otel.":  # an integration's own wrappers: it names its packages itself
                _add_packages((package,))


def register_packages(*prefixes: str) -> None:
    """Add module prefixes (``"langchain_core."``) to the default allow-list of payload decoding: an integration
    names the packages of the types it records, so a replay rebuilds them typed without ``allow=``."""
    with _lock:
        _add_packages(prefixes)


def _add_packages(prefixes: tuple[str, ...]) -> None:
    global _PACKAGES_SORTED
    new = {p for p in prefixes if isinstance(p, str) and p.endswith(".") and len(p) > 1} - _PACKAGES
    if new:
        _PACKAGES.update(new)
        _PACKAGES_SORTED = tuple(sorted(_PACKAGES))


def boundary_packages() -> tuple[str, ...]:
    """The default allow-list of payload decoding: the top-level packages (``"examples."``) whose modules defined
    a boundary in this process, sorted. Recorded values are rebuilt as classes of these packages (and registered
    types); a trace can name any class, so nothing else is rebuilt unless allowed explicitly."""
    return _PACKAGES_SORTED


def boundaries(name: str) -> list[Any]:
    """The live callables registered under ``name``, oldest first."""
    with _lock:
        found = [r() for r in _BOUNDARIES.get(name, [])]
    return [f for f in found if f is not None]


def all_boundaries() -> list[Any]:
    """Every live registered callable."""
    with _lock:
        refs = [r for refs in _BOUNDARIES.values() for r in refs]
    return [f for f in (r() for r in refs) if f is not None]
