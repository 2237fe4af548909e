"""Zipkin's v2 JSON model (``/api/v2/trace/{id}``: a list of spans) as span records."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import TraceLoadError
from ..replay import SpanRecord
from ._otlp import normalize_id, pop_translated_fields

_KINDS = {"SERVER": 2, "CLIENT": 3, "PRODUCER": 4, "CONSUMER": 5}


def is_zipkin(doc: Any) -> bool:
    """A list of Zipkin v2 spans (``traceId`` + ``id``), or a list of such lists."""
    if not isinstance(doc, list) or not doc:
        return False
    items = doc[0] if isinstance(doc[0], list) else doc
    return all(isinstance(s, Mapping) and "traceId" in s and "id" in s for s in items)


def spans(doc: Any, *, source: object = None) -> Iterator[SpanRecord]:
    """Every span of a Zipkin v2 document (one trace, or a list of traces as ``/api/v2/traces`` returns)."""
    traces = doc if doc and isinstance(doc[0], list) else [doc]
    for trace in traces:
        for raw in trace:
            yield _span(raw, source)


def _span(raw: Mapping[str, Any], source: object) -> SpanRecord:
    trace_id = normalize_id(raw.get("traceId"), 16, source=source, field="traceId")
    span_id = normalize_id(raw.get("id"), 8, source=source, field="id")
    if trace_id is None or span_id is None:
        raise TraceLoadError("a Zipkin span has no traceId or id", source=source)
    # Zipkin tags are strings; the OTLP -> Zipkin translation puts status and scope there.
    attrs: dict[str, Any] = dict(raw.get("tags") or {})
    status, message, scope = pop_translated_fields(attrs)
    start = int(raw.get("timestamp", 0)) * 1000  # µs -> ns
    end = start + int(raw.get("duration", 0)) * 1000
    events = []
    for note in raw.get("annotations") or ():
        name = str(note.get("value", ""))
        event_attrs: dict[str, Any] = {}
        try:  # OTel encodes an event as {"<name>": {<attributes>}}
            parsed = json.loads(name)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and len(parsed) == 1:
            name, event_attrs = next(iter(parsed.items()))
            event_attrs = event_attrs if isinstance(event_attrs, dict) else {}
        events.append({"name": name, "time_ns": int(note.get("timestamp", 0)) * 1000, "attributes": event_attrs})
    endpoint = raw.get("localEndpoint") or {}
    resource = {"service.name": endpoint["serviceName"]} if endpoint.get("serviceName") else {}
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=normalize_id(raw.get("parentId"), 8, source=source, field="parentId"),
        name=str(raw.get("name", "")),
        kind=_KINDS.get(str(raw.get("kind", "")).upper(), 1),
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
