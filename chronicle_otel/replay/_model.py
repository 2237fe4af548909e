"""The immutable model of a recorded run: spans, boundaries and their payloads."""

from __future__ import annotations

import dataclasses
import functools
import gzip
import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import orjson

from .. import semconv
from .._internal.otlp_json import spans_to_request
from ..codec import CODEC_VERSION, UnresolvedObject, decode, decode_value
from ..errors import CodecError, ReplayError, TraceLoadError

_CODECS = {CODEC_VERSION}


@dataclasses.dataclass(frozen=True)
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
        links: ``{"trace_id", "span_id", "attributes"}`` dicts.
        resource: resource attributes (empty when the source drops them).
        scope: instrumentation scope name.
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
    origin: str = dataclasses.field(default="", compare=False)
    """Where the span was read: ``file.jsonl:3``, ``store:<trace id>``, a URL…"""


@dataclasses.dataclass(frozen=True)
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


def _sha(text: str) -> str:
    # A lone surrogate (possible only in text from a custom source) hashes to no recorded digest.
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


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


@dataclasses.dataclass(frozen=True, eq=False)
class Boundary:
    """One recorded boundary call.

    Payload fields (:attr:`input`, :attr:`output`, :attr:`error`) are decoded on first access with the
    trace's allow-list; typed objects are rebuilt only for registered or allowed classes.

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
    call_key: tuple[tuple[str, int], ...]
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
    allow: tuple[str, ...] = dataclasses.field(default=(), repr=False)

    def __repr__(self) -> str:
        return f"Boundary({self.name!r}, kind={self.kind!r}, key={format_key(self.call_key)}, status={self.status})"

    def _decode(self, payload: Payload | None, what: str, allow: Iterable[str] | None = None) -> Any:
        if payload is None:
            return None
        if not payload.complete:
            where = f" at {self.span.origin}" if self.span.origin else ""
            raise ReplayError(
                f"the {what} of boundary {format_key(self.call_key)} (span {self.span_id}{where}) was truncated to "
                f"{len(payload.text)} characters and the payload store has no copy of {payload.digest}; "
                "load the trace with the store that recorded it (store=...)"
            )
        try:
            return decode(payload.text, allow=self.allow if allow is None else tuple(allow))
        except RecursionError:
            raise CodecError(f"the {what} of boundary {format_key(self.call_key)} nests too deep to decode") from None

    @functools.cached_property
    def input(self) -> dict[str, Any]:
        """The recorded arguments ``{param: value}``."""
        value = self._decode(self.raw_input, "input")
        return value if isinstance(value, dict) else {}

    @functools.cached_property
    def output(self) -> Any:
        """The recorded return value (for a stream: the list of yielded items); None when the call raised."""
        return self._decode(self.raw_output, "output")

    @functools.cached_property
    def error(self) -> BaseException | None:
        """The recorded exception, rebuilt when its class is allowed, else a :class:`ReplayedError`."""
        return self.decode_error()

    def decode_input(self, allow: Iterable[str] | None = None) -> dict[str, Any]:
        """The input decoded with ``allow`` instead of the trace's allow-list."""
        value = self._decode(self.raw_input, "input", allow)
        return value if isinstance(value, dict) else {}

    def decode_output(self, allow: Iterable[str] | None = None) -> Any:
        """The output decoded with ``allow`` instead of the trace's allow-list."""
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
        try:
            value = decode_value(tagged, allow=self.allow if allow is None else tuple(allow))
        except RecursionError:
            raise CodecError(f"the error of boundary {format_key(self.call_key)} nests too deep to decode") from None
        if isinstance(value, BaseException):
            return value
        args = value.data.get("args", []) if isinstance(value, UnresolvedObject) else []
        return ReplayedError(type_name, message, args)

    @property
    def failed(self) -> bool:
        """True when the call raised."""
        return self.raw_error is not None


def format_key(key: Sequence[tuple[str, int]]) -> str:
    """``run_agent[0] > plan[1]``."""
    return " > ".join(f"{name}[{index}]" for name, index in key) or "<root>"


