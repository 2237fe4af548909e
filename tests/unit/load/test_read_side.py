"""The fast paths of reading traces give what the checked paths give, and large traces load and save whole.

Every span of a trace file is read by a reader of the common shape first (``_plain_span``); anything else goes to the
checked reader, whose errors name the file, the line and the field. These tests hold the two to the same answers, the
store and a saved file to the same trace, and ``write_trace`` to a lossless round trip at thousands of spans.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import gc
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel._internal.digest import payload_digest
from chronicle_otel._internal.gc_pause import gc_paused
from chronicle_otel._internal.untrusted import Where
from chronicle_otel.codec import encode
from chronicle_otel.errors import TraceLoadError
from chronicle_otel.model import Boundary, SpanRecord, Trace
from chronicle_otel.otlp._reader import _plain_attributes, _plain_span, _span
from chronicle_otel.otlp._values import decode_attributes
from chronicle_otel.replaying import build_trace
from chronicle_otel.store import LocalStore, StoreReader
from tests.conftest import make_recorder

TID = "5b8efff798038103d269b633813fc60c"
RESOURCE = {"service.name": "svc"}
WHERE = Where("trace.jsonl", 3, "resourceSpans[0].scopeSpans[0].spans[0].")


def _typed(value: Any) -> Any:
    """``value`` with the type of every scalar beside it: 1, 1.0 and True differ."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, *(_typed(v) for v in value)]
    return (type(value).__name__, repr(value) if isinstance(value, float) else value)  # NaN equals NaN here


def _fields(record: SpanRecord, *, origin: bool = True) -> dict[str, Any]:
    return {f.name: _typed(getattr(record, f.name)) for f in dataclasses.fields(record) if origin or f.compare}


# ----------------------------------------------------------------------------------- one span, two readers


def _hex(size: int) -> st.SearchStrategy[str]:
    return st.binary(min_size=size, max_size=size).map(bytes.hex)


def _ids(size: int) -> st.SearchStrategy[Any]:
    return st.one_of(
        _hex(size),
        _hex(size),
        _hex(size).map(str.upper),
        st.binary(min_size=size, max_size=size).map(lambda b: base64.b64encode(b).decode()),
        st.sampled_from([None, "", "xyz", 5, "0" * (size * 2 + 1)]),
    )


_digits = st.text(alphabet="0123456789", min_size=1, max_size=21)
_integers = st.one_of(
    st.integers(min_value=0, max_value=2**64 - 1).map(str),
    st.integers(min_value=-(2**64), max_value=2**65),
    _digits,
    st.sampled_from(["", " 12", "+7", "-7", "1e3", "١٢", "²", None, True, 1.0, 2.5]),
)


def _scalar_value() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.builds(lambda v: {"stringValue": v}, st.one_of(st.text(max_size=8), st.integers(), st.none())),
        st.builds(lambda v: {"intValue": v}, _integers),
        st.builds(lambda v: {"boolValue": v}, st.sampled_from([True, False, "true", "FALSE", 1, None, "yes"])),
        st.builds(
            lambda v: {"doubleValue": v},
            st.one_of(st.floats(allow_nan=False), st.integers(), st.sampled_from(["NaN", "1.5", "x"])),
        ),
        st.builds(lambda v: {"bytesValue": v}, st.sampled_from(["aGk=", "not base64!", 3])),
        st.builds(lambda v: {"string_value": v}, st.text(max_size=4)),
        st.sampled_from([{}, {"stringValue": "a", "intValue": "1"}, None, "raw", 5, []]),
    )


_any_values = st.recursive(
    _scalar_value(),
    lambda inner: st.one_of(
        st.builds(lambda vs: {"arrayValue": {"values": vs}}, st.lists(inner, max_size=3)),
        st.builds(
            lambda kvs: {"kvlistValue": {"values": kvs}},
            st.lists(st.builds(lambda k, v: {"key": k, "value": v}, st.text(max_size=4), inner), max_size=3),
        ),
    ),
    max_leaves=6,
)
_usual_values = st.one_of(
    st.builds(lambda v: {"stringValue": v}, st.text(max_size=8)),
    st.builds(lambda v: {"intValue": v}, st.one_of(_digits, st.integers(min_value=-(2**63), max_value=2**63 - 1))),
    st.builds(lambda v: {"boolValue": v}, st.booleans()),
    st.builds(lambda v: {"doubleValue": v}, st.floats()),
    st.builds(lambda vs: {"arrayValue": {"values": [{"stringValue": v} for v in vs]}}, st.lists(st.text(max_size=3))),
)
_usual_lists = st.lists(st.builds(lambda k, v: {"key": k, "value": v}, st.text(max_size=6), _usual_values), max_size=6)
_attribute_lists = st.one_of(
    _usual_lists,
    _usual_lists,
    st.lists(
        st.one_of(
            st.builds(lambda k, v: {"key": k, "value": v}, st.text(max_size=6), _any_values),
            st.builds(lambda k, v: {"key": k, "value": v}, st.sampled_from([1, None]), _any_values),
            st.sampled_from([{"key": "k"}, "kv", None]),
        ),
        max_size=6,
    ),
    st.sampled_from([None, {"already": "a mapping"}, "attrs", 7]),
)

