"""Trace data is untrusted input: loading anything malformed raises only the package's own errors, within bounds."""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import os
import random
import shutil
import sqlite3
import struct
import subprocess
import sys
import textwrap
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel._internal.untrusted import MAX_VALUE_DEPTH
from chronicle_otel.errors import ChronicleError, CodecError, LoadLimitError, StoreError, TraceLoadError
from chronicle_otel.load import LoadLimits
from chronicle_otel.load._files import spans_of_document
from chronicle_otel.otlp import spans_of_request
from chronicle_otel.replaying import SpanRecord, build_trace
from chronicle_otel.store import payload_digest
from tests.conftest import Recorder

TID = "5b8efff798038103d269b633813fc60c"
ROOT_ID = "00000000000000a1"
CHILD_ID = "00000000000000b2"


# ------------------------------------------------------------------ building blocks


def value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": v}


def payload_attrs(key: str, hash_key: str, text: str) -> list[dict[str, Any]]:
    return [
        {"key": key, "value": {"stringValue": text}},
        {"key": hash_key, "value": {"stringValue": payload_digest(text.encode())}},
    ]


def boundary_span(span_id: str, name: str, parent: str | None = None, **attrs: Any) -> dict[str, Any]:
    """A boundary span with a small, hash-correct input and output."""
    out: dict[str, Any] = {
        "traceId": TID,
        "spanId": span_id,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(1_700_000_000_000_000_000 + int(span_id, 16)),
        "endTimeUnixNano": str(1_700_000_000_100_000_000 + int(span_id, 16)),
        "attributes": [
            {"key": sc.BOUNDARY_NAME, "value": {"stringValue": name}},
            {"key": sc.BOUNDARY_KIND, "value": {"stringValue": "tool"}},
            {"key": sc.CALL_INDEX, "value": {"intValue": "0"}},
            {"key": sc.CODEC, "value": {"stringValue": "chronicle-json/1"}},
            *payload_attrs(sc.INPUT, sc.INPUT_HASH, '{"q":"x"}'),
            *payload_attrs(sc.OUTPUT, sc.OUTPUT_HASH, '"done"'),
        ]
        + [{"key": k, "value": value(v)} for k, v in attrs.items()],
        "status": {},
    }
    if parent:
        out["parentSpanId"] = parent
    return out


def request(*spans: dict[str, Any]) -> dict[str, Any]:
    return {
        "resourceSpans": [
            {"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "s"}, "spans": list(spans)}]}
        ]
    }


def base_request() -> dict[str, Any]:
    return request(boundary_span(ROOT_ID, "run"), boundary_span(CHILD_ID, "plan", ROOT_ID))


def write(tmp_path: Path, data: bytes | dict[str, Any] | list[Any], name: str = "trace.json") -> Path:
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())  # json: nests deeper than orjson
    return path


def touch(trace: chronicle.Trace) -> None:
    """Decode every payload, as a replay would."""
    for b in trace.boundaries:
        for field in ("input", "output", "error"):
            with contextlib.suppress(ChronicleError):
                getattr(b, field)


def load_or_refuse(path: Path, **kwargs: Any) -> chronicle.Trace | ChronicleError:
    """Load and decode everything; the package's own errors are the only acceptable failures."""
    try:
        trace = chronicle.load_trace(path, **kwargs)
    except ChronicleError as exc:
        return exc
    touch(trace)
    return trace


def refused(path: Path, *fragments: str, **kwargs: Any) -> TraceLoadError:
    with pytest.raises(TraceLoadError) as info:
        chronicle.load_trace(path, **kwargs)
    message = str(info.value)
    assert str(path) in message, message
    for fragment in fragments:
        assert fragment in message, message
    return info.value


def first_span(doc: dict[str, Any]) -> dict[str, Any]:
    span: dict[str, Any] = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    return span


def nested_array(depth: int) -> dict[str, Any]:
    """An AnyValue holding arrays ``depth`` deep, built without recursion."""
    node: dict[str, Any] = {"stringValue": "leaf"}
    for _ in range(depth):
        node = {"arrayValue": {"values": [node]}}
    return node


def test_a_valid_base_request_loads(tmp_path: Path) -> None:
    trace = chronicle.load_trace(write(tmp_path, base_request()))
    assert [b.name for b in trace.boundaries] == ["run", "plan"]
    assert trace.boundaries[1].parent is trace.root and trace.root is not None
    assert trace.root.input == {"q": "x"} and trace.root.output == "done"


# ------------------------------------------------------------------ OTLP/JSON with wrong types


def _set_span(field: str, bad: Any) -> Callable[[dict[str, Any]], None]:
    def patch(doc: dict[str, Any]) -> None:
        first_span(doc)[field] = bad

    return patch


def _set_attr(bad: Any) -> Callable[[dict[str, Any]], None]:
    def patch(doc: dict[str, Any]) -> None:
        first_span(doc)["attributes"].append({"key": "x", "value": bad})

    return patch


