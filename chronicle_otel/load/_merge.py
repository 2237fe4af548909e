"""Copies of one span to one: retries, pieces split over lines or files, and copies that disagree."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from .. import semconv
from ..model import SpanRecord


def merge(
    spans: Iterable[SpanRecord], conflicts: dict[str, set[str]] | None = None
) -> dict[str, dict[str, SpanRecord]]:
    """Group spans by trace, merging duplicates (retries) and split copies of one span.

    Copies of one span whose payloads differ (both carry a payload hash, and the hashes differ: not a retry, an
    edited or damaged source) are added to ``conflicts`` (trace id -> span ids); the most complete copy is kept.
    ``spans`` is consumed one at a time, and a copy that is not kept is dropped at once: memory follows the distinct
    spans, not the copies.
    """
    traces: dict[str, dict[str, SpanRecord]] = {}
    for span in spans:
        by_id = traces.setdefault(span.trace_id, {})
        seen = by_id.get(span.span_id)
        if seen is not None and conflicts is not None and _payloads_differ(seen, span):
            conflicts.setdefault(span.trace_id, set()).add(span.span_id)
        if seen is None or _completeness(span) > _completeness(seen):
            by_id[span.span_id] = span
    return traces


_PAYLOAD_HASHES: Final = tuple(keys.hash for keys in semconv.PAYLOAD_KEYS)


def _payloads_differ(a: SpanRecord, b: SpanRecord) -> bool:
    for key in _PAYLOAD_HASHES:
        x, y = a.attributes.get(key), b.attributes.get(key)
        if x is not None and y is not None and x != y:
            return True
    return False


def _completeness(span: SpanRecord) -> tuple[int, int, int]:
    return (1 if span.end_ns else 0, len(span.attributes), len(span.events))
