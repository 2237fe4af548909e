"""Jaeger's v1 JSON model (the query API ``/api/traces/{id}`` and the UI's JSON download) as span records."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .._internal.untrusted import Where
from ..errors import TraceLoadError
from ..model import SpanRecord
from ..otlp import normalize_id
from ._translated import pop_translated_fields

_KINDS = {"internal": 1, "server": 2, "client": 3, "producer": 4, "consumer": 5}
_MICROS_MAX = 2**63 // 1000


def is_jaeger(doc: Any) -> bool:
    """A Jaeger query response (``{"data": [trace…]}``) or one trace object."""
    if isinstance(doc, Mapping) and isinstance(doc.get("data"), list):
        return all(
            isinstance(t, Mapping) and "spans" in t and ("traceID" in t or "processes" in t) for t in doc["data"]
        )
    return isinstance(doc, Mapping) and "spans" in doc and "processes" in doc


def _tag_value(tag: Mapping[str, Any], at: Where, field: str) -> Any:
    kind = at.text(tag.get("type"), f"{field}.type", "string").lower()
    value: Any = tag.get("value")
    if kind == "int64":
        return at.integer(value, f"{field}.value")  # a number or, for large values, a string
    if kind == "float64":
        return at.real(value, f"{field}.value")
    if kind == "bool":
        if isinstance(value, bool):
            return value
        return at.scalar_text(value, f"{field}.value").lower() == "true"
    if kind == "binary":
        return at.base64(value, f"{field}.value")
    return at.scalar_text(value, f"{field}.value")


def _tags(tags: Any, at: Where, field: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, tag in at.mappings(tags, field):
        out[at.scalar_text(tag.get("key"), f"{field}[{i}].key")] = _tag_value(tag, at, f"{field}[{i}]")
    return out


def spans(doc: Any, *, source: object = None, line: int | None = None) -> Iterator[SpanRecord]:
    """Every span of a Jaeger JSON document.

    Raises:
        TraceLoadError: a field has the wrong type or range.
    """
    top = Where(source, line)
    if isinstance(doc, Mapping) and "data" in doc:
        traces = list(top.mappings(doc["data"], "data"))
        prefix = "data"
    else:
        traces = [(0, top.mapping(doc, "document"))]
        prefix = ""
    for i, trace in traces:
        at = top.at(f"{prefix}[{i}]." if prefix else "")
        processes = at.mapping(trace.get("processes"), "processes")
        for j, raw in at.mappings(trace.get("spans"), "spans"):
            yield _span(raw, processes, at.at(f"spans[{j}]."))


def _span(raw: Mapping[str, Any], processes: Mapping[str, Any], at: Where) -> SpanRecord:
    source, line = at.source, at.line

    def ident(value: Any, size: int, field: str) -> str | None:
        return normalize_id(value, size, source=source, line=line, field=field)

    trace_id = ident(raw.get("traceID"), 16, "traceID")
    span_id = ident(raw.get("spanID"), 8, "spanID")
    if trace_id is None or span_id is None:
        raise TraceLoadError("a Jaeger span has no traceID or spanID", source=source, line=line)
    parent = None
    refs = list(at.mappings(raw.get("references"), "references"))
    for ref_type in ("CHILD_OF", "FOLLOWS_FROM"):
        ref = next((r for _, r in refs if r.get("refType") == ref_type), None)
        if ref is not None:
            parent = ident(ref.get("spanID"), 8, "references.spanID")
            break
    if parent is None and raw.get("parentSpanID"):
        parent = ident(raw["parentSpanID"], 8, "parentSpanID")
    attrs = _tags(raw.get("tags"), at, "tags")
    # The OTLP -> Jaeger translation moves span kind, status and scope into tags: move them back.
    span_kind = attrs.pop("span.kind", "internal")
    kind = _KINDS.get(span_kind.lower(), 1) if isinstance(span_kind, str) else 1
    status, message, scope = pop_translated_fields(attrs)
    start = at.integer(raw.get("startTime"), "startTime", low=-_MICROS_MAX, high=_MICROS_MAX) * 1000  # µs -> ns
    end = start + at.integer(raw.get("duration"), "duration", low=-_MICROS_MAX, high=_MICROS_MAX) * 1000
    events = []
    for i, log in at.mappings(raw.get("logs"), "logs"):
        fields = _tags(log.get("fields"), at, f"logs[{i}].fields")
        name = fields.pop("event", "")
        events.append(
            {
                "name": name if isinstance(name, str) else str(name),
                "time_ns": at.integer(log.get("timestamp"), f"logs[{i}].timestamp", low=0, high=_MICROS_MAX) * 1000,
                "attributes": fields,
            }
        )
    process_id = raw.get("processID")
    process = processes.get(process_id) if isinstance(process_id, str) else None
    process = at.mapping(process or raw.get("process"), "process")
    resource = _tags(process.get("tags"), at, "process.tags")
    service = at.scalar_text(process.get("serviceName"), "process.serviceName")
    if service:
        resource["service.name"] = service
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=at.scalar_text(raw.get("operationName"), "operationName"),
        kind=kind,
        start_ns=start,
        end_ns=end,
        attributes=attrs,
        status=status,
        status_message=message,
        events=tuple(events),
        resource=resource,
        scope=scope,
        origin=f"{source}:{line}" if line is not None else str(source),
    )