OTLP_CASES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "resourceSpans of numbers": (lambda d: d.update(resourceSpans=[1]), "resourceSpans[0]"),
    "scopeSpans a number": (lambda d: d["resourceSpans"][0].update(scopeSpans=5), "scopeSpans"),
    "spans a string": (lambda d: d["resourceSpans"][0]["scopeSpans"][0].update(spans="x"), "spans"),
    "resource a string": (lambda d: d["resourceSpans"][0].update(resource="x"), "resource"),
    "scope a list": (lambda d: d["resourceSpans"][0]["scopeSpans"][0].update(scope=[1]), "scope"),
    "attributes of strings": (_set_span("attributes", ["x"]), "attributes[0]"),
    "attributes a number": (_set_span("attributes", 3), "attributes"),
    "start time a list": (_set_span("startTimeUnixNano", []), "startTimeUnixNano"),
    "start time of 5000 digits": (_set_span("startTimeUnixNano", "9" * 5000), "startTimeUnixNano"),
    "start time beyond 64 bits": (_set_span("startTimeUnixNano", str(2**70)), "startTimeUnixNano"),
    "start time negative": (_set_span("startTimeUnixNano", "-5"), "startTimeUnixNano"),
    "end time a negative number": (_set_span("endTimeUnixNano", -1), "endTimeUnixNano"),
    "event time negative": (_set_span("events", [{"name": "e", "timeUnixNano": "-1"}]), "timeUnixNano"),
    "start time a float overflow": (_set_span("startTimeUnixNano", 1e300), "startTimeUnixNano"),
    "end time an object": (_set_span("endTimeUnixNano", {"a": 1}), "endTimeUnixNano"),
    "kind a list": (_set_span("kind", [1]), "kind"),
    "kind an object": (_set_span("kind", {}), "kind"),
    "name an object": (_set_span("name", {"x": 1}), "name"),
    "trace id a number": (_set_span("traceId", 123), "traceId"),
    "span id a list": (_set_span("spanId", []), "spanId"),
    "span id 10000 characters": (_set_span("spanId", "a" * 10_000), "spanId"),
    "parent id an object": (_set_span("parentSpanId", {}), "parentSpanId"),
    "status code a list": (_set_span("status", {"code": [1]}), "status.code"),
    "status message an object": (_set_span("status", {"message": {"a": 1}}), "status.message"),
    "events a string": (_set_span("events", "x"), "events"),
    "event a number": (_set_span("events", [1]), "events[0]"),
    "event time not a number": (_set_span("events", [{"name": "e", "timeUnixNano": "soon"}]), "timeUnixNano"),
    "links of bad ids": (_set_span("links", [{"traceId": 5, "spanId": ROOT_ID}]), "links.traceId"),
    "intValue not digits": (_set_attr({"intValue": "abc"}), "intValue"),
    "intValue of 5000 digits": (_set_attr({"intValue": "1" * 5000}), "intValue"),
    "intValue a list": (_set_attr({"intValue": [1]}), "intValue"),
    "doubleValue not a number": (_set_attr({"doubleValue": "abc"}), "doubleValue"),
    "doubleValue an object": (_set_attr({"doubleValue": {}}), "doubleValue"),
    "boolValue a word": (_set_attr({"boolValue": "yes"}), "boolValue"),
    "stringValue a list": (_set_attr({"stringValue": ["x"]}), "stringValue"),
    "bytesValue not base64": (_set_attr({"bytesValue": "not base64!"}), "bytesValue"),
    "bytesValue a number": (_set_attr({"bytesValue": 7}), "bytesValue"),
    "kvlistValue a string": (_set_attr({"kvlistValue": "x"}), "kvlistValue"),
    "kvlistValue values a number": (_set_attr({"kvlistValue": {"values": 1}}), "kvlistValue.values"),
    "arrayValue values a number": (_set_attr({"arrayValue": {"values": 3}}), "arrayValue.values"),
    "value a list": (_set_attr([1, 2]), "value"),
    "key a number": (lambda d: first_span(d)["attributes"].append({"key": 5, "value": {}}), "key"),
    "arrays nested too deep": (_set_attr(nested_array(MAX_VALUE_DEPTH + 5)), "nests deeper"),
}


@pytest.mark.parametrize("case", sorted(OTLP_CASES))
def test_wrong_types_in_otlp_json_name_the_field(tmp_path: Path, case: str) -> None:
    patch, fragment = OTLP_CASES[case]
    doc = base_request()
    patch(doc)
    lines = orjson.dumps(base_request()) + b"\n" + json.dumps(doc).encode() + b"\n"  # json: deeper than orjson writes
    error = refused(write(tmp_path, lines, "t.jsonl"), fragment)
    assert error.line == 2


def test_the_known_crashers_are_trace_load_errors(tmp_path: Path) -> None:
    """Each raised AttributeError, TypeError or ValueError before."""
    refused(write(tmp_path, b'{"resourceSpans":[1]}'), "resourceSpans[0] is 1", "expected an object")
    span = boundary_span(ROOT_ID, "run")
    for field, bad, fragment in (
        ("attributes", ["x"], "attributes[0] is 'x'"),
        ("startTimeUnixNano", [], "startTimeUnixNano is a list of 0 items"),
        ("kind", [1], "kind is a list of 1 items"),
        ("startTimeUnixNano", "7" * 5000, "(5000 characters)"),
    ):
        refused(write(tmp_path, request(dict(span, **{field: bad}))), fragment)
    span["attributes"].append({"key": "n", "value": {"intValue": "abc"}})
    refused(write(tmp_path, request(span)), "intValue is 'abc'", "expected an integer")


def test_deep_nesting_never_recurses(tmp_path: Path) -> None:
    doc = base_request()
    first_span(doc)["attributes"].append({"key": "deep", "value": nested_array(10_000)})
    with pytest.raises(TraceLoadError, match="nests deeper than"):
        list(spans_of_request(doc, source="memory"))
    kv: dict[str, Any] = {"leaf": 1}
    for _ in range(10_000):
        kv = {"k": kv}
    first_span(doc)["attributes"] = kv  # some backends send attributes as a mapping
    with pytest.raises(TraceLoadError, match="nests deeper than"):
        list(spans_of_request(doc, source="memory"))
    # JSON deeper than the parser accepts
    text = b'{"resourceSpans": [' + b"[" * 10_000 + b"]" * 10_000 + b"]}"
    refused(write(tmp_path, text), "not JSON")


def test_non_utf8_bytes(tmp_path: Path) -> None:
    text = orjson.dumps(base_request()).replace(b'"run"', b'"r\xff\xfen"', 1)
    refused(write(tmp_path, text, "latin.jsonl"), "not JSON")
    refused(write(tmp_path, gzip.compress(text), "latin.jsonl.gz"), "not JSON")
    refused(write(tmp_path, b"\xff\xfe\x00\x00" * 10, "noise.bin"), "unrecognised trace format")


# ------------------------------------------------------------------ boundary attributes


def _boundary_with(tmp_path: Path, key: str, bad: Any) -> Path:
    span = boundary_span(ROOT_ID, "run")
    span["attributes"] = [kv for kv in span["attributes"] if kv["key"] != key]
    span["attributes"].append({"key": key, "value": bad})
    return write(tmp_path, request(span))


@pytest.mark.parametrize(
    "bad",
    [{"stringValue": "chronicle-json/9"}, {"intValue": "1"}, {"arrayValue": {"values": [{"stringValue": "x"}]}}],
    ids=["newer", "a number", "a list"],
)
def test_an_unknown_codec_is_a_load_error_naming_span_and_source(tmp_path: Path, bad: Any) -> None:
    path = _boundary_with(tmp_path, sc.CODEC, bad)
    error = refused(path, f"span {ROOT_ID}", "upgrade chronicle-otel")
    assert not isinstance(error, chronicle.ReplayError)


