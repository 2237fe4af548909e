"""OTLP/JSON, both ways: the reader and the writer, over one mapping of values.

The shape is the OpenTelemetry Collector ``file`` exporter's: one ``ExportTraceServiceRequest`` per line,
``resourceSpans`` → ``scopeSpans`` → ``spans``, lowerCamelCase fields, hex ids, 64-bit integers as strings.

* ``_values``: OTLP ``AnyValue`` and attribute lists to Python values and back, ids, span kinds and status codes;
  the one mapping both sides use.
* ``_reader``: untrusted documents (that shape and its variants: snake_case, base64 ids, enum names, the older
  ``instrumentationLibrarySpans``) as :class:`~chronicle_otel.model.SpanRecord` objects, every field checked.
* ``_writer``: finished SDK spans as export lines (the exporter's hot path, :func:`export_line`) and span records
  as request documents (:func:`spans_to_request`, behind :func:`chronicle_otel.load.write_trace`).

This package sits low: it imports the trace model and ``_internal`` only, so that exporting (the writer) and loading
(the reader) both build on it. The names below are imported on first use: the exporter does not load the reader,
and loading a trace does not load the writer (nor, through it, the OpenTelemetry SDK).

API:
    :func:`export_line`, :func:`export_request`, :func:`plain_attributes`, :func:`spans_to_request` (writing);
    :func:`spans_of_request`, :func:`is_otlp`, :func:`normalize_id` (reading).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._reader import is_otlp, spans_of_request
    from ._values import normalize_id, plain_attributes
    from ._writer import export_line, export_request, spans_to_request

__all__ = [
    "export_line",
    "export_request",
    "is_otlp",
    "normalize_id",
    "plain_attributes",
    "spans_of_request",
    "spans_to_request",
]


def __getattr__(name: str) -> Any:
    module = None
    if name in ("export_line", "export_request", "spans_to_request"):
        module = importlib.import_module("._writer", __name__)
    elif name in ("is_otlp", "spans_of_request"):
        module = importlib.import_module("._reader", __name__)
    elif name in ("normalize_id", "plain_attributes"):
        module = importlib.import_module("._values", __name__)
    if module is not None:
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
