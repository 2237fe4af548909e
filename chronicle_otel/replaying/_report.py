"""The replay report: divergences, drift and changes, each explaining itself."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from enum import Enum
from typing import Any

import orjson

from .._api import publish
from .._assembled import assemble, diff_messages
from ..codec import upgrade_encoding
from ..errors import CodecError
from ..model import format_key

_MAX_DIFFS = 12


def json_diff(
    recorded: Any, actual: Any, path: str = "$", labels: tuple[str, str] = ("recorded", "now")
) -> Iterator[str]:
    """Readable differences between two JSON trees: ``$.order.data.quantity: recorded 1000 != now 5``.

    ``labels`` name the two sides (``("in a", "in b")`` compares two traces).
    """
    old, new = labels
    if isinstance(recorded, dict) and isinstance(actual, dict):
        for key in sorted(set(recorded) | set(actual), key=str):
            sub = f"{path}.{key}"
            if key not in actual:
                yield f"{sub}: {old} {short(recorded[key])}, {new} missing"
            elif key not in recorded:
                yield f"{sub}: not {old}, {new} {short(actual[key])}"
            else:
                yield from json_diff(recorded[key], actual[key], sub, labels)
    elif isinstance(recorded, list) and isinstance(actual, list):
        for i, (r, a) in enumerate(zip(recorded, actual)):  # noqa: B905 - lengths compared below
            yield from json_diff(r, a, f"{path}[{i}]", labels)
        if len(recorded) != len(actual):
            yield f"{path}: {old} {len(recorded)} items, {new} {len(actual)}"
    elif recorded != actual or type(recorded) is not type(actual):
        yield f"{path}: {old} {short(recorded)} != {new} {short(actual)}"


def short(value: Any, width: int = 80) -> str:
    """``value`` as one line of at most ``width`` characters (JSON, or the string's repr)."""
    text = orjson.dumps(value).decode() if not isinstance(value, str) else repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def short_repr(value: Any, width: int = 120) -> str:
    """``repr(value)`` on one line of at most ``width`` characters (never raising).

    The items of an LLM's stream (SDK chunks or events) are shown as the message they carry:
    ``stream of 20 chunks: tool call place_order {"quantity": 10}; finish tool_calls``.
    """
    if isinstance(value, (list, tuple)) and value:
        try:
            message = assemble(value, strings=False)
        except Exception:  # a description never fails the report
            message = None
        if message is not None:
            return message.summary(width)
    try:
        text = repr(value)
    except Exception as exc:
        text = f"<{type(value).__name__}: repr raised {type(exc).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def diff_lines(
    recorded_text: str | None, actual_text: str | None, labels: tuple[str, str] = ("recorded", "now")
) -> list[str]:
    """The first differences between two canonical JSON payload texts (``labels`` as :func:`json_diff`).

    A text recorded by an earlier version is read as this version encodes the same value: only what changed is listed,
    not how models used to be written.
    """
    recorded_text, actual_text = _current(recorded_text), _current(actual_text)
    try:
        recorded = orjson.loads(recorded_text) if recorded_text is not None else None
        actual = orjson.loads(actual_text) if actual_text is not None else None
    except orjson.JSONDecodeError:
        return [f"{labels[0]} {short(recorded_text)} != {labels[1]} {short(actual_text)}"]
    lines = _stream_diff(recorded, actual) if recorded != actual else []
    if lines is None:
        lines = list(json_diff(recorded, actual, labels=labels))
    if len(lines) > _MAX_DIFFS:
        lines = [*lines[:_MAX_DIFFS], f"… and {len(lines) - _MAX_DIFFS} more differences"]
    return lines


def _stream_diff(recorded: Any, actual: Any) -> list[str] | None:
    """For two streams of an LLM's items (SDK chunks or events): how the messages they carry differ; None for other
    values."""
    if not (isinstance(recorded, list) and isinstance(actual, list) and recorded and actual):
        return None
    a, b = assemble(recorded, strings=False), assemble(actual, strings=False)
    if a is None or b is None:
        return None
    return diff_messages(a, b) or [f"the same message, streamed differently: {a.head()} -> {b.head()}"]


