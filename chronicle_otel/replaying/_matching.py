"""Matching calls to recordings: selectors, call keys, the input-hash fallback and the nearest recordings."""

from __future__ import annotations

import difflib
import fnmatch
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from .._internal.digest import payload_digest
from .._internal.gc_pause import gc_paused
from ..codec import same_encoding
from ..errors import ConfigError
from ..model import Boundary, CallKey, Payload, Trace, format_key
from ..record.extension import BoundaryKind
from ._report import Finding, FindingKind

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


def check_selectors(
    option: str, selectors: Iterable[str], trace: Trace, defined: Callable[[str], list[Any]] | None = None
) -> None:
    """Raise when a selector can select nothing: an unknown ``kind:``, or a name or glob no recorded boundary has.

    Args:
        option: the option named in the error.
        selectors: the selectors given.
        trace: the recorded run.
        defined: for ``live=``, the boundaries defined in this process by name: a new boundary (not in the
            recording) may be selected live, for calls that run under ``on_missing="live"``.

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
        if selector in names or any(matches(selector, name, "") for name in names):  # an exact name is that name
            continue
        if defined is not None and defined(selector):
            continue
        if not names:
            raise ConfigError(option, selector, f"a recorded boundary name, but trace {trace.trace_id} has none")
        hint = " (or a boundary defined in this process)" if defined is not None else ""
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


def first_call(option: str, text: str, trace: Trace) -> Boundary:
    """The recorded call ``text`` names for ``option`` (``live_from=``): a call key as :func:`format_key` writes it, its
    tail when that names one call, or a name or glob (the first call, in call order, of a boundary it matches).

    Raises:
        ConfigError: ``text`` names no recorded call (the recorded keys listed, the closest first), or a key tail
            names several.
    """
    glob = any(c in text for c in "*?[") and not any(b.name == text for b in trace.boundaries)
    if glob:
        found = [b for b in trace.boundaries if fnmatch.fnmatchcase(b.name, text)]
        if found:
            return found[0]
    return _find_calls(text, trace, option)[0]


def _find_calls(text: str, trace: Trace, option: str = "override") -> list[Boundary]:
    keys = [format_key(b.call_key) for b in trace.boundaries]
    # A recorded name as it is, then a recorded key or its tail as format_key wrote it: names may hold ">" or "[".
    found = [b for b in trace.boundaries if b.name == text]
    if not found:
        found = [b for b, key in zip(trace.boundaries, keys, strict=True) if key == text or key.endswith(" > " + text)]
    if not found:
        tail = _parsed_key(text)  # the same key written with other spacing (``run_agent[0]>plan[0]``)
        if tail:
            found = [b for b in trace.boundaries if b.call_key[-len(tail) :] == tail]
    if len(found) > 1 and len({b.call_key for b in found}) > 1 and any(b.name != text for b in found):
        raise ConfigError(
            option, text, f"a call key naming one call; it names {_listed([format_key(b.call_key) for b in found])}"
        )
    if not found:
        raise ConfigError(option, text, f"a recorded call key or name: {_listed(_closest(text, keys))}")
    return found


def _parsed_key(text: str) -> tuple[tuple[str, int], ...]:
    wanted: list[tuple[str, int]] = []
    for part in text.split(">"):
        m = _KEY_PART.match(part.strip())
        if m is None:
            return ()
        wanted.append((m["name"], int(m["index"])))
    return tuple(wanted)


class Frame:
    """One boundary call in progress during replay: its call key and the call indexes of its children.

    Attributes:
        key: the call key.
        kind: the boundary kind (None for the root of the replay).
        counters: per boundary name, the call indexes of the calls made under this one.
        last: the recording that answered or ran the latest call under this one.
    """

    __slots__ = ("counters", "key", "kids", "kind", "last")

    def __init__(self, key: CallKey, kind: str | None = None) -> None:
        self.key = key
        self.kind = kind
        self.counters: dict[str, itertools.count[int]] = {}
        self.last: Boundary | None = None
        self.kids: dict[tuple[str, int], list[Boundary]] | None = None
        """The recordings under this call by ``(name, index)``, looked up once (by :meth:`Recordings.match`)."""

    def next_key(self, name: str) -> CallKey:
        """The call key of the next call of ``name`` under this frame."""
        counter = self.counters.get(name)
        if counter is None:
            counter = self.counters.setdefault(name, itertools.count())
        return (*self.key, (name, next(counter)))  # next() is atomic under the GIL: concurrent siblings differ


_NO_KIDS: dict[tuple[str, int], list[Boundary]] = {}

_VERIFIED = frozenset({"ok", "rehydrated"})
"""Payload statuses whose text is known to be the one its hash addresses."""


class CallInput:
    """The canonical encoding of one call's input, to compare with recorded ones.

    It is given before the scan for secret values (``scan``): when those bytes already equal the recorded input,
    the call is the recorded one and the scan is skipped (a recorded input was scanned when it was recorded, and the
    scan leaves scanned text as it is). Its hash is computed only when a comparison needs it: a recorded input whose
    text was verified against its hash when the trace was loaded compares by text, which is the same answer for less
    work.
    """

    __slots__ = ("_data", "_digest", "_scan", "_text", "unscanned")

    def __init__(self, data: bytes, scan: Callable[[bytes], bytes] | None = None) -> None:
        self.unscanned = data.decode()
        self._scan = scan
        self._data: bytes | None = data if scan is None else None
        self._text: str | None = self.unscanned if scan is None else None
        self._digest: str | None = None

    @property
    def data(self) -> bytes:
        """The encoding, secret values redacted."""
        if self._data is None:
            assert self._scan is not None
            self._data = self._scan(self.unscanned.encode())
        return self._data

    @property
    def text(self) -> str:
        """:attr:`data` as text."""
        if self._text is None:
            self._text = self.data.decode()
        return self._text

    @property
    def digest(self) -> str:
        """``sha256:<hex>`` of the encoding, as recorded inputs are addressed."""
        if self._digest is None:
            self._digest = payload_digest(self.data)
        return self._digest

    def same_as(self, recorded: Payload) -> bool:
        """True when ``recorded`` is this input: the same text (or hash), or the same value as an earlier version of
        the codec wrote it."""
        if recorded.status in _VERIFIED:
            if recorded.text == self.unscanned or recorded.text == self.text:
                return True
        elif recorded.digest == self.digest:
            return True
        return recorded.complete and same_encoding(recorded.text, self.text)


class Recordings:
    """The recorded boundaries of a trace and which of them this replay has used."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        with gc_paused():  # a few objects per recording, and no cycles
            # by parent call key, then by (name, index): a frame keeps its own part (see match)
            self._by_parent: dict[CallKey, dict[tuple[str, int], list[Boundary]]] = {}
            self._children: dict[CallKey, list[Boundary]] = {}
            for b in trace.boundaries:
                parent_key = b.call_key[:-1]
                self._children.setdefault(parent_key, []).append(b)
                if b.call_key:
                    self._by_parent.setdefault(parent_key, {}).setdefault(b.call_key[-1], []).append(b)
            self._parents = {b.span_id for b in trace.boundaries if b.call_key in self._children}
        self._by_input: dict[tuple[CallKey, str, str], tuple[list[Boundary], list[int]]] | None = None
        self._used: set[str] = set()
        self._covered: set[str] = set()

    def _siblings_by_input(self) -> dict[tuple[CallKey, str, str], tuple[list[Boundary], list[int]]]:
        """(parent key, name, input hash) -> the siblings recorded with that input, in call order, and how many of
        them (from the first) are known to be used. Built the first time a call's input sends it to another
        sibling than its call key's; then each such call finds its recording at once, however many siblings."""
        if self._by_input is None:
            index: dict[tuple[CallKey, str, str], tuple[list[Boundary], list[int]]] = {}
            with gc_paused():
                for b in self.trace.boundaries:
                    if b.raw_input is not None and b.raw_input.digest:
                        index.setdefault((b.call_key[:-1], b.name, b.raw_input.digest), ([], [0]))[0].append(b)
            self._by_input = index
        return self._by_input

    def match(self, parent: Frame, name: str, key: CallKey, actual: CallInput | None) -> Boundary | None:
        """The recording of this call: by call key, else (concurrent siblings in another order) by input hash."""
        used = self._used
        keyed = None
        kids = parent.kids
        if kids is None:
            kids = parent.kids = self._by_parent.get(parent.key, _NO_KIDS)
        for b in kids.get(key[-1], ()):  # key is parent.next_key(name): parent.key plus (name, index)
            if b.span_id not in used:
                keyed = b
                break
        if keyed is not None and (actual is None or keyed.raw_input is None or actual.same_as(keyed.raw_input)):
            return keyed
        if actual is not None:
            found = self._siblings_by_input().get((parent.key, name, actual.digest))
            if found is not None:
                siblings, skipped = found
                start = skipped[0]
                while start < len(siblings) and siblings[start].span_id in used:
                    start += 1  # a recording once used stays used: never looked at again
                skipped[0] = start
                for i in range(start, len(siblings)):
                    if siblings[i].span_id not in used:
                        return siblings[i]
        return keyed

    def use(self, rec: Boundary) -> None:
        """``rec`` answered or ran a call."""
        self._used.add(rec.span_id)

    def cover(self, rec: Boundary) -> None:
        """A stubbed call's recorded children will not run: they count as used."""
        if rec.span_id not in self._parents:
            return
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
            return Finding(
                FindingKind.ORDER, rec.call_key, f"called after {format_key(last.call_key)}, but recorded before it"
            )
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
