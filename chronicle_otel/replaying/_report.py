"""The replay report: divergences, drift and changes, each explaining itself."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from enum import Enum
from typing import Any, Final

import orjson

from .._api import publish
from .._assembled import assemble, diff_messages
from ..codec import TAG, upgrade_encoding, with_classes
from ..errors import CodecError
from ..model import format_key

_MAX_DIFFS = 12


class _Key(str):
    """A key of a mapping whose keys are not all strings (written ``[key]``, matched as a name)."""

    __slots__ = ()


def format_path(segments: tuple[str | int, ...]) -> str:
    """``("order", "items", 0)`` as ``$.order.items[0]``: the paths of :func:`json_diff`."""
    parts = ["$"]
    for seg in segments:
        parts.append(f"[{seg}]" if isinstance(seg, (int, _Key)) else f".{seg}")
    return "".join(parts)


def json_diff(
    recorded: Any, actual: Any, path: str = "$", labels: tuple[str, str] = ("recorded", "now")
) -> Iterator[str]:
    """Readable differences between two JSON trees: ``$.order.quantity: recorded 1000 != now 5``.

    ``labels`` name the two sides (``("in a", "in b")`` compares two traces). A path names the values' own fields and
    items: the codec's tagged objects (a dataclass, a pydantic model, a tuple, an exception) are walked through, not
    named (``$[3].choices[0].delta``, not ``$[3].data.choices[0].data.delta``).
    """
    for segments, text in differences(recorded, actual, labels):
        yield f"{path}{format_path(segments)[1:]}: {text}"


def differences(
    recorded: Any, actual: Any, labels: tuple[str, str] = ("recorded", "now"), path: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """The differences of :func:`json_diff` as ``(path segments, what differs)``, to filter by path."""
    old, new = labels
    if isinstance(recorded, dict) and isinstance(actual, dict) and (TAG in recorded or TAG in actual):
        yield from _tagged_diff(recorded, actual, path, labels)
    elif isinstance(recorded, dict) and isinstance(actual, dict):
        yield from _mapping_diff(recorded, actual, path, labels)
    elif isinstance(recorded, list) and isinstance(actual, list):
        recorded, actual = with_classes(recorded), with_classes(actual)  # a run of models names its class once
        for i, (r, a) in enumerate(zip(recorded, actual)):  # noqa: B905 - lengths compared below
            yield from differences(r, a, labels, (*path, i))
        if len(recorded) != len(actual):
            yield path, f"{old} {len(recorded)} items, {new} {len(actual)}"
    elif recorded != actual or type(recorded) is not type(actual):
        yield path, f"{old} {short(recorded)} != {new} {short(actual)}"


def _mapping_diff(
    recorded: dict[Any, Any],
    actual: dict[Any, Any],
    path: tuple[str | int, ...],
    labels: tuple[str, str],
    keyed: bool = False,
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    old, new = labels
    for key in sorted(set(recorded) | set(actual), key=str):
        sub = (*path, _Key(key) if keyed else str(key))
        if key not in actual:
            yield sub, f"{old} {short(recorded[key])}, {new} missing"
        elif key not in recorded:
            yield sub, f"not {old}, {new} {short(actual[key])}"
        else:
            yield from differences(recorded[key], actual[key], labels, sub)


_FIELDS: Final = {"dataclass": "data", "namedtuple": "data", "custom": "data", "pydantic": "fields"}
"""The key that holds the fields of a tagged object, by tag."""


def _contents(node: dict[str, Any]) -> tuple[str, Any, Any] | None:
    """A tagged value's tag, class and own fields (a dict) or items (a list); None for a value compared whole (a
    datetime, an enum, a placeholder)."""
    tag = node.get(TAG)
    if not isinstance(tag, str):
        return None
    cls = node.get("class")
    if tag in _FIELDS:
        fields = node.get(_FIELDS[tag])
        private = node.get("private")
        if tag == "pydantic" and isinstance(fields, dict) and isinstance(private, dict):
            fields = {**fields, **private}  # private attributes start with "_": no field has their names
        return tag, cls, fields
    if tag == "exception":
        attrs = node.get("attrs")
        return tag, cls, {"message": node.get("message"), "args": node.get("args"), **(attrs or {})}
    if tag in ("tuple", "set", "frozenset", "dict"):
        items = node.get("items")
        if tag == "dict" and isinstance(items, list):  # keys that are not strings: each written as its JSON
            try:
                return tag, cls, {short(pair[0], 10_000): pair[1] for pair in items}
            except (TypeError, IndexError, KeyError):
                return tag, cls, items
        return tag, cls, items
    return None


def _scalar(node: Any) -> Any:
    """A tagged scalar as its text (a Decimal's ``"49.99"``, a datetime's ISO text, an enum's ``Side.BUY``); None
    for other values."""
    if not isinstance(node, dict):
        return node
    tag = node.get(TAG)
    if tag == "enum" and isinstance(node.get("class"), str):
        return f"{node['class'].rsplit('.', 1)[-1]}.{node.get('name')}"
    for key in ("value", "iso"):
        if key in node and tag not in _FIELDS and isinstance(node[key], str):
            return node[key]
    return None


def _tagged_diff(
    recorded: dict[str, Any], actual: dict[str, Any], path: tuple[str | int, ...], labels: tuple[str, str]
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Two values one of which at least the codec tagged: their fields compared under ``path`` itself when they are
    objects of one kind (a changed class said first), else the values compared whole."""
    old, new = labels
    r, a = _contents(recorded), _contents(actual)
    if r is None or a is None or r[0] != a[0] or type(r[2]) is not type(a[2]):
        if recorded != actual:
            shown = _scalar(recorded), _scalar(actual)
            if shown[0] is None or shown[1] is None or shown[0] == shown[1]:
                shown = recorded, actual
            yield path, f"{old} {short(shown[0])} != {new} {short(shown[1])}"
        return
    if r[1] != a[1]:
        yield path, f"{old} {short(r[1])} != {new} {short(a[1])}"
    if r[0] == "dict" and isinstance(r[2], dict) and isinstance(a[2], dict):
        yield from _mapping_diff(r[2], a[2], path, labels, keyed=True)
    else:
        yield from differences(r[2], a[2], labels, path)


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
    return filtered_diff(recorded_text, actual_text, None, labels)[0]


def filtered_diff(
    recorded_text: str | None,
    actual_text: str | None,
    ignored: Callable[[tuple[str | int, ...]], bool] | None,
    labels: tuple[str, str] = ("recorded", "now"),
) -> tuple[list[str], int]:
    """:func:`diff_lines` without the differences whose path ``ignored`` accepts, and how many those were.

    No line left means the two texts differ only where ``ignored`` accepts (or not at all).
    """
    recorded_text, actual_text = _current(recorded_text), _current(actual_text)
    try:
        recorded = orjson.loads(recorded_text) if recorded_text is not None else None
        actual = orjson.loads(actual_text) if actual_text is not None else None
    except orjson.JSONDecodeError:
        return [f"{labels[0]} {short(recorded_text)} != {labels[1]} {short(actual_text)}"], 0
    if recorded == actual:
        return [], 0
    lines = _stream_diff(recorded, actual) if ignored is None else None
    hidden = 0
    if lines is None:
        lines = []
        for segments, text in differences(recorded, actual, labels):
            if ignored is not None and ignored(segments):
                hidden += 1
            else:
                lines.append(f"{format_path(segments)}: {text}")
    if len(lines) > _MAX_DIFFS:
        lines = [*lines[:_MAX_DIFFS], f"… and {len(lines) - _MAX_DIFFS} more differences"]
    return lines, hidden


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
    LIVE_LLM_LIMIT = "live-llm-limit"
    """Divergence: an LLM boundary that would have run live past ``max_live_llm=``; it raised instead."""
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


class DriftCause(str, Enum):
    """Why a drift happened (:attr:`Finding.cause`): a string, like :class:`FindingKind`."""

    UPSTREAM = "upstream"
    """A call before it in the run changed (a live output that differs, a call with no recording run live): expected
    after a fix, whose effect the later calls see."""
    UNEXPLAINED = "unexplained"
    """Every call before it answered or returned as recorded: the request itself is built otherwise now (the prompt,
    the model settings or the code building it changed)."""
    INTENDED = "intended"
    """A declared change covers it (:func:`~chronicle_otel.changed`, ``changed=``, or an ``override=`` before it)."""

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
        cause: for drift and intended changes, why it happened (:class:`DriftCause`); None for the others.
        change: the declared change that covers it (in :attr:`ReplayReport.intended`).
        strict: this drift fails the replay (``strict=``).
    """

    kind: FindingKind
    call_key: tuple[tuple[str, int], ...]
    message: str
    details: tuple[str, ...] = ()
    cause: DriftCause | None = None
    change: str | None = None
    strict: bool = False

    def __post_init__(self) -> None:
        if type(self.kind) is not FindingKind:
            object.__setattr__(self, "kind", FindingKind(self.kind))
        if self.cause is not None and type(self.cause) is not DriftCause:
            object.__setattr__(self, "cause", DriftCause(self.cause))

    def __str__(self) -> str:
        tag = f"{self.kind}, {self.cause}" if self.cause is not None and self.change is None else str(self.kind)
        strict = " (strict: fails the replay)" if self.strict else ""
        head = (
            f"[{tag}] {format_key(self.call_key)}: {self.message}{strict}"
            if self.call_key
            else f"[{tag}] {self.message}{strict}"
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
            Each says its :attr:`~Finding.cause`: ``upstream`` (a call before it changed) or ``unexplained``.
        changes: live boundaries whose output (or error) differs from the recording — usually the point of the fix.
        intended: drift and changes a declared change covers (:func:`~chronicle_otel.changed`, ``changed=``,
            ``override=``), listed apart; they never fail the replay.
        overrides: the what-if answers given instead of the recording (``override=``).
        session: session variables of this process that differ from the recording's (information only).
        stubbed: call keys answered from the recording (overridden ones included).
        live: call keys that ran live.
        live_llm: call keys of LLM boundaries that ran live (model calls). One not selected with ``live=`` is
            also a ``live-llm`` divergence.
        ignored: differences of inputs that ``ignore=`` hid.
        strict: when true, drift also makes :attr:`ok` false (``strict=`` per selector marks the findings that do:
            :attr:`Finding.strict`).
    """

    divergences: list[Finding] = dataclasses.field(default_factory=list)
    drift: list[Finding] = dataclasses.field(default_factory=list)
    changes: list[Finding] = dataclasses.field(default_factory=list)
    intended: list[Finding] = dataclasses.field(default_factory=list)
    overrides: list[Finding] = dataclasses.field(default_factory=list)
    session: list[Finding] = dataclasses.field(default_factory=list)
    stubbed: list[tuple[tuple[str, int], ...]] = dataclasses.field(default_factory=list)
    live: list[tuple[tuple[str, int], ...]] = dataclasses.field(default_factory=list)
    live_llm: list[tuple[tuple[str, int], ...]] = dataclasses.field(default_factory=list)
    ignored: int = 0
    strict: bool = False

    @property
    def ok(self) -> bool:
        """No divergence, and no drift that ``strict=`` makes fail."""
        if self.divergences:
            return False
        return not (self.strict and self.drift) and not any(f.strict for f in self.drift)

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        llm = f" ({len(self.live_llm)} LLM)" if self.live_llm else ""
        extra = f", {len(self.overrides)} overridden" if self.overrides else ""
        tail = f", {len(self.intended)} intended" if self.intended else ""
        tail += f", {self.ignored} differences ignored" if self.ignored else ""
        lines = [
            f"replay {'ok' if self.ok else 'FAILED'}: {len(self.stubbed)} stubbed{extra}, {len(self.live)} live{llm}, "
            f"{len(self.divergences)} divergences, {len(self.drift)} drift, {len(self.changes)} changes{tail}"
        ]
        sections = (
            ("divergences", self.divergences),
            ("drift", self.drift),
            ("changes", self.changes),
            ("intended (declared changes)", self.intended),
            ("overrides", self.overrides),
            ("session variables that differ from the recording (information)", self.session),
        )
        for title, findings in sections:
            if findings:
                lines.append(f"{title}:")
                lines.extend("  " + str(f).replace("\n", "\n  ") for f in findings)
        return "\n".join(lines)


publish(__name__, globals())
