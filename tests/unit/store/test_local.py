from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel.codec import encode
from chronicle_otel.store import MANIFEST, LocalStore, payload_digest
from tests.conftest import Recorder, make_recorder


def test_one_megabyte_payload_is_truncated_on_the_span_and_whole_in_the_store(recorder: Recorder) -> None:
    big = "é" + "x" * (1024 * 1024)

    @chronicle.boundary(kind="retrieval", name="fetch")
    def fetch(doc: str) -> str:
        return doc.upper()

    assert fetch(big) == big.upper()
    a = recorder.attrs("fetch")
    for key, trunc, h, value in (
        (sc.INPUT, sc.INPUT_TRUNCATED, sc.INPUT_HASH, {"doc": big}),
        (sc.OUTPUT, sc.OUTPUT_TRUNCATED, sc.OUTPUT_HASH, big.upper()),
    ):
        whole = encode(value)
        assert a[trunc] is True
        assert len(a[key]) == 8192
        assert whole.decode().startswith(a[key])
        assert a[h] == "sha256:" + hashlib.sha256(whole).hexdigest()
        stored = recorder.store.get_payload(a[h])
        assert stored == whole
        assert payload_digest(stored) == a[h]
    # the stored span line carries the same truncated attribute and hash
    [trace] = recorder.store.list_traces()
    [span] = recorder.store.read_spans(trace.trace_id)
    attrs = {kv["key"]: kv["value"] for kv in span["attributes"]}
    assert attrs[sc.OUTPUT_HASH]["stringValue"] == a[sc.OUTPUT_HASH]
    assert attrs[sc.OUTPUT_TRUNCATED] == {"boolValue": True}


def test_small_payloads_stay_on_the_span_only(recorder: Recorder) -> None:
    @chronicle.boundary(name="small")
    def small(x: int) -> int:
        return x

    small(1)
    assert sc.INPUT_TRUNCATED not in recorder.attrs("small")
    assert recorder.store.get_payload(recorder.attrs("small")[sc.INPUT_HASH]) is None


def test_a_lower_sdk_attribute_limit_lowers_the_cap_and_flags_truncation(tmp_path: Path) -> None:
    provider = TracerProvider(span_limits=SpanLimits(max_span_attribute_length=100))
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    config = chronicle.configure(
        tracer_provider=provider, store=chronicle.StoreOptions(path=tmp_path, processor="simple", durable=False)
    )
    assert config.max_attribute_length == 100

    @chronicle.boundary(name="cut")
    def cut(text: str) -> int:
        return len(text)

    cut("y" * 500)
    [span] = memory.get_finished_spans()
    attrs = span.attributes or {}
    assert attrs[sc.INPUT_TRUNCATED] is True
    assert config.store is not None
    assert config.store.get_payload(attrs[sc.INPUT_HASH]) == encode({"text": "y" * 500})


def test_configurable_cap(tmp_path: Path) -> None:
    rec = make_recorder(tmp_path, capture=chronicle.CaptureOptions(max_attribute_length=64))

    @chronicle.boundary(name="capped")
    def capped(text: str) -> None:
        pass

    capped("z" * 100)
    assert len(rec.attrs("capped")[sc.INPUT]) == 64


def test_list_traces_summary_and_failed_filter(recorder: Recorder) -> None:
    @chronicle.boundary(kind="agent", name="agent")
    def agent(fail: bool) -> str:
        if fail:
            raise RuntimeError("sold 1,000 shares")
        return "ok"

    agent(False)
    with pytest.raises(RuntimeError):
        agent(True)
    traces = recorder.store.list_traces()
    assert len(traces) == 2
    newest, oldest = traces
    assert newest.status == "ERROR" and newest.failed and newest.error_count == 1
    assert oldest.status == "UNSET" and not oldest.failed
    for t, span in zip(traces, reversed(recorder.spans()), strict=True):
        assert t.trace_id == f"{span.context.trace_id:032x}"
        assert t.root_boundary == "agent" and t.root_boundary_kind == "agent" and t.root_name == "agent"
        assert t.start_ns == span.start_time and t.duration_ns == span.end_time - span.start_time  # type: ignore[operator]
        assert t.span_count == 1
    assert [t.trace_id for t in recorder.store.list_traces(failed=True)] == [newest.trace_id]
    assert [t.trace_id for t in recorder.store.list_traces(failed=False)] == [oldest.trace_id]
    assert recorder.store.list_traces(limit=1) == [newest]
    assert recorder.store.trace_summary(newest.trace_id.upper()) == newest
    assert recorder.store.trace_summary("0" * 32) is None


def test_root_boundary_is_the_outermost_boundary_under_a_service_span(recorder: Recorder) -> None:
    tracer = recorder.provider.get_tracer("svc")

    @chronicle.boundary(kind="tool", name="inner")
    def inner() -> None:
        pass

    @chronicle.boundary(kind="agent", name="outer")
    def outer() -> None:
        inner()

    with tracer.start_as_current_span("POST /chat"):
        outer()
    [t] = recorder.store.list_traces()
    assert (t.root_name, t.root_boundary, t.root_boundary_kind, t.span_count) == ("POST /chat", "outer", "agent", 3)


