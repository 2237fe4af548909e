"""The deployment shape end to end: zero-code instrumentation, uvicorn workers, SIGTERM, pull and replay.

Two FastAPI services run as users run them, ``opentelemetry-instrument uvicorn module:app``, with no tracing code
of their own: the agent service (``deploy_agent_app``, which calls ``chronicle.configure()`` at import) and the
quote service it calls (``deploy_quotes_app``). Both export OTLP/HTTP to rotel, which forwards to Phoenix; the
agent also records into its local store. A burst of requests, then SIGTERM to the uvicorn process (the server
itself: ``opentelemetry-instrument`` execs uvicorn), must leave every request's trace in the store and in
Phoenix, the quote service's server span under the agent's tool boundary. Then the bad run (1,000 shares sold
instead of $1,000 worth) is pulled from Phoenix, turned into a regression test with ``chronicle gen-test``, and
that test passes with the quote service stopped, sending nothing over OTLP.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import chronicle_otel as chronicle
from chronicle_otel.model import Boundary
from chronicle_otel.store import StoreReader
from chronicle_otel.store.reader import is_store
from tests.integration.conftest import REPO, Phoenix, Rotel, _alive, stop_pid
from tests.ports import free_port

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
ORDER = "sell $1,000 of MSFT"
BURST = 60  # concurrent POST /order requests
HELD = 20  # requests in flight when SIGTERM arrives
HEALTH = 10  # concurrent GET /healthz requests in the same burst
DEADLINE = 30.0  # seconds for each wait on a service, the store or Phoenix
AGENT_ROOT, PLAN, TOOL = "deploy.handle_order", "deploy.plan", "deploy.get_quote"
QUOTE_ROUTE = "GET /quote/{symbol}"  # the quote service's server span
ORDER_ROUTE = "POST /order"  # the agent service's server span

# No proxy from the environment may carry a loopback request elsewhere.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


# ------------------------------------------------------------------------------------ services


@dataclass
class App:
    """One ``opentelemetry-instrument uvicorn`` process tree, stopped by PID."""

    proc: subprocess.Popen[bytes]
    url: str
    log: Path
    workers: list[int] = field(default_factory=list)

    def tail(self, size: int = 4000) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else "(no log)"
        return f"--- {self.log.name} (last {size} chars) ---\n{text[-size:]}"

    def stop(self) -> None:
        """SIGTERM, wait (reaping it: an unreaped child still answers ``kill(pid, 0)``), then SIGKILL."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=DEADLINE)
        for pid in self.workers:  # a worker outliving a supervisor that was killed
            if _alive(pid):
                stop_pid(pid)


def _children(pid: int) -> list[int]:
    """The PIDs whose parent is ``pid`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def _cmdline(pid: int) -> list[str]:
    return (Path("/proc") / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[..., App]]:
    """Start ``opentelemetry-instrument uvicorn tests.integration.<module>:app`` on 127.0.0.1; all stopped by PID."""
    started: list[App] = []

    def start(module: str, env: dict[str, str], *, workers: int = 1, server: str = "uvicorn") -> App:
        port = free_port()
        log = tmp_path / f"{module}.log"
        target = f"tests.integration.{module}:app"
        if server == "gunicorn":  # gunicorn's pre-fork workers, each running uvicorn
            command = [str(BIN / "opentelemetry-instrument"), "gunicorn", target, "--bind", f"127.0.0.1:{port}"]
            command += ["--worker-class", "uvicorn_worker.UvicornWorker", "--workers", str(workers)]
        else:
            command = [str(BIN / "opentelemetry-instrument"), "uvicorn", target, "--host", "127.0.0.1"]
            command += ["--port", str(port), "--log-level", "info", "--no-access-log"]
            if workers > 1:
                command += ["--workers", str(workers)]
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                command,
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        app = App(proc, f"http://127.0.0.1:{port}", log)
        started.append(app)
        _wait_started(app, workers)
        if server == "gunicorn":
            app.workers = _children(proc.pid)
        elif workers > 1:
            app.workers = [pid for pid in _children(proc.pid) if "spawn_main" in " ".join(_cmdline(pid))]
        return app

    yield start
    for app in reversed(started):
        app.stop()


def _wait_started(app: App, workers: int) -> None:
    """Every worker has imported the app (and so configured chronicle), and ``/healthz`` answers."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if app.proc.poll() is not None:
            raise RuntimeError(f"uvicorn exited with {app.proc.returncode}\n{app.tail()}")
        text = app.log.read_text(errors="replace") if app.log.exists() else ""
        if text.count("Application startup complete.") >= workers:
            with contextlib.suppress(OSError):
                status, _, _ = _get(f"{app.url}/healthz")
                if status == 200:
                    return
        time.sleep(0.1)
    raise RuntimeError(f"{app.url} not ready within 60s\n{app.tail()}")


