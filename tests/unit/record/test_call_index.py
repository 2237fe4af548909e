from __future__ import annotations

import gc

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel.record import _call_index


@chronicle.boundary(kind="tool", name="idx.step")
def step(n: int) -> int:
    return n


def test_top_level_indexes_survive_thousands_of_concurrent_requests() -> None:
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    chronicle.configure(tracer_provider=provider, store=False)
    tracer = provider.get_tracer("service")
    requests = [tracer.start_span(f"GET /orders/{i}") for i in range(5000)]  # all still running
    for i, request in enumerate(requests):
        with trace.use_span(request, end_on_exit=False):
            step(i)
    with trace.use_span(requests[0], end_on_exit=False):
        step(-1)  # the first request's second top-level boundary
    for request in requests:
        request.end()
    first_trace = requests[0].get_span_context().trace_id
    indexes = [
        s.attributes[sc.CALL_INDEX]
        for s in memory.get_finished_spans()
        if s.name == "idx.step" and s.context.trace_id == first_trace
    ]
    assert indexes == [0, 1]


def test_frames_of_finished_requests_are_released() -> None:
    provider = TracerProvider()
    chronicle.configure(tracer_provider=provider, store=False)
    tracer = provider.get_tracer("service")
    for i in range(100):
        with tracer.start_as_current_span(f"request {i}"):
            step(i)
    gc.collect()
    assert len(_call_index._frames_by_span) == 0
    assert len(_call_index._frames_by_trace) == 0
