"""Trace sources that pull one trace by id from a backend's HTTP API.

A backend's answers are untrusted input, read under the bounds of :class:`~chronicle_otel.load.LoadLimits`:

- one request (connecting, waiting, reading and inflating the whole body, following redirects) ends within
  ``http_timeout`` seconds: httpx's own timeouts are set to the time left, the clock is checked between chunks, and
  a watchdog shuts the connection down when the deadline passes, so a server trickling bytes cannot outlast it;
- the bodies read for one ``spans()`` call (every page and project listing of a paged source together) may not exceed
  ``max_response_bytes``, before or after ``Content-Encoding`` (gzip, deflate) is undone: a ``Content-Length`` larger
  than what is left is refused before reading, a chunked body is cut off as soon as it passes the limit;
- redirects are followed only within the same origin (scheme, host, port), at most a few, so credentials from
  ``user:password@`` in the URL or from ``headers=`` are never sent anywhere else;
- every transport or protocol failure, and every answer of the wrong shape, is a
  :class:`~chronicle_otel.errors.TraceLoadError` naming the URL; credentials never appear in messages or reprs.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import functools
import re
import socket
import ssl
import threading
import time
import urllib.parse
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final, NoReturn

import httpx
import orjson
from opentelemetry import context as context_api

from ..errors import ChronicleError, LoadLimitError, TraceLoadError, TraceNotFoundError
from ..model import SpanRecord
from ..version import __version__
from . import _phoenix
from ._files import spans_of_document
from ._limits import ENV_VARS, LoadLimits

_TRACE_ID: Final = re.compile(r"[0-9a-f]{32}\Z")

Progress = Callable[[int], None]
"""Called with the number of spans fetched so far."""

_MAX_REDIRECTS = 5
_REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_INFLATE_STEP = 64 * 1024  # the most one call to the decompressor may produce
_EXCERPT_BYTES = 4096  # read of an error body, for its excerpt
_EXCERPT_CHARS = 200
_LONGEST_WAIT = 1e6  # seconds: what timers and sockets are given when http_timeout is larger (even infinite)
_MIN_SECRET = 4  # shorter credentials are not searched for in messages (they would match everywhere)
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*\Z")
_SUPPRESS_KEY: str = getattr(context_api, "_SUPPRESS_INSTRUMENTATION_KEY", "suppress_instrumentation")


class _NotFound(Exception):
    """The backend answered 404 for this path."""


def _strip_userinfo(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@``, for messages and reprs."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # not even a URL: blank whatever could be credentials
        return re.sub(r"//[^/?#]*@", "//***@", url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]))


def _printable(text: str, limit: int = _EXCERPT_CHARS) -> str:
    """``text`` on one line, without control characters, cut at ``limit`` characters."""
    flat = " ".join("".join(c if c.isprintable() else " " for c in text[: limit * 4]).split())
    return flat if len(flat) <= limit else flat[:limit] + "…"


def _valid_port(parsed: urllib.parse.SplitResult) -> bool:
    try:
        parsed.port  # noqa: B018 (parsing it is the check)
    except ValueError:
        return False
    return True


def _kind(value: object) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port or _DEFAULT_PORTS.get(url.scheme)


@functools.lru_cache(maxsize=1)
def _tls_context() -> ssl.SSLContext:
    """Certificate verification as httpx sets it up (``SSL_CERT_FILE``, ``SSL_CERT_DIR``), built once: loading the
    CA bundle costs ~20 ms, more than a whole small request."""
    return httpx.create_ssl_context()


class _Inflater:
    """Undoes one ``Content-Encoding`` piece by piece, never producing more than ``_INFLATE_STEP`` bytes at once."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding.strip().lower()
        self._pending = b""
        self._engine: Any = None
        if self.encoding in ("gzip", "x-gzip"):
            self._engine = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif self.encoding not in ("", "identity", "deflate"):
            raise ValueError(f"unsupported Content-Encoding {_printable(self.encoding, 40)!r}")

    def feed(self, data: bytes) -> Iterator[bytes]:
        if not self.encoding or self.encoding == "identity":
            yield data
            return
        if self._engine is None:  # deflate: zlib-wrapped as the RFC says, or raw as some servers send it
            self._pending += data
            if len(self._pending) < 2:
                return
            data, self._pending = self._pending, b""
            wrapped = (data[0] & 0x0F) == 8 and ((data[0] << 8) | data[1]) % 31 == 0
            self._engine = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        engine = self._engine
        while not engine.eof:
            out = engine.decompress(data, _INFLATE_STEP)
            if out:
                yield out
            data = engine.unconsumed_tail
            if not data and len(out) < _INFLATE_STEP:
                break

    def describe_excess(self, limit: int) -> str:
        if self._engine is None:
            return f"the body is larger than {limit} bytes"
        return f"the {self.encoding} body inflates beyond {limit} bytes"

    def finish(self) -> None:
        if self._pending or (self._engine is not None and not self._engine.eof):
            raise zlib.error("the compressed body ends early")


