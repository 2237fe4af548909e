"""Spans that wait behind a full batch (a collector down) are packed into plain values the garbage collector does not
walk, and reach the exporter exactly as they were: the same OTLP bytes, the same JSON, the same properties."""

from __future__ import annotations

import gc
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
    set_span_in_context,
)

from chronicle_otel._internal.compat import SpanPacker, shed_empty_containers
from chronicle_otel.export._batch import BatchProcessor
from tests.unit.export.test_batch_shed import _spans, _view


def _more_spans() -> list[ReadableSpan]:
    """Parents local and remote, every kind, every status, a trace state: what a provider hands its processors."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "pack"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("pack", "1.2", schema_url="https://opentelemetry.io/schemas/1.21.0")
    remote = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(1))
    with tracer.start_as_current_span("root", kind=SpanKind.SERVER) as root:
        root.set_status(Status(StatusCode.OK))
        for kind in SpanKind:
            with tracer.start_as_current_span(f"child {kind.name}", kind=kind, attributes={"k": kind.value}):
                pass
    with tracer.start_as_current_span("under a remote parent", context=set_span_in_context(NonRecordingSpan(remote))):
        pass
    stated = SpanContext(0x99, 0x77, is_remote=True, trace_flags=TraceFlags(1), trace_state=TraceState([("v", "1")]))
    with tracer.start_as_current_span("with a trace state", context=set_span_in_context(NonRecordingSpan(stated))):
        pass
    return list(memory.get_finished_spans())


def test_a_packed_span_is_rebuilt_as_it_was() -> None:
    packer = SpanPacker()
    spans = _spans() + _more_spans()
    packed_names = []
    for span in spans:
        shed_empty_containers(span)
        before = _view(span)
        packed = packer.pack(span)
        if packed is None:
            continue
        packed_names.append(span.name)
        again = packer.unpack(packed)
        assert _view(again) == before, span.name
        assert again.parent == span.parent and again.context == span.context
        assert again.resource is span.resource and again.instrumentation_scope is span.instrumentation_scope
    # What the packer cannot rebuild as it was waits as it is: events, links, dropped attributes, a trace state.
    assert set(packed_names) == {s.name for s in spans} - {
        "event",
        "dropped event",
        "link",
        "dropped link",
        "too many attributes",
        "with a trace state",
    }


def test_a_packed_span_is_not_walked_by_the_garbage_collector() -> None:
    packer = SpanPacker()
    spans = [span for span in _spans() + _more_spans() if not span.events and not span.links]
    packed = []
    for span in spans:
        shed_empty_containers(span)
        item = packer.pack(span)
        if item is not None:
            packed.append(item)
    assert len(packed) >= 8
    for _ in range(3):  # a pass of the collector untracks a tuple once the tuples it holds are untracked
        gc.collect()
    tracked = [item for item in packed if gc.is_tracked(item)]
    assert tracked == []


_ATOMS = st.one_of(
    st.text(max_size=8),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
)
_VALUES = st.one_of(_ATOMS, st.lists(st.text(max_size=4), max_size=3).map(tuple))


@settings(max_examples=150, deadline=None)
@given(
    attributes=st.dictionaries(st.text(min_size=1, max_size=8), _VALUES, max_size=8),
    kind=st.sampled_from(list(SpanKind)),
    status=st.sampled_from([Status(StatusCode.UNSET), Status(StatusCode.OK), Status(StatusCode.ERROR, "no")]),
    sampled=st.booleans(),
)
def test_any_clean_span_packs_and_unpacks_to_the_same_bytes(
    attributes: dict[str, Any], kind: SpanKind, status: Status, sampled: bool
) -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("property")
    with tracer.start_as_current_span("outer"), tracer.start_as_current_span("s", kind=kind) as span:
        span.set_attributes(attributes)
        span.set_status(status)
    packer = SpanPacker()
    for ended in memory.get_finished_spans():
        shed_empty_containers(ended)
        before = _view(ended)
        packed = packer.pack(ended)
        assert packed is not None
        assert _view(packer.unpack(packed)) == before


def test_the_shared_objects_a_packer_keeps_are_bounded() -> None:
    packer = SpanPacker()
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    for i in range(SpanPacker.MAX_SHARED + 5):
        with provider.get_tracer(f"scope {i}").start_as_current_span("s"):
            pass
    results = []
    for span in memory.get_finished_spans():
        shed_empty_containers(span)
        results.append(packer.pack(span))
    assert results[0] is not None
    assert results[-1] is None  # a new scope once the table is full: the span waits unpacked
    assert len(packer._shared) <= SpanPacker.MAX_SHARED


class _Held(SpanExporter):
    """An exporter that takes nothing until released (a collector that is down), then keeps what it is given."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.views: list[str] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        self.release.wait(30)
        self.views.extend(repr(_view(span)) for span in spans)
        return SpanExportResult.SUCCESS


def _record(provider: TracerProvider, count: int) -> list[str]:
    """``count`` spans ended; what each read as when it ended (as text: the garbage collector does not walk it)."""
    seen: list[str] = []

    class Snapshot(SimpleSpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            seen.append(repr(_view(span)))

    provider.add_span_processor(Snapshot(InMemorySpanExporter()))
    tracer = provider.get_tracer("held")
    for i in range(count):
        with tracer.start_as_current_span(f"call {i}", attributes={"i": i, "tool": "lookup", "ok": True}):
            pass
    return seen


@pytest.mark.parametrize("pack_after", [None, 100])
def test_spans_waiting_for_a_collector_that_is_down_cost_the_collector_nothing(pack_after: int | None) -> None:
    held = _Held()
    ours = BatchProcessor(held, name="pack-test", max_batch=100, max_delay=0.01, pack_after=pack_after)
    provider = TracerProvider()
    provider.add_span_processor(ours)
    try:
        _record(provider, 150)  # the first batch is taken and held: the exporter is stuck
        assert held.entered.wait(10)
        gc.collect()
        before = len(gc.get_objects())
        seen = _record(provider, 3000)
        for _ in range(3):
            gc.collect()
        grown = (len(gc.get_objects()) - before) / 3000
        if pack_after is None:
            assert grown > 3  # the span, its context, its flags, its attribute view: walked by each collection
        else:
            assert grown < 0.2  # packed: a few hundred stay as they are (up to pack_after), the rest cost nothing
        held.release.set()
        assert ours.force_flush(30_000)
        assert held.views[150:] == seen  # every span, in order, as the application ended it
        stats = ours.stats()
        assert stats.exported == 3150 and stats.failed == 0 and stats.dropped == 0
    finally:
        held.release.set()
        provider.shutdown()


def test_a_span_that_cannot_be_rebuilt_is_counted_as_failed_and_the_export_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    held = _Held()
    ours = BatchProcessor(held, name="pack-test", max_batch=10, max_delay=60, pack_after=10)  # full batches only
    provider = TracerProvider(span_limits=SpanLimits())
    provider.add_span_processor(ours)
    try:
        _record(provider, 10)
        assert held.entered.wait(10)
        _record(provider, 20)  # 10 wait as they are, 10 packed
        assert any(isinstance(item, tuple) for item in ours._queue)

        def broken(packed: tuple[Any, ...]) -> ReadableSpan:
            raise RuntimeError("cannot rebuild")

        monkeypatch.setattr(ours._packer, "unpack", broken)
        held.release.set()
        assert ours.force_flush(30_000)
        stats = ours.stats()
        assert stats.exported == 20 and stats.failed == 10  # the batch with a packed span, counted; nothing hangs
        assert ours._worker.is_alive()
    finally:
        held.release.set()
        provider.shutdown()
