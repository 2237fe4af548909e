"""Each fast path of loading gives what its checked path gives, and both refuse the same malformed input.

The readers of the common shape (``_plain_span`` with the ids a request shares, ``_plain_attributes``), the line reader
of OTLP/JSON files, the hash check of whole payloads, the session prefilter and the call-order sort are each held to
a plain reference here, on generated input: equal records for valid input, the same error for malformed input.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel._internal.untrusted import Where
from chronicle_otel.errors import CodecError, TraceLoadError
from chronicle_otel.load import _assemble
from chronicle_otel.load._assemble import _has_session, _payload_of, build_trace, payload_from_span
from chronicle_otel.load._files import _json, spans_of_document
from chronicle_otel.model import Payload, SpanRecord, Trace
from chronicle_otel.otlp import spans_of_request
from chronicle_otel.otlp._reader import _plain_span, _span

TID = "5b8efff798038103d269b633813fc60c"
RESOURCE = {"service.name": "svc"}


def _typed(value: Any) -> Any:
    """``value`` with the type of every scalar beside it: 1, 1.0 and True differ."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, *(_typed(v) for v in value)]
    return (type(value).__name__, repr(value) if isinstance(value, float) else value)


def _fields(record: SpanRecord) -> dict[str, Any]:
    return {f.name: _typed(getattr(record, f.name)) for f in dataclasses.fields(record)}


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# ----------------------------------------------------------------------------------- the ids a request shares

_some_ids = st.sampled_from(
    [
        "00f067aa0ba902b7",
        "00F067AA0BA902B7",  # the same id in capitals: known as written, read to the same lowercase
        "b7ad6b7169203331",
        "5b8efff798038103",  # the first half of the trace id: a parent id, never a trace id
        "0af7651916cd43dd",
        "",
        "00f067aa0ba902bz",  # not hex
        "00f067aa 0ba902b",  # a space between pairs: bytes.fromhex reads fewer than 8 bytes
        "\uff21\uff22067aa0ba902b7",  # full-width letters
    ]
)
_trace_ids = st.sampled_from([TID, TID.upper(), "5b8efff798038103", "5b8efff7980381035b8efff79803810z", None, 7])


@st.composite
def _requests(draw: st.DrawFn) -> dict[str, Any]:
    spans = []
    for i in range(draw(st.integers(min_value=1, max_value=8))):
        span: dict[str, Any] = {
            "traceId": draw(_trace_ids),
            "spanId": draw(_some_ids),
            "name": f"s{i}",
            "kind": 1,
            "startTimeUnixNano": str(draw(st.integers(min_value=0, max_value=2**64 - 1))),
            "endTimeUnixNano": draw(st.sampled_from(["5", "", "18446744073709551616", 9, None])),
            "status": {},
            "attributes": [{"key": sc.BOUNDARY_NAME, "value": {"stringValue": f"b{i}"}}],
        }
        parent = draw(st.one_of(st.none(), _some_ids))
        if parent is not None:
            span["parentSpanId"] = parent
        spans.append(span)
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "sc"}, "spans": spans}]}]}


def _checked(doc: dict[str, Any]) -> list[SpanRecord]:
    """Every span of ``doc`` through the checked reader alone."""
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    at = Where("t.jsonl", 2, "resourceSpans[0].scopeSpans[0].")
    return [_span(span, {}, "sc", at.at(f"spans[{k}].")) for k, span in enumerate(spans)]


def _outcome(read: Any) -> Any:
    try:
        return [_fields(r) for r in read()]
    except TraceLoadError as exc:
        return ("error", type(exc).__name__, str(exc))


@settings(max_examples=300, deadline=None)
@given(_requests())
def test_a_request_read_with_its_known_ids_equals_the_checked_reading(doc: dict[str, Any]) -> None:
    fast = _outcome(lambda: list(spans_of_request(doc, source="t.jsonl", line=2)))
    assert fast == _outcome(lambda: _checked(doc))


