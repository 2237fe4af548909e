"""The OTLP/JSON reader: trace documents (the Collector ``file`` exporter's shape and its variants) as span records.

Trace data is untrusted: every field is checked for its type and range (through
:class:`~chronicle_otel._internal.untrusted.Where`), and anything else raises
:class:`~chronicle_otel.errors.TraceLoadError` naming the source, the line and the field's path. Values, ids, kinds
and status codes are read by :mod:`._values`, the mapping the writer shares.

Two paths, one result: :func:`_plain_span` reads a span of the common shape (the one chronicle and the Collector
write) with inline checks, and :func:`_span` reads every other shape, or names what is wrong with it;
``tests/unit/load/test_read_side.py`` holds them to the same records.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from .._internal.untrusted import INT64_MIN, UINT64_MAX, Where
from ..errors import TraceLoadError
from ..model import SpanRecord, _span_record
from ._values import HEX, STATUS_NAMES, decode_attributes, decode_kind, decode_status, decode_value, normalize_id


def _get(obj: Mapping[str, Any], camel: str, snake: str, default: Any = None) -> Any:
    value = obj.get(camel)
    if value is None:
        value = obj.get(snake, default)
    return value


def is_otlp(doc: Any) -> bool:
    """An ``ExportTraceServiceRequest``/``TracesData`` document (or Tempo v1's ``batches``)."""
    return isinstance(doc, Mapping) and any(k in doc for k in ("resourceSpans", "resource_spans", "batches"))


def spans_of_request(doc: Any, *, source: object = None, line: int | None = None) -> Iterator[SpanRecord]:
    """The spans of one ``ExportTraceServiceRequest`` document (or its older ``batches`` shape).

    Raises:
        TraceLoadError: ``doc`` is not such a document, or a field has the wrong type or range.
    """
    if not isinstance(doc, Mapping):
        raise TraceLoadError(
            "not an OTLP trace document", source=source, line=line, expected="an object with resourceSpans"
        )
    resource_spans = _get(doc, "resourceSpans", "resource_spans")
    field = "resourceSpans"
    if resource_spans is None:
        resource_spans, field = doc.get("batches"), "batches"
    if not isinstance(resource_spans, list):
        keys = ", ".join(sorted(str(k)[:40] for k in doc)[:8])
        raise TraceLoadError(
            f"not an OTLP trace document (keys: {keys or 'none'})",
            source=source,
            line=line,
            expected="an object with resourceSpans",
        )
    top = Where(source, line)
    origin = f"{source}:{line}" if line is not None else str(source)
    known: dict[str, str] = {}  # ids read so far, as written -> lowercase
    for i, rs in top.mappings(resource_spans, field):
        at = top.at(f"{field}[{i}].")
        resource = decode_attributes(
            at.mapping(rs.get("resource"), "resource").get("attributes"), at, "resource.attributes"
        )
        scope_spans = _get(rs, "scopeSpans", "scope_spans")
        group = "scopeSpans"
        if scope_spans is None:
            scope_spans = _get(rs, "instrumentationLibrarySpans", "instrumentation_library_spans", [])
            group = "instrumentationLibrarySpans"
        for j, ss in at.mappings(scope_spans, group):
            inner = at.at(f"{group}[{j}].")
            scope = inner.mapping(
                ss.get("scope") or _get(ss, "instrumentationLibrary", "instrumentation_library"), "scope"
            )
            scope_name = inner.scalar_text(scope.get("name"), "scope.name")
            for k, span in enumerate(inner.items(ss.get("spans"), "spans")):
                record = _plain_span(span, resource, scope_name, origin, known)
                if record is None:  # not the common shape: the checked path, whose errors say where and why
                    if not isinstance(span, Mapping):
                        raise inner.error(f"spans[{k}]", span, "an object")
                    record = _span(span, resource, scope_name, inner.at(f"spans[{k}]."))
                yield record


def _span(raw: Mapping[str, Any], resource: Mapping[str, Any], scope: str, at: Where) -> SpanRecord:
    source, line = at.source, at.line
    where = f"{source}:{line}" if line is not None else str(source)
    trace_id = normalize_id(_get(raw, "traceId", "trace_id"), 16, source=source, line=line, field="traceId")
    span_id = normalize_id(_get(raw, "spanId", "span_id"), 8, source=source, line=line, field="spanId")
    if trace_id is None or span_id is None:
        raise TraceLoadError("a span has no traceId or spanId", source=source, line=line)
    status, message = decode_status(raw.get("status"), at)
    events = []
    for i, e in at.mappings(raw.get("events"), "events"):
        events.append(
            {
                "name": at.scalar_text(e.get("name"), f"events[{i}].name"),
                "time_ns": at.integer(_get(e, "timeUnixNano", "time_unix_nano"), f"events[{i}].timeUnixNano", low=0),
                "attributes": decode_attributes(e.get("attributes"), at, f"events[{i}].attributes"),
            }
        )
    links = []
    for i, link in at.mappings(raw.get("links"), "links"):
        links.append(
            {
                "trace_id": normalize_id(
                    _get(link, "traceId", "trace_id"), 16, source=source, line=line, field="links.traceId"
                ),
                "span_id": normalize_id(
                    _get(link, "spanId", "span_id"), 8, source=source, line=line, field="links.spanId"
                ),
                "attributes": decode_attributes(link.get("attributes"), at, f"links[{i}].attributes"),
                "trace_state": at.text(_get(link, "traceState", "trace_state"), f"links[{i}].traceState"),
                "flags": at.integer(link.get("flags"), f"links[{i}].flags", low=0, high=0xFFFFFFFF),
            }
        )
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=normalize_id(
            _get(raw, "parentSpanId", "parent_span_id"), 8, source=source, line=line, field="parentSpanId"
        ),
        name=at.scalar_text(raw.get("name"), "name"),
        kind=decode_kind(raw.get("kind"), at),
        # fixed64 in the protocol: a negative time is as malformed as a word
        start_ns=at.integer(_get(raw, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano", low=0),
        end_ns=at.integer(_get(raw, "endTimeUnixNano", "end_time_unix_nano"), "endTimeUnixNano", low=0),
        attributes=decode_attributes(raw.get("attributes"), at),
        status=status,
        status_message=message,
        events=tuple(events),
        links=tuple(links),
        resource=resource,
        scope=scope,
        trace_state=at.text(_get(raw, "traceState", "trace_state"), "traceState"),
        flags=at.integer(raw.get("flags"), "flags", low=0, high=0xFFFFFFFF),
        origin=where,
    )


_NOWHERE: Final = Where(None)
_MAX_FLAGS: Final = 0xFFFFFFFF


def _plain_uint(value: Any) -> int | None:
    """An unsigned 64-bit integer written the usual ways (digits in a string, a JSON number; absent is 0), or None
    for anything else, which :meth:`Where.integer` then reads or refuses."""
    kind = type(value)
    if kind is str:
        if len(value) <= 19 and value.isdigit() and value.isascii():  # 19 digits never pass UINT64_MAX
            return int(value)
        return 0 if value == "" else None
    if kind is int:
        return value if 0 <= value <= UINT64_MAX else None
    return 0 if value is None else None


def _plain_attributes(items: Any) -> dict[str, Any] | None:
    """An OTLP ``KeyValue`` list of the usual shape as a dict, equal to what :func:`.decode_attributes` makes of it;
    None when an item is not of that shape (then :func:`.decode_attributes` reads it, or names what is wrong).

    One pass, one look at each item: a string value (most of them) costs two subscripts and a ``get``. An item that
    is not an object, or has no ``key`` or ``value``, ends the pass through the exception its subscript raises.
    """
    if items is None:
        return {}
    if type(items) is not list:
        return None
    out: dict[str, Any] = {}
    try:
        for kv in items:
            key = kv["key"]
            value = kv["value"]
            v = value.get("stringValue")  # AttributeError when the value is not an object
            if type(v) is str and type(key) is str:  # AnyValue reads stringValue first, whatever else is there
                out[key] = v
                continue
            if v is not None or type(key) is not str or type(value) is not dict or len(value) != 1:
                return None
            v = value.get("intValue")
            if v is not None:
                if type(v) is str and len(v) <= 18 and v.isdigit() and v.isascii():  # 18 digits: within int64
                    out[key] = int(v)
                    continue
                if type(v) is int and INT64_MIN <= v <= UINT64_MAX:
                    out[key] = v
                    continue
                return None
            v = value.get("boolValue")
            if type(v) is bool:
                out[key] = v
                continue
            v = value.get("doubleValue")
            if type(v) is float:
                out[key] = v
                continue
            out[key] = decode_value(value, _NOWHERE)  # arrays, lists of key-values, bytes: the one reader of AnyValue
    except (KeyError, TypeError, AttributeError, TraceLoadError):
        return None
    return out


def _plain_id(value: str) -> str | None:
    """A span id of 16 hex digits (any case) in lowercase, or None. ``bytes.fromhex`` reads the digits (spaces
    between pairs would leave fewer than 8 bytes)."""
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        return None
    return raw.hex() if len(raw) == 8 else None


def _plain_span(
    raw: Any,
    resource: Mapping[str, Any],
    scope: str,
    origin: str,
    known: dict[str, str] | None = None,
) -> SpanRecord | None:
    """The span record of a span of the common shape (camelCase fields, hex ids, no events or links), equal to what
    :func:`_span` makes of it; None for any other span, which :func:`_span` then reads or refuses.

    Every span of a trace file goes through here, so it checks the fields inline instead of through :class:`Where`.
    ``known`` maps trace ids and parent span ids already read (as written) to their lowercase form: the spans of one
    request share a few of them, and a look-up costs less than reading the digits again.
    """
    if type(raw) is not dict:
        return None
    get = raw.get
    trace_id = get("traceId")
    span_id = get("spanId")
    if type(trace_id) is not str or len(trace_id) != 32 or type(span_id) is not str or len(span_id) != 16:
        return None
    if known is None:
        known = {}
    tid = known.get(trace_id)
    if tid is None:
        if not HEX.fullmatch(trace_id):
            return None
        tid = known[trace_id] = trace_id.lower()
    sid = _plain_id(span_id)
    if sid is None:
        return None
    parent = get("parentSpanId")
    if parent is None:
        parent = get("parent_span_id")
    if parent is None or parent == "":
        parent = None
    elif type(parent) is str and len(parent) == 16:
        pid = known.get(parent)
        if pid is None:
            pid = _plain_id(parent)
            if pid is None:
                return None
            known[parent] = pid
        parent = pid
    else:
        return None
    name = get("name")
    if type(name) is not str:
        if name is not None:
            return None
        name = ""
    kind = get("kind")
    if kind is None:
        kind = 0
    elif not (type(kind) is int and 0 <= kind <= 5):
        return None
    start = get("startTimeUnixNano")
    start_ns = _plain_uint(start if start is not None else get("start_time_unix_nano"))
    end = get("endTimeUnixNano")
    end_ns = _plain_uint(end if end is not None else get("end_time_unix_nano"))
    flags = get("flags")
    if flags is None:
        flags = 0
    elif not (type(flags) is int and 0 <= flags <= _MAX_FLAGS):
        return None
    trace_state = get("traceState")
    if trace_state is None:
        trace_state = get("trace_state")
        if trace_state is None:
            trace_state = ""
    if start_ns is None or end_ns is None or type(trace_state) is not str:
        return None
    status = get("status")
    if status is None or (type(status) is dict and not status):  # our writer's ``{}`` for an unset status
        code, message = "UNSET", ""
    elif type(status) is dict:
        number = status.get("code", 0)
        message = status.get("message", "")
        if not ((type(number) is int or type(number) is str or number is None) and type(message) is str):
            return None
        code = STATUS_NAMES.get(number, "UNSET") if number is not None else "UNSET"
    else:
        return None
    events = get("events")
    links = get("links")
    if not ((events is None or events == []) and (links is None or links == [])):
        return None
    attrs = _plain_attributes(get("attributes"))
    if attrs is None:
        return None
    return _span_record(
        tid,
        sid,
        parent,
        name,
        kind,
        start_ns,
        end_ns,
        attrs,
        code,
        message,
        (),
        (),
        resource,
        scope,
        trace_state,
        flags,
        origin,
    )
