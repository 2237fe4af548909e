"""A store removed while a process records into it (``rm -rf .chronicle``, a cleanup job), with a real recording
process and the default pipeline (batch export, compressed lines): the store is started again at its path, and
every trace it lists then loads, although the exporter had compressed the first lines after the removal with the
dictionary of the store that went away. What could not be stored is counted."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import chronicle_otel as chronicle
from chronicle_otel.store import StoreReader

REPO = Path(__file__).parents[3]
WAIT = 120.0
"""Seconds any one stage may take (a bound, never a measurement)."""
AFTER = 1500
"""Calls the process makes once it has seen the store removed."""

# Two boundaries per call, ~1,000 calls a second. Once the file argv[2] exists (the store was removed), it makes
# argv[3] more calls, shuts down and prints its counters.
RECORDER = textwrap.dedent(
    """
    import json, os, sys, time
    import chronicle_otel as chronicle

    path, removed, after = sys.argv[1], sys.argv[2], int(sys.argv[3])
    config = chronicle.configure(store=path, otlp=False)

    @chronicle.boundary(kind="tool", name="lookup")
    def lookup(i):
        return {"i": i, "note": f"order {i}: sell MSFT at market, then confirm the price with the desk " * 4}

    @chronicle.boundary(kind="agent", name="handle")
    def handle(i):
        return lookup(i)["i"]

    calls, seen_at, started = 0, None, time.monotonic()
    while time.monotonic() - started < 100 and (seen_at is None or calls < seen_at + after):
        assert handle(calls) == calls
        calls += 1
        if seen_at is None and calls % 25 == 0 and os.path.exists(removed):
            seen_at = calls
        time.sleep(0.001)
    config.shutdown()
    store = config.stats().exports["store"]
    print(json.dumps({"calls": calls, "seen_at": seen_at, "accepted": store.accepted, "exported": store.exported,
                      "failed": store.failed, "failed_spans": config.store.failed_spans}))
    """
)


def _remove(store: Path) -> None:
    """``rm -rf`` the store; again if the writer put a file in it meanwhile ("Directory not empty")."""
    for attempt in range(5):
        try:
            shutil.rmtree(store)
        except OSError:
            if attempt == 4:
                raise
            continue
        return


def _wait_for(what: str, predicate: Any, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT
    while not predicate():
        if process.poll() is not None:
            raise AssertionError(f"the recording process exited before {what}: {process.communicate()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} within {WAIT}s")
        time.sleep(0.02)


def test_a_store_removed_mid_run_is_started_again_and_every_listed_trace_loads(tmp_path: Path) -> None:
    store, removed = tmp_path / "store", tmp_path / "removed"
    process = subprocess.Popen(
        [sys.executable, "-c", RECORDER, str(store), str(removed), str(AFTER)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Removed once the store has trained its dictionary: the exporter compresses lines with it from then on.
        _wait_for("the store trained its dictionary", lambda: list((store / "dicts").glob("*.zdict")), process)
        time.sleep(0.3)
        _remove(store)
        removed.touch()
        out, log = process.communicate(timeout=WAIT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, log[-4000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert "was removed while recording; a new store is started there" in log

    with contextlib.closing(StoreReader(store)) as reader:
        listed = reader.list_traces()
        unloadable, calls = [], set()
        for summary_row in listed:
            try:
                trace = chronicle.load_trace(reader, summary_row.trace_id)
            except chronicle.StoreError as exc:
                unloadable.append(str(exc))
                continue
            assert trace.root is not None and trace.root.output == trace.root.input["i"]
            calls.add(trace.root.input["i"])
    assert unloadable == [], f"{len(unloadable)} of {len(listed)} listed traces cannot be loaded: {unloadable[:3]}"
    # every call made after the removal was seen is in the new store (and some made before it)
    assert set(range(summary["seen_at"], summary["calls"])) <= calls
    # what could not be stored is counted, and nothing else
    assert summary["exported"] + summary["failed"] == summary["accepted"] == 2 * summary["calls"]
    assert summary["failed"] == summary["failed_spans"]
    assert sum(row.span_count for row in listed) >= 2 * (summary["calls"] - summary["seen_at"])
