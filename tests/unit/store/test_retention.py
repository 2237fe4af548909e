from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import TracerProvider

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel.errors import ConfigError, StoreError, TraceNotFoundError
from chronicle_otel.store import (
    LocalStore,
    RetentionPolicy,
    RetentionReport,
    TraceRecord,
    _retention,
    apply_retention,
    payload_digest,
)
from chronicle_otel.store._retention import _segments

REPO = Path(__file__).resolve().parents[3]
HAS_PROC = Path("/proc/self/fd").is_dir()
needs_proc = pytest.mark.skipif(
    not HAS_PROC, reason="segments this process wrote are told free only through /proc/<pid>/fd"
)
DAY = 86_400 * 10**9
NOW = 1_800_000_000 * 10**9  # the "now" ages are measured from, in ns

# ------------------------------------------------------------------------------------------------ recording


@chronicle.boundary(kind="tool", name="retention.tool")
def tool(text: str) -> str:
    return text.upper()


@chronicle.boundary(kind="agent", name="retention.agent")
def agent(i: int, fails: bool, big: bool, ids: list[str]) -> str:
    ids.append(f"{trace_api.get_current_span().get_span_context().trace_id:032x}")
    answer = tool(("x" * 9000 if big else "small") + f"-{i}")
    if fails:
        raise RuntimeError(f"run {i} failed")
    return answer


def record(path: Path, runs: list[tuple[bool, bool]]) -> list[str]:
    """One agent run per (fails, big payload) entry, recorded in the store at ``path``; the trace ids in order.
    The writer is closed afterwards (its segment is settled)."""
    config = chronicle.configure(
        tracer_provider=TracerProvider(),
        store=chronicle.StoreOptions(path=path, processor="simple", durable=False),
    )
    ids: list[str] = []
    for i, (fails, big) in enumerate(runs):
        with contextlib.suppress(RuntimeError):
            agent(i, fails, big, ids)
    config.shutdown()
    return ids


# ------------------------------------------------------------------------------------------------ direct writes


def tid(n: int, sampled: bool) -> str:
    """A trace id whose sampling key (its last 14 hex digits) is in the lower (sampled at rate 0.5) or upper half."""
    key = (n % 1000) if sampled else (1 << 56) - 1 - (n % 1000)
    return f"{n:018x}{key:014x}"


def payload(n: int, size: int = 10_000) -> tuple[str, bytes]:
    data = (f"payload {n} " * (size // 10 + 1)).encode()[:size]
    return payload_digest(data), data


def put(
    store: LocalStore,
    trace_id: str,
    *,
    start_ns: int = NOW - DAY,
    status: str | None = "OK",
    errors: int = 0,
    refs: tuple[tuple[str, bytes], ...] = (),
    pad: int = 0,
) -> None:
    """Write one trace of one span; ``refs`` are payloads cut on it (stored with it, as the exporter does)."""
    span_id = trace_id[:16]
    attrs: list[dict[str, Any]] = [{"key": sc.BOUNDARY_NAME, "value": {"stringValue": "agent"}}]
    attrs += [
        {"key": keys.hash, "value": {"stringValue": digest}}
        for keys, (digest, _) in zip(sc.PAYLOAD_KEYS, refs, strict=False)
    ]
    attrs += [
        {"key": keys.truncated, "value": {"boolValue": True}} for keys, _ in zip(sc.PAYLOAD_KEYS, refs, strict=False)
    ]
    if pad:
        attrs.append({"key": "pad", "value": {"stringValue": "p" * pad}})
    span = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": "agent",
        "kind": 1,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(start_ns + 1000),
        "attributes": attrs,
        "status": {"code": 2} if status == "ERROR" else {},
    }
    line = orjson.dumps(
        {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "t"}, "spans": [span]}]}]}
    )
    root = None
    if status is not None:
        root = {"span_id": span_id, "name": "agent", "start_ns": start_ns, "end_ns": start_ns + 1000, "status": status}
    store.write_batch([TraceRecord(trace_id, line, 1, errors, root, ("agent", "agent", start_ns), None)], list(refs))


def trace_ids(path: Path) -> set[str]:
    reader = LocalStore(path)
    try:
        return {t.trace_id for t in reader.list_traces()}
    finally:
        reader.close()