@pytest.mark.parametrize(
    "bad",
    [
        {"intValue": "-1"},
        {"stringValue": "-1"},
        {"intValue": str(2**64 - 1)},
        {"stringValue": "9" * 5000},
        {"stringValue": "٣"},
        {"arrayValue": {"values": [{"intValue": "1"}]}},
        {"boolValue": True},
        {"doubleValue": 1.5},
    ],
    ids=["negative", "negative text", "huge", "5000 digits", "arabic digit", "a list", "a bool", "a fraction"],
)
def test_a_bad_call_index_is_a_load_error(tmp_path: Path, bad: Any) -> None:
    refused(_boundary_with(tmp_path, sc.CALL_INDEX, bad), sc.CALL_INDEX, f"span {ROOT_ID}")


@pytest.mark.parametrize("good", [{"intValue": "3"}, {"stringValue": "3"}, {"intValue": 3}, {"doubleValue": 3.0}])
def test_call_index_as_zipkin_and_json_numbers_write_it(tmp_path: Path, good: Any) -> None:
    trace = chronicle.load_trace(_boundary_with(tmp_path, sc.CALL_INDEX, good))
    assert trace.boundaries[0].call_index == 3


def test_odd_but_harmless_boundary_attributes_are_tolerated(tmp_path: Path) -> None:
    span = boundary_span(ROOT_ID, "run")
    span["attributes"] += [
        {"key": sc.BOUNDARY_KIND, "value": {"intValue": "4"}},
        {"key": sc.CODE_FUNCTION, "value": {"arrayValue": {"values": []}}},
        {"key": sc.STREAM_STATE, "value": {"kvlistValue": {"values": []}}},
    ]
    [b] = chronicle.load_trace(write(tmp_path, request(span))).boundaries
    assert (b.kind, b.function, b.stream_state) == ("custom", None, None)


def test_a_hash_correct_payload_nested_600_deep_is_a_codec_error(tmp_path: Path) -> None:
    span = boundary_span(ROOT_ID, "run")
    deep = "[" * 600 + "]" * 600
    span["attributes"] = [kv for kv in span["attributes"] if kv["key"] not in (sc.OUTPUT, sc.OUTPUT_HASH)]
    span["attributes"] += payload_attrs(sc.OUTPUT, sc.OUTPUT_HASH, deep)
    [b] = chronicle.load_trace(write(tmp_path, request(span))).boundaries
    assert b.raw_output is not None and b.raw_output.status == "ok"
    with pytest.raises((CodecError, TraceLoadError)):
        b.output  # noqa: B018


def test_a_payload_that_is_bytes_is_a_load_error(tmp_path: Path) -> None:
    bad = {"bytesValue": base64.b64encode(b'{"q":"x"}').decode()}
    refused(_boundary_with(tmp_path, sc.INPUT, bad), sc.INPUT, f"span {ROOT_ID}")


def test_a_payload_parsed_into_a_kvlist_is_reencoded(tmp_path: Path) -> None:
    kvlist = {"kvlistValue": {"values": [{"key": "q", "value": {"stringValue": "x"}}]}}
    [b] = chronicle.load_trace(_boundary_with(tmp_path, sc.INPUT, kvlist)).boundaries
    assert b.raw_input is not None and b.raw_input.status == "ok" and b.input == {"q": "x"}


# ------------------------------------------------------------------ parent chains


def _chain_spans(n: int, boundary_every: int = 1) -> list[SpanRecord]:
    spans = []
    for i in range(n):
        attrs: dict[str, Any] = {}
        if i % boundary_every == 0:
            attrs = {sc.BOUNDARY_NAME: f"b{i}", sc.CALL_INDEX: 0}
        spans.append(
            SpanRecord(
                trace_id=TID,
                span_id=f"{i + 1:016x}",
                parent_span_id=f"{i:016x}" if i else None,
                name=f"s{i}",
                kind=1,
                start_ns=1000,  # equal times: order comes from parent links only
                end_ns=2000,
                attributes=attrs,
            )
        )
    return spans[::-1]  # child first


def test_a_2000_span_chain_given_child_first_builds_without_recursion() -> None:
    trace = build_trace(TID, _chain_spans(2000))
    assert len(trace.boundaries) == 2000 and trace.root is not None and trace.root.name == "b0"
    by_name = {b.name: b for b in trace.boundaries}
    for i in range(1, 2000):
        assert by_name[f"b{i}"].parent is by_name[f"b{i - 1}"]
    assert len(by_name["b1999"].call_key) == 2000
    mixed = build_trace(TID, _chain_spans(2000, boundary_every=3))
    named = {b.name: b for b in mixed.boundaries}
    assert named["b3"].parent is named["b0"] and named["b1998"].parent is named["b1995"]


def test_boundaries_nested_beyond_the_bound_are_refused() -> None:
    with pytest.raises(TraceLoadError, match="nest deeper than"):
        build_trace(TID, _chain_spans(5000))


def test_many_calls_under_deep_nesting_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from chronicle_otel.load import _assemble

    chain = _chain_spans(50)  # a deep trunk, then many leaves under its deepest boundary
    leaves = [
        SpanRecord(TID, f"{10_000 + i:016x}", f"{50:016x}", "leaf", 1, 1000, 2000, {sc.BOUNDARY_NAME: "leaf"})
        for i in range(100)
    ]
    assert len(build_trace(TID, chain + leaves).boundaries) == 150
    monkeypatch.setattr(_assemble, "MAX_CALL_KEY_ENTRIES", 2000)
    with pytest.raises(TraceLoadError, match="call keys"):
        build_trace(TID, chain + leaves, source="broom.json")


