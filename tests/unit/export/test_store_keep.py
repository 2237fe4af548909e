"""Store hygiene: by default the local store keeps only traces with a boundary span, whatever the export batches."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel._internal.buffer import PayloadBuffer
from chronicle_otel._internal.digest import payload_digest
from chronicle_otel.export._batch import BatchProcessor

BOUNDARY = {sc.BOUNDARY_NAME: "agent.run", sc.BOUNDARY_KIND: "agent"}
UPSTREAM_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
UPSTREAM_SPAN = "00f067aa0ba902b7"


class Setup:
    """A real provider exporting span by span (SimpleSpanProcessor) to a ChronicleExporter over a tmp store."""

    def __init__(self, path: Path, **options: Any) -> None:
        self.exporter = chronicle.ChronicleExporter(chronicle.LocalStore(path, durable=False), **options)
        self.provider = TracerProvider(resource=Resource.create({"service.name": "web"}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("web")

    @property
    def store(self) -> chronicle.LocalStore:
        return self.exporter.store

    def stored(self) -> dict[str, list[str]]:
        """Span names by stored trace id."""
        return {
            t.trace_id: sorted(s["name"] for s in self.store.read_spans(t.trace_id)) for t in self.store.list_traces()
        }

    def health_check(self) -> None:
        with (
            self.tracer.start_as_current_span("GET /health", kind=SpanKind.SERVER),
            self.tracer.start_as_current_span("SELECT 1", kind=SpanKind.CLIENT),
        ):
            pass


@pytest.fixture
def web(tmp_path: Path) -> Iterator[Setup]:
    setup = Setup(tmp_path / "store")
    yield setup
    setup.provider.shutdown()


def upstream_context() -> Context:
    """The context of a request from another process (``traceparent`` header)."""
    return TraceContextTextMapPropagator().extract({"traceparent": f"00-{UPSTREAM_TRACE}-{UPSTREAM_SPAN}-01"})


def counters(exporter: chronicle.ChronicleExporter) -> dict[str, int]:
    names = ("filtered_traces", "filtered_spans", "evicted_spans", "expired_spans", "lost_spans", "held_spans")
    return {name: getattr(exporter, name) for name in names}


# ------------------------------------------------------------------------------------------------ what is kept


def test_health_checks_are_not_stored(web: Setup) -> None:
    for _ in range(5):
        web.health_check()
    assert web.store.list_traces() == []
    assert counters(web.exporter) == {
        "filtered_traces": 5,
        "filtered_spans": 10,
        "evicted_spans": 0,
        "expired_spans": 0,
        "lost_spans": 0,
        "held_spans": 0,
    }


def test_an_agent_trace_whose_http_root_ends_last_is_stored_whole_among_health_checks(tmp_path: Path) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "chat"}))
    config = chronicle.configure(tracer_provider=provider, store=chronicle.StoreOptions(path=tmp_path, durable=False))
    assert isinstance(config.processors[0], BatchProcessor)
    tracer = provider.get_tracer("web")

    @chronicle.boundary(kind="llm", name="llm.call")
    def llm(question: str) -> str:
        return question.upper()

    @chronicle.boundary(kind="agent", name="agent.run")
    def run(question: str) -> str:
        return llm(question)

    for i in range(3):
        with tracer.start_as_current_span("GET /health", kind=SpanKind.SERVER):
            pass
        if i == 1:
            with tracer.start_as_current_span("POST /chat", kind=SpanKind.SERVER):
                with tracer.start_as_current_span("GET /profile", kind=SpanKind.CLIENT):
                    pass
                run("hi")
    assert config.force_flush()
    assert config.store is not None and config.exporter is not None
    [summary] = config.store.list_traces()
    assert (summary.root_name, summary.root_boundary, summary.service, summary.span_count) == (
        "POST /chat",
        "agent.run",
        "chat",
        4,
    )
    names = sorted(s["name"] for s in config.store.read_spans(summary.trace_id))
    assert names == ["GET /profile", "POST /chat", "agent.run", "llm.call"]
    assert config.exporter.filtered_traces == 3


def test_a_client_span_that_ends_before_the_first_boundary_is_stored_with_its_trace(web: Setup) -> None:
    with web.tracer.start_as_current_span("POST /chat", kind=SpanKind.SERVER):
        with web.tracer.start_as_current_span("GET /profile", kind=SpanKind.CLIENT):
            pass
        assert web.exporter.held_spans == 1
        assert web.store.list_traces() == []
        with web.tracer.start_as_current_span("agent.run", attributes=BOUNDARY):
            pass
        assert web.exporter.held_spans == 0
        with web.tracer.start_as_current_span("POST /audit", kind=SpanKind.CLIENT):
            pass  # after the boundary: written directly
    [(_, names)] = web.stored().items()
    assert names == ["GET /profile", "POST /audit", "POST /chat", "agent.run"]
    [summary] = web.store.list_traces()
    assert summary.root_name == "POST /chat" and summary.root_boundary == "agent.run" and summary.span_count == 4
    assert web.exporter.filtered_traces == 0


def test_a_trace_from_another_process_is_stored_when_it_has_a_boundary(web: Setup) -> None:
    with web.tracer.start_as_current_span("GET /health", context=upstream_context(), kind=SpanKind.SERVER):
        pass  # a request of the same upstream trace, with no boundary, before it
    with (
        web.tracer.start_as_current_span("POST /chat", context=upstream_context(), kind=SpanKind.SERVER),
        web.tracer.start_as_current_span("agent.run", attributes=BOUNDARY),
        web.tracer.start_as_current_span("GET /quote", kind=SpanKind.CLIENT),
    ):
        pass
    [summary] = web.store.list_traces()
    assert summary.trace_id == UPSTREAM_TRACE
    assert summary.root_name == "POST /chat" and summary.span_count == 3
    spans = {s["name"]: s for s in web.store.read_spans(UPSTREAM_TRACE)}
    assert sorted(spans) == ["GET /quote", "POST /chat", "agent.run"]
    assert spans["POST /chat"]["parentSpanId"] == UPSTREAM_SPAN
    assert web.exporter.filtered_traces == 1


def test_a_later_request_of_a_dropped_upstream_trace_keeps_its_early_spans(web: Setup) -> None:
    """Two requests of one upstream trace: the first, with no boundary, is dropped; the second is stored whole."""
    with (
        web.tracer.start_as_current_span("POST /prepare", context=upstream_context(), kind=SpanKind.SERVER),
        web.tracer.start_as_current_span("SELECT config", kind=SpanKind.CLIENT),
    ):
        pass
    assert web.exporter.filtered_traces == 1 and web.exporter.filtered_spans == 2
    with web.tracer.start_as_current_span("POST /run", context=upstream_context(), kind=SpanKind.SERVER):
        with web.tracer.start_as_current_span("GET /profile", kind=SpanKind.CLIENT):
            pass
        assert web.exporter.held_spans == 1  # not mistaken for a late span of /prepare
        with web.tracer.start_as_current_span("agent.run", attributes=BOUNDARY):
            pass
    assert web.stored() == {UPSTREAM_TRACE: ["GET /profile", "POST /run", "agent.run"]}
    assert web.exporter.lost_spans == 0


def test_a_root_that_is_a_boundary_is_stored(web: Setup) -> None:
    with (
        web.tracer.start_as_current_span("agent.run", attributes=BOUNDARY),
        web.tracer.start_as_current_span("GET /profile", kind=SpanKind.CLIENT),
    ):
        pass
    assert list(web.stored().values()) == [["GET /profile", "agent.run"]]


def test_spans_that_end_after_their_dropped_root_are_dropped_too(web: Setup) -> None:
    root = web.tracer.start_span("GET /health", kind=SpanKind.SERVER)
    detached = web.tracer.start_span("refresh cache", context=trace.set_span_in_context(root))
    below = web.tracer.start_span("SET key", context=trace.set_span_in_context(detached))
    late = web.tracer.start_span("log", context=trace.set_span_in_context(root))
    root.end()
    assert (web.exporter.filtered_traces, web.exporter.filtered_spans) == (1, 1)
    below.end()  # its parent has not ended: held for now
    assert web.exporter.held_spans == 1
    detached.end()  # below the dropped root: dropped, with what is held below it
    late.end()
    assert web.exporter.held_spans == 0
    assert (web.exporter.filtered_traces, web.exporter.filtered_spans) == (1, 4)
    assert web.store.list_traces() == []


def test_keep_all_stores_every_span_as_it_arrives(tmp_path: Path) -> None:
    setup = Setup(tmp_path, keep="all")
    with setup.tracer.start_as_current_span("POST /chat", kind=SpanKind.SERVER):
        with setup.tracer.start_as_current_span("GET /profile", kind=SpanKind.CLIENT):
            pass
        assert len(setup.store.list_traces()) == 1  # nothing held
    setup.health_check()
    assert sorted(setup.stored().values()) == [["GET /health", "SELECT 1"], ["GET /profile", "POST /chat"]]
    assert counters(setup.exporter) == dict.fromkeys(counters(setup.exporter), 0)
    setup.provider.shutdown()


def test_the_forward_exporter_receives_every_span_unfiltered(tmp_path: Path) -> None:
    forward = InMemorySpanExporter()
    setup = Setup(tmp_path, forward_to=forward)
    setup.health_check()
    with setup.tracer.start_as_current_span("agent.run", attributes=BOUNDARY):
        pass
    assert sorted(s.name for s in forward.get_finished_spans()) == ["GET /health", "SELECT 1", "agent.run"]
    assert list(setup.stored().values()) == [["agent.run"]]
    setup.provider.shutdown()


def test_payloads_of_held_spans_are_stored_with_their_trace_or_dropped_with_it(tmp_path: Path) -> None:
    buffer = PayloadBuffer()
    setup = Setup(tmp_path, payload_buffer=buffer)
    kept, dropped = b'{"kept": true}', b'{"dropped": true}'
    for data, boundary in ((kept, True), (dropped, False)):
        with setup.tracer.start_as_current_span("POST /chat", kind=SpanKind.SERVER):
            with setup.tracer.start_as_current_span("tool") as span:
                buffer.put(span.get_span_context().span_id, [(payload_digest(data), data)])
            if boundary:
                with setup.tracer.start_as_current_span("agent.run", attributes=BOUNDARY):
                    pass
    assert setup.store.get_payload(payload_digest(kept)) == kept
    assert setup.store.get_payload(payload_digest(dropped)) is None
    assert len(buffer) == 0
    setup.provider.shutdown()


# ------------------------------------------------------------------------------------------------ bounds


def _open_requests(setup: Setup, count: int) -> list[trace.Span]:
    """Requests still running, each with one client span ended (held)."""
    roots = []
    for _ in range(count):
        root = setup.tracer.start_span("POST /chat", kind=SpanKind.SERVER)
        with setup.tracer.start_as_current_span("GET /profile", context=trace.set_span_in_context(root)):
            pass
        roots.append(root)
    return roots


def test_a_full_holding_area_drops_the_oldest_trace_counts_it_and_warns_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    setup = Setup(tmp_path, hold_spans=2)
    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        roots = _open_requests(setup, 4)
        assert (setup.exporter.evicted_spans, setup.exporter.held_spans) == (2, 2)
        # The oldest request then turns out to be an agent run: its client span is lost, and said so.
        with setup.tracer.start_as_current_span(
            "agent.run", context=trace.set_span_in_context(roots[0]), attributes=BOUNDARY
        ):
            pass
        roots[0].end()
        roots[1].end()  # evicted too, but no boundary: filtered, not lost
        with setup.tracer.start_as_current_span(
            "agent.run", context=trace.set_span_in_context(roots[2]), attributes=BOUNDARY
        ):
            pass
        roots[2].end()
        roots[3].end()
    assert sorted(setup.stored().values()) == [
        ["GET /profile", "POST /chat", "agent.run"],
        ["POST /chat", "agent.run"],
    ]
    assert counters(setup.exporter) == {
        "filtered_traces": 2,
        "filtered_spans": 3,
        "evicted_spans": 2,
        "expired_spans": 0,
        "lost_spans": 1,
        "held_spans": 0,
    }
    messages = [r.getMessage() for r in caplog.records]
    assert len([m for m in messages if "exceed 2 spans" in m]) == 1
    assert len([m for m in messages if "stored trace misses them" in m]) == 1
    setup.provider.shutdown()


def test_the_holding_area_is_bounded_in_bytes(tmp_path: Path) -> None:
    setup = Setup(tmp_path, hold_bytes=20_000)
    roots = []
    for _ in range(3):
        root = setup.tracer.start_span("POST /chat", kind=SpanKind.SERVER)
        with setup.tracer.start_as_current_span("SELECT", context=trace.set_span_in_context(root)) as span:
            span.set_attribute("db.statement", "x" * 8_000)
        roots.append(root)
    assert (setup.exporter.evicted_spans, setup.exporter.held_spans) == (1, 2)
    for root in roots:
        root.end()
    assert setup.exporter.held_spans == 0
    setup.provider.shutdown()


def test_spans_held_longer_than_the_bound_are_dropped_and_lost_if_a_boundary_follows(tmp_path: Path) -> None:
    setup = Setup(tmp_path, hold_seconds=0)  # expired by the next export
    [root] = _open_requests(setup, 1)
    with setup.tracer.start_as_current_span("agent.run", context=trace.set_span_in_context(root), attributes=BOUNDARY):
        pass
    root.end()
    assert list(setup.stored().values()) == [["POST /chat", "agent.run"]]
    assert (setup.exporter.expired_spans, setup.exporter.lost_spans, setup.exporter.held_spans) == (1, 1, 0)
    setup.provider.shutdown()


def test_a_boundary_after_its_request_ended_counts_the_dropped_request_as_lost(web: Setup) -> None:
    """A detached task: the request answered (its spans had no boundary, so they were dropped), then the task the
    request started calls a boundary in the same trace. The stored trace misses the request: counted and said."""
    with web.tracer.start_as_current_span("POST /order", kind=SpanKind.SERVER) as request:
        with web.tracer.start_as_current_span("db.insert"):
            pass
        context = trace.set_span_in_context(request)
    assert counters(web.exporter)["filtered_spans"] == 2 and web.stored() == {}
    with web.tracer.start_as_current_span("agent.run", context=context, attributes=BOUNDARY):
        pass
    assert list(web.stored().values()) == [["agent.run"]]
    assert web.exporter.lost_spans == 2


def test_flush_keeps_running_traces_held_and_shutdown_drops_them(tmp_path: Path) -> None:
    setup = Setup(tmp_path)
    roots = _open_requests(setup, 2)
    assert setup.exporter.force_flush()
    assert setup.exporter.held_spans == 2
    with setup.tracer.start_as_current_span(
        "agent.run", context=trace.set_span_in_context(roots[0]), attributes=BOUNDARY
    ):
        pass
    assert list(setup.stored().values()) == [["GET /profile", "agent.run"]]
    setup.exporter.shutdown()
    assert counters(setup.exporter) == {
        "filtered_traces": 1,
        "filtered_spans": 1,
        "evicted_spans": 0,
        "expired_spans": 0,
        "lost_spans": 0,
        "held_spans": 0,
    }
    setup.provider.shutdown()


# ------------------------------------------------------------------------------------------------ configuration


def test_keep_comes_from_the_argument_then_the_variable_then_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def exporter_of(**kwargs: Any) -> chronicle.ChronicleExporter:
        kwargs.setdefault("store", tmp_path)
        config = chronicle.configure(tracer_provider=TracerProvider(), local=True, **kwargs)
        assert config.exporter is not None
        config.shutdown()
        return config.exporter

    assert exporter_of().keep == "boundaries"
    assert chronicle.ChronicleExporter(tmp_path).keep == "boundaries"
    monkeypatch.setenv("CHRONICLE_STORE_KEEP", "all")
    assert exporter_of().keep == "all"
    assert chronicle.ChronicleExporter(tmp_path).keep == "all"
    assert exporter_of(store=chronicle.StoreOptions(path=tmp_path, keep="boundaries")).keep == "boundaries"
    assert chronicle.ChronicleExporter(tmp_path, keep="boundaries").keep == "boundaries"


def test_a_bad_keep_value_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(chronicle.ConfigError, match=r"StoreOptions.keep: 'traces'; expected 'boundaries' or 'all'"):
        chronicle.configure(
            tracer_provider=TracerProvider(),
            store=chronicle.StoreOptions(path=tmp_path, keep="traces"),  # type: ignore[arg-type]
            local=True,
        )
    with pytest.raises(chronicle.ConfigError, match=r"StoreOptions\.keep"):
        chronicle.ChronicleExporter(tmp_path, keep="none")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="hold_spans"):
        chronicle.ChronicleExporter(tmp_path, hold_spans=-1)
    monkeypatch.setenv("CHRONICLE_STORE_KEEP", "everything")
    with pytest.raises(chronicle.ConfigError, match="CHRONICLE_STORE_KEEP: 'everything'; expected boundaries or all"):
        chronicle.configure(tracer_provider=TracerProvider(), store=tmp_path, local=True)


# ---------------------------------------------------------------------------------------------- any batches, any order


Shape = tuple[list[int], list[bool], bool]  # parent index of spans 1.., boundary flags, root's parent is remote


@st.composite
def traces_in_batches(draw: st.DrawFn) -> tuple[list[Shape], list[int], list[bool]]:
    """Trees of spans, an order in which the spans end (each local root after the rest of its tree) and cuts."""
    shapes: list[Shape] = []
    for _ in range(draw(st.integers(1, 5))):
        size = draw(st.integers(1, 7))
        parents = [draw(st.integers(0, i - 1)) for i in range(1, size)]
        boundaries = draw(st.lists(st.sampled_from([False, False, False, True]), min_size=size, max_size=size))
        shapes.append((parents, boundaries, draw(st.booleans())))
    total = sum(len(boundaries) for _, boundaries, _ in shapes)
    return shapes, draw(st.permutations(range(total))), draw(st.lists(st.booleans(), min_size=total, max_size=total))


def _spans_of(shapes: list[Shape]) -> list[list[ReadableSpan]]:
    """Real SDK spans for ``shapes``: one list per trace, the local root first."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    for t, (parents, boundaries, remote) in enumerate(shapes):
        context = Context()
        if remote:
            upstream = SpanContext((t + 1) << 64 | 0xC0FFEE, 0xBEEF + t, is_remote=True, trace_flags=TraceFlags(1))
            context = trace.set_span_in_context(NonRecordingSpan(upstream))
        started = []
        for i, boundary in enumerate(boundaries):
            if i:
                context = trace.set_span_in_context(started[parents[i - 1]])
            attributes = {sc.BOUNDARY_NAME: f"b{i}"} if boundary else {}
            started.append(tracer.start_span(f"t{t}s{i}", context=context, attributes=attributes))
        for span in reversed(started):
            span.end()
    provider.shutdown()
    finished = {span.name: span for span in memory.get_finished_spans()}
    return [[finished[f"t{t}s{i}"] for i in range(len(b))] for t, (_, b, _) in enumerate(shapes)]


