"""Object storage outages, with real processes: a recording process never fails a call and never loses a payload.

A recording process (:mod:`tests.integration.outage_agent`) keeps calling boundaries whose payloads are cut on their
spans, while its SeaweedFS server is down at start, comes up, is killed with SIGKILL mid-run and starts again on the
same data. Every call returns its own value, nothing is dropped, and once the process has drained its spool the
bucket holds exactly one object per distinct payload cut on a span, each readable back by its hash. A spool left by a
process that exited while the store was unreachable is drained by the next process that uses it, and refused
credentials are reported as such while the payloads wait in the spool. A process killed with SIGKILL while the store
refuses connections, or accepts them and never answers, has every payload its stored spans were cut from on local disk.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel.store import ObjectPayloadStore, StoreReader
from tests.integration.conftest import REPO, WEED_BINARY, _service_missing
from tests.integration.outage_agent import ERROR_EVERY
from tests.integration.seaweedfs import (
    S3Bucket,
    SeaweedFS,
    create_bucket,
    env,
    list_keys,
    restart_seaweedfs,
    start_seaweedfs,
    stop_seaweedfs,
)
from tests.ports import free_port

pytestmark = pytest.mark.integration

MODULE = "tests.integration.outage_agent"
PREFIX = "drill"
CAP = 256
"""``max_attribute_length`` of the recording processes: every document, lookup result and error is cut."""
MAX_BACKOFF = 0.5
WAIT = 60.0
"""Seconds any one stage may take (a SeaweedFS start, a progress threshold, a drain)."""
Progress = dict[str, Any]


def _environ(extra: dict[str, str]) -> dict[str, str]:
    """This environment without OTEL_*, CHRONICLE_* and AWS_* settings, plus ``extra`` (the object store's)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CHRONICLE_", "AWS_"))}
    base.update(AWS_EC2_METADATA_DISABLED="true", AWS_METADATA_ENDPOINT="http://127.0.0.1:9")
    base.update(extra)
    return base


def _args(store: Path, spool: Path, url: str, run: str, *options: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        MODULE,
        "--store",
        str(store),
        "--spool",
        str(spool),
        "--payloads",
        url,
        "--run",
        run,
        "--max-attribute-length",
        str(CAP),
        "--max-backoff",
        str(MAX_BACKOFF),
        *options,
    ]


def _summary(stdout: str) -> dict[str, Any]:
    lines = stdout.strip().splitlines()
    assert lines, "the recording process printed nothing"
    summary: dict[str, Any] = json.loads(lines[-1])
    return summary


@dataclass
class Agent:
    """A recording process running in the background, followed through its progress file."""

    process: subprocess.Popen[bytes]
    progress: Path
    stop: Path
    stdout: Path
    stderr: Path

    def state(self) -> Progress:
        try:
            state: Progress = json.loads(self.progress.read_text())
        except (FileNotFoundError, ValueError):
            return {"calls": 0, "failed": 0, "stats": None}
        return state

    def log(self) -> str:
        return self.stderr.read_text(errors="replace")[-4000:] if self.stderr.exists() else ""

    def wait_for(self, what: str, predicate: Callable[[Progress], bool], timeout: float = WAIT) -> Progress:
        """Poll the progress file until ``predicate`` holds (bounded); fail when the process exits first."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.state()
            if state["stats"] is not None and predicate(state):
                return state
            if self.process.poll() is not None:
                raise AssertionError(f"the recording process exited ({self.process.returncode}) before {what}: {state}")
            if time.monotonic() > deadline:
                raise AssertionError(f"not {what} within {timeout}s: {state}\n{self.log()}")
            time.sleep(0.05)

    def finish(self, timeout: float = 2 * WAIT) -> tuple[int, dict[str, Any]]:
        """Tell it to stop recording; its exit status and summary once it has drained and exited."""
        self.stop.touch()
        returncode = self.process.wait(timeout=timeout)
        return returncode, _summary(self.stdout.read_text())


@contextlib.contextmanager
def _run_agent(workdir: Path, environ: dict[str, str], args: list[str]) -> Iterator[Agent]:
    """Start a recording process that follows ``--progress``/``--stop`` files in ``workdir``; killed by PID if left."""
    progress, stop = workdir / "progress.json", workdir / "stop"
    stdout, stderr = workdir / "agent.out", workdir / "agent.err"
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        process = subprocess.Popen(
            [*args, "--progress", str(progress), "--stop", str(stop)],
            cwd=REPO,
            env=environ,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
        )
    try:
        yield Agent(process, progress, stop, stdout, stderr)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


def _run_once(environ: dict[str, str], args: list[str], timeout: float = WAIT) -> tuple[dict[str, Any], str]:
    """Run a recording process to its end; its summary and log. It must exit in time and fail no call."""
    done = subprocess.run(args, cwd=REPO, env=environ, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return _summary(done.stdout), done.stderr


def _key(digest: str, prefix: str = PREFIX) -> str:
    hex_digest = digest.removeprefix("sha256:")
    return f"{prefix}/sha256/{hex_digest[:2]}/{hex_digest}"


def _assert_every_call_answered(summary: dict[str, Any], calls: int | None = None) -> None:
    """No call failed: each returned its own value, or (every tenth) raised its own error."""
    assert summary["failed"] == 0 and summary["failures"] == [], summary["failures"]
    assert calls is None or summary["calls"] == calls
    assert summary["raised"] == len(range(0, summary["calls"], ERROR_EVERY))
    assert summary["returned"] + summary["raised"] == summary["calls"]


def _spool_files(spool: Path) -> list[str]:
    return [p.name for p in spool.iterdir() if len(p.name) == 64] if spool.is_dir() else []


@dataclass
class Recorded:
    """What a local store holds: one trace per call, and the payloads cut on its spans."""

    traces: int
    digests: set[str]
    """The hash of every payload cut on a span (``chronicle.*.truncated`` set)."""
    rehydrated: int
    """Cut payloads loaded whole from the object store."""
    incomplete: list[str]
    """Boundaries with a payload neither the span nor the object store holds whole."""


def _recorded(store: Path, payloads: ObjectPayloadStore) -> Recorded:
    """Load every trace of ``store``, fetching the payloads cut on its spans from ``payloads``."""
    found = Recorded(0, set(), 0, [])
    with contextlib.closing(StoreReader(store)) as reader:
        for summary in reader.list_traces():
            trace = chronicle.load_trace(reader, summary.trace_id, store=payloads)
            found.traces += 1
            for span in trace.spans:
                for keys in sc.PAYLOAD_KEYS:
                    if span.attributes.get(keys.truncated) is True:
                        found.digests.add(str(span.attributes[keys.hash]))
            for boundary in trace.boundaries:
                for payload in (boundary.raw_input, boundary.raw_output, boundary.raw_error):
                    if payload is None:
                        continue
                    if not payload.complete:
                        found.incomplete.append(f"{trace.trace_id} {boundary.name} {payload.digest}")
                    found.rehydrated += payload.status == "rehydrated"
    return found


@contextlib.contextmanager
def _object_store(url: str, environ: dict[str, str]) -> Iterator[ObjectPayloadStore]:
    store = ObjectPayloadStore(url, environ=environ)
    try:
        yield store
    finally:
        store.close()


def _assert_round_trip(store: ObjectPayloadStore, digests: set[str], count: int = 8) -> None:
    """A few objects read back directly: the bytes whose sha256 is their address."""
    for digest in sorted(digests)[:count]:
        data = store.get_payload(digest)
        assert data is not None, digest
        assert "sha256:" + hashlib.sha256(data).hexdigest() == digest


@pytest.fixture
def weed_binary() -> Path:
    if WEED_BINARY is None or not WEED_BINARY.is_file():
        _service_missing(
            f"SeaweedFS binary `weed` not found ({WEED_BINARY or 'no CHRONICLE_TEST_WEED, no .venv-seaweedfs'})"
        )
    assert WEED_BINARY is not None
    return WEED_BINARY


def test_outage_down_at_start_then_killed_and_restarted(weed_binary: Path, tmp_path: Path) -> None:
    # The server's credentials and ports must be known before the recording process starts, while the server is
    # down: start it once on its own directory (which creates its identities), stop it, and start it again later.
    server: SeaweedFS = start_seaweedfs(tmp_path / "weed", binary=weed_binary)
    try:
        stop_seaweedfs(server, timeout=0.5)
        bucket = f"outage-{uuid.uuid4().hex[:12]}"
        bucket_env = env(server, bucket)
        url = f"s3://{bucket}/{PREFIX}"
        store, spool, work = tmp_path / "store", tmp_path / "spool", tmp_path / "agent"
        work.mkdir()
        args = _args(store, spool, url, "outage", "--pace", "0.02", "--min-calls", "300", "--deadline", "240")
        args += ["--drain-timeout", str(WAIT)]
        with _run_agent(work, _environ(bucket_env), args) as agent:
            # 1. Down at start: calls go on, their payloads go to the spool.
            down = agent.wait_for(
                "payloads spooled while the store is down",
                lambda s: s["calls"] >= 40 and s["stats"]["spooled"] > 0 and s["stats"]["failures"] > 0,
            )
            assert down["stats"]["uploaded"] == 0
            # 2. Up (the bucket created only once it runs): payloads are written, the spool drains.
            began = time.monotonic()
            restart_seaweedfs(server, timeout=WAIT)
            first_start = time.monotonic() - began
            create_bucket(server, bucket)
            up = agent.wait_for(
                "payloads written and the spool drained",
                lambda s: s["stats"]["uploaded"] >= 50 and s["stats"]["drained"] > 0,
            )
            # 3. SIGKILL mid-run, while the process keeps recording and writing.
            assert server.process is not None
            os.kill(server.pid, signal.SIGKILL)
            server.process.wait(timeout=30)
            killed = agent.state()
            agent.wait_for(
                "payloads spooled again once the store was killed",
                lambda s: (
                    s["stats"]["failures"] > killed["stats"]["failures"]
                    and s["stats"]["spooled"] > killed["stats"]["spooled"]
                    and s["calls"] >= killed["calls"] + 20
                ),
            )
            # 4. The same server again on the same data and ports, the process recording all along.
            began = time.monotonic()
            restart_seaweedfs(server, timeout=WAIT)
            restart = time.monotonic() - began
            restarted = agent.state()
            agent.wait_for(
                "payloads written after the restart",
                lambda s: (
                    s["calls"] >= restarted["calls"] + 30
                    and s["stats"]["uploaded"] + s["stats"]["drained"]
                    > restarted["stats"]["uploaded"] + restarted["stats"]["drained"]
                ),
            )
            returncode, summary = agent.finish()
            log = agent.log()
        assert returncode == 0, f"{summary}\n{log}"
        _assert_every_call_answered(summary)
        assert summary["calls"] >= 300
        assert summary["flushed"] and summary["drained"], summary
        stats = summary["stats"]
        assert stats["dropped"] == 0
        assert stats["spooled"] > 0 and stats["drained"] > 0 and stats["failures"] > 0
        assert stats["pending"] == 0 and stats["spool_files"] == 0
        assert _spool_files(spool) == []
        assert "unreachable" in log and "is back; draining the spool" in log

        keys = list_keys(server, bucket, f"{PREFIX}/")
        with _object_store(url, bucket_env) as objects:
            recorded = _recorded(store, objects)
            assert recorded.traces == summary["calls"]  # every call's span reached the local store
            assert recorded.incomplete == []
            assert sorted(keys) == sorted({_key(d) for d in recorded.digests})
            assert recorded.rehydrated >= len(recorded.digests)
            _assert_round_trip(objects, recorded.digests)
        # Each object was written once: by this process, or before a lost response (then found already there).
        assert stats["uploaded"] <= len(keys) <= stats["uploaded"] + stats["existing"]
        print(
            f"\noutage: {summary['calls']} calls in {summary['recorded_seconds']}s, {len(keys)} objects, "
            f"first start {first_start:.1f}s, restart after SIGKILL {restart:.1f}s, calls at kill {killed['calls']}, "
            f"uploaded before kill {up['stats']['uploaded']}, stats {stats}"
        )
    finally:
        stop_seaweedfs(server, timeout=0.5)


def test_spool_left_by_a_process_drains_in_the_next(s3_bucket: S3Bucket, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    down_env = {**s3_bucket.env}
    unreachable = f"http://127.0.0.1:{free_port()}"  # nothing listens there: the store is down
    down_env.update(AWS_ENDPOINT_URL_S3=unreachable, AWS_ENDPOINT_URL=unreachable)
    first, log = _run_once(
        _environ(down_env), _args(tmp_path / "store-1", spool, s3_bucket.url, "first", "--min-calls", "60")
    )
    _assert_every_call_answered(first, 60)
    stats = first["stats"]
    assert stats["spooled"] > 0 and stats["dropped"] == 0 and stats["uploaded"] == 0 and stats["failures"] > 0
    left = _spool_files(spool)
    assert len(left) == stats["spool_files"] > 0
    assert f"{len(left)} payloads wait in the spool {spool}" in log, log
    assert "unreachable" in log

    second, _ = _run_once(
        _environ(s3_bucket.env),
        _args(tmp_path / "store-2", spool, s3_bucket.url, "second", "--min-calls", "10", "--drain-timeout", str(WAIT)),
    )
    _assert_every_call_answered(second, 10)
    assert second["drained"], second
    stats = second["stats"]
    assert stats["drained"] >= len(left)  # and its own payloads, when the store was slow to answer at first
    assert stats["dropped"] == 0 and stats["spool_files"] == 0 and stats["failures"] == 0
    assert _spool_files(spool) == []
    with _object_store(s3_bucket.url, s3_bucket.env) as objects:
        by_first = _recorded(tmp_path / "store-1", objects)
        by_second = _recorded(tmp_path / "store-2", objects)
        assert by_first.incomplete == [] and by_second.incomplete == []
        assert by_first.digests == {"sha256:" + name for name in left}
        expected = {_key(d, s3_bucket.prefix) for d in by_first.digests | by_second.digests}
        assert sorted(s3_bucket.keys()) == sorted(expected)
        _assert_round_trip(objects, by_first.digests)


def test_refused_credentials_spool_payloads_and_fail_no_call(s3_bucket: S3Bucket, tmp_path: Path) -> None:
    wrong = {**s3_bucket.env, "AWS_SECRET_ACCESS_KEY": "not-" + s3_bucket.env["AWS_SECRET_ACCESS_KEY"]}
    spool = tmp_path / "spool"
    summary, log = _run_once(
        _environ(wrong), _args(tmp_path / "store", spool, s3_bucket.url, "refused", "--min-calls", "40")
    )
    _assert_every_call_answered(summary, 40)
    stats = summary["stats"]
    assert stats["spooled"] > 0 and stats["dropped"] == 0 and stats["uploaded"] == 0 and stats["failures"] > 0
    assert len(_spool_files(spool)) == stats["spool_files"] > 0
    assert log.count("credentials refused") == 1, log  # each cause is logged once
    assert "failed (credentials refused (" in log
    assert s3_bucket.keys() == []


@contextlib.contextmanager
def _silent_endpoint() -> Iterator[str]:
    """An S3 endpoint on 127.0.0.1 that accepts connections and never answers: a store that hangs."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()


def _cut_digests(store: Path) -> tuple[int, set[str]]:
    """The traces of a store, and the hash of every payload cut on their spans (read from the span lines)."""
    digests: set[str] = set()
    with contextlib.closing(StoreReader(store)) as reader:
        traces = reader.list_traces()
        for summary in traces:
            for span in reader.read_spans(summary.trace_id):
                values = {a["key"]: a["value"] for a in span.get("attributes", [])}
                for keys in sc.PAYLOAD_KEYS:
                    if values.get(keys.truncated, {}).get("boolValue") is True:
                        digests.add(values[keys.hash]["stringValue"])
    return len(traces), digests


@pytest.mark.parametrize("store_state", ["refusing", "hanging"])
def test_kill_9_during_an_outage_loses_no_payload_of_a_stored_span(tmp_path: Path, store_state: str) -> None:
    # A payload waiting in memory for an unreachable store dies with the process. Once the store is known to fail,
    # payloads reach the spool as they are handed over (before their spans reach the local store); a store that
    # hangs is found out within max_delay (2 s) and what waited meanwhile is spooled then.
    with contextlib.ExitStack() as stack:
        if store_state == "refusing":
            endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
        else:
            endpoint = stack.enter_context(_silent_endpoint())
        environ = _environ(
            {
                "AWS_ACCESS_KEY_ID": "drill",
                "AWS_SECRET_ACCESS_KEY": "drill-secret",
                "AWS_REGION": "us-east-1",
                "AWS_ENDPOINT_URL_S3": endpoint,
                "AWS_ENDPOINT_URL": endpoint,
            }
        )
        store, spool, work = tmp_path / "store", tmp_path / "spool", tmp_path / "agent"
        work.mkdir()
        args = _args(store, spool, f"s3://outage/{PREFIX}", "killed", "--pace", "0.02", "--min-calls", "100000")
        with _run_agent(work, environ, [*args, "--max-calls", "100000", "--deadline", "300"]) as agent:
            agent.wait_for(
                "calls recorded while the store is out",
                lambda s: s["calls"] >= 150 and s["stats"]["spooled"] > 0,
            )
            os.kill(agent.process.pid, signal.SIGKILL)
            assert agent.process.wait(timeout=30) == -signal.SIGKILL
    traces, digests = _cut_digests(store)
    spooled = {"sha256:" + name for name in _spool_files(spool)}
    assert traces >= 100 and len(digests) >= 100, (traces, len(digests))
    missing = sorted(digests - spooled)
    assert missing == [], f"{len(missing)} of {len(digests)} payloads cut on stored spans are lost"
    for name in sorted(_spool_files(spool))[:20]:  # the spool's files are whole payloads
        data = (spool / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == name
    print(f"\nkill -9 with the store {store_state}: {traces} traces, {len(digests)} cut payloads, all spooled")
