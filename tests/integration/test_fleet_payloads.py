"""Fleet-scale payloads end to end, every part a real process.

Two replicas of a support agent record through rotel into Phoenix, their big payloads into SeaweedFS (S3 API), each
with a local store that is deleted once it exits. A third party, knowing only the trace ids, the backend and the
bucket, pulls each trace into a self-contained file, generates a regression test from it and runs that test with no
access to the bucket. Without the bucket the same pull reports the payloads missing. The same works from a file in
the Collector ``file`` exporter shape, and the bucket holds exactly one object per distinct payload cut on a span.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

import chronicle_otel as chronicle
from chronicle_otel import codec
from chronicle_otel import semconv as sc
from tests.integration import fleet_agent
from tests.integration.conftest import REPO, OtlpSink, Phoenix, Rotel
from tests.integration.seaweedfs import S3Bucket

pytestmark = pytest.mark.integration

MODULE = "tests.integration.fleet_agent"
REPLICAS = (
    ("INC-4821", "Why were EU card payments declined after the 14:05 deploy of the risk scorer?"),
    ("INC-4822", "Why are webhook deliveries to Lumen Outfitters retrying with 502 since midnight?"),
)
BOUNDARIES = {"support_agent", "load_runbook", "search_kb", "draft_answer", "update_ticket"}
CUT_PER_RUN = 3
"""Payloads over the span cap in one run: the runbook and the chunks (outputs), the prompt (input)."""
STUBS = ("kind:llm", "kind:retrieval", "kind:tool")
TIMEOUT = 60.0


@dataclass
class Replica:
    """One recorded run: what the replica was asked and what it printed."""

    index: int
    ticket_id: str
    question: str
    report: dict[str, Any]

    @property
    def trace_id(self) -> str:
        return str(self.report["trace_id"])

    @property
    def prompt(self) -> str:
        return fleet_agent.build_prompt(self.question, fleet_agent.RUNBOOK, fleet_agent.knowledge_base(self.question))


def _environ(**extra: str) -> dict[str, str]:
    """This process's environment without OTEL_*, CHRONICLE_* and AWS_* settings, plus ``extra``.

    AWS credential lookups stay on the machine whatever the process does (dead loopback metadata endpoint).
    """
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CHRONICLE_", "AWS_", "FLEET_"))}
    base.update(AWS_EC2_METADATA_DISABLED="true", AWS_METADATA_ENDPOINT="http://127.0.0.1:9")
    base.update(extra)
    return base


def _run(args: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 120) -> str:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{args[:4]}… exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _chronicle(args: list[str], *, cwd: Path, env: dict[str, str]) -> dict[str, Any]:
    """Run the ``chronicle`` command with ``--json``; its last stdout line is a JSON summary."""
    out = _run([sys.executable, "-m", "chronicle_otel.cli", *args, "--json"], cwd=cwd, env=env)
    summary: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return summary


def _record(rotel: Rotel, bucket: S3Bucket, sink: OtlpSink, project: str, workdir: Path) -> list[Replica]:
    """Run the replicas at once, each with its own local store, and delete every store once its replica exited."""
    running = []
    for index, (ticket_id, question) in enumerate(REPLICAS):
        store = workdir / f"replica-{index}" / ".chronicle"
        env = _environ(
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{rotel.http_port}",
            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
            OTEL_RESOURCE_ATTRIBUTES=f"openinference.project.name={project}",
            CHRONICLE_PAYLOADS=bucket.url,
            FLEET_MIRROR_OTLP=f"http://127.0.0.1:{sink.port}",
            **bucket.env,
        )
        process = subprocess.Popen(
            [sys.executable, "-m", MODULE, str(store), ticket_id, question],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        running.append((index, ticket_id, question, store, process))
    replicas = []
    try:
        for index, ticket_id, question, store, process in running:
            stdout, stderr = process.communicate(timeout=120)
            assert process.returncode == 0, f"replica {index} exited {process.returncode}\n{stdout}\n{stderr[-3000:]}"
            replicas.append(Replica(index, ticket_id, question, json.loads(stdout.strip().splitlines()[-1])))
            assert store.is_dir()  # it did record locally…
            shutil.rmtree(store.parent)
            assert not store.parent.exists()  # …and nothing of it is left for the loading side
    finally:
        for *_, process in running:
            if process.poll() is None:  # only after a failure above: stop the replicas still running
                process.kill()
                process.communicate(timeout=30)
    return replicas


def _wait_for_phoenix(url: str, trace_id: str) -> chronicle.Trace:
    """Phoenix ingests asynchronously: poll (bounded) until every boundary span of the trace is there."""
    deadline = time.monotonic() + TIMEOUT
    seen: object = None
    while time.monotonic() < deadline:
        try:
            trace = chronicle.load_trace(url, trace_id)
        except chronicle.TraceNotFoundError as exc:
            seen = exc
        else:
            seen = sorted(b.name for b in trace.boundaries)
            if {b.name for b in trace.boundaries} == BOUNDARIES and len(trace.spans) == len(BOUNDARIES):
                return trace
        time.sleep(0.3)
    raise AssertionError(f"Phoenix did not hold all spans of {trace_id} within {TIMEOUT}s (last: {seen})")


def _write_collector_file(sink: OtlpSink, path: Path, expected_spans: int) -> Path:
    """What the mirror receiver got, one ExportTraceServiceRequest per line, as the Collector ``file`` exporter."""
    sink.wait_for(expected_spans, timeout=TIMEOUT)
    with sink.lock:
        lines = [json_format.MessageToJson(request, indent=None) for request in sink.requests]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _project(workdir: Path) -> Path:
    """A project directory that holds the agent module under its recorded name (gen-test imports only such)."""
    project = workdir / "project"
    package = project / "tests" / "integration"
    package.mkdir(parents=True)
    (project / "tests" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    shutil.copyfile(REPO / "tests" / "integration" / "fleet_agent.py", package / "fleet_agent.py")
    return project


def _truncated_digests(trace: chronicle.Trace) -> list[str]:
    """The hash of every payload the spans of ``trace`` carry cut (``chronicle.*.truncated`` set)."""
    return [
        str(span.attributes[keys.hash])
        for span in trace.spans
        for keys in sc.PAYLOAD_KEYS
        if span.attributes.get(keys.truncated) is True
    ]


def _expectations(replica: Replica) -> list[str]:
    """``--expect`` assertions: the live root rebuilt its result from the stubs' exact, typed values."""
    ticket = codec.decode(replica.report["ticket_json"], allow=[MODULE])
    return [
        f"result.prompt_sha256 == {replica.report['prompt_sha256']!r}",
        f"result.answer == {replica.report['answer']!r}",
        f"type(result.ticket) is {MODULE}.TicketUpdate",
        f"result.ticket.severity is {MODULE}.Severity.{ticket.severity.name}",
        f"all(type(c) is {MODULE}.Citation for c in result.ticket.citations)",
        f"repr(result.ticket) == {replica.report['ticket_repr']!r}",
    ]


