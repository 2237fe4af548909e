"""Per-call overhead of @boundary next to its peers, measured side by side in one run.

Every variant wraps the same function (it returns a precomputed response) and is called with the same payloads:
about 1 KB of JSON in and 1.4 KB out, distinct on every call (a request id changes per call and per repeat, so
nothing can be served from a cache or deduplicated). Every tracing variant ends its spans on the OpenTelemetry
SDK's BatchSpanProcessor over an exporter that counts and discards them, except ``boundary*`` with the local store
(chronicle's batch processor over the store's exporter) and agent-chronicle (no OpenTelemetry span: its own
delivery queue over a control-plane client that counts and discards envelopes).

  bare               a plain function call
  wrapt_noop         a wrapt decorator that only calls through
  sdk_span           an SDK span, no attributes (the OpenTelemetry floor)
  sdk_orjson         an SDK span plus input and output serialised by hand with orjson into two attributes
  sdk_json           the same with json.dumps: the hand-written span, the 1.00 of the ratio column
  traceloop          OpenLLMetry (traceloop-sdk) @task                       [peers virtualenv]
  openinference      OpenInference @tracer.chain                             [peers virtualenv]
  agent_chronicle    agent-chronicle @boundary                               [peers virtualenv]
  boundary           @boundary, full capture, local store (also: the export thread's work per span)
  boundary_nostore   @boundary with store=False
  boundary_disabled  @boundary under configure(enabled=False) (recording off, the wrapper stays)
  nostore_novalues   boundary_nostore with the secret value formats off (key names only): the difference
                     between the two is the cost of scanning each payload for secrets
  sdk_json_100k      sdk_json with 100 KB in / 140 KB out, calls / 50 per repeat (the 1.00 of boundary_100k)
  boundary_100k      boundary with 100 KB in / 140 KB out, calls / 50 per repeat
  sdk_json_1m        sdk_json with 1 MB in / 1.4 MB out, calls / 400 per repeat (the 1.00 of boundary_1m)
  boundary_1m        boundary with 1 MB in / 1.4 MB out, calls / 400 per repeat

How it runs: one long-lived worker process per variant (the peers under the python of the peers virtualenv, made
by benchmarks/peers_env.sh, the rest under this interpreter), all started first and warmed up, then driven repeat
by repeat: repeat r times every variant once, one after another (the order rotates with r), so whatever the machine
does during the run lands on every variant alike. A worker waits on its pipe while the others run (its export
thread idles on a timer). Long-lived workers rather than a fresh process per variant and repeat: start-up (about a
second of imports for traceloop) and warm-up are paid once instead of 98 times, and every repeat measures the same
warmed-up pipeline, the way an application runs; payloads are re-stamped per repeat, so no repeat writes what an
earlier one stored. After each timed loop the worker flushes its pipeline, so every repeat starts with an empty
queue, and reports:

  us/call         wall time of the timed loop / calls (the call path, as the application sees it)
  export CPU      CPU time of every thread but the main one, from the start of the loop until the flush returned,
                  / calls: the export thread's work per span, which a saturated loop cannot hide
  drain           wall time from the end of the loop until everything was exported (force_flush), / calls
  exported        spans (envelopes for agent-chronicle) that reached the exporter / calls; below 1.00 the variant
                  dropped spans

Medians over the repeats; the ratio column divides medians by the hand-written span's. Workers run with the
CHRONICLE_*, OTEL_*, TRACELOOP_* and OPENINFERENCE_* variables of the environment removed, TRACELOOP_TELEMETRY=false,
and a socket guard that refuses (and counts) any connection or name lookup outside the loopback.

Usage: python benchmarks/overhead.py [--calls 20000] [--repeats 7] [--variants a,b,...] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import select
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parents[1]
PEERS_VENV = ROOT / ".venv-bench-peers"
PEERS_ENV_SCRIPT = "benchmarks/peers_env.sh"

PEERS = ("traceloop", "openinference", "agent_chronicle")
VARIANTS = (
    "bare",
    "wrapt_noop",
    "sdk_span",
    "sdk_orjson",
    "sdk_json",
    *PEERS,
    "boundary",
    "boundary_nostore",
    "boundary_disabled",
    "nostore_novalues",
    "sdk_json_100k",
    "boundary_100k",
    "sdk_json_1m",
    "boundary_1m",
)
HAND_WRITTEN = "sdk_json"
TIMES, DASH = "\u00d7", "\u2013"  # the table's multiplication sign and en dash
# Variants that record nothing: their exported column is not a drop.
NOT_RECORDING = frozenset({"bare", "wrapt_noop", "boundary_disabled"})
# Bytes of JSON in and out per call, and how many fewer calls a repeat makes.
SIZES = {
    "sdk_json_100k": (100_000, 140_000, 50),
    "boundary_100k": (100_000, 140_000, 50),
    "sdk_json_1m": (1_000_000, 1_400_000, 400),
    "boundary_1m": (1_000_000, 1_400_000, 400),
}
# The hand-written span each large-payload variant is compared with: the one with the same payloads.
SIZED_HAND_WRITTEN = {"boundary_100k": "sdk_json_100k", "boundary_1m": "sdk_json_1m"}
DEFAULT_SIZE = (1_000, 1_400, 1)

LABELS = {
    "bare": "bare call",
    "wrapt_noop": "wrapt no-op decorator",
    "sdk_span": "SDK span, no attributes (the OpenTelemetry floor)",
    "sdk_orjson": "SDK span + orjson of input and output by hand",
    "sdk_json": "SDK span + json.dumps of input and output by hand (**the hand-written span**)",
    "traceloop": "OpenLLMetry (traceloop-sdk{version}) @task",
    "openinference": "OpenInference{version} @tracer.chain",
    "agent_chronicle": "agent-chronicle{version} @boundary (no OTel span)",
    "boundary": "@boundary, full capture + local store",
    "boundary_nostore": "@boundary, no local store",
    "boundary_disabled": "@boundary, configure(enabled=False)",
    "nostore_novalues": "@boundary, no local store, secret value formats off",
    "sdk_json_100k": "the hand-written span, 100 KB in / 140 KB out",
    "boundary_100k": "@boundary + local store, 100 KB in / 140 KB out",
    "sdk_json_1m": "the hand-written span, 1 MB in / 1.4 MB out",
    "boundary_1m": "@boundary + local store, 1 MB in / 1.4 MB out",
}
PEER_PACKAGES = {
    "traceloop": "traceloop-sdk",
    "openinference": "openinference-instrumentation",
    "agent_chronicle": "agent-chronicle",
}
STRIPPED_ENV_PREFIXES = ("CHRONICLE_", "OTEL_", "TRACELOOP_", "OPENINFERENCE_")
REPLY_TIMEOUT = 900.0


# ------------------------------------------------------------------------------------------------ payloads

_VOCABULARY = (
    "sell buy order market limit shares confirm account balance portfolio quote price position risk review the a "
    "of to and for with at by on MSFT AAPL NVDA $1,000 $190.42 5 12 250 order-7731 settled pending filled "
    "partially assistant tool result retry latency model tokens context window summary plan step check verify "
    "customer request policy compliance ledger transfer fee tax report quarter revenue growth margin"
)
_WORDS = _VOCABULARY.split(" ")


def _text(rng: random.Random, size: int) -> str:
    """Deterministic prose of exactly ``size`` characters."""
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:size]


def _fit(build: Callable[[int, random.Random], dict[str, Any]], target: int, seed: int) -> dict[str, Any]:
    """The object ``build(n, rng)`` whose JSON is ``target`` characters long (``n`` sizes its free text)."""
    free = target
    for _ in range(8):
        value = build(free, random.Random(seed))
        missing = target - len(json.dumps(value))
        if missing == 0 or free + missing < 0:
            break
        free += missing
    return value


def _request_template(size: int) -> dict[str, Any]:
    def build(free: int, rng: random.Random) -> dict[str, Any]:
        system = min(free // 3, 600)
        messages = [{"role": "system", "content": _text(rng, system)}]
        rest = free - system
        role = "user"
        while rest > 0 or len(messages) < 2:
            # A chat history: turns of up to 4,000 characters, each with ~37 characters of JSON around it.
            take = min(4_000, max(rest - 37, 0))
            messages.append({"role": role, "content": _text(rng, take)})
            rest -= take + 37
            role = "assistant" if role == "user" else "user"
        return {"id": "req-0000000-00000", "seq": 0, "model": "gpt-4.1-mini", "temperature": 0.7, "messages": messages}

    return _fit(build, size, 1)


def _response_template(size: int) -> dict[str, Any]:
    def build(free: int, rng: random.Random) -> dict[str, Any]:
        return {
            "id": "resp-0000000-00000",
            "model": "gpt-4.1-mini-2025-04-14",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": _text(rng, free)}, "finish_reason": "stop"}
            ],
            "usage": {"input_tokens": 212, "output_tokens": 96},
        }

    return _fit(build, size, 2)


class Payloads:
    """``count`` distinct requests and their responses; :meth:`stamp` makes them distinct from other repeats."""

    def __init__(self, count: int, size_in: int, size_out: int) -> None:
        request = _request_template(size_in)
        response = _response_template(size_out)
        self.requests = [
            {**request, "seq": i, "messages": [dict(m) for m in request["messages"]]} for i in range(count)
        ]
        self.responses = [
            {**response, "choices": [{**c, "message": dict(c["message"])} for c in response["choices"]]}
            for _ in range(count)
        ]
        self.size_in = len(json.dumps(self.requests[0]))
        self.size_out = len(json.dumps(self.responses[0]))

    def stamp(self, repeat: int) -> None:
        for i, (request, response) in enumerate(zip(self.requests, self.responses, strict=False)):
            request["id"] = f"req-{repeat:07d}-{i:05d}"
            response["id"] = f"resp-{repeat:07d}-{i:05d}"

    def work(self) -> Callable[[dict[str, Any]], dict[str, Any]]:
        responses = self.responses

        def llm(request: dict[str, Any]) -> dict[str, Any]:
            return responses[request["seq"]]

        return llm


# ------------------------------------------------------------------------------------------------ variants


@dataclass
class Bench:
    """One variant, built in its worker."""

    call: Callable[[dict[str, Any]], Any]
    flush: Callable[[], object] = lambda: None
    exported: Callable[[], int] = lambda: 0
    extra: Callable[[], dict[str, Any]] = dict
    final: Callable[[], dict[str, Any]] = dict
    version: str = ""


class _Counter:
    """Counts what an exporter (or client) was handed; keeps one sample of its attributes when asked."""

    def __init__(self) -> None:
        self.count = 0
        self.want_sample = True
        self.sample: dict[str, Any] = {}


def _discarding_exporter(counter: _Counter) -> Any:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class Discard(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            counter.count += len(spans)
            if counter.want_sample and spans:
                counter.want_sample = False
                attributes = dict(spans[-1].attributes or {})
                counter.sample = {
                    "attributes": len(attributes),
                    "chars": sum(len(str(k)) + len(str(v)) for k, v in attributes.items()),
                }
            return SpanExportResult.SUCCESS

        def shutdown(self) -> None:
            pass

    return Discard()


def _sdk_version() -> str:
    from importlib.metadata import version

    return version("opentelemetry-sdk")


def _sdk_provider(counter: _Counter) -> tuple[Any, Any]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    processor = BatchSpanProcessor(_discarding_exporter(counter))
    provider.add_span_processor(processor)
    return provider, processor


def build(variant: str, work: Callable[[dict[str, Any]], Any], store_dir: str) -> Bench:
    """Set up ``variant`` around ``work`` (raises ImportError when its package is missing)."""
    counter = _Counter()
    if variant == "bare":
        return Bench(call=work)
    if variant == "wrapt_noop":
        import wrapt

        @wrapt.decorator
        def passthrough(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            return wrapped(*args, **kwargs)

        return Bench(call=passthrough(work))
    if variant in ("sdk_span", "sdk_orjson", "sdk_json"):
        return _build_sdk(variant, work, counter)
    if variant.startswith("sdk_json_"):  # the hand-written span with large payloads
        return _build_sdk("sdk_json", work, counter)
    if variant == "traceloop":
        return _build_traceloop(work, counter)
    if variant == "openinference":
        return _build_openinference(work, counter)
    if variant == "agent_chronicle":
        return _build_agent_chronicle(work, counter)
    return _build_boundary(variant, work, store_dir, counter)


def _build_sdk(variant: str, work: Callable[[dict[str, Any]], Any], counter: _Counter) -> Bench:
    provider, processor = _sdk_provider(counter)
    tracer = provider.get_tracer("bench")
    if variant == "sdk_span":

        def call(request: dict[str, Any]) -> Any:
            with tracer.start_as_current_span("llm"):
                return work(request)

    else:
        if variant == "sdk_orjson":
            import orjson

            def dumps(value: Any) -> str:
                return orjson.dumps(value).decode()

        else:
            dumps = json.dumps

        def call(request: dict[str, Any]) -> Any:
            with tracer.start_as_current_span("llm") as span:
                span.set_attribute("input", dumps(request))
                result = work(request)
                span.set_attribute("output", dumps(result))
                return result

    return Bench(call=call, flush=processor.force_flush, exported=lambda: counter.count, extra=lambda: counter.sample)


def _build_traceloop(work: Callable[[dict[str, Any]], Any], counter: _Counter) -> Bench:
    from importlib.metadata import version

    from opentelemetry import trace
    from traceloop.sdk import Traceloop
    from traceloop.sdk.decorators import task

    # A custom exporter: traceloop builds the SDK's BatchSpanProcessor over it (disable_batch=False), sends no
    # metrics or logs, and sets its provider as the global one.
    Traceloop.init(
        app_name="bench", exporter=_discarding_exporter(counter), disable_batch=False, telemetry_enabled=False
    )
    provider = trace.get_tracer_provider()
    call = task(name="llm")(work)
    return Bench(
        call=call,
        flush=provider.force_flush,  # type: ignore[attr-defined]
        exported=lambda: counter.count,
        extra=lambda: counter.sample,
        version=version("traceloop-sdk"),
    )


def _build_openinference(work: Callable[[dict[str, Any]], Any], counter: _Counter) -> Bench:
    from importlib.metadata import version

    from openinference.instrumentation import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(_discarding_exporter(counter)))
    tracer = provider.get_tracer("bench")
    call = tracer.chain(name="llm")(work)
    return Bench(
        call=call,
        flush=provider.force_flush,
        exported=lambda: counter.count,
        extra=lambda: counter.sample,
        version=version("openinference-instrumentation"),
    )


def _build_agent_chronicle(work: Callable[[dict[str, Any]], Any], counter: _Counter) -> Bench:
    from importlib.metadata import version

    import chronicle as agent_chronicle  # agent-chronicle's import name

    class DiscardingControlPlane:
        """Takes the writes agent-chronicle's delivery thread makes, counts the envelopes, keeps nothing."""

        def upsert_trace(self, trace: Any) -> None:
            pass

        def upsert_span(self, span: Any) -> None:
            pass

        def append_envelopes(self, envelopes: Sequence[Any]) -> None:
            counter.count += len(envelopes)
            if counter.want_sample and envelopes:
                counter.want_sample = False
                counter.sample = {"chars": len(envelopes[-1].model_dump_json())}

        def read_span_envelopes(self, trace_id: str, span_id: str) -> list[Any]:
            return []

        def close(self) -> None:
            pass

    # With an injected client, envelopes go through agent-chronicle's own queue and background delivery thread
    # (batches of 50, a 10,000-record queue that drops when full) instead of HTTP to a control plane.
    agent_chronicle.configure(client=DiscardingControlPlane(), service_name="bench")
    call = agent_chronicle.boundary("llm", kind="llm")(work)

    def dropped() -> dict[str, Any]:
        from chronicle.interfaces import runtime_utils

        sink = runtime_utils._state.sink
        return {**counter.sample, "queue_dropped": sink.dropped if sink is not None else None}

    return Bench(
        call=call,
        flush=agent_chronicle.flush,
        exported=lambda: counter.count,
        extra=dropped,
        version=version("agent-chronicle"),
    )


