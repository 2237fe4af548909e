"""Zipkin's v2 JSON model (``/api/v2/trace/{id}``: a list of spans) as span records."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from .._internal.untrusted import MAX_VALUE_DEPTH, Where, check_depth
from ..errors import TraceLoadError
from ..model import SpanRecord
from ..otlp import normalize_id
from ._translated import pop_translated_fields

_KINDS = {"SERVER": 2, "CLIENT": 3, "PRODUCER": 4, "CONSUMER": 5}
_MICROS_MAX = 2**63 // 1000


def is_zipkin(doc: Any) -> bool:
    """A list of Zipkin v2 spans (``traceId`` + ``id``), or a list of such lists."""
    if not isinstance(doc, list) or not doc:
        return False
    items = doc[0] if isinstance(doc[0], list) else doc
    return all(isinstance(s, Mapping) and "traceId" in s and "id" in s for s in items)


def spans(doc: Any, *, source: object = None, line: int | None = None) -> Iterator[SpanRecord]:
    """Every span of a Zipkin v2 document (one trace, or a list of traces as ``/api/v2/traces`` returns).

    Raises:
        TraceLoadError: a field has the wrong type or range.
    """
    top = Where(source, line)
    items = top.items(doc, "document")
    nested = bool(items) and isinstance(items[0], list)
    traces = [(f"[{i}]", top.items(trace, f"[{i}]")) for i, trace in enumerate(items)] if nested else [("", items)]
    for prefix, trace in traces:
        for j, raw in top.mappings(trace, prefix):
            yield _span(raw, top.at(f"{prefix}[{j}]."))


def _scalar_tags(tags: Any, at: Where) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in at.mapping(tags, "tags").items():
        if value is not None and not isinstance(value, (str, bool, int, float)):
            raise at.error(f"tags.{key}", value, "a string")
        if isinstance(value, int) and not isinstance(value, bool):
            value = at.integer(value, f"tags.{key}")
        out[at.text(key, "tags key")] = value
    return out


def _event(value: Any, at: Where, field: str) -> tuple[str, dict[str, Any]]:
    """OTel encodes an event as the annotation ``{"<name>": {<attributes>}}``; other annotations are names."""
    name = at.scalar_text(value, field)
    if not name.startswith("{"):
        return name, {}
    try:
        parsed = orjson.loads(name)
    except orjson.JSONDecodeError:
        return name, {}
    if isinstance(parsed, dict) and len(parsed) == 1:
        event_name, event_attrs = next(iter(parsed.items()))
        if isinstance(event_attrs, dict):
            return event_name, check_depth(event_attrs, at, field, MAX_VALUE_DEPTH)
        return event_name, {}
    return name, {}


def _span(raw: Mapping[str, Any], at: Where) -> SpanRecord:
    source, line = at.source, at.line
    trace_id = normalize_id(raw.get("traceId"), 16, source=source, line=line, field="traceId")
    span_id = normalize_id(raw.get("id"), 8, source=source, line=line, field="id")
    if trace_id is None or span_id is None:
        raise TraceLoadError("a Zipkin span has no traceId or id", source=source, line=line)
    # Zipkin tags are strings; the OTLP -> Zipkin translation puts status and scope there.
    attrs = _scalar_tags(raw.get("tags"), at)
    status, message, scope = pop_translated_fields(attrs)
    start = at.integer(raw.get("timestamp"), "timestamp", low=-_MICROS_MAX, high=_MICROS_MAX) * 1000  # µs -> ns
    end = start + at.integer(raw.get("duration"), "duration", low=-_MICROS_MAX, high=_MICROS_MAX) * 1000
    events = []
    for i, note in at.mappings(raw.get("annotations"), "annotations"):
        name, event_attrs = _event(note.get("value"), at, f"annotations[{i}].value")
        time_ns = at.integer(note.get("timestamp"), f"annotations[{i}].timestamp", low=0, high=_MICROS_MAX) * 1000
        events.append({"name": name, "time_ns": time_ns, "attributes": event_attrs})
    endpoint = at.mapping(raw.get("localEndpoint"), "localEndpoint")
    service = at.scalar_text(endpoint.get("serviceName"), "localEndpoint.serviceName")
    kind = raw.get("kind")
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=normalize_id(raw.get("parentId"), 8, source=source, line=line, field="parentId"),
        name=at.scalar_text(raw.get("name"), "name"),
        kind=_KINDS.get(kind.upper(), 1) if isinstance(kind, str) else 1,
        start_ns=start,
        end_ns=end,
        attributes=attrs,
        status=status,
        status_message=message,
        events=tuple(events),
        resource={"service.name": service} if service else {},
        scope=scope,
        origin=f"{source}:{line}" if line is not None else str(source),
    )