class _Watchdog:
    """Shuts a request's connection down once its deadline passes, so that no blocked read outlives it.

    httpx's timeouts bound each read, not the whole exchange: a server sending one byte just before each read
    times out (headers included) would keep a request alive forever. The watchdog keeps a duplicate of the
    connection's socket (from httpx's ``trace`` extension) and a timer thread shuts it down at the deadline.
    """

    def __init__(self) -> None:
        self.expired = False
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None

    def trace(self, event: str, info: Mapping[str, Any]) -> None:
        if not event.endswith(".connect_tcp.complete"):  # the TCP connection, direct or to a proxy
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if not isinstance(sock, socket.socket):
            return
        with self._lock:
            self._release()
            try:
                self._sock = sock.dup()  # still valid once TLS wraps (and detaches) the original object
            except OSError:
                return
            if self.expired:
                self._shutdown()

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            self._shutdown()

    def close(self) -> None:
        with self._lock:
            self._release()

    def _shutdown(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):  # already closed by the peer
                self._sock.shutdown(socket.SHUT_RDWR)

    def _release(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class _Session:
    """The HTTP exchanges of one ``spans()`` call: one client, the credentials, the limits."""

    def __init__(self, source: HttpTraceSource) -> None:
        self._headers = source._headers
        self._secrets = source._secrets
        self._limits = source.limits
        self._origin = _origin(httpx.URL(source.base))
        self._spent = 0  # bytes of the bodies read so far: max_response_bytes bounds them all together
        self._end = time.monotonic() + min(self._limits.http_total_timeout, _LONGEST_WAIT)  # all requests together
        self._answers = 0
        try:
            self._client = httpx.Client(
                verify=_tls_context(),
                follow_redirects=False,
                # one connection per request: the watchdog then always knows the socket to shut down
                limits=httpx.Limits(max_connections=1, max_keepalive_connections=0),
            )
        except (OSError, ValueError, ImportError, httpx.HTTPError) as exc:
            raise TraceLoadError(
                self._redact(f"cannot set up the HTTP client ({type(exc).__name__}: {exc})"), source=source.url
            ) from None

    def __enter__(self) -> _Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._client.close()

    def get_json(self, url: str) -> Any:
        """The parsed JSON answer at ``url``.

        Raises:
            _NotFound: the backend answered 404.
            LoadLimitError: the answer takes longer than ``http_timeout`` or is larger than ``max_response_bytes``.
            TraceLoadError: the backend cannot be reached, answers an error, redirects elsewhere, or not JSON.
        """
        body = self.get(url)
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            start = _printable(body[:_EXCERPT_BYTES].decode("utf-8", "replace"))
            self._fail(f"the backend did not answer JSON ({exc}): {start or '(empty body)'}", url)

    def get(self, url: str) -> bytes:
        """The body at ``url``, following same-origin redirects; the deadline covers the whole chain."""
        deadline = min(time.monotonic() + min(self._limits.http_timeout, _LONGEST_WAIT), self._end)
        chain = [url]
        while True:
            answer = self._once(chain[-1], deadline)
            if isinstance(answer, bytes):
                return answer
            target = str(answer)
            if answer.userinfo:
                self._fail(f"the backend redirected to {_strip_userinfo(target)}, a URL with credentials", chain[-1])
            if _origin(answer) != self._origin:
                scheme, host, port = self._origin
                self._fail(
                    f"the backend redirected {chain[-1]} to {target}, another origin; not followed, so that "
                    f"credentials are sent only to {scheme}://{host}:{port}",
                    url,
                )
            if target in chain:
                self._fail(f"redirect loop: {' -> '.join([*chain[chain.index(target) :], target])}", url)
            if len(chain) > _MAX_REDIRECTS:
                self._fail(f"more than {_MAX_REDIRECTS} redirects: {' -> '.join([*chain, target])}", url)
            chain.append(target)

    def _once(self, url: str, deadline: float) -> bytes | httpx.URL:
        remaining = min(deadline - time.monotonic(), _LONGEST_WAIT)
        if remaining <= 0:
            self._timeout(url)
        watchdog = _Watchdog()
        timer = threading.Timer(remaining, watchdog.expire)
        timer.daemon = True
        timer.start()
        token = context_api.attach(context_api.set_value(_SUPPRESS_KEY, True))  # the loader's I/O is not traced
        try:
            request = self._client.build_request(
                "GET", url, headers=self._headers, timeout=remaining, extensions={"trace": watchdog.trace}
            )
            response = self._client.send(request, stream=True)
            try:
                answer = self._answer(response, url, deadline)
            finally:
                response.close()
            if watchdog.expired:  # a body read until the connection closes looks whole when the watchdog closed it
                self._timeout(url)
            return answer
        except (ChronicleError, _NotFound):
            raise
        except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, OSError, ValueError, zlib.error) as exc:
            self._transport_error(exc, url, watchdog.expired or time.monotonic() >= deadline)
        finally:
            context_api.detach(token)
            timer.cancel()
            watchdog.close()

    def _answer(self, response: httpx.Response, url: str, deadline: float) -> bytes | httpx.URL:
        status = response.status_code
        if status in _REDIRECT_CODES:
            location = response.headers.get("location")
            if not location:
                self._fail(f"HTTP {status} redirect without a Location header", url)
            return response.url.join(location)
        if status == 404:
            raise _NotFound(url)
        if not 200 <= status < 300:
            hint = " (check the credentials: headers= or user:password@ in the URL)" if status in (401, 403) else ""
            excerpt = self._excerpt(response, url, deadline)
            what = f"HTTP {status} {httpx.codes.get_reason_phrase(status)}".rstrip()
            self._fail(f"{what}{hint}: {excerpt or '(no body)'}", url)
        limit = self._limits.max_response_bytes - self._spent
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            self._too_large(f"the backend announces a body of {int(declared)} bytes (Content-Length)", url)
        body = self._body(response, url, deadline, limit, cut=False)
        self._spent += len(body)
        self._answers += 1
        return body

    def _body(self, response: httpx.Response, url: str, deadline: float, limit: int, *, cut: bool) -> bytes:
        """The decoded body, read while the deadline and ``limit`` allow (``cut``: stop at the limit silently)."""
        try:
            inflater = _Inflater(response.headers.get("content-encoding", ""))
        except ValueError as exc:
            self._fail(str(exc), url)
        parts: list[bytes] = []
        received = size = 0
        for raw in response.iter_raw():
            received += len(raw)
            for piece in inflater.feed(raw):
                size += len(piece)
                if size > limit:
                    if cut:
                        parts.append(piece[: len(piece) - (size - limit)])
                        return b"".join(parts)
                    self._too_large(inflater.describe_excess(limit), url)
                parts.append(piece)
            if received > limit and not cut:
                self._too_large(f"the body is larger than {limit} bytes", url)
            if time.monotonic() > deadline:
                self._timeout(url)
        inflater.finish()
        return b"".join(parts)

    def _excerpt(self, response: httpx.Response, url: str, deadline: float) -> str:
        try:
            body = self._body(response, url, deadline, _EXCERPT_BYTES, cut=True)
        except (TraceLoadError, httpx.HTTPError, httpx.StreamError, OSError, zlib.error):
            return ""
        return self._redact(_printable(body.decode("utf-8", "replace")))

    def _transport_error(self, exc: Exception, url: str, late: bool) -> NoReturn:
        if late or isinstance(exc, httpx.TimeoutException):
            self._timeout(url)
        if isinstance(exc, httpx.ConnectError):
            what = "cannot reach the backend"
        elif isinstance(exc, httpx.RemoteProtocolError):
            what = "the backend broke the HTTP protocol"
        elif isinstance(exc, httpx.ProxyError):
            what = "the proxy failed"
        elif isinstance(exc, (httpx.ReadError, httpx.WriteError)):
            what = "the connection to the backend failed"
        elif isinstance(exc, zlib.error):
            what = "cannot decode the compressed body"
        else:
            what = "the request to the backend failed"
        self._fail(f"{what} ({_printable(str(exc)) or type(exc).__name__})", url)

    def _timeout(self, url: str) -> NoReturn:
        if time.monotonic() >= self._end:  # the deadline of the whole pull passed first
            limit, value = "http_total_timeout", self._limits.http_total_timeout
            message = f"pulling the trace took longer than {value:g} s ({self._answers} answers read)"
        else:
            limit, value = "http_timeout", self._limits.http_timeout
            message = f"no complete answer from the backend within {value:g} s"
        raise LoadLimitError(message, limit=limit, value=value, env_var=ENV_VARS[limit], source=self._redact(url))

    def _too_large(self, message: str, url: str) -> NoReturn:
        limit = self._limits.max_response_bytes
        if self._answers:
            message = (
                f"{message}, what is left after {self._spent} bytes in {self._answers} earlier answers "
                "(the limit bounds all the answers for one trace together)"
            )
        raise LoadLimitError(
            message,
            limit="max_response_bytes",
            value=limit,
            env_var=ENV_VARS["max_response_bytes"],
            source=self._redact(url),
        )

    def _fail(self, message: str, url: str) -> NoReturn:
        raise TraceLoadError(self._redact(message), source=self._redact(url))

    def _redact(self, text: str) -> str:
        return _redacted(text, self._secrets)


