"""The options of a replay, in one place: ``replay()``, :class:`ReplayRun`, its decorator form and the pytest plugin."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from enum import Enum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .._internal import hooks
from ..errors import ConfigError
from . import _netguard as netguard
from ._paths import PathPattern

if TYPE_CHECKING:
    from ..model import Trace


class InputMismatch(str, Enum):
    """What a stubbed call whose input differs from the recording does."""

    ERROR = "error"
    WARN = "warn"
    IGNORE = "ignore"


class OnMissing(str, Enum):
    """What a call with no recording does."""

    ERROR = "error"
    LIVE = "live"


def _choice(enum: type[Enum], name: str, value: Any) -> Any:
    try:
        return enum(value)
    except ValueError:
        raise ConfigError(name, value, "one of " + ", ".join(repr(m.value) for m in enum)) from None


def _selectors(name: str, value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        raise ConfigError(name, value, "a set of selectors, not a string")
    try:
        items = tuple(value)
    except TypeError:
        raise ConfigError(name, value, "an iterable of selectors") from None
    for item in items:
        if not isinstance(item, str) or not item:
            raise ConfigError(name, item, "a boundary name, a glob or 'kind:<kind>'")
    return items


LOOPBACK: tuple[str, ...] = netguard.DEFAULT_ALLOWED_HOSTS
"""The default ``allow_hosts`` of a replay's network guard: this machine only."""


