"""An OTLP/HTTP protobuf traces endpoint on 127.0.0.1 for tests: it keeps every export request it receives.

Stand-in for the backend behind a collector, or for the collector itself::

    with serve_otlp() as sink:
        exporter = OTLPSpanExporter(endpoint=sink.url)
        ...
        spans = sink.wait_for(3)
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


@dataclass
class OtlpSink:
    """An OTLP/HTTP protobuf receiver: the backend behind the collector, recording what arrives."""

    port: int
    requests: list[ExportTraceServiceRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        """The traces endpoint (``http://127.0.0.1:<port>/v1/traces``)."""
        return f"http://127.0.0.1:{self.port}/v1/traces"

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


@contextmanager
def serve_otlp() -> Iterator[OtlpSink]:
    """Serve an :class:`OtlpSink` on an ephemeral port of 127.0.0.1 until the block ends."""
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
    try:
        yield sink
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
