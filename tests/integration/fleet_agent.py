"""A support agent run by one replica of a fleet: big retrieved context, a typed tool result, payloads in S3.

Run as ``python -m tests.integration.fleet_agent STORE TICKET QUESTION`` (from the repository root): records one
run of :func:`support_agent` with the local store ``STORE``, spans to wherever ``OTEL_EXPORTER_OTLP_*`` point and
the payloads cut on spans to ``$CHRONICLE_PAYLOADS``. With ``$FLEET_MIRROR_OTLP`` set (an OTLP/HTTP base URL), the
spans also go there. Prints one JSON line: the trace id, what the run produced and ``config.payload_stats()``.

Everything is deterministic: the same ticket and question give the same payloads in every process.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import os
import random
import sys
from typing import Any

import chronicle_otel as chronicle
from chronicle_otel import codec

PROMPT_MIN_CHARS = 56_000
"""The LLM prompt is at least this long: far over the 8,192 characters a span keeps."""

_SERVICES = ("card-auth", "risk-scorer", "ledger-writer", "webhook-relay", "payout-batcher", "fx-quoter")
_REGIONS = ("eu-west-1", "eu-central-1", "us-east-1", "ap-southeast-2")
_CODES = ("05 do-not-honour", "51 insufficient funds", "91 issuer unavailable", "502 bad gateway", "429 throttled")
_SENTENCES = (
    "At {time} UTC the {service} deployment in {region} rolled out build {build}, raising p99 latency to {ms} ms.",
    "Operators saw {count} declines with reason {code} within the first {minutes} minutes after the change.",
    "The runbook asks on-call to compare the error budget of {service} against the {percent}% weekly target.",
    "Merchant {merchant} reported that customers in {region} were charged twice for orders above {amount} EUR.",
    "A feature flag named {flag} gates the new scoring path; disabling it restores the previous thresholds.",
    "Retries from {service} are capped at {count} attempts with exponential backoff starting at {ms} ms.",
    "The incident channel notes that the issuer timeout was lowered from {minutes} s to {percent} ms by mistake.",
    "Dashboards for {region} show the queue depth of {service} climbing to {count} messages before draining.",
    "Customer support escalated {count} tickets tagged {code} from merchant {merchant} during the window.",
    "Post-incident review item: add a canary stage to {service} so {percent}% of traffic sees a build first.",
    "Settlement files generated at {time} UTC for {merchant} omitted {count} captures, later backfilled.",
    "The on-call engineer rolled back {service} to build {build} and declines with {code} returned to baseline.",
)
_MERCHANTS = ("Lumen Outfitters", "Harbor & Pine", "Kestrel Books", "Northwind Cycles", "Orchard Pharmacy")
_FLAGS = ("risk.v2-thresholds", "auth.fast-path", "relay.batch-acks", "ledger.async-commit")

RUNBOOK = "\n".join(
    f"Step {i + 1}. "
    + _SENTENCES[i % len(_SENTENCES)].format(
        time=f"{(i * 7) % 24:02d}:{(i * 13) % 60:02d}",
        service=_SERVICES[i % len(_SERVICES)],
        region=_REGIONS[i % len(_REGIONS)],
        build=f"2024.{i % 12 + 1:02d}.{i:03d}",
        ms=120 + 17 * i,
        count=3 + 5 * i,
        code=_CODES[i % len(_CODES)],
        minutes=5 + i % 40,
        percent=1 + i % 9,
        merchant=_MERCHANTS[i % len(_MERCHANTS)],
        amount=50 + 25 * i,
        flag=_FLAGS[i % len(_FLAGS)],
    )
    for i in range(120)
)
"""The payments runbook every replica loads: one payload shared by the whole fleet (about 14 KB)."""


class Severity(enum.Enum):
    """How bad an incident is."""

    LOW = "low"
    HIGH = "high"
    CRITICAL = "critical"


@dataclasses.dataclass(frozen=True)
class Citation:
    """A knowledge-base chunk an answer relies on."""

    doc_id: str
    score: float


@dataclasses.dataclass(frozen=True)
class TicketUpdate:
    """What the ticketing tool returns after updating a ticket."""

    ticket_id: str
    severity: Severity
    citations: tuple[Citation, ...]
    summary: str
    revision: int


@dataclasses.dataclass(frozen=True)
class Resolution:
    """The agent's result."""

    answer: str
    ticket: TicketUpdate
    prompt_sha256: str
    chunks: int


def _chunk(rng: random.Random, doc_id: str) -> dict[str, Any]:
    sentences = []
    for _ in range(rng.randint(9, 14)):
        sentences.append(
            rng.choice(_SENTENCES).format(
                time=f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}",
                service=rng.choice(_SERVICES),
                region=rng.choice(_REGIONS),
                build=f"2024.{rng.randint(1, 12):02d}.{rng.randint(0, 999):03d}",
                ms=rng.randint(40, 4000),
                count=rng.randint(2, 9000),
                code=rng.choice(_CODES),
                minutes=rng.randint(2, 90),
                percent=rng.randint(1, 99),
                merchant=rng.choice(_MERCHANTS),
                amount=rng.randint(10, 5000),
                flag=rng.choice(_FLAGS),
            )
        )
    return {"doc_id": doc_id, "score": round(rng.uniform(0.5, 0.99), 3), "text": " ".join(sentences)}