def _hosts(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        raise ConfigError("allow_hosts", value, "a list of host names, addresses or networks, not a string")
    try:
        items = tuple(value)
    except TypeError:
        raise ConfigError("allow_hosts", value, "a list of host names, addresses or networks") from None
    netguard.AllowList(items)  # raises ConfigError naming a bad entry
    return items


_STRICT_LEVELS: tuple[str, ...] = ("input", "all")


def _strict(value: Any) -> bool | Mapping[str, str]:
    if isinstance(value, bool):
        return value
    if not isinstance(value, Mapping):
        raise ConfigError("strict", value, "True, False or {selector: 'input' or 'all'}, e.g. {'kind:llm': 'input'}")
    for selector, level in value.items():
        _selectors("strict", (selector,))
        if level not in _STRICT_LEVELS:
            raise ConfigError(
                "strict",
                {selector: level},
                "'input' (a changed input of these boundaries fails the replay) or 'all' (any drift of them does)",
            )
    return MappingProxyType(dict(value))


def _paths(option: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)
    try:
        items = tuple(value)
    except TypeError:
        raise ConfigError(option, value, "a list of paths such as '$.stream_options'") from None
    for item in items:
        PathPattern(item)  # raises ConfigError naming a bad path
    return items


def _pairs(value: Any) -> bool:
    """``value`` is already in the kept form ``((str, (str, ...)), ...)`` (``dataclasses.replace`` passes it again)."""
    return (
        isinstance(value, tuple)
        and bool(value)
        and all(type(v) is tuple and len(v) == 2 and isinstance(v[1], tuple) for v in value)
    )


def _ignore(value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``ignore=`` as ``((selector, paths), ...)``: a list of paths applies to every boundary (selector ``"*"``)."""
    if isinstance(value, str):
        raise ConfigError("ignore", value, "a list of paths such as ['$.stream_options'], not a string")
    if _pairs(value):
        value = dict(value)
    if isinstance(value, Mapping):
        return tuple((_selectors("ignore", (sel,))[0], _paths("ignore", paths)) for sel, paths in value.items())
    paths = _paths("ignore", value)
    return (("*", paths),) if paths else ()


def _changed(value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``changed=`` as ``((change name, selectors), ...)``: a list of selectors names each change after its selector."""
    if isinstance(value, str):
        raise ConfigError("changed", value, "a list of selectors or {change name: selectors}, not a string")
    if _pairs(value):
        value = dict(value)
    if isinstance(value, Mapping):
        pairs = []
        for name, selectors in value.items():
            if not isinstance(name, str) or not name:
                raise ConfigError("changed", name, "a change name such as 'guardrail-v2'")
            pairs.append((name, _selectors("changed", (selectors,) if isinstance(selectors, str) else selectors)))
        return tuple(pairs)
    return tuple((sel, (sel,)) for sel in _selectors("changed", value))


def _overrides(value: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError("override", value, "a mapping {call key: value or callable}, e.g. {'plan[0]': ...}")
    for key in value:
        if not isinstance(key, str) or not key.strip():
            raise ConfigError("override", key, "a call key such as 'plan[0]' or 'run_agent[0] > plan[0]'")
    return MappingProxyType(dict(value))


@dataclasses.dataclass(frozen=True)
class ReplayOptions:
    """How a replay treats each boundary call (the keyword arguments of :func:`~chronicle_otel.replay`).

    Values are checked when the object is built: a bad one raises :class:`~chronicle_otel.errors.ConfigError`
    listing the valid ones.
    """

    stub: tuple[str, ...] = ("kind:llm",)
    """Selectors of boundaries answered from the recording: names, globs (``"crm.*"``) or ``"kind:<kind>"``."""
    live: tuple[str, ...] = ()
    """Selectors of boundaries that run the current code; they win over ``stub``."""
    default: str = "live"
    """What boundaries matched by neither do: ``"live"`` or ``"stub"``."""
    on_input_mismatch: InputMismatch = InputMismatch.WARN
    """A stubbed call whose input differs: ``"warn"`` (drift), ``"error"`` (divergence) or ``"ignore"``."""
    on_missing: OnMissing = OnMissing.ERROR
    """A call with no recording: ``"error"`` (divergence) or ``"live"``."""
    strict: bool | Mapping[str, str] = False
    """Drift also makes ``report.ok`` false: True for all drift, or per selector ``{"kind:llm": "input"}`` (a changed
    input of those boundaries fails) or ``"all"`` (any drift of them fails). Declared changes never fail."""
    ignore: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Paths of inputs whose differences are not drift (``["$.stream_options", "$..request_id"]``), for every
    boundary, or per selector (``{"openai.*": ["$.stream_options"]}``); kept as ``((selector, paths), ...)``."""
    changed: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Declared intended changes: selectors of boundaries whose changed output, and the drift it causes after it, are
    intended (``{"guardrail-v2": ["check_order"]}`` or ``["check_order"]``); kept as ``((name, selectors), ...)``."""
    allow: tuple[str, ...] | None = None
    """Module prefixes whose classes recorded values may be rebuilt as; None: the top-level packages that define
    boundaries in this process."""
    emit_spans: bool = True
    """Record the replay's own spans (``chronicle.replay.of`` and a link to each original span)."""
    isolate: bool = True
    """Nothing leaves the process and nothing reaches the real store while the run is active: its spans go to a
    temporary store, and ``configure()`` calls meanwhile are sandboxed (:func:`chronicle_otel.config.isolated`)."""
    block_network: bool = True
    """While the run is active, DNS lookups and connections to hosts not in ``allow_hosts`` raise
    :class:`~chronicle_otel.errors.NetworkBlockedError` (and are listed as divergences). In this process only: child
    processes (``subprocess``, ``os.system``, ``multiprocessing`` by spawn or forkserver) are not covered."""
    allow_hosts: tuple[str, ...] = LOOPBACK
    """What the network guard lets through: host names, addresses and networks (``"10.0.0.0/8"``); empty: nothing."""
    override: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """What-if answers: ``{call key: value}`` answers that recorded call with ``value`` (an exception is raised);
    a callable gets the recorded output (or error) and returns the answer."""
    live_from: str | None = None
    """A recorded call from which the run goes live (a call key, ``"plan[0]"``, or a name or glob: its first call):
    every call recorded before it, those that enclose it aside, answers from its recording whatever ``stub=`` and
    ``live=`` say (the frozen prefix); it, the calls under it and those enclosing it run live (an LLM one as if
    ``live=`` selected it); the calls after it follow ``stub=``, ``live=`` and ``default=``."""
    max_live_llm: int | None = None
    """At most this many LLM boundaries run live; the next one raises
    :class:`~chronicle_otel.errors.ReplayDivergence` (a ``live-llm-limit`` divergence) instead of calling the model.
    None: no limit."""

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "stub", _selectors("stub", self.stub))
        set_(self, "live", _selectors("live", self.live))
        if self.default not in ("live", "stub"):
            raise ConfigError("default", self.default, "'live' or 'stub'")
        set_(self, "on_input_mismatch", _choice(InputMismatch, "on_input_mismatch", self.on_input_mismatch))
        set_(self, "on_missing", _choice(OnMissing, "on_missing", self.on_missing))
        if self.allow is not None:
            set_(self, "allow", _selectors("allow", self.allow))
        set_(self, "strict", _strict(self.strict))
        set_(self, "ignore", _ignore(self.ignore))
        set_(self, "changed", _changed(self.changed))
        if not isinstance(self.emit_spans, bool):
            raise ConfigError("emit_spans", self.emit_spans, "True or False")
        if not isinstance(self.isolate, bool):
            raise ConfigError("isolate", self.isolate, "True or False")
        if not isinstance(self.block_network, bool):
            raise ConfigError("block_network", self.block_network, "True or False")
        set_(self, "allow_hosts", _hosts(self.allow_hosts))
        set_(self, "override", _overrides(self.override))
        if self.live_from is not None and (not isinstance(self.live_from, str) or not self.live_from.strip()):
            raise ConfigError("live_from", self.live_from, "a recorded call key such as 'plan[0]', or a boundary name")
        limit = self.max_live_llm
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise ConfigError("max_live_llm", limit, "None (no limit) or a number of model calls, 0 or more")


def allow_list(options: ReplayOptions, trace: Trace) -> tuple[str, ...]:
    """Module prefixes whose classes recorded values are rebuilt as (registered types always are), now: ``allow=`` of
    the replay, else of ``load_trace``, else the top-level packages that define boundaries in this process."""
    if options.allow is not None:
        return options.allow
    loaded = trace.root.allow if trace.root is not None else None
    return loaded if loaded is not None else hooks.boundary_packages()