def _gen_test(replica: Replica, trace_file: Path, name: str, project: Path, env: dict[str, str]) -> Path:
    args = ["gen-test", replica.trace_id, "--file", str(trace_file), "--out", "regressions", "--name", name]
    for selector in STUBS:
        args += ["--stub", selector]
    for expr in _expectations(replica):
        args += ["--expect", expr]
    generated = _chronicle(args, cwd=project, env=env)
    test_file = Path(generated["test"])
    test_file = test_file if test_file.is_absolute() else project / test_file
    assert f"import {MODULE}  #" in test_file.read_text()  # the project's own module, under its recorded name
    return test_file


def _run_generated(project: Path, tests: list[Path], env: dict[str, str]) -> str:
    args = [
        sys.executable,
        "-m",
        "pytest",
        *map(str, tests),
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:asyncio",
        "-W",
        "error",
    ]
    out = _run(args, cwd=project, env=env)
    assert f"{len(tests)} passed" in out, out
    return out


def _digest(value: Any) -> str:
    """The ``sha256:<hex>`` address of a value's canonical payload."""
    return "sha256:" + hashlib.sha256(codec.encode(value)).hexdigest()


def _is_prefix_of_prompt(prefix: str, prompt: str) -> bool:
    """Whether the span's cut input text is a prefix of the canonical JSON of ``{"prompt": prompt}``."""
    return len(prefix) < len(prompt) and codec.encode({"prompt": prompt}).decode().startswith(prefix)