_OPTIONAL: dict[str, st.SearchStrategy[Any]] = {
    "parentSpanId": _ids(8),
    "parent_span_id": _ids(8),
    "name": st.one_of(st.text(max_size=8), st.sampled_from([None, 5, 2.5, True])),
    "kind": st.one_of(st.integers(min_value=-2, max_value=7), st.sampled_from([None, "SPAN_KIND_SERVER", True, 1.0])),
    "startTimeUnixNano": _integers,
    "start_time_unix_nano": _integers,
    "endTimeUnixNano": _integers,
    "flags": st.one_of(st.integers(min_value=-1, max_value=2**32), st.sampled_from([None, "5", "", True])),
    "traceState": st.one_of(st.text(max_size=6), st.sampled_from([None, 5])),
    "trace_state": st.text(max_size=6),
    "status": st.one_of(
        st.fixed_dictionaries(
            {},
            optional={
                "code": st.sampled_from([0, 1, 2, 7, "STATUS_CODE_ERROR", "OK", None, True, 1.5]),
                "message": st.sampled_from(["", "boom", None, 5, 2.5, ["x"]]),
            },
        ),
        st.sampled_from([None, "ERROR", 3]),
    ),
    "events": st.sampled_from([None, [], [{"name": "exception", "timeUnixNano": "5"}], {}, "x"]),
    "links": st.sampled_from([None, [], [{"traceId": TID, "spanId": "00f067aa0ba902b7"}], {}]),
    "attributes": _attribute_lists,
}


@st.composite
def _raw_spans(draw: st.DrawFn) -> Any:
    if draw(st.integers(min_value=0, max_value=30)) == 0:
        return draw(st.sampled_from([None, "span", 5, ["a"]]))
    raw: dict[str, Any] = {"traceId": draw(_ids(16)), "spanId": draw(_ids(8))}
    if draw(st.booleans()):  # the common shape, so that the fast reader has work to do
        raw.update(
            parentSpanId=draw(_hex(8)),
            name="llm.chat",
            kind=1,
            startTimeUnixNano=str(draw(st.integers(min_value=0, max_value=2**63))),
            endTimeUnixNano=str(draw(st.integers(min_value=0, max_value=2**63))),
            flags=256,
            status={},
            attributes=draw(_usual_lists),
        )
    odds = draw(st.sampled_from([4, 30]))  # some spans with many unusual fields, some with few
    for key, values in _OPTIONAL.items():
        if draw(st.integers(min_value=0, max_value=odds)) == 0:
            raw[key] = draw(values)
    return raw


@settings(max_examples=400, deadline=None)
@given(_raw_spans())
def test_the_fast_span_reader_agrees_with_the_checked_one(raw: Any) -> None:
    fast = _plain_span(raw, RESOURCE, "scope", "trace.jsonl:3")
    if fast is None:
        return  # read by the checked reader alone
    checked = _span(raw, RESOURCE, "scope", WHERE)  # accepted by the fast reader: never an error here
    assert _fields(fast) == _fields(checked)


@settings(max_examples=400, deadline=None)
@given(_attribute_lists)
def test_the_fast_attribute_reader_agrees_with_the_checked_one(items: Any) -> None:
    fast = _plain_attributes(items)
    if fast is None:
        return
    assert _typed(fast) == _typed(decode_attributes(items, WHERE))


def test_the_common_shape_takes_the_fast_reader(tmp_path: Path) -> None:
    rec = make_recorder(tmp_path)

    @chronicle.boundary(kind="llm", name="ask")
    def ask(question: str, n: int) -> dict[str, Any]:
        return {"answer": question[::-1], "n": n, "ok": True, "score": 0.5}

    ask("why?", 3)
    rec.config.force_flush()
    [line] = list(rec.store.iter_lines(rec.store.list_traces()[0].trace_id))
    request = orjson.loads(line)
    [raw] = request["resourceSpans"][0]["scopeSpans"][0]["spans"]
    fast = _plain_span(raw, RESOURCE, "scope", "trace.jsonl:3")
    assert fast is not None
    assert _fields(fast) == _fields(_span(raw, RESOURCE, "scope", WHERE))


# ----------------------------------------------------------------------------------- the store and its saved file

_payloads = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(),
        st.text(max_size=40),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=10,
)
_trees = st.recursive(
    st.tuples(_payloads, st.just(()), st.booleans()),
    lambda inner: st.tuples(_payloads, st.lists(inner, max_size=3).map(tuple), st.booleans()),
    max_leaves=8,
)


