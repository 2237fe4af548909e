"""chronicle's counters as OpenTelemetry metrics, through the metrics API.

Registered once per process when a process-wide configuration starts. The instruments are observable: the
counters are read when the application's MeterProvider collects (nothing is computed on the call path), and
with no MeterProvider set the API's no-op meter makes them free. A MeterProvider set later is picked up by the
API's proxy meter.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from .. import semconv
from ..version import __version__

_lock = threading.Lock()
_registered = False


def register(stats: Callable[[], Any]) -> None:
    """Expose ``stats()`` (a :class:`~chronicle_otel.config.ChronicleStats` or None) as metrics, once."""
    global _registered
    with _lock:
        if _registered:
            return
        _registered = True
    from opentelemetry import metrics
    from opentelemetry.metrics import CallbackOptions, Observation

    def exported(options: CallbackOptions) -> Iterable[Observation]:
        current = stats()
        if current is None:
            return []
        return [Observation(s.exported, {semconv.METRIC_EXPORT_PATH: s.name}) for s in current.exports.values()]

    def lost(options: CallbackOptions) -> Iterable[Observation]:
        current = stats()
        if current is None:
            return []
        out = []
        for s in current.exports.values():
            for cause, value in (
                ("queue_full", s.dropped),
                ("export_failed", s.failed),
                ("undelivered", s.undelivered),
            ):
                out.append(Observation(value, {semconv.METRIC_EXPORT_PATH: s.name, semconv.METRIC_LOSS_CAUSE: cause}))
        if current.store is not None:
            attrs = {semconv.METRIC_EXPORT_PATH: "store", semconv.METRIC_LOSS_CAUSE: "no_boundary_window"}
            out.append(Observation(current.store.lost_spans, attrs))
            attrs = {semconv.METRIC_EXPORT_PATH: "store", semconv.METRIC_LOSS_CAUSE: "payload_buffer_full"}
            out.append(Observation(current.store.dropped_payloads, attrs))
        return out

    def queued(options: CallbackOptions) -> Iterable[Observation]:
        current = stats()
        if current is None:
            return []
        return [Observation(s.queued, {semconv.METRIC_EXPORT_PATH: s.name}) for s in current.exports.values()]

    meter = metrics.get_meter("chronicle_otel", __version__)
    meter.create_observable_counter(
        semconv.METRIC_SPANS_EXPORTED, [exported], unit="{span}", description="Spans delivered by an export path"
    )
    meter.create_observable_counter(
        semconv.METRIC_SPANS_LOST, [lost], unit="{span}", description="Spans an export path will not deliver"
    )
    meter.create_observable_up_down_counter(
        semconv.METRIC_SPANS_QUEUED, [queued], unit="{span}", description="Spans waiting in an export queue"
    )