def _current(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        return upgrade_encoding(text)
    except CodecError:
        return text


class FindingKind(str, Enum):
    """What a :class:`Finding` reports. A string: ``finding.kind == "output-changed"`` holds, and the JSON of a
    report (``dataclasses.asdict``) has the string value."""

    UNEXPECTED_CALL = "unexpected-call"
    """Divergence: a call with no recording (``on_missing="error"``, or a ``call(...)`` block); the nearest recordings
    are listed."""
    UNUSED_RECORDING = "unused-recording"
    """Divergence: a recorded call never made, whose parent did not run live (the root itself, when ``rerun()`` was
    never called)."""
    INPUT_MISMATCH = "input-mismatch"
    """Divergence: a stubbed call whose input differs from the recording, under ``on_input_mismatch="error"``."""
    ORDER = "order"
    """Divergence: a call made after a sibling that was recorded after it."""
    LIVE_LLM = "live-llm"
    """Divergence: an LLM boundary that ran live (a model call) without ``live=`` selecting it."""
    NETWORK = "network"
    """Divergence: a DNS lookup or a connection the network guard refused (even when the code swallowed the
    error)."""
    OVERRIDE_UNUSED = "override-unused"
    """Divergence: an ``override=`` that never applied (the call was not made)."""
    UNRESOLVED = "unresolved"
    """Divergence (drift when ``allow=`` was given): a recorded value whose class may not be rebuilt here, so a stub
    or ``rerun()`` would use a placeholder."""
    UNDECODABLE = "undecodable"
    """Divergence: a stub whose recording cannot answer (a payload cut with no store, a class that refuses the
    recorded data)."""
    NOT_CANCELLED = "not-cancelled"
    """Divergence: a call its caller cancelled when recorded, which nothing cancelled in the replay."""
    PAST_RECORDING = "past-recording"
    """Divergence: a stubbed stream read further than its recording went."""
    CONFLICTING_RECORDINGS = "conflicting-recordings"
    """Divergence: the source holds a span more than once with different payloads (edited or damaged)."""
    INPUT_DRIFT = "input-drift"
    """Drift: a stubbed call whose input changed, answered from the recording (``on_input_mismatch="warn"``)."""
    UNRECORDED_LIVE = "unrecorded-live"
    """Drift: a call with no recording that ran live (``on_missing="live"``)."""
    OUTPUT_CHANGED = "output-changed"
    """Change: a live call whose output or error differs from the recording."""
    NOT_CALLED = "not-called"
    """Change: a recorded call the live code no longer makes (its parent ran live)."""
    OVERRIDE = "override"
    """Override: a call answered by ``override=`` instead of its recording (the recorded and the new value)."""
    SESSION = "session"
    """Session: a session variable of this process that differs from the recording's (information only)."""

    def __str__(self) -> str:
        return self.value


@dataclasses.dataclass(frozen=True)
class Finding:
    """One entry of a :class:`ReplayReport`.

    Attributes:
        kind: what it reports (:class:`FindingKind`, a string; a string value given is made the member).
        call_key: the call key concerned (recorded key for recordings, actual key for calls).
        message: one line saying what happened.
        details: the differences or candidates, one per line.
    """

    kind: FindingKind
    call_key: tuple[tuple[str, int], ...]
    message: str
    details: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if type(self.kind) is not FindingKind:
            object.__setattr__(self, "kind", FindingKind(self.kind))

    def __str__(self) -> str:
        head = (
            f"[{self.kind}] {format_key(self.call_key)}: {self.message}"
            if self.call_key
            else f"[{self.kind}] {self.message}"
        )
        return "\n".join([head, *(f"    {line}" for line in self.details)])


@dataclasses.dataclass
class ReplayReport:
    """What a replay found.

    Attributes:
        divergences: calls with no recording, recordings never used, changed order, input mismatches under
            ``on_input_mismatch="error"``. Any of them makes :attr:`ok` false.
        drift: stubbed calls whose input changed under ``"warn"`` (expected after a fix: downstream LLM
            calls see new inputs; the stub still answers), and unrecorded calls run live under ``on_missing="live"``.
        changes: live boundaries whose output (or error) differs from the recording — usually the point of the fix.
        overrides: the what-if answers given instead of the recording (``override=``).
        session: session variables of this process that differ from the recording's (information only).
        stubbed: call keys answered from the recording (overridden ones included).
        live: call keys that ran live.
        live_llm: call keys of LLM boundaries that ran live (model calls). One not selected with ``live=`` is
            also a ``live-llm`` divergence.
        strict: when true, drift also makes :attr:`ok` false.
    """

    divergences: list[Finding] = dataclasses.field(default_factory=list)
    drift: list[Finding] = dataclasses.field(default_factory=list)
    changes: list[Finding] = dataclasses.field(default_factory=list)
    overrides: list[Finding] = dataclasses.field(default_factory=list)
    session: list[Finding] = dataclasses.field(default_factory=list)
    stubbed: list[tuple[tuple[str, int], ...]] = dataclasses.field(default_factory=list)
    live: list[tuple[tuple[str, int], ...]] = dataclasses.field(default_factory=list)
    live_llm: list[tuple[tuple[str, int], ...]] = dataclasses.field(default_factory=list)
    strict: bool = False

    @property
    def ok(self) -> bool:
        """No divergence (and, when strict, no drift)."""
        return not self.divergences and not (self.strict and self.drift)

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        llm = f" ({len(self.live_llm)} LLM)" if self.live_llm else ""
        extra = f", {len(self.overrides)} overridden" if self.overrides else ""
        lines = [
            f"replay {'ok' if self.ok else 'FAILED'}: {len(self.stubbed)} stubbed{extra}, {len(self.live)} live{llm}, "
            f"{len(self.divergences)} divergences, {len(self.drift)} drift, {len(self.changes)} changes"
        ]
        sections = (
            ("divergences", self.divergences),
            ("drift", self.drift),
            ("changes", self.changes),
            ("overrides", self.overrides),
            ("session variables that differ from the recording (information)", self.session),
        )
        for title, findings in sections:
            if findings:
                lines.append(f"{title}:")
                lines.extend("  " + str(f).replace("\n", "\n  ") for f in findings)
        return "\n".join(lines)


publish(__name__, globals())
