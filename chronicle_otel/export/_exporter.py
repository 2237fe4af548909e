"""ChronicleExporter: spans as OTLP/JSON lines plus full payloads, into a :class:`LocalStore`.

Which traces are written (``keep="boundaries"``) is decided span by span as export batches arrive; the
rules are on :class:`ChronicleExporter`. The work per span is a few dictionary operations, plus, once per
local root span of a trace without a boundary, a walk of the spans held below it.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import StatusCode

from .. import semconv
from .._api import publish
from .._internal.buffer import PayloadBuffer
from .._internal.errors import handle_internal_errors, warn_once
from ..config.params import STORE_KEEP, resolve
from ..otlp import export_line, plain_attributes
from ..store import LocalStore, TraceRecord
from ._recent import RecentMap

DEFAULT_HOLD_SPANS: Final = 20_000
"""Spans of traces with no boundary yet that the exporter holds at most."""
DEFAULT_HOLD_BYTES: Final = 32 * 1024 * 1024
"""Estimated bytes of held spans (attributes, events, payloads) the exporter holds at most."""
DEFAULT_HOLD_SECONDS: Final = 60.0
"""How long a span waits for a boundary of its trace before it is dropped."""

_KEPT_TRACES: Final = 100_000
# Lines are encoded (compressed) together once they hold _ENCODE_BYTES, or _ENCODE_LINES of them: few calls per batch,
# each one release of the interpreter lock that the application's thread may keep for its whole switch interval.
_ENCODE_BYTES: Final = 1024 * 1024
_ENCODE_LINES: Final = 512
_EVICTED_TRACES: Final = 100_000
_DROPPED_SPAN_IDS: Final = 100_000

Payloads = list[tuple[str, bytes]]
Attributes = dict[str, Any]


class ChronicleExporter(SpanExporter):
    """A :class:`~opentelemetry.sdk.trace.export.SpanExporter` that records spans in the local store.

    Each export writes, per trace, one OTLP/JSON ``ExportTraceServiceRequest`` line (the shape of the
    Collector's ``file`` exporter), indexes it by trace id, and stores the full payloads that boundary
    calls handed over for spans whose attributes were truncated. Optionally forwards the same spans to
    another exporter, unfiltered.

    With ``keep="boundaries"`` (the default) only traces with at least one boundary span
    (``chronicle.boundary.name``) are stored, so an application's health checks and other requests traced on
    the same provider stay out. The spans of a trace arrive over several batches, in the order they end:

    * a trace is kept when one of its boundary spans arrives: it is written with the spans of it held so far,
      and every later span of it is written directly (kept trace ids are remembered: the last 50,000 to
      100,000 written);
    * a span of a trace not (yet) kept is held in memory, within ``hold_spans`` and ``hold_bytes``;
    * when a local root span (no parent, or a parent in another process) of such a trace ends, it and the
      spans held below it are dropped: that request had no boundary. Their ids are remembered (the last 50,000
      to 100,000 span ids), so the spans below them that end later (detached tasks) are dropped as they arrive; a
      later request of the same distributed trace is decided afresh;
    * when the holding area is full the oldest held trace is dropped, and a span held longer than
      ``hold_seconds`` is dropped; both are counted, and if their trace then turns out to have a boundary
      they are counted as lost and one warning says so.

    :meth:`force_flush` leaves spans of traces still running held; :meth:`shutdown` drops them (no boundary
    came). ``keep="all"`` writes every span as it arrives.

    The exporter never raises into the application: a failure is logged once and ``export`` returns
    ``FAILURE``. ``shutdown`` is idempotent; exporting after it logs one warning.

    Args:
        store: a :class:`LocalStore`, a directory, or None for the default store.
        forward_to: another exporter (e.g. OTLP) that receives every exported batch too.
        payload_buffer: the hand-off from boundary calls; :func:`chronicle_otel.configure` wires it.
        keep: ``boundaries`` or ``all`` (every span, as it arrives). Default: ``$CHRONICLE_STORE_KEEP``,
            else ``boundaries``.
        hold_spans: most spans held at once; beyond it the oldest held trace is dropped.
        hold_bytes: most estimated bytes held at once; beyond it the oldest held trace is dropped.
        hold_seconds: how long a span is held before it is dropped.

    Attributes:
        keep: ``boundaries`` or ``all``.
        filtered_traces: traces (each local root span of one) not stored because no boundary was seen.
        filtered_spans: spans not stored because their trace had no boundary.
        evicted_spans: held spans dropped because the holding area was full.
        expired_spans: held spans dropped because they waited longer than ``hold_seconds``.
        lost_spans: spans dropped before the first boundary of their trace came (evicted, expired, or filtered
            when the trace's local root ended first): missing from a stored trace.

    Raises:
        ConfigError: ``keep`` or ``$CHRONICLE_STORE_KEEP`` is not ``boundaries`` or ``all``.
        ValueError: a hold bound is negative.
    """

    def __init__(
        self,
        store: LocalStore | str | os.PathLike[str] | None = None,
        *,
        forward_to: SpanExporter | None = None,
        payload_buffer: PayloadBuffer | None = None,
        keep: Literal["boundaries", "all"] | None = None,
        hold_spans: int = DEFAULT_HOLD_SPANS,
        hold_bytes: int = DEFAULT_HOLD_BYTES,
        hold_seconds: float = DEFAULT_HOLD_SECONDS,
    ) -> None:
        self.keep: Literal["boundaries", "all"] = "all" if resolve(STORE_KEEP, keep) == "all" else "boundaries"
        if min(hold_spans, hold_bytes, hold_seconds) < 0:
            raise ValueError("hold_spans, hold_bytes and hold_seconds must be >= 0")
        self.store = store if isinstance(store, LocalStore) else LocalStore(store)
        self.forward_to = forward_to
        self.payload_buffer = payload_buffer if payload_buffer is not None else PayloadBuffer()
        self.hold_spans = hold_spans
        self.hold_bytes = hold_bytes
        self.hold_seconds = hold_seconds
        self.filtered_traces = 0
        self.filtered_spans = 0
        self.evicted_spans = 0
        self.expired_spans = 0
        self.lost_spans = 0
        self._held: OrderedDict[int, _Held] = OrderedDict()  # by trace id, oldest first
        self._held_count = 0
        self._held_size = 0
        # bounded memories of traces, in generations (flat resident memory; see export/_recent.py)
        self._kept: RecentMap[int, bool] = RecentMap(_KEPT_TRACES)
        self._dropped: RecentMap[int, set[int]] = RecentMap(_DROPPED_SPAN_IDS, len)  # span ids of dropped parts
        self._evicted: RecentMap[int, int] = RecentMap(_EVICTED_TRACES)  # spans evicted or expired, by trace id
        self._lock = threading.Lock()
        self._shutdown = False

    def __repr__(self) -> str:
        return f"ChronicleExporter({self.store!r}, keep={self.keep!r})"

    @property
    def held_spans(self) -> int:
        """Spans held now, waiting for a boundary of their trace."""
        return self._held_count

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Write ``spans`` to the store (and forward them); never raises."""
        return SpanExportResult.SUCCESS if self._export_counted(spans) == 0 else SpanExportResult.FAILURE

    def _export_counted(self, spans: Sequence[ReadableSpan]) -> int:
        """:meth:`export`, telling how many of ``spans`` did not reach every destination: none, those of the traces a
        full volume had no room for (the others are stored), or all of them."""
        if self._shutdown:
            warn_once("exporter-shutdown", "chronicle_otel: ChronicleExporter.export() called after shutdown; ignored")
            return len(spans)
        lost = len(spans)
        with handle_internal_errors("writing spans to %s", self.store.path), self._lock:
            try:
                lost = self._write(spans)
            except Exception as exc:
                if not self.store.report_write_failure(exc):  # disk full, read-only, ...: named once per cause
                    raise
        if self.forward_to is None:
            return lost
        forwarded = False
        with handle_internal_errors("forwarding spans with %s", type(self.forward_to).__name__, external=True):
            forwarded = self.forward_to.export(spans) is SpanExportResult.SUCCESS
        return lost if forwarded else len(spans)

    def _write(self, spans: Sequence[ReadableSpan]) -> int:
        """Write ``spans``; how many of them a full volume had no room for."""
        if self.keep != "all":
            return self._write_kept(spans)
        by_trace: dict[int, tuple[list[ReadableSpan], Payloads]] = {}
        take = self._taker()
        for span in spans:
            ctx = span.context
            if ctx is None:
                continue
            entry = by_trace.get(ctx.trace_id)
            if entry is None:
                entry = by_trace[ctx.trace_id] = ([], [])
            entry[0].append(span)
            if take is not None:
                entry[1].extend(take(ctx.span_id))
        lines = _Lines(self.store)
        for trace_id, (items, payloads) in by_trace.items():
            record = self._record(trace_id, items, [plain_attributes(span.attributes) for span in items])
            record.payloads = payloads
            lines.add(record, len(items))
        return lines.write()

    def _taker(self) -> Any:
        """``payload_buffer.take``, or None when the buffer is empty: nothing of this batch is in it then (a boundary
        call hands its payloads over before its span ends, so before the span reaches an export batch)."""
        return self.payload_buffer.take if len(self.payload_buffer) else None

    # ------------------------------------------------------------------------------------ keep="boundaries"

    def _write_kept(self, spans: Sequence[ReadableSpan]) -> int:
        """Write the spans of traces with a boundary; hold or drop the others. Returns how many of ``spans`` a full
        volume had no room for."""
        by_trace: dict[int, list[tuple[ReadableSpan, int, Attributes]]] = {}
        for span in spans:
            ctx = span.context
            if ctx is not None:
                entry = (span, ctx.span_id, plain_attributes(span.attributes))
                items = by_trace.get(ctx.trace_id)
                if items is None:
                    by_trace[ctx.trace_id] = [entry]
                else:
                    items.append(entry)
        now = time.monotonic()
        self._expire(now - self.hold_seconds)
        take = self._taker() or _take_nothing
        lines = _Lines(self.store)
        kept = self._kept
        for trace_id, items in by_trace.items():
            if trace_id in kept or _has_boundary(items):
                payloads: Payloads = []
                written, written_attrs = self._release(trace_id, payloads, items)
                for span, span_id, attrs in items:
                    written.append(span)
                    written_attrs.append(attrs)
                    payloads.extend(take(span_id))
                record = self._record(trace_id, written, written_attrs)
                record.payloads = payloads
                lines.add(record, len(items))
                continue
            roots = []
            for span, span_id, _ in items:
                parent = span.parent
                if parent is None or parent.is_remote:
                    roots.append(span_id)
                else:
                    self._hold(trace_id, span, span_id, parent.span_id, take(span_id), now)
            for span_id in roots:  # after the spans of the same batch, which may be below it
                take(span_id)
                self.filtered_traces += 1
                self._drop_below(trace_id, span_id)
                self._evicted.pop(trace_id, None)  # no boundary: what was evicted of it is not lost
        return lines.write()

    def _release(
        self, trace_id: int, payloads: Payloads, items: list[tuple[ReadableSpan, int, Attributes]]
    ) -> tuple[list[ReadableSpan], list[Attributes]]:
        """Mark the trace kept; its held spans (to write), their attributes, and their payloads."""
        kept = self._kept
        known = trace_id in kept
        kept.put(trace_id, True)
        if not known:
            lost = self._evicted.pop(trace_id, 0) or 0
            filtered = self._dropped.pop(trace_id)
            if filtered and any(span.parent is not None and span.parent.span_id in filtered for span, _, _ in items):
                lost += len(filtered)  # spans below a local root that ended before the boundary came (a detached task)
            if lost:
                self.lost_spans += lost
                warn_once(
                    "store-keep-lost",
                    "chronicle_otel: %d span(s) of trace %032x were dropped before its first boundary came (its root "
                    "span had ended, the holding area was full, or they waited longer than %ss), so the stored trace "
                    "misses them; ChronicleExporter.lost_spans counts them. Later losses are counted only.",
                    lost,
                    trace_id,
                    self.hold_seconds,
                )
        held = self._held.pop(trace_id, None)
        if held is None:
            return [], []
        self._held_count -= len(held.spans)
        self._held_size -= held.size
        out = []
        for span, span_payloads, _ in held.spans.values():
            out.append(span)
            payloads.extend(span_payloads)
        return out, [plain_attributes(span.attributes) for span in out]

    def _hold(
        self, trace_id: int, span: ReadableSpan, span_id: int, parent_id: int, payloads: Payloads, now: float
    ) -> None:
        dropped = self._dropped.get(trace_id)
        if dropped is not None and parent_id in dropped:  # ended after the dropped root it belongs to
            self._drop_below(trace_id, span_id)
            return
        held = self._held.get(trace_id)
        if held is None:
            held = self._held[trace_id] = _Held(now)
        size = _span_size(span) + sum(len(data) for _, data in payloads)
        held.spans[span_id] = (span, payloads, size)
        held.children.setdefault(parent_id, []).append(span_id)
        held.size += size
        self._held_count += 1
        self._held_size += size
        while self._held and (self._held_count > self.hold_spans or self._held_size > self.hold_bytes):
            old_id, old = self._held.popitem(last=False)
            self._forget(old_id, old)
            self.evicted_spans += len(old.spans)
            warn_once(
                "store-keep-full",
                "chronicle_otel: the spans waiting for a boundary of their trace exceed %d spans or %d bytes; the "
                "oldest are dropped (ChronicleExporter.evicted_spans counts them, lost_spans those whose trace then "
                "had a boundary). Later evictions are counted only.",
                self.hold_spans,
                self.hold_bytes,
            )

    def _drop_below(self, trace_id: int, span_id: int) -> None:
        """Drop ``span_id`` and the spans held below it; remember their ids for their late descendants."""
        ids = {span_id}
        held = self._held.get(trace_id)
        if held is not None:
            stack = [span_id]
            while stack:
                for child in held.children.pop(stack.pop(), ()):
                    entry = held.spans.pop(child, None)
                    if entry is not None:
                        ids.add(child)
                        stack.append(child)
                        held.size -= entry[2]
                        self._held_count -= 1
                        self._held_size -= entry[2]
            if not held.spans:
                del self._held[trace_id]
        self.filtered_spans += len(ids)
        self._dropped.update(trace_id, lambda known: ids if known is None else known | ids)

    def _expire(self, deadline: float) -> None:
        """Drop held traces that started waiting at or before ``deadline``."""
        held = self._held
        while held:
            trace_id, oldest = next(iter(held.items()))
            if oldest.since > deadline:
                return
            held.popitem(last=False)
            self._forget(trace_id, oldest)
            self.expired_spans += len(oldest.spans)

    def _forget(self, trace_id: int, held: _Held) -> None:
        """Account for ``held``, already taken out of the holding area, as evicted or expired."""
        count = len(held.spans)
        self._held_count -= count
        self._held_size -= held.size
        self._evicted.update(trace_id, lambda spans: (spans or 0) + count)

    def _drop_held(self) -> None:
        """Drop every held span: their traces had no boundary up to now."""
        for held in self._held.values():
            self.filtered_traces += 1
            self.filtered_spans += len(held.spans)
        self._held.clear()
        self._held_count = self._held_size = 0

    # ------------------------------------------------------------------------------------ records

    @staticmethod
    def _record(trace_id: int, spans: list[ReadableSpan], attributes: list[Attributes]) -> TraceRecord:
        """The line and index entry of ``spans`` of one trace (``attributes``: theirs, as plain dicts, in order)."""
        line = export_line(spans, attributes)
        root: dict[str, Any] | None = None
        outer: tuple[str, str, int] | None = None
        errors = 0
        service = None
        replay_of: str | None = None
        for span, attrs in zip(spans, attributes):  # noqa: B905 - one dict per span, made by the caller
            status = span.status.status_code
            if status is StatusCode.ERROR:
                errors += 1
            if attrs:
                name = attrs.get(_BOUNDARY_NAME)
                if replay_of is None:  # a replay marks its spans (boundaries and call(...) blocks): any one tells
                    of = attrs.get(_REPLAY_OF)
                    replay_of = of if isinstance(of, str) and of else None
                if isinstance(name, str):
                    start = span.start_time or 0
                    if outer is None or start < outer[2]:
                        outer = (name, str(attrs.get(_BOUNDARY_KIND, "")), start)
            parent = span.parent
            if parent is None or parent.is_remote:
                context = span.context
                assert context is not None
                root = {
                    "span_id": "%016x" % context.span_id,  # noqa: UP031 - twice as fast as an f-string here
                    "name": span.name,
                    "start_ns": span.start_time,
                    "end_ns": span.end_time,
                    "status": _STATUS_NAMES[status] if status is not StatusCode.UNSET else "UNSET",
                }
                service = _service_name(span.resource)
        return TraceRecord("%032x" % trace_id, line, len(spans), errors, root, outer, service, replay_of)  # noqa: UP031

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Flush the store's open segment (and the forward exporter).

        Spans held for a trace still running stay held (they are dropped at :meth:`shutdown` if no boundary
        comes); those held longer than ``hold_seconds`` are dropped now.
        """
        flushed = False
        with handle_internal_errors("flushing %s", self.store.path, external=True):
            with self._lock:
                self._expire(time.monotonic() - self.hold_seconds)
            self.store.flush()
            flushed = True
        if self.forward_to is None:
            return flushed
        forwarded = False
        with handle_internal_errors("flushing %s", type(self.forward_to).__name__, external=True):
            forwarded = bool(self.forward_to.force_flush(timeout_millis))
        return flushed and forwarded

    def shutdown(self) -> None:
        """Drop the spans still held (no boundary came), close the store, shut the forward exporter down.

        Safe to call twice.
        """
        if self._shutdown:
            return
        self._shutdown = True
        with self._lock, handle_internal_errors("closing %s", self.store.path, external=True):
            self._drop_held()
            self.store.close()
        if self.forward_to is not None:
            with handle_internal_errors("shutting down %s", type(self.forward_to).__name__, external=True):
                self.forward_to.shutdown()


class _Held:
    """The spans of one trace waiting for its first boundary."""

    __slots__ = ("children", "since", "size", "spans")

    def __init__(self, since: float) -> None:
        self.since = since
        self.spans: dict[int, tuple[ReadableSpan, Payloads, int]] = {}  # span id -> (span, payloads, size)
        self.children: dict[int, list[int]] = {}  # parent span id -> ids of held spans below it
        self.size = 0


_BOUNDARY_NAME: Final = semconv.BOUNDARY_NAME
_BOUNDARY_KIND: Final = semconv.BOUNDARY_KIND
_REPLAY_OF: Final = semconv.REPLAY_OF
_STATUS_NAMES: Final = {code: code.name for code in StatusCode}


class _Lines:
    """The trace records of one export batch, their lines encoded (compressed) by the store a chunk at a time as they
    are added (:data:`_ENCODE_BYTES` or :data:`_ENCODE_LINES`): the raw lines of a whole batch (megabytes) never pile
    up, the memory one chunk frees is reused by the next, and each chunk is one call (one release of the lock)."""

    __slots__ = ("_done", "_encode", "_fresh", "_pending", "_store", "records")

    def __init__(self, store: LocalStore) -> None:
        self.records: list[TraceRecord] = []
        self._store = store
        self._encode = store.encode_lines
        self._fresh: dict[int, int] = {}  # id(record) -> spans of the export batch in it (not held from earlier)
        self._done = 0  # records whose lines are encoded
        self._pending = 0  # raw bytes of the others

    def add(self, record: TraceRecord, fresh: int) -> None:
        """Add ``record``, which holds ``fresh`` spans of the export batch (and maybe spans held from earlier ones)."""
        self.records.append(record)
        self._fresh[id(record)] = fresh
        self._pending += len(record.line)
        if self._pending >= _ENCODE_BYTES or len(self.records) - self._done >= _ENCODE_LINES:
            self.encoded()

    def encoded(self) -> list[TraceRecord]:
        """Every record, its line encoded."""
        tail = self.records[self._done :]
        if tail:
            for rec, line in zip(tail, self._encode([rec.line for rec in tail]), strict=True):
                rec.line = line
        self._done = len(self.records)
        self._pending = 0
        return self.records

    def write(self) -> int:
        """Write the records to the store; how many spans of the export batch are in those it had no room for."""
        if not self.records:
            return 0
        unstored = self._store.write_batch(self.encoded()) or ()  # a subclass's write_batch may return nothing
        return sum(self._fresh.get(id(record), 0) for record in unstored)


def _take_nothing(span_id: int) -> Payloads:
    return []


def _has_boundary(items: list[tuple[ReadableSpan, int, Attributes]]) -> bool:
    for _, _, attrs in items:  # noqa: SIM110 - a loop: any() of a generator costs more, once per trace
        if _BOUNDARY_NAME in attrs:
            return True
    return False


_last_service: tuple[object, str | None] = (None, None)


def _service_name(resource: Resource | None) -> str | None:
    """``service.name`` of ``resource`` (the last one asked for is remembered: one process, one resource)."""
    global _last_service
    last, name = _last_service
    if resource is last:
        return name
    if resource is None:
        return None
    value = resource.attributes.get("service.name")
    name = str(value) if value is not None else None
    _last_service = (resource, name)
    return name


def _span_size(span: ReadableSpan) -> int:
    """A rough size of a held span in memory, in bytes: its strings count, plus a fixed cost per item."""
    size = 512 + len(span.name) + _attributes_size(span.attributes) + 128 * len(span.links)
    for event in span.events:
        size += 128 + len(event.name) + _attributes_size(event.attributes)
    return size


def _attributes_size(attributes: Mapping[str, Any] | None) -> int:
    if not attributes:
        return 0
    size = 0
    for key, value in attributes.items():
        size += 64 + len(key)
        if isinstance(value, (str, bytes)):
            size += len(value)
        elif isinstance(value, Sequence):
            size += sum(len(item) + 8 if isinstance(item, str) else 16 for item in value)
    return size


publish(__name__, globals())
