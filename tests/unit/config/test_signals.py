"""Spans are flushed on SIGTERM and SIGINT, and the signal then takes its course (real processes)."""

from __future__ import annotations

import contextlib
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
from chronicle_otel.config import _lifecycle as config_lifecycle
from chronicle_otel.config import _signals as signals
from chronicle_otel.store import StoreReader

REPO = Path(__file__).resolve().parents[3]

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
    with contextlib.closing(StoreReader(tmp_path / "store")) as reader:
        return len(reader.list_traces())


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
    config_lifecycle.reset_for_tests()
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


# A provider the application (or zero-code instrumentation) built, with its own batch exporter: a file, one line
# per span, written only when the batch processor exports (its timer is off: only a flush sends).
ATTACHED = """
import time
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

class LineExporter(SpanExporter):
    def __init__(self, path, delay=0.0):
        self.path, self.delay = path, delay
    def export(self, spans):
        time.sleep(self.delay)
        with open(self.path, "a") as out:
            out.writelines(s.name + "\\n" for s in spans)
        return SpanExportResult.SUCCESS

def exported():
    try:
        with open(os.environ["EXPORTED"]) as lines:
            return sum(1 for _ in lines)
    except FileNotFoundError:
        return 0

def install_provider(delay=0.0):
    provider = TracerProvider()
    provider.add_span_processor(
        BatchSpanProcessor(LineExporter(os.environ["EXPORTED"], delay), schedule_delay_millis=600_000)
    )
    trace.set_tracer_provider(provider)
"""


def _run_attached(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    return _run(tmp_path, ATTACHED + textwrap.dedent(body), EXPORTED=str(tmp_path / "exported.txt"))


def _exported(tmp_path: Path) -> int:
    path = tmp_path / "exported.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_server_whose_handler_came_first_has_its_drained_requests_exported(tmp_path: Path) -> None:
    # What a uvicorn worker does: capture the signals (keeping the default action it found), import the
    # application (which configures chronicle), then on SIGTERM shut down gracefully, put the default action
    # back and raise the signal again: chronicle is not reached a second time, and atexit never runs.
    result = _run_attached(
        tmp_path,
        """
        install_provider()
        stop = []
        found = signal.signal(signal.SIGTERM, lambda signum, frame: stop.append(signum))
        chronicle.configure(store=os.environ["STORE"])
        for i in range(20):
            work(i)
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop == [signal.SIGTERM]
        at_signal = exported()
        for i in range(20, 30):   # requests the server drains: each is exported as it ends
            work(i)
        after_drain = exported()
        print(at_signal, after_drain, flush=True)
        signal.signal(signal.SIGTERM, found)
        signal.raise_signal(signal.SIGTERM)
        print("not reached")
        """,
    )
    assert result.returncode == -signal.SIGTERM, result.stderr
    assert result.stdout.split() == ["20", "30"], result.stdout
    assert _exported(tmp_path) == 30
    assert _stored(tmp_path) == 30


def test_an_export_that_cannot_finish_ends_the_draining(tmp_path: Path) -> None:
    # A dead collector: the flush at the signal times out, so requests drained afterwards are not held up.
    result = _run_attached(
        tmp_path,
        """
        import chronicle_otel.config._lifecycle as config_lifecycle
        config_lifecycle.SIGNAL_FLUSH_MILLIS = 100
        install_provider(delay=1.0)
        signal.signal(signal.SIGTERM, lambda signum, frame: None)
        chronicle.configure(store=os.environ["STORE"])
        work(0)
        os.kill(os.getpid(), signal.SIGTERM)
        started = time.monotonic()
        for i in range(1, 6):
            work(i)
        print(time.monotonic() - started < 0.5)
        """,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True"]  # five calls, none of them waiting for an export


def test_the_draining_lasts_only_the_grace_period(tmp_path: Path) -> None:
    result = _run_attached(
        tmp_path,
        """
        import chronicle_otel.config._lifecycle as config_lifecycle
        config_lifecycle.DRAIN_SECONDS = 0.2
        install_provider()
        signal.signal(signal.SIGTERM, lambda signum, frame: None)
        chronicle.configure(store=os.environ["STORE"])
        work(0)
        os.kill(os.getpid(), signal.SIGTERM)
        work(1)
        during = exported()
        time.sleep(0.3)
        work(2)
        print(during, exported())
        """,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2", "2"]  # the third span waits for the exporter's own schedule again


@pytest.mark.parametrize(
    ("previous", "how"),
    [
        (signal.SIG_DFL, "exit"),
        (signal.SIG_IGN, "ignored"),
        (signal.default_int_handler, "interrupt"),
        (lambda signum, frame: None, "server"),
    ],
)
def test_how_a_signal_goes_on_depends_on_the_handler_found(previous: object, how: str) -> None:
    assert signals.ending(previous) == how
