"""Parse OTLP/JSON trace documents (the Collector ``file`` exporter's shape and its variants) into span records."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..errors import TraceLoadError
from ..replay import SpanRecord

_HEX = re.compile(r"[0-9a-fA-F]+")
_KINDS = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
_STATUS = {0: "UNSET", 1: "OK", 2: "ERROR", "STATUS_CODE_UNSET": "UNSET", "STATUS_CODE_OK": "OK"}
_STATUS["STATUS_CODE_ERROR"] = "ERROR"


def _get(obj: Mapping[str, Any], camel: str, snake: str, default: Any = None) -> Any:
    value = obj.get(camel)
    if value is None:
        value = obj.get(snake, default)
    return value


def normalize_id(value: Any, size: int, *, source: object = None, line: int | None = None, field: str) -> str | None:
    """A trace id (``size`` 16) or span id (8) as lowercase hex, from hex or base64; None when empty."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        if len(value) == size * 2 and _HEX.fullmatch(value):
            return value.lower()
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) == size:
            return raw.hex()
        if _HEX.fullmatch(value) and len(value) < size * 2:  # 64-bit Jaeger/Zipkin ids, zero-padded
            return value.lower().rjust(size * 2, "0")
    raise TraceLoadError(
        f"{field} {value!r} is neither {size * 2} hex digits nor base64 of {size} bytes", source=source, line=line
    )


def any_value(value: Any) -> Any:
    """An OTLP ``AnyValue`` (camelCase or snake_case) as a Python value; 64-bit integers stay exact."""
    if not isinstance(value, Mapping):
        return value
    for key in ("stringValue", "string_value"):
        if key in value and value[key] is not None:
            return value[key]
    for key in ("intValue", "int_value"):
        if key in value and value[key] is not None:
            return int(value[key])
    for key in ("boolValue", "bool_value"):
        if key in value and value[key] is not None:
            return bool(value[key])
    for key in ("doubleValue", "double_value"):
        if key in value and value[key] is not None:
            v = value[key]
            return float(v) if not isinstance(v, str) else float(v.replace("Infinity", "inf"))
    for key in ("arrayValue", "array_value"):
        if key in value and value[key] is not None:
            return [any_value(v) for v in (value[key].get("values") or [])]
    for key in ("kvlistValue", "kvlist_value"):
        if key in value and value[key] is not None:
            return attributes(value[key].get("values") or [])
    for key in ("bytesValue", "bytes_value"):
        if key in value and value[key] is not None:
            return base64.b64decode(value[key])
    return None


def attributes(items: Any) -> dict[str, Any]:
    """An OTLP ``KeyValue`` list as a dict."""
    if isinstance(items, Mapping):  # already a mapping (some backends)
        return dict(items)
    out: dict[str, Any] = {}
    for kv in items or ():
        out[str(kv.get("key"))] = any_value(kv.get("value"))
    return out


def _int(value: Any) -> int:
    if value is None or value == "":
        return 0
    return int(value)


def _status(raw: Any) -> tuple[str, str]:
    if not isinstance(raw, Mapping):
        return "UNSET", ""
    code = raw.get("code", 0)
    return _STATUS.get(code, "UNSET"), str(raw.get("message") or "")


def _kind(raw: Any) -> int:
    if isinstance(raw, str):
        return _KINDS.get(raw, 0)
    return int(raw or 0)


def is_otlp(doc: Any) -> bool:
    """An ``ExportTraceServiceRequest``/``TracesData`` document (or Tempo v1's ``batches``)."""
    return isinstance(doc, Mapping) and any(k in doc for k in ("resourceSpans", "resource_spans", "batches"))


