"""The HTTP trace sources against broken or hostile servers on 127.0.0.1: every failure is bounded and named.

Each server is a raw socket listener whose handler writes exactly the bytes of the scenario (a trickle, an endless
chunked body, garbage instead of a status line…) and records what it received.
"""

from __future__ import annotations

import base64
import gzip
import json
import socket
import threading
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import chronicle_otel as chronicle
from chronicle_otel.errors import LoadLimitError
from chronicle_otel.load import JaegerSource, LoadLimits, PhoenixSource, TempoSource, source_for

pytestmark = pytest.mark.integration

TID = "0af7651916cd43dd8448eb211c80319c"
OTLP = {
    "resourceSpans": [
        {
            "resource": {"attributes": []},
            "scopeSpans": [
                {
                    "scope": {"name": "hostile"},
                    "spans": [
                        {
                            "traceId": TID,
                            "spanId": "b7ad6b7169203331",
                            "name": "root",
                            "kind": 1,
                            "startTimeUnixNano": "1000",
                            "endTimeUnixNano": "2000",
                        }
                    ],
                }
            ],
        }
    ]
}
JAEGER_V3_BODY = json.dumps({"result": OTLP}).encode()
TOKEN = "tok-9f8e7d6c5b4a"  # a credential that must never leave the origin or show in a message


def phoenix_span(span_id: str) -> dict[str, Any]:
    return {
        "name": f"span-{span_id}",
        "context": {"trace_id": TID, "span_id": span_id},
        "parent_id": None,
        "start_time": "2025-01-01T00:00:00+00:00",
        "end_time": "2025-01-01T00:00:01+00:00",
        "status_code": "OK",
        "attributes": {},
    }


# ------------------------------------------------------------------ a raw HTTP listener


Respond = Callable[[socket.socket, str, "RawServer"], None]


class RawServer:
    """A TCP listener on 127.0.0.1; ``respond(conn, path, server)`` writes the answer to each request."""

    def __init__(self, respond: Respond, greeting: bytes | None = None) -> None:
        self.respond = respond
        self.greeting = greeting  # written as soon as a client connects, before reading anything
        self.heads: list[str] = []
        self.disconnected = threading.Event()  # a write failed or a read saw EOF: the client went away
        self.stopping = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port = int(self._listener.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._handle, args=(conn,), daemon=True)
            with self._lock:
                self._threads.append(thread)
            thread.start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            head = b""
            try:
                if self.greeting is not None:
                    conn.sendall(self.greeting)
                    return
                while b"\r\n\r\n" not in head and len(head) < 65536:
                    data = conn.recv(4096)
                    if not data:
                        return
                    head += data
                text = head.decode("latin-1")
                with self._lock:
                    self.heads.append(text)
                self.respond(conn, text.split(" ", 2)[1], self)
            except OSError:
                self.disconnected.set()

    def headers_of(self, index: int) -> dict[str, str]:
        lines = self.heads[index].split("\r\n")[1:]
        return {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines if line)}

    def wait_for_eof(self, conn: socket.socket) -> None:
        """Block until the client closes the connection (or the test ends)."""
        while not self.stopping.is_set():
            try:
                if not conn.recv(65536):
                    self.disconnected.set()
                    return
            except TimeoutError:
                continue

    def close(self) -> None:
        self.stopping.set()
        self._acceptor.join(timeout=5)
        self._listener.close()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout=5)


