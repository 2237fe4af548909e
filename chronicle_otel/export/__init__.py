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
"""

from __future__ import annotations

from ._exporter import ChronicleExporter

__all__ = ["ChronicleExporter"]
