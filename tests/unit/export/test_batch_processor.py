"""chronicle's batch processor: bounded queue, counted drops, bounded waits, bounded shutdown, fork."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from chronicle_otel.export._batch import BatchProcessor


class Collecting(SpanExporter):
    """Keeps what it is given; ``gate`` (when set) holds every export until it opens."""

    def __init__(self, gate: threading.Event | None = None, result: SpanExportResult = SpanExportResult.SUCCESS):
        self.spans: list[str] = []
        self.gate = gate
        self.result = result
        self.entered = threading.Event()
        self.shut = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        if self.gate is not None:
            self.gate.wait(30)
        self.spans.extend(s.name for s in spans)
        return self.result

    def shutdown(self) -> None:
        self.shut = True


def _tracer(processor: BatchProcessor) -> tuple[TracerProvider, object]:
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return provider, provider.get_tracer("test")


def _end(tracer: object, count: int, prefix: str = "s") -> None:
    for i in range(count):
        tracer.start_span(f"{prefix}{i}").end()  # type: ignore[attr-defined]


def test_flush_exports_everything_in_order() -> None:
    exporter = Collecting()
    processor = BatchProcessor(exporter, name="t", max_batch=7, max_delay=60)
    _, tracer = _tracer(processor)
    _end(tracer, 100)
    assert processor.force_flush(10_000)
    assert exporter.spans == [f"s{i}" for i in range(100)]
    stats = processor.stats()
    assert (stats.accepted, stats.exported, stats.dropped, stats.queued) == (100, 100, 0, 0)
    processor.shutdown()
    assert exporter.shut


def test_spans_leave_memory_within_max_delay_without_any_flush() -> None:
    exporter = Collecting()
    processor = BatchProcessor(exporter, name="t", max_batch=1000, max_delay=0.05)
    _, tracer = _tracer(processor)
    _end(tracer, 3)
    deadline = time.monotonic() + 30
    while len(exporter.spans) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert exporter.spans == ["s0", "s1", "s2"], "exported on the timer, no flush asked"
    processor.shutdown()


def test_a_full_queue_drops_and_counts_under_drop(caplog: pytest.LogCaptureFixture) -> None:
    gate = threading.Event()
    exporter = Collecting(gate)
    processor = BatchProcessor(exporter, name="t", max_queue_size=10, max_batch=10, max_delay=60, on_full="drop")
    _, tracer = _tracer(processor)
    _end(tracer, 10)  # a full batch: the worker takes it and blocks in the exporter
    assert exporter.entered.wait(10)
    _end(tracer, 15, "late")  # 10 fit in the queue again, 5 are dropped
    stats = processor.stats()
    assert stats.dropped == 5 and stats.queued == 20
    gate.set()
    assert processor.force_flush(10_000)
    assert len(exporter.spans) == 20 and processor.stats().exported == 20
    warnings = [r.getMessage() for r in caplog.records if "queue is full" in r.getMessage()]
    assert len(warnings) == 1 and "on_full='drop'" in warnings[0]
    processor.shutdown()
    assert any("5 dropped" in r.getMessage() for r in caplog.records), "the total is logged at shutdown"


def test_a_full_queue_waits_for_room_under_block() -> None:
    gate = threading.Event()
    exporter = Collecting(gate)
    processor = BatchProcessor(
        exporter, name="t", max_queue_size=4, max_batch=4, max_delay=60, on_full="block", block_timeout=30
    )
    _, tracer = _tracer(processor)
    _end(tracer, 4)
    assert exporter.entered.wait(10)
    _end(tracer, 4, "b")  # the queue is full again
    waiting = threading.Thread(target=_end, args=(tracer, 1, "waiting"))
    waiting.start()
    deadline = time.monotonic() + 30
    while processor.stats().blocked_seconds == 0 and waiting.is_alive() and time.monotonic() < deadline:
        gate.set()  # the exporter makes room; the blocked span gets in instead of being dropped
        time.sleep(0.01)
    waiting.join(30)
    assert processor.force_flush(10_000)
    assert processor.stats().dropped == 0
    assert sorted(exporter.spans) == sorted([*(f"s{i}" for i in range(4)), *(f"b{i}" for i in range(4)), "waiting0"])
    processor.shutdown()


def test_block_gives_up_after_its_timeout_and_counts_the_drop() -> None:
    gate = threading.Event()
    exporter = Collecting(gate)
    processor = BatchProcessor(
        exporter, name="t", max_queue_size=2, max_batch=2, max_delay=60, on_full="block", block_timeout=0.05
    )
    _, tracer = _tracer(processor)
    _end(tracer, 2)
    assert exporter.entered.wait(10)
    _end(tracer, 3, "b")
    stats = processor.stats()
    assert stats.dropped == 1 and stats.blocked_seconds > 0
    gate.set()
    processor.shutdown()


def test_shutdown_is_bounded_when_the_exporter_is_stuck(caplog: pytest.LogCaptureFixture) -> None:
    gate = threading.Event()  # never opened while shutting down: a collector that accepts and never answers
    exporter = Collecting(gate)
    processor = BatchProcessor(exporter, name="otlp", max_batch=5, max_delay=60, shutdown_timeout=0.2)
    _, tracer = _tracer(processor)
    _end(tracer, 12)
    assert exporter.entered.wait(10)
    processor.shutdown()
    assert not gate.is_set() and not exporter.spans, "shutdown returned while the export was still stuck"
    stats = processor.stats()
    assert stats.undelivered == 12 and stats.lost == 12
    assert any("12 spans not delivered" in r.getMessage() for r in caplog.records)
    gate.set()


def test_failed_exports_are_counted() -> None:
    exporter = Collecting(result=SpanExportResult.FAILURE)
    processor = BatchProcessor(exporter, name="t", max_delay=60)
    _, tracer = _tracer(processor)
    _end(tracer, 6)
    processor.force_flush(10_000)
    stats = processor.stats()
    assert (stats.failed, stats.exported, stats.lost) == (6, 0, 6)
    processor.shutdown()


def test_unsampled_spans_are_ignored_and_spans_ended_after_shutdown_are_counted() -> None:
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    exporter = Collecting()
    processor = BatchProcessor(exporter, name="t", max_delay=60)
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(processor)
    _end(provider.get_tracer("t"), 3)
    assert processor.stats().accepted == 0 and exporter.spans == []
    _, tracer = _tracer(processor)
    late = tracer.start_span("late")  # a thread still recording at exit
    processor.shutdown()
    late.end()
    assert exporter.spans == [] and processor.stats().dropped == 1


def test_a_superseded_processor_counts_nothing_after_it_stops() -> None:
    """configure() again: the new processors take every span before the old ones stop."""
    old, new = BatchProcessor(Collecting(), name="t", max_delay=60), BatchProcessor(Collecting(), name="t")
    provider, tracer = _tracer(old)
    provider.add_span_processor(new)
    old.supersede()
    old.shutdown()
    _end(tracer, 2)
    new.force_flush(10_000)
    assert old.stats().dropped == 0 and new.stats().exported == 2
    new.shutdown()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() only")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_exports_with_its_own_thread(tmp_path: object) -> None:
    import multiprocessing

    exporter = Collecting()
    processor = BatchProcessor(exporter, name="t", max_delay=60)
    _, tracer = _tracer(processor)
    _end(tracer, 2, "parent")
    context = multiprocessing.get_context("fork")
    queue = context.SimpleQueue()

    def child() -> None:
        _end(tracer, 3, "child")
        processor.force_flush(10_000)
        queue.put(list(exporter.spans))

    proc = context.Process(target=child)
    proc.start()
    proc.join(30)
    assert proc.exitcode == 0
    assert queue.get() == ["child0", "child1", "child2"], "the child's spans only, exported by its own thread"
    processor.force_flush(10_000)
    assert exporter.spans == ["parent0", "parent1"]
    processor.shutdown()


def test_the_first_drop_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    gate = threading.Event()
    exporter = Collecting(gate)
    processor = BatchProcessor(exporter, name="t", max_queue_size=1, max_batch=1, max_delay=60, on_full="drop")
    _, tracer = _tracer(processor)
    _end(tracer, 1)
    assert exporter.entered.wait(10)
    _end(tracer, 10, "x")
    assert sum("queue is full" in r.getMessage() for r in caplog.records) == 1
    gate.set()
    processor.shutdown()


def test_the_counters_are_opentelemetry_metrics_when_a_meter_provider_is_set(tmp_path: object) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    import chronicle_otel as chronicle
    from chronicle_otel import semconv as sc
    from chronicle_otel.config import _metrics as chronicle_metrics

    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    from opentelemetry import metrics

    metrics._internal._METER_PROVIDER_SET_ONCE._done = False  # type: ignore[attr-defined]  # a fresh global
    metrics.set_meter_provider(meter_provider)
    chronicle_metrics._registered = False
    try:
        config = chronicle.configure(
            tracer_provider=TracerProvider(), store=chronicle.StoreOptions(path=str(tmp_path), max_delay=60)
        )

        @chronicle.boundary(kind="tool", name="metered")
        def metered(i: int) -> int:
            return i

        for i in range(5):
            metered(i)
        config.force_flush()
        data = reader.get_metrics_data()
        points = {
            (m.name, tuple(sorted(dict(p.attributes or {}).items()))): p.value
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            for p in m.data.data_points
        }
        assert points[(sc.METRIC_SPANS_EXPORTED, ((sc.METRIC_EXPORT_PATH, "store"),))] == 5
        lost = {k: v for k, v in points.items() if k[0] == sc.METRIC_SPANS_LOST}
        assert lost and all(v == 0 for v in lost.values())
        assert points[(sc.METRIC_SPANS_QUEUED, ((sc.METRIC_EXPORT_PATH, "store"),))] == 0
    finally:
        meter_provider.shutdown()