def _build_boundary(variant: str, work: Callable[[dict[str, Any]], Any], store_dir: str, counter: _Counter) -> Bench:
    from opentelemetry.sdk.trace import TracerProvider

    import chronicle_otel as chronicle

    if variant in ("boundary", "boundary_100k", "boundary_1m"):
        provider = TracerProvider()
        config = chronicle.configure(tracer_provider=provider, store=chronicle.StoreOptions(path=store_dir))

        def store_counts() -> dict[str, Any]:
            stats = config.stats()
            exports = stats.exports.get("store")
            buffer = getattr(getattr(config, "_pipeline", None), "payload_buffer", None)
            return {
                "store_dropped": exports.dropped if exports else None,
                "store_failed": exports.failed if exports else None,
                "blocked_seconds": exports.blocked_seconds if exports else None,
                "payloads_dropped": getattr(buffer, "dropped", None),
            }

        def store_exported() -> int:
            exports = config.stats().exports.get("store")
            return exports.exported if exports else 0

        def stored() -> dict[str, Any]:
            # What the store holds after the last flush, read back: one trace per call.
            store = config.store
            return {"store_traces": len(store.list_traces()) if store is not None else None}

        recorded = chronicle.boundary(kind="llm", name="llm")(work)
        return Bench(call=recorded, flush=config.force_flush, exported=store_exported, extra=store_counts, final=stored)

    provider, _ = _sdk_provider(counter)
    if variant == "boundary_disabled":
        chronicle.configure(tracer_provider=provider, store=False, enabled=False)
    else:
        redaction = chronicle.RedactionOptions(value_defaults=False) if variant == "nostore_novalues" else None
        chronicle.configure(tracer_provider=provider, store=False, redaction=redaction)
    recorded = chronicle.boundary(kind="llm", name="llm")(work)
    return Bench(
        call=recorded, flush=provider.force_flush, exported=lambda: counter.count, extra=lambda: counter.sample
    )


