"""SDK -> OTLP (gRPC and HTTP) -> rotel -> Phoenix; pull the trace back by id from Phoenix and replay it."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

import chronicle_otel as chronicle
from chronicle_otel.cli import main as cli
from examples.stock_agent import agent
from tests.integration import pipeline_agent
from tests.integration.conftest import REPO, Phoenix, Rotel

pytestmark = pytest.mark.integration

BOUNDARIES = ["desk", "research", "run_agent", "plan", "get_quote", "place_order", "check_order", "finalize"]


def record(rotel: Rotel, protocol: str, store: Path, project: str) -> str:
    port = rotel.grpc_port if protocol == "grpc" else rotel.http_port
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CHRONICLE_", "STOCK_AGENT_"))},
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",
        "CHRONICLE_OPENINFERENCE": "true",
        "STOCK_AGENT_GUARDRAIL": "v1",
    }
    out = subprocess.run(
        [sys.executable, "-m", "tests.integration.pipeline_agent", str(store)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return out.stdout.strip().splitlines()[-1]


def pull(url: str, trace_id: str, store: Path, expected: int, timeout: float = 30.0) -> chronicle.Trace:
    """Phoenix ingests asynchronously: poll until every boundary is there (bounded)."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            trace = chronicle.load_trace(url, trace_id, store=store)
            if len(trace.boundaries) >= expected:
                return trace
        except chronicle.TraceNotFoundError as exc:
            last = exc
        time.sleep(0.3)
    raise AssertionError(f"Phoenix did not return {expected} boundaries of {trace_id} within {timeout}s ({last})")


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_pull_from_phoenix_and_replay(
    phoenix: Phoenix, rotel_to_phoenix: Rotel, tmp_path: Path, protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = f"chronicle-{uuid.uuid4().hex[:8]}"
    store = tmp_path / ".chronicle"
    trace_id = record(rotel_to_phoenix, protocol, store, project)

    remote = pull(f"phoenix+{phoenix.url}/?project={project}", trace_id, store, len(BOUNDARIES))
    local = chronicle.load_trace(store, trace_id)
    assert [b.name for b in remote.boundaries] == [b.name for b in local.boundaries]
    assert sorted(b.name for b in remote.boundaries) == sorted(BOUNDARIES)
    for r, loc in zip(remote.boundaries, local.boundaries, strict=True):
        assert r.call_key == loc.call_key and r.span_id == loc.span_id
        for field in ("raw_input", "raw_output", "raw_error"):
            rp, lp = getattr(r, field), getattr(loc, field)
            assert (rp is None) == (lp is None)
            if rp is not None:
                assert rp.complete and rp.text == lp.text and rp.digest == lp.digest
    big = remote.find("research")[0]
    assert big.raw_output is not None and big.raw_output.status == "rehydrated"  # cut on the span, whole in the store
    assert big.output["filings"] == pipeline_agent.FILINGS
    assert remote.root is not None and remote.root.session == local.root.session  # type: ignore[union-attr]

    # Phoenix renders the boundaries natively from the OpenInference attributes
    raw = _get(f"{phoenix.url}/v1/projects/{project}/spans?trace_id={trace_id}&limit=100")
    kinds = {s["name"]: s["span_kind"] for s in raw["data"]}
    assert kinds["plan"] == "LLM" and kinds["get_quote"] == "TOOL" and kinds["research"] == "RETRIEVER"

    # chronicle pull writes the portable file; replay it offline: zero model calls, the fix blocks the order
    out = io.StringIO()
    portable = tmp_path / "incident.jsonl"
    url = f"phoenix+{phoenix.url}/?project={project}"
    argv = ["pull", trace_id, "--from", url, "-o", str(portable), "--store", str(store), "--quiet", "--json"]
    assert cli(argv, out=out) == 0
    summary = json.loads(out.getvalue())
    assert summary["boundaries"] == len(BOUNDARIES) and summary["missing_payloads"] == 0 and summary["rehydrated"] >= 1
    pulled = chronicle.load_trace(portable, store=tmp_path / "no-store")  # self-contained
    monkeypatch.setenv("STOCK_AGENT_GUARDRAIL", "v2")
    before = agent.SimulatedLLM.calls
    with chronicle.replay(pulled, stub={"kind:llm", "research"}, emit_spans=False) as run:
        result = run.rerun()
    assert result.status == "blocked"
    assert agent.SimulatedLLM.calls == before
    assert run.report.ok, run.report


def test_pull_unknown_trace_from_phoenix(phoenix: Phoenix) -> None:
    with pytest.raises(chronicle.TraceNotFoundError):
        chronicle.load_trace(f"phoenix+{phoenix.url}", "0123456789abcdef0123456789abcdef")


def _get(url: str) -> dict:  # type: ignore[type-arg]
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def test_a_window_of_phoenix_traces_is_pulled_and_replayed_as_a_corpus(
    phoenix: Phoenix, rotel_to_phoenix: Rotel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chronicle_otel.corpus import Corpus, CorpusFilter, CorpusOutcome, replay_for_corpus
    from chronicle_otel.load import source_for

    project = f"chronicle-{uuid.uuid4().hex[:8]}"
    store = tmp_path / ".chronicle"
    since = time.time_ns() - 60 * 10**9
    recorded = {record(rotel_to_phoenix, "http/protobuf", store, project) for _ in range(2)}
    url = f"phoenix+{phoenix.url}/?project={project}"
    for trace_id in recorded:
        pull(url, trace_id, store, len(BOUNDARIES))  # ingested whole
    assert set(source_for(url).trace_ids(since)) == recorded

    out = io.StringIO()
    argv = ["pull", "--since", "1h", "--from", url, "-o", str(tmp_path / "corpus"), "--store", str(store), "--json"]
    assert cli(argv, out=out) == 0
    summary = json.loads(out.getvalue())
    assert {t["trace"] for t in summary["traces"]} == recorded and summary["incomplete"] == 0

    monkeypatch.setenv("STOCK_AGENT_GUARDRAIL", "v2")
    for source in (tmp_path / "corpus", url):
        corpus = Corpus(source, CorpusFilter(since_ns=since), store=store)
        assert {e.trace_id for e in corpus.entries()} == recorded
        for entry in corpus.entries():
            result = replay_for_corpus(corpus.load(entry), options={"stub": ["kind:llm", "research"]})
            assert result.outcome is CorpusOutcome.PASSED, result  # v2 changes what it declares only