def spans_of_request(doc: Any, *, source: object = None, line: int | None = None) -> Iterator[SpanRecord]:
    """The spans of one ``ExportTraceServiceRequest`` document (or its older ``batches`` shape)."""
    if not isinstance(doc, Mapping):
        raise TraceLoadError(
            "not an OTLP trace document", source=source, line=line, expected="an object with resourceSpans"
        )
    resource_spans = _get(doc, "resourceSpans", "resource_spans")
    if resource_spans is None:
        resource_spans = doc.get("batches")
    if not isinstance(resource_spans, list):
        raise TraceLoadError(
            f"not an OTLP trace document (keys: {', '.join(sorted(map(str, doc))[:8]) or 'none'})",
            source=source,
            line=line,
            expected="an object with resourceSpans",
        )
    for rs in resource_spans:
        resource = attributes((rs.get("resource") or {}).get("attributes"))
        scope_spans = _get(rs, "scopeSpans", "scope_spans")
        if scope_spans is None:
            scope_spans = _get(rs, "instrumentationLibrarySpans", "instrumentation_library_spans", [])
        for ss in scope_spans or ():
            scope = ss.get("scope") or _get(ss, "instrumentationLibrary", "instrumentation_library", {}) or {}
            for span in ss.get("spans") or ():
                yield _span(span, resource, str(scope.get("name") or ""), source, line)


def _span(
    raw: Mapping[str, Any], resource: Mapping[str, Any], scope: str, source: object, line: int | None
) -> SpanRecord:
    where = f"{source}:{line}" if line is not None else str(source)
    trace_id = normalize_id(_get(raw, "traceId", "trace_id"), 16, source=source, line=line, field="traceId")
    span_id = normalize_id(_get(raw, "spanId", "span_id"), 8, source=source, line=line, field="spanId")
    if trace_id is None or span_id is None:
        raise TraceLoadError("a span has no traceId or spanId", source=source, line=line)
    status, message = _status(raw.get("status"))
    events = tuple(
        {
            "name": e.get("name", ""),
            "time_ns": _int(_get(e, "timeUnixNano", "time_unix_nano")),
            "attributes": attributes(e.get("attributes")),
        }
        for e in raw.get("events") or ()
    )
    links = tuple(
        {
            "trace_id": normalize_id(
                _get(link, "traceId", "trace_id"), 16, source=source, line=line, field="links.traceId"
            ),
            "span_id": normalize_id(_get(link, "spanId", "span_id"), 8, source=source, line=line, field="links.spanId"),
            "attributes": attributes(link.get("attributes")),
        }
        for link in raw.get("links") or ()
    )
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=normalize_id(
            _get(raw, "parentSpanId", "parent_span_id"), 8, source=source, line=line, field="parentSpanId"
        ),
        name=str(raw.get("name", "")),
        kind=_kind(raw.get("kind")),
        start_ns=_int(_get(raw, "startTimeUnixNano", "start_time_unix_nano")),
        end_ns=_int(_get(raw, "endTimeUnixNano", "end_time_unix_nano")),
        attributes=attributes(raw.get("attributes")),
        status=status,
        status_message=message,
        events=events,
        links=links,
        resource=resource,
        scope=scope,
        origin=where,
    )


def merge(spans: Iterable[SpanRecord]) -> dict[str, dict[str, SpanRecord]]:
    """Group spans by trace, merging duplicates (retries) and split copies of one span."""
    traces: dict[str, dict[str, SpanRecord]] = {}
    for span in spans:
        by_id = traces.setdefault(span.trace_id, {})
        seen = by_id.get(span.span_id)
        if seen is None or _completeness(span) > _completeness(seen):
            by_id[span.span_id] = span
    return traces


def _completeness(span: SpanRecord) -> tuple[int, int, int]:
    return (1 if span.end_ns else 0, len(span.attributes), len(span.events))


def pop_translated_fields(attrs: dict[str, Any]) -> tuple[str, str, str]:
    """Undo the OTLP -> Jaeger/Zipkin translation, which moves status and scope into tags.

    Removes ``otel.status_code``, ``otel.status_description``, ``error``, ``otel.scope.*`` and ``otel.library.*``
    from ``attrs`` and returns ``(status, status message, scope name)``.
    """
    status = str(attrs.pop("otel.status_code", "UNSET")).upper()
    message = ""
    error = attrs.pop("error", None)
    if error is not None and error is not False:
        status = "ERROR"
        message = "" if error is True else str(error)  # Jaeger: a bool tag; Zipkin: the description
    message = str(attrs.pop("otel.status_description", message))
    scope = str(attrs.pop("otel.scope.name", attrs.pop("otel.library.name", "")))
    attrs.pop("otel.scope.version", None)
    attrs.pop("otel.library.version", None)
    return (status if status in ("UNSET", "OK", "ERROR") else "UNSET"), message, scope