def stored(path: Path, digest: str) -> bytes | None:
    reader = LocalStore(path)
    try:
        return reader.get_payload(digest)
    finally:
        reader.close()


def segments(path: Path) -> list[Path]:
    return sorted((path / "spans").glob("*/*.jsonl"))


def check_loads(path: Path, trace_id: str) -> None:
    """The trace reads back whole: every line through the index, every cut payload from the store."""
    trace = chronicle.load_trace(path, trace_id)
    for b in trace.boundaries:
        for p in (b.raw_input, b.raw_output, b.raw_error):
            assert p is None or p.complete, (trace_id, b.name)


def snapshot(path: Path) -> tuple[dict[str, str], list[Any]]:
    files = {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(path.rglob("*"))
        if not p.name.endswith(("-wal", "-shm"))
    }
    db = sqlite3.connect(path / "index.sqlite3")
    try:
        rows = [
            db.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
            for table in ("traces", "span_lines", "payloads")
        ]
    finally:
        db.close()
    return files, rows


def gc(path: Path, policy: RetentionPolicy | None = None, **kwargs: Any) -> RetentionReport:
    kwargs.setdefault("grace", 0)
    return apply_retention(path, policy, **kwargs)


# ------------------------------------------------------------------------------------------------ the policy


def test_failures_are_kept_successes_sampled_and_kept_traces_load_whole(tmp_path: Path) -> None:
    path = tmp_path / "store"
    runs = [(i % 5 == 0, i % 3 == 0) for i in range(60)]
    ids = record(path, runs)
    policy = RetentionPolicy(success_rate=0.3)

    report = gc(path, policy)

    kept = trace_ids(path)
    for trace_id, (fails, _) in zip(ids, runs, strict=True):
        assert (trace_id in kept) == (fails or policy.sampled(trace_id)), trace_id
    assert report.failed_kept == 12 and report.failed_removed == 0
    assert report.successful_kept == len(kept) - 12
    assert report.traces_removed == report.removed_unsampled == 60 - len(kept) > 0
    assert report.span_bytes_removed > 0 and report.payloads_removed > 0
    for trace_id in ids:
        if trace_id in kept:
            check_loads(path, trace_id)
        else:
            with pytest.raises(TraceNotFoundError):
                chronicle.load_trace(path, trace_id)
    big = [t for t, (fails, big) in zip(ids, runs, strict=True) if big and t in kept]
    assert big, "a kept trace with a payload cut to the store"
    rehydrated = [
        p
        for b in chronicle.load_trace(path, big[0]).boundaries
        for p in (b.raw_input, b.raw_output)
        if p is not None and p.status == "rehydrated"
    ]
    assert rehydrated


def test_a_second_run_agrees_with_the_first(tmp_path: Path) -> None:
    path = tmp_path / "store"
    record(path, [(False, i % 2 == 0) for i in range(30)])
    policy = RetentionPolicy(success_rate=0.5)
    first = gc(path, policy)
    before = snapshot(path)
    second = gc(path, RetentionPolicy(success_rate=0.5))
    assert first.traces_removed > 0
    assert second.traces_removed == second.payloads_removed == second.segments_rewritten == 0
    assert second.traces_kept == first.traces_kept
    assert snapshot(path)[1] == before[1]


