"""The drift policy of a replay: which differences are ignored, which fail it, and why each input changed.

An input that changed is explained by what happened before the call in the run:

- **intended**: the call, or a call it runs under, declared the change (:func:`~chronicle_otel.changed` in the code,
  or ``changed=`` of the replay), or every change before it was declared (or an ``override=``);
- **upstream**: a call that ran before it in the run changed: a live call whose output differs from its recording,
  or a call with no recording that ran live. Expected after a fix: the calls after it see the fix's effect;
- **unexplained**: every call before it answered or returned as recorded, so the request itself is built otherwise
  now: the prompt, the model settings or the code building the request changed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from .. import semconv
from .._internal import hooks
from ..model import Boundary, CallKey, Trace, format_key
from ._matching import check_selectors, matches
from ._options import ReplayOptions
from ._paths import PathPattern
from ._report import DriftCause

_SHOWN_CAUSES = 3


@dataclasses.dataclass(frozen=True)
class Cause:
    """A change in the run that later inputs may show: a call key, what changed, and the declared change (if any)."""

    key: CallKey
    what: str
    change: str | None


class DriftPolicy:
    """``ignore=``, ``strict=`` and ``changed=`` of a replay, and the changes seen so far in its run.

    Args:
        trace: the recorded run.
        options: the replay's options.

    Raises:
        ConfigError: a ``changed=`` selector that can select nothing (a typo).
    """

    def __init__(self, trace: Trace, options: ReplayOptions) -> None:
        for _, selectors in options.changed:
            check_selectors("changed", selectors, trace, defined=hooks.boundaries)
        self._ignore = tuple((sel, tuple(PathPattern(p) for p in paths)) for sel, paths in options.ignore)
        self._strict = options.strict
        self._changed = options.changed
        self._trace = trace
        self._keys: dict[CallKey, list[Boundary]] | None = None
        self._ignored: dict[tuple[str, str], Callable[[tuple[str | int, ...]], bool] | None] = {}
        self.causes: list[Cause] = []
        """The changes of the run so far, in the order they happened."""
        self.declared: dict[CallKey, list[str]] = {}
        """The changes declared with :func:`~chronicle_otel.changed` during the run, by the call that declared them
        (``()``: outside every boundary call, the whole run)."""

    # ------------------------------------------------------------------ ignore= and strict=

    def ignored(self, name: str, kind: str) -> Callable[[tuple[str | int, ...]], bool] | None:
        """What ``ignore=`` hides of the input of the boundary ``name`` of ``kind``; None: nothing."""
        known = self._ignored.get((name, kind), ...)
        if known is not ...:
            return known
        patterns = [p for sel, paths in self._ignore if matches(sel, name, kind) for p in paths]
        result = (lambda path: any(p.matches(path) for p in patterns)) if patterns else None
        self._ignored[(name, kind)] = result
        return result

    def strict(self, name: str, kind: str, what: str) -> bool:
        """A drift of ``what`` (``"input"``, or ``"new"`` for a call with no recording) of the boundary ``name`` of
        ``kind`` fails the replay."""
        if isinstance(self._strict, bool):
            return self._strict
        return any(
            matches(sel, name, kind) and (level == "all" or level == what) for sel, level in self._strict.items()
        )

    # ------------------------------------------------------------------ declared changes

    def declare(self, key: CallKey, name: str) -> None:
        """``changed(name)`` ran under the call ``key``: unless its recording declared it already, the differences of
        that call and of the calls under it are intended."""
        recorded = self._by_key().get(key) if key else None
        if recorded and any(name in _declared(b) for b in recorded):
            return  # recorded with the change: not a difference from the recording
        names = self.declared.setdefault(key, [])
        if name not in names:
            names.append(name)

    def intended(self, key: CallKey) -> str | None:
        """The declared change that covers the call ``key`` (declared by it or by a call it runs under), if any."""
        for n in range(len(key), -1, -1):
            names = self.declared.get(key[:n])
            if names:
                return names[0]
        for change, selectors in self._changed:
            for n in range(len(key), 0, -1):
                name = key[n - 1][0]
                kind = self._kind(key[:n])
                if any(matches(sel, name, kind) for sel in selectors):
                    return change
        return None

    def _by_key(self) -> dict[CallKey, list[Boundary]]:
        if self._keys is None:
            self._keys = self._trace.by_key()
        return self._keys

    def _kind(self, key: CallKey) -> str:
        recorded = self._by_key().get(key)
        return recorded[0].kind if recorded else ""

    # ------------------------------------------------------------------ why an input changed

    def changed(self, key: CallKey, what: str, change: str | None) -> None:
        """A change happened in the run (the call ``key`` ended with ``what`` changed)."""
        self.causes.append(Cause(key, what, change))

    def covering(self, key: CallKey) -> str | None:
        """The declared change that explains a changed output of the live call ``key``: one that covers it, or the
        changes before its end (under it or before it) when every one of them was declared."""
        change = self.intended(key)
        if change is not None or not self.causes:
            return change
        if any(c.change is None for c in self.causes):
            return None
        return self.causes[0].change

    def explain(self, key: CallKey, new: bool = False) -> tuple[DriftCause, str, str | None]:
        """Why the input of the call ``key`` changed (``new``: why the call, which has no recording, is made): the
        cause, a phrase saying it, and the declared change."""
        change = self.intended(key)
        if change is not None:
            return DriftCause.INTENDED, f"intended: {change}", change
        before = [c for c in self.causes if c.key[: len(key)] != key]  # not a call under this one
        unintended = [c for c in before if c.change is None]
        if unintended:
            shown = ", ".join(f"{format_key(c.key)} {c.what}" for c in unintended[:_SHOWN_CAUSES])
            more = f" and {len(unintended) - _SHOWN_CAUSES} more" if len(unintended) > _SHOWN_CAUSES else ""
            return DriftCause.UPSTREAM, f"after live changes before it: {shown}{more}", None
        if before:
            names = list(dict.fromkeys(c.change for c in before if c.change is not None))
            return DriftCause.INTENDED, f"after intended changes: {', '.join(names)}", names[0]
        did = (
            "the code now makes its calls otherwise"
            if new
            else "the prompt, the model settings or the code building the request did"
        )
        return DriftCause.UNEXPLAINED, f"unexplained: nothing before it changed, so {did}", None


def _declared(b: Boundary) -> tuple[str, ...]:
    value = b.span.attributes.get(semconv.CHANGES)
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(v for v in value if isinstance(v, str))
    return ()
