"""Trace sources that pull one trace by id from a backend's HTTP API."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import orjson

from ..errors import TraceLoadError, TraceNotFoundError
from ..replay import SpanRecord
from . import _phoenix
from ._files import spans_of_document

Progress = Callable[[int], None]
"""Called with the number of spans fetched so far."""

_TIMEOUT = 30.0


def _get(url: str, headers: dict[str, str] | None = None) -> Any:
    request = urllib.request.Request(url, headers={"Accept": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise LookupError(url) from None
        detail = exc.read()[:300].decode(errors="replace")
        raise TraceLoadError(f"HTTP {exc.code} from the backend: {detail}", source=url) from None
    except (urllib.error.URLError, OSError) as exc:
        raise TraceLoadError(f"cannot reach the backend ({getattr(exc, 'reason', exc)})", source=url) from None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise TraceLoadError(f"the backend did not answer JSON ({exc})", source=url) from None


class HttpTraceSource:
    """Base of the backend sources: ``spans(trace_id)`` fetches one trace."""

    scheme = ""

    def __init__(self, url: str, *, headers: dict[str, str] | None = None) -> None:
        parsed = urllib.parse.urlsplit(url)
        transport = parsed.scheme.split("+", 1)[-1] if "+" in parsed.scheme else parsed.scheme
        if transport not in ("http", "https"):
            raise TraceLoadError(f"expected {self.scheme}+http(s)://host:port", source=url)
        self.url = url
        self.base = urllib.parse.urlunsplit((transport, parsed.netloc, parsed.path.rstrip("/"), "", ""))
        self.query = dict(urllib.parse.parse_qsl(parsed.query))
        self.headers = headers or {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    def spans(self, trace_id: str | None, progress: Progress | None = None) -> Iterator[SpanRecord]:
        """The spans of ``trace_id``."""
        if trace_id is None:
            raise TraceLoadError("a trace id is needed to pull from a backend", source=self.url)
        yield from self._fetch(trace_id.strip().lower(), progress)

    def _fetch(self, trace_id: str, progress: Progress | None) -> Iterator[SpanRecord]:
        raise NotImplementedError

    def _document(self, trace_id: str, *paths: str) -> Iterator[SpanRecord]:
        for path in paths:
            url = f"{self.base}{path.format(trace_id=trace_id)}"
            try:
                doc = _get(url, self.headers)
            except LookupError:
                continue
            yield from spans_of_document(doc, url)
            return
        raise TraceNotFoundError(trace_id, source=self.url)


class JaegerSource(HttpTraceSource):
    """Jaeger query service: ``jaeger+http://host:16686`` (API v1 JSON) or ``jaeger-v3+http://…`` (API v3, OTLP)."""

    scheme = "jaeger"

    def _fetch(self, trace_id: str, progress: Progress | None) -> Iterator[SpanRecord]:
        path = "/api/v3/traces/{trace_id}" if self.url.startswith("jaeger-v3") else "/api/traces/{trace_id}"
        yield from self._document(trace_id, path)


class TempoSource(HttpTraceSource):
    """Grafana Tempo: ``tempo+http://host:3200`` (API v2, falling back to v1)."""

    scheme = "tempo"

    def _fetch(self, trace_id: str, progress: Progress | None) -> Iterator[SpanRecord]:
        yield from self._document(trace_id, "/api/v2/traces/{trace_id}", "/api/traces/{trace_id}")


class ZipkinSource(HttpTraceSource):
    """Zipkin: ``zipkin+http://host:9411`` (API v2)."""

    scheme = "zipkin"

    def _fetch(self, trace_id: str, progress: Progress | None) -> Iterator[SpanRecord]:
        yield from self._document(trace_id, "/api/v2/trace/{trace_id}")


class PhoenixSource(HttpTraceSource):
    """Arize Phoenix: ``phoenix+http://host:6006`` (``?project=name``; by default every project is searched).

    Spans are read page by page from ``GET /v1/projects/{project}/spans?trace_id=…``.
    """

    scheme = "phoenix"
    page_size = 1000

    def _projects(self) -> list[str]:
        if self.query.get("project"):
            return [self.query["project"]]
        doc = _get(f"{self.base}/v1/projects", self.headers)
        return [str(p.get("name")) for p in doc.get("data") or () if p.get("name")]

    def _fetch(self, trace_id: str, progress: Progress | None) -> Iterator[SpanRecord]:
        for project in self._projects():
            count = 0
            cursor = None
            quoted = urllib.parse.quote(project, safe="")
            while True:
                params = {"trace_id": trace_id, "limit": str(self.page_size)}
                if cursor:
                    params["cursor"] = cursor
                url = f"{self.base}/v1/projects/{quoted}/spans?{urllib.parse.urlencode(params)}"
                try:
                    doc = _get(url, self.headers)
                except LookupError:
                    break  # no such project yet (Phoenix answers 404 until its first span)
                data = doc.get("data") or []
                if data:
                    yield from _phoenix.spans(doc, source=url)
                count += len(data)
                if progress is not None:
                    progress(count)
                cursor = doc.get("next_cursor")
                if not cursor or not data:
                    break
            if count:
                return
        raise TraceNotFoundError(trace_id, source=self.url)


SOURCES: dict[str, type[HttpTraceSource]] = {
    "phoenix": PhoenixSource,
    "jaeger": JaegerSource,
    "jaeger-v3": JaegerSource,
    "tempo": TempoSource,
    "zipkin": ZipkinSource,
}
