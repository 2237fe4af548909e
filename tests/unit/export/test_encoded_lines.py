"""Once the store has its compression dictionary, the exporter has each span line encoded soon after it is made
(a few at a time), so the lines of a batch reach the store as frames; both ``keep`` modes, payloads included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel._internal.buffer import PayloadBuffer
from chronicle_otel._internal.digest import payload_digest
from chronicle_otel.store import TraceRecord, _compression
from chronicle_otel.store._compression import MAGIC


def _spans(count: int, start: int) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "web"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("web")
    for i in range(start, start + count):
        attributes: dict[str, Any] = {sc.BOUNDARY_NAME: "agent.run", sc.BOUNDARY_KIND: "agent", "n": i}
        attributes[sc.INPUT] = '{"question": "sell ' + "MSFT " * (i % 7) + '"}'
        with (
            tracer.start_as_current_span("agent", attributes=attributes),
            tracer.start_as_current_span("tool", attributes={"n": i}),
        ):
            pass
    return list(memory.get_finished_spans())


@pytest.mark.parametrize("keep", ["boundaries", "all"])
def test_lines_reach_the_store_encoded_and_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep: Any
) -> None:
    monkeypatch.setattr(_compression, "SAMPLE_LINES", 30)
    monkeypatch.setattr(_compression, "DICT_SIZE", 8 * 1024)
    buffer = PayloadBuffer()
    exporter = chronicle.ChronicleExporter(
        chronicle.LocalStore(tmp_path, durable=False), keep=keep, payload_buffer=buffer
    )
    assert exporter.export(_spans(40, 0)).name == "SUCCESS"  # trains the dictionary
    written: list[list[TraceRecord]] = []
    write_batch = exporter.store.write_batch

    def spy(records: Any, payloads: Any = ()) -> None:
        records = list(records)
        written.append(records)
        write_batch(records, payloads)

    monkeypatch.setattr(exporter.store, "write_batch", spy)
    spans = _spans(37, 100)  # not a multiple of the chunk size
    data = b'{"whole": "payload"}'
    buffer.put(spans[1].context.span_id, [(payload_digest(data), data)])  # type: ignore[union-attr]
    assert exporter.export(spans).name == "SUCCESS"
    [records] = written
    assert len(records) == 37
    assert all(rec.line.startswith(MAGIC) for rec in records)
    assert exporter.store.get_payload(payload_digest(data)) == data
    traces = exporter.store.list_traces()
    assert len(traces) == 77
    for summary in traces:
        names = sorted(span["name"] for span in exporter.store.read_spans(summary.trace_id))
        assert names == ["agent", "tool"]
        assert summary.root_boundary == "agent.run" and summary.span_count == 2
    exporter.shutdown()


def test_without_compression_the_lines_stay_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHRONICLE_STORE_COMPRESS", "false")
    exporter = chronicle.ChronicleExporter(chronicle.LocalStore(tmp_path, durable=False))
    assert exporter.export(_spans(20, 0)).name == "SUCCESS"
    segment = next((tmp_path / "spans").rglob("*.jsonl")).read_bytes()
    assert segment.startswith(b'{"resourceSpans"') and segment.count(b"\n") == 20
    exporter.shutdown()
