"""The OTLP/JSON writer, in the shape of the OpenTelemetry Collector's ``file`` exporter.

One ``ExportTraceServiceRequest`` object per line: ``resourceSpans`` → ``scopeSpans`` → ``spans``,
lowerCamelCase field names, lowercase hex ids, 64-bit integers and ``*UnixNano`` times as JSON
strings, enums as integers, default values omitted; values as :mod:`._values` maps them, the mapping the reader
shares. Two inputs, one span encoder (:func:`_span_json`): finished SDK spans (the exporter,
:func:`export_request`) and loaded span records (portable trace files, :func:`spans_to_request`).

The exporter's path is :func:`export_line`, which writes the same bytes as ``orjson.dumps(export_request(spans))``
with less work per span: the resource and scope of a line are encoded once per process, and a plain SDK span (no
events, links, trace state or dropped attributes: nearly all) is built by :func:`_plain_sdk_span` in a few dict
literals; ``tests/unit/otlp/test_writer.py`` holds it byte for byte to :func:`_span_json`'s output.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.trace.span import DEFAULT_TRACE_STATE

from .._internal.compat import events_and_links
from ._values import FLAG_HAS_IS_REMOTE, FLAG_IS_REMOTE, SPAN_KINDS, STATUS_CODES, encode_attributes

if TYPE_CHECKING:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    from ..model import SpanRecord

_KIND = {kind: SPAN_KINDS[f"SPAN_KIND_{kind.name}"] for kind in SpanKind}
_STATUS = {code: STATUS_CODES[code.name] for code in StatusCode}


def _with_attributes(out: dict[str, Any], attrs: Mapping[str, Any] | None, dropped: int = 0) -> dict[str, Any]:
    encoded = encode_attributes(attrs)
    if encoded:
        out["attributes"] = encoded
    if dropped:
        out["droppedAttributesCount"] = dropped
    return out


Link = tuple[str, str, str, "Mapping[str, Any] | None", int]
"""A link as the encoder takes it: trace id hex, span id hex, tracestate, attributes, flags."""
Event = tuple[int, str, "Mapping[str, Any] | None"]
"""An event as the encoder takes it: time in ns, name, attributes."""


def _span_json(
    trace_id: str,
    span_id: str,
    trace_state: str,
    parent_span_id: str | None,
    flags: int,
    name: str,
    kind: int,
    start_ns: int,
    end_ns: int,
    attrs: Mapping[str, Any] | None,
    dropped_attributes: int,
    events: Sequence[Event],
    dropped_events: int,
    links: Sequence[Link],
    dropped_links: int,
    status_message: str,
    status_code: int,
) -> dict[str, Any]:
    """Encode one span from its fields: the single place that decides the OTLP/JSON shape of a span."""
    out: dict[str, Any] = {"traceId": trace_id, "spanId": span_id}
    if trace_state:
        out["traceState"] = trace_state
    if parent_span_id:
        out["parentSpanId"] = parent_span_id
    out["flags"] = flags
    out["name"] = name
    out["kind"] = kind
    out["startTimeUnixNano"] = str(start_ns)
    out["endTimeUnixNano"] = str(end_ns)
    _with_attributes(out, attrs, dropped_attributes)
    if events:
        out["events"] = [_with_attributes({"timeUnixNano": str(t), "name": n}, a) for t, n, a in events]
    if dropped_events:
        out["droppedEventsCount"] = dropped_events
    if links:
        encoded = []
        for link_trace, link_span, link_state, link_attrs, link_flags in links:
            item: dict[str, Any] = {"traceId": link_trace, "spanId": link_span}
            if link_state:
                item["traceState"] = link_state
            _with_attributes(item, link_attrs)
            item["flags"] = link_flags
            encoded.append(item)
        out["links"] = encoded
    if dropped_links:
        out["droppedLinksCount"] = dropped_links
    status: dict[str, Any] = {}
    if status_message:
        status["message"] = status_message
    if status_code:
        status["code"] = status_code
    out["status"] = status
    return out


def span_dict(span: ReadableSpan, attrs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Encode one finished SDK span (``attrs``: its attributes, when the caller has them as a plain dict already)."""
    if type(span) is ReadableSpan:
        fast = _plain_sdk_span(span, attrs)
        if fast is not None:
            return fast
    ctx = span.get_span_context()
    assert ctx is not None
    flags = FLAG_HAS_IS_REMOTE  # as the SDK's OTLP encoder: the is-remote bits only
    parent = span.parent
    if parent is not None and parent.is_remote:
        flags |= FLAG_IS_REMOTE
    events, links, status = span.events, span.links, span.status
    return _span_json(
        f"{ctx.trace_id:032x}",
        f"{ctx.span_id:016x}",
        ctx.trace_state.to_header() if ctx.trace_state else "",
        f"{parent.span_id:016x}" if parent is not None else None,
        flags,
        span.name,
        _KIND.get(span.kind, 0),
        span.start_time or 0,
        span.end_time or 0,
        span.attributes if attrs is None else attrs,
        span.dropped_attributes,
        [(e.timestamp, e.name, e.attributes) for e in events] if events else (),
        span.dropped_events,
        [
            (
                f"{link.context.trace_id:032x}",
                f"{link.context.span_id:016x}",
                link.context.trace_state.to_header() if link.context.trace_state else "",
                link.attributes,
                FLAG_HAS_IS_REMOTE | (FLAG_IS_REMOTE if link.context.is_remote else 0),
            )
            for link in links
        ]
        if links
        else (),
        span.dropped_links,
        status.description or "",
        _STATUS.get(status.status_code, 0),
    )