@pytest.fixture
def serve() -> Iterator[Callable[..., RawServer]]:
    servers: list[RawServer] = []

    def start(respond: Respond, greeting: bytes | None = None) -> RawServer:
        server = RawServer(respond, greeting)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def reply(conn: socket.socket, status: int = 200, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
    fields = {"Content-Type": "application/json", "Content-Length": str(len(body)), **(headers or {})}
    head = f"HTTP/1.1 {status} X\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n"
    conn.sendall(head.encode("latin-1") + body)


def jaeger_v3(server: RawServer, **kwargs: Any) -> JaegerSource:
    return JaegerSource(f"jaeger-v3+{server.url}", **kwargs)


# ------------------------------------------------------------------ time


def test_trickled_body_hits_the_total_deadline(serve: Callable[..., RawServer]) -> None:
    def respond(conn: socket.socket, path: str, server: RawServer) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
        while not server.stopping.wait(0.5):
            conn.sendall(b" ")

    server = serve(respond)
    with pytest.raises(LoadLimitError, match=r"within 2 s.*http_timeout=2.*CHRONICLE_HTTP_TIMEOUT") as caught:
        chronicle.load_trace(jaeger_v3(server, limits=LoadLimits(http_timeout=2)), TID)
    assert caught.value.limit == "http_timeout" and caught.value.value == 2


def test_trickled_headers_hit_the_total_deadline(serve: Callable[..., RawServer]) -> None:
    """Each byte comes well within a per-read timeout: only a deadline on the whole exchange ends it."""

    def respond(conn: socket.socket, path: str, server: RawServer) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        while not server.stopping.wait(0.5):
            conn.sendall(b"a")

    server = serve(respond)
    with pytest.raises(LoadLimitError) as caught:
        chronicle.load_trace(jaeger_v3(server, limits=LoadLimits(http_timeout=1.5)), TID)
    assert caught.value.limit == "http_timeout"
    assert server.disconnected.wait(5)


# ------------------------------------------------------------------ size


def test_endless_chunked_body_is_cut_at_the_limit(serve: Callable[..., RawServer]) -> None:
    chunk = b"%x\r\n%s\r\n" % (65536, b"[" * 65536)

    def respond(conn: socket.socket, path: str, server: RawServer) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        while not server.stopping.is_set():
            conn.sendall(chunk)

    server = serve(respond)
    limits = LoadLimits(max_response_bytes=1 << 20, http_timeout=10)
    with pytest.raises(LoadLimitError, match=r"larger than 1048576 bytes.*CHRONICLE_MAX_RESPONSE_BYTES") as caught:
        chronicle.load_trace(jaeger_v3(server, limits=limits), TID)
    assert caught.value.limit == "max_response_bytes"
    assert server.disconnected.wait(5), "the client kept the connection open"


def test_huge_content_length_is_refused_before_reading(serve: Callable[..., RawServer]) -> None:
    def respond(conn: socket.socket, path: str, server: RawServer) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n[")
        server.wait_for_eof(conn)

    server = serve(respond)
    with pytest.raises(LoadLimitError, match=r"1073741824 bytes \(Content-Length\)") as caught:
        chronicle.load_trace(jaeger_v3(server), TID)
    assert caught.value.limit == "max_response_bytes"
    assert server.disconnected.wait(5)


def test_gzip_bomb_counts_the_inflated_bytes(serve: Callable[..., RawServer]) -> None:
    bomb = gzip.compress(b" " * (64 << 20), compresslevel=9)  # 64 MiB of spaces in ~64 KB
    assert len(bomb) < 1 << 20

    def respond(conn: socket.socket, path: str, server: RawServer) -> None:
        reply(conn, body=bomb, headers={"Content-Encoding": "gzip"})

    server = serve(respond)
    with pytest.raises(LoadLimitError, match=r"gzip body inflates beyond 1048576 bytes") as caught:
        chronicle.load_trace(f"jaeger-v3+{server.url}", TID, limits=LoadLimits(max_response_bytes=1 << 20))
    assert caught.value.limit == "max_response_bytes"


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda data: zlib.compress(data)[2:-4]),  # raw deflate, as some servers send it
        ("identity", lambda data: data),
    ],
)
def test_compressed_answers_load(
    serve: Callable[..., RawServer], encoding: str, encode: Callable[[bytes], bytes]
) -> None:
    def respond(conn: socket.socket, path: str, server: RawServer) -> None:
        reply(conn, body=encode(JAEGER_V3_BODY), headers={"Content-Encoding": encoding})

    server = serve(respond)
    trace = chronicle.load_trace(jaeger_v3(server), TID)
    assert trace.trace_id == TID
    assert "gzip" in server.headers_of(0)["accept-encoding"]


