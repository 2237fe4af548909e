from __future__ import annotations

import base64
import gzip
import json
import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel.codec import encode
from tests.conftest import Recorder, make_recorder

TID = "5b8efff798038103d269b633813fc60c"
TID2 = "0af7651916cd43dd8448eb211c80319c"


def span(span_id: str, name: str, parent: str | None = None, trace_id: str = TID, **attrs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(1_700_000_000_000_000_000 + int(span_id[-4:], 16)),
        "endTimeUnixNano": str(1_700_000_000_100_000_000 + int(span_id[-4:], 16)),
        "attributes": [{"key": k, "value": _value(v)} for k, v in attrs.items()],
        "status": {},
    }
    if parent:
        out["parentSpanId"] = parent
    return out


def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": v}


def boundary_attrs(name: str, kind: str, index: int, inp: Any, out: Any) -> dict[str, Any]:
    inp_text, out_text = encode(inp).decode(), encode(out).decode()
    return {
        sc.BOUNDARY_NAME: name,
        sc.BOUNDARY_KIND: kind,
        sc.CALL_INDEX: index,
        sc.CODEC: "chronicle-json/1",
        sc.INPUT: inp_text,
        sc.INPUT_HASH: chronicle.store.payload_digest(inp_text.encode()),
        sc.OUTPUT: out_text,
        sc.OUTPUT_HASH: chronicle.store.payload_digest(out_text.encode()),
    }


