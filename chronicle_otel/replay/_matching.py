"""Matching calls to recordings: selectors, call keys, the input-hash fallback and the nearest recordings."""

from __future__ import annotations

import dataclasses
import fnmatch
import itertools
from collections.abc import Iterator

from ..model import Boundary, CallKey, Trace, format_key
from ._report import Finding


def matches(selector: str, name: str, kind: str) -> bool:
    """``selector`` (a name, a glob or ``kind:<kind>``) selects the boundary ``name`` of ``kind``."""
    if selector.startswith("kind:"):
        return kind == selector[5:]
    if any(c in selector for c in "*?["):
        return fnmatch.fnmatchcase(name, selector)
    return name == selector


@dataclasses.dataclass
class Frame:
    """One boundary call in progress during replay: its call key and the call indexes of its children."""

    key: CallKey
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
        """The recordings a call with no recording may have been meant to match, for the divergence message."""
        siblings = self._children.get(parent.key, [])
        same = [b for b in siblings if b.name == name]
        unused = [b for b in same or siblings if b.span_id not in self._used]
        shown = [format_key(b.call_key) for b in unused[:5]]
        used = len(same or siblings) - len(unused)
        if used:
            shown.append(f"({used} more already used)")
        return shown or ["(no recordings under this parent)"]

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