def test_a_parent_id_known_from_one_span_is_never_taken_for_a_trace_id() -> None:
    known: dict[str, str] = {}
    short = "5B8EFFF798038103"
    first = {"traceId": TID, "spanId": "00000000000000a1", "parentSpanId": short, "startTimeUnixNano": "1"}
    assert _plain_span(first, RESOURCE, "sc", "o", known) is not None
    assert known[short] == short.lower()
    second = {"traceId": short, "spanId": "00000000000000a2"}  # a 64-bit trace id: the checked reader's to read
    assert _plain_span(second, RESOURCE, "sc", "o", known) is None
    record = _span(second, RESOURCE, "sc", Where("t.jsonl", 1))
    assert record.trace_id == "0" * 16 + short.lower()


def test_ids_known_as_written_keep_their_lowercase_reading() -> None:
    known: dict[str, str] = {}
    spans = [
        {"traceId": TID.upper(), "spanId": f"{i:016X}", "parentSpanId": "00000000000000AA", "startTimeUnixNano": "1"}
        for i in range(1, 4)
    ]
    records = [_plain_span(s, RESOURCE, "sc", "o", known) for s in spans]
    assert {r.trace_id for r in records if r} == {TID}
    assert [(r.span_id, r.parent_span_id) for r in records if r] == [
        (f"{i:016x}", "00000000000000aa") for i in range(1, 4)
    ]


# ----------------------------------------------------------------------------------- lines of a file


def _reference_lines(data: bytes, source: object) -> Iterator[Any]:
    """The line reader as it was: every line split off and stripped (the documents, or the error)."""
    lines = data.split(b"\n")
    last = max(i for i, line in enumerate(lines) if line.strip())
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            if number - 1 == last and not data.endswith(b"\n") and exc.pos >= len(line.rstrip()):
                raise TraceLoadError(
                    f"the last line ends mid-record ({exc}); the file is truncated",
                    source=source,
                    line=number,
                    expected="one complete JSON document per line",
                ) from None
            raise TraceLoadError(
                f"not JSON ({exc})", source=source, line=number, expected="one OTLP/JSON request per line"
            ) from None
        yield number, doc


def _request_line(span_id: str) -> bytes:
    span = {"traceId": TID, "spanId": span_id, "name": "n", "startTimeUnixNano": "1", "endTimeUnixNano": "2"}
    return orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})


_pieces = st.one_of(
    st.integers(min_value=1, max_value=200).map(lambda i: _request_line(f"{i:016x}")),
    st.sampled_from([b"", b"  ", b"\t\r", b"\x0b\x0c ", b"{", b'{"resourceSpans": [', b"[1, 2", b"nope", b"{}  "]),
    st.integers(min_value=1, max_value=200).map(lambda i: _request_line(f"{i:016x}") + b"\r"),
    st.integers(min_value=1, max_value=200).map(lambda i: _request_line(f"{i:016x}")[:-3]),
)


@st.composite
def _files(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(_pieces, min_size=2, max_size=6))
    lines[0] = _request_line("00000000000000f1")  # several lines, the first a document: read line by line
    data = b"\n".join(lines)
    return data + draw(st.sampled_from([b"", b"\n", b"\n\n", b"  ", b"\n \n"]))


def _lines_outcome(read: Any) -> Any:
    try:
        return [(r.origin, r.span_id) for r in read()]
    except TraceLoadError as exc:
        return ("error", str(exc))


@settings(max_examples=300, deadline=None)
@given(_files())
def test_the_line_reader_reads_and_refuses_what_splitting_the_file_did(data: bytes) -> None:
    if not any(line.strip() for line in data.split(b"\n")[1:]):
        data += b"\n" + _request_line("00000000000000f2")  # a second document: the file is read line by line

    def reference() -> Iterator[SpanRecord]:
        for number, doc in _reference_lines(data, "t.jsonl"):
            yield from spans_of_document(doc, "t.jsonl", number)

    assert _lines_outcome(lambda: _json(data, "t.jsonl")) == _lines_outcome(reference)
    assert _lines_outcome(lambda: _json(bytearray(data), "t.jsonl")) == _lines_outcome(reference)


