"""Encode SDK spans as OTLP/JSON, in the shape of the OpenTelemetry Collector's ``file`` exporter.

One ``ExportTraceServiceRequest`` object per line: ``resourceSpans`` → ``scopeSpans`` → ``spans``,
lowerCamelCase field names, lowercase hex ids, 64-bit integers and ``*UnixNano`` times as JSON
strings, enums as integers, default values omitted.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanKind, StatusCode

_KIND = {
    SpanKind.INTERNAL: 1,
    SpanKind.SERVER: 2,
    SpanKind.CLIENT: 3,
    SpanKind.PRODUCER: 4,
    SpanKind.CONSUMER: 5,
}
_STATUS = {StatusCode.UNSET: 0, StatusCode.OK: 1, StatusCode.ERROR: 2}
_FLAG_HAS_IS_REMOTE = 0x100
_FLAG_IS_REMOTE = 0x200


def _double(value: float) -> dict[str, Any]:
    if math.isnan(value):
        return {"doubleValue": "NaN"}
    if math.isinf(value):
        return {"doubleValue": "Infinity" if value > 0 else "-Infinity"}
    return {"doubleValue": value}


_SCALARS: dict[type, Any] = {
    str: lambda v: {"stringValue": v},
    bool: lambda v: {"boolValue": v},
    int: lambda v: {"intValue": str(v)},
    float: _double,
}


def any_value(value: Any) -> dict[str, Any]:
    """Encode one attribute value as an OTLP ``AnyValue``."""
    encode = _SCALARS.get(type(value))
    if encode is not None:
        return encode(value)  # type: ignore[no-any-return]
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, str):
        return {"stringValue": str(value)}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return _double(value)
    if isinstance(value, (bytes, bytearray)):
        return {"bytesValue": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, Mapping):
        return {"kvlistValue": {"values": attributes(value)}}
    if isinstance(value, Sequence):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    return {"stringValue": str(value)}


def attributes(attrs: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Encode an attribute mapping as a list of OTLP ``KeyValue``."""
    if not attrs:
        return []
    # BoundedAttributes iterates through the MutableMapping mixin; its copy() is a plain dict.
    items = attrs.copy() if hasattr(attrs, "copy") else dict(attrs)
    out = []
    for k, v in items.items():  # inline the common scalar cases: this runs for every attribute of every span
        t = type(v)
        if t is str:
            out.append({"key": k, "value": {"stringValue": v}})
        elif t is int:
            out.append({"key": k, "value": {"intValue": str(v)}})
        elif t is bool:
            out.append({"key": k, "value": {"boolValue": v}})
        else:
            out.append({"key": k, "value": any_value(v)})
    return out


def _with_attributes(out: dict[str, Any], attrs: Mapping[str, Any] | None, dropped: int = 0) -> dict[str, Any]:
    encoded = attributes(attrs)
    if encoded:
        out["attributes"] = encoded
    if dropped:
        out["droppedAttributesCount"] = dropped
    return out


def span_dict(span: ReadableSpan) -> dict[str, Any]:
    """Encode one finished span."""
    ctx = span.get_span_context()
    assert ctx is not None
    flags = _FLAG_HAS_IS_REMOTE  # as the SDK's OTLP encoder: the is-remote bits only
    out: dict[str, Any] = {"traceId": f"{ctx.trace_id:032x}", "spanId": f"{ctx.span_id:016x}"}
    trace_state = ctx.trace_state.to_header() if ctx.trace_state else ""
    if trace_state:
        out["traceState"] = trace_state
    if span.parent is not None:
        out["parentSpanId"] = f"{span.parent.span_id:016x}"
        if span.parent.is_remote:
            flags |= _FLAG_IS_REMOTE
    out["flags"] = flags
    out["name"] = span.name
    out["kind"] = _KIND.get(span.kind, 0)
    out["startTimeUnixNano"] = str(span.start_time or 0)
    out["endTimeUnixNano"] = str(span.end_time or 0)
    _with_attributes(out, span.attributes, span.dropped_attributes)
    if span.events:
        out["events"] = [
            _with_attributes({"timeUnixNano": str(e.timestamp), "name": e.name}, e.attributes) for e in span.events
        ]
    if span.dropped_events:
        out["droppedEventsCount"] = span.dropped_events
    if span.links:
        links = []
        for link in span.links:
            lc = link.context
            item: dict[str, Any] = {"traceId": f"{lc.trace_id:032x}", "spanId": f"{lc.span_id:016x}"}
            if lc.trace_state:
                item["traceState"] = lc.trace_state.to_header()
            _with_attributes(item, link.attributes)
            item["flags"] = _FLAG_HAS_IS_REMOTE | (_FLAG_IS_REMOTE if lc.is_remote else 0)
            links.append(item)
        out["links"] = links
    if span.dropped_links:
        out["droppedLinksCount"] = span.dropped_links
    status: dict[str, Any] = {}
    if span.status.description:
        status["message"] = span.status.description
    code = _STATUS.get(span.status.status_code, 0)
    if code:
        status["code"] = code
    out["status"] = status
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


_KIND_NUMBERS = {1, 2, 3, 4, 5}
_STATUS_NUMBERS = {"UNSET": 0, "OK": 1, "ERROR": 2}


def spans_to_request(spans: Iterable[Any]) -> dict[str, Any]:
    """Encode loaded span records (``chronicle_otel.replay.SpanRecord``) as one ``ExportTraceServiceRequest``."""
    by_resource: dict[bytes, tuple[Mapping[str, Any], dict[str, list[dict[str, Any]]]]] = {}
    for span in spans:
        res_key = orjson.dumps(dict(span.resource), option=orjson.OPT_SORT_KEYS, default=str)
        _, scopes = by_resource.setdefault(res_key, (span.resource, {}))
        out: dict[str, Any] = {"traceId": span.trace_id, "spanId": span.span_id}
        if span.parent_span_id:
            out["parentSpanId"] = span.parent_span_id
        out["flags"] = _FLAG_HAS_IS_REMOTE
        out["name"] = span.name
        out["kind"] = span.kind if span.kind in _KIND_NUMBERS else 0
        out["startTimeUnixNano"] = str(span.start_ns)
        out["endTimeUnixNano"] = str(span.end_ns)
        _with_attributes(out, span.attributes)
        if span.events:
            out["events"] = [
                _with_attributes(
                    {"timeUnixNano": str(e.get("time_ns", 0)), "name": e.get("name", "")}, e.get("attributes")
                )
                for e in span.events
            ]
        if span.links:
            out["links"] = [
                _with_attributes({"traceId": link["trace_id"], "spanId": link["span_id"]}, link.get("attributes"))
                for link in span.links
            ]
        status: dict[str, Any] = {}
        if span.status_message:
            status["message"] = span.status_message
        if _STATUS_NUMBERS.get(span.status):
            status["code"] = _STATUS_NUMBERS[span.status]
        out["status"] = status
        scopes.setdefault(span.scope, []).append(out)
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
