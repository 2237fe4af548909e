"""The span exporter that writes boundary spans and their full payloads to the local store.

Usage::

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from chronicle_otel import ChronicleExporter

    exporter = ChronicleExporter(".chronicle")
    provider.add_span_processor(BatchSpanProcessor(exporter))

:func:`chronicle_otel.configure` does this for you and also connects the payload hand-off, so
payloads cut on the span (``chronicle.*.truncated``) reach the store whole.

API:
    :class:`ChronicleExporter`

    What :func:`chronicle_otel.configure` builds around it, and the counters
    :meth:`~chronicle_otel.ChronicleConfig.stats` reports: :class:`BatchProcessor` (the batch span processor,
    bounded and counted, with a stated backpressure policy) and its :class:`BatchStats`; :class:`PayloadUploader`
    (payloads to object storage, off the call path, with a local spool) and its :class:`UploadStats`.
"""

from __future__ import annotations

from ._batch import BatchProcessor, BatchStats
from ._exporter import ChronicleExporter
from ._uploader import PayloadUploader, UploadStats

__all__ = ["BatchProcessor", "BatchStats", "ChronicleExporter", "PayloadUploader", "UploadStats"]
