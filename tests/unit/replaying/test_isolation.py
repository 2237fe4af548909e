"""A replay records in a sandbox: no span leaves the process, nothing reaches the real store, configure() inside
it is sandboxed, and the configuration that was active before is back afterwards."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import TracerProvider

import chronicle_otel as chronicle
from chronicle_otel.config import is_isolated, isolated
from chronicle_otel.store import StoreReader
from tests.conftest import Recorder
from tests.unit.agents import agent, record


class Listener:
    """A loopback TCP listener that counts the connections it accepts (an OTLP endpoint that must stay unused)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def otlp_listener() -> Iterator[Listener]:
    listener = Listener()
    try:
        yield listener
    finally:
        listener.close()


def test_a_replay_sends_nothing_to_the_pipeline_and_writes_nothing_to_the_store(recorder: Recorder) -> None:
    trace = record(recorder, agent, "sell $1,000")
    recorder.memory.clear()
    before = [t.trace_id for t in recorder.store.list_traces()]
    with chronicle.replay(trace) as run:
        assert is_isolated()
        run.rerun()
        assert run.replay_store is not None
        sandbox = run.replay_store
        with contextlib.closing(StoreReader(sandbox)) as reader:
            replayed = reader.list_traces(include_replays=True)
        assert len(replayed) == 1 and replayed[0].root_boundary == "t.agent"  # the replay's own spans, kept apart
        assert replayed[0].replay_of == trace.trace_id
    assert run.report.ok, run.report
    assert recorder.spans() == []  # the application's exporters saw nothing
    assert [t.trace_id for t in recorder.store.list_traces()] == before
    assert not sandbox.exists()  # the temporary store is gone
    assert not is_isolated()
    assert chronicle.get_config() is recorder.config  # the configuration that was active is back


def test_configure_inside_a_replay_is_sandboxed_and_undone(
    recorder: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, otlp_listener: Listener
) -> None:
    trace = record(recorder, agent, "sell $1,000")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{otlp_listener.port}")
    workdir = tmp_path / "service"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    global_provider = trace_api.get_tracer_provider()
    with chronicle.replay(trace) as run:
        # what importing a service module does: configure() with the defaults, OTLP endpoint set
        inner = chronicle.configure(service_name="orders")
        assert inner.store is not None and inner.store.path == run.replay_store
        assert not any("OTLP" in type(p).__name__ for p in inner.processors)
        assert all("OTLP" not in type(getattr(p, "span_exporter", None)).__name__ for p in inner.processors)
        assert trace_api.get_tracer_provider() is global_provider
        run.rerun()
        inner.force_flush()
    assert run.report.ok, run.report
    assert not (workdir / ".chronicle").exists()  # the default store of the working directory was never created
    assert chronicle.get_config() is recorder.config
    assert trace_api.get_tracer_provider() is global_provider
    assert otlp_listener.connections == 0


def test_isolate_false_records_into_the_real_pipeline(recorder: Recorder) -> None:
    trace = record(recorder, agent, "sell $1,000")
    recorder.memory.clear()
    with chronicle.replay(trace, isolate=False) as run:
        assert not is_isolated()
        assert run.replay_store is None
        run.rerun()
    assert {s.name for s in recorder.spans()} == {"t.agent", "t.llm", "t.tool"}


def test_nested_blocks_share_the_outer_store_and_undo_once(recorder: Recorder, tmp_path: Path) -> None:
    with isolated(tmp_path / "kept") as outer:
        sandbox = chronicle.get_config()
        agent("sell $1,000")  # recorded into the named store
        with isolated() as inner:
            assert inner == outer
            assert chronicle.get_config() is sandbox
        assert is_isolated()
    assert not is_isolated()
    assert chronicle.get_config() is recorder.config
    assert (tmp_path / "kept").exists()  # a store you name is yours to keep


def test_isolation_without_any_configuration_still_keeps_spans_in() -> None:
    global_provider = trace_api.get_tracer_provider()
    with isolated() as store:
        config = chronicle.get_config()
        assert isinstance(config.tracer_provider, TracerProvider)
        assert config.tracer_provider is not global_provider  # a private provider, never the global one
        assert config.store is not None and config.store.path == store
        # one batch processor over the sandbox store: the replay's spans are written off the call path
        assert [type(p).__name__ for p in config.processors] == ["BatchProcessor"]

        @chronicle.boundary(name="iso.kept")
        def kept() -> int:
            return 1

        assert kept() == 1
        assert config.force_flush()
        with contextlib.closing(StoreReader(store)) as reader:
            assert [t.root_boundary for t in reader.list_traces(include_replays=True)] == ["iso.kept"]
