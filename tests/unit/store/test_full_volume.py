"""A volume with room for part of an export batch: the store writes what fits and counts only what did not.

An export batch (up to 2,048 spans) used to be written whole or not at all: on a small volume every batch was larger
than the free space, and nothing was stored while most of the volume stayed free. Now a batch that does not fit is
split (halves, then quarters, down to one trace with its payloads), so a volume with room for N spans keeps about N of
them; the spans that did not fit are the only ones counted as failed. Tested on a real 2 MiB tmpfs where this machine
allows mounting one, and with ENOSPC simulated at the segment's writes everywhere.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import chronicle_otel as chronicle
from chronicle_otel.store import LocalStore, StoreReader, TraceRecord, _local, payload_digest
from chronicle_otel.store._local import DISK_FULL
from tests.conftest import make_recorder

REPO = Path(__file__).parents[3]
VOLUME_BYTES = 2 * 1024 * 1024

# argv: store, calls; two threads of one ``tool`` boundary each, every output ~4 KB. The threads record in bursts
# of 2,048 calls between them and the batch is then exported (1,024 calls each, then a flush), so every export batch
# holds 2,048 spans, ~10 MB: more than the whole volume. Prints the store's counters.
RECORDER = textwrap.dedent(
    """
    import json, sys, threading
    import chronicle_otel as chronicle

    path, calls = sys.argv[1], int(sys.argv[2])
    config = chronicle.configure(store=path, otlp=False)
    burst = threading.Barrier(2, action=config.force_flush)

    @chronicle.boundary(kind="tool", name="quote")
    def quote(i):
        return {"i": i, "text": " ".join(f"w{(i * 7 + k) % 997}" for k in range(600))}

    def run(first):
        mine = range(first, calls, 2)
        for start in range(0, len(mine), 1024):
            for i in mine[start : start + 1024]:
                assert quote(i)["i"] == i
            burst.wait()

    threads = [threading.Thread(target=run, args=(t,)) for t in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    config.shutdown()
    store = config.stats().exports["store"]
    print(json.dumps({"accepted": store.accepted, "exported": store.exported, "failed": store.failed,
                      "failed_spans": config.store.failed_spans}))
    """
)


def _record(store: Path, calls: int) -> tuple[dict[str, int], str]:
    done = subprocess.run(
        [sys.executable, "-c", RECORDER, str(store), str(calls)],
        cwd=REPO,
        # lines of one size (the room is easy to tell); no export but those of full batches (and the flushes)
        env={**os.environ, "CHRONICLE_STORE_COMPRESS": "false", "CHRONICLE_STORE_MAX_DELAY": "60"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _stored_spans(store: Path) -> int:
    """Spans of every listed trace, each trace loaded whole."""
    with contextlib.closing(StoreReader(store)) as reader:
        listed = reader.list_traces()
        for row in listed:
            assert len(chronicle.load_trace(reader, row.trace_id).spans) == row.span_count
    return sum(row.span_count for row in listed)


@pytest.fixture
def small_volume(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs, unmounted after the test."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root on Linux (the simulated full volume below runs everywhere)")
    mount = tmp_path / "volume"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={VOLUME_BYTES}", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}); the simulated full volume below runs")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_a_small_volume_keeps_about_as_many_spans_as_it_has_room_for(small_volume: Path, tmp_path: Path) -> None:
    # The room one span takes: its line and its share of the index, from the same recording on a large volume.
    baseline, _ = _record(tmp_path / "baseline", 1000)
    assert baseline["exported"] == 1000
    per_span = _size(tmp_path / "baseline") / 1000
    room = VOLUME_BYTES / per_span

    store = small_volume / "store"
    counts, log = _record(store, 20_000)
    stored = _stored_spans(store)
    assert stored >= 0.8 * room, f"{stored} spans stored on a volume with room for {room:.0f}"
    # only what did not fit is counted as failed, and all of it is
    assert counts["exported"] == stored
    assert counts["exported"] + counts["failed"] == counts["accepted"] == 20_000
    assert counts["failed"] == counts["failed_spans"]
    assert DISK_FULL in log and "are stored" in log
    print(f"\nfull volume: {stored} of 20,000 spans stored, room for {room:.0f} ({per_span:.0f} bytes a span)")


# ------------------------------------------------------------------------------------ ENOSPC at the file layer


def _line(i: int) -> bytes:
    span = {"traceId": f"{i:032x}", "spanId": f"{i:016x}", "name": f"s{i}", "text": "x" * 900}
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()


def _records(first: int, count: int) -> list[TraceRecord]:
    out = []
    for i in range(first, first + count):
        data = json.dumps({"whole": i, "text": "y" * 300}).encode()
        out.append(TraceRecord(f"{i:032x}", _line(i), 1, 0, None, None, None, payloads=[(payload_digest(data), data)]))
    return out


@pytest.fixture
def segment_room(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Span segments get ENOSPC past the bytes in the returned list's one item (a volume that fills up)."""
    room = [0]
    real = _local._write_all

    def write_all(fd: int, data: bytes) -> None:
        if len(data) > room[0]:
            raise OSError(errno.ENOSPC, "No space left on device")
        room[0] -= len(data)
        real(fd, data)

    monkeypatch.setattr(_local, "_write_all", write_all)
    monkeypatch.setenv("CHRONICLE_STORE_COMPRESS", "false")
    return room


def test_a_batch_larger_than_the_room_left_is_stored_in_part(
    tmp_path: Path, segment_room: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    store = LocalStore(tmp_path, durable=False)
    line = len(_line(1)) + 1
    segment_room[0] = 37 * line + line // 2  # room for 37 of the 100 lines
    records = _records(1, 100)
    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        unstored = store.write_batch(records)
    assert unstored == records[37:]
    assert (store.failed_batches, store.failed_spans) == (1, 63)
    [warning] = [r.getMessage() for r in caplog.records]
    assert DISK_FULL in warning and "37 of the 100 spans of this export are stored, 63 are lost" in warning
    with contextlib.closing(StoreReader(tmp_path)) as reader:
        assert sorted(t.trace_id for t in reader.list_traces()) == [rec.trace_id for rec in records[:37]]
        for rec in records[:37]:  # each stored trace with its own payloads
            assert reader.get_payload(rec.payloads[0][0]) == rec.payloads[0][1]
        assert reader.get_payload(records[37].payloads[0][0]) is None
    # no line the index does not point to
    segment = next((tmp_path / "spans").rglob("*.jsonl")).read_bytes()
    assert segment.count(b"\n") == 37

    with pytest.raises(OSError, match="No space"):  # full: not even one trace fits, the batch fails whole
        store.write_batch(_records(200, 10))
    assert (store.failed_batches, store.failed_spans) == (2, 73)
    segment_room[0] = 10**9
    assert store.write_batch(_records(300, 5)) == []
    store.close()


def test_the_export_counts_only_the_spans_that_did_not_fit(tmp_path: Path, segment_room: list[int]) -> None:
    recorder = make_recorder(tmp_path, store=chronicle.StoreOptions(path=tmp_path / ".chronicle", durable=False))

    @chronicle.boundary(kind="tool", name="quote")
    def quote(i: int) -> str:
        return "z" * 700

    quote(0)
    assert recorder.config.force_flush()  # the store exists: its room is counted from here
    segment_room[0] = 12_000  # a dozen spans' lines or so
    for i in range(1, 200):
        quote(i)
    assert recorder.config.force_flush()
    stats = recorder.config.stats().exports["store"]
    with contextlib.closing(StoreReader(recorder.path)) as reader:
        stored = sum(t.span_count for t in reader.list_traces())
    assert 1 < stored < 200
    assert (stats.exported, stats.failed) == (stored, 200 - stored)
    assert stats.failed == recorder.store.failed_spans
    recorder.config.shutdown()
