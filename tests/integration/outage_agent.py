"""A recording process that keeps calling its boundaries while the payload store comes and goes.

Run as ``python -m tests.integration.outage_agent --store DIR --spool DIR --payloads s3://bucket/prefix …`` from the
repository root, with the ``AWS_*`` variables saying where the object store is and who may use it. Each call of
:func:`handle` gets a distinct document of a few kilobytes (cut on its span), looks its topic up with :func:`lookup`
(one of five results that calls share, cut too), and every tenth call raises :class:`DrillError` with a long message (an
error payload, cut as well). The process checks that every call returned its own value (or raised its own error).

While it records it rewrites ``--progress`` (JSON: calls made, calls that went wrong, ``payload_stats()``) after every
call, so that whoever runs it can act at chosen points. It records until ``--stop`` exists and ``--min-calls`` are
done (or ``--max-calls`` or ``--deadline`` seconds are reached), flushes, waits at most ``--drain-timeout`` seconds for
the memory queue and the spool to empty, shuts down and prints one JSON line: the calls, the failures and the
payload counters. The exit status is 1 when a call went wrong, else 0.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import chronicle_otel as chronicle

WORDS = (
    "ledger",
    "refund",
    "invoice",
    "carrier",
    "parcel",
    "warehouse",
    "customs",
    "tariff",
    "voucher",
    "courier",
    "manifest",
    "pallet",
    "dispatch",
    "backorder",
    "shipment",
    "receipt",
    "quota",
    "supplier",
    "forecast",
    "inventory",
)
DOCUMENT_WORDS = 260
"""Words of a document: about 2,000 characters, far over the 256-character cap the drills use."""
ERROR_EVERY = 10
"""Every call whose index is a multiple of this raises :class:`DrillError`."""
SHARED_OUTPUTS = 5
"""How many distinct lookup results there are: calls share them, so the same payload is cut many times."""


class DrillError(RuntimeError):
    """The error some calls raise on purpose, with a message long enough to be cut on the span."""


def document(run: str, index: int) -> str:
    """The document call ``index`` of run ``run`` handles: distinct for every run and index."""
    rng = random.Random(f"{run}/{index}")
    body = " ".join(rng.choice(WORDS) for _ in range(DOCUMENT_WORDS))
    return f"run {run} call {index}: {body}"


def catalogue(topic: int) -> list[dict[str, Any]]:
    """The lookup result for ``topic``: a few kilobytes, the same for every call on that topic."""
    rng = random.Random(f"topic/{topic}")
    return [
        {"sku": f"SKU-{topic}-{n:03d}", "note": " ".join(rng.choice(WORDS) for _ in range(12)), "units": n * 7}
        for n in range(40)
    ]


def drill_message(run: str, index: int) -> str:
    """The message of the error call ``index`` raises."""
    return f"run {run} call {index} refused: " + " ".join(random.Random(f"error/{run}/{index}").choices(WORDS, k=90))


@chronicle.boundary(kind="tool", name="lookup")
def lookup(topic: int) -> list[dict[str, Any]]:
    """The catalogue entries of a topic."""
    return catalogue(topic)


@chronicle.boundary(kind="agent", name="handle")
def handle(run: str, index: int, text: str) -> dict[str, Any]:
    """Handle one document: look its topic up; every tenth call fails with a long error."""
    entries = lookup(index % SHARED_OUTPUTS)
    if index % ERROR_EVERY == 0:
        raise DrillError(drill_message(run, index))
    return {"index": index, "sha256": hashlib.sha256(text.encode()).hexdigest(), "entries": len(entries)}


def one_call(run: str, index: int) -> str | None:
    """Make call ``index``; None when it returned its own value (or raised its own error), else what went wrong."""
    text = document(run, index)
    try:
        result = handle(run, index, text)
    except DrillError as exc:
        if index % ERROR_EVERY == 0 and str(exc) == drill_message(run, index):
            return None
        return f"call {index} raised the wrong DrillError: {str(exc)[:200]}"
    except Exception as exc:
        return f"call {index} raised {type(exc).__name__}: {str(exc)[:200]}"
    expected = {"index": index, "sha256": hashlib.sha256(text.encode()).hexdigest(), "entries": 40}
    if index % ERROR_EVERY == 0:
        return f"call {index} returned {result!r} instead of raising"
    if result != expected:
        return f"call {index} returned {result!r}, expected {expected!r}"
    return None


def _stats(config: chronicle.ChronicleConfig) -> dict[str, int] | None:
    stats = config.payload_stats()
    return dataclasses.asdict(stats) if stats is not None else None


def _write_progress(path: Path, calls: int, failed: int, stats: dict[str, int] | None) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"calls": calls, "failed": failed, "stats": stats}))
    os.replace(tmp, path)


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="outage_agent")
    parser.add_argument("--store", required=True, help="the local store directory")
    parser.add_argument("--spool", required=True, help="the payload spool directory")
    parser.add_argument("--payloads", required=True, help="s3://bucket/prefix")
    parser.add_argument("--run", default="a", help="a label that makes this process's documents distinct")
    parser.add_argument("--progress", help="a file rewritten after every call")
    parser.add_argument("--stop", help="recording stops once this file exists (and --min-calls are done)")
    parser.add_argument("--min-calls", type=int, default=0)
    parser.add_argument("--max-calls", type=int, default=10_000)
    parser.add_argument("--pace", type=float, default=0.0, help="seconds between calls")
    parser.add_argument("--deadline", type=float, default=120.0, help="seconds of recording at most")
    parser.add_argument("--drain-timeout", type=float, default=0.0, help="seconds to wait for the spool to empty")
    parser.add_argument("--max-attribute-length", type=int, default=256)
    parser.add_argument("--max-backoff", type=float, default=0.5)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    """Record, drain (bounded), print the summary; 1 when a call went wrong."""
    args = _parse(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(message)s")
    config = chronicle.configure(
        service_name="outage-drill",
        store=args.store,
        capture=chronicle.CaptureOptions(max_attribute_length=args.max_attribute_length),
        payloads=chronicle.PayloadOptions(url=args.payloads, spool=args.spool, max_backoff=args.max_backoff),
        otlp=False,
    )
    progress = Path(args.progress) if args.progress else None
    stop = Path(args.stop) if args.stop else None
    failures: list[str] = []
    calls = returned = raised = 0
    started = time.monotonic()
    while calls < args.max_calls and time.monotonic() - started < args.deadline:
        if calls >= args.min_calls and (stop is None or stop.exists()):
            break
        problem = one_call(args.run, calls)
        calls += 1
        if problem is not None:
            failures.append(problem)
        elif (calls - 1) % ERROR_EVERY == 0:
            raised += 1
        else:
            returned += 1
        if progress is not None:
            _write_progress(progress, calls, len(failures), _stats(config))
        if args.pace:
            time.sleep(args.pace)
    recorded_for = time.monotonic() - started
    flushed = config.force_flush()
    deadline = time.monotonic() + args.drain_timeout
    stats = config.payload_stats()
    while stats is not None and (stats.spool_files or stats.pending) and time.monotonic() < deadline:
        time.sleep(0.1)
        stats = config.payload_stats()
    drained = stats is not None and stats.spool_files == 0 and stats.pending == 0
    before_shutdown = _stats(config)
    config.shutdown()
    final = _stats(config)
    summary = {
        "calls": calls,
        "returned": returned,
        "raised": raised,
        "failed": len(failures),
        "failures": failures[:10],
        "recorded_seconds": round(recorded_for, 3),
        "flushed": flushed,
        "drained": drained,
        "stats_before_shutdown": before_shutdown,
        "stats": final,
    }
    if progress is not None:
        _write_progress(progress, calls, len(failures), final)
    print(json.dumps(summary), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    # Run under its importable name, so recorded function and type names are ``tests.integration.outage_agent.*``.
    from tests.integration import outage_agent

    sys.exit(outage_agent.main(sys.argv[1:]))
