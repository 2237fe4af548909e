"""The neutral model of a recorded run: spans, boundaries and their payloads.

Loading builds it (:mod:`chronicle_otel.load`), replay reads it (:mod:`chronicle_otel.replaying`); this module imports
neither, nor anything of the recording pipeline. Every object is immutable.

API:
    :class:`Trace` — a recorded run: every span, the boundary calls in call order, the root boundary.
    :class:`Boundary` — one recorded boundary call, its payloads decoded on first access.
    :class:`SpanRecord` — one span as loaded from a trace source.
    :class:`Payload` — one recorded payload (input, output or error) and whether it is whole.
    :class:`ReplayedError` — a recorded exception whose class may not be rebuilt.
    :func:`format_key` — ``run_agent[0] > plan[1]``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import orjson

from . import semconv
from ._api import publish
from ._internal import hooks
from ._internal.unreplayable import classes_in
from .codec import UnresolvedObject, decode, decode_value
from .errors import CodecError, ReplayError

__all__ = ["Boundary", "CallKey", "Payload", "ReplayedError", "SpanRecord", "Trace", "format_key"]

CallKey = tuple[tuple[str, int], ...]
"""The chain of ``(boundary name, call index)`` from the root boundary down to a call."""


_PAYLOAD_KEYS = {"input": semconv.INPUT_KEYS, "output": semconv.OUTPUT_KEYS, "error": semconv.ERROR_KEYS}


@dataclasses.dataclass(frozen=True, slots=True)
class SpanRecord:
    """One span as loaded from a trace source (boundary or not: service spans are kept as context).

    Attributes:
        trace_id: 32 lowercase hex digits.
        span_id: 16 lowercase hex digits.
        parent_span_id: the parent's span id, or None for a root.
        name: span name.
        kind: OTLP span kind number (1 internal, 2 server, 3 client, 4 producer, 5 consumer; 0 unknown).
        start_ns, end_ns: times in ns since the epoch.
        attributes: attribute values as Python values (64-bit integers exact).
        status: ``UNSET``, ``OK`` or ``ERROR``.
        status_message: the status description.
        events: ``{"name", "time_ns", "attributes"}`` dicts.
        links: ``{"trace_id", "span_id", "attributes", "trace_state", "flags"}`` dicts.
        resource: resource attributes (empty when the source drops them).
        scope: instrumentation scope name.
        trace_state: the W3C ``tracestate`` header of the span context (empty when none).
        flags: the OTLP span flags (trace flags and the parent's is-remote bits; 0 when the source has none).
    """

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any]
    status: str = "UNSET"
    status_message: str = ""
    events: tuple[Mapping[str, Any], ...] = ()
    links: tuple[Mapping[str, Any], ...] = ()
    resource: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    scope: str = ""
    trace_state: str = ""
    flags: int = 0
    origin: str = dataclasses.field(default="", compare=False)
    """Where the span was read: ``file.jsonl:3``, ``store:<trace id>``, a URL…"""


@dataclasses.dataclass(frozen=True, slots=True)
class Payload:
    """One recorded payload (input, output or error) of a boundary.

    Attributes:
        text: the whole canonical JSON text, or the prefix the span kept when the whole is missing.
        digest: ``sha256:<hex>`` recorded on the span.
        status: ``ok`` (whole, hash verified), ``rehydrated`` (whole, fetched from the payload store by hash),
            ``missing`` (only a prefix: neither the span nor the store has the whole), ``unverified`` (no hash).
    """

    text: str
    digest: str | None
    status: str

    @property
    def complete(self) -> bool:
        """True when :attr:`text` is the whole payload."""
        return self.status != "missing"


class _SpanRecordSlots:
    """A :class:`SpanRecord` being filled in: the same slots, writable (see :func:`_span_record`)."""

    __slots__ = SpanRecord.__slots__


class _PayloadSlots:
    """A :class:`Payload` being filled in (see :func:`_payload`)."""

    __slots__ = Payload.__slots__


_new = object.__new__


def _span_record(
    trace_id: str,
    span_id: str,
    parent_span_id: str | None,
    name: str,
    kind: int,
    start_ns: int,
    end_ns: int,
    attributes: Mapping[str, Any],
    status: str,
    status_message: str,
    events: tuple[Mapping[str, Any], ...],
    links: tuple[Mapping[str, Any], ...],
    resource: Mapping[str, Any],
    scope: str,
    trace_state: str,
    flags: int,
    origin: str,
) -> SpanRecord:
    """The :class:`SpanRecord` of these fields (checked by the caller), made without the generated ``__init__``.

    Loading makes one per span, and a frozen dataclass's ``__init__`` writes each field through
    ``object.__setattr__``: most of the record's cost. Here the fields are written into an instance of a writable
    class with the same slots, which then becomes a :class:`SpanRecord`: the same frozen object, for a small part of
    that cost.
    """
    record: Any = _new(_SpanRecordSlots)
    record.trace_id = trace_id
    record.span_id = span_id
    record.parent_span_id = parent_span_id
    record.name = name
    record.kind = kind
    record.start_ns = start_ns
    record.end_ns = end_ns
    record.attributes = attributes
    record.status = status
    record.status_message = status_message
    record.events = events
    record.links = links
    record.resource = resource
    record.scope = scope
    record.trace_state = trace_state
    record.flags = flags
    record.origin = origin
    record.__class__ = SpanRecord
    return record  # type: ignore[no-any-return]


def _payload(text: str, digest: str | None, status: str) -> Payload:
    """The :class:`Payload` of these fields, made like :func:`_span_record`."""
    payload: Any = _new(_PayloadSlots)
    payload.text = text
    payload.digest = digest
    payload.status = status
    payload.__class__ = Payload
    return payload  # type: ignore[no-any-return]


class ReplayedError(Exception):
    """A recorded exception whose class may not be rebuilt (not registered or allowed).

    Attributes:
        type_name: the fully qualified class name of the original exception.
        message: ``str()`` of the original exception.
        recorded_args: its ``args``, decoded.
    """

    def __init__(self, type_name: str, message: str, args: Sequence[Any] = ()) -> None:
        self.type_name = type_name
        self.message = message
        self.recorded_args = tuple(args)
        super().__init__(f"{type_name}: {message}")


@dataclasses.dataclass(frozen=True, eq=False, slots=True)
class Boundary:
    """One recorded boundary call.

    Payload fields (:attr:`input`, :attr:`output`, :attr:`error`) are decoded on access. Typed objects are rebuilt
    only as classes that are registered or allowed. One allow-list for loading and replay: ``allow=`` given to
    :func:`~chronicle_otel.replay`, else the one given to :func:`~chronicle_otel.load_trace`, else the default:
    the top-level packages that define boundaries in this process (a value read before its module was imported
    is decoded again, typed, once it is). Other classes come back as
    :class:`~chronicle_otel.codec.UnresolvedObject`.

    Loading checks each payload's text against its hash and keeps the text; it is parsed only when first read. Text
    that is not chronicle-json (a hash-correct payload of another producer, or of a tampered trace) raises
    :class:`~chronicle_otel.errors.CodecError` then, naming the boundary, its span, where the span was read and the
    attribute (``chronicle.input``…).

    Attributes:
        name: boundary name.
        kind: boundary kind (``llm``, ``tool``…).
        call_index: ordinal among same-named calls under the same parent boundary.
        call_key: ``((name, index), …)`` from the root boundary down to this call.
        span_id: the span id (16 hex digits).
        parent: the nearest ancestor boundary, or None.
        session: ``chronicle.session.*`` values, unprefixed.
        start_ns, end_ns: times in ns.
        status: span status (``UNSET``, ``OK``, ``ERROR``).
        stream: the output was a stream (generator).
        stream_state: ``complete``, ``abandoned``, ``error`` or None.
        function: ``module.qualname`` of the recorded function, when known.
        raw_input, raw_output, raw_error: the :class:`Payload` records (None when absent).
        span: the underlying :class:`SpanRecord`.
    """

    name: str
    kind: str
    call_index: int
    call_key: CallKey
    span_id: str
    parent: Boundary | None
    session: Mapping[str, Any]
    start_ns: int
    end_ns: int
    status: str
    stream: bool
    stream_state: str | None
    function: str | None
    raw_input: Payload | None
    raw_output: Payload | None
    raw_error: Payload | None
    span: SpanRecord = dataclasses.field(repr=False)
    allow: tuple[str, ...] | None = dataclasses.field(default=None, repr=False)
    _decoded: dict[tuple[str, tuple[str, ...]], Any] | None = dataclasses.field(
        default=None, init=False, repr=False, compare=False
    )
    """The decoded payloads, by what and allow-list (see :meth:`_cached`); made on the first decode."""

    def __repr__(self) -> str:
        return f"Boundary({self.name!r}, kind={self.kind!r}, key={format_key(self.call_key)}, status={self.status})"

    def _allow(self, allow: Iterable[str] | None) -> tuple[str, ...]:
        """The allow-list: ``allow``, else ``load_trace(allow=...)``, else the packages defining boundaries now."""
        if allow is not None:
            return tuple(allow)
        if self.allow is not None:
            return self.allow
        return hooks.boundary_packages()

    def _decode(self, payload: Payload | None, what: str, allow: Iterable[str] | None = None) -> Any:
        if payload is None:
            return None
        if not payload.complete:
            where = f" at {self.span.origin}" if self.span.origin else ""
            keys = _PAYLOAD_KEYS[what]
            if keys.text not in self.span.attributes:
                raise ReplayError(
                    f"the {what} of boundary {format_key(self.call_key)} (span {self.span_id}{where}) was dropped from "
                    f"the span (only its hash {payload.digest} is left: a collector or backend removed the attribute) "
                    "and the payload store has no copy of it; load the trace with the store that recorded it "
                    "(store=...)"
                )
            if self.span.attributes.get(keys.truncated) in (True, "true"):
                raise ReplayError(
                    f"the {what} of boundary {format_key(self.call_key)} (span {self.span_id}{where}) was truncated "
                    f"to {len(payload.text)} characters and the payload store has no copy of {payload.digest}; "
                    "load the trace with the store that recorded it (store=...)"
                )
            raise ReplayError(  # not cut on the span: its text was changed after it was recorded
                f"the {what} of boundary {format_key(self.call_key)} (span {self.span_id}{where}) does not match its "
                f"hash {payload.digest}: it was changed after it was recorded (an edited trace file?), and the "
                "payload store has no copy of the recorded one"
            )
        try:
            return decode(payload.text, allow=self._allow(allow))
        except RecursionError:
            raise CodecError(f"the {what} of boundary {format_key(self.call_key)} nests too deep to decode") from None
        except CodecError as exc:
            raise self._undecodable(what, exc) from None

    def _undecodable(self, what: str, exc: CodecError) -> CodecError:
        """The error for a payload whose text the codec refuses, naming the boundary, its span and the attribute.

        Loading checks a payload's hash, not its JSON: the text is parsed when it is first read.
        """
        where = f" at {self.span.origin}" if self.span.origin else ""
        return CodecError(
            f"the {what} of boundary {format_key(self.call_key)} (span {self.span_id}{where}, attribute "
            f"chronicle.{what}) cannot be decoded: {exc}"
        )

    def _cached(self, what: str, decode_it: Callable[[tuple[str, ...]], Any]) -> Any:
        """The decoded ``what``, cached per allow-list.

        A module imported later (a new boundary package) changes the default list: the payload is decoded again.
        """
        allow = self._allow(None)
        cache = self._decoded
        if cache is None:
            cache = {}
            object.__setattr__(self, "_decoded", cache)
        key = (what, allow)
        if key not in cache:
            cache[key] = decode_it(allow)
        return cache[key]

    @property
    def input(self) -> Any:
        """The recorded arguments ``{param: value}``.

        A mapping for every boundary chronicle records; a payload written by another producer is kept as recorded,
        whatever its JSON type.
        """
        return self._cached("input", self.decode_input)

    @property
    def output(self) -> Any:
        """The recorded return value (for a stream: the list of yielded items); None when the call raised."""
        return self._cached("output", self.decode_output)

    @property
    def error(self) -> BaseException | None:
        """The recorded exception, rebuilt when its class is allowed, else a :class:`ReplayedError`."""
        error: BaseException | None = self._cached("error", self.decode_error)
        return error

    def decode_input(self, allow: Iterable[str] | None = None) -> Any:
        """The input decoded with ``allow`` instead of the default allow-list (see :attr:`input`)."""
        return self._decode(self.raw_input, "input", allow)

    def decode_output(self, allow: Iterable[str] | None = None) -> Any:
        """The output decoded with ``allow`` instead of the default allow-list."""
        return self._decode(self.raw_output, "output", allow)

    def decode_error(self, allow: Iterable[str] | None = None) -> BaseException | None:
        """The error decoded with ``allow``: the original class when allowed, else :class:`ReplayedError`."""
        payload = self.raw_error
        if payload is None:
            return None
        self._decode(payload, "error", ())  # raises the clear error when the payload is incomplete
        envelope = orjson.loads(payload.text)
        if not isinstance(envelope, dict):
            return None
        type_name = str(envelope.get("type", "builtins.Exception"))
        message = str(envelope.get("message", ""))
        tagged = {"$type": "exception", "class": type_name, "message": message, "args": envelope.get("args") or []}
        if isinstance(envelope.get("attrs"), dict):
            tagged["attrs"] = envelope["attrs"]
        try:
            value = decode_value(tagged, allow=self._allow(allow))
        except RecursionError:
            raise CodecError(f"the error of boundary {format_key(self.call_key)} nests too deep to decode") from None
        except CodecError as exc:
            raise self._undecodable("error", exc) from None
        if isinstance(value, BaseException):
            return value
        args = value.data.get("args", []) if isinstance(value, UnresolvedObject) else []
        return ReplayedError(type_name, message, args)

    @property
    def unreplayable(self) -> tuple[str, ...]:
        """The classes of the values this call's output or error holds as ``unencodable`` placeholders.

        A stub cannot answer with them; empty when every value was recorded typed. Read from the payloads, or from
        the span's ``chronicle.unreplayable`` when a payload is cut and its whole was not found.
        """
        found: dict[str, None] = {}
        for payload in (self.raw_output, self.raw_error):
            if payload is not None and "unencodable" in payload.text:
                found.update(dict.fromkeys(classes_in(payload.text.encode())))
        if not found and any(p is not None and not p.complete for p in (self.raw_output, self.raw_error)):
            marked = self.span.attributes.get(semconv.UNREPLAYABLE)
            if isinstance(marked, (list, tuple)):
                found.update(dict.fromkeys(str(m) for m in marked))
        return tuple(found)

    @property
    def failed(self) -> bool:
        """True when the call raised."""
        return self.raw_error is not None


class _BoundarySlots:
    """A :class:`Boundary` being filled in (see :func:`_boundary_record`)."""

    __slots__ = Boundary.__slots__


def _boundary_record(
    name: str,
    kind: str,
    call_index: int,
    call_key: CallKey,
    span_id: str,
    parent: Boundary | None,
    session: Mapping[str, Any],
    start_ns: int,
    end_ns: int,
    status: str,
    stream: bool,
    stream_state: str | None,
    function: str | None,
    raw_input: Payload | None,
    raw_output: Payload | None,
    raw_error: Payload | None,
    span: SpanRecord,
    allow: tuple[str, ...] | None,
) -> Boundary:
    """The :class:`Boundary` of these fields (checked by the caller), made like :func:`_span_record`."""
    boundary: Any = _new(_BoundarySlots)
    boundary.name = name
    boundary.kind = kind
    boundary.call_index = call_index
    boundary.call_key = call_key
    boundary.span_id = span_id
    boundary.parent = parent
    boundary.session = session
    boundary.start_ns = start_ns
    boundary.end_ns = end_ns
    boundary.status = status
    boundary.stream = stream
    boundary.stream_state = stream_state
    boundary.function = function
    boundary.raw_input = raw_input
    boundary.raw_output = raw_output
    boundary.raw_error = raw_error
    boundary.span = span
    boundary.allow = allow
    boundary._decoded = None
    boundary.__class__ = Boundary
    return boundary  # type: ignore[no-any-return]


def format_key(key: Sequence[tuple[str, int]]) -> str:
    """``run_agent[0] > plan[1]``."""
    return " > ".join(f"{name}[{index}]" for name, index in key) or "<root>"


@dataclasses.dataclass(frozen=True, eq=False)
class Trace:
    """A recorded run: every span of one trace, and its boundaries in call order.

    :func:`~chronicle_otel.load.load_trace` builds it; :func:`~chronicle_otel.load.write_trace` writes it to a
    portable OTLP/JSON file.

    Attributes:
        trace_id: 32 lowercase hex digits.
        spans: all spans, boundary or not, ordered by start time.
        boundaries: the boundary calls in call order (start time).
        root: the outermost boundary (None when the trace has no boundary).
        source: where it was loaded from.
        warnings: problems found while loading (missing root span, missing payloads…).
        conflicts: span ids the source held more than once with different payloads (an edited or damaged source;
            the most complete copy is kept, and a replay reports the call).
    """

    trace_id: str
    spans: tuple[SpanRecord, ...]
    boundaries: tuple[Boundary, ...]
    root: Boundary | None
    source: str = ""
    warnings: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()

    def __repr__(self) -> str:
        root = self.root.name if self.root else None
        return f"Trace({self.trace_id}, root={root!r}, boundaries={len(self.boundaries)}, spans={len(self.spans)})"

    def by_key(self) -> dict[CallKey, list[Boundary]]:
        """Boundaries grouped by call key (concurrent siblings may share one)."""
        out: dict[CallKey, list[Boundary]] = {}
        for b in self.boundaries:
            out.setdefault(b.call_key, []).append(b)
        return out

    def find(self, name: str) -> list[Boundary]:
        """The boundaries called ``name``, in call order."""
        return [b for b in self.boundaries if b.name == name]


publish(__name__, globals())
