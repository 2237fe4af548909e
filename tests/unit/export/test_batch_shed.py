"""An ended span waiting in chronicle's batch queue sheds its empty event and link lists and the lock around its
attributes, and reads exactly as before: for chronicle's exporters and for every other processor of the provider."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

import orjson
import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanContext, Status, StatusCode, TraceFlags

from chronicle_otel._internal.compat import shed_empty_containers
from chronicle_otel.export._batch import BatchProcessor
from chronicle_otel.otlp import export_line, export_request


def _view(span: ReadableSpan) -> dict[str, Any]:
    """Everything a processor or exporter can read of a span through its public properties."""
    return {
        "json": span.to_json(),
        "otlp": orjson.dumps(export_request([span])),
        "line": export_line([span]),
        "attributes": dict(span.attributes or {}),
        "events": [(e.name, e.timestamp, dict(e.attributes or {})) for e in span.events],
        "links": [(link.context, dict(link.attributes or {})) for link in span.links],
        "dropped": (span.dropped_attributes, span.dropped_events, span.dropped_links),
    }


def _spans() -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=3, max_events=1, max_links=1))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("shed")
    other = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1))
    with tracer.start_as_current_span("plain", attributes={"a": "x", "n": 3, "seq": ("p", "q")}) as span:
        span.set_status(Status(StatusCode.ERROR, "boom"))
    with tracer.start_as_current_span("no attributes"):
        pass
    with tracer.start_as_current_span("too many attributes", attributes={f"k{i}": i for i in range(5)}):
        pass
    with tracer.start_as_current_span("event") as span:
        span.add_event("e", {"x": 1})
    with tracer.start_as_current_span("dropped event") as span:
        span.add_event("first")
        span.add_event("second")
    with tracer.start_as_current_span("link", links=[Link(other, {"l": 1})]):
        pass
    with tracer.start_as_current_span("dropped link", links=[Link(other), Link(other)]):
        pass
    return list(memory.get_finished_spans())


def test_a_shed_span_reads_as_before() -> None:
    spans = _spans()
    assert len(spans) == 7
    for span in spans:
        before = _view(span)
        shed_empty_containers(span)
        assert _view(span) == before, span.name
    by_name = {span.name: span for span in spans}
    assert by_name["plain"]._events == () and by_name["plain"]._links == ()
    assert type(by_name["plain"]._attributes) is MappingProxyType
    with pytest.raises(TypeError):  # read-only, as the SDK's attributes of an ended span
        by_name["plain"]._attributes["a"] = "changed"  # type: ignore[index]
    assert by_name["plain"].attributes["a"] == "x"
    assert type(by_name["too many attributes"]._attributes) is not MappingProxyType  # its dropped count stays
    assert by_name["too many attributes"].dropped_attributes == 2
    assert len(by_name["event"]._events) == 1 and by_name["dropped event"].dropped_events == 1
    assert by_name["dropped link"].dropped_links == 1


class _Views(SpanExporter):
    def __init__(self) -> None:
        self.views: list[dict[str, Any]] = []
        self.done = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.views.extend(_view(span) for span in spans)
        self.done.set()
        return SpanExportResult.SUCCESS


@pytest.mark.parametrize("ours_first", [True, False])
def test_every_processor_of_the_provider_reads_the_same_span(ours_first: bool) -> None:
    """The other processor sees the very span object chronicle's queue holds, before or after it is shed."""
    views = _Views()
    ours = BatchProcessor(views, name="shed-test", max_delay=60)
    before: list[dict[str, Any]] = []
    seen: list[ReadableSpan] = []

    class Snapshot(SimpleSpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            seen.append(span)
            before.append(_view(span))

    provider = TracerProvider()
    processors = [ours, Snapshot(InMemorySpanExporter())]
    for processor in processors if ours_first else reversed(processors):
        provider.add_span_processor(processor)
    tracer = provider.get_tracer("shed")
    inner_links = [Link(SpanContext(1, 2, is_remote=False))]
    with (
        tracer.start_as_current_span("outer", attributes={"a": "x"}),
        tracer.start_as_current_span("inner", links=inner_links),
    ):
        pass
    assert ours.force_flush(10_000)
    provider.shutdown()
    assert views.views == before
    assert [_view(span) for span in seen] == before
    assert seen[1]._events == ()  # shed in place: one object for every processor