def _check_pulled(replica: Replica, pulled_file: Path, empty: Path) -> None:
    """The pulled file alone holds every payload whole, the prompt exact, the tool's result typed."""
    pulled = chronicle.load_trace(pulled_file, store=empty)
    assert pulled.trace_id == replica.trace_id
    assert {b.name for b in pulled.boundaries} == BOUNDARIES
    statuses = [p.status for b in pulled.boundaries for p in (b.raw_input, b.raw_output, b.raw_error) if p]
    assert "missing" not in statuses and set(statuses) == {"ok"}, statuses  # inlined and verified by hash
    assert not any(_truncated_digests(pulled))

    (llm,) = pulled.find("draft_answer")
    prompt = llm.input["prompt"]
    assert len(prompt.encode()) >= 50_000 and len(prompt) == replica.report["prompt_chars"]
    assert prompt == replica.prompt
    assert llm.raw_input is not None and llm.raw_input.digest == _digest({"prompt": prompt})

    (tool,) = pulled.find("update_ticket")
    ticket = tool.decode_output(allow=[MODULE])
    assert type(ticket) is fleet_agent.TicketUpdate and type(ticket.severity) is fleet_agent.Severity
    assert all(type(c) is fleet_agent.Citation for c in ticket.citations)
    assert ticket == codec.decode(replica.report["ticket_json"], allow=[MODULE])
    assert repr(ticket) == replica.report["ticket_repr"]
    assert pulled.root is not None and pulled.root.decode_output(allow=[MODULE]).ticket == ticket