def _export_in_batches(
    exporter: chronicle.ChronicleExporter, traces: list[list[ReadableSpan]], order: list[int], cuts: list[bool]
) -> None:
    keys = [(t, i) for t, spans in enumerate(traces) for i in range(len(spans))]
    sequence = [keys[k] for k in order]
    for t in range(len(traces)):  # a local root ends after the spans below it
        others = [n for n, (tt, i) in enumerate(sequence) if tt == t and i]
        position = sequence.index((t, 0))
        if others and position < others[-1]:
            sequence.pop(position)
            sequence.insert(others[-1], (t, 0))
    batch: list[ReadableSpan] = []
    for (t, i), cut in zip(sequence, cuts, strict=True):
        batch.append(traces[t][i])
        if cut:
            exporter.export(batch)
            batch = []
    if batch:
        exporter.export(batch)


def _stored_ids(store: chronicle.LocalStore) -> dict[str, set[str]]:
    return {t.trace_id: {s["spanId"] for s in store.read_spans(t.trace_id)} for t in store.list_traces()}


def _ids(spans: list[ReadableSpan]) -> tuple[str, set[str]]:
    ctx = spans[0].get_span_context()
    assert ctx is not None
    return f"{ctx.trace_id:032x}", {f"{s.get_span_context().span_id:016x}" for s in spans}  # type: ignore[union-attr]