def _reference_parents(spans: list[SpanRecord]) -> dict[str, str | None]:
    """The nearest boundary ancestor of each boundary, by a plain recursive walk (a test oracle)."""
    by_id = {s.span_id: s for s in spans}
    out: dict[str, str | None] = {}

    def nearest(span_id: str | None, trail: frozenset[str]) -> str | None:
        while span_id is not None and span_id in by_id and span_id not in trail:
            if sc.BOUNDARY_NAME in by_id[span_id].attributes:
                return span_id
            trail = trail | {span_id}
            span_id = by_id[span_id].parent_span_id
        return None

    for s in spans:
        if sc.BOUNDARY_NAME in s.attributes:
            out[s.span_id] = nearest(s.parent_span_id, frozenset({s.span_id}))
    return out


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_iterative_build_matches_a_recursive_walk_on_forests(data: Any) -> None:
    n = data.draw(st.integers(min_value=1, max_value=30))
    spans = []
    for i in range(n):
        choices = st.sampled_from(["root", "absent"]) | (
            st.integers(min_value=0, max_value=i - 1) if i else st.nothing()
        )
        parent = data.draw(choices)
        parent_id = None if parent == "root" else "f" * 16 if parent == "absent" else f"{parent:016x}"
        spans.append(
            SpanRecord(
                trace_id=TID,
                span_id=f"{i:016x}",
                parent_span_id=parent_id,
                name="s",
                kind=1,
                start_ns=data.draw(st.integers(min_value=0, max_value=3)),  # ties and children before parents
                end_ns=5,
                attributes={sc.BOUNDARY_NAME: f"b{i}"} if data.draw(st.booleans()) else {},
            )
        )
    trace = build_trace(TID, spans)
    got = {b.span_id: (b.parent.span_id if b.parent else None) for b in trace.boundaries}
    assert got == _reference_parents(spans)


def test_parent_cycles_terminate() -> None:
    def span(i: int, parent: int, boundary: bool) -> SpanRecord:
        return SpanRecord(
            TID, f"{i:016x}", f"{parent:016x}", "s", 1, 0, 1, {sc.BOUNDARY_NAME: f"b{i}"} if boundary else {}
        )

    plain_cycle = [span(1, 2, False), span(2, 3, False), span(3, 1, False), span(4, 1, True)]
    trace = build_trace(TID, plain_cycle)
    assert [b.name for b in trace.boundaries] == ["b4"] and trace.boundaries[0].parent is None
    assert "root span is missing" in trace.warnings[0]
    loop = [span(1, 1, True)]
    assert build_trace(TID, loop).boundaries[0].parent is None
    mixed = [span(1, 2, True), span(2, 3, False), span(3, 1, True), span(9, 2, True)]
    names = {b.name: b for b in build_trace(TID, mixed).boundaries}
    assert names["b9"].parent is not None and names["b9"].parent.name in ("b1", "b3")


# ------------------------------------------------------------------ Jaeger, Zipkin, Phoenix, Tempo


def jaeger_doc() -> dict[str, Any]:
    tags = [
        {"key": sc.BOUNDARY_NAME, "type": "string", "value": "run"},
        {"key": sc.CALL_INDEX, "type": "int64", "value": 0},
        {"key": sc.INPUT, "type": "string", "value": '{"q":"x"}'},
        {"key": "span.kind", "type": "string", "value": "internal"},
    ]
    span = {
        "traceID": TID,
        "spanID": ROOT_ID,
        "operationName": "run",
        "references": [],
        "startTime": 1_700_000_000_000_000,
        "duration": 5,
        "tags": tags,
        "logs": [{"timestamp": 1_700_000_000_000_001, "fields": [{"key": "event", "type": "string", "value": "e"}]}],
        "processID": "p1",
    }
    return {"data": [{"traceID": TID, "spans": [span], "processes": {"p1": {"serviceName": "svc", "tags": []}}}]}


def zipkin_doc() -> list[dict[str, Any]]:
    return [
        {
            "traceId": TID,
            "id": ROOT_ID,
            "name": "run",
            "timestamp": 1_700_000_000_000_000,
            "duration": 5,
            "localEndpoint": {"serviceName": "svc"},
            "tags": {sc.BOUNDARY_NAME: "run", sc.CALL_INDEX: "0", sc.INPUT: '{"q":"x"}'},
            "annotations": [{"timestamp": 1_700_000_000_000_001, "value": '{"e": {"k": 1}}'}],
        }
    ]


def phoenix_doc() -> dict[str, Any]:
    return {
        "data": [
            {
                "name": "run",
                "context": {"trace_id": TID, "span_id": ROOT_ID},
                "parent_id": None,
                "start_time": "2024-01-01T00:00:00+00:00",
                "end_time": "2024-01-01T00:00:01Z",
                "status_code": "OK",
                "status_message": "",
                "attributes": {"chronicle": {"boundary": {"name": "run"}}, sc.INPUT: '{"q":"x"}'},
                "events": [{"name": "e", "timestamp": "2024-01-01T00:00:00.5+00:00", "attributes": {}}],
            }
        ],
        "next_cursor": None,
    }


def _jspan(doc: dict[str, Any]) -> dict[str, Any]:
    span: dict[str, Any] = doc["data"][0]["spans"][0]
    return span


JAEGER_CASES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "tags not a list": lambda d: _jspan(d).update(tags="x"),
    "a tag not an object": lambda d: _jspan(d).update(tags=["x"]),
    "tag type a list": lambda d: _jspan(d)["tags"].append({"key": "a", "type": [1], "value": 1}),
    "int64 tag not digits": lambda d: _jspan(d)["tags"].append({"key": "a", "type": "int64", "value": "abc"}),
    "int64 tag of 5000 digits": lambda d: _jspan(d)["tags"].append({"key": "a", "type": "int64", "value": "9" * 5000}),
    "float64 tag a word": lambda d: _jspan(d)["tags"].append({"key": "a", "type": "float64", "value": "x"}),
    "binary tag not base64": lambda d: _jspan(d)["tags"].append({"key": "a", "type": "binary", "value": "%%"}),
    "string tag an object": lambda d: _jspan(d)["tags"].append({"key": "a", "type": "string", "value": {"x": 1}}),
    "tag key a list": lambda d: _jspan(d)["tags"].append({"key": [], "type": "string", "value": "v"}),
    "duration a word": lambda d: _jspan(d).update(duration="x"),
    "start time an object": lambda d: _jspan(d).update(startTime={"a": 1}),
    "start time of 5000 digits": lambda d: _jspan(d).update(startTime="1" * 5000),
    "references a string": lambda d: _jspan(d).update(references="x"),
    "a reference a number": lambda d: _jspan(d).update(references=[1]),
    "reference span id a number": lambda d: _jspan(d).update(references=[{"refType": "CHILD_OF", "spanID": 5}]),
    "logs a string": lambda d: _jspan(d).update(logs="x"),
    "log fields a number": lambda d: _jspan(d).update(logs=[{"timestamp": 1, "fields": 5}]),
    "log time a word": lambda d: _jspan(d).update(logs=[{"timestamp": "x", "fields": []}]),
    "processes a list": lambda d: d["data"][0].update(processes=[1]),
    "process a string": lambda d: d["data"][0]["processes"].update(p1="x"),
    "service name a list": lambda d: d["data"][0]["processes"].update(p1={"serviceName": [1]}),
    "spans a string": lambda d: d["data"][0].update(spans="x"),
    "a span a number": lambda d: d["data"][0].update(spans=[1]),
    "trace id a number": lambda d: _jspan(d).update(traceID=5),
    "span id a list": lambda d: _jspan(d).update(spanID=[]),
    "operation name an object": lambda d: _jspan(d).update(operationName={}),
}