def test_read_spans_by_trace_id_reads_only_that_trace(recorder: Recorder) -> None:
    @chronicle.boundary(name="a")
    def a(i: int) -> int:
        return i

    for i in range(5):
        a(i)
    ids = [t.trace_id for t in recorder.store.list_traces()]
    assert len(set(ids)) == 5
    for tid in ids:
        spans = recorder.store.read_spans(tid)
        assert [s["traceId"] for s in spans] == [tid]
    assert recorder.store.read_spans("f" * 32) == []


def test_store_files_are_otlp_json_lines_and_versioned(recorder: Recorder) -> None:
    @chronicle.boundary(name="v")
    def v() -> None:
        pass

    v()
    manifest = json.loads((recorder.path / MANIFEST).read_text())
    assert manifest == {"format": "chronicle-store/2"}
    segments = list((recorder.path / "spans").rglob("*.jsonl"))
    assert len(segments) == 1
    lines = segments[0].read_bytes().splitlines()
    doc = json.loads(lines[0])
    assert set(doc) == {"resourceSpans"}
    assert doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["name"] == "v"


def test_a_torn_last_line_is_never_indexed(recorder: Recorder) -> None:
    @chronicle.boundary(name="t")
    def t() -> None:
        pass

    t()
    [segment] = list((recorder.path / "spans").rglob("*.jsonl"))
    with open(segment, "ab") as fh:  # a crash mid-write leaves a partial line
        fh.write(b'{"resourceSpans":[{"resou')
    t()
    traces = recorder.store.list_traces()
    assert len(traces) == 2
    for summary in traces:
        assert len(recorder.store.read_spans(summary.trace_id)) == 1


def test_newer_store_format_asks_for_an_upgrade(tmp_path: Path) -> None:
    (tmp_path / MANIFEST).write_text('{"format": "chronicle-store/9"}')
    with pytest.raises(chronicle.StoreError, match="upgrade chronicle-otel") as info:
        LocalStore(tmp_path).list_traces()
    assert isinstance(info.value, OSError)
    (tmp_path / MANIFEST).write_text('{"format": "something-else"}')
    with pytest.raises(chronicle.StoreError, match="not a chronicle store"):
        LocalStore(tmp_path).list_traces()


def test_reading_a_missing_store_is_empty(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "nope")
    assert store.list_traces() == [] and store.get_payload("sha256:00") is None
    assert not (tmp_path / "nope").exists()


def test_put_payload_checks_the_digest(tmp_path: Path) -> None:
    with contextlib.closing(LocalStore(tmp_path)) as store:
        store.put_payload(payload_digest(b"abc"), b"abc")
        store.put_payload(payload_digest(b"abc"), b"abc")
        assert store.get_payload(payload_digest(b"abc")) == b"abc"
        with pytest.raises(ValueError, match="digest mismatch"):
            store.put_payload(payload_digest(b"abc"), b"abd")


def test_default_store_path_honours_chronicle_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHRONICLE_HOME", str(tmp_path / "home"))
    assert LocalStore().path == tmp_path / "home"
    monkeypatch.delenv("CHRONICLE_HOME")
    monkeypatch.chdir(tmp_path)
    assert LocalStore().path == Path(".chronicle")


def test_unwritable_store_never_breaks_the_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, swallow_internal_errors: None
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the store directory should be")
    rec = make_recorder(tmp_path, store=chronicle.StoreOptions(path=blocker / "store", processor="simple"))

    @chronicle.boundary(name="order")
    def order(qty: int) -> str:
        return f"filled {qty}"

    @chronicle.boundary(name="reject")
    def reject() -> None:
        raise PermissionError("blocked")

    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        for _ in range(3):
            assert order(5) == "filled 5"
            with pytest.raises(PermissionError, match="blocked"):
                reject()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "your code still runs" in warnings[0].getMessage()
    assert len(rec.spans()) == 6  # the user's own pipeline still got every span


def test_several_processes_record_into_one_store(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys
        import chronicle_otel as chronicle
        chronicle.configure(store=chronicle.StoreOptions(path=sys.argv[1]), otlp=False)

        @chronicle.boundary(kind="agent", name="worker")
        def worker(i):
            return i

        for i in range(20):
            worker(i)
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "shared")], cwd=Path(__file__).parents[3])
        for _ in range(3)
    ]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    with contextlib.closing(LocalStore(tmp_path / "shared")) as store:
        traces = store.list_traces()
        assert len(traces) == 60
        assert all(len(store.read_spans(t.trace_id)) == 1 for t in traces)


@pytest.fixture(autouse=True)
def plain_store_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read, size or damage segment bytes by hand: the store writes them as plain JSON lines here
    (tests/unit/store/test_compression.py covers the compressed form)."""
    monkeypatch.setenv("CHRONICLE_STORE_COMPRESS", "false")