def _service_env(service: str, rotel: Rotel, store: Path, project: str, **extra: str) -> dict[str, str]:
    """Zero-code instrumentation configured only by variables, exporting OTLP/HTTP to rotel (then Phoenix)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CHRONICLE_"))}
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",  # opentelemetry-instrument finds this venv's uvicorn
        PYTHONPATH=str(REPO),
        OTEL_SERVICE_NAME=service,
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{rotel.http_port}",
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
        OTEL_RESOURCE_ATTRIBUTES=f"openinference.project.name={project}",
        CHRONICLE_HOME=str(store),
    )
    env.update(extra)
    return env


@dataclass
class Deployment:
    agent: App
    quotes: App
    store: Path
    project: str
    hold: Path
    """Requests sent with ``hold`` announce themselves here and wait for a ``release`` file."""


@pytest.fixture
def deploy(launch: Callable[..., App], rotel_to_phoenix: Rotel, tmp_path: Path) -> Callable[..., Deployment]:
    def start(*, workers: int = 1, export_on_timer: bool = True, server: str = "uvicorn") -> Deployment:
        """``export_on_timer=False``: the agent's OTLP batches leave only when full or flushed (no 5 s timer), so
        what the last requests left queued reaches Phoenix only through the flush on SIGTERM."""
        project = f"deploy-{uuid.uuid4().hex[:8]}"
        store = tmp_path / "store"
        hold = tmp_path / "hold"
        hold.mkdir(exist_ok=True)
        quotes = launch("deploy_quotes_app", _service_env("deploy-quotes", rotel_to_phoenix, store, project))
        agent_env = _service_env(
            "deploy-agent", rotel_to_phoenix, store, project, DEPLOY_QUOTES_URL=quotes.url, DEPLOY_HOLD_DIR=str(hold)
        )
        if not export_on_timer:
            agent_env["OTEL_BSP_SCHEDULE_DELAY"] = "600000"
        agent = launch("deploy_agent_app", agent_env, workers=workers, server=server)
        return Deployment(agent, quotes, store, project, hold)

    return start


# ------------------------------------------------------------------------------------ requests


def _get(url: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    with _OPENER.open(url, timeout=DEADLINE) as resp:
        return resp.status, json.loads(resp.read()), dict(resp.headers)


def _post_order(url: str, seed: int, hold: bool = False) -> tuple[int, dict[str, Any], dict[str, str]]:
    body = json.dumps({"request": ORDER, "seed": seed, "hold": hold}).encode()
    request = urllib.request.Request(f"{url}/order", data=body, headers={"Content-Type": "application/json"})
    with _OPENER.open(request, timeout=DEADLINE) as resp:
        return resp.status, json.loads(resp.read()), dict(resp.headers)


@dataclass
class Burst:
    orders: dict[str, dict[str, Any]]  # trace id -> response body
    health: list[str]  # trace ids of the /healthz requests
    worker_pids: set[str]


def _burst(app: App, seeds: range, health: int) -> Burst:
    """Every request at once; returns when every response has arrived."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(seeds) + health) as pool:
        orders = [pool.submit(_post_order, app.url, seed) for seed in seeds]
        checks = [pool.submit(_get, f"{app.url}/healthz") for _ in range(health)]
        try:
            order_results = [f.result(timeout=DEADLINE * 2) for f in orders]
            health_results = [f.result(timeout=DEADLINE * 2) for f in checks]
        except (OSError, concurrent.futures.TimeoutError) as exc:
            pytest.fail(f"a request of the burst failed: {exc!r}\n{app.tail()}")
    assert all(status == 200 for status, _, _ in order_results + health_results), app.tail()
    by_trace = {headers["x-trace-id"]: body for _, body, headers in order_results}
    assert len(by_trace) == len(seeds), "each request is its own trace"
    pids = {headers["x-worker-pid"] for _, _, headers in order_results}
    return Burst(by_trace, [headers["x-trace-id"] for _, _, headers in health_results], pids)