def test_a_file_cut_inside_its_last_line_says_so(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    path.write_bytes(_request_line("00000000000000a1") + b"\n" + _request_line("00000000000000a2")[:40])
    with pytest.raises(TraceLoadError, match="the file is truncated") as info:
        chronicle.load_trace(path)
    assert f"{path}:2" in str(info.value)


# ----------------------------------------------------------------------------------- whole payloads

_texts = st.one_of(
    st.text(max_size=30),
    st.sampled_from(['{"q":"x"}', "\ud800 lone", "é ü 中", ""]),
    st.just(["parsed", "by", "a", "collector"]),
    st.just({"a": 1}),
)


@settings(max_examples=300, deadline=None)
@given(_texts, st.one_of(st.none(), st.just("whole"), st.just("other"), st.just(5)), st.booleans())
def test_the_hash_check_of_a_whole_payload_equals_the_checked_one(text: Any, digest: Any, in_store: bool) -> None:
    whole = '{"the":"whole payload"}'
    if digest == "whole":
        digest = (
            _digest(text)
            if isinstance(text, str)
            else _digest(orjson.dumps(text, option=orjson.OPT_SORT_KEYS).decode())
        )
    elif digest == "other":
        digest = _digest(whole)
    attrs = {sc.INPUT: text, sc.INPUT_HASH: digest} if digest is not None else {sc.INPUT: text}
    store = {_digest(whole): whole.encode()} if in_store else {}
    span = SpanRecord(TID, "00000000000000a1", None, "n", 1, 1, 2, attrs, origin="t.jsonl:1")
    warnings: list[str] = []
    fast = _payload_of(text, attrs, sc.INPUT_KEYS, store.get, span, (("n", 0),), warnings, "")
    checked, warning = payload_from_span(attrs, sc.INPUT_KEYS, store.get, where="t.jsonl:1 (span 00000000000000a1)")
    assert fast == checked
    assert warnings == ([f"boundary n[0]: {warning}"] if warning else [])


# ----------------------------------------------------------------------------------- sessions and call order

_keys = st.one_of(
    st.sampled_from(
        [
            "chronicle.session.build_id",
            "chronicle.session.",
            "chronicle.sess",  # with the next key, the prefix appears across the two
            "ion.model",
            "x.chronicle.session.y",
            sc.BOUNDARY_NAME,
            "gen_ai.request.model",
        ]
    ),
    st.text(max_size=8),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_keys, max_size=8))
def test_the_session_prefilter_never_misses_a_session_key(keys: list[str]) -> None:
    attrs = {k: i for i, k in enumerate(keys)}
    expected = {k[len(sc.SESSION_PREFIX) :]: v for k, v in attrs.items() if k.startswith(sc.SESSION_PREFIX)}
    if expected:
        assert _has_session(attrs)
    attrs[sc.BOUNDARY_NAME] = "b"
    [boundary] = build_trace(TID, [SpanRecord(TID, "00000000000000a1", None, "b", 1, 1, 2, attrs)]).boundaries
    assert boundary.session == expected


@st.composite
def _trees(draw: st.DrawFn) -> list[SpanRecord]:
    spans: list[SpanRecord] = []
    for i in range(draw(st.integers(min_value=1, max_value=12))):
        parent = draw(st.sampled_from([None, *[s.span_id for s in spans]])) if spans else None
        attrs: dict[str, Any] = {sc.CALL_INDEX: draw(st.integers(min_value=0, max_value=3))}
        if draw(st.integers(min_value=0, max_value=4)):
            attrs[sc.BOUNDARY_NAME] = draw(st.sampled_from(["a", "b"]))
        start = draw(st.integers(min_value=0, max_value=4))
        spans.append(SpanRecord(TID, f"{i + 1:016x}", parent, "s", 1, start, start + 1, attrs))
    return spans


@settings(max_examples=300, deadline=None)
@given(_trees())
def test_boundaries_come_in_call_order_ties_in_the_order_built(spans: list[SpanRecord]) -> None:
    built: list[Any] = []
    make = _assemble._boundary

    def recording(*args: Any) -> Any:
        boundary = make(*args)
        if boundary is not None:
            built.append(boundary)
        return boundary

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_assemble, "_boundary", recording)
        trace = build_trace(TID, spans)
    expected = sorted(built, key=lambda b: (b.start_ns, len(b.call_key), b.call_index))  # stable: ties as built
    assert [id(b) for b in trace.boundaries] == [id(b) for b in expected]


# ----------------------------------------------------------------------------------- payload stores asked lazily


