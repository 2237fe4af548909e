"""Spans are flushed on SIGTERM and SIGINT, and the signal then takes its course (real processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

import chronicle_otel as chronicle
from chronicle_otel import config as config_module
from chronicle_otel._internal import signals
from chronicle_otel.store import StoreReader

REPO = Path(__file__).resolve().parents[2]

PRELUDE = """
import os, signal, sys
import chronicle_otel as chronicle

@chronicle.boundary(kind="tool", name="work")
def work(i: int) -> int:
    return i * 2
"""


def _run(tmp_path: Path, body: str, **env: str) -> subprocess.CompletedProcess[str]:
    code = PRELUDE + textwrap.dedent(body)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("CHRONICLE_", "OTEL_"))}
    environ.update(PYTHONPATH=str(REPO), STORE=str(tmp_path / "store"), **env)
    return subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=60)


def _stored(tmp_path: Path) -> int:
    return len(StoreReader(tmp_path / "store").list_traces())


def test_sigterm_with_the_default_action_flushes_then_ends_the_process_by_the_signal(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        """
        chronicle.configure(store=os.environ["STORE"])   # batch processor: spans wait for the export thread
        for i in range(500):
            work(i)
        os.kill(os.getpid(), signal.SIGTERM)
        print("not reached")
        """,
    )
    assert result.returncode == -signal.SIGTERM, result.stderr
    assert "not reached" not in result.stdout
    assert _stored(tmp_path) == 500


def test_a_handler_installed_before_configure_runs_after_the_flush(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        """
        seen = []
        signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
        chronicle.configure(store=os.environ["STORE"])
        for i in range(50):
            work(i)
        os.kill(os.getpid(), signal.SIGTERM)
        from chronicle_otel.store import StoreReader
        print(seen == [signal.SIGTERM], len(StoreReader(os.environ["STORE"]).list_traces()))
        """,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "50"]  # flushed before the application's handler ran


def test_a_server_that_restores_and_reraises_after_its_shutdown_reaches_the_flush(tmp_path: Path) -> None:
    # What uvicorn does: keep the handlers it finds, handle the signal itself (graceful shutdown, during which
    # requests still record), then put the found handlers back and raise the signal again.
    result = _run(
        tmp_path,
        """
        chronicle.configure(store=os.environ["STORE"])
        found = signal.getsignal(signal.SIGTERM)
        stop = []
        signal.signal(signal.SIGTERM, lambda signum, frame: stop.append(signum))
        for i in range(20):
            work(i)
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop == [signal.SIGTERM]
        for i in range(20, 30):   # the graceful shutdown drains in-flight requests
            work(i)
        signal.signal(signal.SIGTERM, found)
        signal.raise_signal(signal.SIGTERM)
        print("not reached")
        """,
    )
    assert result.returncode == -signal.SIGTERM, result.stderr
    assert _stored(tmp_path) == 30


def test_sigint_flushes_and_still_raises_keyboard_interrupt(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        """
        chronicle.configure(store=os.environ["STORE"])
        for i in range(40):
            work(i)
        try:
            os.kill(os.getpid(), signal.SIGINT)
        except KeyboardInterrupt:
            from chronicle_otel.store import StoreReader
            print("interrupted", len(StoreReader(os.environ["STORE"]).list_traces()))
        """,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["interrupted", "40"]


def test_an_ignored_signal_stays_ignored(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        """
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        chronicle.configure(store=os.environ["STORE"])
        work(1)
        os.kill(os.getpid(), signal.SIGTERM)
        print("alive")
        """,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "alive"
    assert _stored(tmp_path) == 1


@pytest.mark.parametrize(("argument", "variable"), [("flush_on_signals=False", ""), ("", "false")])
def test_the_opt_out_leaves_the_handlers_alone(tmp_path: Path, argument: str, variable: str) -> None:
    result = _run(
        tmp_path,
        f"""
        chronicle.configure(store=os.environ["STORE"], {argument})
        print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
        """,
        **({"CHRONICLE_FLUSH_ON_SIGNALS": variable} if variable else {}),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_configure_installs_once_and_the_reset_puts_the_handlers_back(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    chronicle.configure(tracer_provider=TracerProvider(), store=tmp_path / "a")
    chronicle.configure(tracer_provider=TracerProvider(), store=tmp_path / "b")
    handler = signal.getsignal(signal.SIGTERM)
    assert signals.installed(signal.SIGTERM)
    assert handler._chronicle_previous is before  # type: ignore[union-attr]  # chained once, not to itself
    config_module._reset_for_tests()
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_local_configuration_installs_nothing(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    config = chronicle.configure(tracer_provider=TracerProvider(), store=tmp_path / "s", local=True)
    try:
        assert signal.getsignal(signal.SIGTERM) is before
    finally:
        config.shutdown()


def test_configure_outside_the_main_thread_says_it_cannot(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    before = signal.getsignal(signal.SIGTERM)
    errors: list[BaseException] = []

    def configure() -> None:
        try:
            chronicle.configure(tracer_provider=TracerProvider(), store=tmp_path / "s")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=configure)
    thread.start()
    thread.join()
    assert errors == []
    assert signal.getsignal(signal.SIGTERM) is before
    assert any("outside the main thread" in r.getMessage() for r in caplog.records)
