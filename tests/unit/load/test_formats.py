"""Every supported trace format, written in its exact documented shape, loads to the same boundaries."""

from __future__ import annotations

import base64
import gzip
import json
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from opentelemetry.sdk.trace import ReadableSpan

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from tests.conftest import Recorder
from tests.json_backend import JsonBackend

REQUEST = "Sell $1,000 of MSFT at market, then confirm. " * 12  # ~550 characters: whole on the span
BIG = "naïve résumé 😀 " * 2000  # ~34 KB, multi-byte characters: cut on the span, whole in the store


@chronicle.boundary(kind="llm", name="fmt.plan")
def plan(request: str) -> dict[str, Any]:
    return {"qty": 1000, "notes": BIG}


@chronicle.boundary(kind="tool", name="fmt.order")
def order(qty: int) -> str:
    if qty > 100:
        raise ValueError("too many")
    return "ok"


@chronicle.boundary(kind="agent", name="fmt.run")
def run(request: str) -> str:
    p = plan(request)
    try:
        return order(p["qty"])
    except ValueError:
        return "rejected"


@pytest.fixture
def recorded(recorder: Recorder) -> tuple[Recorder, list[ReadableSpan], chronicle.Trace]:
    run(REQUEST)
    recorder.config.force_flush()
    spans = recorder.spans()
    return recorder, spans, chronicle.load_trace(recorder.store, "latest")


def check(trace: chronicle.Trace, expected: chronicle.Trace, *, times_us: bool = False) -> None:
    assert trace.trace_id == expected.trace_id
    assert [b.call_key for b in trace.boundaries] == [b.call_key for b in expected.boundaries]
    for got, want in zip(trace.boundaries, expected.boundaries, strict=True):
        assert got.kind == want.kind and got.span_id == want.span_id and got.status == want.status
        for field in ("raw_input", "raw_output", "raw_error"):
            g, w = getattr(got, field), getattr(want, field)
            assert (g is None) == (w is None), field
            if g is not None:
                assert g.complete and g.text == w.text, (got.name, field, g.status)
        if times_us:
            assert abs(got.start_ns - want.start_ns) < 1000
        else:
            assert got.start_ns == want.start_ns
    assert trace.find("fmt.plan")[0].output == {"qty": 1000, "notes": BIG}
    assert isinstance(trace.find("fmt.order")[0].error, ValueError)


def frame(message: bytes) -> bytes:
    return struct.pack(">I", len(message)) + message


# ------------------------------------------------------------------ the Collector file exporter


def test_collector_json_lines(recorded: Any, tmp_path: Path) -> None:
    rec, spans, expected = recorded
    path = tmp_path / "traces.json"
    path.write_bytes(b"".join(orjson.dumps(MessageToDict(encode_spans([s]))) + b"\n" for s in spans))
    check(chronicle.load_trace(path, store=rec.store), expected)


@pytest.mark.parametrize("compress", [False, True])
def test_collector_proto_framing(recorded: Any, tmp_path: Path, compress: bool) -> None:
    rec, spans, expected = recorded
    messages = [encode_spans(spans[:1]).SerializeToString(), encode_spans(spans[1:]).SerializeToString()]
    if compress:
        messages = [zstandard.ZstdCompressor().compress(m) for m in messages]
    path = tmp_path / "traces.pb"
    path.write_bytes(b"".join(frame(m) for m in messages))
    check(chronicle.load_trace(path, store=rec.store), expected)


def test_collector_json_with_zstd_framing(recorded: Any, tmp_path: Path) -> None:
    rec, spans, expected = recorded
    messages = [zstandard.ZstdCompressor().compress(orjson.dumps(MessageToDict(encode_spans([s])))) for s in spans]
    path = tmp_path / "traces.json.zst"
    path.write_bytes(b"".join(frame(m) for m in messages))
    check(chronicle.load_trace(path, store=rec.store), expected)