ZIPKIN_CASES: dict[str, Callable[[list[Any]], Any]] = {
    "tags a list": lambda d: d[0].update(tags=["x"]),
    "a tag a list": lambda d: d[0]["tags"].update(a=[1]),
    "annotations a string": lambda d: d[0].update(annotations="x"),
    "an annotation a number": lambda d: d[0].update(annotations=[1]),
    "annotation value an object": lambda d: d[0].update(annotations=[{"timestamp": 1, "value": {"a": 1}}]),
    "annotation time a word": lambda d: d[0].update(annotations=[{"timestamp": "x", "value": "v"}]),
    "annotation nested too deep": lambda d: d[0].update(
        annotations=[{"timestamp": 1, "value": '{"e": {"a": ' + "[" * 500 + "]" * 500 + "}}"}]
    ),
    "timestamp an object": lambda d: d[0].update(timestamp={}),
    "duration a word": lambda d: d[0].update(duration="x"),
    "local endpoint a string": lambda d: d[0].update(localEndpoint="x"),
    "service name a list": lambda d: d[0].update(localEndpoint={"serviceName": []}),
    "id a number": lambda d: d[0].update(id=5),
    "parent id a list": lambda d: d[0].update(parentId=[]),
    "name a list": lambda d: d[0].update(name=[1]),
    "a trace of numbers after a span": lambda d: d.append(5),
    "a list of traces with a number": lambda d: d.__setitem__(slice(None), [[d[0]], 5]),
}

PHOENIX_CASES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "attributes a string": lambda d: d["data"][0].update(attributes="x"),
    "attributes nested too deep": lambda d: d["data"][0].update(attributes=json.loads('{"a":' * 300 + "1" + "}" * 300)),
    "attribute value nested too deep": lambda d: d["data"][0].update(
        attributes={"a": [[[[]]]] * 2 + [_deep_list(300)]}
    ),
    "events a string": lambda d: d["data"][0].update(events="x"),
    "event time an object": lambda d: d["data"][0].update(events=[{"name": "e", "timestamp": {}}]),
    "event attributes a list": lambda d: d["data"][0].update(events=[{"name": "e", "attributes": [1]}]),
    "start time not a date": lambda d: d["data"][0].update(start_time="yesterday"),
    "start time an object": lambda d: d["data"][0].update(start_time={"a": 1}),
    "start time a float overflow": lambda d: d["data"][0].update(start_time=1e300),
    "start time beyond 64 bits": lambda d: d["data"][0].update(start_time="9999-12-31T23:59:59-23:59"),
    "start time 10000 characters": lambda d: d["data"][0].update(start_time="2" * 10_000),
    "status code a list": lambda d: d["data"][0].update(status_code=[1]),
    "status message an object": lambda d: d["data"][0].update(status_message={}),
    "parent id a number": lambda d: d["data"][0].update(parent_id=5),
    "name a list": lambda d: d["data"][0].update(name=[]),
    "span id a number": lambda d: d["data"][0]["context"].update(span_id=5),
}

TEMPO_CASES: dict[str, Any] = {
    "v1 batches a string": {"batches": "x"},
    "v1 batches of numbers": {"batches": [1]},
    "v2 resourceSpans an object": {"trace": {"resourceSpans": {}}},
    "v2 scopeSpans a string": {"trace": {"resourceSpans": [{"scopeSpans": "x"}]}},
    "v3 result spans of strings": {"result": {"resourceSpans": [{"scopeSpans": [{"spans": ["x"]}]}]}},
}


def _deep_list(depth: int) -> list[Any]:
    node: list[Any] = []
    for _ in range(depth):
        node = [node]
    return node


def test_the_valid_backend_documents_load(tmp_path: Path) -> None:
    for name, doc in (("jaeger", jaeger_doc()), ("zipkin", zipkin_doc()), ("phoenix", phoenix_doc())):
        trace = chronicle.load_trace(write(tmp_path, doc, f"{name}.json"))
        assert trace.root is not None and trace.root.name == "run", name
        assert trace.root.input == {"q": "x"}, name