class _CountingStore:
    def __init__(self, payloads: dict[str, bytes]) -> None:
        self.payloads = payloads
        self.bulk: list[list[str]] = []
        self.single: list[str] = []

    def get_payload(self, digest: str) -> bytes | None:
        self.single.append(digest)
        return self.payloads.get(digest)

    def get_payloads(self, digests: list[str]) -> dict[str, bytes]:
        self.bulk.append(list(digests))
        return {d: self.payloads[d] for d in digests if d in self.payloads}


def _span_with(span_id: str, output: str, cut: bool) -> SpanRecord:
    attrs: dict[str, Any] = {sc.BOUNDARY_NAME: "b", sc.CALL_INDEX: int(span_id, 16)}
    attrs[sc.OUTPUT] = output[:3] if cut else output
    attrs[sc.OUTPUT_HASH] = _digest(output)
    if cut:
        attrs[sc.OUTPUT_TRUNCATED] = True
    return SpanRecord(TID, span_id, None, "b", 1, int(span_id, 16), 10**6, attrs)


def _assembled(spans: list[SpanRecord], store: _CountingStore) -> Trace:
    return _assemble.assemble(spans, TID, "src", _assemble.PayloadSources([store]), None)  # type: ignore[list-item]


def test_a_trace_with_nothing_cut_asks_the_payload_store_for_nothing() -> None:
    store = _CountingStore({})
    trace = _assembled([_span_with(f"{i:016x}", f'"whole {i}"', cut=False) for i in range(1, 6)], store)
    assert store.bulk == [] and store.single == []
    assert {b.raw_output.status for b in trace.boundaries if b.raw_output} == {"ok"}


def test_payloads_cut_on_their_spans_are_fetched_in_one_bulk_request() -> None:
    outputs = {f"{i:016x}": f'"the whole output number {i}"' for i in range(1, 7)}
    store = _CountingStore({_digest(text): text.encode() for text in outputs.values()})
    spans = [_span_with(span_id, text, cut=int(span_id, 16) % 2 == 0) for span_id, text in outputs.items()]
    trace = _assembled(spans, store)
    assert len(store.bulk) == 1 and sorted(store.bulk[0]) == sorted(_digest(outputs[f"{i:016x}"]) for i in (2, 4, 6))
    assert store.single == []
    statuses = {b.span_id: b.raw_output.status for b in trace.boundaries if b.raw_output}
    assert statuses == {s: ("rehydrated" if int(s, 16) % 2 == 0 else "ok") for s in outputs}
    assert [b.output for b in trace.boundaries] == [orjson.loads(t) for t in outputs.values()]


# ----------------------------------------------------------------------------------- payloads read lazily


def test_payload_text_that_is_not_json_names_the_boundary_span_and_attribute_when_read() -> None:
    attrs: dict[str, Any] = {sc.BOUNDARY_NAME: "plan", sc.CALL_INDEX: 2}
    for keys, text in zip(sc.PAYLOAD_KEYS, ("{not json", "[1,", '{"type": 5, "args": "abc"}'), strict=True):
        attrs[keys.text], attrs[keys.hash] = text, _digest(text)
    span = SpanRecord(TID, "00000000000000a1", None, "plan", 1, 1, 2, attrs, origin="t.jsonl:7")
    [boundary] = build_trace(TID, [span]).boundaries  # loading checks hashes, not JSON
    assert [p.status for p in (boundary.raw_input, boundary.raw_output, boundary.raw_error) if p] == ["ok"] * 3
    for what in ("input", "output", "error"):
        message = f"the {what} of boundary plan[2] (span 00000000000000a1 at t.jsonl:7, attribute chronicle.{what})"
        with pytest.raises(CodecError, match=re.escape(message)):
            getattr(boundary, what)


def test_a_decoded_payload_is_kept_per_allow_list() -> None:
    text = '{"q": "x"}'
    attrs = {sc.BOUNDARY_NAME: "b", sc.INPUT: text, sc.INPUT_HASH: _digest(text)}
    [boundary] = build_trace(TID, [SpanRecord(TID, "00000000000000a1", None, "b", 1, 1, 2, attrs)]).boundaries
    first = boundary.input
    assert first == {"q": "x"} and boundary.input is first
    assert "_decoded" not in repr(boundary)
    assert isinstance(boundary.raw_input, Payload) and boundary.raw_input.status == "ok"