def test_plain_zstd_stream_and_gzip(recorded: Any, tmp_path: Path) -> None:
    rec, _, expected = recorded
    lines = b"\n".join(rec.store.iter_lines(expected.trace_id)) + b"\n"
    (tmp_path / "t.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines))
    check(chronicle.load_trace(tmp_path / "t.jsonl.zst", store=rec.store), expected)
    (tmp_path / "t.jsonl.gz").write_bytes(gzip.compress(lines))
    check(chronicle.load_trace(tmp_path / "t.jsonl.gz", store=rec.store), expected)


def test_corrupt_framing_names_the_message(recorded: Any, tmp_path: Path) -> None:
    _, spans, _ = recorded
    good = frame(encode_spans(spans).SerializeToString())
    path = tmp_path / "cut.pb"
    path.write_bytes(good + good[: len(good) // 2])
    with pytest.raises(chronicle.TraceLoadError, match=r"message 2 at byte .* the file is truncated"):
        chronicle.load_trace(path)
    (tmp_path / "junk.bin").write_bytes(b"\x00\x00\x00\x05\xff\xff\xff\xff\xff")
    with pytest.raises(chronicle.TraceLoadError, match=r"unrecognised trace format.*supported:.*Zipkin"):
        chronicle.load_trace(tmp_path / "junk.bin")
    (tmp_path / "noise.bin").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    with pytest.raises(chronicle.TraceLoadError, match="unrecognised trace format"):
        chronicle.load_trace(tmp_path / "noise.bin")


# ------------------------------------------------------------------ Tempo, Jaeger, Zipkin, Phoenix


def test_tempo_v1_and_v2(recorded: Any, tmp_path: Path) -> None:
    rec, spans, expected = recorded
    otlp = MessageToDict(encode_spans(spans))  # Tempo's JSON: protobuf mapping, base64 ids, enum names
    (tmp_path / "v1.json").write_text(json.dumps({"batches": otlp["resourceSpans"]}))
    check(chronicle.load_trace(tmp_path / "v1.json", store=rec.store), expected)
    data = TracesData()
    data.resource_spans.extend(encode_spans(spans).resource_spans)
    (tmp_path / "v2.json").write_text(json.dumps({"trace": MessageToDict(data), "status": "complete"}))
    check(chronicle.load_trace(tmp_path / "v2.json", store=rec.store), expected)
    assert "SPAN_KIND_INTERNAL" in (tmp_path / "v2.json").read_text()


def zipkin_v2(spans: list[ReadableSpan]) -> str:
    """Spans as OpenTelemetry's Zipkin v2 JSON exporter writes them (imported here, not when the module is
    collected: it imports requests, a tenth of a second)."""
    from opentelemetry.exporter.zipkin.json.v2 import JsonV2Encoder
    from opentelemetry.exporter.zipkin.node_endpoint import NodeEndpoint

    return JsonV2Encoder().serialize(spans, NodeEndpoint())


def jaeger_trace(spans: list[ReadableSpan], *, short_ids: bool = False) -> dict[str, Any]:
    """Spans in Jaeger's v1 JSON model, as the OTLP -> Jaeger translation writes them."""

    def tag(key: str, value: Any) -> dict[str, Any]:
        if isinstance(value, bool):
            return {"key": key, "type": "bool", "value": value}
        if isinstance(value, int):
            return {"key": key, "type": "int64", "value": value if value < 2**53 else str(value)}
        if isinstance(value, float):
            return {"key": key, "type": "float64", "value": value}
        return {"key": key, "type": "string", "value": value}

    def tid(span: ReadableSpan) -> str:
        return f"{span.context.trace_id:032x}"[16:] if short_ids else f"{span.context.trace_id:032x}"

    out = []
    for s in spans:
        tags = [tag(k, v) for k, v in (s.attributes or {}).items()]
        tags += [tag("span.kind", "internal"), tag("otel.scope.name", s.instrumentation_scope.name)]
        if s.status.status_code.name == "ERROR":
            tags += [
                tag("otel.status_code", "ERROR"),
                tag("error", True),
                tag("otel.status_description", s.status.description or ""),
            ]
        out.append(
            {
                "traceID": tid(s),
                "spanID": f"{s.context.span_id:016x}",
                "flags": 1,
                "operationName": s.name,
                "references": (
                    [{"refType": "CHILD_OF", "traceID": tid(s), "spanID": f"{s.parent.span_id:016x}"}]
                    if s.parent
                    else []
                ),
                "startTime": s.start_time // 1000,
                "duration": (s.end_time - s.start_time) // 1000,
                "tags": tags,
                "logs": [
                    {
                        "timestamp": e.timestamp // 1000,
                        "fields": [tag("event", e.name)] + [tag(k, v) for k, v in e.attributes.items()],
                    }
                    for e in s.events
                ],
                "processID": "p1",
                "warnings": None,
            }
        )
    return {
        "traceID": tid(spans[0]),
        "spans": out,
        "processes": {"p1": {"serviceName": "svc", "tags": []}},
        "warnings": None,
    }


def test_jaeger_v1_json(recorded: Any, tmp_path: Path) -> None:
    rec, spans, expected = recorded
    (tmp_path / "jaeger.json").write_text(
        json.dumps({"data": [jaeger_trace(spans)], "total": 0, "limit": 0, "errors": None})
    )
    trace = chronicle.load_trace(tmp_path / "jaeger.json", store=rec.store)
    check(trace, expected, times_us=True)
    order_span = next(s for s in trace.spans if s.name == "fmt.order")
    assert order_span.status == "ERROR" and order_span.events[0]["name"] == "exception"
    assert trace.spans[0].resource == {"service.name": "svc"} and trace.spans[0].kind == 1
    # the UI's download of one trace object, with 64-bit trace ids
    (tmp_path / "ui.json").write_text(json.dumps(jaeger_trace(spans, short_ids=True)))
    short = chronicle.load_trace(tmp_path / "ui.json", store=rec.store)
    assert short.trace_id == "0" * 16 + expected.trace_id[16:]
    assert [b.call_key for b in short.boundaries] == [b.call_key for b in expected.boundaries]
    # asked for by the id the backend shows: its 16 digits
    assert (
        chronicle.load_trace(tmp_path / "ui.json", expected.trace_id[16:], store=rec.store).trace_id == short.trace_id
    )


def test_jaeger_v3_api(recorded: Any, tmp_path: Path) -> None:
    rec, spans, expected = recorded
    (tmp_path / "v3.json").write_text(json.dumps({"result": MessageToDict(encode_spans(spans))}))
    check(chronicle.load_trace(tmp_path / "v3.json", store=rec.store), expected)


def test_zipkin_v2_from_the_real_encoder(recorded: Any, tmp_path: Path) -> None:
    rec, spans, expected = recorded
    body = zipkin_v2(spans)  # tag values cut to 128 characters, all strings
    (tmp_path / "zipkin.json").write_text(body)
    trace = chronicle.load_trace(tmp_path / "zipkin.json", store=rec.store)
    check(trace, expected, times_us=True)
    assert all(b.raw_output is None or b.raw_output.status in ("ok", "rehydrated") for b in trace.boundaries)
    statuses = {
        (b.name, f): getattr(b, f).status
        for b in trace.boundaries
        for f in ("raw_input", "raw_output")
        if getattr(b, f)
    }
    assert statuses[("fmt.plan", "raw_output")] == "rehydrated"  # > 8 KiB: from the payload table
    assert statuses[("fmt.order", "raw_input")] == "ok"  # short enough for Zipkin's 128 characters
    assert statuses[("fmt.run", "raw_input")] == "rehydrated"  # cut by Zipkin: from the store's copy of the span
    assert next(s for s in trace.spans if s.name == "fmt.order").status == "ERROR"


def test_phoenix_rest_spans(recorded: Any, tmp_path: Path) -> None:
    rec, spans, expected = recorded
    import datetime as dt

    def iso(ns: int) -> str:
        return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).isoformat()

    data = [
        {
            "id": f"U3Bhbjo{i}",
            "name": s.name,
            "context": {"trace_id": f"{s.context.trace_id:032x}", "span_id": f"{s.context.span_id:016x}"},
            "span_kind": "UNKNOWN",
            "parent_id": f"{s.parent.span_id:016x}" if s.parent else None,
            "start_time": iso(s.start_time),
            "end_time": iso(s.end_time),
            "status_code": s.status.status_code.name,
            "status_message": s.status.description or "",
            "attributes": dict(s.attributes or {}),
            "events": [
                {"name": e.name, "timestamp": iso(e.timestamp), "attributes": dict(e.attributes)} for e in s.events
            ],
        }
        for i, s in enumerate(spans)
    ]
    (tmp_path / "phoenix.json").write_text(json.dumps({"data": data, "next_cursor": None}))
    check(chronicle.load_trace(tmp_path / "phoenix.json", store=rec.store), expected, times_us=True)


# ------------------------------------------------------------------ backend quirks


def test_collector_transform_that_parsed_json_strings(recorded: Any, tmp_path: Path) -> None:
    rec, _, expected = recorded
    docs = [orjson.loads(line) for line in rec.store.iter_lines(expected.trace_id)]
    for doc in docs:
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    for kv in span["attributes"]:
                        if kv["key"] == sc.INPUT and "stringValue" in kv["value"]:
                            parsed = json.loads(kv["value"]["stringValue"])
                            if isinstance(parsed, dict) and all(isinstance(v, str) for v in parsed.values()):
                                kv["value"] = {
                                    "kvlistValue": {
                                        "values": [{"key": k, "value": {"stringValue": v}} for k, v in parsed.items()]
                                    }
                                }
    (tmp_path / "transformed.jsonl").write_bytes(b"\n".join(orjson.dumps(d) for d in docs) + b"\n")
    trace = chronicle.load_trace(tmp_path / "transformed.jsonl", store=tmp_path / "none")
    run_boundary = trace.find("fmt.run")[0]
    assert run_boundary.raw_input is not None and run_boundary.raw_input.status == "ok"
    assert run_boundary.input == {"request": REQUEST}


@pytest.mark.parametrize("cut", ["chars", "bytes"])
def test_backend_attribute_limit_mid_utf8(recorded: Any, tmp_path: Path, cut: str) -> None:
    rec, spans, expected = recorded
    otlp = MessageToDict(encode_spans(spans))
    for rs in otlp["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for kv in span["attributes"]:
                    value = kv["value"].get("stringValue")
                    if value and len(value) > 300:
                        if cut == "chars":
                            kv["value"]["stringValue"] = value[:301]
                        else:  # a byte limit that splits a multi-byte character, decoded leniently by the backend
                            kv["value"]["stringValue"] = value.encode()[:301].decode("utf-8", "replace")
    (tmp_path / "cut.json").write_text(json.dumps(otlp))
    check(chronicle.load_trace(tmp_path / "cut.json", store=rec.store), expected)
    without = chronicle.load_trace(tmp_path / "cut.json", store=tmp_path / "none")
    plan_b = without.find("fmt.plan")[0]
    assert plan_b.raw_output is not None and plan_b.raw_output.status == "missing"


# ------------------------------------------------------------------ the HTTP sources, against a local server


@pytest.fixture
def backend(recorded: Any) -> Iterator[tuple[str, chronicle.Trace, Recorder]]:
    rec, spans, expected = recorded
    otlp = MessageToDict(encode_spans(spans))
    tid = expected.trace_id
    routes = {
        f"/api/traces/{tid}": {"data": [jaeger_trace(spans)]},
        f"/api/v3/traces/{tid}": {"result": otlp},
        f"/api/v2/traces/{tid}": {"trace": otlp},
        f"/api/v2/trace/{tid}": json.loads(zipkin_v2(spans)),
    }

    def route(path: str) -> tuple[int, Any]:
        body = routes.get(path.split("?")[0])
        return (200, body) if body is not None else (404, {"errors": [{"code": 404, "msg": "trace not found"}]})

    with JsonBackend(route) as server:
        yield f"http://{server.host}", expected, rec


@pytest.mark.parametrize("scheme", ["jaeger", "jaeger-v3", "tempo", "zipkin"])
def test_http_sources(backend: Any, scheme: str) -> None:
    url, expected, rec = backend
    trace = chronicle.load_trace(f"{scheme}+{url}", expected.trace_id, store=rec.store)
    check(trace, expected, times_us=scheme in ("jaeger", "zipkin"))
    with pytest.raises(chronicle.TraceNotFoundError):
        chronicle.load_trace(f"{scheme}+{url}", "f" * 32, store=rec.store)


def test_unknown_scheme_and_unreachable_backend() -> None:
    with pytest.raises(chronicle.TraceLoadError, match=r"no trace source for 'datadog'.*phoenix"):
        chronicle.load_trace("datadog+http://127.0.0.1:1", "a" * 32)
    with pytest.raises(chronicle.TraceLoadError, match="cannot reach the backend"):
        chronicle.load_trace("jaeger+http://127.0.0.1:9", "a" * 32)


def test_registered_source(recorded: Any) -> None:
    from chronicle_otel.load import register_source

    rec, spans, expected = recorded
    doc = MessageToDict(encode_spans(spans))

    class Bucket:
        def __init__(self, url: str) -> None:
            self.url = url

        def spans(self, trace_id: str | None, progress: Any = None) -> Any:
            from chronicle_otel.otlp import spans_of_request

            return spans_of_request(doc, source=self.url)

    first = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert base64.b64decode(first["traceId"]).hex() == expected.trace_id  # protobuf's JSON mapping: base64 ids
    register_source("bucket", Bucket)
    check(chronicle.load_trace("bucket://traces/x", expected.trace_id, store=rec.store), expected)


# ------------------------------------------------------------------ listing a backend's traces (corpus, pull --since)


@pytest.fixture
def searchable(recorded: Any) -> Iterator[tuple[str, chronicle.Trace, Recorder, list[str]]]:
    rec, spans, expected = recorded
    otlp = MessageToDict(encode_spans(spans))
    tid = expected.trace_id
    routes = {
        "/api/traces": {"data": [jaeger_trace(spans)]},  # Jaeger v1 search: whole traces
        f"/api/traces/{tid}": {"data": [jaeger_trace(spans)]},
        "/api/v3/traces": {"result": otlp},
        f"/api/v3/traces/{tid}": {"result": otlp},
        "/api/search": {"traces": [{"traceID": tid.lstrip("0"), "rootServiceName": "svc"}]},
        f"/api/v2/traces/{tid}": {"trace": otlp},
        "/api/v2/traces": [json.loads(zipkin_v2(spans))],
        f"/api/v2/trace/{tid}": json.loads(zipkin_v2(spans)),
    }

    def route(path: str) -> tuple[int, Any]:
        body = routes.get(path.split("?")[0])
        return (200, body) if body is not None else (404, {"errors": [{"code": 404, "msg": "not found"}]})

    with JsonBackend(route) as server:
        yield f"http://{server.host}", expected, rec, server.asked


@pytest.mark.parametrize(
    ("scheme", "query", "search"),
    [
        ("jaeger", "?service=svc", "/api/traces?service=svc&start="),
        ("jaeger-v3", "?service=svc", "/api/v3/traces?query.service_name=svc&query.start_time_min="),
        ("tempo", "", "/api/search?start="),
        ("zipkin", "", "/api/v2/traces?endTs="),
    ],
)
def test_a_backend_lists_the_traces_of_a_window(searchable: Any, scheme: str, query: str, search: str) -> None:
    from chronicle_otel.corpus import Corpus, CorpusFilter
    from chronicle_otel.load import source_for

    url, expected, rec, asked = searchable
    since = time.time_ns() - 3600 * 10**9
    assert source_for(f"{scheme}+{url}{query}").trace_ids(since, limit=5) == [expected.trace_id]
    assert asked[-1].startswith(search) and ("limit=5" in asked[-1] or "num_traces=5" in asked[-1])
    corpus = Corpus(f"{scheme}+{url}{query}", CorpusFilter(since_ns=since), store=rec.store)
    [entry] = corpus.entries()
    assert entry.trace_id == expected.trace_id and entry.root == expected.root.name
    check(corpus.load(entry), expected, times_us=scheme in ("jaeger", "zipkin"))


def test_jaeger_needs_the_service_to_list_traces(searchable: Any) -> None:
    from chronicle_otel.load import source_for

    url, *_ = searchable
    with pytest.raises(chronicle.TraceLoadError, match=r"\?service=NAME"):
        source_for(f"jaeger+{url}").trace_ids(0)
