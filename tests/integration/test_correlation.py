"""Agent boundaries inside service traces: a tool boundary's HTTP call carries the traceparent to a real service."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.sdk.trace import TracerProvider

import chronicle_otel as chronicle
from tests.integration.conftest import REPO, _wait_http, stop_pid
from tests.ports import free_port

pytestmark = pytest.mark.integration


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """uvicorn serving the instrumented quote service on 127.0.0.1, recording into a store; stopped by PID."""
    store = tmp_path / ".chronicle"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CHRONICLE_"))}
    env["CHRONICLE_HOME"] = str(store)
    log = tmp_path / "uvicorn.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "tests.integration.quote_service:app",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_http(f"{url}/count", proc, log, timeout=30)
        yield url, store
    finally:
        stop_pid(proc.pid)
        proc.wait(timeout=30)


def _count(url: str) -> int:
    with urllib.request.urlopen(f"{url}/count", timeout=5) as resp:
        return int(json.loads(resp.read())["quote"])


def test_tool_boundary_http_call_joins_the_service_trace_and_replay_makes_no_call(
    service: tuple[str, Path],
) -> None:
    url, store = service
    provider = TracerProvider()
    config = chronicle.configure(
        service_name="agent", tracer_provider=provider, store=chronicle.StoreOptions(path=store, processor="simple")
    )
    client = httpx.Client()
    HTTPXClientInstrumentor().instrument_client(client, tracer_provider=provider)

    @chronicle.boundary(kind="tool", name="corr.get_quote")
    def get_quote(symbol: str) -> dict[str, str]:
        return client.get(f"{url}/quote/{symbol}").json()

    @chronicle.boundary(kind="agent", name="corr.agent")
    def agent(symbol: str) -> str:
        return get_quote(symbol)["price"]

    tracer = provider.get_tracer("web")
    with tracer.start_as_current_span("POST /chat"):  # the service span the agent runs in
        assert agent("MSFT") == "190.42"
    config.force_flush()
    assert _count(url) == 1

    trace_id = next(t.trace_id for t in chronicle.LocalStore(store).list_traces() if t.root_name == "POST /chat")
    trace = chronicle.load_trace(store, trace_id)
    by_id = {s.span_id: s for s in trace.spans}
    server = [s for s in trace.spans if s.kind == 2]  # the quote service's SERVER span
    assert len(server) == 1 and server[0].resource.get("service.name") == "quote-service"
    tool = trace.find("corr.get_quote")[0]
    chain = []
    cur = server[0]
    while cur.parent_span_id is not None:
        cur = by_id[cur.parent_span_id]
        chain.append(cur.name)
    assert chain[-1] == "POST /chat" and "corr.get_quote" in chain and "corr.agent" in chain
    assert chain.index("corr.get_quote") < chain.index("corr.agent")  # server under the tool, tool under the agent
    assert trace.root is not None and trace.root.name == "corr.agent" and tool.parent is trace.root

    with chronicle.replay(trace, stub={"corr.get_quote"}) as run:
        assert run.rerun() == "190.42"
    assert run.report.ok, run.report
    assert _count(url) == 1  # the stubbed tool made no HTTP call
    client.close()