@pytest.mark.parametrize(
    ("encoding", "body", "message"),
    [
        ("gzip", b"\x1f\x8b\x08\x00garbage-not-deflate", "cannot decode the compressed body"),
        ("gzip", gzip.compress(JAEGER_V3_BODY)[:-12], "cannot decode the compressed body.*ends early"),
        ("br", JAEGER_V3_BODY, "unsupported Content-Encoding 'br'"),
    ],
)
def test_undecodable_bodies(serve: Callable[..., RawServer], encoding: str, body: bytes, message: str) -> None:
    def respond(conn: socket.socket, path: str, server: RawServer) -> None:
        reply(conn, body=body, headers={"Content-Encoding": encoding})

    server = serve(respond)
    with pytest.raises(chronicle.TraceLoadError, match=message) as caught:
        chronicle.load_trace(jaeger_v3(server), TID)
    assert not isinstance(caught.value, LoadLimitError)


# ------------------------------------------------------------------ redirects and credentials


def test_redirect_to_another_origin_keeps_the_credentials(serve: Callable[..., RawServer]) -> None:
    other = serve(lambda conn, path, server: reply(conn, body=JAEGER_V3_BODY))
    elsewhere = f"{other.url}/api/v3/traces/{TID}"
    first = serve(lambda conn, path, server: reply(conn, 302, headers={"Location": elsewhere}))

    for source in (
        jaeger_v3(first, headers={"Authorization": f"Bearer {TOKEN}", "Cookie": f"session={TOKEN}"}),
        JaegerSource(f"jaeger-v3+http://alice:{TOKEN}@127.0.0.1:{first.port}"),
    ):
        with pytest.raises(chronicle.TraceLoadError, match="another origin") as caught:
            chronicle.load_trace(source, TID)
        message = str(caught.value)
        assert f"{first.url}/api/v3/traces/{TID}" in message and elsewhere in message
        assert TOKEN not in message and TOKEN not in repr(source)
    assert other.heads == []  # nothing at all went to the other origin
    assert first.headers_of(0)["authorization"] == f"Bearer {TOKEN}"  # the origin itself got them
    assert first.headers_of(1)["authorization"].startswith("Basic ")


def test_same_origin_redirect_is_followed_with_the_credentials(serve: Callable[..., RawServer]) -> None:
    def respond(conn: socket.socket, path: str, server: RawServer) -> None:
        if path.startswith("/api/"):
            reply(conn, 307, headers={"Location": f"/moved{path}"})
        else:
            reply(conn, body=JAEGER_V3_BODY)

    server = serve(respond)
    source = JaegerSource(f"jaeger-v3+http://alice:{TOKEN}@127.0.0.1:{server.port}")
    assert chronicle.load_trace(source, TID).trace_id == TID
    basic = "Basic " + base64.b64encode(f"alice:{TOKEN}".encode()).decode()
    assert [server.headers_of(i)["authorization"] for i in range(2)] == [basic, basic]
    assert server.heads[1].startswith(f"GET /moved/api/v3/traces/{TID} ")


def test_redirect_loop_and_chain_are_bounded(serve: Callable[..., RawServer]) -> None:
    def respond(conn: socket.socket, path: str, server: RawServer) -> None:
        if path.startswith("/api/"):
            reply(conn, 302, headers={"Location": "/a"})
        elif path in ("/a", "/b"):
            reply(conn, 302, headers={"Location": "/b" if path == "/a" else "/a"})
        else:
            reply(conn, 302, headers={"Location": f"/r{int(path[2:] or 0) + 1}"})

    server = serve(respond)
    with pytest.raises(chronicle.TraceLoadError, match=r"redirect loop: .*/a -> .*/b -> .*/a"):
        chronicle.load_trace(jaeger_v3(server), TID)

    chain = serve(lambda conn, path, server: reply(conn, 302, headers={"Location": f"/r{len(server.heads)}"}))
    with pytest.raises(chronicle.TraceLoadError, match="more than 5 redirects"):
        chronicle.load_trace(jaeger_v3(chain), TID)
    assert len(chain.heads) == 6


def test_credentials_never_appear_in_messages(serve: Callable[..., RawServer]) -> None:
    """A server echoing the credentials into its error body does not get them into the exception."""

    def respond(conn: socket.socket, path: str, server: RawServer) -> None:
        reply(conn, 401, body=f"bad token {server.headers_of(len(server.heads) - 1)['authorization']}".encode())

    server = serve(respond)
    for source in (
        jaeger_v3(server, headers={"Authorization": f"Bearer {TOKEN}"}),
        JaegerSource(f"jaeger-v3+http://alice:{TOKEN}@127.0.0.1:{server.port}"),
    ):
        with pytest.raises(chronicle.TraceLoadError, match=r"HTTP 401 Unauthorized \(check the credentials") as caught:
            chronicle.load_trace(source, TID)
        assert TOKEN not in str(caught.value) and "***" in str(caught.value)
        token = base64.b64encode(f"alice:{TOKEN}".encode()).decode()
        assert token not in str(caught.value)
    with pytest.raises(chronicle.TraceLoadError, match="not printable ASCII") as bad:
        jaeger_v3(server, headers={"Authorization": f"Bearer {TOKEN}\r\nX-Injected: 1"})
    assert TOKEN not in str(bad.value)


