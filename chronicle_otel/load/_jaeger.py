"""Jaeger's v1 JSON model (the query API ``/api/traces/{id}`` and the UI's JSON download) as span records."""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import TraceLoadError
from ..replay import SpanRecord
from ._otlp import normalize_id, pop_translated_fields

_KINDS = {"internal": 1, "server": 2, "client": 3, "producer": 4, "consumer": 5}


def is_jaeger(doc: Any) -> bool:
    """A Jaeger query response (``{"data": [trace…]}``) or one trace object."""
    if isinstance(doc, Mapping) and isinstance(doc.get("data"), list):
        return all(
            isinstance(t, Mapping) and "spans" in t and ("traceID" in t or "processes" in t) for t in doc["data"]
        )
    return isinstance(doc, Mapping) and "spans" in doc and "processes" in doc


def _tag_value(tag: Mapping[str, Any]) -> Any:
    kind = str(tag.get("type", "string")).lower()
    value: Any = tag.get("value")
    if kind == "int64":
        return int(value)  # may arrive as a number or, for large values, a string
    if kind == "float64":
        return float(value)
    if kind == "bool":
        return value if isinstance(value, bool) else str(value).lower() == "true"
    if kind == "binary":
        return base64.b64decode(value) if isinstance(value, str) else value
    return value


def _tags(tags: Any) -> dict[str, Any]:
    return {str(t.get("key")): _tag_value(t) for t in tags or ()}


def spans(doc: Any, *, source: object = None) -> Iterator[SpanRecord]:
    """Every span of a Jaeger JSON document."""
    traces = doc["data"] if isinstance(doc, Mapping) and "data" in doc else [doc]
    for trace in traces:
        processes = trace.get("processes") or {}
        for raw in trace.get("spans") or ():
            yield _span(raw, processes, source)


def _span(raw: Mapping[str, Any], processes: Mapping[str, Any], source: object) -> SpanRecord:
    def ident(value: Any, size: int, field: str) -> str | None:
        return normalize_id(value, size, source=source, field=field)

    trace_id = ident(raw.get("traceID"), 16, "traceID")
    span_id = ident(raw.get("spanID"), 8, "spanID")
    if trace_id is None or span_id is None:
        raise TraceLoadError("a Jaeger span has no traceID or spanID", source=source)
    parent = None
    refs = raw.get("references") or ()
    for ref_type in ("CHILD_OF", "FOLLOWS_FROM"):
        ref = next((r for r in refs if r.get("refType") == ref_type), None)
        if ref is not None:
            parent = ident(ref.get("spanID"), 8, "references.spanID")
            break
    if parent is None and raw.get("parentSpanID"):
        parent = ident(raw["parentSpanID"], 8, "parentSpanID")
    attrs = _tags(raw.get("tags"))
    # The OTLP -> Jaeger translation moves span kind, status and scope into tags: move them back.
    kind = _KINDS.get(str(attrs.pop("span.kind", "internal")).lower(), 1)
    status, message, scope = pop_translated_fields(attrs)
    start = int(raw.get("startTime", 0)) * 1000  # µs -> ns
    end = start + int(raw.get("duration", 0)) * 1000
    events = []
    for log in raw.get("logs") or ():
        fields = _tags(log.get("fields"))
        events.append(
            {"name": str(fields.pop("event", "")), "time_ns": int(log.get("timestamp", 0)) * 1000, "attributes": fields}
        )
    process = processes.get(str(raw.get("processID"))) or raw.get("process") or {}
    resource = _tags(process.get("tags"))
    if process.get("serviceName"):
        resource["service.name"] = process["serviceName"]
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=str(raw.get("operationName", "")),
        kind=kind,
        start_ns=start,
        end_ns=end,
        attributes=attrs,
        status=status,
        status_message=message,
        events=tuple(events),
        resource=resource,
        scope=scope,
        origin=str(source),
    )