def _plain_sdk_span(span: ReadableSpan, attrs: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """:func:`_span_json` of a plain SDK span (no events, trace state or dropped attributes; links without attributes
    or trace state, as a replay's spans carry), or None.

    Most spans are plain; this builds the same dict with a few dict literals instead of one call with every field.
    The properties behind ``events`` and ``links`` copy under a lock, so their private lists are looked at instead
    (``ReadableSpan`` sets both in its constructor).
    """
    events, links = events_and_links(span)
    if events:
        return None
    encoded_links = None
    if links:
        encoded_links = _plain_links(links)
        if encoded_links is None:
            return None
    ctx = span.get_span_context()
    if ctx is None or span.dropped_attributes:
        return None
    trace_state = ctx.trace_state
    if trace_state is not DEFAULT_TRACE_STATE and trace_state:
        return None
    kind = span.kind
    kind_number = 1 if kind is SpanKind.INTERNAL else _KIND.get(kind, 0)  # an enum's hash is a Python call
    start = str(span.start_time or 0)
    end = str(span.end_time or 0)
    status = span.status
    code = status.status_code
    message = status.description
    if code is StatusCode.UNSET:
        encoded_status: dict[str, Any] = {"message": message} if message else {}
    else:
        encoded_status = {"message": message, "code": _STATUS[code]} if message else {"code": _STATUS[code]}
    encoded = encode_attributes(span.attributes if attrs is None else attrs)
    parent = span.parent
    trace_id = "%032x" % ctx.trace_id  # noqa: UP031 - twice as fast as an f-string with a format spec
    span_id = "%016x" % ctx.span_id  # noqa: UP031
    out: dict[str, Any] = {"traceId": trace_id, "spanId": span_id}  # the general encoder's key order
    if parent is None:
        out["flags"] = FLAG_HAS_IS_REMOTE
    else:
        out["parentSpanId"] = "%016x" % parent.span_id  # noqa: UP031
        out["flags"] = FLAG_HAS_IS_REMOTE | FLAG_IS_REMOTE if parent.is_remote else FLAG_HAS_IS_REMOTE
    out["name"] = span.name
    out["kind"] = kind_number
    out["startTimeUnixNano"] = start
    out["endTimeUnixNano"] = end
    if encoded:
        out["attributes"] = encoded
    if encoded_links:
        out["links"] = encoded_links
    out["status"] = encoded_status
    return out


def _plain_links(links: Sequence[Any]) -> list[dict[str, Any]] | None:
    """The OTLP/JSON links of :func:`_span_json` when none has attributes or trace state and none was dropped."""
    if getattr(links, "dropped", 0):
        return None
    out = []
    for link in links:
        ctx = link.context
        trace_state = ctx.trace_state
        if link.attributes or (trace_state is not DEFAULT_TRACE_STATE and trace_state):
            return None
        out.append(
            {
                "traceId": "%032x" % ctx.trace_id,  # noqa: UP031
                "spanId": "%016x" % ctx.span_id,  # noqa: UP031
                "flags": FLAG_HAS_IS_REMOTE | FLAG_IS_REMOTE if ctx.is_remote else FLAG_HAS_IS_REMOTE,
            }
        )
    return out


# Resources and scopes are immutable and shared by every span of a process: encode each once.
_encoded: dict[int, tuple[object, dict[str, Any]]] = {}


def _cached(obj: object, encode: Any) -> dict[str, Any]:
    hit = _encoded.get(id(obj))
    if hit is not None and hit[0] is obj:
        return hit[1]
    value: dict[str, Any] = encode(obj)
    if len(_encoded) > 256:
        _encoded.clear()
    _encoded[id(obj)] = (obj, value)
    return value


def _resource_dict(resource: Resource | None) -> dict[str, Any]:
    if resource is None:
        return {}
    return _cached(resource, lambda r: _with_attributes({}, r.attributes))


def _scope_dict(scope: InstrumentationScope | None) -> dict[str, Any]:
    if scope is None:
        return {}
    return _cached(scope, _encode_scope)


def _encode_scope(scope: InstrumentationScope) -> dict[str, Any]:
    out: dict[str, Any] = {"name": scope.name}
    if scope.version:
        out["version"] = scope.version
    return _with_attributes(out, scope.attributes)


def export_request(spans: Iterable[ReadableSpan]) -> dict[str, Any]:
    """Group spans by resource and scope into one ``ExportTraceServiceRequest`` dict."""
    by_resource: dict[int, tuple[Resource | None, dict[int, tuple[InstrumentationScope | None, list[Any]]]]] = {}
    for span in spans:
        _, scopes = by_resource.setdefault(id(span.resource), (span.resource, {}))
        scope = span.instrumentation_scope
        _, items = scopes.setdefault(id(scope), (scope, []))
        items.append(span_dict(span))
    resource_spans = []
    for res, scopes in by_resource.values():
        entry: dict[str, Any] = {"resource": _resource_dict(res)}
        scope_spans = []
        for scope, items in scopes.values():
            ss: dict[str, Any] = {"scope": _scope_dict(scope), "spans": items}
            if scope is not None and scope.schema_url:
                ss["schemaUrl"] = scope.schema_url
            scope_spans.append(ss)
        entry["scopeSpans"] = scope_spans
        if res is not None and res.schema_url:
            entry["schemaUrl"] = res.schema_url
        resource_spans.append(entry)
    return {"resourceSpans": resource_spans}


# The bytes around the spans of a one-resource, one-scope request, by (resource, scope): encoded once each.
_frames: dict[tuple[int, int], tuple[object, object, bytes, bytes]] = {}


def _frame(resource: Resource | None, scope: InstrumentationScope | None) -> tuple[bytes, bytes]:
    key = (id(resource), id(scope))
    hit = _frames.get(key)
    if hit is not None and hit[0] is resource and hit[1] is scope:
        return hit[2], hit[3]
    head = b"".join(
        (
            b'{"resourceSpans":[{"resource":',
            orjson.dumps(_resource_dict(resource)),
            b',"scopeSpans":[{"scope":',
            orjson.dumps(_scope_dict(scope)),
            b',"spans":[',
        )
    )
    tail = [b"]"]
    if scope is not None and scope.schema_url:
        tail += [b',"schemaUrl":', orjson.dumps(scope.schema_url)]
    tail.append(b"}]")
    if resource is not None and resource.schema_url:
        tail += [b',"schemaUrl":', orjson.dumps(resource.schema_url)]
    tail.append(b"}]}")
    closing = b"".join(tail)
    if len(_frames) > 256:
        _frames.clear()
    _frames[key] = (resource, scope, head, closing)
    return head, closing


def export_line(spans: Sequence[ReadableSpan], attrs: Sequence[Mapping[str, Any]] | None = None) -> bytes:
    """``orjson.dumps(export_request(spans))``, the common case encoded faster.

    When every span shares one resource and one scope (one process, one tracer), their encoding is reused and only
    the spans are encoded. ``attrs``, when given, holds each span's attributes as a plain dict
    (:func:`plain_attributes`), in the order of ``spans``.
    """
    if not spans:
        return orjson.dumps(export_request(spans))
    resource = spans[0].resource
    scope = spans[0].instrumentation_scope
    for span in spans:
        if span.resource is not resource or span.instrumentation_scope is not scope:
            return orjson.dumps(export_request(spans))
    head, tail = _frame(resource, scope)
    if len(spans) == 1:  # a trace's spans usually come one per export batch
        return b"".join((head, orjson.dumps(span_dict(spans[0], None if attrs is None else attrs[0])), tail))
    if attrs is None:
        body = orjson.dumps([span_dict(span) for span in spans])
    else:
        body = orjson.dumps([span_dict(span, a) for span, a in zip(spans, attrs, strict=True)])
    return b"".join((head, memoryview(body)[1:-1], tail))


_KIND_NUMBERS = frozenset(SPAN_KINDS.values())


def record_dict(span: SpanRecord, attributes: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Encode one loaded span record (``attributes`` replaces its own when given)."""
    return _span_json(
        span.trace_id,
        span.span_id,
        span.trace_state,
        span.parent_span_id,
        span.flags or FLAG_HAS_IS_REMOTE,
        span.name,
        span.kind if span.kind in _KIND_NUMBERS else 0,
        span.start_ns,
        span.end_ns,
        span.attributes if attributes is None else attributes,
        0,
        [(e.get("time_ns", 0), e.get("name", ""), e.get("attributes")) for e in span.events],
        0,
        [
            (
                link["trace_id"],
                link["span_id"],
                link.get("trace_state") or "",
                link.get("attributes"),
                link.get("flags") or FLAG_HAS_IS_REMOTE,
            )
            for link in span.links
        ],
        0,
        span.status_message,
        STATUS_CODES.get(span.status, 0),
    )


def spans_to_request(
    spans: Iterable[SpanRecord], attributes: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """Group loaded span records by resource and scope into one ``ExportTraceServiceRequest`` dict.

    Args:
        spans: the span records.
        attributes: per span id, attributes to write instead of the span's own.
    """
    replaced = attributes or {}
    by_resource: dict[bytes, tuple[Mapping[str, Any], dict[str, list[dict[str, Any]]]]] = {}
    seen: dict[int, tuple[Mapping[str, Any], bytes]] = {}  # spans read from one request share its resource
    for span in spans:
        resource = span.resource
        known = seen.get(id(resource))
        if known is not None and known[0] is resource:
            res_key = known[1]
        else:
            res_key = orjson.dumps(dict(resource), option=orjson.OPT_SORT_KEYS, default=str)
            seen[id(resource)] = (resource, res_key)
        _, scopes = by_resource.setdefault(res_key, (resource, {}))
        scopes.setdefault(span.scope, []).append(record_dict(span, replaced.get(span.span_id)))
    return {
        "resourceSpans": [
            {
                "resource": _with_attributes({}, resource),
                "scopeSpans": [
                    {"scope": {"name": name} if name else {}, "spans": items} for name, items in scopes.items()
                ],
            }
            for resource, scopes in by_resource.values()
        ]
    }
