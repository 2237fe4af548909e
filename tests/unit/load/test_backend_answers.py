"""Backends that answer in bad faith, on 127.0.0.1: paging cut short, endless cursors, project names that are path
segments, credentials echoed back, empty answers. Each gives the package's own error, naming what happened."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import chronicle_otel as chronicle
from tests.json_backend import JsonBackend, Route

TID = "0af7651916cd43dd8448eb211c80319c"
SPAN = {
    "context": {"trace_id": TID, "span_id": "b7ad6b7169203331"},
    "name": "agent",
    "span_kind": "INTERNAL",
    "parent_id": None,
    "start_time": "2026-12-01T10:00:00.000000+00:00",
    "end_time": "2026-12-01T10:00:01.000000+00:00",
    "status_code": "OK",
    "status_message": "",
    "attributes": {"chronicle.boundary.kind": "agent", "chronicle.boundary.name": "agent"},
    "events": [],
}


@pytest.fixture
def serve() -> Iterator[Callable[[Route], tuple[str, list[str]]]]:
    """Start a loopback backend answering each GET with ``route(path)``; its host and the paths asked."""
    backends: list[JsonBackend] = []

    def start(route: Route) -> tuple[str, list[str]]:
        backends.append(JsonBackend(route))
        return backends[-1].host, backends[-1].asked

    yield start
    for backend in backends:
        backend.close()


def test_a_page_missing_after_the_first_is_an_incomplete_listing_not_a_shorter_trace(serve: Any) -> None:
    host, asked = serve(
        lambda path: (404, {"detail": "gone"}) if "cursor=" in path else (200, {"data": [SPAN], "next_cursor": "p2"})
    )
    with pytest.raises(chronicle.TraceLoadError, match=r"page 2 of spans .* answered 404 .* the listing is incomplete"):
        chronicle.load_trace(f"phoenix+http://{host}?project=default", TID)
    assert len(asked) == 2


def test_a_project_without_spans_yet_is_still_no_trace(serve: Any) -> None:
    host, _ = serve(lambda path: (404, {"detail": "no such project"}))
    with pytest.raises(chronicle.TraceNotFoundError):
        chronicle.load_trace(f"phoenix+http://{host}?project=default", TID)


def test_an_endless_cursor_is_refused_and_not_quoted(serve: Any) -> None:
    host, asked = serve(lambda path: (200, {"data": [SPAN], "next_cursor": "\x1b[2J" + "A" * 1_000_000}))
    with pytest.raises(chronicle.TraceLoadError, match="next_cursor is 1000004 characters long") as caught:
        chronicle.load_trace(f"phoenix+http://{host}?project=default", TID)
    assert len(str(caught.value)) < 1000 and len(asked) == 1


@pytest.mark.parametrize("name", ["..", "."])
def test_a_project_named_like_a_path_segment_is_never_asked_for(serve: Any, name: str) -> None:
    def route(path: str) -> tuple[int, Any]:
        if path.startswith("/v1/projects?") or path == "/v1/projects":
            return 200, {"data": [{"name": name}], "next_cursor": None}
        return 200, {"data": [SPAN], "next_cursor": None}

    host, asked = serve(route)
    with pytest.raises(chronicle.TraceLoadError, match="cannot be asked for"):
        chronicle.load_trace(f"phoenix+http://{host}", TID)
    assert all(path.startswith("/v1/projects") for path in asked)


def test_credentials_a_backend_echoes_never_reach_the_message(serve: Any) -> None:
    host, _ = serve(
        lambda path: (200, {"trace": {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "hunter2secret"}]}]}]}})
    )
    with pytest.raises(chronicle.TraceLoadError) as caught:
        chronicle.load_trace(f"tempo+http://alice:hunter2secret@{host}", TID)
    assert "hunter2secret" not in str(caught.value) and "***" in str(caught.value)


@pytest.mark.parametrize(
    ("scheme", "answer"),
    [("zipkin", []), ("jaeger", {"data": []}), ("tempo", {"batches": []})],
)
def test_an_empty_answer_is_a_trace_not_found(serve: Any, scheme: str, answer: Any) -> None:
    host, _ = serve(lambda path: (200, answer))
    with pytest.raises(chronicle.TraceNotFoundError):
        chronicle.load_trace(f"{scheme}+http://{host}", TID)


def test_the_whole_pull_has_a_deadline_however_fast_each_answer(serve: Any) -> None:
    import time

    def route(path: str) -> tuple[int, Any]:
        time.sleep(0.2)  # each page well within http_timeout; the pages never end
        return 200, {"data": [SPAN], "next_cursor": f"c{len(path)}-{time.monotonic_ns()}"}

    host, asked = serve(route)
    limits = chronicle.LoadLimits(http_timeout=5, http_total_timeout=1)
    with pytest.raises(chronicle.LoadLimitError, match=r"longer than 1 s.*http_total_timeout") as caught:
        chronicle.load_trace(f"phoenix+http://{host}?project=default", TID, limits=limits)
    assert "CHRONICLE_HTTP_TOTAL_TIMEOUT" in str(caught.value)
    assert len(asked) < 20
