"""Arize Phoenix's REST span model (``GET /v1/projects/{project}/spans``) as span records."""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from .._internal.untrusted import INT64_MIN, MAX_VALUE_DEPTH, UINT64_MAX, Where, check_depth
from ..errors import TraceLoadError
from ..model import SpanRecord
from ..otlp import normalize_id

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MAX_TIME_TEXT = 64
_TIME_TAIL = re.compile(
    r"(?<=[Tt ])(?P<hms>\d\d:\d\d:\d\d)(?:[.,](?P<fraction>\d+))?(?:(?P<sign>[+-])(?P<hh>\d\d)(?::?(?P<mm>\d\d))?)?$"
)


def _isoformat(text: str) -> str:
    """``text`` as every supported Python's ``datetime.fromisoformat`` reads it: Python 3.10 takes only 3 or 6
    digits of fraction and ``+HH:MM`` offsets, 3.11 and later any (digits past the sixth are dropped, as here)."""
    text = text.replace("Z", "+00:00")
    tail = _TIME_TAIL.search(text)
    if tail is None:
        return text
    fraction, sign = tail["fraction"], tail["sign"]
    return (
        text[: tail.start()]
        + tail["hms"]
        + (f".{fraction[:6]:0<6}" if fraction else "")
        + (f"{sign}{tail['hh']}:{tail['mm'] or '00'}" if sign else "")
    )


def is_phoenix(doc: Any) -> bool:
    """A Phoenix spans response ``{"data": [{"context": {...}, ...}]}`` or a list of its span dicts."""
    items = doc.get("data") if isinstance(doc, Mapping) else doc
    return (
        isinstance(items, list)
        and bool(items)
        and all(isinstance(s, Mapping) and isinstance(s.get("context"), Mapping) for s in items)
    )


def _ns(value: Any, at: Where, field: str) -> int:
    if isinstance(value, float) and math.isfinite(value):
        value = int(value)
    if value is None or isinstance(value, (int, float)):
        return at.integer(value, field)
    if isinstance(value, str) and len(value) <= _MAX_TIME_TEXT:
        try:
            parsed = dt.datetime.fromisoformat(_isoformat(value))
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=dt.timezone.utc)
            delta = parsed - _EPOCH
        except (ValueError, OverflowError):
            pass
        else:
            ns = (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
            if INT64_MIN <= ns <= UINT64_MAX:
                return ns
    raise at.error(field, value, "an ISO 8601 time or nanoseconds since the epoch")


def _flatten(attrs: Mapping[str, Any], at: Where, field: str) -> dict[str, Any]:
    """Phoenix stores attributes as nested objects in places; span attributes are flat dotted keys.

    Walks without recursion; a value may nest at most ``MAX_VALUE_DEPTH`` levels.
    """
    out: dict[str, Any] = {}
    stack: list[tuple[str, Iterator[tuple[Any, Any]]]] = [("", iter(attrs.items()))]
    while stack:
        prefix, pending = stack[-1]
        entry = next(pending, None)
        if entry is None:
            stack.pop()
            continue
        key, value = entry
        name = f"{prefix}{at.scalar_text(key, f'{field} key')}"
        if isinstance(value, Mapping):
            if len(stack) >= MAX_VALUE_DEPTH:
                raise at.fail(f"{field} nests deeper than {MAX_VALUE_DEPTH} levels")
            stack.append((name + ".", iter(value.items())))
        else:
            out[name] = check_depth(value, at, f"{field}.{name}", MAX_VALUE_DEPTH - len(stack))
    return out


def spans(doc: Any, *, source: object = None, line: int | None = None) -> Iterator[SpanRecord]:
    """Every span of a Phoenix spans response.

    Raises:
        TraceLoadError: a field has the wrong type or range.
    """
    top = Where(source, line)
    items = doc.get("data") if isinstance(doc, Mapping) else doc
    prefix = "data" if isinstance(doc, Mapping) else ""
    for i, raw in top.mappings(items, prefix or "document"):
        at = top.at(f"{prefix}[{i}].")
        ctx = at.mapping(raw.get("context"), "context")
        trace_id = normalize_id(ctx.get("trace_id"), 16, source=source, line=line, field="context.trace_id")
        span_id = normalize_id(ctx.get("span_id"), 8, source=source, line=line, field="context.span_id")
        if trace_id is None or span_id is None:
            raise TraceLoadError("a Phoenix span has no context.trace_id or span_id", source=source, line=line)
        events = []
        for j, e in at.mappings(raw.get("events"), "events"):
            events.append(
                {
                    "name": at.scalar_text(e.get("name"), f"events[{j}].name"),
                    "time_ns": _ns(e.get("timestamp"), at, f"events[{j}].timestamp"),
                    "attributes": _flatten(
                        at.mapping(e.get("attributes"), f"events[{j}].attributes"), at, f"events[{j}].attributes"
                    ),
                }
            )
        status = at.scalar_text(raw.get("status_code"), "status_code").upper() or "UNSET"
        yield SpanRecord(
            trace_id=trace_id,
            span_id=span_id,
            parent_span_id=normalize_id(raw.get("parent_id"), 8, source=source, line=line, field="parent_id"),
            name=at.scalar_text(raw.get("name"), "name"),
            kind=0,  # Phoenix does not keep the OpenTelemetry span kind
            start_ns=_ns(raw.get("start_time"), at, "start_time"),
            end_ns=_ns(raw.get("end_time"), at, "end_time"),
            attributes=_flatten(at.mapping(raw.get("attributes"), "attributes"), at, "attributes"),
            status=status if status in ("UNSET", "OK", "ERROR") else "UNSET",
            status_message=at.scalar_text(raw.get("status_message"), "status_message"),
            events=tuple(events),
            origin=f"{source}:{line}" if line is not None else str(source),
        )