# ------------------------------------------------------------------------------------------------ the worker


class NetGuard:
    """Refuses and records any socket connection or name lookup outside the loopback."""

    def __init__(self) -> None:
        self.attempts: list[str] = []

    @staticmethod
    def _loopback(host: Any) -> bool:
        if host is None:
            return True
        if isinstance(host, bytes):
            host = host.decode("ascii", "replace")
        name = str(host).strip("[]").lower()
        return name in ("", "localhost", "::1") or name.startswith("127.")

    def install(self) -> None:
        import socket

        guard = self

        def refuse(what: str) -> OSError:
            guard.attempts.append(what)
            return OSError(f"network access refused by the benchmark: {what}")

        real_getaddrinfo = socket.getaddrinfo
        real_gethostbyname = socket.gethostbyname
        real_connect = socket.socket.connect
        real_connect_ex = socket.socket.connect_ex

        def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
            if not guard._loopback(host):
                raise refuse(f"getaddrinfo {host!r}")
            return real_getaddrinfo(host, *args, **kwargs)

        def gethostbyname(host: Any) -> Any:
            if not guard._loopback(host):
                raise refuse(f"gethostbyname {host!r}")
            return real_gethostbyname(host)

        def check(sock: Any, address: Any) -> None:
            if sock.family == getattr(socket, "AF_UNIX", None):
                return
            host = address[0] if isinstance(address, tuple) else address
            if not guard._loopback(host):
                raise refuse(f"connect {address!r}")

        def connect(sock: Any, address: Any) -> Any:
            check(sock, address)
            return real_connect(sock, address)

        def connect_ex(sock: Any, address: Any) -> Any:
            check(sock, address)
            return real_connect_ex(sock, address)

        socket.getaddrinfo = getaddrinfo
        socket.gethostbyname = gethostbyname
        socket.socket.connect = connect  # type: ignore[method-assign]
        socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]


