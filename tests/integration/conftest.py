"""Real services for integration tests, started on 127.0.0.1 and stopped by PID.

The OTLP collector is rotel (a Rust OpenTelemetry collector shipped in the ``rotel`` PyPI wheel;
``make install-services`` installs it into ``.venv-rotel`` and ``make test`` passes its path in
``CHRONICLE_TEST_ROTEL``). Locally a missing binary skips these tests with a loud reason; under
``CI=true`` it is a failure.
"""

from __future__ import annotations

import gzip
import os
import signal
import socket
import subprocess
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

REPO = Path(__file__).resolve().parents[2]
# Read at import: the autouse clean_environ fixture removes CHRONICLE_* variables from each test.
ROTEL_FROM_ENV = os.environ.get("CHRONICLE_TEST_ROTEL")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _service_missing(what: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{what} (under CI=true a missing service is a failure; .ci/run installs it)")
    pytest.skip(f"SKIPPED LOUDLY: {what}; run `make test` to install and start it")


def find_rotel() -> Path | None:
    if ROTEL_FROM_ENV:
        return Path(ROTEL_FROM_ENV)
    found = sorted((REPO / ".venv-rotel").glob("lib/python*/site-packages/rotel/rotel-agent"))
    return found[0] if found else None


@dataclass
class OtlpSink:
    """An OTLP/HTTP protobuf receiver: the backend behind the collector, recording what arrives."""

    port: int
    requests: list[ExportTraceServiceRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def spans(self) -> list[tuple[object, object, object]]:
        """(resource, scope, span) for every span received so far."""
        with self.lock:
            return [
                (rs.resource, ss.scope, span)
                for req in self.requests
                for rs in req.resource_spans
                for ss in rs.scope_spans
                for span in ss.spans
            ]

    def wait_for(self, count: int, timeout: float = 20.0) -> list[tuple[object, object, object]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            spans = self.spans()
            if len(spans) >= count:
                return spans
            time.sleep(0.05)
        raise AssertionError(f"the collector forwarded {len(self.spans())} spans within {timeout}s, expected {count}")


@pytest.fixture
def otlp_sink() -> Iterator[OtlpSink]:
    sink = OtlpSink(port=0)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            encoding = (self.headers.get("Content-Encoding") or "").lower()
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            with sink.lock:
                sink.requests.append(request)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    sink.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield sink
    server.shutdown()
    server.server_close()


@dataclass
class Rotel:
    pid: int
    grpc_port: int
    http_port: int
    log: Path


@pytest.fixture
def rotel(otlp_sink: OtlpSink, tmp_path: Path) -> Iterator[Rotel]:
    """The rotel OTLP collector on 127.0.0.1, forwarding OTLP/HTTP to ``otlp_sink``; stopped by PID."""
    binary = find_rotel()
    if binary is None or not binary.exists():
        _service_missing(f"rotel collector binary not found (CHRONICLE_TEST_ROTEL={ROTEL_FROM_ENV})")
    assert binary is not None
    grpc_port, http_port = free_port(), free_port()
    pid_file, log_file = tmp_path / "rotel.pid", tmp_path / "rotel.log"
    subprocess.run(
        [
            str(binary),
            "start",
            "--daemon",
            "--pid-file",
            str(pid_file),
            "--log-file",
            str(log_file),
            "--otlp-grpc-endpoint",
            f"127.0.0.1:{grpc_port}",
            "--otlp-http-endpoint",
            f"127.0.0.1:{http_port}",
            "--otlp-grpc-max-recv-msg-size-mib",
            "64",
            "--exporter",
            "otlp",
            "--otlp-exporter-protocol",
            "http",
            "--otlp-exporter-endpoint",
            f"http://127.0.0.1:{otlp_sink.port}",
            "--batch-timeout",
            "50ms",
        ],
        check=True,
        timeout=30,
    )
    pid = _wait_ready(pid_file, log_file, http_port)
    try:
        yield Rotel(pid, grpc_port, http_port, log_file)
    finally:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.05)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
        pid_file.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_ready(pid_file: Path, log_file: Path, http_port: int, timeout: float = 30.0) -> int:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pid_file.exists() and pid_file.read_text().strip():
            pid = int(pid_file.read_text().strip())
            try:
                req = urllib.request.Request(
                    f"http://127.0.0.1:{http_port}/v1/traces",
                    data=b'{"resourceSpans":[]}',
                    headers={"Content-Type": "application/json"},
                )
                with urllib.request.urlopen(req, timeout=2) as resp:
                    if resp.status == 200:
                        return pid
            except OSError:
                pass
        time.sleep(0.05)
    log = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else "(no log)"
    raise RuntimeError(f"rotel did not become ready within {timeout}s; log tail:\n{log}")
