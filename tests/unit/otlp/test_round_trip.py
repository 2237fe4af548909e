"""What the writer writes, the reader reads back as it was: values, attributes and whole traces.

The domain is what OTLP/JSON carries: strings, booleans, 64-bit integers (signed or unsigned), floats with NaN and
the infinities, bytes, and lists and string-keyed maps of them, nested. A tuple comes back as a list.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chronicle_otel as chronicle
from chronicle_otel._internal.untrusted import INT64_MIN, UINT64_MAX
from chronicle_otel.load import build_trace
from chronicle_otel.model import SpanRecord
from chronicle_otel.otlp import spans_of_request, spans_to_request
from chronicle_otel.otlp._values import decode_attributes, decode_value, encode_attributes, encode_value

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)  # JSON has no lone surrogates
_keys = _text.filter(lambda k: not k.startswith("chronicle."))  # chronicle's own keys would make boundaries
_scalars = st.one_of(
    _text,
    st.booleans(),
    st.integers(min_value=INT64_MIN, max_value=UINT64_MAX),
    st.floats(),
    st.binary(max_size=8),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(_keys, inner, max_size=3),
    ),
    max_leaves=8,
)
_attributes = st.dictionaries(_keys, _values, max_size=5)


def _comparable(value: Any) -> Any:
    """``value`` with NaN made equal to itself and tuples as lists, as the reader gives them back."""
    if isinstance(value, float) and math.isnan(value):
        return "<nan>"
    if isinstance(value, (list, tuple)):
        return [_comparable(v) for v in value]
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items()}
    return value


@settings(max_examples=300, deadline=None)
@given(_values)
def test_a_value_reads_back_as_written(value: Any) -> None:
    written = orjson.loads(orjson.dumps(encode_value(value)))
    again = decode_value(written)
    assert _comparable(again) == _comparable(value)
    assert type(again) is (list if isinstance(value, tuple) else type(value))


@settings(max_examples=100, deadline=None)
@given(_attributes)
def test_attributes_read_back_as_written(attrs: dict[str, Any]) -> None:
    written = orjson.loads(orjson.dumps(encode_attributes(attrs)))
    assert _comparable(decode_attributes(written)) == _comparable(attrs)


_hex16 = st.binary(min_size=8, max_size=8).filter(any).map(bytes.hex)
_times = st.integers(min_value=0, max_value=UINT64_MAX)
_flags = st.integers(min_value=1, max_value=0xFFFFFFFF)  # 0 is written as the is-remote-known bit


@st.composite
def _traces(draw: st.DrawFn) -> list[SpanRecord]:
    """The spans of one trace: a tree, with attributes, events, links, status, trace state, resources and scopes."""
    trace_id = draw(st.binary(min_size=16, max_size=16).filter(any)).hex()
    span_ids = draw(st.lists(_hex16, min_size=1, max_size=5, unique=True))
    resources = draw(st.lists(st.dictionaries(_keys, _scalars, max_size=2), min_size=1, max_size=2))
    spans = []
    for i, span_id in enumerate(span_ids):
        status = draw(st.sampled_from(["UNSET", "OK", "ERROR"]))
        events = draw(
            st.lists(st.fixed_dictionaries({"name": _text, "time_ns": _times, "attributes": _attributes}), max_size=2)
        )
        link = st.fixed_dictionaries(
            {
                "trace_id": st.binary(min_size=16, max_size=16).filter(any).map(bytes.hex),
                "span_id": _hex16,
                "attributes": _attributes,
                "trace_state": st.sampled_from(["", "rojo=00f067aa0ba902b7"]),
                "flags": _flags,
            }
        )
        spans.append(
            SpanRecord(
                trace_id=trace_id,
                span_id=span_id,
                parent_span_id=span_ids[draw(st.integers(0, i - 1))] if i else None,
                name=draw(_text),
                kind=draw(st.integers(0, 5)),
                start_ns=draw(_times),
                end_ns=draw(_times),
                attributes=draw(_attributes),
                status=status,
                status_message=draw(_text) if status == "ERROR" else "",
                events=tuple(events),
                links=tuple(draw(st.lists(link, max_size=2))),
                resource=draw(st.sampled_from(resources)),
                scope=draw(st.sampled_from(["", "scope.a", "scope.b"])),
                trace_state=draw(st.sampled_from(["", "congo=t61rcWkgMzE"])),
                flags=draw(_flags),
            )
        )
    return spans


def _span_fields(span: SpanRecord) -> tuple[Any, ...]:
    return (
        span.trace_id,
        span.span_id,
        span.parent_span_id,
        span.name,
        span.kind,
        span.start_ns,
        span.end_ns,
        _comparable(dict(span.attributes)),
        span.status,
        span.status_message,
        _comparable([dict(e) for e in span.events]),
        _comparable([dict(link) for link in span.links]),
        _comparable(dict(span.resource)),
        span.scope,
        span.trace_state,
        span.flags,
    )


@settings(max_examples=60, deadline=None)
@given(_traces())
def test_a_request_reads_back_as_the_spans_it_was_written_from(spans: list[SpanRecord]) -> None:
    request = orjson.loads(orjson.dumps(spans_to_request(spans)))
    again = {s.span_id: s for s in spans_of_request(request, source="request")}
    assert {s.span_id: _span_fields(s) for s in spans} == {k: _span_fields(s) for k, s in again.items()}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_traces(), st.booleans())
def test_write_trace_then_load_trace_gives_the_same_spans(tmp_path: Path, spans: list[SpanRecord], gz: bool) -> None:
    trace = build_trace(spans[0].trace_id, spans)
    path = chronicle.write_trace(trace, tmp_path / ("trace.jsonl.gz" if gz else "trace.jsonl"))
    again = chronicle.load_trace(path, store=tmp_path / "no-store")
    assert again.trace_id == trace.trace_id
    assert sorted(map(_span_fields, again.spans)) == sorted(map(_span_fields, trace.spans))