def _measure(bench: Bench, payloads: Payloads, repeat: int) -> dict[str, Any]:
    payloads.stamp(repeat)
    requests = payloads.requests
    call = bench.call
    gc.collect()
    before = bench.exported()
    cpu0, main0, t0 = time.process_time_ns(), time.thread_time_ns(), time.perf_counter_ns()
    for request in requests:
        call(request)
    t1, main1 = time.perf_counter_ns(), time.thread_time_ns()
    bench.flush()
    t2, cpu2, main2 = time.perf_counter_ns(), time.process_time_ns(), time.thread_time_ns()
    return {
        "repeat": repeat,
        "calls": len(requests),
        "loop_ns": t1 - t0,
        "main_cpu_ns": main1 - main0,
        "drain_ns": t2 - t1,
        "background_cpu_ns": (cpu2 - cpu0) - (main2 - main0),
        "exported": bench.exported() - before,
    }


def worker(variant: str, calls: int) -> int:
    # The protocol owns the real stdout; whatever the libraries print goes to stderr (the worker's log).
    protocol: TextIO = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    guard = NetGuard()
    guard.install()

    def send(message: dict[str, Any]) -> None:
        protocol.write(json.dumps(message) + "\n")

    size_in, size_out, divisor = SIZES.get(variant, DEFAULT_SIZE)
    count = max(calls // divisor, 5)
    payloads = Payloads(count, size_in, size_out)
    with tempfile.TemporaryDirectory(prefix="chronicle-bench-") as store_dir:
        try:
            bench = build(variant, payloads.work(), store_dir)
        except ImportError as exc:
            send({"status": "not installed", "detail": f"{type(exc).__name__}: {exc}"})
            return 0
        send(
            {
                "status": "ready",
                "python": sys.version.split()[0],
                "executable": sys.executable,
                "otel_sdk": _sdk_version(),
                "version": bench.version,
                "calls": count,
                "bytes_in": payloads.size_in,
                "bytes_out": payloads.size_out,
            }
        )
        for line in sys.stdin:
            command = line.split()
            if not command:
                continue
            if command[0] == "warmup":
                saved = payloads.requests
                payloads.requests = saved[: max(min(2000, count // 4), 1)]
                _measure(bench, payloads, 9_999_999)
                payloads.requests = saved
                send({"status": "warm", "sample": bench.extra()})
            elif command[0] == "run":
                send(_measure(bench, payloads, int(command[1])))
            elif command[0] == "finish":
                final = {**bench.extra(), **bench.final(), "exported_with_warmup": bench.exported()}
                send({"status": "done", "extra": final, "network": guard.attempts})
                break
    return 0


# ------------------------------------------------------------------------------------------------ the driver


def peers_python(explicit: str | None) -> Path:
    chosen = explicit or os.environ.get("CHRONICLE_BENCH_PEERS_PYTHON")
    return Path(chosen) if chosen else PEERS_VENV / "bin" / "python"


def worker_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(STRIPPED_ENV_PREFIXES)}
    env["TRACELOOP_TELEMETRY"] = "false"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


class Worker:
    """A worker process, driven over its pipes."""

    def __init__(self, variant: str, python: Path, calls: int, log_dir: Path) -> None:
        self.variant = variant
        self.log = log_dir / f"{variant}.log"
        self.info: dict[str, Any] = {}
        self.samples: list[dict[str, Any]] = []
        self.error: str | None = None
        self.proc: subprocess.Popen[str] | None = None
        if not python.exists():
            self.error = f"not installed (no {python}: bash {PEERS_ENV_SCRIPT})"
            return
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [str(python), str(Path(__file__).resolve()), "--worker", variant, "--calls", str(calls)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                cwd=ROOT,
                env=worker_env(),
            )

    @property
    def alive(self) -> bool:
        return self.error is None and self.proc is not None

    def _read(self) -> dict[str, Any] | None:
        assert self.proc is not None and self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], REPLY_TIMEOUT)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            tail = self.log.read_text(errors="replace").strip().splitlines()[-15:]
            self.fail("failed" if ready else f"no answer in {REPLY_TIMEOUT:.0f} s", tail)
            return None
        reply: dict[str, Any] = json.loads(line)
        return reply

    def fail(self, why: str, tail: Sequence[str] = ()) -> None:
        self.error = why
        print(f"overhead: {self.variant}: {why} (log: {self.log})", file=sys.stderr)
        for text in tail:
            print(f"  {text}", file=sys.stderr)
        self.stop()

    def ask(self, command: str) -> dict[str, Any] | None:
        if not self.alive:
            return None
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            self.fail("exited")
            return None
        return self._read()

    def start(self) -> None:
        if not self.alive:
            return
        reply = self._read()
        if reply is None:
            return
        if reply["status"] != "ready":
            self.error = f"{reply['status']} ({reply.get('detail', '')})"
            self.stop()
            return
        self.info = reply

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def run(variants: Sequence[str], calls: int, repeats: int, peers: Path, log_dir: Path) -> dict[str, Any]:
    here = Path(sys.executable)
    workers = {v: Worker(v, peers if v in PEERS else here, calls, log_dir) for v in variants}
    try:
        for w in workers.values():
            w.start()
        for w in workers.values():  # one at a time: warm-ups do not compete for the two cores
            reply = w.ask("warmup")
            if reply is not None:
                w.info["sample"] = reply.get("sample", {})
        for r in range(repeats):
            shift = r % len(variants)
            for v in [*variants[shift:], *variants[:shift]]:
                reply = workers[v].ask(f"run {r}")
                if reply is not None:
                    workers[v].samples.append(reply)
            print(f"overhead: repeat {r + 1}/{repeats} done", file=sys.stderr)
        for w in workers.values():
            reply = w.ask("finish")
            if reply is not None:
                w.info["extra"] = reply.get("extra", {})
                w.info["network"] = reply.get("network", [])
    finally:
        for w in workers.values():
            w.stop()
    results = {v: summarise(w) for v, w in workers.items()}
    hand = (
        {s["repeat"]: s["loop_ns"] / s["calls"] for s in workers[HAND_WRITTEN].samples}
        if HAND_WRITTEN in workers
        else {}
    )
    for v, w in workers.items():
        # The ratio within each repeat (the two ran seconds apart), median over the repeats: the JSON output's
        # cross-check of the table's ratio of medians.
        paired = [s["loop_ns"] / s["calls"] / hand[s["repeat"]] for s in w.samples if hand.get(s["repeat"])]
        if paired and v not in SIZES:
            results[v]["ratio_paired_median"] = statistics.median(paired)
    return results


def summarise(w: Worker) -> dict[str, Any]:
    out: dict[str, Any] = {"variant": w.variant, "error": w.error, **w.info}
    samples = w.samples
    if not samples:
        return out
    per_call = [s["loop_ns"] / s["calls"] / 1000 for s in samples]
    calls = sum(s["calls"] for s in samples)
    out.update(
        repeats=len(samples),
        us=statistics.median(per_call),
        us_min=min(per_call),
        us_max=max(per_call),
        us_samples=[round(x, 3) for x in per_call],
        main_cpu_us=statistics.median(s["main_cpu_ns"] / s["calls"] / 1000 for s in samples),
        export_cpu_us=statistics.median(s["background_cpu_ns"] / s["calls"] / 1000 for s in samples),
        drain_us=statistics.median(s["drain_ns"] / s["calls"] / 1000 for s in samples),
        calls_total=calls,
        exported_total=sum(s["exported"] for s in samples),
    )
    return out


def _fmt(value: float) -> str:
    return f"{value:.2f}" if value < 100 else f"{value:.0f}"


def table(report: dict[str, Any]) -> str:
    results: dict[str, Any] = report["variants"]
    hand = results.get(HAND_WRITTEN, {})
    lines = [
        f"| variant | µs/call | {TIMES} hand-written span | call CPU µs | {TIMES} hand-written (CPU) "
        f"| export CPU µs/span | drain µs/span | exported / calls | spread (min{DASH}max µs/call) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    notes: list[str] = []

    def ratio(v: str, key: str) -> str:
        if v == HAND_WRITTEN:
            return "**1.00**"
        if v in SIZES:  # against the hand-written span with the same payloads
            base = results.get(SIZED_HAND_WRITTEN.get(v, ""), {})
            if v in SIZED_HAND_WRITTEN.values():
                return "1.00 (same size)"
            return f"{results[v][key] / base[key]:.2f} (same size)" if base.get(key) else DASH
        if not hand.get(key):
            return DASH
        return f"{results[v][key] / hand[key]:.2f}"

    for v, r in results.items():
        label = LABELS[v].format(version=f" {r['version']}" if r.get("version") else "")
        if "us" not in r:
            lines.append(f"| {label} | {r.get('error') or 'no result'} | | | | | | | |")
            continue
        quiet = v in NOT_RECORDING
        extra = r.get("extra") or {}
        if quiet:
            exported = DASH
        else:
            exported = f"{r['exported_total'] / r['calls_total']:.2f}"
            if r["exported_total"] != r["calls_total"]:
                exported += " **DROPS**"
                causes = {k: n for k, n in extra.items() if "drop" in k or "fail" in k}
                notes.append(
                    f"{v}: {r['calls_total'] - r['exported_total']} of {r['calls_total']} calls never reached the "
                    f"exporter {causes or ''}"
                )
            if extra.get("store_traces") not in (None, extra.get("exported_with_warmup")):
                notes.append(
                    f"{v}: the store holds {extra['store_traces']} traces, the exporter took "
                    f"{extra.get('exported_with_warmup')} spans"
                )
        cells = [
            label,
            _fmt(r["us"]),
            ratio(v, "us"),
            _fmt(r["main_cpu_us"]),
            ratio(v, "main_cpu_us"),
            DASH if quiet else _fmt(r["export_cpu_us"]),
            DASH if quiet else _fmt(r["drain_us"]),
            exported,
            f"{_fmt(r['us_min'])}{DASH}{_fmt(r['us_max'])}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    out = ["\n".join(lines), ""]

    first = next((r for v, r in results.items() if "calls" in r and v not in SIZES), None)
    if first:
        out.append(
            f"{report['repeats']} interleaved repeats of {first['calls']} calls, medians; "
            f"{first['bytes_in']} B of JSON in, {first['bytes_out']} B out, distinct on every call."
        )
    for v in SIZES:
        r = results.get(v, {})
        if "calls" in r:
            out.append(f"{v}: {r['calls']} calls a repeat, {r['bytes_in']} B in, {r['bytes_out']} B out.")
    out.append(
        "µs/call: wall time of the timed loop (the call path); call CPU: the calling thread's CPU time, which other "
        "processes on the machine barely inflate; export CPU: every other thread's, per span."
    )
    store = results.get("boundary", {})
    if "us" in store:
        out.append(
            f"@boundary with the local store: call path {_fmt(store['us'])} µs/call ({_fmt(store['main_cpu_us'])} µs "
            f"CPU), plus the export thread's {_fmt(store['export_cpu_us'])} µs CPU per span; after the loop the store "
            f"had every span {_fmt(store['drain_us'])} µs/span later."
        )
        if hand.get("main_cpu_us"):
            mine = store["main_cpu_us"] + store["export_cpu_us"]
            theirs = hand["main_cpu_us"] + hand["export_cpu_us"]
            out.append(
                f"CPU of all threads per call: @boundary with the local store {_fmt(mine)} µs, the hand-written span "
                f"{_fmt(theirs)} µs ({mine / theirs:.2f} {TIMES})."
            )
    disabled, noop = results.get("boundary_disabled", {}), results.get("wrapt_noop", {})
    if "us" in disabled and noop.get("us"):
        out.append(
            f"@boundary under configure(enabled=False): {disabled['us'] / noop['us']:.2f} {TIMES} the wrapt no-op "
            f"decorator ({disabled['main_cpu_us'] / noop['main_cpu_us']:.2f} {TIMES} in CPU)."
        )
    interpreters = sorted(
        {(r["executable"], r.get("python", "?"), r.get("otel_sdk", "?")) for r in results.values() if "executable" in r}
    )
    for exe, py, sdk in interpreters:
        out.append(f"interpreter {exe} (Python {py}, opentelemetry-sdk {sdk})")
    if len({sdk for _, _, sdk in interpreters}) > 1:
        out.append("note: the peers run on another opentelemetry-sdk version than the rest")
    load = report.get("load")
    if load:
        out.append(
            f"machine: {report.get('cores')} cores, load average (1 min) {load[0]:.2f} at the start and "
            f"{load[1]:.2f} at the end"
        )
    network = {v: r["network"] for v, r in results.items() if r.get("network")}
    out.append(f"network attempts refused: {network}" if network else "network attempts refused: none")
    out.extend(notes)
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20_000, help="calls per repeat (default 20000)")
    parser.add_argument("--repeats", type=int, default=7, help="interleaved repeats (default 7)")
    parser.add_argument("--variants", help=f"comma-separated subset of: {', '.join(VARIANTS)}")
    parser.add_argument("--peers-python", help="python of the peers virtualenv (default .venv-bench-peers/bin/python)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--logs", help="keep each worker's output (stderr) in this folder")
    parser.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        return worker(args.worker, args.calls)

    variants = VARIANTS
    if args.variants:
        variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
        unknown = [v for v in variants if v not in VARIANTS]
        if unknown:
            parser.error(f"unknown variants {unknown}; choose from {', '.join(VARIANTS)}")
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="chronicle-bench-logs-") as logs:
        log_dir = Path(args.logs or logs)
        log_dir.mkdir(parents=True, exist_ok=True)
        results = run(variants, args.calls, args.repeats, peers_python(args.peers_python), log_dir)
    report = {
        "calls": args.calls,
        "repeats": args.repeats,
        "cores": os.cpu_count(),
        "load": [load_before, os.getloadavg()[0]],
        "variants": results,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(table(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