def test_what_counts_as_failed(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = LocalStore(path, durable=False)
    root_failed, child_failed, no_root, ok = (tid(n, sampled=False) for n in range(4))
    put(store, root_failed, status="ERROR", errors=1)
    put(store, child_failed, status="OK", errors=1)  # a span below the root failed, the run recovered
    put(store, no_root, status=None)  # the root span was never stored
    put(store, ok)
    store.close()

    report = gc(path, RetentionPolicy(success_rate=0.5))

    assert trace_ids(path) == {root_failed, child_failed, no_root}
    assert (report.failed_kept, report.successful_removed) == (3, 1)


def test_max_age_removes_old_traces_failed_ones_too(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = LocalStore(path, durable=False)
    old_ok, old_failed, young_ok, young_failed = (tid(n, sampled=True) for n in range(4))
    put(store, old_ok, start_ns=NOW - 31 * DAY)
    put(store, old_failed, start_ns=NOW - 40 * DAY, status="ERROR", errors=1)
    put(store, young_ok, start_ns=NOW - 29 * DAY)
    put(store, young_failed, start_ns=NOW - DAY, status="ERROR", errors=1)
    store.close()

    report = gc(path, RetentionPolicy(max_age="30d"), now=NOW / 1e9)

    assert trace_ids(path) == {young_ok, young_failed}
    assert (report.removed_expired, report.failed_removed, report.successful_removed) == (2, 1, 1)


def test_now_may_be_an_aware_datetime(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = LocalStore(path, durable=False)
    put(store, tid(1, True), start_ns=NOW - 2 * DAY)
    store.close()
    when = dt.datetime.fromtimestamp(NOW / 1e9, dt.timezone.utc)
    assert gc(path, RetentionPolicy(max_age=dt.timedelta(days=1)), now=when).removed_expired == 1
    with pytest.raises(ConfigError, match="now"):
        gc(path, now=dt.datetime(2030, 1, 1))  # naive: ambiguous


def test_the_size_cap_removes_the_oldest_successes_first_then_the_oldest_failures(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = LocalStore(path, durable=False)
    ok = [tid(n, sampled=True) for n in range(6)]
    failed = [tid(100 + n, sampled=True) for n in range(4)]
    for age, trace_id in enumerate(ok):  # ok[0] is the newest
        put(store, trace_id, start_ns=NOW - (age + 1) * DAY, pad=10_000)
    for age, trace_id in enumerate(failed):
        put(store, trace_id, start_ns=NOW - (age + 1) * DAY, status="ERROR", errors=1, pad=10_000)
    store.close()
    reader = LocalStore(path)
    cap = sum(len(line) for trace_id in failed[:3] for line in reader.iter_lines(trace_id))
    reader.close()

    report = gc(path, RetentionPolicy(max_bytes=cap), now=NOW / 1e9)

    assert trace_ids(path) == {failed[0], failed[1], failed[2]}
    assert report.removed_for_size == 7 and report.failed_removed == 1
    assert report.data_bytes_after == cap
    assert not report.warnings


def test_young_failures_survive_the_size_cap(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = LocalStore(path, durable=False)
    ok = tid(1, sampled=True)
    young = [tid(10 + n, sampled=True) for n in range(3)]
    old = tid(20, sampled=True)
    put(store, ok, start_ns=NOW - DAY, pad=5000)
    for trace_id in young:
        put(store, trace_id, start_ns=NOW - DAY, status="ERROR", errors=1, pad=5000)
    put(store, old, start_ns=NOW - 10 * DAY, status="ERROR", errors=1, pad=5000)
    store.close()

    report = gc(path, RetentionPolicy(max_bytes=1000, min_keep_failed_age="7d"), now=NOW / 1e9)

    assert trace_ids(path) == set(young)
    assert report.data_bytes_after > 1000
    assert any("max_bytes" in w for w in report.warnings)


def test_payloads_no_remaining_trace_refers_to_are_removed_shared_ones_stay(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = LocalStore(path, durable=False)
    mine, theirs, shared, orphan = payload(1), payload(2), payload(3), payload(4)
    kept, removed = tid(1, sampled=True), tid(2, sampled=False)
    put(store, kept, refs=(mine, shared))
    put(store, removed, refs=(theirs, shared))
    store.put_payload(*orphan)
    store.close()

    report = gc(path, RetentionPolicy(success_rate=0.5))

    store = LocalStore(path)
    assert store.has_payload(mine[0]) and store.has_payload(shared[0])
    assert not store.has_payload(theirs[0]) and not store.has_payload(orphan[0])
    assert (report.payloads_removed, report.payload_bytes_removed) == (2, len(theirs[1]) + len(orphan[1]))
    assert trace_ids(path) == {kept}
    store.close()


def test_keep_payloads_leaves_every_payload(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = LocalStore(path, durable=False)
    put(store, tid(2, sampled=False), refs=(payload(2),))
    store.put_payload(*payload(4))
    store.close()
    report = gc(path, RetentionPolicy(success_rate=0.5), remove_payloads=False)
    store = LocalStore(path)
    assert store.has_payload(payload(2)[0]) and store.has_payload(payload(4)[0])
    assert report.traces_removed == 1 and report.payloads_removed == 0
    store.close()


def test_vacuum_gives_the_index_space_back(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = LocalStore(path, durable=False)
    kept = tid(0, sampled=True)
    put(store, kept, refs=(payload(0),))
    for n in range(1, 40):
        put(store, tid(n, sampled=False), refs=(payload(n, size=50_000),))
    store.close()
    index = path / "index.sqlite3"
    before = index.stat().st_size

    report = gc(path, RetentionPolicy(success_rate=0.5), vacuum=True)

    assert report.payload_bytes_removed == 39 * 50_000
    assert index.stat().st_size < before - 39 * 40_000
    assert report.store_bytes_after < report.store_bytes_before - 39 * 40_000
    assert not (path / "index.sqlite3-wal").exists()
    check_loads(path, kept)
    assert stored(path, payload(0)[0]) == payload(0)[1]


def test_traces_written_within_the_grace_period_are_pending(tmp_path: Path) -> None:
    path = tmp_path / "store"
    ids = record(path, [(False, False)] * 5)
    report = apply_retention(path, RetentionPolicy(success_rate=0.0))  # default grace: 10 minutes
    assert report.traces_pending == 5 and report.traces_removed == 0
    assert trace_ids(path) == set(ids)
    assert gc(path, RetentionPolicy(success_rate=0.0)).traces_removed == 5


# ------------------------------------------------------------------------------------------------ segments


@needs_proc
def test_a_segment_of_removed_lines_is_deleted_a_mixed_one_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "store"
    a, b, c, d = tid(1, False), tid(2, False), tid(3, False), tid(4, True)
    first = LocalStore(path, durable=False)
    put(first, a)
    put(first, b)
    first.close()
    second = LocalStore(path, durable=False)  # a segment of its own
    put(second, c, pad=3000)
    put(second, d, pad=3000)
    second.close()
    old = segments(path)
    assert len(old) == 2
    old_bytes = sum(p.stat().st_size for p in old)

    report = gc(path, RetentionPolicy(success_rate=0.5))

    assert (report.segments_deleted, report.segments_rewritten, report.segments_busy) == (1, 1, 0)
    [new] = segments(path)
    assert new not in old
    assert report.segment_bytes_freed == old_bytes - new.stat().st_size
    assert new.read_bytes().count(b"\n") == 1
    assert trace_ids(path) == {d}
    check_loads(path, d)
    assert report.store_bytes_after < report.store_bytes_before


def test_the_segment_a_live_writer_appends_to_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "store"
    writer = LocalStore(path, durable=False)
    gone, stays = tid(1, sampled=False), tid(2, sampled=True)
    put(writer, gone)
    put(writer, stays)
    [segment] = segments(path)
    content = segment.read_bytes()

    report = gc(path, RetentionPolicy(success_rate=0.5))

    assert report.traces_removed == 1 and report.segments_busy == 1 and report.segments_rewritten == 0
    assert segment.read_bytes() == content  # the writer's open file is untouched
    later = tid(3, sampled=True)
    put(writer, later)  # the writer goes on appending, and what it appends is indexed
    assert trace_ids(path) == {stays, later}
    check_loads(path, later)
    writer.close()
    if HAS_PROC:  # once closed, the next run compacts it
        report = gc(path, RetentionPolicy(success_rate=0.5))
        assert report.segments_rewritten == 1
        assert trace_ids(path) == {stays, later}
        check_loads(path, stays)
        check_loads(path, later)


def test_whether_a_process_holds_a_segment_open(tmp_path: Path) -> None:
    segment = tmp_path / "000000-1-ab.jsonl"
    segment.write_bytes(b"{}\n")
    info = os.stat(segment)
    with open(segment, "ab"):
        assert _segments._held_open(os.getpid(), info)
    if HAS_PROC:
        assert not _segments._held_open(os.getpid(), info)
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert not _segments._held_open(int(done.stdout), info)  # that process is gone


def test_a_segment_modified_within_the_grace_period_is_busy(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = LocalStore(path, durable=False)
    put(store, tid(1, sampled=False))
    put(store, tid(2, sampled=True))
    store.close()
    [segment] = segments(path)
    content = segment.read_bytes()
    soon = time.time() + 3600
    os.utime(segment, (soon, soon))  # as if written to a moment before the run

    report = gc(path, RetentionPolicy(success_rate=0.5))

    assert report.traces_removed == 1 and report.segments_busy == 1
    assert segment.read_bytes() == content


@needs_proc
def test_a_crash_before_the_rows_move_leaves_a_readable_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "store"
    ids = record(path, [(i % 4 == 0, i % 2 == 0) for i in range(24)])
    [old] = segments(path)

    def crash(*args: object) -> None:
        raise RuntimeError("power cut")

    monkeypatch.setattr(_segments, "_replace_rows", crash)
    with pytest.raises(RuntimeError, match="power cut"):
        gc(path, RetentionPolicy(success_rate=0.3))
    kept = trace_ids(path)
    assert 0 < len(kept) < 24
    assert len(segments(path)) == 2  # the copy was written, no row points at it
    for trace_id in kept:
        check_loads(path, trace_id)

    monkeypatch.undo()
    report = gc(path, RetentionPolicy(success_rate=0.3))
    assert (report.segments_deleted, report.segments_rewritten) == (1, 1)
    [new] = segments(path)
    assert new != old
    assert trace_ids(path) == kept == {t for t in ids if t in kept}
    for trace_id in kept:
        check_loads(path, trace_id)


@needs_proc
def test_a_crash_before_the_old_segment_goes_leaves_a_readable_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store"
    record(path, [(i % 4 == 0, i % 2 == 0) for i in range(24)])
    [old] = segments(path)

    def crash(full: Path) -> None:
        raise RuntimeError("power cut")

    monkeypatch.setattr(_segments, "_unlink_segment", crash)
    with pytest.raises(RuntimeError, match="power cut"):
        gc(path, RetentionPolicy(success_rate=0.3))
    kept = trace_ids(path)
    assert old.exists() and len(segments(path)) == 2
    for trace_id in kept:
        check_loads(path, trace_id)

    monkeypatch.undo()
    report = gc(path, RetentionPolicy(success_rate=0.3))
    assert (report.segments_deleted, report.segments_rewritten) == (1, 0)
    assert not old.exists() and len(segments(path)) == 1
    for trace_id in kept:
        check_loads(path, trace_id)


def test_a_symbolic_link_among_the_segments_is_never_followed_nor_removed(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = LocalStore(path, durable=False)
    put(store, tid(1, sampled=False))
    store.close()
    outside = tmp_path / "precious.jsonl"
    outside.write_bytes(b"keep me\n")
    link = path / "spans" / segments(path)[0].parent.name / "000000-1-00.jsonl"
    link.symlink_to(outside)
    gc(path, RetentionPolicy(success_rate=0.5))
    assert link.is_symlink() and outside.read_bytes() == b"keep me\n"


# ------------------------------------------------------------------------------------------------ dry run, lock


def test_a_dry_run_changes_nothing_and_predicts_the_run(tmp_path: Path) -> None:
    path = tmp_path / "store"
    record(path, [(i % 5 == 0, i % 3 == 0) for i in range(40)])
    policy = RetentionPolicy(success_rate=0.25, max_bytes="300kB")
    before = snapshot(path)

    dry = gc(path, policy, dry_run=True)

    assert snapshot(path) == before
    assert not (path / "gc.lock").exists()
    assert dry.dry_run and dry.traces_removed > 0 and dry.summary().startswith("gc (dry run): would keep")
    real = gc(path, policy)
    assert snapshot(path) != before
    expected = {**dry.to_dict(), "dry_run": False, "store_bytes_after": real.store_bytes_after}
    if not HAS_PROC:  # this process wrote the segment: busy
        expected.update(segments_rewritten=0, segments_busy=1, segment_bytes_freed=0)
    assert real.to_dict() == expected


def test_two_runs_never_overlap(tmp_path: Path) -> None:
    path = tmp_path / "store"
    record(path, [(False, False)])
    with _retention._exclusive(path / "gc.lock"), pytest.raises(StoreError, match="another retention run"):
        gc(path)
    gc(path)  # released


def test_no_store_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no store"):
        gc(tmp_path)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(TypeError):
        gc(tmp_path, {"success_rate": 0.5})  # type: ignore[arg-type]


@pytest.mark.parametrize("size", ["big", -5000, 1.5, b"\x00"])
def test_a_payload_size_that_is_no_byte_count_is_a_store_error_and_nothing_goes(tmp_path: Path, size: Any) -> None:
    path = tmp_path / "store"
    store = LocalStore(path, durable=False)
    removed = tid(2, sampled=False)
    put(store, removed, refs=(payload(2),))
    store.put_payload(*payload(4))
    store.close()
    with contextlib.closing(sqlite3.connect(path / "index.sqlite3")) as db, db:
        db.execute("UPDATE payloads SET size = ? WHERE hash = ?", (size, payload(4)[0]))
    for dry_run in (True, False):
        with pytest.raises(StoreError, match="not a byte count") as caught:
            gc(path, RetentionPolicy(success_rate=0.5), dry_run=dry_run)
        assert payload(4)[0][:20] in str(caught.value) and "index.sqlite3" in str(caught.value)
    assert trace_ids(path) == {removed}  # nothing was removed


def test_an_index_that_cannot_be_opened_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = LocalStore(path, durable=False)
    put(store, tid(1, sampled=True))
    store.close()
    for name in ("index.sqlite3", "index.sqlite3-wal", "index.sqlite3-shm"):
        with contextlib.suppress(FileNotFoundError):
            (path / name).unlink()
    (path / "index.sqlite3").mkdir()
    for dry_run in (True, False):
        with pytest.raises(StoreError, match="unreadable store index"):
            gc(path, dry_run=dry_run)


# ------------------------------------------------------------------------------------------------ concurrency

WRITER = """
import sys, time
sys.path.insert(0, {repo!r})
from tests.unit.store.test_retention import put, tid, payload
from chronicle_otel.store import LocalStore

store = LocalStore({path!r}, durable=False)
print("ready", flush=True)
for n in range({count}):
    # a payload of its own, and one the removed traces refer to (stored again with it, as the exporter does)
    put(store, tid(1000 + n, sampled=True), refs=(payload(1000 + n), payload(n % {shared})))
    time.sleep(0.002)
store.close()
"""


def test_a_concurrent_writer_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = LocalStore(path, durable=False)
    shared = count = 200  # each payload of the removed traces is referred to again once, by one new trace
    doomed = [tid(n, sampled=False) for n in range(shared)]
    for n, trace_id in enumerate(doomed):
        put(store, trace_id, refs=(payload(n), payload(5000 + n)), pad=500)
    store.close()
    script = WRITER.format(repo=str(REPO), path=str(path), count=count, shared=shared)
    writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None
    assert writer.stdout.readline().strip() == "ready"
    runs = []
    deadline = time.monotonic() + 60
    while writer.poll() is None and time.monotonic() < deadline:
        runs.append(gc(path, RetentionPolicy(success_rate=0.5)))
    writer.stdout.close()
    assert writer.wait(timeout=60) == 0
    runs.append(gc(path, RetentionPolicy(success_rate=0.5)))

    assert trace_ids(path) == {tid(1000 + n, sampled=True) for n in range(count)}
    assert sum(r.traces_removed for r in runs) == len(doomed)
    reader = LocalStore(path)
    for n in range(count):
        [line] = list(reader.iter_lines(tid(1000 + n, sampled=True)))
        for digest, data in (payload(1000 + n), payload(n % shared)):
            assert digest.encode() in line
            assert reader.get_payload(digest) == data, n
    assert not any(reader.has_payload(payload(5000 + n)[0]) for n in range(shared))
    reader.close()


# ------------------------------------------------------------------------------------------------ policy values


def test_policy_values_are_normalised() -> None:
    policy = RetentionPolicy(success_rate=1, max_age="30d", max_bytes="2GB", min_keep_failed_age=3600)
    assert policy.success_rate == 1.0 and isinstance(policy.success_rate, float)
    assert policy.max_age == dt.timedelta(days=30)
    assert policy.max_bytes == 2_000_000_000
    assert policy.min_keep_failed_age == dt.timedelta(hours=1)
    assert RetentionPolicy(max_bytes="1.5GiB").max_bytes == int(1.5 * 1024**3)
    assert RetentionPolicy(max_bytes="500M").max_bytes == 500_000_000
    assert RetentionPolicy(max_bytes="64 kb").max_bytes == 64_000
    assert RetentionPolicy(max_bytes=4096).max_bytes == 4096
    assert RetentionPolicy(max_age="2w").max_age == dt.timedelta(weeks=2)
    assert RetentionPolicy(max_age="90m").max_age == dt.timedelta(minutes=90)
    assert RetentionPolicy(max_age=dt.timedelta(days=3)).max_age == dt.timedelta(days=3)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"keep_failed": "yes"}, "keep_failed"),
        ({"success_rate": 1.5}, "success_rate"),
        ({"success_rate": -0.1}, "success_rate"),
        ({"success_rate": float("nan")}, "success_rate"),
        ({"success_rate": True}, "success_rate"),
        ({"max_age": "3x"}, "max_age"),
        ({"max_age": 0}, "max_age"),
        ({"max_age": -5}, "max_age"),
        ({"max_age": "1000000d"}, "max_age"),
        ({"max_bytes": "2XB"}, "max_bytes"),
        ({"max_bytes": 0}, "max_bytes"),
        ({"max_bytes": float("inf")}, "max_bytes"),
        ({"max_bytes": [1]}, "max_bytes"),
        ({"min_keep_failed_age": "soon"}, "min_keep_failed_age"),
    ],
)
def test_bad_policy_values_are_config_errors(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ConfigError) as exc:
        RetentionPolicy(**kwargs)
    assert exc.value.name == name
    assert name in str(exc.value)


def test_the_sampling_decision_reads_the_trace_id_only() -> None:
    half = RetentionPolicy(success_rate=0.5)
    assert half.sampled("f" * 18 + "7" + "f" * 13)
    assert not half.sampled("0" * 18 + "8" + "0" * 13)
    assert half.sampled("F" * 18 + "0" * 14)  # case does not matter
    assert not RetentionPolicy(success_rate=0.0).sampled("0" * 32)
    assert RetentionPolicy(success_rate=1.0).sampled("f" * 32)
    ids = [f"{n * 0x9E3779B97F4A7C15 % (1 << 128):032x}" for n in range(1, 4001)]
    kept = sum(RetentionPolicy(success_rate=0.1).sampled(t) for t in ids)
    assert 300 < kept < 500
    with pytest.raises(ValueError, match="trace id"):
        half.sampled("xyz")


HEX32 = st.text("0123456789abcdef", min_size=32, max_size=32)


@given(
    trace_id=HEX32,
    failed=st.booleans(),
    keep_failed=st.booleans(),
    rate=st.floats(0.0, 1.0),
    higher=st.floats(0.0, 1.0),
    age=st.integers(0, 10**9),
    max_age=st.none() | st.integers(1, 10**9),
)
def test_the_policy_decision(
    trace_id: str, failed: bool, keep_failed: bool, rate: float, higher: float, age: int, max_age: int | None
) -> None:
    policy = RetentionPolicy(keep_failed=keep_failed, success_rate=rate, max_age=max_age)
    verdict = policy.decide(trace_id, failed=failed, age=age)
    in_sample = int(trace_id[-14:], 16) < rate * 2**56
    if max_age is not None and age > max_age:
        assert verdict == "expired"
    elif failed and keep_failed:
        assert verdict == "keep"
    else:
        assert verdict == ("keep" if in_sample else "unsampled")
    assert policy.decide(trace_id, failed=failed, age=dt.timedelta(seconds=age)) == verdict
    assert (
        RetentionPolicy(keep_failed=keep_failed, success_rate=rate, max_age=max_age).decide(
            trace_id, failed=failed, age=age
        )
        == verdict
    )  # deterministic
    if policy.sampled(trace_id) and higher >= rate:  # a higher rate keeps every trace a lower one keeps
        assert RetentionPolicy(success_rate=higher).sampled(trace_id)


def test_the_report_reads_as_one_line_and_as_json(tmp_path: Path) -> None:
    path = tmp_path / "store"
    record(path, [(False, False)] * 3)
    report = gc(path, RetentionPolicy(success_rate=0.0))
    line = report.summary()
    assert "\n" not in line and line.startswith("gc: kept 0 traces") and "removed 3" in line
    assert orjson.loads(orjson.dumps(report.to_dict()))["traces_removed"] == 3


def test_the_grace_period_must_be_a_duration(tmp_path: Path) -> None:
    path = tmp_path / "store"
    record(path, [(False, False)])
    with pytest.raises(ConfigError, match="grace"):
        apply_retention(path, grace=-1)
    assert apply_retention(path, grace="0s").traces_pending == 0


@pytest.fixture(autouse=True)
def plain_store_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read, size or damage segment bytes by hand: the store writes them as plain JSON lines here
    (tests/unit/store/test_compression.py covers the compressed form)."""
    monkeypatch.setenv("CHRONICLE_STORE_COMPRESS", "false")