# ------------------------------------------------------------------ protocol errors


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"garbage\r\n\r\n", "broke the HTTP protocol"),  # a bad status line
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789", "broke the HTTP protocol.*10 bytes"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n", "broke the HTTP protocol"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nnot json!", "did not answer JSON.*not json!"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n[1,", "did not answer JSON"),
    ],
    ids=["bad-status-line", "incomplete-read", "invalid-chunking", "not-json", "truncated-json"],
)
def test_protocol_errors_are_trace_load_errors(serve: Callable[..., RawServer], raw: bytes, message: str) -> None:
    server = serve(lambda conn, path, server: conn.sendall(raw))
    with pytest.raises(chronicle.TraceLoadError, match=message) as caught:
        chronicle.load_trace(jaeger_v3(server), TID)
    assert not isinstance(caught.value, LoadLimitError)
    assert f"{server.url}/api/v3/traces/{TID}" in str(caught.value)


def test_connection_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(chronicle.TraceLoadError, match=r"cannot reach the backend \(.*refused"):
        chronicle.load_trace(f"jaeger+http://127.0.0.1:{port}", TID)


def test_name_resolution_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_such_name(*args: object, **kwargs: object) -> list[Any]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_such_name)  # nothing is resolved for real
    with pytest.raises(chronicle.TraceLoadError, match=r"cannot reach the backend \(.*Name or service not known"):
        chronicle.load_trace("zipkin+http://backend.invalid:9411", TID)


def test_tls_failure(serve: Callable[..., RawServer]) -> None:
    server = serve(lambda conn, path, server: None, greeting=b"HTTP/1.1 400 Bad Request\r\n\r\n")
    with pytest.raises(chronicle.TraceLoadError, match=r"cannot reach the backend \(.*SSL") as caught:
        chronicle.load_trace(f"jaeger+https://127.0.0.1:{server.port}", TID)
    assert not isinstance(caught.value, LoadLimitError)


def test_infinite_timeout_is_accepted(serve: Callable[..., RawServer]) -> None:
    server = serve(lambda conn, path, server: reply(conn, body=JAEGER_V3_BODY))
    trace = chronicle.load_trace(f"jaeger-v3+{server.url}", TID, limits=LoadLimits(http_timeout=float("inf")))
    assert trace.trace_id == TID


def test_error_status_shows_a_clean_excerpt(serve: Callable[..., RawServer]) -> None:
    body = b"upstream \x1b[31mexploded\x1b[0m\r\n\x00" + b"x" * 10000
    server = serve(lambda conn, path, server: reply(conn, 503, body=body))
    with pytest.raises(chronicle.TraceLoadError, match=r"HTTP 503 Service Unavailable: upstream \[31mexploded") as e:
        chronicle.load_trace(jaeger_v3(server), TID)
    message = str(e.value)
    assert message.isprintable() and len(message) < 400


def test_not_found_after_every_path(serve: Callable[..., RawServer]) -> None:
    server = serve(lambda conn, path, server: reply(conn, 404, body=b'{"error": "trace not found"}'))
    with pytest.raises(chronicle.TraceNotFoundError):
        chronicle.load_trace(TempoSource(f"tempo+{server.url}"), TID)
    assert [head.split(" ")[1] for head in server.heads] == [f"/api/v2/traces/{TID}", f"/api/traces/{TID}"]


# ------------------------------------------------------------------ Phoenix shapes and paging