@contextlib.contextmanager
def _held_requests(deployment: Deployment, seeds: range) -> Iterator[dict[str, dict[str, Any]]]:
    """Requests in flight: sent, arrived (each has announced itself), held until the block ends; then released,
    and their answers (trace id -> body) fill the dictionary yielded."""
    answers: dict[str, dict[str, Any]] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(seeds)) as pool:
        futures = [pool.submit(_post_order, deployment.agent.url, seed, True) for seed in seeds]
        deadline = time.monotonic() + DEADLINE
        while len(list(deployment.hold.glob("*.held"))) < len(seeds):
            assert time.monotonic() < deadline, f"the held requests did not arrive\n{deployment.agent.tail()}"
            time.sleep(0.02)
        try:
            yield answers
        finally:
            (deployment.hold / "release").touch()
        try:
            results = [f.result(timeout=DEADLINE * 2) for f in futures]
        except (OSError, concurrent.futures.TimeoutError) as exc:
            pytest.fail(f"a request in flight at SIGTERM failed: {exc!r}\n{deployment.agent.tail()}")
    assert all(status == 200 for status, _, _ in results), deployment.agent.tail()
    answers.update({headers["x-trace-id"]: body for _, body, headers in results})


def _terminate(app: App) -> float:
    """SIGTERM to the uvicorn process, then wait for it (bounded); returns how long it took to exit."""
    assert "uvicorn" in " ".join(_cmdline(app.proc.pid)), "opentelemetry-instrument execs uvicorn: same PID"
    started = time.monotonic()
    os.kill(app.proc.pid, signal.SIGTERM)
    try:
        app.proc.wait(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        pytest.fail(f"uvicorn did not exit within {DEADLINE}s of SIGTERM\n{app.tail()}")
    return time.monotonic() - started


# ------------------------------------------------------------------------------------ the local store


def _stored_traces(store: Path) -> set[str]:
    if not is_store(store):
        return set()
    reader = StoreReader(store)
    try:
        return {t.trace_id for t in reader.list_traces()}
    finally:
        reader.close()


def _stored_roots(store: Path, trace_ids: Iterable[str]) -> dict[str, Boundary]:
    """The agent boundary of each of these traces that the store already holds."""
    roots = {}
    for trace_id in _stored_traces(store) & set(trace_ids):
        root = chronicle.load_trace(store, trace_id).root
        if root is not None and root.name == AGENT_ROOT:
            roots[trace_id] = root
    return roots


def _check_store(deployment: Deployment, burst: Burst) -> dict[str, chronicle.Trace]:
    """Every order's trace is in the store, whole: agent > (llm, tool > HTTP client span); no health check."""
    stored = _stored_traces(deployment.store)
    missing = sorted(set(burst.orders) - stored)
    assert not missing, (
        f"{len(missing)} of {len(burst.orders)} order traces are not in the local store after SIGTERM "
        f"({len(stored)} stored): {missing[:5]}\n{deployment.agent.tail()}"
    )
    assert not stored & set(burst.health), "health checks carry no boundary: the store leaves them out"
    traces = {}
    for trace_id, body in burst.orders.items():
        trace = chronicle.load_trace(deployment.store, trace_id)
        root = trace.root
        assert root is not None and root.name == AGENT_ROOT and root.kind == "agent", trace
        assert root.output == body, "the agent boundary recorded what the service answered"
        children = {b.name: b for b in trace.boundaries if b.parent is root}
        assert set(children) == {PLAN, TOOL}, trace.boundaries
        assert children[PLAN].kind == "llm" and children[TOOL].kind == "tool"
        server = [s for s in trace.spans if s.name == ORDER_ROUTE]
        assert len(server) == 1 and root.span.parent_span_id == server[0].span_id, "the agent runs in the request"
        client = [s for s in trace.spans if s.kind == 3 and s.parent_span_id == children[TOOL].span_id]
        assert len(client) == 1, f"the tool's httpx call is traced under it: {[s.name for s in trace.spans]}"
        traces[trace_id] = trace
    return traces


# ------------------------------------------------------------------------------------ Phoenix


def _phoenix_spans(phoenix: Phoenix, project: str) -> dict[str, dict[str, dict[str, Any]]]:
    """trace id -> span id -> span, for every span of ``project`` (paged; bounded)."""
    by_trace: dict[str, dict[str, dict[str, Any]]] = {}
    cursor: str | None = None
    for _ in range(100):
        query = {"limit": "1000", **({"cursor": cursor} if cursor else {})}
        url = f"{phoenix.url}/v1/projects/{urllib.parse.quote(project)}/spans?{urllib.parse.urlencode(query)}"
        try:
            _, doc, _ = _get(url)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:  # no span of the project yet
                exc.close()
                return by_trace
            raise
        for span in doc["data"]:
            context = span["context"]
            by_trace.setdefault(context["trace_id"], {})[context["span_id"]] = span
        cursor = doc.get("next_cursor")
        if not cursor or not doc["data"]:
            break
    return by_trace


def _chain(spans: dict[str, dict[str, Any]], span: dict[str, Any]) -> list[str]:
    """Names from ``span`` up to the root (bounded by the number of spans)."""
    names = [span["name"]]
    for _ in range(len(spans)):
        parent = span.get("parent_id")
        if not parent or parent not in spans:
            break
        span = spans[parent]
        names.append(span["name"])
    return names


def _quote_server_span(spans: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    found = [s for s in spans.values() if s["name"] == QUOTE_ROUTE]
    return found[0] if len(found) == 1 else None


def _complete_in_phoenix(spans: dict[str, dict[str, Any]] | None) -> bool:
    if not spans:
        return False
    server = _quote_server_span(spans)
    return server is not None and _chain(spans, server)[-1] == ORDER_ROUTE


def _check_phoenix(
    phoenix: Phoenix, deployment: Deployment, traces: dict[str, chronicle.Trace]
) -> dict[str, dict[str, dict[str, Any]]]:
    """Every order's trace reaches Phoenix whole: the quote service's server span under the tool boundary."""
    deadline = time.monotonic() + DEADLINE
    while True:
        seen = _phoenix_spans(phoenix, deployment.project)
        incomplete = sorted(t for t in traces if not _complete_in_phoenix(seen.get(t)))
        if not incomplete or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert not incomplete, (
        f"{len(incomplete)} of {len(traces)} order traces are missing or incomplete in Phoenix {DEADLINE}s after "
        f"SIGTERM ({len(traces) - len(incomplete)} complete; {len(seen)} traces of the project in Phoenix; "
        f"absent: {sum(1 for t in incomplete if t not in seen)}; e.g. {incomplete[:3]}, span names there: "
        f"{[sorted(s['name'] for s in seen.get(t, {}).values()) for t in incomplete[:2]]})\n"
        f"{deployment.agent.tail()}\n{deployment.quotes.tail(1500)}"
    )
    for trace_id, trace in traces.items():
        spans = seen[trace_id]
        chain = _chain(spans, _quote_server_span(spans))  # type: ignore[arg-type]
        assert TOOL in chain and AGENT_ROOT in chain and chain.index(TOOL) < chain.index(AGENT_ROOT), chain
        tool = trace.find(TOOL)[0]
        assert tool.span_id in spans and spans[tool.span_id]["name"] == TOOL, "the same tool span as in the store"
    return seen


# ------------------------------------------------------------------------------------ the tests


def test_burst_then_sigterm_keeps_every_trace(
    deploy: Callable[..., Deployment], phoenix: Phoenix, capsys: pytest.CaptureFixture[str]
) -> None:
    deployment = deploy(workers=1, export_on_timer=False)
    burst = _burst(deployment.agent, range(BURST), HEALTH)
    shares = sorted(body["shares"] for body in burst.orders.values())
    assert 1000 in shares and 5 in shares, f"the simulated model misreads some requests: {shares}"

    took = _terminate(deployment.agent)
    assert deployment.agent.proc.returncode == -signal.SIGTERM, (
        f"after its graceful shutdown uvicorn re-raises SIGTERM, which ends it\n{deployment.agent.tail()}"
    )
    traces = _check_store(deployment, burst)
    seen = _check_phoenix(phoenix, deployment, traces)
    with capsys.disabled():
        print(
            f"\n[deployment, 1 worker] {BURST} orders + {HEALTH} health checks; exit {took:.2f}s after SIGTERM; "
            f"{len(traces)} order traces in the store, {sum(1 for t in traces if t in seen)} whole in Phoenix; "
            f"{shares.count(1000)} runs sold 1,000 shares"
        )


@pytest.mark.parametrize("server", ["uvicorn", "gunicorn"])
def test_workers_each_flush_on_sigterm_to_the_supervisor(
    deploy: Callable[..., Deployment], phoenix: Phoenix, capsys: pytest.CaptureFixture[str], server: str
) -> None:
    # uvicorn's workers import the application inside their signal capture, so after their graceful shutdown
    # they put back the default action and raise SIGTERM again without reaching chronicle: what they drain
    # after the signal must have been exported as it ended. gunicorn's workers import it first, then run
    # uvicorn, whose shutdown ends by raising the signal into chronicle's handler.
    deployment = deploy(workers=2, export_on_timer=False, server=server)
    workers = deployment.agent.workers
    assert len(workers) == 2, f"{server} with 2 workers spawned {workers}\n{deployment.agent.tail()}"
    burst = _burst(deployment.agent, range(BURST), HEALTH)
    assert burst.worker_pids <= {str(pid) for pid in workers}

    held = range(BURST, BURST + HELD)
    with _held_requests(deployment, held) as drained:
        os.kill(deployment.agent.proc.pid, signal.SIGTERM)  # the supervisor: it stops its workers with SIGTERM
        started = time.monotonic()
        while deployment.agent.log.read_text(errors="replace").count("Shutting down") < len(workers):
            assert time.monotonic() - started < DEADLINE, (
                f"the workers did not begin to shut down\n{deployment.agent.tail()}"
            )
            time.sleep(0.02)
    assert len(drained) == HELD, "the graceful shutdown answered the requests in flight"
    try:
        deployment.agent.proc.wait(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        pytest.fail(f"uvicorn did not exit within {DEADLINE}s of SIGTERM\n{deployment.agent.tail()}")
    took = time.monotonic() - started
    assert deployment.agent.proc.returncode not in (None, -signal.SIGKILL), deployment.agent.tail()
    deadline = time.monotonic() + DEADLINE
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in workers), f"workers outlived the supervisor\n{deployment.agent.tail()}"
    everything = Burst({**burst.orders, **drained}, burst.health, burst.worker_pids)
    traces = _check_store(deployment, everything)
    seen = _check_phoenix(phoenix, deployment, traces)
    with capsys.disabled():
        print(
            f"\n[deployment, {server}, 2 workers] {BURST} orders served by {len(burst.worker_pids)} worker(s), "
            f"then {HELD} in flight at SIGTERM; supervisor exit {took:.2f}s after SIGTERM; {len(traces)} order "
            f"traces in the store, {sum(1 for t in traces if t in seen)} whole in Phoenix"
        )


class _CountingListener(ThreadingHTTPServer):
    """A loopback OTLP/HTTP endpoint that counts the connections it accepts (and answers 200 to anything)."""

    daemon_threads = True

    def __init__(self) -> None:
        self.connections = 0
        self._lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            self.connections += 1
        super().process_request(request, client_address)


@contextlib.contextmanager
def _counting_listener() -> Iterator[_CountingListener]:
    server = _CountingListener()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chronicle_otel.cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=DEADLINE * 3,
        check=False,
    )


_CONTROL = """
from tests.integration import deploy_agent_app
assert deploy_agent_app.plan("sell $1,000 of MSFT", seed=1)["unit"] == "shares"
"""  # an llm boundary call, exported at exit by the provider configure() built from the OTEL_* variables


def _refused(url: str) -> bool:
    host, port = urllib.parse.urlsplit(url).hostname, urllib.parse.urlsplit(url).port
    try:
        with socket.create_connection((host, port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True


def test_the_bad_run_pulled_from_phoenix_replays_offline_without_sending_anything(
    deploy: Callable[..., Deployment], phoenix: Phoenix, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deployment = deploy(workers=1)
    burst = _burst(deployment.agent, range(12), 0)
    bad_answers = {t for t, body in burst.orders.items() if body["shares"] == 1000}
    assert bad_answers and len(bad_answers) < len(burst.orders), burst.orders

    # Find the incident in the store by what the agent answered. A trace is listed as soon as its first spans
    # are written; the children end first, so the agent boundary may come in a later batch: wait for it.
    deadline = time.monotonic() + DEADLINE
    while len(roots := _stored_roots(deployment.store, burst.orders)) < len(burst.orders):
        assert time.monotonic() < deadline, (
            f"the store did not get the 12 agent boundaries ({len(roots)} so far)\n{deployment.agent.tail()}"
        )
        time.sleep(0.2)
    bad = sorted(t for t, root in roots.items() if root.output["shares"] == 1000)
    assert set(bad) == bad_answers
    trace_id = bad[0]

    # Pull it from Phoenix while the services still run (spans keep arriving: --wait until the trace is stable).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CHRONICLE_"))}
    env.update(PYTHONPATH=str(REPO), CHRONICLE_HOME=str(tmp_path / "cli-home"))
    incident = tmp_path / "incident.jsonl"
    source = f"phoenix+{phoenix.url}/?project={deployment.project}"
    pulled = _cli(
        "pull", trace_id, "--from", source, "-o", str(incident), "--wait", "30s", "--quiet", "--json", env=env
    )
    assert pulled.returncode == 0, f"{pulled.stdout}\n{pulled.stderr}"
    summary = json.loads(pulled.stdout.strip().splitlines()[-1])
    assert summary["boundaries"] == 3 and summary["missing_payloads"] == 0, summary
    assert any(s.name == QUOTE_ROUTE for s in chronicle.load_trace(incident).spans), "the downstream span came too"

    # The quote service is gone; so is the agent service.
    deployment.quotes.stop()
    deployment.agent.stop()
    assert _refused(deployment.quotes.url)

    out = tmp_path / "regressions"
    generated = _cli(
        *("gen-test", trace_id, "--file", str(incident), "--out", str(out), "--json"),
        *("--stub", "kind:llm", "--stub", "kind:tool"),
        *("--expect", 'result["shares"] == 1000', "--expect", 'result["status"] == "filled"'),
        env=env,
    )
    assert generated.returncode == 0, f"{generated.stdout}\n{generated.stderr}"
    test_file = Path(json.loads(generated.stdout.strip().splitlines()[-1])["test"])
    source_text = test_file.read_text()
    assert "import tests.integration.deploy_agent_app" in source_text, source_text

    replay_home = tmp_path / "replay-home"
    with _counting_listener() as listener:
        replay_env = {
            **env,
            "CHRONICLE_HOME": str(replay_home),
            "OTEL_SERVICE_NAME": "deploy-agent",
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{listener.server_address[1]}",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "DEPLOY_QUOTES_URL": deployment.quotes.url,
        }
        result = subprocess.run(
            [sys.executable, "-m", "pytest", str(test_file), "-q", "-p", "no:cacheprovider", "--rootdir", str(out)],
            cwd=REPO,
            env=replay_env,
            capture_output=True,
            text=True,
            timeout=DEADLINE * 3,
            check=False,
        )
        connections = listener.connections
        # The control: the same module and variables outside a replay do send (the listener sees it).
        control = subprocess.run(
            [sys.executable, "-c", _CONTROL],
            cwd=REPO,
            env={**replay_env, "CHRONICLE_HOME": str(tmp_path / "control-home")},
            capture_output=True,
            text=True,
            timeout=DEADLINE * 2,
            check=False,
        )
        assert control.returncode == 0, control.stderr
        control_connections = listener.connections - connections
    assert control_connections >= 1, "outside a replay the module's configure() exports to the listener"
    assert result.returncode == 0, f"the generated test failed:\n{result.stdout}\n{result.stderr}\n{source_text}"
    assert "1 passed" in result.stdout, result.stdout
    with capsys.disabled():
        print(
            f"\n[deployment, replay] pulled {summary['spans']} spans / {summary['boundaries']} boundaries of "
            f"{trace_id}; generated test passed offline; OTLP connections during the replay: {connections} "
            f"(control run outside a replay: {control_connections}); "
            f"traces in the replay's CHRONICLE_HOME: {len(_stored_traces(replay_home))}"
        )
    assert connections == 0, "a replay sends nothing over OTLP, even when the project configures at import"
    assert not _stored_traces(replay_home), "a replay records into a temporary store, not $CHRONICLE_HOME"