def request(*spans: dict[str, Any]) -> dict[str, Any]:
    return {
        "resourceSpans": [
            {"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "s"}, "spans": list(spans)}]}
        ]
    }


ROOT = span("00000000000000a1", "run", **boundary_attrs("run", "agent", 0, {"q": "x"}, "done"))
CHILD = span("00000000000000b2", "plan", "00000000000000a1", **boundary_attrs("plan", "llm", 0, {"p": 1}, [1, 2]))
SERVICE = span("00000000000000c3", "POST /chat")


def write_lines(path: Path, *docs: dict[str, Any], trailing_newline: bool = True) -> Path:
    text = "\n".join(json.dumps(d) for d in docs) + ("\n" if trailing_newline else "")
    path.write_text(text)
    return path


def test_one_request_per_line(tmp_path: Path) -> None:
    trace = chronicle.load_trace(write_lines(tmp_path / "t.jsonl", request(ROOT), request(CHILD)))
    assert trace.trace_id == TID
    assert [b.name for b in trace.boundaries] == ["run", "plan"]
    assert trace.root is not None and trace.root.name == "run"
    plan = trace.boundaries[1]
    assert plan.parent is trace.root and plan.call_key == (("run", 0), ("plan", 0))
    assert plan.input == {"p": 1} and plan.output == [1, 2]
    assert plan.raw_input is not None and plan.raw_input.status == "ok"


def test_one_document_pretty_printed_and_a_list_of_documents(tmp_path: Path) -> None:
    (tmp_path / "doc.json").write_text(json.dumps(request(ROOT, CHILD), indent=2))
    assert len(chronicle.load_trace(tmp_path / "doc.json").boundaries) == 2
    (tmp_path / "list.json").write_text(json.dumps([request(ROOT), request(CHILD)]))
    assert len(chronicle.load_trace(tmp_path / "list.json").boundaries) == 2


def test_gzip(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl.gz").write_bytes(gzip.compress((json.dumps(request(ROOT, CHILD)) + "\n").encode()))
    assert len(chronicle.load_trace(tmp_path / "t.jsonl.gz").boundaries) == 2


def test_many_traces_select_by_id_or_list_candidates(tmp_path: Path) -> None:
    other = span("00000000000000d4", "other", trace_id=TID2)
    path = write_lines(tmp_path / "many.jsonl", request(ROOT, other), request(CHILD))
    assert chronicle.load_trace(path, TID2.upper()).trace_id == TID2
    with pytest.raises(chronicle.TraceLoadError, match="2 traces and no trace_id") as info:
        chronicle.load_trace(path)
    assert TID in str(info.value) and TID2 in str(info.value) and "run" in str(info.value)
    with pytest.raises(chronicle.TraceNotFoundError) as missing:
        chronicle.load_trace(path, "f" * 32)
    assert isinstance(missing.value, LookupError) and TID in str(missing.value)


def test_split_out_of_order_and_duplicated_spans_are_merged(tmp_path: Path) -> None:
    partial_root = dict(ROOT, attributes=ROOT["attributes"][:2], endTimeUnixNano="0")
    path = write_lines(tmp_path / "m.jsonl", request(CHILD), request(partial_root), request(ROOT), request(CHILD))
    trace = chronicle.load_trace(path)
    assert [b.name for b in trace.boundaries] == ["run", "plan"]
    assert trace.root is not None and trace.root.output == "done"
    assert len(trace.spans) == 2


def test_ids_in_uppercase_hex_or_base64_are_normalised(tmp_path: Path) -> None:
    b64 = lambda h: base64.b64encode(bytes.fromhex(h)).decode()  # noqa: E731
    root = dict(ROOT, traceId=TID.upper(), spanId=ROOT["spanId"].upper())
    child = dict(CHILD, traceId=b64(TID), spanId=b64(CHILD["spanId"]), parentSpanId=b64(ROOT["spanId"]))
    trace = chronicle.load_trace(write_lines(tmp_path / "ids.jsonl", request(root), request(child)))
    assert trace.trace_id == TID
    assert {s.span_id for s in trace.spans} == {"00000000000000a1", "00000000000000b2"}
    assert trace.boundaries[1].parent is trace.root


def test_integers_as_strings_stay_exact_beyond_2_53(tmp_path: Path) -> None:
    big = 2**62 + 1
    s = span("00000000000000e5", "n", big=big, neg=-(2**63), as_number=3)
    s["attributes"].append({"key": "num", "value": {"intValue": 7}})
    trace = chronicle.load_trace(write_lines(tmp_path / "int.jsonl", request(s)))
    attrs = trace.spans[0].attributes
    assert attrs["big"] == big and attrs["neg"] == -(2**63) and attrs["num"] == 7


def test_older_shape_and_snake_case(tmp_path: Path) -> None:
    legacy = {
        "resource_spans": [
            {
                "resource": {"attributes": []},
                "instrumentation_library_spans": [
                    {
                        "instrumentation_library": {"name": "old"},
                        "spans": [
                            {
                                "trace_id": TID,
                                "span_id": "00000000000000a1",
                                "name": "run",
                                "kind": "SPAN_KIND_SERVER",
                                "start_time_unix_nano": 1,
                                "end_time_unix_nano": 2,
                                "attributes": [{"key": "k", "value": {"int_value": 5}}],
                                "status": {"code": "STATUS_CODE_ERROR", "message": "boom"},
                            }
                        ],
                    }
                ],
            }
        ]
    }
    trace = chronicle.load_trace(write_lines(tmp_path / "legacy.json", legacy))
    [s] = trace.spans
    assert (s.kind, s.status, s.status_message, s.attributes["k"], s.scope) == (2, "ERROR", "boom", 5, "old")


def test_not_a_trace_names_file_and_line(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "metrics.jsonl", request(ROOT), {"resourceMetrics": []})
    with pytest.raises(chronicle.TraceLoadError) as info:
        chronicle.load_trace(path)
    assert f"{path}:2" in str(info.value) and "resourceMetrics" in str(info.value)
    assert "supported: OTLP/JSON" in str(info.value) and "Zipkin v2" in str(info.value)
    assert info.value.line == 2
    (tmp_path / "garbage.jsonl").write_text('{"resourceSpans": []}\nnot json at all\n{"resourceSpans": []}\n')
    with pytest.raises(chronicle.TraceLoadError, match=r"garbage.jsonl:2: not JSON"):
        chronicle.load_trace(tmp_path / "garbage.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(chronicle.TraceLoadError, match="empty file"):
        chronicle.load_trace(tmp_path / "empty.jsonl")
    with pytest.raises(chronicle.TraceLoadError, match="no such file"):
        chronicle.load_trace(tmp_path / "absent.jsonl")


def test_truncated_file_names_the_last_line(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    text = json.dumps(request(ROOT)) + "\n" + json.dumps(request(CHILD))
    path.write_text(text[: len(text) - 40])
    with pytest.raises(chronicle.TraceLoadError) as info:
        chronicle.load_trace(path)
    assert f"{path}:2" in str(info.value) and "truncated" in str(info.value)
    (tmp_path / "cut.jsonl.gz").write_bytes(gzip.compress(text.encode())[:-10])
    with pytest.raises(chronicle.TraceLoadError, match="gzip"):
        chronicle.load_trace(tmp_path / "cut.jsonl.gz")


def test_bad_ids_are_reported(tmp_path: Path) -> None:
    bad = dict(ROOT, spanId="xyz")
    with pytest.raises(chronicle.TraceLoadError, match=r"bad.jsonl:1: spanId 'xyz'"):
        chronicle.load_trace(write_lines(tmp_path / "bad.jsonl", request(bad)))


# ------------------------------------------------------------------ payloads: rehydration and portability


@chronicle.boundary(kind="retrieval", name="fetch")
def fetch(doc: str) -> str:
    return doc[::-1]


def _record_big(recorder: Recorder) -> str:
    fetch("chunk " * 5000)
    recorder.config.force_flush()
    return recorder.store.list_traces()[0].trace_id


def test_truncated_payloads_are_rehydrated_from_the_store(recorder: Recorder, tmp_path: Path) -> None:
    tid = _record_big(recorder)
    # a file exported by a collector keeps the truncated attributes only
    lines = b"\n".join(recorder.store.iter_lines(tid)) + b"\n"
    (tmp_path / "collector.jsonl").write_bytes(lines)
    trace = chronicle.load_trace(tmp_path / "collector.jsonl", store=recorder.store)
    [b] = trace.boundaries
    assert b.raw_input is not None and b.raw_input.status == "rehydrated"
    assert b.input == {"doc": "chunk " * 5000}
    # from the store itself
    assert chronicle.load_trace(recorder.store, tid).boundaries[0].output == ("chunk " * 5000)[::-1]


def test_missing_payload_is_flagged_and_replay_fails_naming_the_file(recorder: Recorder, tmp_path: Path) -> None:
    tid = _record_big(recorder)
    path = tmp_path / "alone.jsonl"
    path.write_bytes(b"\n".join(recorder.store.iter_lines(tid)) + b"\n")
    trace = chronicle.load_trace(path, store=tmp_path / "no-store")
    [b] = trace.boundaries
    assert b.raw_input is not None and b.raw_input.status == "missing" and not b.raw_input.complete
    assert b.raw_input.text.startswith('{"doc":"chunk chunk')
    assert any("not in the store" in w for w in trace.warnings)
    with pytest.raises(chronicle.ReplayError) as info:
        b.input  # noqa: B018
    assert f"{path}:1" in str(info.value) and "truncated to 8192 characters" in str(info.value)
    with chronicle.replay(trace, stub={"fetch"}) as run, pytest.raises(chronicle.ReplayError, match=str(path)):
        run.rerun()


def test_a_payload_edited_after_recording_is_said_to_be_changed_not_cut(recorder: Recorder, tmp_path: Path) -> None:
    @chronicle.boundary(kind="tool", name="small")
    def small(n: int) -> int:
        return n

    small(0)
    recorder.config.force_flush()
    path = chronicle.write_trace(chronicle.load_trace(recorder.store, "latest"), tmp_path / "t.jsonl")
    path.write_text(path.read_text().replace('{\\"n\\":0}', '{\\"n\\":7}'))  # the hash is left as it was
    trace = chronicle.load_trace(path, store=tmp_path / "no-store")
    [b] = trace.boundaries
    assert b.raw_input is not None and b.raw_input.text == '{"n":7}' and not b.raw_input.complete
    assert any("does not match its hash" in w and "changed after it was recorded" in w for w in trace.warnings)
    assert not any("cut to" in w for w in trace.warnings)
    with pytest.raises(
        chronicle.ReplayError, match=r"does not match its hash .*: it was changed after it was recorded"
    ):
        b.input  # noqa: B018


def test_save_writes_a_portable_self_contained_file(recorder: Recorder, tmp_path: Path) -> None:
    tid = _record_big(recorder)
    trace = chronicle.load_trace(recorder.store, tid)
    saved = chronicle.write_trace(trace, tmp_path / "fixtures" / "incident.jsonl")
    again = chronicle.load_trace(saved, store=tmp_path / "nowhere")
    [b] = again.boundaries
    assert b.raw_input is not None and b.raw_input.status == "ok"
    assert b.input == trace.boundaries[0].input
    assert sc.INPUT_TRUNCATED not in b.span.attributes
    gz = chronicle.write_trace(trace, tmp_path / "incident.jsonl.gz")
    assert chronicle.load_trace(gz).boundaries[0].output == trace.boundaries[0].output


def test_store_source_latest_and_latest_failed(tmp_path: Path) -> None:
    rec = make_recorder(tmp_path)

    @chronicle.boundary(kind="agent", name="job")
    def job(fail: bool) -> str:
        if fail:
            raise RuntimeError("x")
        return "ok"

    with pytest.raises(RuntimeError):
        job(True)
    job(False)
    rec.config.force_flush()
    assert chronicle.load_trace(rec.store, "latest").root.input == {"fail": False}  # type: ignore[union-attr]
    failed = chronicle.load_trace(rec.path, "latest-failed")
    assert failed.root is not None and failed.root.failed and failed.root.status == "ERROR"
    with pytest.raises(chronicle.TraceLoadError, match="several traces"):
        chronicle.load_trace(rec.store)
    with pytest.raises(chronicle.TraceNotFoundError):
        chronicle.load_trace(rec.store, "a" * 32)


def test_latest_is_the_newest_finished_run_not_one_still_recording(tmp_path: Path) -> None:
    """A run still going (its tool call stored, the agent run around it not yet) is not ``latest``: the run before
    it is. Loaded by its id, the run in progress reads as what is stored of it so far."""
    rec = make_recorder(tmp_path)
    seen: list[chronicle.Trace] = []

    @chronicle.boundary(kind="tool", name="step")
    def step(i: int) -> int:
        return i

    @chronicle.boundary(kind="agent", name="job")
    def job(i: int, peek: bool = False) -> int:
        step(i)
        if peek:
            rec.config.force_flush()
            seen.append(chronicle.load_trace(rec.path, "latest"))
            running = rec.store.list_traces(limit=1)[0]
            assert running.start_ns is None and running.trace_id != seen[0].trace_id
            seen.append(chronicle.load_trace(rec.path, running.trace_id))
        return i

    job(1)
    job(2, peek=True)
    latest, running = seen
    assert latest.root is not None and latest.root.name == "job" and latest.root.input == {"i": 1, "peek": False}
    assert [b.name for b in running.boundaries] == ["step"]
    rec.config.force_flush()
    assert chronicle.load_trace(rec.path, "latest").root.input == {"i": 2, "peek": True}  # type: ignore[union-attr]


def test_newer_codec_asks_for_an_upgrade(tmp_path: Path) -> None:
    s = span("00000000000000a1", "run", **{sc.BOUNDARY_NAME: "run", sc.CODEC: "chronicle-json/9"})
    with pytest.raises(chronicle.TraceLoadError, match="upgrade chronicle-otel"):
        chronicle.load_trace(write_lines(tmp_path / "new.jsonl", request(s)))


# ------------------------------------------------------------------ property test: OTLP/JSON variants

attr_values = st.one_of(
    st.text(max_size=20),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=3),
)


@st.composite
def span_sets(draw: Any) -> list[dict[str, Any]]:
    n = draw(st.integers(min_value=1, max_value=6))
    ids = draw(st.lists(st.binary(min_size=8, max_size=8), min_size=n, max_size=n, unique=True))
    spans = []
    for i, raw in enumerate(ids):
        parent = ids[draw(st.integers(min_value=0, max_value=i - 1))].hex() if i else None
        attrs = draw(st.dictionaries(st.text(min_size=1, max_size=8), attr_values, max_size=4))
        spans.append(
            {"span_id": raw.hex(), "parent": parent, "name": draw(st.text(max_size=10)), "attrs": attrs, "i": i}
        )
    return spans


def _encode_variant(spans: list[dict[str, Any]], trace: bytes, rnd: random.Random) -> list[dict[str, Any]]:
    def ident(raw_hex: str) -> str:
        choice = rnd.randrange(3)
        if choice == 0:
            return raw_hex
        if choice == 1:
            return raw_hex.upper()
        return base64.b64encode(bytes.fromhex(raw_hex)).decode()

    def value(v: Any) -> dict[str, Any]:
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v) if rnd.random() < 0.7 else v}
        if isinstance(v, float):
            return {"doubleValue": v}
        if isinstance(v, list):
            return {"arrayValue": {"values": [value(x) for x in v]}}
        return {"stringValue": v}

    docs = []
    encoded = []
    for s in spans:
        out = {
            "traceId": ident(trace.hex()),
            "spanId": ident(s["span_id"]),
            "name": s["name"],
            "startTimeUnixNano": str(1000 + s["i"]),
            "endTimeUnixNano": str(2000 + s["i"]),
            "attributes": [{"key": k, "value": value(v)} for k, v in s["attrs"].items()],
        }
        if s["parent"]:
            out["parentSpanId"] = ident(s["parent"])
        encoded.append(out)
    encoded += [dict(e) for e in rnd.sample(encoded, k=min(2, len(encoded)))]  # retried duplicates
    rnd.shuffle(encoded)
    while encoded:  # split over several requests
        k = rnd.randint(1, len(encoded))
        docs.append(request(*encoded[:k]))
        encoded = encoded[k:]
    return docs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(span_sets(), st.binary(min_size=16, max_size=16), st.integers(), st.booleans())
def test_property_variants_load_to_the_same_spans(
    tmp_path: Path, spans: list[dict[str, Any]], trace_raw: bytes, seed: int, gz: bool
) -> None:
    if trace_raw == bytes(16):
        trace_raw = b"\x01" * 16
    docs = _encode_variant(spans, trace_raw, random.Random(seed))
    data = b"\n".join(orjson.dumps(d) for d in docs) + b"\n"
    path = tmp_path / f"variant-{seed}.jsonl"
    path.write_bytes(gzip.compress(data) if gz else data)
    trace = chronicle.load_trace(path)
    assert trace.trace_id == trace_raw.hex()
    loaded = {s.span_id: s for s in trace.spans}
    assert set(loaded) == {s["span_id"] for s in spans}
    for s in spans:
        got = loaded[s["span_id"]]
        assert got.parent_span_id == s["parent"]
        assert got.name == s["name"]
        assert dict(got.attributes) == s["attrs"]