def test_fleet_payloads_pull_and_replay_without_local_stores(
    phoenix: Phoenix,
    rotel_to_phoenix: Rotel,
    s3_bucket: S3Bucket,
    otlp_sink: OtlpSink,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project_name = f"fleet-{uuid.uuid4().hex[:8]}"
    phoenix_url = f"phoenix+{phoenix.url}/?project={project_name}"

    # 1. Two replicas record at once; each uploads its cut payloads, spools and drops nothing, keeps nothing local.
    replicas = _record(rotel_to_phoenix, s3_bucket, otlp_sink, project_name, tmp_path)
    assert len({r.trace_id for r in replicas}) == len(REPLICAS)
    for replica in replicas:
        stats = replica.report["stats"]
        assert replica.report["flushed"] is True
        assert stats["uploaded"] >= 1 and stats["dropped"] == 0 and stats["spooled"] == 0, stats
        assert stats["failures"] == 0 and stats["pending"] == 0 and stats["spool_files"] == 0, stats
        assert stats["uploaded"] + stats["existing"] == CUT_PER_RUN, stats
        assert replica.report["prompt_chars"] >= 50_000
    assert replicas[0].prompt != replicas[1].prompt

    # The backend alone: spans with their big payloads cut, nothing to replay from.
    remote = {r.trace_id: _wait_for_phoenix(phoenix_url, r.trace_id) for r in replicas}
    collector_file = _write_collector_file(otlp_sink, tmp_path / "collector.jsonl", len(REPLICAS) * len(BOUNDARIES))

    project = _project(tmp_path)
    nowhere = project / ".no-local-store"  # $CHRONICLE_HOME: the loading side has no local store
    with_bucket = _environ(CHRONICLE_HOME=str(nowhere), **s3_bucket.env)
    without_bucket = _environ(CHRONICLE_HOME=str(nowhere), PYTHONPATH=str(project))
    generated: list[Path] = []
    for replica in replicas:
        tid = replica.trace_id
        # 2. Pull from Phoenix with the bucket: every cut payload comes back whole.
        incident = project / f"incident-{replica.index}.jsonl"
        summary = _chronicle(
            ["pull", tid, "--from", phoenix_url, "-o", str(incident), "--payloads", s3_bucket.url, "--quiet"],
            cwd=project,
            env=with_bucket,
        )
        assert summary["trace"] == tid and summary["boundaries"] == len(BOUNDARIES), summary
        assert summary["missing_payloads"] == 0 and summary["rehydrated"] == CUT_PER_RUN, summary
        _check_pulled(replica, incident, nowhere)
        generated.append(_gen_test(replica, incident, f"phoenix_replica_{replica.index}", project, without_bucket))

        # 3. The same pull without the bucket: the payloads cut on spans are missing (accepted: exit 0, not 3).
        bare = project / f"bare-{replica.index}.jsonl"
        summary = _chronicle(
            ["pull", tid, "--from", phoenix_url, "-o", str(bare), "--quiet", "--allow-incomplete"],
            cwd=project,
            env=_environ(CHRONICLE_HOME=str(nowhere)),
        )
        assert summary["missing_payloads"] == CUT_PER_RUN and summary["rehydrated"] == 0, summary
        assert summary["complete"] is False and len(summary["problems"]) == CUT_PER_RUN, summary

        # 4. From the Collector-format file with the bucket, as from the backend.
        from_file = project / f"from-collector-{replica.index}.jsonl"
        summary = _chronicle(
            ["pull", tid, "--from", str(collector_file), "-o", str(from_file), "--payloads", s3_bucket.url, "--quiet"],
            cwd=project,
            env=with_bucket,
        )
        assert summary["trace"] == tid and summary["boundaries"] == len(BOUNDARIES), summary
        assert summary["missing_payloads"] == 0 and summary["rehydrated"] == CUT_PER_RUN, summary
        _check_pulled(replica, from_file, nowhere)
        generated.append(_gen_test(replica, from_file, f"collector_replica_{replica.index}", project, without_bucket))

    # The generated tests replay with the bucket's variables, and without them: the trace files are self-contained.
    _run_generated(project, generated, {**without_bucket, **s3_bucket.env, "CHRONICLE_PAYLOADS": s3_bucket.url})
    _run_generated(project, generated, without_bucket)

    # In this process too: Phoenix plus the bucket rehydrate (status "rehydrated"); Phoenix alone cannot.
    for name, value in s3_bucket.env.items():
        monkeypatch.setenv(name, value)
    for replica in replicas:
        rehydrated = chronicle.load_trace(phoenix_url, replica.trace_id, store=s3_bucket.url)
        (llm,) = rehydrated.find("draft_answer")
        assert llm.raw_input is not None and llm.raw_input.status == "rehydrated"
        assert llm.input["prompt"] == replica.prompt
        statuses = [p.status for b in rehydrated.boundaries for p in (b.raw_input, b.raw_output, b.raw_error) if p]
        assert "missing" not in statuses and statuses.count("rehydrated") == CUT_PER_RUN, statuses
        cut = remote[replica.trace_id].find("draft_answer")[0].raw_input
        assert cut is not None and cut.status == "missing" and _is_prefix_of_prompt(cut.text, replica.prompt)

    # 5. One object per distinct payload cut on a span, across the fleet (the shared runbook is stored once).
    from_collector = [chronicle.load_trace(collector_file, r.trace_id, store=[]) for r in replicas]
    cut_digests = [d for trace in from_collector for d in _truncated_digests(trace)]
    assert len(cut_digests) == CUT_PER_RUN * len(REPLICAS)
    assert sorted(cut_digests) == sorted(d for trace in remote.values() for d in _truncated_digests(trace))
    keys = s3_bucket.keys()
    stored = {"sha256:" + key.rsplit("/", 1)[-1] for key in keys}
    assert len(keys) == len(stored) == len(set(cut_digests)) == len(cut_digests) - 1, (keys, cut_digests)
    assert stored == set(cut_digests)
    assert sum(r.report["stats"]["uploaded"] for r in replicas) >= len(stored)
