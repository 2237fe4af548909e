"""chronicle_otel.testing: capture in memory, replay with stubs, payload store, deterministic ids."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import TracerProvider

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel import testing
from chronicle_otel.config import get_config, is_isolated
from chronicle_otel.errors import TraceLoadError, TraceNotFoundError
from chronicle_otel.replaying import SpanRecord
from chronicle_otel.store import PayloadSource, PayloadStore, payload_digest
from tests.conftest import Recorder

LLM_CALLS: list[str] = []


@dataclasses.dataclass(frozen=True)
class Order:
    symbol: str
    quantity: int


@chronicle.boundary(kind="llm", name="testing.plan")
def plan(request: str) -> Order:
    LLM_CALLS.append(request)  # a model call: replays must not make it
    return Order("MSFT", 1000)


@chronicle.boundary(kind="tool", name="testing.place_order")
def place_order(order: Order, note: str) -> dict[str, Any]:
    return {"status": "blocked" if order.quantity > 100 else "filled", "echo": note[:10]}


@chronicle.boundary(kind="agent", name="testing.run_agent")
def run_agent(request: str) -> dict[str, Any]:
    return place_order(plan(request), note="n" * 500)  # a payload longer than a small attribute cap


def record_one(request: str = "Sell $1,000 of MSFT") -> dict[str, Any]:
    with chronicle.session(tenant="acme"):
        return run_agent(request)


# ------------------------------------------------------------------------------------------------ end to end


def test_a_capture_becomes_a_trace_that_replays_with_no_model_call() -> None:
    with testing.capture(capture=chronicle.CaptureOptions(max_attribute_length=64)) as cap:
        answer = record_one()
    assert answer == {"status": "blocked", "echo": "nnnnnnnnnn"}
    trace = cap.trace()
    assert isinstance(trace, chronicle.Trace)
    assert [b.name for b in trace.boundaries] == ["testing.run_agent", "testing.plan", "testing.place_order"]
    assert trace.root is not None and trace.root.session == {"tenant": "acme"}
    assert trace.find("testing.plan")[0].output == Order("MSFT", 1000)
    tool = trace.find("testing.place_order")[0]
    assert tool.raw_input is not None and tool.raw_input.status == "rehydrated"  # cut on the span, whole here
    assert tool.input["note"] == "n" * 500
    assert trace.warnings == ()

    calls = len(LLM_CALLS)
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        assert run.rerun() == answer
    assert len(LLM_CALLS) == calls  # zero live model calls
    assert run.report.ok, run.report


def test_the_trace_is_the_one_loading_the_store_gives(recorder: Recorder) -> None:
    """Same run, recorded by the production path (exporter, store, loader) and by a capture."""
    record_one()
    recorder.config.force_flush()
    stored = chronicle.load_trace(recorder.path, "latest")
    with testing.capture() as cap:
        record_one()
    captured = cap.trace()

    def boundaries(trace: chronicle.Trace) -> list[tuple[Any, ...]]:
        return [
            (b.call_key, b.kind, b.status, dict(b.session), b.raw_input, b.raw_output, b.raw_error)
            for b in trace.boundaries
        ]

    def spans(trace: chronicle.Trace) -> list[dict[str, Any]]:
        fields = ("name", "kind", "attributes", "status", "status_message", "resource", "scope", "flags")
        return [{f: getattr(s, f) for f in fields} for s in sorted(trace.spans, key=lambda s: s.start_ns)]

    assert boundaries(captured) == boundaries(stored)
    assert spans(captured) == spans(stored)


def test_the_capture_leaves_the_global_provider_and_the_configuration_as_they_were(recorder: Recorder) -> None:
    provider, config = trace_api.get_tracer_provider(), get_config()
    before = recorder.store.list_traces()
    with testing.capture() as cap:
        assert get_config() is cap.config and is_isolated()
        assert trace_api.get_tracer_provider() is provider
        record_one()
    assert get_config() is config and not is_isolated()
    assert trace_api.get_tracer_provider() is provider
    recorder.config.force_flush()
    assert recorder.store.list_traces() == before and recorder.spans() == []  # nothing reached the real pipeline
    record_one()  # the configuration in place records again
    recorder.config.force_flush()
    assert len(recorder.store.list_traces()) == len(before) + 1


def test_the_configuration_is_back_when_the_block_raises() -> None:
    config = get_config()
    with pytest.raises(RuntimeError, match="boom"), testing.capture() as cap:
        record_one()
        raise RuntimeError("boom")
    assert get_config() is config
    assert cap.trace().root is not None and cap.trace().root.name == "testing.run_agent"


def test_spans_read_as_loading_reads_them_during_the_block_and_after() -> None:
    during: list[SpanRecord] = []
    with testing.capture(service_name="shop") as cap:
        record_one()
        during = cap.spans()
        with cap.tracer_provider.get_tracer("mine").start_as_current_span("own span"):
            pass
    after = cap.spans()
    assert after[: len(during)] == during
    assert [s.name for s in after] == ["testing.plan", "testing.place_order", "testing.run_agent", "own span"]
    plan_span = after[0]
    assert plan_span.kind == 1 and plan_span.status == "UNSET" and plan_span.scope
    assert plan_span.resource["service.name"] == "shop"
    assert plan_span.attributes[sc.BOUNDARY_NAME] == "testing.plan"
    assert len(cap.finished_spans()) == 4
    assert cap.trace_ids() == [after[0].trace_id]  # the own span's trace has no boundary
    assert after[3].trace_id != after[0].trace_id


def test_errors_say_which_trace_to_ask_for() -> None:
    with testing.capture() as cap:
        pass
    with pytest.raises(TraceLoadError, match="no boundary was recorded"):
        cap.trace()
    with testing.capture() as cap:
        record_one("first")
        record_one("second")
    first, second = cap.trace_ids()
    with pytest.raises(TraceLoadError, match=r"2 traces were recorded .*: pass trace_id"):
        cap.trace()
    assert cap.trace(second).root is not None and cap.trace(second).root.input == {"request": "second"}
    assert [t.trace_id for t in cap.traces()] == [first, second]
    assert cap.trace(second.upper()).trace_id == second
    with pytest.raises(TraceNotFoundError):
        cap.trace("f" * 32)
    with pytest.raises(TypeError):
        cap.trace(1)  # type: ignore[arg-type]


def test_clear_forgets_what_was_captured() -> None:
    with testing.capture(capture=chronicle.CaptureOptions(max_attribute_length=64)) as cap:
        record_one()
        assert len(cap.payloads) > 0
        cap.clear()
        assert cap.spans() == [] and len(cap.payloads) == 0
        record_one("again")
    assert cap.trace().root is not None and cap.trace().root.input == {"request": "again"}
    assert "closed" in repr(cap)


def test_a_replay_inside_the_block_is_captured_but_a_capture_inside_a_replay_is_refused() -> None:
    with testing.capture() as cap:
        record_one()
        trace = cap.trace()
        with chronicle.replay(trace, stub={"kind:llm"}) as run:
            run.rerun()
            with pytest.raises(RuntimeError, match="cannot start inside a replay"), testing.capture():
                pass
    replays = [s for s in cap.spans() if s.attributes.get(sc.REPLAY_OF) == trace.trace_id]
    assert len(replays) == 3


# ------------------------------------------------------------------------------------------------ payload store


def test_the_in_memory_payload_store_round_trips_and_checks_digests() -> None:
    data, other = b'{"a":1}', b'{"b":2}'
    store = testing.InMemoryPayloadStore([(payload_digest(data), data)])
    assert isinstance(store, PayloadStore) and isinstance(store, PayloadSource)
    store.put_payloads([(payload_digest(other), bytearray(other)), (payload_digest(data), data)])
    assert store.get_payload(payload_digest(data)) == data and store.get_payload(payload_digest(other)) == other
    assert store.has_payload(payload_digest(other)) and not store.has_payload("sha256:" + "0" * 64)
    assert store.get_payload("sha256:" + "0" * 64) is None
    assert store.get_payloads([payload_digest(data), "sha256:" + "0" * 64]) == {payload_digest(data): data}
    assert len(store) == 2 and store.digests() == sorted([payload_digest(data), payload_digest(other)])
    with pytest.raises(ValueError, match="digest mismatch"):
        store.put_payloads([(payload_digest(b"x"), b"x"), (payload_digest(b"y"), b"z")])
    assert len(store) == 2  # all or nothing
    store.clear()
    assert len(store) == 0 and repr(store) == "InMemoryPayloadStore(0 payloads)"


def test_the_in_memory_payload_store_records_and_rehydrates(tmp_path: Path) -> None:
    store = testing.InMemoryPayloadStore()
    provider = TracerProvider(id_generator=testing.IncrementalIdGenerator())
    config = chronicle.configure(
        tracer_provider=provider,
        store=chronicle.StoreOptions(path=tmp_path / "spans", processor="simple", durable=False),
        payloads=store,
        capture=chronicle.CaptureOptions(max_attribute_length=64),
        otlp=False,
        local=True,
    )

    @config.boundary(kind="tool", name="testing.big")
    def big(text: str) -> str:
        return text * 2

    big("x" * 300)
    config.force_flush()
    config.shutdown()
    assert len(store) == 2  # the input and the output, both cut on the span
    trace = chronicle.load_trace(tmp_path / "spans", "0" * 31 + "1", store=store)
    (boundary,) = trace.boundaries
    assert boundary.raw_output is not None and boundary.raw_output.status == "rehydrated"
    assert boundary.output == "x" * 600


# ------------------------------------------------------------------------------------------------ ids


def test_ids_are_the_same_in_every_run() -> None:
    def ids() -> list[tuple[str, str, str | None]]:
        with testing.capture() as cap:
            record_one()
        return [(s.trace_id, s.span_id, s.parent_span_id) for s in cap.spans()]

    first, second = ids(), ids()
    assert first == second
    assert first[-1] == ("0" * 31 + "1", "0" * 15 + "1", None)  # the root: first trace, first span


def test_seeded_ids_repeat_per_seed_and_fit_the_id_ranges() -> None:
    a, b, c = testing.SeededIdGenerator(7), testing.SeededIdGenerator(7), testing.SeededIdGenerator("other")
    sequence = [(a.generate_trace_id(), a.generate_span_id()) for _ in range(5)]
    assert sequence == [(b.generate_trace_id(), b.generate_span_id()) for _ in range(5)]
    assert sequence != [(c.generate_trace_id(), c.generate_span_id()) for _ in range(5)]
    assert all(0 < t < 1 << 128 and 0 < s < 1 << 64 for t, s in sequence)
    a.reset()
    assert a.generate_trace_id() == sequence[0][0]
    counter = testing.IncrementalIdGenerator()
    assert [counter.generate_trace_id(), counter.generate_trace_id(), counter.generate_span_id()] == [1, 2, 1]
    counter.reset()
    assert counter.generate_trace_id() == 1


def test_seeded_ids_work_with_the_sdk_provider_and_a_capture() -> None:
    def trace_id(generator: testing.SeededIdGenerator) -> str:
        with testing.capture(id_generator=generator) as cap:
            record_one()
        return cap.trace().trace_id

    assert trace_id(testing.SeededIdGenerator(3)) == trace_id(testing.SeededIdGenerator(3))
    provider = TracerProvider(id_generator=testing.SeededIdGenerator(3))
    with provider.get_tracer("t").start_as_current_span("s") as span:
        assert f"{span.get_span_context().trace_id:032x}" == trace_id(testing.SeededIdGenerator(3))


def test_the_module_is_a_public_submodule() -> None:
    assert chronicle.testing is testing
    assert sorted(testing.__all__) == testing.__all__
