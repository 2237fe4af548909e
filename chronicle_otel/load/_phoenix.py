"""Arize Phoenix's REST span model (``GET /v1/projects/{project}/spans``) as span records."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import TraceLoadError
from ..replay import SpanRecord
from ._otlp import normalize_id


def is_phoenix(doc: Any) -> bool:
    """A Phoenix spans response ``{"data": [{"context": {...}, ...}]}`` or a list of its span dicts."""
    items = doc.get("data") if isinstance(doc, Mapping) else doc
    return (
        isinstance(items, list)
        and bool(items)
        and all(isinstance(s, Mapping) and isinstance(s.get("context"), Mapping) for s in items)
    )


def _ns(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, (int, float)):
        return int(value)
    parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.timezone.utc)
    delta = parsed - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def _flatten(attrs: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Phoenix stores attributes as nested objects in places; span attributes are flat dotted keys."""
    out: dict[str, Any] = {}
    for key, value in attrs.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def spans(doc: Any, *, source: object = None) -> Iterator[SpanRecord]:
    """Every span of a Phoenix spans response."""
    items = doc.get("data") if isinstance(doc, Mapping) else doc
    for raw in items or ():
        ctx = raw.get("context") or {}
        trace_id = normalize_id(ctx.get("trace_id"), 16, source=source, field="context.trace_id")
        span_id = normalize_id(ctx.get("span_id"), 8, source=source, field="context.span_id")
        if trace_id is None or span_id is None:
            raise TraceLoadError("a Phoenix span has no context.trace_id or span_id", source=source)
        events = tuple(
            {
                "name": str(e.get("name", "")),
                "time_ns": _ns(e.get("timestamp")),
                "attributes": _flatten(e.get("attributes") or {}),
            }
            for e in raw.get("events") or ()
        )
        status = str(raw.get("status_code") or "UNSET").upper()
        yield SpanRecord(
            trace_id=trace_id,
            span_id=span_id,
            parent_span_id=normalize_id(raw.get("parent_id"), 8, source=source, field="parent_id"),
            name=str(raw.get("name", "")),
            kind=0,  # Phoenix does not keep the OpenTelemetry span kind
            start_ns=_ns(raw.get("start_time")),
            end_ns=_ns(raw.get("end_time")),
            attributes=_flatten(raw.get("attributes") or {}),
            status=status if status in ("UNSET", "OK", "ERROR") else "UNSET",
            status_message=str(raw.get("status_message") or ""),
            events=events,
            origin=str(source),
        )