@chronicle.boundary(kind="tool", name="read_side.node")
def _node(value: Any, children: tuple[Any, ...], fail: bool) -> dict[str, Any]:
    results = []
    for child in children:
        with contextlib.suppress(ValueError):
            results.append(_node(*child))
    if fail:
        raise ValueError(f"node failed: {str(value)[:30]}")
    return {"value": value, "children": results}


@chronicle.boundary(kind="agent", name="read_side.root")
def _root(tree: Any) -> Any:
    with contextlib.suppress(ValueError):
        return _node(*tree)
    return None


def _canonical(b: Boundary) -> tuple[Any, ...]:
    error = b.error
    shown = None if error is None else (type(error).__name__, str(error))
    return b.call_key, b.kind, b.status, encode(b.input), encode(b.output), shown


def _whole_attributes(trace: Trace) -> dict[str, dict[str, Any]]:
    """Each span's attributes with the whole payloads put back where the span kept a prefix."""
    out = {s.span_id: dict(s.attributes) for s in trace.spans}
    for b in trace.boundaries:
        for keys, payload in zip(sc.PAYLOAD_KEYS, (b.raw_input, b.raw_output, b.raw_error), strict=True):
            if payload is not None and payload.complete:
                out[b.span_id][keys.text] = payload.text
                out[b.span_id].pop(keys.truncated, None)
    return out


def _same_trace(a: Trace, b: Trace) -> None:
    assert a.trace_id == b.trace_id
    assert len(a.spans) == len(b.spans)
    for x, y in zip(a.spans, b.spans, strict=True):
        assert _fields(dataclasses.replace(x, attributes={}), origin=False) == _fields(
            dataclasses.replace(y, attributes={}), origin=False
        )
    assert _typed(_whole_attributes(a)) == _typed(_whole_attributes(b))
    assert [_canonical(x) for x in a.boundaries] == [_canonical(y) for y in b.boundaries]
    assert (a.root.call_key if a.root else None) == (b.root.call_key if b.root else None)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_trees)
