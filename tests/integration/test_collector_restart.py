"""The collector dies mid-run and comes back on the same port: the store keeps every span, the counters say the rest.

chronicle exports OTLP (HTTP, then gRPC) to a real rotel collector, which forwards to the in-test receiver.
rotel is killed (SIGKILL) between two flushes, spans are recorded while it is down, then it is started again on
the same ports. Flushing between the phases keeps the test deterministic: no batch is in flight when the collector
dies, so the spans recorded while it was up all reach the receiver and the ones recorded while it was down all fail.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel.store import StoreReader
from tests.integration.conftest import (
    OtlpSink,
    _alive,
    _service_missing,
    _wait_ready,
    find_rotel,
    rotel_settings,
    stop_pid,
)
from tests.ports import free_ports

pytestmark = pytest.mark.integration

UP_BEFORE = 200
DOWN_PER_BATCH = 100
UP_AFTER = 200
# By protocol: the OTLP exporter's timeout (OTEL_EXPORTER_OTLP_TIMEOUT, seconds) and the batches exported while the
# collector is down. Over HTTP a refused export gives up after two attempts about 1 s apart (instead of ~7 s with the
# default 10 s). gRPC reconnects its channel on its own backoff (1 s, x1.6 each attempt): the first export after the
# restart may be refused until the channel is back, and a 10 s budget covers that (a refused export then takes ~7 s).
OUTAGE = {"http/protobuf": ("2", 3), "grpc": ("10", 1)}


class Collector:
    """rotel on fixed 127.0.0.1 ports, which can be killed and started again on the same ports; stopped by PID."""

    def __init__(self, forward_to: str, workdir: Path) -> None:
        binary = find_rotel()
        if binary is None or not binary.exists():
            _service_missing("rotel collector binary not found (CHRONICLE_TEST_ROTEL, .venv-rotel)")
        assert binary is not None
        self.binary = binary
        self.forward_to = forward_to
        self.workdir = workdir
        self.grpc_port, self.http_port = free_ports(2)
        self.pid: int | None = None
        self.starts = 0
        workdir.mkdir(parents=True, exist_ok=True)

    def endpoint(self, protocol: str) -> str:
        return f"http://127.0.0.1:{self.grpc_port if protocol == 'grpc' else self.http_port}"

    def start(self) -> None:
        self.starts += 1
        pid_file = self.workdir / f"rotel-{self.starts}.pid"
        log_file = self.workdir / f"rotel-{self.starts}.log"
        subprocess.run(
            [
                str(self.binary),
                "start",
                "--daemon",
                "--pid-file",
                str(pid_file),
                "--log-file",
                str(log_file),
                "--otlp-grpc-endpoint",
                f"127.0.0.1:{self.grpc_port}",
                "--otlp-http-endpoint",
                f"127.0.0.1:{self.http_port}",
                "--otlp-exporter-endpoint",
                self.forward_to,
            ],
            check=True,
            timeout=30,
            env={**os.environ, **rotel_settings()},
        )
        self.pid = _wait_ready(pid_file, log_file, self.http_port, timeout=15.0)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush; returns once the process is gone."""
        assert self.pid is not None
        os.kill(self.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(self.pid), f"rotel (pid {self.pid}) survived SIGKILL"
        self.pid = None

    def stop(self) -> None:
        if self.pid is not None:
            stop_pid(self.pid)
            self.pid = None


@contextlib.contextmanager
def collector(forward_to: str, workdir: Path) -> Iterator[Collector]:
    running = Collector(forward_to, workdir)
    running.start()
    try:
        yield running
    finally:
        running.stop()


def _phase_of(input_json: str) -> tuple[str, int]:
    request = orjson.loads(input_json)["request"]
    return request["phase"], request["n"]


def _attribute(span_json: dict[str, Any], key: str) -> str:
    for attribute in span_json.get("attributes", []):
        if attribute["key"] == key:
            return str(attribute["value"]["stringValue"])
    raise AssertionError(f"no {key} on span {span_json.get('name')}")


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_store_keeps_everything_and_otlp_counts_the_outage(
    protocol: str,
    otlp_sink: OtlpSink,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    timeout, down_batches = OUTAGE[protocol]
    store_dir = tmp_path / ".chronicle"
    with collector(f"http://127.0.0.1:{otlp_sink.port}", tmp_path / "rotel") as rotel:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rotel.endpoint(protocol))
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", timeout)
        config = chronicle.configure(
            local=True,
            service_name="collector-restart",
            store=chronicle.StoreOptions(path=store_dir, on_full="block"),
            exit_timeout=5,
        )
        try:
            assert set(config.stats().exports) == {"store", "otlp"}

            @config.boundary(kind="tool", name="lookup_quote")
            def lookup_quote(request: dict[str, Any]) -> dict[str, Any]:
                return {"symbol": "MSFT", "price": 190.42, "n": request["n"]}

            def record(phase: str, count: int) -> None:
                for n in range(count):
                    assert lookup_quote({"phase": phase, "n": n}) == {"symbol": "MSFT", "price": 190.42, "n": n}

            # 1. the collector is up: everything goes through it
            record("up-before", UP_BEFORE)
            assert config.force_flush(10_000)
            otlp = config.stats().exports["otlp"]
            assert (otlp.exported, otlp.failed) == (UP_BEFORE, 0)
            otlp_sink.wait_for(UP_BEFORE)  # forwarded before the kill: rotel holds nothing

            # 2. the collector is gone: each export is refused and counted as failed; the store keeps every span
            rotel.kill()
            for batch in range(down_batches):
                record(f"down-{batch}", DOWN_PER_BATCH)
                assert config.force_flush(30_000)  # the refused export gave up within its timeout
            stats = config.stats()
            otlp = stats.exports["otlp"]
            assert (otlp.exported, otlp.failed, otlp.dropped, otlp.queued) == (
                UP_BEFORE,
                down_batches * DOWN_PER_BATCH,
                0,
                0,
            )
            assert otlp.blocked_seconds == 0.0  # the application never waited for the dead collector
            assert stats.exports["store"].exported == UP_BEFORE + down_batches * DOWN_PER_BATCH

            # 3. the collector is back on the same port: exports go through again
            rotel.start()
            record("up-after", UP_AFTER)
            assert config.force_flush(30_000)  # gRPC: up to the export timeout while its channel reconnects
            otlp_sink.wait_for(UP_BEFORE + UP_AFTER)
        finally:
            config.shutdown()

    total = UP_BEFORE + down_batches * DOWN_PER_BATCH + UP_AFTER
    down = down_batches * DOWN_PER_BATCH
    stats = config.stats()
    store, otlp = stats.exports["store"], stats.exports["otlp"]

    # the local store has every span, the outage notwithstanding
    assert (store.accepted, store.exported, store.lost) == (total, total, 0)
    reader = StoreReader(store_dir)
    try:
        traces = reader.list_traces()
        stored = [_phase_of(_attribute(s, sc.INPUT)) for t in traces for s in reader.read_spans(t.trace_id)]
    finally:
        reader.close()
    assert len(traces) == total
    assert len(stored) == len(set(stored)) == total

    # every span recorded is accounted for: exported, failed, dropped, left undelivered or still queued
    assert otlp.exported + otlp.failed + otlp.dropped + otlp.undelivered + otlp.queued == total
    assert otlp.accepted == total  # none dropped: the queue never filled
    assert (otlp.exported, otlp.failed, otlp.dropped, otlp.undelivered, otlp.queued) == (
        UP_BEFORE + UP_AFTER,
        down,
        0,
        0,
        0,
    )
    assert stats.dropped == down  # what did not reach a destination it was meant for

    # the receiver got exactly the spans recorded while the collector was up, each once: what the exporter counted
    received = [
        _phase_of(attr.value.string_value)
        for _, _, span in otlp_sink.spans()
        for attr in span.attributes
        if attr.key == sc.INPUT
    ]
    assert len(received) == otlp.exported
    expected = {("up-before", n) for n in range(UP_BEFORE)} | {("up-after", n) for n in range(UP_AFTER)}
    assert set(received) == expected

    # chronicle said so once, at shutdown, with the counts: not once per failed batch
    ours = [r for r in caplog.records if r.name.startswith("chronicle_otel") and r.levelno >= logging.WARNING]
    assert len(ours) == 1, [r.getMessage() for r in ours]
    message = ours[0].getMessage()
    assert "otlp" in message and f"{UP_BEFORE + UP_AFTER} exported" in message and f"{down} failed" in message