def _redacted(text: str, secrets: Sequence[str]) -> str:
    """``text`` with the credentials of a source (``secrets``, longest first) replaced by ``***``."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


class HttpTraceSource:
    """Base of the backend sources: ``spans(trace_id)`` fetches one trace.

    Args:
        url: ``<scheme>+http(s)://[user:password@]host:port[/path]``; ``user:password`` is sent as HTTP Basic
            authentication.
        headers: more request headers, such as ``{"Authorization": "Bearer …"}`` (they win over the URL's
            credentials). They, and the URL's credentials, are sent only to the URL's own origin and never
            appear in messages or reprs.
        limits: the bounds on each request (time and size); by default :meth:`LoadLimits.from_env`.

    Raises:
        TraceLoadError: the URL is not ``<scheme>+http(s)://host…`` or a header is not valid HTTP.
    """

    scheme = ""

    def __init__(self, url: str, *, headers: Mapping[str, str] | None = None, limits: LoadLimits | None = None) -> None:
        self.url = _strip_userinfo(url)
        self.limits = limits if limits is not None else LoadLimits.from_env()
        try:
            parsed = urllib.parse.urlsplit(url)
        except ValueError:
            raise TraceLoadError("not a valid URL", source=self.url) from None
        transport = parsed.scheme.split("+", 1)[-1]
        if transport not in ("http", "https") or not parsed.hostname or not _valid_port(parsed):
            raise TraceLoadError(f"expected {self.scheme or '<scheme>'}+http(s)://host:port", source=self.url)
        hostport = parsed.netloc.rpartition("@")[2]
        self.base = urllib.parse.urlunsplit((transport, hostport, parsed.path.rstrip("/"), "", ""))
        self.query = dict(urllib.parse.parse_qsl(parsed.query))
        self._headers = httpx.Headers(
            {
                "Accept": "application/json",
                "Accept-Encoding": "gzip, deflate",
                "User-Agent": f"chronicle-otel/{__version__}",
            }
        )
        secrets: set[str] = set()
        user = urllib.parse.unquote(parsed.username or "")
        password = urllib.parse.unquote(parsed.password or "")
        if user or password:
            token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            self._headers["Authorization"] = f"Basic {token}"
            secrets.update((user, password, parsed.username or "", parsed.password or "", token))
        for name, value in (headers or {}).items():
            if not isinstance(name, str) or not _HEADER_NAME.match(name):
                raise TraceLoadError("a header name is not a valid HTTP token", source=self.url)
            if not isinstance(value, str) or not _HEADER_VALUE.match(value):
                raise TraceLoadError(f"the value of header {name!r} is not printable ASCII", source=self.url)
            self._headers[name] = value
            secrets.add(value.strip())
            secrets.add(value.strip().partition(" ")[2].strip())  # "Bearer <token>": the token alone too
        self._secrets = sorted((s for s in secrets if len(s) >= _MIN_SECRET), key=len, reverse=True)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    def spans(self, trace_id: str | None, progress: Progress | None = None) -> Iterator[SpanRecord]:
        """The spans of ``trace_id``.

        Raises:
            TraceNotFoundError: the backend does not have the trace.
            LoadLimitError: an answer takes longer than ``limits.http_timeout``, or the answers of this call
                together are larger than ``limits.max_response_bytes``.
            TraceLoadError: the backend cannot be reached, answers an error, redirects to another origin, or
                answers something that is not its documented JSON.
        """
        if trace_id is None:
            raise TraceLoadError("a trace id is needed to pull from a backend", source=self.url)
        try:
            with _Session(self) as http:
                yield from self._fetch(http, trace_id.strip().lower(), progress)
        except ChronicleError as exc:  # a message quoting the answer may quote the credentials a backend echoed
            text = str(exc)
            clean = _redacted(text, self._secrets)
            if clean != text:
                exc.args = (clean,)
            raise

    def trace_ids(self, since_ns: int, limit: int = 1000) -> list[str]:
        """The ids of the traces that started at or after ``since_ns`` (ns since the epoch), at most ``limit``, as
        the backend's search lists them (the most recent first, for most backends).

        Raises:
            LoadLimitError: an answer takes longer than ``limits.http_timeout`` or is larger than
                ``limits.max_response_bytes``.
            TraceLoadError: the backend cannot be reached, answers an error, or cannot list traces this way (the
                message says what the URL must name, e.g. ``?service=`` for Jaeger).
        """
        if not isinstance(limit, int) or limit < 1:
            raise TraceLoadError(f"limit is {limit!r}", source=self.url, expected="a positive number of traces")
        try:
            with _Session(self) as http:
                ids: list[str] = []
                for trace_id in self._search(http, max(int(since_ns), 0), limit):
                    trace_id = trace_id.strip().lower()
                    if _TRACE_ID.match(trace_id) and trace_id not in ids:
                        ids.append(trace_id)
                    if len(ids) >= limit:
                        break
                return ids
        except ChronicleError as exc:
            text = str(exc)
            clean = _redacted(text, self._secrets)
            if clean != text:
                exc.args = (clean,)
            raise

    def _search(self, http: _Session, since_ns: int, limit: int) -> Iterator[str]:
        raise TraceLoadError(f"{type(self).__name__} cannot list traces", source=self.url)

    def _listed(self, http: _Session, url: str) -> Iterator[str]:
        """The trace ids of the spans of a search answer in one of the documented trace formats."""
        doc = http.get_json(url)
        for span in spans_of_document(doc, url):
            yield span.trace_id

    def _fetch(self, http: _Session, trace_id: str, progress: Progress | None) -> Iterator[SpanRecord]:
        raise NotImplementedError

    def _document(self, http: _Session, trace_id: str, *paths: str) -> Iterator[SpanRecord]:
        quoted = urllib.parse.quote(trace_id, safe="")
        for path in paths:
            url = f"{self.base}{path.format(trace_id=quoted)}"
            try:
                doc = http.get_json(url)
            except _NotFound:
                continue
            count = 0
            for span in spans_of_document(doc, url):
                count += 1
                yield span
            if count:
                return
            break  # an answer without spans (Zipkin's [], Jaeger's {"data": []}): not there, or not yet
        raise TraceNotFoundError(trace_id, source=self.url)


class JaegerSource(HttpTraceSource):
    """Jaeger query service: ``jaeger+http://host:16686`` (API v1 JSON) or ``jaeger-v3+http://…`` (API v3, OTLP)."""

    scheme = "jaeger"

    def _fetch(self, http: _Session, trace_id: str, progress: Progress | None) -> Iterator[SpanRecord]:
        path = "/api/v3/traces/{trace_id}" if self.url.startswith("jaeger-v3") else "/api/traces/{trace_id}"
        yield from self._document(http, trace_id, path)

    def _search(self, http: _Session, since_ns: int, limit: int) -> Iterator[str]:
        service = self.query.get("service")
        if not service:
            raise TraceLoadError(
                "Jaeger searches one service at a time: name it in the URL (?service=NAME)", source=self.url
            )
        now_us = time.time_ns() // 1000
        if self.url.startswith("jaeger-v3"):
            query = {
                "query.service_name": service,
                "query.start_time_min": _rfc3339(since_ns),
                "query.start_time_max": _rfc3339(now_us * 1000),
                "query.num_traces": str(limit),
            }
            yield from self._listed(http, f"{self.base}/api/v3/traces?{urllib.parse.urlencode(query)}")
            return
        query = {"service": service, "start": str(since_ns // 1000), "end": str(now_us), "limit": str(limit)}
        yield from self._listed(http, f"{self.base}/api/traces?{urllib.parse.urlencode(query)}")


class TempoSource(HttpTraceSource):
    """Grafana Tempo: ``tempo+http://host:3200`` (API v2, falling back to v1)."""

    scheme = "tempo"

    def _fetch(self, http: _Session, trace_id: str, progress: Progress | None) -> Iterator[SpanRecord]:
        yield from self._document(http, trace_id, "/api/v2/traces/{trace_id}", "/api/traces/{trace_id}")

    def _search(self, http: _Session, since_ns: int, limit: int) -> Iterator[str]:
        query = {"start": str(since_ns // 1_000_000_000), "end": str(time.time_ns() // 1_000_000_000 + 1)}
        query["limit"] = str(limit)
        if self.query.get("tags"):
            query["tags"] = self.query["tags"]
        url = f"{self.base}/api/search?{urllib.parse.urlencode(query)}"
        doc = http.get_json(url)
        traces = doc.get("traces") if isinstance(doc, dict) else None
        if not isinstance(traces, list):
            raise TraceLoadError("the search answer has no traces list", source=url, expected='{"traces": [...]}')
        for item in traces:
            trace_id = item.get("traceID") if isinstance(item, dict) else None
            if isinstance(trace_id, str):
                yield trace_id.rjust(32, "0")  # Tempo drops leading zeros


class ZipkinSource(HttpTraceSource):
    """Zipkin: ``zipkin+http://host:9411`` (API v2)."""

    scheme = "zipkin"

    def _fetch(self, http: _Session, trace_id: str, progress: Progress | None) -> Iterator[SpanRecord]:
        yield from self._document(http, trace_id, "/api/v2/trace/{trace_id}")

    def _search(self, http: _Session, since_ns: int, limit: int) -> Iterator[str]:
        end_ms = time.time_ns() // 1_000_000 + 1
        query = {"endTs": str(end_ms), "lookback": str(max(end_ms - since_ns // 1_000_000, 1)), "limit": str(limit)}
        if self.query.get("service"):
            query["serviceName"] = self.query["service"]
        yield from self._listed(http, f"{self.base}/api/v2/traces?{urllib.parse.urlencode(query)}")


class PhoenixSource(HttpTraceSource):
    """Arize Phoenix: ``phoenix+http://host:6006`` (``?project=name``; by default every project is searched).

    Spans are read page by page from ``GET /v1/projects/{project}/spans?trace_id=…``; paging stops with an error
    when the backend repeats a cursor or sends more than :attr:`max_pages` pages, when it lists more than
    :attr:`max_projects` projects, or when all the pages and listings together pass ``limits.max_response_bytes``.
    """

    scheme = "phoenix"
    page_size = 1000
    """Spans asked for per page."""
    max_pages = 1000
    """Most pages read for one listing (projects, or the spans of one project)."""
    max_projects = 1000
    """Most projects searched for a trace when the URL names none (``?project=name``)."""

    def _projects(self, http: _Session) -> list[str]:
        if self.query.get("project"):
            return [self.query["project"]]
        names: list[str] = []
        try:
            for url, data in self._pages(http, lambda cursor: self._url("/v1/projects", cursor=cursor), "projects"):
                for index, project in enumerate(data):
                    name = project.get("name")
                    if name is not None and not isinstance(name, str):
                        raise TraceLoadError(
                            f"data[{index}].name is a JSON {_kind(name)}", source=url, expected="a string"
                        )
                    if name:
                        names.append(name)
                if len(names) > self.max_projects:
                    raise TraceLoadError(
                        f"the backend lists more than {self.max_projects} projects; name the one holding the trace "
                        "with ?project=name in the URL",
                        source=self.url,
                    )
        except _NotFound:
            raise TraceLoadError(
                "the backend has no /v1/projects", source=self.url, expected="an Arize Phoenix server"
            ) from None
        return names

    def _fetch(self, http: _Session, trace_id: str, progress: Progress | None) -> Iterator[SpanRecord]:
        for project in self._projects(http):
            if project in (".", ".."):  # a path segment that is no name: the request would leave /v1/projects/
                raise TraceLoadError(f"a project named {project!r} cannot be asked for", source=self.url)
            path = f"/v1/projects/{urllib.parse.quote(project, safe='')}/spans"

            def page(cursor: str | None, path: str = path) -> str:
                return self._url(path, trace_id=trace_id, limit=str(self.page_size), cursor=cursor)

            count = 0
            try:
                for url, data in self._pages(http, page, f"spans of project {_printable(project, 80)!r}"):
                    if data:
                        yield from _phoenix.spans(data, source=url)
                    count += len(data)
                    if progress is not None:
                        progress(count)
            except _NotFound:
                pass  # no such project yet (Phoenix answers 404 until its first span)
            if count:
                return
        raise TraceNotFoundError(trace_id, source=self.url)

    def _search(self, http: _Session, since_ns: int, limit: int) -> Iterator[str]:
        found = 0
        for project in self._projects(http):
            if project in (".", ".."):
                raise TraceLoadError(f"a project named {project!r} cannot be asked for", source=self.url)
            path = f"/v1/projects/{urllib.parse.quote(project, safe='')}/spans"

            def page(cursor: str | None, path: str = path) -> str:  # the root spans of the window: one per trace
                size = str(min(self.page_size, limit))
                return self._url(path, parent_id="null", start_time=_rfc3339(since_ns), limit=size, cursor=cursor)

            try:
                for url, data in self._pages(http, page, f"root spans of project {_printable(project, 80)!r}"):
                    for span in _phoenix.spans(data, source=url) if data else ():
                        yield span.trace_id
                        found += 1
                    if found >= limit:
                        return
            except _NotFound:
                continue

    def _url(self, path: str, **params: str | None) -> str:
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v})
        return f"{self.base}{path}?{query}" if query else f"{self.base}{path}"

    def _pages(
        self, http: _Session, url_of: Callable[[str | None], str], what: str
    ) -> Iterator[tuple[str, list[dict[str, Any]]]]:
        """``(url, data)`` of each page of a cursor-paged listing, until a page has no ``next_cursor``."""
        cursor: str | None = None
        seen: set[str] = set()
        for number in range(1, self.max_pages + 1):
            url = url_of(cursor)
            try:
                answer = http.get_json(url)
            except _NotFound:
                if cursor is None:
                    raise
                raise TraceLoadError(  # a listing cut short is no trace to replay
                    f"page {number} of {what} answered 404 (not found) after the pages before it: the listing is "
                    "incomplete",
                    source=url.partition("?")[0],
                ) from None
            data, cursor = _page(answer, url)
            yield url, data
            if not cursor or not data:
                return
            if cursor in seen:
                raise TraceLoadError(
                    f"the backend sent the cursor {_printable(cursor, 80)!r} twice while listing {what}: "
                    "its paging loops",
                    source=url,
                )
            seen.add(cursor)
        raise TraceLoadError(f"more than {self.max_pages} pages of {what}; stopped", source=self.url)


def _rfc3339(ns: int) -> str:
    """``ns`` since the epoch as an RFC 3339 UTC time with microseconds."""
    return dt.datetime.fromtimestamp(ns / 1e9, tz=dt.timezone.utc).isoformat()


def _page(doc: Any, url: str) -> tuple[list[dict[str, Any]], str | None]:
    expected = 'an object {"data": [objects], "next_cursor": string or null}'
    if not isinstance(doc, dict):
        raise TraceLoadError(f"the backend answered a JSON {_kind(doc)}", source=url, expected=expected)
    data = doc.get("data")
    if data is None:
        data = []
    if not isinstance(data, list):
        raise TraceLoadError(f"data is a JSON {_kind(data)}", source=url, expected=expected)
    for index, item in enumerate(data):
        if not isinstance(item, dict):
            raise TraceLoadError(f"data[{index}] is a JSON {_kind(item)}", source=url, expected=expected)
    cursor = doc.get("next_cursor")
    if cursor is not None and not isinstance(cursor, str):
        raise TraceLoadError(f"next_cursor is a JSON {_kind(cursor)}", source=url, expected=expected)
    if cursor is not None and len(cursor) > _MAX_CURSOR:
        raise TraceLoadError(
            f"next_cursor is {len(cursor)} characters long", source=url, expected=f"at most {_MAX_CURSOR}"
        )
    return data, cursor


_MAX_CURSOR: Final = 4096


SOURCES: dict[str, type[HttpTraceSource]] = {
    "phoenix": PhoenixSource,
    "jaeger": JaegerSource,
    "jaeger-v3": JaegerSource,
    "tempo": TempoSource,
    "zipkin": ZipkinSource,
}