@pytest.mark.parametrize(
    ("projects", "message"),
    [
        ([{"name": "default"}], r"answered a JSON list.*expected an object"),
        ({"data": ["default"]}, r"data\[0\] is a JSON string"),
        ({"data": {"name": "default"}}, "data is a JSON object"),
        ({"data": [{"name": 7}]}, r"data\[0\]\.name is a JSON number"),
        ({"data": [{"name": "default"}], "next_cursor": 5}, "next_cursor is a JSON number"),
    ],
)
def test_phoenix_answers_of_the_wrong_shape(serve: Callable[..., RawServer], projects: Any, message: str) -> None:
    server = serve(lambda conn, path, server: reply(conn, body=json.dumps(projects).encode()))
    with pytest.raises(chronicle.TraceLoadError, match=message):
        chronicle.load_trace(f"phoenix+{server.url}", TID)


def test_phoenix_without_its_api(serve: Callable[..., RawServer]) -> None:
    server = serve(lambda conn, path, server: reply(conn, 404, body=b"Not Found"))
    with pytest.raises(chronicle.TraceLoadError, match=r"no /v1/projects \(expected an Arize Phoenix server\)") as e:
        chronicle.load_trace(f"phoenix+{server.url}", TID)
    assert not isinstance(e.value, chronicle.TraceNotFoundError)


def test_phoenix_spans_page_of_the_wrong_shape(serve: Callable[..., RawServer]) -> None:
    page = {"data": [phoenix_span("b7ad6b7169203331"), 3], "next_cursor": None}
    server = serve(lambda conn, path, server: reply(conn, body=json.dumps(page).encode()))
    with pytest.raises(chronicle.TraceLoadError, match=r"data\[1\] is a JSON number"):
        chronicle.load_trace(f"phoenix+{server.url}/?project=p", TID)


def test_phoenix_pages_and_progress(serve: Callable[..., RawServer]) -> None:
    def respond(conn: socket.socket, path: str, server: RawServer) -> None:
        if path.startswith("/v1/projects?") or path == "/v1/projects":
            cursor = "cursor=p2" in path
            doc = {"data": [{"name": "other" if cursor else "empty"}], "next_cursor": None if cursor else "p2"}
        elif path.startswith("/v1/projects/empty/"):
            doc = {"data": [], "next_cursor": None}
        elif "cursor=next" in path:
            doc = {"data": [phoenix_span("00000000000000b2")], "next_cursor": None}
        else:
            doc = {"data": [phoenix_span("00000000000000b1")], "next_cursor": "next"}
        reply(conn, body=json.dumps(doc).encode())

    server = serve(respond)
    seen: list[int] = []
    trace = chronicle.load_trace(f"phoenix+{server.url}", TID, progress=seen.append)
    assert len(trace.spans) == 2 and seen == [0, 1, 2]


def test_phoenix_cursor_loop_is_detected(serve: Callable[..., RawServer]) -> None:
    def respond(conn: socket.socket, path: str, server: RawServer) -> None:
        span = phoenix_span(f"{len(server.heads):016x}")
        reply(conn, body=json.dumps({"data": [span], "next_cursor": "same"}).encode())

    server = serve(respond)
    with pytest.raises(chronicle.TraceLoadError, match=r"cursor 'same' twice.*paging loops"):
        chronicle.load_trace(f"phoenix+{server.url}/?project=p", TID)
    assert len(server.heads) == 2