@dataclasses.dataclass(frozen=True, eq=False)
class Trace:
    """A recorded run: every span of one trace, and its boundaries in call order.

    Attributes:
        trace_id: 32 lowercase hex digits.
        spans: all spans, boundary or not, ordered by start time.
        boundaries: the boundary calls in call order (start time).
        root: the outermost boundary (None when the trace has no boundary).
        source: where it was loaded from.
        warnings: problems found while loading (missing root span, missing payloads…).
    """

    trace_id: str
    spans: tuple[SpanRecord, ...]
    boundaries: tuple[Boundary, ...]
    root: Boundary | None
    source: str = ""
    warnings: tuple[str, ...] = ()

    def __repr__(self) -> str:
        root = self.root.name if self.root else None
        return f"Trace({self.trace_id}, root={root!r}, boundaries={len(self.boundaries)}, spans={len(self.spans)})"

    def by_key(self) -> dict[tuple[tuple[str, int], ...], list[Boundary]]:
        """Boundaries grouped by call key (concurrent siblings may share one)."""
        out: dict[tuple[tuple[str, int], ...], list[Boundary]] = {}
        for b in self.boundaries:
            out.setdefault(b.call_key, []).append(b)
        return out

    def find(self, name: str) -> list[Boundary]:
        """The boundaries called ``name``, in call order."""
        return [b for b in self.boundaries if b.name == name]

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write a portable, self-contained OTLP/JSON file of this trace (payloads inlined).

        The file holds one ``ExportTraceServiceRequest`` per line, like the Collector's ``file`` exporter;
        truncated payload attributes are replaced by the whole payloads, so the file replays without a
        payload store. A ``.gz`` suffix writes gzip. Returns the path.
        """
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        payloads = {}
        for b in self.boundaries:
            for keys, payload in (
                ((semconv.INPUT, semconv.INPUT_TRUNCATED), b.raw_input),
                ((semconv.OUTPUT, semconv.OUTPUT_TRUNCATED), b.raw_output),
                ((semconv.ERROR, semconv.ERROR_TRUNCATED), b.raw_error),
            ):
                if payload is not None and payload.complete:
                    payloads[(b.span_id, keys)] = payload.text
        spans = []
        for span in self.spans:
            attrs = dict(span.attributes)
            for (span_id, (key, flag)), text in payloads.items():
                if span_id == span.span_id:
                    attrs[key] = text
                    attrs.pop(flag, None)
            spans.append(dataclasses.replace(span, attributes=attrs))
        data = orjson.dumps(spans_to_request(spans)) + b"\n"
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_bytes(gzip.compress(data) if target.suffix == ".gz" else data)
        os.replace(tmp, target)
        return target


def payload_from_span(
    attrs: Mapping[str, Any], keys: tuple[str, str, str], fetch: Any, *, where: str = ""
) -> tuple[Payload | None, str | None]:
    """Build the :class:`Payload` of one attribute triple, rehydrating from the store when needed.

    Returns the payload and a warning (or None).

    Raises:
        TraceLoadError: the attribute is not text and cannot be re-encoded as JSON (``where`` names the span).
    """
    text = attrs.get(keys[0])
    if text is None:
        return None, None
    if not isinstance(text, str):
        # A collector transform parsed the JSON string into a kvlist/array: re-encode it canonically.
        try:
            text = orjson.dumps(text, option=orjson.OPT_SORT_KEYS).decode()
        except orjson.JSONEncodeError as exc:
            raise TraceLoadError(f"{keys[0]} is neither text nor JSON data ({exc})", source=where or None) from None
    digest = attrs.get(keys[1])
    if not isinstance(digest, str):
        return Payload(text, None, "unverified"), None
    if _sha(text) == digest:
        return Payload(text, digest, "ok"), None
    whole = fetch(digest) if fetch is not None else None
    if isinstance(whole, bytes):
        try:
            decoded: str | None = whole.decode()
        except UnicodeDecodeError:
            decoded = None
        if decoded is not None and _sha(decoded) == digest:
            return Payload(decoded, digest, "rehydrated"), None
    warning = f"{keys[0]} {digest[:80]} is cut to {len(text)} characters and not in the store"
    return Payload(text, digest, "missing"), warning


MAX_BOUNDARY_DEPTH: Final = 4096
"""Deepest nesting of boundaries accepted: each call key holds the whole chain from the root."""
MAX_CALL_KEY_ENTRIES: Final = 1 << 24
"""Most (name, index) entries all call keys of one trace may hold together: deep nesting times many calls would
otherwise turn a small file into gigabytes of keys."""
_MAX_CALL_INDEX: Final = 2**63 - 1


def _call_index(value: Any) -> int | None:
    """``chronicle.call.index`` as a non-negative integer (Zipkin keeps tags as strings); None when invalid."""
    if value is None:
        return 0
    if isinstance(value, bool):
        return None
    digits = isinstance(value, str) and 0 < len(value) <= 19 and value.isascii() and value.isdigit()
    whole = isinstance(value, float) and value.is_integer() and 0 <= value <= _MAX_CALL_INDEX
    if isinstance(value, int) or digits or whole:
        number = int(value)
    else:
        return None
    return number if 0 <= number <= _MAX_CALL_INDEX else None


def _boundary(
    span: SpanRecord,
    parent: Boundary | None,
    fetch: Any,
    allow: tuple[str, ...],
    warnings: list[str],
    source: str = "",
) -> Boundary | None:
    attrs = span.attributes
    name = attrs.get(semconv.BOUNDARY_NAME)
    if not isinstance(name, str):
        return None
    where = span.origin or source
    codec = attrs.get(semconv.CODEC, CODEC_VERSION)
    if not isinstance(codec, str) or codec not in _CODECS:
        shown = repr(codec[:80]) if isinstance(codec, str) else f"a {type(codec).__name__}"
        raise TraceLoadError(
            f"span {span.span_id} ({name[:200]!r}) uses codec {shown}, not one this chronicle-otel understands "
            f"({CODEC_VERSION}); upgrade chronicle-otel",
            source=where or None,
        )
    index = _call_index(attrs.get(semconv.CALL_INDEX))
    if index is None:
        raise TraceLoadError(
            f"span {span.span_id} ({name[:200]!r}) has {semconv.CALL_INDEX} {_shown(attrs.get(semconv.CALL_INDEX))}",
            source=where or None,
            expected=f"an integer from 0 to {_MAX_CALL_INDEX}",
        )
    if parent is not None and len(parent.call_key) >= MAX_BOUNDARY_DEPTH:
        raise TraceLoadError(
            f"span {span.span_id}: boundaries nest deeper than {MAX_BOUNDARY_DEPTH} levels", source=where or None
        )
    key = (*(parent.call_key if parent else ()), (name, index))
    payloads = []
    for keys in (
        (semconv.INPUT, semconv.INPUT_HASH, semconv.INPUT_TRUNCATED),
        (semconv.OUTPUT, semconv.OUTPUT_HASH, semconv.OUTPUT_TRUNCATED),
        (semconv.ERROR, semconv.ERROR_HASH, semconv.ERROR_TRUNCATED),
    ):
        payload, warning = payload_from_span(attrs, keys, fetch, where=f"{where} (span {span.span_id})")
        payloads.append(payload)
        if warning:
            warnings.append(f"boundary {format_key(key)}: {warning}")
    n = len(semconv.SESSION_PREFIX)
    state = attrs.get(semconv.STREAM_STATE)
    kind = attrs.get(semconv.BOUNDARY_KIND, "custom")
    function = attrs.get(semconv.CODE_FUNCTION)
    return Boundary(
        name=name,
        kind=kind if isinstance(kind, str) else "custom",
        call_index=index,
        call_key=key,
        span_id=span.span_id,
        parent=parent,
        session={k[n:]: v for k, v in attrs.items() if k.startswith(semconv.SESSION_PREFIX)},
        start_ns=span.start_ns,
        end_ns=span.end_ns,
        status=span.status,
        stream=attrs.get(semconv.STREAM) in (True, "true"),  # Zipkin tags are strings
        stream_state=state if isinstance(state, str) else None,
        function=function if isinstance(function, str) else None,
        raw_input=payloads[0],
        raw_output=payloads[1],
        raw_error=payloads[2],
        span=span,
        allow=allow,
    )


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return repr(value[:40])
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() <= 128:
        return repr(value)
    if isinstance(value, (bool, float)) or value is None:
        return repr(value)
    return f"a {type(value).__name__}"


def build_trace(
    trace_id: str,
    spans: Sequence[SpanRecord],
    *,
    fetch: Any = None,
    allow: Iterable[str] = (),
    source: str = "",
) -> Trace:
    """Assemble a :class:`Trace` from the spans of one trace.

    A boundary's parent is its nearest ancestor span that is a boundary. Start times alone cannot order parents
    before children (backends round them: Phoenix keeps µs), so each span's ancestors are built first, walking
    parent links without recursion; a parent cycle (hostile or broken data) is cut where the walk meets itself.

    Raises:
        TraceLoadError: a boundary span is malformed (unknown codec, bad call index, nesting too deep).
    """
    ordered = sorted(spans, key=lambda s: (s.start_ns, s.end_ns, s.span_id))
    by_id = {s.span_id: s for s in ordered}
    allow_t = tuple(allow)
    warnings: list[str] = []
    if not any(s.parent_span_id is None for s in ordered):
        warnings.append("the trace's root span is missing (its parent is not in the source)")
    built: dict[str, Boundary | None] = {}
    # up[x]: the nearest boundary at or above span x, as a span below x sees it.
    up: dict[str, Boundary | None] = {}
    key_entries = 0

    for first in ordered:
        if first.span_id in built:
            continue
        chain: list[str] = []  # first, its parent, grandparent… up to a resolved span, a root or a cycle
        seen: dict[str, int] = {}
        cursor: str | None = first.span_id
        while cursor is not None and cursor in by_id and cursor not in up and cursor not in seen:
            seen[cursor] = len(chain)
            chain.append(cursor)
            cursor = by_id[cursor].parent_span_id
        cycle_at = seen.get(cursor) if cursor is not None else None
        above = up.get(cursor) if cursor is not None and cycle_at is None else None
        for span_id in reversed(chain):  # ancestors first
            boundary = _boundary(by_id[span_id], above, fetch, allow_t, warnings, source)
            built[span_id] = boundary
            if boundary is not None:
                above = boundary
                key_entries += len(boundary.call_key)
                if key_entries > MAX_CALL_KEY_ENTRIES:
                    raise TraceLoadError(
                        f"the call keys of this trace's boundaries hold more than {MAX_CALL_KEY_ENTRIES} entries "
                        "(boundaries nested deep, many times over)",
                        source=source or None,
                    )
        if cycle_at is None:
            _resolve_up(chain, len(chain), built, up, by_id)
        else:
            # A span below the cycle walks around it until it meets a boundary.
            cycle = chain[cycle_at:]
            nearest: Boundary | None = None
            for k in range(2 * len(cycle) - 1, -1, -1):
                candidate = built[cycle[k % len(cycle)]]
                if candidate is not None:
                    nearest = candidate
                if k < len(cycle):
                    up[cycle[k]] = nearest
            _resolve_up(chain, cycle_at, built, up, by_id)

    boundaries = sorted(
        (b for b in built.values() if b is not None), key=lambda b: (b.start_ns, len(b.call_key), b.call_index)
    )
    top = [b for b in boundaries if b.parent is None]
    root = top[0] if top else None
    if len(top) > 1:
        warnings.append(f"{len(top)} top-level boundaries; the first, {top[0].name!r}, is the root")
    return Trace(trace_id, tuple(ordered), tuple(boundaries), root, source, tuple(warnings))


def _resolve_up(
    chain: list[str],
    stop: int,
    built: Mapping[str, Boundary | None],
    up: dict[str, Boundary | None],
    by_id: Mapping[str, SpanRecord],
) -> None:
    """Fill ``up`` for ``chain[:stop]``, top-down: a span's own boundary, else what its parent sees."""
    for i in range(stop - 1, -1, -1):
        span_id = chain[i]
        boundary = built[span_id]
        if boundary is None:
            parent_id = by_id[span_id].parent_span_id
            boundary = up.get(parent_id) if parent_id is not None else None
        up[span_id] = boundary


__all__ = [
    "Boundary",
    "Payload",
    "ReplayedError",
    "SpanRecord",
    "Trace",
    "UnresolvedObject",
    "build_trace",
    "format_key",
]