@settings(max_examples=60, deadline=None)
@given(traces_in_batches())
def test_stored_traces_are_exactly_those_with_a_boundary_each_whole(
    case: tuple[list[Shape], list[int], list[bool]],
) -> None:
    shapes, order, cuts = case
    traces = _spans_of(shapes)
    with tempfile.TemporaryDirectory() as tmp:
        exporter = chronicle.ChronicleExporter(chronicle.LocalStore(tmp, durable=False))
        _export_in_batches(exporter, traces, order, cuts)
        stored = _stored_ids(exporter.store)
        exporter.shutdown()
    with_boundary = [spans for spans, (_, boundaries, _) in zip(traces, shapes, strict=True) if any(boundaries)]
    without = [spans for spans, (_, boundaries, _) in zip(traces, shapes, strict=True) if not any(boundaries)]
    assert stored == dict(_ids(spans) for spans in with_boundary)
    assert exporter.filtered_traces == len(without)
    assert exporter.filtered_spans == sum(len(spans) for spans in without)
    assert (exporter.evicted_spans, exporter.expired_spans, exporter.lost_spans, exporter.held_spans) == (0, 0, 0, 0)


@settings(max_examples=60, deadline=None)
@given(traces_in_batches(), st.integers(1, 4))
def test_with_a_small_holding_area_every_missing_span_is_counted_as_lost(
    case: tuple[list[Shape], list[int], list[bool]], hold_spans: int
) -> None:
    shapes, order, cuts = case
    traces = _spans_of(shapes)
    with tempfile.TemporaryDirectory() as tmp:
        exporter = chronicle.ChronicleExporter(chronicle.LocalStore(tmp, durable=False), hold_spans=hold_spans)
        _export_in_batches(exporter, traces, order, cuts)
        stored = _stored_ids(exporter.store)
        exporter.shutdown()
    expected = dict(_ids(spans) for spans, (_, b, _) in zip(traces, shapes, strict=True) if any(b))
    assert set(stored) == set(expected)
    for trace_id, ids in stored.items():
        assert ids <= expected[trace_id]
    assert exporter.lost_spans == sum(len(expected[t]) - len(ids) for t, ids in stored.items())
    assert exporter.held_spans == 0 and exporter.expired_spans == 0