@chronicle.boundary(kind="retrieval", name="load_runbook")
def load_runbook(service: str) -> str:
    """The payments runbook (the same for every replica)."""
    return RUNBOOK


def knowledge_base(question: str) -> list[dict[str, Any]]:
    """The chunks relevant to ``question``: enough text that the prompt exceeds :data:`PROMPT_MIN_CHARS`."""
    rng = random.Random(question)
    chunks: list[dict[str, Any]] = []
    while sum(len(c["text"]) for c in chunks) < PROMPT_MIN_CHARS:
        chunks.append(_chunk(rng, f"kb-{rng.randint(0, 99999):05d}"))
    return sorted(chunks, key=lambda c: (-c["score"], c["doc_id"]))


@chronicle.boundary(kind="retrieval", name="search_kb")
def search_kb(question: str) -> list[dict[str, Any]]:
    """Knowledge-base chunks for ``question``."""
    return knowledge_base(question)


def build_prompt(question: str, runbook: str, chunks: list[dict[str, Any]]) -> str:
    """The LLM prompt: the question, the retrieved chunks, and the runbook's first steps."""
    context = "\n\n".join(f"[{c['doc_id']} score={c['score']}]\n{c['text']}" for c in chunks)
    steps = "\n".join(runbook.splitlines()[:5])
    return (
        "You are the payments on-call assistant. Answer from the context only and cite chunk ids.\n\n"
        f"Question: {question}\n\nRunbook (first steps):\n{steps}\n\nContext:\n{context}\n\nAnswer:"
    )


@chronicle.boundary(kind="llm", name="draft_answer")
def draft_answer(prompt: str) -> str:
    """A deterministic stand-in for a model: cites the first three chunks of the prompt."""
    cited = [line[1:].split(" ")[0] for line in prompt.splitlines() if line.startswith("[kb-")][:3]
    digest = hashlib.sha256(prompt.encode()).hexdigest()[:8]
    return f"Most likely cause: a risky rollout; see {', '.join(cited)} (context {digest})."


@chronicle.boundary(kind="tool", name="update_ticket")
def update_ticket(ticket_id: str, answer: str, citations: list[dict[str, Any]]) -> TicketUpdate:
    """Write the answer to the ticket; returns the updated ticket."""
    critical = sum(c["score"] for c in citations) > 2.5
    return TicketUpdate(
        ticket_id=ticket_id,
        severity=Severity.CRITICAL if critical else Severity.HIGH,
        citations=tuple(Citation(c["doc_id"], c["score"]) for c in citations),
        summary=answer[:120],
        revision=len(answer) % 7 + 2,
    )


@chronicle.boundary(kind="agent", name="support_agent")
def support_agent(ticket_id: str, question: str) -> Resolution:
    """Answer a support question and update its ticket."""
    runbook = load_runbook("payments")
    chunks = search_kb(question)
    prompt = build_prompt(question, runbook, chunks)
    answer = draft_answer(prompt)
    top = [{"doc_id": c["doc_id"], "score": c["score"]} for c in chunks[:3]]
    ticket = update_ticket(ticket_id, answer, top)
    if not isinstance(ticket, TicketUpdate) or not isinstance(ticket.severity, Severity):
        raise TypeError(f"update_ticket returned {type(ticket).__name__}, not a TicketUpdate")
    if not all(isinstance(c, Citation) for c in ticket.citations):
        raise TypeError("update_ticket returned citations that are not Citation objects")
    return Resolution(answer, ticket, hashlib.sha256(prompt.encode()).hexdigest(), len(chunks))


def main(argv: list[str]) -> None:
    """Record one run and print what it produced (one JSON line)."""
    store, ticket_id, question = argv
    config = chronicle.configure(service_name="support-desk", store=store)
    mirror = os.environ.get("FLEET_MIRROR_OTLP")
    provider: Any = config.tracer_provider
    if mirror:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{mirror}/v1/traces")))
    result = support_agent(ticket_id, question)
    flushed = config.force_flush()
    if mirror:
        flushed = provider.force_flush() and flushed
    stats = config.payload_stats()
    assert config.store is not None
    prompt = build_prompt(question, RUNBOOK, knowledge_base(question))
    report = {
        "trace_id": config.store.list_traces(limit=1)[0].trace_id,
        "flushed": flushed,
        "prompt_sha256": result.prompt_sha256,
        "prompt_chars": len(prompt),
        "answer": result.answer,
        "ticket_repr": repr(result.ticket),
        "ticket_json": codec.encode(result.ticket).decode(),
        "stats": dataclasses.asdict(stats) if stats is not None else None,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    # Run under its importable name, so recorded function and type names are ``tests.integration.fleet_agent.*``.
    from tests.integration import fleet_agent

    fleet_agent.main(sys.argv[1:])