@pytest.mark.parametrize(
    ("model", "case"),
    [("jaeger", c) for c in sorted(JAEGER_CASES)]
    + [("zipkin", c) for c in sorted(ZIPKIN_CASES)]
    + [("phoenix", c) for c in sorted(PHOENIX_CASES)],
)
def test_wrong_types_in_backend_documents(tmp_path: Path, model: str, case: str) -> None:
    doc: Any = {"jaeger": jaeger_doc, "zipkin": zipkin_doc, "phoenix": phoenix_doc}[model]()
    {"jaeger": JAEGER_CASES, "zipkin": ZIPKIN_CASES, "phoenix": PHOENIX_CASES}[model][case](doc)
    path = write(tmp_path, doc, f"{model}.json")
    with pytest.raises(TraceLoadError) as info:
        chronicle.load_trace(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("case", sorted(TEMPO_CASES))
def test_wrong_types_in_tempo_and_jaeger_v3_documents(tmp_path: Path, case: str) -> None:
    refused(write(tmp_path, TEMPO_CASES[case]))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "resourceSpans",
                        "batches",
                        "scopeSpans",
                        "spans",
                        "traceId",
                        "spanId",
                        "attributes",
                        "key",
                        "value",
                        "data",
                        "context",
                        "trace_id",
                        "span_id",
                        "tags",
                        "processes",
                        "traceID",
                        "spanID",
                        "id",
                        "result",
                        "trace",
                        "intValue",
                        "arrayValue",
                        "values",
                        "startTimeUnixNano",
                        "kind",
                        "status",
                        "events",
                        "annotations",
                        "timestamp",
                        "duration",
                        "references",
                        "logs",
                        "type",
                    ]
                )
                | st.text(max_size=4),
                inner,
                max_size=5,
            )
        ),
        max_leaves=40,
    )
)
def test_property_arbitrary_json_raises_only_package_errors(doc: Any) -> None:
    try:
        spans = list(spans_of_document(doc, "memory", 1))
    except TraceLoadError:
        return
    by_trace: dict[str, list[SpanRecord]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    for tid, group in by_trace.items():
        with contextlib.suppress(ChronicleError):
            touch(build_trace(tid, group))


# ------------------------------------------------------------------ compression and framing


def _good_lines() -> bytes:
    return orjson.dumps(base_request()) + b"\n"


def test_a_gzip_file_with_any_one_byte_flipped_or_cut(tmp_path: Path) -> None:
    good = gzip.compress(_good_lines(), mtime=0)
    for i in range(len(good)):
        flipped = bytearray(good)
        flipped[i] ^= 0xFF if i % 2 else 0x01
        outcome = load_or_refuse(write(tmp_path, bytes(flipped), "f.jsonl.gz"))
        if i >= 10 and i < len(good) - 8:  # the deflate data: a flip is caught by zlib or the CRC
            assert isinstance(outcome, TraceLoadError), i
    for cut in range(2, len(good)):
        outcome = load_or_refuse(write(tmp_path, good[:cut], "c.jsonl.gz"))
        assert isinstance(outcome, TraceLoadError) and "gzip" in str(outcome), cut
    refused(write(tmp_path, good + b"trailing garbage", "g.jsonl.gz"), "gzip")
    assert chronicle.load_trace(write(tmp_path, good + good + bytes(7), "two.jsonl.gz")).root is not None


def test_a_zstd_file_flipped_cut_or_with_garbage(tmp_path: Path) -> None:
    good = zstandard.ZstdCompressor(write_checksum=True).compress(_good_lines())
    for i in range(len(good)):
        flipped = bytearray(good)
        flipped[i] ^= 0x20
        load_or_refuse(write(tmp_path, bytes(flipped), "f.jsonl.zst"))
    for cut in range(4, len(good)):
        outcome = load_or_refuse(write(tmp_path, good[:cut], "c.jsonl.zst"))
        assert isinstance(outcome, TraceLoadError) and "zstd" in str(outcome), cut
    refused(write(tmp_path, good + b"garbage!", "g.jsonl.zst"), "corrupt zstd")


def frame(message: bytes) -> bytes:
    return struct.pack(">I", len(message)) + message


def _protobuf_message() -> bytes:
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    doc = base_request()
    for span in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        for field in ("traceId", "spanId", "parentSpanId"):
            if field in span:
                span[field] = base64.b64encode(bytes.fromhex(span[field])).decode()
    message: bytes = ParseDict(doc, ExportTraceServiceRequest()).SerializeToString()
    return message


FRAMING_CASES: dict[str, tuple[Callable[[bytes], bytes], str]] = {
    "garbage after a good message": (lambda m: frame(m) + frame(b"\xff" * 9), "message 2 is not an OTLP protobuf"),
    "size beyond the file": (lambda m: frame(m) + b"\xff\xff\xff\xff" + m, "the file is truncated"),
    "stray bytes": (lambda m: frame(m) + b"\x00\x01", "stray bytes"),
    "first message garbage": (lambda m: frame(b"\x0a\xff\xff\xff\xff\x0f"), "unrecognised trace format"),
    "zstd message of garbage": (lambda m: frame(m) + frame(b"\x28\xb5\x2f\xfd" + b"\xff" * 30), "corrupt zstd"),
    "zstd message cut": (
        lambda m: frame(zstandard.ZstdCompressor().compress(m)[:-5]),
        "truncated zstd",
    ),
    "zstd json message of garbage": (
        lambda m: frame(zstandard.ZstdCompressor().compress(b'{"resourceSpans": [1]}')),
        "resourceSpans[0]",
    ),
    "zstd json message not json": (
        lambda m: frame(zstandard.ZstdCompressor().compress(b"{nope")),
        "message 1 is not JSON",
    ),
}


@pytest.mark.parametrize("case", sorted(FRAMING_CASES))
def test_collector_framing_with_garbage(tmp_path: Path, case: str) -> None:
    build, fragment = FRAMING_CASES[case]
    refused(write(tmp_path, build(_protobuf_message()), "t.pb"), fragment)


def test_collector_framing_with_any_byte_flipped(tmp_path: Path) -> None:
    good = frame(_protobuf_message()) + frame(zstandard.ZstdCompressor().compress(_protobuf_message()))
    assert chronicle.load_trace(write(tmp_path, good, "t.pb")).root is not None
    rnd = random.Random(7)
    for i in range(len(good)):
        flipped = bytearray(good)
        flipped[i] ^= 1 << rnd.randrange(8)
        load_or_refuse(write(tmp_path, bytes(flipped), "f.pb"))


# ------------------------------------------------------------------ limits


def test_limits_reach_the_file_reader(tmp_path: Path) -> None:
    path = write(tmp_path, _good_lines() * 3, "plain.jsonl")
    with pytest.raises(LoadLimitError) as info:
        chronicle.load_trace(path, limits=LoadLimits(max_decompressed_bytes=100))
    assert info.value.limit == "max_decompressed_bytes" and info.value.env_var == "CHRONICLE_MAX_DECOMPRESSED_BYTES"
    assert str(path) in str(info.value) and "CHRONICLE_MAX_DECOMPRESSED_BYTES" in str(info.value)
    assert chronicle.load_trace(path).root is not None


def test_limits_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, gzip.compress(_good_lines() * 3), "t.jsonl.gz")
    monkeypatch.setenv("CHRONICLE_MAX_DECOMPRESSED_BYTES", "100")
    with pytest.raises(LoadLimitError, match="max_decompressed_bytes"):
        chronicle.load_trace(path)
    with pytest.raises(LoadLimitError, match="max_decompressed_bytes"):
        chronicle.load_trace(write(tmp_path, zstandard.ZstdCompressor().compress(_good_lines() * 3), "t.zst"))


