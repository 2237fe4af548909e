"""ChronicleExporter: spans as OTLP/JSON lines plus full payloads, into a :class:`LocalStore`."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import orjson
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import StatusCode

from .. import semconv
from .._internal.buffer import PayloadBuffer
from .._internal.errors import handle_internal_errors, warn_once
from .._internal.otlp_json import export_request
from ..store import LocalStore, TraceRecord


class ChronicleExporter(SpanExporter):
    """A :class:`~opentelemetry.sdk.trace.export.SpanExporter` that records spans in the local store.

    Each export writes, per trace, one OTLP/JSON ``ExportTraceServiceRequest`` line (the shape of the
    Collector's ``file`` exporter), indexes it by trace id, and stores the full payloads that boundary
    calls handed over for spans whose attributes were truncated. Optionally forwards the same spans to
    another exporter.

    The exporter never raises into the application: a failure is logged once and ``export`` returns
    ``FAILURE``. ``shutdown`` is idempotent; exporting after it logs one warning.

    Args:
        store: a :class:`LocalStore`, a directory, or None for the default store.
        forward_to: another exporter (e.g. OTLP) that receives every exported batch too.
        payload_buffer: the hand-off from boundary calls; :func:`chronicle_otel.configure` wires it.
    """

    def __init__(
        self,
        store: LocalStore | str | os.PathLike[str] | None = None,
        *,
        forward_to: SpanExporter | None = None,
        payload_buffer: PayloadBuffer | None = None,
    ) -> None:
        self.store = store if isinstance(store, LocalStore) else LocalStore(store)
        self.forward_to = forward_to
        self.payload_buffer = payload_buffer if payload_buffer is not None else PayloadBuffer()
        self._lock = threading.Lock()
        self._shutdown = False

    def __repr__(self) -> str:
        return f"ChronicleExporter({self.store!r})"

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Write ``spans`` to the store (and forward them); never raises."""
        if self._shutdown:
            warn_once("exporter-shutdown", "chronicle_otel: ChronicleExporter.export() called after shutdown; ignored")
            return SpanExportResult.FAILURE
        written = False
        with handle_internal_errors("writing spans to %s", self.store.path):
            with self._lock:
                self._write(spans)
            written = True
        if self.forward_to is None:
            return SpanExportResult.SUCCESS if written else SpanExportResult.FAILURE
        forwarded = False
        with handle_internal_errors("forwarding spans with %s", type(self.forward_to).__name__, external=True):
            forwarded = self.forward_to.export(spans) is SpanExportResult.SUCCESS
        return SpanExportResult.SUCCESS if written and forwarded else SpanExportResult.FAILURE

    def _write(self, spans: Sequence[ReadableSpan]) -> None:
        by_trace: dict[int, list[ReadableSpan]] = {}
        payloads: list[tuple[str, bytes]] = []
        for span in spans:
            ctx = span.context
            if ctx is None:
                continue
            by_trace.setdefault(ctx.trace_id, []).append(span)
            payloads.extend(self.payload_buffer.take(ctx.span_id))
        records = [self._record(trace_id, items) for trace_id, items in by_trace.items()]
        self.store.write_batch(records, payloads)

    @staticmethod
    def _record(trace_id: int, spans: list[ReadableSpan]) -> TraceRecord:
        line = orjson.dumps(export_request(spans))
        root: dict[str, Any] | None = None
        outer: tuple[str, str, int] | None = None
        errors = 0
        service = None
        for span in spans:
            status = span.status.status_code
            if status is StatusCode.ERROR:
                errors += 1
            attrs = span.attributes or {}
            name = attrs.get(semconv.BOUNDARY_NAME)
            start = span.start_time or 0
            if isinstance(name, str) and (outer is None or start < outer[2]):
                outer = (name, str(attrs.get(semconv.BOUNDARY_KIND, "")), start)
            if span.parent is None or span.parent.is_remote:
                assert span.context is not None
                root = {
                    "span_id": f"{span.context.span_id:016x}",
                    "name": span.name,
                    "start_ns": span.start_time,
                    "end_ns": span.end_time,
                    "status": status.name,
                }
                if span.resource is not None:
                    svc = span.resource.attributes.get("service.name")
                    service = str(svc) if svc is not None else None
        return TraceRecord(f"{trace_id:032x}", line, len(spans), errors, root, outer, service)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Flush the store's open segment (and the forward exporter)."""
        flushed = False
        with handle_internal_errors("flushing %s", self.store.path, external=True):
            self.store.flush()
            flushed = True
        if self.forward_to is None:
            return flushed
        forwarded = False
        with handle_internal_errors("flushing %s", type(self.forward_to).__name__, external=True):
            forwarded = bool(self.forward_to.force_flush(timeout_millis))
        return flushed and forwarded

    def shutdown(self) -> None:
        """Close the store and shut the forward exporter down; safe to call twice."""
        if self._shutdown:
            return
        self._shutdown = True
        with self._lock, handle_internal_errors("closing %s", self.store.path, external=True):
            self.store.close()
        if self.forward_to is not None:
            with handle_internal_errors("shutting down %s", type(self.forward_to).__name__, external=True):
                self.forward_to.shutdown()
