"""Matching calls to recordings: selectors, call keys, the input-hash fallback and the nearest recordings."""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import itertools
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .._spec import BoundaryKind
from ..errors import ConfigError
from ..model import Boundary, CallKey, Trace, format_key
from ._report import Finding

_MAX_LISTED = 20


def matches(selector: str, name: str, kind: str) -> bool:
    """``selector`` (a name, a glob or ``kind:<kind>``) selects the boundary ``name`` of ``kind``."""
    if selector.startswith("kind:"):
        return kind == selector[5:]
    if any(c in selector for c in "*?["):
        return fnmatch.fnmatchcase(name, selector)
    return name == selector


def _closest(word: str, choices: Iterable[str]) -> list[str]:
    """``choices``, the closest to ``word`` first."""
    unique = sorted(set(choices))
    close = difflib.get_close_matches(word, unique, n=len(unique), cutoff=0.0)
    return close + [c for c in unique if c not in close]


def _listed(items: list[str]) -> str:
    shown = ", ".join(repr(i) for i in items[:_MAX_LISTED])
    return shown + (f" and {len(items) - _MAX_LISTED} more" if len(items) > _MAX_LISTED else "")


def check_selectors(option: str, selectors: Iterable[str], trace: Trace) -> None:
    """Raise when a selector can select nothing: an unknown ``kind:``, or a name or glob no recorded boundary has.

    Raises:
        ConfigError: naming the selector, with the valid kinds or the recorded names (the closest first).
    """
    names = [b.name for b in trace.boundaries]
    for selector in selectors:
        if selector.startswith("kind:"):
            if selector[5:] not in {k.value for k in BoundaryKind}:
                kinds = ", ".join(f"'kind:{k.value}'" for k in BoundaryKind)
                raise ConfigError(option, selector, f"one of {kinds}, a boundary name or a glob")
            continue
        if any(matches(selector, name, "") for name in names):
            continue
        if not names:
            raise ConfigError(option, selector, f"a recorded boundary name, but trace {trace.trace_id} has none")
        hint = " (a call with no recording follows on_missing, not live=)" if option == "live" else ""
        raise ConfigError(
            option, selector, f"a name or glob matching a recorded boundary{hint}: {_listed(_closest(selector, names))}"
        )


_KEY_PART = re.compile(r"^(?P<name>.+?)\[(?P<index>\d+)\]$")


def resolve_overrides(override: Mapping[str, Any], trace: Trace) -> dict[str, tuple[str, Any]]:
    """``{span id: (key as given, answer)}`` for what-if overrides.

    A key is a call key as :func:`~chronicle_otel.model.format_key` writes it (``"run_agent[0] > plan[0]"``), its
    tail (``"plan[0]"``) when that names one recorded call, or a bare name (``"plan"``: every call of it).

    Raises:
        ConfigError: a key that names no recorded call (the recorded keys listed, the closest first) or several.
    """
    resolved: dict[str, tuple[str, Any]] = {}
    for text, answer in override.items():
        found = _find_calls(text, trace)
        for b in found:
            if b.span_id in resolved:
                raise ConfigError("override", text, f"one override per call; {resolved[b.span_id][0]!r} also names it")
            resolved[b.span_id] = (text, answer)
    return resolved


def _find_calls(text: str, trace: Trace) -> list[Boundary]:
    keys = [format_key(b.call_key) for b in trace.boundaries]
    parts = [p.strip() for p in text.split(">")]
    if len(parts) == 1 and not _KEY_PART.match(parts[0]):
        found = [b for b in trace.boundaries if b.name == parts[0]]
    else:
        wanted: list[tuple[str, int]] = []
        for part in parts:
            m = _KEY_PART.match(part)
            if m is None:
                raise ConfigError("override", text, "a call key such as 'plan[0]' or 'run_agent[0] > plan[0]'")
            wanted.append((m["name"], int(m["index"])))
        tail = tuple(wanted)
        found = [b for b in trace.boundaries if b.call_key[-len(tail) :] == tail]
        if len(found) > 1 and len({b.call_key for b in found}) > 1:
            raise ConfigError(
                "override",
                text,
                f"a call key naming one call; it names {_listed([format_key(b.call_key) for b in found])}",
            )
    if not found:
        raise ConfigError("override", text, f"a recorded call key: {_listed(_closest(text, keys))}")
    return found


