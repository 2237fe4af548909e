"""The local store writes span lines and payloads as zstd frames (lines with a dictionary trained on the store's own
first lines), reads both forms, and treats the frames as untrusted input."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import pytest
import zstandard

import chronicle_otel as chronicle
from chronicle_otel.errors import StoreError
from chronicle_otel.store import _compression
from chronicle_otel.store._compression import MAGIC, inflate
from chronicle_otel.store._local import LocalStore
from chronicle_otel.store.reader import StoreReader
from tests.conftest import make_recorder

WORDS = ["sell", "buy", "shares", "of", "MSFT", "at", "market", "the", "order", "limit", "confirm", "price", "quote"]


@chronicle.boundary(kind="llm", name="zs.plan")
def plan(request: str, n: int) -> dict[str, Any]:
    text = " ".join(WORDS[(n * 7 + i) % len(WORDS)] for i in range(120))
    return {"symbol": "MSFT", "quantity": n, "reasoning": text}


@chronicle.boundary(kind="agent", name="zs.agent")
def agent(request: str, n: int) -> dict[str, Any]:
    return plan(request, n)


def _segments(store: Path) -> list[Path]:
    return sorted((store / "spans").rglob("*.jsonl"))


def test_lines_are_frames_with_a_trained_dictionary_and_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_compression, "SAMPLE_LINES", 40)
    monkeypatch.setattr(_compression, "DICT_SIZE", 16 * 1024)
    recorder = make_recorder(tmp_path)
    for n in range(120):
        agent("sell " + " ".join(WORDS) * 3, n)
    recorder.config.force_flush()
    store = recorder.path
    assert [p.suffix for p in (store / "dicts").iterdir()] == [".zdict"]
    with contextlib.closing(StoreReader(store)) as reader:
        traces = reader.list_traces()
    assert len(traces) == 120
    raw = 0
    for summary in traces:
        trace = chronicle.load_trace(store, summary.trace_id)
        root = trace.root
        assert root is not None and root.output["quantity"] == root.input["n"]
        raw += sum(len(b.raw_input.text) + len(b.raw_output.text) for b in trace.boundaries)  # type: ignore[union-attr]
    stored = sum(p.stat().st_size for p in _segments(store))
    assert _segments(store)[0].read_bytes().startswith(MAGIC)
    assert stored < 0.5 * raw, (stored, raw)  # the store holds less than half the raw payload bytes


def test_a_whole_payload_is_a_frame_and_comes_back_intact(tmp_path: Path) -> None:
    recorder = make_recorder(tmp_path, capture=chronicle.CaptureOptions(max_attribute_length=200))
    agent("x", 50_000)  # the reasoning is cut on the span: the whole payload goes to the store
    recorder.config.force_flush()
    trace = chronicle.load_trace(recorder.path, "latest")
    plan_call = trace.find("zs.plan")[0]
    assert plan_call.raw_output is not None and plan_call.raw_output.complete
    assert plan_call.output["quantity"] == 50_000
    import sqlite3

    with sqlite3.connect(recorder.path / "index.sqlite3") as db:
        (data,) = db.execute("SELECT data FROM payloads").fetchone()
    db.close()
    assert bytes(data).startswith(MAGIC)


def test_plain_and_compressed_lines_share_a_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHRONICLE_STORE_COMPRESS", "false")
    recorder = make_recorder(tmp_path)
    agent("plain", 1)
    recorder.config.force_flush()
    recorder.config.shutdown()
    monkeypatch.setenv("CHRONICLE_STORE_COMPRESS", "true")
    recorder = make_recorder(tmp_path)
    agent("compressed", 2)
    recorder.config.force_flush()
    heads = sorted(p.read_bytes()[:4] for p in _segments(recorder.path))
    assert heads == sorted([b'{"re', MAGIC])
    with contextlib.closing(StoreReader(recorder.path)) as reader:
        quantities = sorted(
            chronicle.load_trace(recorder.path, t.trace_id).root.output["quantity"]  # type: ignore[union-attr]
            for t in reader.list_traces()
        )
    assert quantities == [1, 2]


def test_the_store_option_decides_over_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHRONICLE_STORE_COMPRESS", "true")
    options = chronicle.StoreOptions(path=tmp_path / "plain", processor="simple", durable=False, compress=False)
    recorder = make_recorder(tmp_path, store=options)
    agent("plain", 1)
    recorder.config.shutdown()
    assert [p.read_bytes()[:4] for p in _segments(tmp_path / "plain")] == [b'{"re']
    assert not (tmp_path / "plain" / "payloads").exists() or not any(
        p.read_bytes().startswith(MAGIC) for p in (tmp_path / "plain" / "payloads").rglob("*") if p.is_file()
    )

    monkeypatch.setenv("CHRONICLE_STORE_COMPRESS", "false")
    options = chronicle.StoreOptions(path=tmp_path / "zstd", processor="simple", durable=False, compress=True)
    recorder = make_recorder(tmp_path, store=options)
    agent("compressed", 2)
    recorder.config.shutdown()
    assert [p.read_bytes()[:4] for p in _segments(tmp_path / "zstd")] == [MAGIC]

    monkeypatch.setenv("CHRONICLE_STORE_COMPRESS", "maybe")
    with pytest.raises(chronicle.ConfigError, match="CHRONICLE_STORE_COMPRESS"):
        make_recorder(tmp_path, store=chronicle.StoreOptions(path=tmp_path / "bad"))


@pytest.mark.parametrize("configured_inside", [False, True], ids=["plain replay", "configure() during the replay"])
def test_a_replay_writes_its_temporary_store_plain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, configured_inside: bool
) -> None:
    monkeypatch.setenv("CHRONICLE_STORE_COMPRESS", "true")
    recorder = make_recorder(tmp_path)
    agent("sell", 3)
    recorder.config.force_flush()
    trace = chronicle.load_trace(recorder.path, "latest")
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        if configured_inside:  # a module the replayed code imports configures at import: sandboxed the same way
            chronicle.configure(store=chronicle.StoreOptions(path=tmp_path / "theirs", compress=True))
        assert run.rerun() == trace.root.output  # type: ignore[union-attr]
        sandbox = run.replay_store
        assert sandbox is not None
        assert [p.read_bytes()[:4] for p in _segments(sandbox)] == [b'{"re']
        assert not (sandbox / "dicts").exists()
    assert not (tmp_path / "theirs").exists()


def test_a_store_opened_directly_refuses_a_bad_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHRONICLE_STORE_COMPRESS", "fasle")
    with pytest.raises(chronicle.ConfigError, match=r"CHRONICLE_STORE_COMPRESS.*fasle"):
        LocalStore(tmp_path)
    monkeypatch.setenv("CHRONICLE_STORE_COMPRESS", " OFF ")
    assert LocalStore(tmp_path).compress is False
    assert LocalStore(tmp_path, compress=True).compress is True


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (zstandard.ZstdCompressor(write_content_size=False).compress(b"{}"), "declares no size"),
        (zstandard.ZstdCompressor().compress(b"x" * 5000), "declares 5000 bytes; at most 4096"),
        (zstandard.ZstdCompressor().compress(b"hello " * 50)[:-6] + b"\xff" * 6, "damaged zstd frame"),
    ],
)
def test_a_frame_is_checked_before_it_is_inflated(tmp_path: Path, frame: bytes, message: str) -> None:
    with pytest.raises(StoreError, match=message):
        inflate(frame, tmp_path, tmp_path / "spans" / "x.jsonl", 7, 4096)


def test_a_frame_that_needs_a_missing_or_odd_dictionary_is_a_store_error(tmp_path: Path) -> None:
    samples = [f'{{"line": {i}, "words": "{" ".join(WORDS * 5)}"}}'.encode() for i in range(300)]
    trained = zstandard.train_dictionary(4096, samples)
    frame = zstandard.ZstdCompressor(dict_data=trained).compress(samples[0])
    with pytest.raises(StoreError, match="compression dictionary missing"):
        inflate(frame, tmp_path, tmp_path / "seg", 0, 1 << 20)
    (tmp_path / "dicts").mkdir()
    elsewhere = tmp_path / "elsewhere.zdict"
    elsewhere.write_bytes(trained.as_bytes())
    link = tmp_path / "dicts" / f"{trained.dict_id()}.zdict"
    os.symlink(elsewhere, link)
    with pytest.raises(StoreError, match="compression dictionary"):
        inflate(frame, tmp_path, tmp_path / "seg", 0, 1 << 20)
    link.unlink()
    link.write_bytes(trained.as_bytes())
    assert inflate(frame, tmp_path, tmp_path / "seg", 0, 1 << 20) == samples[0]


def test_retention_reads_payload_references_inside_frames(tmp_path: Path) -> None:
    from chronicle_otel.store import RetentionPolicy, apply_retention

    recorder = make_recorder(tmp_path, capture=chronicle.CaptureOptions(max_attribute_length=200))
    agent("x", 50_000)
    recorder.config.force_flush()
    digest = chronicle.load_trace(recorder.path, "latest").find("zs.plan")[0].raw_output.digest  # type: ignore[union-attr]
    apply_retention(recorder.path, RetentionPolicy(), grace=0)
    with contextlib.closing(StoreReader(recorder.path)) as reader:
        assert reader.has_payload(digest)  # still referenced by the kept (compressed) line


def _trained() -> zstandard.ZstdCompressionDict:
    samples = [f'{{"line": {i}, "words": "{" ".join(WORDS * 5)}"}}'.encode() for i in range(300)]
    return zstandard.train_dictionary(4096, samples)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (lambda d: d.as_bytes()[:8] + b"\0" * 500, "damaged compression dictionary"),  # its id, then junk
        (lambda d: os.urandom(600), "holds dictionary 0"),  # read as a raw dictionary, it would be id 0
    ],
)
def test_a_damaged_dictionary_is_a_store_error_naming_it(tmp_path: Path, content: Any, message: str) -> None:
    trained = _trained()
    frame = zstandard.ZstdCompressor(dict_data=trained).compress(b'{"resourceSpans": []}')
    (tmp_path / "dicts").mkdir()
    path = tmp_path / "dicts" / f"{trained.dict_id()}.zdict"
    path.write_bytes(content(trained))
    with pytest.raises(StoreError, match=message) as caught:
        inflate(frame, tmp_path, tmp_path / "seg", 0, 1 << 20)
    assert str(path) in str(caught.value)


def test_the_writer_skips_a_damaged_dictionary_and_every_line_stays_readable(tmp_path: Path) -> None:
    store = tmp_path / ".chronicle"
    (store / "dicts").mkdir(parents=True)
    trained = _trained()
    junk = store / "dicts" / f"{trained.dict_id()}.zdict"
    junk.write_bytes(trained.as_bytes()[:8] + b"\0" * 500)
    misnamed = store / "dicts" / "123.zdict"  # a good dictionary under another id's name: frames would name 'its' id
    misnamed.write_bytes(trained.as_bytes())
    os.utime(junk, (2_000_000_000, 2_000_000_000))  # the newest: tried first
    recorder = make_recorder(tmp_path)
    for n in range(20):
        agent("sell", n)
    recorder.config.force_flush()
    with contextlib.closing(StoreReader(store)) as reader:
        traces = reader.list_traces()
    assert len(traces) == 20
    for summary in traces:
        assert chronicle.load_trace(store, summary.trace_id).root.output["quantity"] >= 0  # type: ignore[union-attr]
    for segment in _segments(store):
        data = segment.read_bytes()
        assert data.startswith(MAGIC)
        assert zstandard.get_frame_parameters(data).dict_id == 0  # neither the damaged nor the misnamed one