def test_a_trace_from_the_store_equals_the_one_from_its_saved_file(tree: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        # payloads longer than 64 characters are cut on their spans and rehydrated from the store
        rec = make_recorder(base, capture=chronicle.CaptureOptions(max_attribute_length=64))
        _root(tree)
        rec.config.force_flush()
        [summary] = rec.store.list_traces()
        from_store = chronicle.load_trace(rec.store, summary.trace_id)
        collector = base / "collector.jsonl"
        collector.write_bytes(b"".join(line + b"\n" for line in rec.store.iter_lines(summary.trace_id)))
        from_lines = chronicle.load_trace(collector, store=rec.store)
        saved = chronicle.write_trace(from_store, base / "saved.jsonl")
        from_file = chronicle.load_trace(saved, store=base / "no-store")
        from_gzip = chronicle.load_trace(
            chronicle.write_trace(from_store, base / "saved.jsonl.gz"), store=base / "no-store"
        )
        rec.config.shutdown()
    for other in (from_lines, from_file, from_gzip):
        _same_trace(from_store, other)
    for b in (*from_file.boundaries, *from_gzip.boundaries):  # self-contained: nothing to rehydrate
        assert all(p is None or p.status == "ok" for p in (b.raw_input, b.raw_output, b.raw_error))
    for x, y in zip(from_store.boundaries, from_lines.boundaries, strict=True):  # the same cut payloads, rehydrated
        assert [p.status if p else None for p in (x.raw_input, x.raw_output, x.raw_error)] == [
            p.status if p else None for p in (y.raw_input, y.raw_output, y.raw_error)
        ]


# ----------------------------------------------------------------------------------- thousands of spans


def _payload(text: str, keys: sc.PayloadKeys, cut: int | None = None) -> dict[str, Any]:
    digest = payload_digest(text.encode())
    if cut is None:
        return {keys.text: text, keys.hash: digest}
    return {keys.text: text[:cut], keys.hash: digest, keys.truncated: True}


def _many_spans(count: int) -> tuple[list[SpanRecord], dict[str, bytes]]:
    """A root boundary, ``count`` children (every third with its output cut), and a service span above them all."""
    whole: dict[str, bytes] = {}
    service = {"http.method": "POST"}
    spans = [SpanRecord(TID, "f" * 16, None, "POST /run", 2, 0, 10**9, service, resource=RESOURCE, flags=256)]
    root_attrs = {sc.BOUNDARY_NAME: "agent", sc.BOUNDARY_KIND: "agent", sc.CALL_INDEX: 0}
    root_attrs.update(_payload('{"task":"many"}', sc.INPUT_KEYS))
    spans.append(
        SpanRecord(TID, "a" * 16, "f" * 16, "agent", 1, 1, 10**9 - 1, root_attrs, resource=RESOURCE, flags=256)
    )
    for i in range(count):
        output = orjson.dumps({"answer": "x" * (i % 50), "i": i}).decode()
        attrs: dict[str, Any] = {sc.BOUNDARY_NAME: "llm", sc.BOUNDARY_KIND: "llm", sc.CALL_INDEX: i, "n": i}
        attrs.update(_payload(orjson.dumps({"i": i}).decode(), sc.INPUT_KEYS))
        attrs.update(_payload(output, sc.OUTPUT_KEYS, cut=8 if i % 3 == 0 else None))
        if i % 3 == 0:
            whole[payload_digest(output.encode())] = output.encode()
        span_id = f"{i + 1:016x}"
        spans.append(
            SpanRecord(TID, span_id, "a" * 16, "llm", 3, 10 + i, 20 + i, attrs, "OK", resource=RESOURCE, flags=256)
        )
    return spans, whole


def test_save_of_thousands_of_spans_round_trips(tmp_path: Path) -> None:
    spans, whole = _many_spans(3000)
    trace = build_trace(TID, spans[::-1], fetch=whole.get)  # any order in, call order out
    assert not trace.warnings
    assert [b.call_index for b in trace.boundaries[1:]] == list(range(3000))
    assert {b.raw_output.status for b in trace.boundaries[1:] if b.raw_output} == {"ok", "rehydrated"}
    for name in ("many.jsonl", "many.jsonl.gz"):
        again = chronicle.load_trace(chronicle.write_trace(trace, tmp_path / name), store=tmp_path / "no-store")
        _same_trace(trace, again)
        assert not any(sc.OUTPUT_TRUNCATED in s.attributes for s in again.spans)
        assert all(b.raw_output is None or b.raw_output.status == "ok" for b in again.boundaries)
        assert again.boundaries[4].output == {"answer": "xxx", "i": 3}


def test_a_file_of_many_lines_and_an_indented_document_both_load(tmp_path: Path) -> None:
    spans, whole = _many_spans(40)
    trace = build_trace(TID, spans, fetch=whole.get)
    one_line = chronicle.write_trace(trace, tmp_path / "one.jsonl").read_bytes()
    document = orjson.loads(one_line)
    indented = tmp_path / "indented.json"
    indented.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    spans_of = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    lines = tmp_path / "lines.jsonl"
    resource = document["resourceSpans"][0]["resource"]
    with lines.open("wb") as out:
        for start in range(0, len(spans_of), 7):
            scope_spans = [{"scope": {}, "spans": spans_of[start : start + 7]}]
            out.write(orjson.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": scope_spans}]}) + b"\n")
    for path in (indented, lines):
        _same_trace(trace, chronicle.load_trace(path))
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(lines.read_bytes().replace(b"\n", b"\n{oops\n", 1))
    with pytest.raises(TraceLoadError) as info:
        chronicle.load_trace(broken)
    assert info.value.line == 2


# ----------------------------------------------------------------------------------- the store's payloads in bulk


def test_the_store_answers_many_payloads_at_once(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store", durable=False)
    items = [(payload_digest(f"payload {i}".encode()), f"payload {i}".encode()) for i in range(1234)]
    store.put_payloads(items)
    store.close()
    with contextlib.closing(sqlite3.connect(tmp_path / "store" / "index.sqlite3")) as db, db:
        db.execute("INSERT INTO payloads(hash, size, data) VALUES ('sha256:text-not-bytes', 4, 'text')")
    with contextlib.closing(StoreReader(tmp_path / "store")) as reader:
        asked = [d for d, _ in items] + ["sha256:" + "0" * 64, "sha256:text-not-bytes", 7]
        found = reader.get_payloads(asked * 2)  # type: ignore[arg-type]  # a stray non-digest is skipped
        assert found == dict(items)
        assert reader.get_payloads([]) == {}
    assert StoreReader(tmp_path / "nothing").get_payloads([items[0][0]]) == {}


# ----------------------------------------------------------------------------------- the collector's pause


def test_the_collector_pause_nests_and_resumes_only_what_it_paused() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_the_collector_resumes_after_a_failed_load(tmp_path: Path) -> None:
    """(Blocks overlapping across threads: ``tests/unit/replaying/test_collector.py``.)"""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": 5}]}]}]}\n')
    with pytest.raises(TraceLoadError):
        chronicle.load_trace(bad)
    assert gc.isenabled()


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    yield
    gc.enable()


@pytest.fixture(autouse=True)
def plain_store_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read, size or damage segment bytes by hand: the store writes them as plain JSON lines here
    (tests/unit/store/test_compression.py covers the compressed form)."""
    monkeypatch.setenv("CHRONICLE_STORE_COMPRESS", "false")