@dataclasses.dataclass
class Frame:
    """One boundary call in progress during replay: its call key and the call indexes of its children."""

    key: CallKey
    kind: str | None = None
    counters: dict[str, itertools.count[int]] = dataclasses.field(default_factory=dict)
    last: Boundary | None = None

    def next_key(self, name: str) -> CallKey:
        """The call key of the next call of ``name`` under this frame."""
        counter = self.counters.get(name)
        if counter is None:
            counter = self.counters.setdefault(name, itertools.count())
        return (*self.key, (name, next(counter)))  # next() is atomic under the GIL: concurrent siblings differ


class Recordings:
    """The recorded boundaries of a trace and which of them this replay has used."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self._by_key = trace.by_key()
        self._children: dict[CallKey, list[Boundary]] = {}
        for b in trace.boundaries:
            self._children.setdefault(b.call_key[:-1], []).append(b)
        self._used: set[str] = set()
        self._covered: set[str] = set()

    def match(self, parent: Frame, name: str, key: CallKey, digest: str | None) -> Boundary | None:
        """The recording of this call: by call key, else (concurrent siblings in another order) by input hash."""
        keyed = next((b for b in self._by_key.get(key, ()) if b.span_id not in self._used), None)
        if keyed is not None and (digest is None or keyed.raw_input is None or keyed.raw_input.digest == digest):
            return keyed
        if digest is not None:
            for b in self._children.get(parent.key, ()):
                if b.name == name and b.span_id not in self._used and b.raw_input and b.raw_input.digest == digest:
                    return b
        return keyed

    def use(self, rec: Boundary) -> None:
        """``rec`` answered or ran a call."""
        self._used.add(rec.span_id)

    def cover(self, rec: Boundary) -> None:
        """A stubbed call's recorded children will not run: they count as used."""
        stack = [rec.call_key]
        while stack:
            key = stack.pop()
            for child in self._children.get(key, ()):
                self._covered.add(child.span_id)
                stack.append(child.call_key)

    def nearest(self, parent: Frame, name: str) -> list[str]:
        """The recordings a call with no recording may have been meant to match, for the divergence message:
        the unused ones under the same parent (same name first), and how many of the same name were used."""
        siblings = self._children.get(parent.key, [])
        if not siblings:
            return ["(no recordings under this parent)"]
        same = [b for b in siblings if b.name == name]
        unused = [b for b in siblings if b.span_id not in self._used and b.span_id not in self._covered]
        unused.sort(key=lambda b: b.name != name)
        lines = [format_key(b.call_key) for b in unused[:5]]
        if len(unused) > 5:
            lines.append(f"… and {len(unused) - 5} more unused")
        used = sum(1 for b in same if b.span_id in self._used)
        if used:
            lines.append(f"{used} recorded call{'s' if used > 1 else ''} of {name!r} here already answered")
        return lines or ["(every recording under this parent is already used)"]

    def check_order(self, parent: Frame, rec: Boundary) -> Finding | None:
        """A divergence when ``rec`` was recorded entirely before the previous call under the same parent."""
        last = parent.last
        parent.last = rec
        if last is not None and rec.end_ns <= last.start_ns:
            return Finding("order", rec.call_key, f"called after {format_key(last.call_key)}, but recorded before it")
        return None

    def unused(self) -> Iterator[Boundary]:
        """Recordings never used (only the outermost of a never-used subtree)."""
        unused_keys: set[CallKey] = set()
        for b in self.trace.boundaries:
            if b.span_id in self._used or b.span_id in self._covered:
                continue
            if any(b.call_key[:i] in unused_keys for i in range(1, len(b.call_key))):
                continue
            unused_keys.add(b.call_key)
            yield b
