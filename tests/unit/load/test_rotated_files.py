"""Directories and glob patterns of trace files: the Collector ``file`` exporter's rotated output, merged."""

from __future__ import annotations

import gzip
import json
import os
import threading
import time
from pathlib import Path

import pytest
import zstandard

import chronicle_otel as chronicle
from chronicle_otel import load
from tests.unit.load.test_otlp_json import CHILD, ROOT, SERVICE, TID, TID2, request, span, write_lines

ACTIVE = "traces.jsonl"
BACKUP = "traces-2026-11-30T10-00-00.000.jsonl"


def rotated(directory: Path) -> Path:
    """A trace split across a rotation: the root in a gzip backup, the rest in the active file."""
    directory.mkdir()
    (directory / f"{BACKUP}.gz").write_bytes(gzip.compress((json.dumps(request(ROOT)) + "\n").encode()))
    write_lines(directory / ACTIVE, request(CHILD, SERVICE))
    return directory


def check_whole(trace: chronicle.Trace) -> None:
    assert trace.trace_id == TID
    assert [b.name for b in trace.boundaries] == ["run", "plan"]
    assert trace.root is not None and trace.boundaries[1].parent is trace.root
    assert len(trace.spans) == 3


def test_a_directory_of_rotated_files_is_merged(tmp_path: Path) -> None:
    directory = rotated(tmp_path / "collector-out")
    check_whole(chronicle.load_trace(directory))
    check_whole(chronicle.load_trace(str(directory), TID))
    assert chronicle.load_trace(directory).source == str(directory)


def test_a_glob_pattern_is_merged(tmp_path: Path) -> None:
    directory = rotated(tmp_path / "collector-out")
    check_whole(chronicle.load_trace(str(directory / "traces*")))
    check_whole(chronicle.load_trace(directory / "traces*.jsonl*"))  # a Path with a pattern, too
    only_active = chronicle.load_trace(str(directory / "*.jsonl"))
    assert [b.name for b in only_active.boundaries] == ["plan"]
    with pytest.raises(chronicle.TraceLoadError, match="no file matches the pattern"):
        chronicle.load_trace(str(directory / "metrics*.jsonl"))


def test_pieces_of_one_span_in_two_files_are_merged(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    partial_root = dict(ROOT, attributes=ROOT["attributes"][:2], endTimeUnixNano="0")
    write_lines(tmp_path / "d" / BACKUP, request(partial_root))
    write_lines(tmp_path / "d" / ACTIVE, request(ROOT, CHILD, SERVICE))
    check_whole(chronicle.load_trace(tmp_path / "d"))


def test_what_a_directory_reads(tmp_path: Path) -> None:
    directory = rotated(tmp_path / "d")
    zstd = zstandard.ZstdCompressor().compress(
        (json.dumps(request(span("00000000000000e5", "other", trace_id=TID2))) + "\n").encode()
    )
    (directory / "traces-2026-11-30T09-00-00.000.json.zst").write_bytes(zstd)
    (directory / "notes.txt").write_text("not trace data")  # not named like trace data: not read
    (directory / ".traces.jsonl").write_bytes(b"\x00garbage")  # hidden: not read
    (directory / "old.jsonl").mkdir()  # a directory: not read, nor what is below it
    write_lines(directory / "old.jsonl" / ACTIVE, request(span("00000000000000f6", "x", trace_id="c" * 32)))
    os.mkfifo(directory / "pipe.jsonl")  # a pipe would block a read forever: skipped
    with pytest.raises(chronicle.TraceLoadError, match="2 traces and no trace_id"):
        chronicle.load_trace(directory)
    check_whole(chronicle.load_trace(directory, TID))
    assert chronicle.load_trace(directory, TID2).spans[0].name == "other"
    with pytest.raises(chronicle.TraceNotFoundError):
        chronicle.load_trace(directory, "c" * 32)


def test_a_directory_without_trace_files_keeps_its_error(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "notes.txt").write_text("x")
    with pytest.raises(chronicle.TraceLoadError, match="a directory that is not a chronicle store") as info:
        chronicle.load_trace(tmp_path / "d")
    assert "chronicle-store.json" in str(info.value) and "*.jsonl" in str(info.value)
    with pytest.raises(chronicle.TraceLoadError, match="no such file or store"):
        chronicle.load_trace(tmp_path / "nothing-here.jsonl")


def test_a_bad_file_among_them_is_named(tmp_path: Path) -> None:
    directory = rotated(tmp_path / "d")
    (directory / "traces-2026-11-30T11-00-00.000.jsonl").write_text('{"resourceSpans": [\n')
    with pytest.raises(chronicle.TraceLoadError, match=r"traces-2026-11-30T11-00-00\.000\.jsonl:1: ") as info:
        chronicle.load_trace(directory)
    assert "not JSON" in str(info.value)


def test_each_file_has_the_load_limits(tmp_path: Path) -> None:
    directory = rotated(tmp_path / "d")
    (directory / "big.jsonl.gz").write_bytes(gzip.compress(b" " * (4 << 20)))
    limits = chronicle.LoadLimits(max_decompressed_bytes=1 << 20)
    with pytest.raises(chronicle.LoadLimitError, match=r"big\.jsonl\.gz"):
        chronicle.load_trace(directory, limits=limits)
    check_whole(chronicle.load_trace(str(directory / "traces*"), limits=limits))


def test_the_number_of_files_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(load, "MAX_TRACE_FILES", 3)
    directory = rotated(tmp_path / "d")
    write_lines(directory / "traces-2026-11-30T08-00-00.000.jsonl", request(SERVICE))
    check_whole(chronicle.load_trace(directory))  # three files: at the bound
    write_lines(directory / "traces-2026-11-30T07-00-00.000.jsonl", request(SERVICE))
    for source in (directory, str(directory / "traces*")):
        with pytest.raises(chronicle.TraceLoadError, match="more than 3 trace files; name fewer with a glob pattern"):
            chronicle.load_trace(source)
    assert load.MAX_TRACE_FILES == 3 and "MAX_TRACE_FILES" in load.__all__


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_a_named_pipe_given_as_the_file_is_read_without_waiting_for_a_writer(tmp_path: Path) -> None:
    pipe = tmp_path / "pipe.jsonl"
    os.mkfifo(pipe)
    outcome: list[BaseException | None] = []

    def load() -> None:
        try:
            chronicle.load_trace(pipe)
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(30)  # a blocking open would wait here forever
    assert not reader.is_alive()
    assert isinstance(outcome[0], chronicle.TraceLoadError)  # nothing written: no trace data, said as such

    def write() -> None:
        with open(pipe, "wb") as out:  # a pipe with a writer (``<(zcat …)``) is read as usual
            for line in (request(ROOT, CHILD, SERVICE),):
                out.write((json.dumps(line) + "\n").encode())

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    start = time.monotonic()
    trace = None
    while trace is None and time.monotonic() - start < 30:
        try:
            trace = chronicle.load_trace(pipe)
        except chronicle.TraceLoadError:  # opened before the writer: its end came first; open again
            time.sleep(0.05)
    writer.join(30)
    assert trace is not None
    check_whole(trace)