def test_phoenix_endless_pages_are_bounded(serve: Callable[..., RawServer], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(PhoenixSource, "max_pages", 4)

    def respond(conn: socket.socket, path: str, server: RawServer) -> None:
        span = phoenix_span(f"{len(server.heads):016x}")
        reply(conn, body=json.dumps({"data": [span], "next_cursor": f"c{len(server.heads)}"}).encode())

    server = serve(respond)
    with pytest.raises(chronicle.TraceLoadError, match="more than 4 pages of spans of project 'p'"):
        chronicle.load_trace(f"phoenix+{server.url}/?project=p", TID)
    assert len(server.heads) == 4


def _padded_page(data: list[dict[str, Any]], cursor: str | None, pad: int = 1 << 20) -> bytes:
    """A page of the Phoenix listing shape, made about ``pad`` bytes large by a key that Phoenix clients ignore."""
    return json.dumps({"data": data, "next_cursor": cursor, "pad": "x" * pad}).encode()


def test_phoenix_pages_share_one_response_budget(serve: Callable[..., RawServer]) -> None:
    def respond(conn: socket.socket, path: str, server: RawServer) -> None:
        number = len(server.heads)
        reply(conn, body=_padded_page([phoenix_span(f"{number:016x}")], f"c{number}"))

    server = serve(respond)
    source = PhoenixSource(f"phoenix+{server.url}/?project=p", limits=LoadLimits(max_response_bytes=5 << 20))
    tracemalloc.start()
    try:
        with pytest.raises(LoadLimitError) as info:
            chronicle.load_trace(source, TID)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.limit == "max_response_bytes"
    assert "earlier answers" in str(info.value) and "all the answers for one trace together" in str(info.value)
    assert len(server.heads) == 5  # four pages fit in 5 MiB, the fifth passes it
    assert peak < 64 << 20


def test_phoenix_project_listings_count_toward_the_budget(serve: Callable[..., RawServer]) -> None:
    def respond(conn: socket.socket, path: str, server: RawServer) -> None:
        if path.startswith("/v1/projects?") or path == "/v1/projects":
            body = _padded_page([{"name": f"p{i}"} for i in range(10)], None, pad=2 << 20)
        else:
            body = _padded_page([], None, pad=1 << 20)  # this project does not hold the trace
        reply(conn, body=body)

    server = serve(respond)
    source = PhoenixSource(f"phoenix+{server.url}", limits=LoadLimits(max_response_bytes=5 << 20))
    with pytest.raises(LoadLimitError, match="max_response_bytes"):
        chronicle.load_trace(source, TID)
    assert len(server.heads) == 4  # the listing (2 MiB) and two projects (1 MiB each) fit, the third does not


def test_phoenix_project_count_is_bounded(serve: Callable[..., RawServer], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(PhoenixSource, "max_projects", 3)

    def respond(conn: socket.socket, path: str, server: RawServer) -> None:
        number = len(server.heads)
        reply(
            conn,
            body=json.dumps(
                {"data": [{"name": f"p{number}-{i}"} for i in range(2)], "next_cursor": f"c{number}"}
            ).encode(),
        )

    server = serve(respond)
    with pytest.raises(chronicle.TraceLoadError, match=r"more than 3 projects; name the one .* \?project=name") as e:
        chronicle.load_trace(f"phoenix+{server.url}", TID)
    assert not isinstance(e.value, LoadLimitError)
    assert len(server.heads) == 2  # no project was searched


# ------------------------------------------------------------------ limits reach the built-in sources


def test_source_for_passes_the_limits() -> None:
    limits = LoadLimits(http_timeout=3, max_response_bytes=1000)
    source = source_for(f"zipkin+http://bob:{TOKEN}@127.0.0.1:9411", limits=limits)
    assert getattr(source, "limits", None) is limits
    assert TOKEN not in repr(source) and "***@127.0.0.1:9411" in repr(source)


def test_limits_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHRONICLE_HTTP_TIMEOUT", "7")
    source = source_for("jaeger+http://127.0.0.1:16686")
    assert getattr(source, "limits", None) == LoadLimits(http_timeout=7)


@pytest.mark.parametrize(
    "url",
    [
        f"jaeger+http://alice:{TOKEN}@[::1",
        f"jaeger+ftp://alice:{TOKEN}@127.0.0.1:21",
        f"jaeger+http://alice:{TOKEN}@127.0.0.1:99999",
        f"datadog+http://alice:{TOKEN}@127.0.0.1:1",
    ],
)
def test_bad_urls_do_not_show_their_credentials(url: str) -> None:
    with pytest.raises(chronicle.TraceLoadError) as caught:
        chronicle.load_trace(url, TID)
    assert TOKEN not in str(caught.value) and "***@" in str(caught.value)


def test_backend_requests_are_not_traced(serve: Callable[..., RawServer]) -> None:
    """Loading a trace inside an instrumented process does not add the loader's own requests to its telemetry."""
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    server = serve(lambda conn, path, server: reply(conn, body=JAEGER_V3_BODY))
    instrumentor = HTTPXClientInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        assert chronicle.load_trace(f"jaeger-v3+{server.url}", TID).trace_id == TID
        import httpx

        with httpx.Client() as client:  # the instrumentation is live: a plain client is traced
            client.get(f"{server.url}/probe")
    finally:
        instrumentor.uninstrument()
    assert [span.name for span in memory.get_finished_spans()] == ["GET"]