def test_read_bytes_takes_the_same_limits() -> None:
    from chronicle_otel.load._files import read_bytes

    small = LoadLimits(max_decompressed_bytes=64)
    for data in (_good_lines(), gzip.compress(_good_lines()), zstandard.ZstdCompressor().compress(_good_lines())):
        with pytest.raises(LoadLimitError, match="max_decompressed_bytes"):
            list(read_bytes(data, "memory", limits=small))
        assert len(list(read_bytes(data, "memory"))) == 2


def test_payloads_read_from_any_store_count_against_one_budget_per_trace(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    @chronicle.boundary(kind="retrieval", name="runbook")
    def runbook(section: int) -> str:
        return f"section {section}: " + "roll back the risk scorer, then drain the queue. " * 12_000  # 600 KB

    @chronicle.boundary(kind="agent", name="agent")
    def agent() -> list[str]:
        return [runbook(i) for i in range(3)]

    agent()
    recorder.config.force_flush()
    tid = recorder.store.list_traces()[0].trace_id
    whole = chronicle.load_trace(recorder.path, tid)  # the outputs cut on the spans, whole from the store's payloads
    assert {b.raw_output.status for b in whole.boundaries if b.raw_output} == {"rehydrated"}
    read = sum(len(b.raw_output.text.encode()) for b in whole.boundaries if b.raw_output)  # the runbooks, the list
    assert read > 3_000_000
    with pytest.raises(LoadLimitError) as refused:
        chronicle.load_trace(recorder.path, tid, limits=LoadLimits(max_payload_bytes=read - 1))
    assert refused.value.limit == "max_payload_bytes" and str(recorder.path) in str(refused.value)
    monkeypatch.setenv("CHRONICLE_MAX_PAYLOAD_BYTES", str(read - 1))
    with pytest.raises(LoadLimitError, match=r"CHRONICLE_MAX_PAYLOAD_BYTES"):
        chronicle.load_trace(recorder.path, tid)
    monkeypatch.setenv("CHRONICLE_MAX_PAYLOAD_BYTES", str(read))  # every payload the trace reads, exactly
    again = chronicle.load_trace(recorder.path, tid).boundaries
    assert [b.raw_output for b in again] == [b.raw_output for b in whole.boundaries]


def _zeros_gzip_member(mib: int) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(1 << 20)
    return b"".join([packer.compress(zeros) for _ in range(mib)] + [packer.flush()])


def _zeros_zstd_frame(mib: int) -> bytes:
    packer = zstandard.ZstdCompressor().compressobj()
    zeros = bytes(1 << 20)
    return b"".join([packer.compress(zeros) for _ in range(mib)] + [packer.flush()])


def test_size_and_ratio_bounds_each_stop_inflating(tmp_path: Path) -> None:
    ratio_bomb = write(tmp_path, _zeros_gzip_member(4), "r.gz")
    with pytest.raises(LoadLimitError) as info:
        chronicle.load_trace(ratio_bomb)
    assert info.value.limit == "max_compression_ratio"
    trusted = LoadLimits(max_compression_ratio=1e9, max_decompressed_bytes=3 << 20)
    with pytest.raises(LoadLimitError) as info:
        chronicle.load_trace(ratio_bomb, limits=trusted)
    assert info.value.limit == "max_decompressed_bytes"
    spaces = zstandard.ZstdCompressor().compress(b'{"resourceSpans": []}' + b" " * (2 << 20))  # valid, and a bomb
    framed = write(tmp_path, frame(spaces) * 3, "m.pb")
    with pytest.raises(LoadLimitError, match="max_compression_ratio"):
        chronicle.load_trace(framed)
    with pytest.raises(LoadLimitError, match="max_decompressed_bytes"):  # counted over all messages
        chronicle.load_trace(framed, limits=LoadLimits(max_compression_ratio=1e9, max_decompressed_bytes=5 << 20))


_PEAK = textwrap.dedent(
    """
    import resource, sys
    from chronicle_otel import load_trace
    from chronicle_otel.errors import LoadLimitError
    try:
        load_trace(sys.argv[1])
    except LoadLimitError as exc:
        print("refused", exc.limit)
    peak = [line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")]
    print("peak_kib", peak[0] if peak else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    """
)


def _peak_of_loading(path: Path) -> tuple[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, str(path)], capture_output=True, text=True, cwd=path.parent, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    return lines.get("refused", ""), int(lines["peak_kib"])


@pytest.mark.parametrize("bomb", ["collector-zstd", "gzip"])
def test_decompression_bombs_are_refused_within_bounded_memory(tmp_path: Path, bomb: str) -> None:
    if bomb == "collector-zstd":  # 16 messages of 256 MiB of zeros each: 4 GiB from ~130 KB
        data = frame(_zeros_zstd_frame(256)) * 16
        assert len(data) < 200_000
    else:  # 64 gzip members of 64 MiB of zeros each: 4 GiB from ~4 MB
        data = _zeros_gzip_member(64) * 64
        assert len(data) < 5_000_000
    path = write(tmp_path, data, "bomb.bin")
    limit, peak_kib = _peak_of_loading(path)
    assert limit in ("max_compression_ratio", "max_decompressed_bytes")
    assert peak_kib < 600 * 1024, f"peak RSS {peak_kib} KiB"


# ------------------------------------------------------------------ the local store


def _recorded_store(recorder: Recorder) -> str:
    @chronicle.boundary(kind="tool", name="tool")
    def tool(x: int) -> int:
        return x + 1

    tool(1)
    recorder.config.force_flush()
    return recorder.store.list_traces()[0].trace_id


def _segments(recorder: Recorder) -> list[Path]:
    return sorted((recorder.path / "spans").rglob("*.jsonl"))


def test_a_store_segment_that_is_not_json(recorder: Recorder) -> None:
    tid = _recorded_store(recorder)
    [segment] = _segments(recorder)
    data = bytearray(segment.read_bytes())
    data[0:1] = b"["
    segment.write_bytes(bytes(data))
    recorder.store.close()
    with pytest.raises(StoreError, match="not JSON") as info:
        chronicle.load_trace(recorder.path, tid)
    assert str(segment) in str(info.value)


def test_a_store_segment_of_the_wrong_shape(recorder: Recorder) -> None:
    tid = _recorded_store(recorder)
    [segment] = _segments(recorder)
    line = orjson.loads(segment.read_bytes().splitlines()[0])
    line["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"] = "x" * 10
    text = orjson.dumps(line)
    segment.write_bytes(text + b"\n")
    with sqlite3.connect(recorder.path / "index.sqlite3") as db:
        db.execute("UPDATE span_lines SET offset=0, length=?", (len(text),))
    db.close()
    recorder.store.close()
    with pytest.raises(TraceLoadError, match="attributes"):
        chronicle.load_trace(recorder.path, tid)
    assert recorder.store.read_spans(tid)  # the raw reader still works
    line["resourceSpans"] = [1]
    segment.write_bytes(orjson.dumps(line).ljust(len(text)) + b"\n")
    with pytest.raises(StoreError):
        recorder.store.read_spans(tid)


def test_a_store_index_pointing_outside_the_store(recorder: Recorder, tmp_path: Path) -> None:
    tid = _recorded_store(recorder)
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_bytes(b"{}\n")
    for segment in (str(outside), "../elsewhere.jsonl", "spans/../../elsewhere.jsonl"):
        with sqlite3.connect(recorder.path / "index.sqlite3") as db:
            db.execute("UPDATE span_lines SET segment=?, offset=0, length=2", (segment,))
        db.close()
        recorder.store.close()
        with pytest.raises(StoreError, match="outside the store"):
            chronicle.load_trace(recorder.path, tid)
    with sqlite3.connect(recorder.path / "index.sqlite3") as db:
        db.execute(
            "UPDATE span_lines SET segment=?, offset=-5, length=-1",
            (str(_segments(recorder)[0].relative_to(recorder.path)),),
        )
    db.close()
    recorder.store.close()
    with pytest.raises(StoreError, match="offset"):
        chronicle.load_trace(recorder.path, tid)


def test_a_store_index_that_is_not_a_database(recorder: Recorder) -> None:
    tid = _recorded_store(recorder)
    recorder.store.close()
    for name in ("index.sqlite3-wal", "index.sqlite3-shm"):
        (recorder.path / name).unlink(missing_ok=True)
    (recorder.path / "index.sqlite3").write_bytes(b"not a database" * 100)
    with pytest.raises(StoreError, match="unreadable store index"):
        chronicle.load_trace(recorder.path, tid)


def test_whole_attributes_from_a_damaged_store_only_mean_nothing_to_rehydrate(
    recorder: Recorder, tmp_path: Path
) -> None:
    tid = _recorded_store(recorder)
    lines = b"\n".join(recorder.store.iter_lines(tid)) + b"\n"
    doc = orjson.loads(lines)
    span = first_span(doc)
    for kv in span["attributes"]:
        if kv["key"] == sc.INPUT:
            kv["value"]["stringValue"] = kv["value"]["stringValue"][:3]  # cut by a backend
    [segment] = _segments(recorder)
    segment.write_bytes(b"[" + segment.read_bytes()[1:])
    recorder.store.close()
    trace = chronicle.load_trace(write(tmp_path, doc), store=recorder.store)
    [b] = trace.boundaries
    assert b.raw_input is not None and b.raw_input.status in ("missing", "rehydrated")


_COPIES_PEAK = textwrap.dedent(
    """
    import shutil, sys, tracemalloc
    from chronicle_otel import load_trace
    clean, tampered, trace_id = sys.argv[1:4]
    expected = load_trace(clean, trace_id)  # once before measuring: every module the load imports is imported
    tracemalloc.start()
    trace = load_trace(tampered, trace_id)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert trace.spans == expected.spans and [b.call_key for b in trace.boundaries] == [
        b.call_key for b in expected.boundaries
    ], "the tampered store loads another trace"
    print(peak)
    """
)


@pytest.mark.parametrize("tampering", ["one row listed again and again", "the line copied, one row per copy"])
def test_a_store_index_listing_a_line_many_times_takes_memory_for_one_copy(
    recorder: Recorder, tmp_path: Path, tampering: str
) -> None:
    @chronicle.boundary(kind="tool", name="lookup")
    def lookup(query: str) -> list[str]:
        return [f"{query}: chunk {i} of the runbook" * 4 for i in range(8)]

    @chronicle.boundary(kind="agent", name="agent")
    def agent(question: str) -> list[list[str]]:
        return [lookup(f"{question} {i}") for i in range(4)]

    agent("why did the deploy fail")
    recorder.config.force_flush()
    recorder.store.close()
    tid = recorder.store.list_traces()[0].trace_id
    recorder.store.close()
    clean = tmp_path / "clean"
    shutil.copytree(recorder.path, clean)
    with contextlib.closing(sqlite3.connect(recorder.path / "index.sqlite3")) as db, db:
        rows = db.execute("SELECT trace_id, segment, offset, length, trace_ref FROM span_lines").fetchall()
        distinct = sum(row[3] for row in rows)
        copies = (16 << 20) // distinct  # the trace's lines listed again until 16 MiB are read
        if tampering == "one row listed again and again":
            added = rows * copies
        else:  # rows no reader can tell from the writer's own: each copy of a line at its own offset
            [segment] = _segments(recorder)
            added = []
            with segment.open("ab") as fh:
                for _ in range(copies):
                    for trace_id, name, offset, length, ref in rows:
                        added.append((trace_id, name, fh.tell(), length, ref))
                        fh.write(segment.read_bytes()[offset : offset + length] + b"\n")
        db.executemany("INSERT INTO span_lines(trace_id, segment, offset, length, trace_ref) VALUES (?,?,?,?,?)", added)
    read = distinct * (copies + 1)
    command = [sys.executable, "-c", _COPIES_PEAK, str(clean), str(recorder.path), tid]
    environ = {**os.environ, "PYTHONPATH": str(Path(chronicle.__file__).parents[1])}  # this checkout, from any cwd
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=environ, timeout=120)
    assert done.returncode == 0, done.stderr
    peak = int(done.stdout)
    # Copies of a span are merged as they are read (docs/explanation/security.md): what they add is the index rows
    # listing them, far below the bytes read; holding every copy parsed took 5 to 10 times the bytes read.
    assert peak < read / 2, f"loading {read} bytes of copies of {distinct} bytes of lines took {peak} bytes"


@pytest.fixture(autouse=True)
def plain_store_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read, size or damage segment bytes by hand: the store writes them as plain JSON lines here
    (tests/unit/store/test_compression.py covers the compressed form)."""
    monkeypatch.setenv("CHRONICLE_STORE_COMPRESS", "false")
