"""Boundaries exported over OTLP to a real collector (rotel) while the local store records the same spans."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest
from google.protobuf import json_format
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from chronicle_otel import semconv as sc
from chronicle_otel.store import LocalStore
from tests.integration.conftest import REPO, OtlpSink, Rotel

pytestmark = pytest.mark.integration

AGENT = textwrap.dedent(
    """
    import asyncio, sys
    import chronicle_otel as chronicle

    chronicle.configure(service_name="stock-agent", session={"build_id": "2026.11.29+g3e1a7c4"},
                        store=sys.argv[1])

    @chronicle.boundary(kind="llm", name="plan")
    def plan(request, *, model="gpt-4.1-mini", temperature=0.7):
        return {"symbol": "MSFT", "side": "sell", "quantity": 1000, "notes": "n" * int(sys.argv[2])}

    @chronicle.boundary(kind="tool", name="place_order")
    async def place_order(order):
        return {"filled": order["quantity"]}

    @chronicle.boundary(kind="guardrail", name="check")
    def check(order):
        raise ValueError("quantity too large")

    @chronicle.boundary(kind="agent", name="run_agent")
    def run_agent(request):
        order = plan(request)
        try:
            check(order)
        except ValueError:
            pass
        return asyncio.run(place_order(order))

    with chronicle.session(user_id="u-17", prompt_version="v12"):
        run_agent("Sell $1,000 of MSFT")
        run_agent("Buy $500 of AAPL")
    """
)


def _to_span(otlp_json: dict[str, Any]) -> Span:
    doc = dict(otlp_json)
    for key in ("traceId", "spanId", "parentSpanId"):
        if key in doc:
            doc[key] = base64.b64encode(bytes.fromhex(doc[key])).decode()
    for link in doc.get("links", []):
        for key in ("traceId", "spanId"):
            link[key] = base64.b64encode(bytes.fromhex(link[key])).decode()
    span = Span()
    json_format.ParseDict(doc, span)
    return span


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_collector_and_local_store_receive_the_same_spans(
    rotel: Rotel, otlp_sink: OtlpSink, tmp_path: Path, protocol: str
) -> None:
    payload_size = 1024 * 1024
    endpoint = f"http://127.0.0.1:{rotel.http_port if protocol != 'grpc' else rotel.grpc_port}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CHRONICLE_"))},
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
    }
    store_dir = tmp_path / ".chronicle"
    subprocess.run(
        [sys.executable, "-c", AGENT, str(store_dir), str(payload_size)], cwd=REPO, env=env, check=True, timeout=120
    )

    store = LocalStore(store_dir)
    traces = store.list_traces()
    assert len(traces) == 2
    local = {}
    for t in traces:
        assert t.root_boundary == "run_agent" and t.span_count == 4
        for span_json in store.read_spans(t.trace_id):
            span = _to_span(span_json)
            local[span.span_id] = span

    received = otlp_sink.wait_for(len(local))
    remote = {span.span_id: span for _, _, span in received}
    assert set(remote) == set(local)
    for span_id, span in local.items():
        assert remote[span_id] == span, f"span {span.name} differs between the collector and the local store"

    # what went over the wire is the chronicle contract, with the payload cut on the span and whole in the store
    resources = {res.SerializeToString() for res, _, _ in received}
    assert len(resources) == 1
    plan = next(s for s in remote.values() if s.name == "plan")
    attrs = {kv.key: kv.value for kv in plan.attributes}
    assert attrs[sc.BOUNDARY_KIND].string_value == "llm"
    assert attrs[sc.SESSION_PREFIX + "build_id"].string_value == "2026.11.29+g3e1a7c4"
    assert attrs[sc.SESSION_PREFIX + "user_id"].string_value == "u-17"
    assert attrs[sc.OUTPUT_TRUNCATED].bool_value is True
    assert len(attrs[sc.OUTPUT].string_value) == 8192
    whole = store.get_payload(attrs[sc.OUTPUT_HASH].string_value)
    assert whole is not None and orjson.loads(whole)["notes"] == "n" * payload_size
    check = next(s for s in remote.values() if s.name == "check")
    assert check.status.code == check.status.STATUS_CODE_ERROR
    assert [e.name for e in check.events] == ["exception"]
