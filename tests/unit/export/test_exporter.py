from __future__ import annotations

import base64
import logging
from pathlib import Path
from typing import Any

import orjson
import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel._internal.buffer import PayloadBuffer
from chronicle_otel.export._batch import BatchProcessor
from chronicle_otel.otlp import export_request


def _hex_ids_to_base64(node: Any) -> Any:
    """OTLP/JSON uses hex ids; protobuf's JSON mapping wants base64 for bytes fields."""
    if isinstance(node, list):
        return [_hex_ids_to_base64(x) for x in node]
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str):
                out[k] = base64.b64encode(bytes.fromhex(v)).decode()
            else:
                out[k] = _hex_ids_to_base64(v)
        return out
    return node


def test_otlp_json_is_what_the_sdk_encodes_as_protobuf() -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "svc", "deploy": 3}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("scope.a", "1.2")
    with tracer.start_as_current_span("root", kind=SpanKind.SERVER, attributes={"i": 2**62 + 1, "f": 0.1}) as root:
        root.add_event("evt", {"n": 3, "ok": False, "list": [1, 2, 3], "s": ["a", "é"]})
        with tracer.start_as_current_span(
            "child", kind=SpanKind.CLIENT, links=[Link(root.get_span_context(), {"l": 1})]
        ) as c:
            c.set_attribute("text", "a\x00b😀\n")
            c.set_attribute("bools", [True, False])
            c.set_status(Status(StatusCode.ERROR, "tool failed: boom"))
    other = provider.get_tracer("scope.b").start_span("lonely", attributes={"nan": float("nan")})
    other.set_status(Status(StatusCode.OK))
    other.end()
    spans = memory.get_finished_spans()

    ours = ExportTraceServiceRequest()
    json_format.ParseDict(_hex_ids_to_base64(orjson.loads(orjson.dumps(export_request(spans)))), ours)
    sdk = encode_spans(spans)
    assert _sorted(ours) == _sorted(sdk)


def _sorted(req: ExportTraceServiceRequest) -> list[bytes]:
    """Compare span by span (grouping order of resources/scopes is free)."""
    out = []
    for rs in req.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                out.append(
                    rs.resource.SerializeToString(deterministic=True)
                    + ss.scope.SerializeToString(deterministic=True)
                    + span.SerializeToString(deterministic=True)
                )
    return sorted(out)


def test_otlp_json_shape_matches_the_collector_file_exporter() -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("t").start_as_current_span("root", attributes={"n": 5}):
        pass
    doc = export_request(memory.get_finished_spans())
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert len(span["traceId"]) == 32 and span["traceId"] == span["traceId"].lower()
    assert len(span["spanId"]) == 16
    assert "parentSpanId" not in span
    assert isinstance(span["startTimeUnixNano"], str) and isinstance(span["endTimeUnixNano"], str)
    assert span["kind"] == 1 and span["flags"] == 0x100 and span["status"] == {}
    assert span["attributes"] == [{"key": "n", "value": {"intValue": "5"}}]


def test_batch_processor_reaches_the_store_after_flush(tmp_path: Path) -> None:
    provider = TracerProvider()
    config = chronicle.configure(tracer_provider=provider, store=tmp_path)
    assert isinstance(config.processors[0], BatchProcessor)

    @chronicle.boundary(kind="agent", name="run")
    def run(i: int) -> int:
        return i

    for i in range(50):
        run(i)
    assert config.force_flush()
    assert len(LocalStoreOf(config).list_traces()) == 50


def LocalStoreOf(config: chronicle.ChronicleConfig) -> chronicle.LocalStore:
    assert config.store is not None
    return config.store


def test_forward_to_another_exporter(tmp_path: Path) -> None:
    forward = InMemorySpanExporter()
    exporter = chronicle.ChronicleExporter(tmp_path, forward_to=forward, keep="all")
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("x"):
        pass
    assert [s.name for s in forward.get_finished_spans()] == ["x"]
    assert len(exporter.store.list_traces()) == 1
    exporter.shutdown()
    exporter.shutdown()  # idempotent


def test_export_after_shutdown_fails_with_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    exporter = chronicle.ChronicleExporter(tmp_path)
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("t").start_as_current_span("x"):
        pass
    exporter.shutdown()
    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        assert exporter.export(memory.get_finished_spans()) is SpanExportResult.FAILURE
        assert exporter.export(memory.get_finished_spans()) is SpanExportResult.FAILURE
    assert len([r for r in caplog.records if "after shutdown" in r.getMessage()]) == 1


def test_a_failing_forward_exporter_is_contained(tmp_path: Path, swallow_internal_errors: None) -> None:
    class Broken(InMemorySpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            raise ConnectionError("collector is down")

    exporter = chronicle.ChronicleExporter(tmp_path, forward_to=Broken(), keep="all")
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("t").start_as_current_span("x"):
        pass
    assert exporter.export(memory.get_finished_spans()) is SpanExportResult.FAILURE
    assert len(exporter.store.list_traces()) == 1  # the local store still got it
    exporter.shutdown()


def test_payload_buffer_drops_oldest_when_full(caplog: pytest.LogCaptureFixture) -> None:
    buffer = PayloadBuffer(max_bytes=100)
    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        buffer.put(1, [("sha256:a", b"x" * 60)])
        buffer.put(2, [("sha256:b", b"y" * 60)])
        buffer.put(3, [("sha256:c", b"z" * 30)])
    assert buffer.take(1) == []
    assert buffer.take(2) == [("sha256:b", b"y" * 60)]
    assert buffer.take(3) == [("sha256:c", b"z" * 30)]
    assert buffer.size == 0 and buffer.dropped == 1
    assert len([r for r in caplog.records if "payload buffer is full" in r.getMessage()]) == 1


def test_truncated_payload_lost_from_the_buffer_keeps_hash_on_the_span(tmp_path: Path) -> None:
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    config = chronicle.configure(
        tracer_provider=provider,
        store=chronicle.StoreOptions(path=tmp_path, processor="simple", buffer_bytes=10),
        capture=chronicle.CaptureOptions(max_attribute_length=64),
    )

    @chronicle.boundary(name="big")
    def big(text: str) -> None:
        pass

    big("q" * 1000)
    attrs = memory.get_finished_spans()[0].attributes or {}
    assert attrs[sc.INPUT_TRUNCATED] is True and attrs[sc.INPUT_HASH].startswith("sha256:")
    assert LocalStoreOf(config).get_payload(attrs[sc.INPUT_HASH]) is None
