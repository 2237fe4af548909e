"""The exporter's line encoder (``export_line``, the plain-span fast path) writes exactly what the general encoder
(``export_request``, every span through ``_span_json``) writes, byte for byte, for every shape of span: the listed
shapes below, and generated ones (every attribute value type, events, links, status, trace state, remote parents)."""

from __future__ import annotations

import inspect
import math
from collections import OrderedDict
from types import MappingProxyType
from typing import Any, Final

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    set_span_in_context,
)
from opentelemetry.trace.span import TraceState

from chronicle_otel.otlp import _writer, export_line, export_request, plain_attributes
from chronicle_otel.otlp._writer import span_dict

ATTRIBUTES: list[dict[str, Any]] = [
    {},
    {"s": "text", "empty": "", "esc": 'a"b\\c\n\x00é😀'},
    {"i": 7, "neg": -3, "big": 2**62 + 1, "zero": 0},
    {"b": True, "f": False},
    {"x": 0.1, "nan": math.nan, "inf": math.inf, "ninf": -math.inf, "one": 1.0},
    {"ss": ("a", "b"), "is": (1, 2, 3), "bs": (True, False), "fs": (0.5, math.nan), "none": ()},
    {"chronicle.boundary.name": "llm", "chronicle.input": '{"a": [1, 2]}', "n": 3, "reasons": ("stop",)},
]


def _spans(**limits: Any) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "svc", "deploy": 3}), span_limits=SpanLimits(**limits)
    )
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("scope.a", "1.2")
    for kind in SpanKind:
        for attrs in ATTRIBUTES:
            with tracer.start_as_current_span("root", kind=kind, attributes=attrs) as root:
                with tracer.start_as_current_span("child", attributes=attrs) as child:
                    child.set_status(Status(StatusCode.ERROR, "tool failed: boom"))
                root.set_status(Status(StatusCode.OK))
    with tracer.start_as_current_span("events") as span:
        span.add_event("evt", {"n": 3, "list": [1, 2]})
    with tracer.start_as_current_span("links", links=[Link(span.get_span_context(), {"l": 1})]):
        pass
    remote_link = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1))
    with tracer.start_as_current_span("plain links", links=[Link(span.get_span_context()), Link(remote_link)]):
        pass
    stated_link = SpanContext(0xABC, 0xDEF, is_remote=False, trace_state=TraceState([("k", "v")]))
    with tracer.start_as_current_span("link with trace state", links=[Link(stated_link)]):
        pass
    remote = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(1))
    with tracer.start_as_current_span("remote child", context=set_span_in_context(NonRecordingSpan(remote))):
        pass
    stated = SpanContext(
        0x1234, 0x9999, is_remote=True, trace_flags=TraceFlags(1), trace_state=TraceState([("k", "v")])
    )
    with tracer.start_as_current_span("with trace state", context=set_span_in_context(NonRecordingSpan(stated))):
        pass
    error = tracer.start_span("error without message")
    error.set_status(Status(StatusCode.ERROR))
    error.end()
    return list(memory.get_finished_spans())


def _general(spans: list[ReadableSpan]) -> bytes:
    """What the general encoder writes: every span through :func:`_writer._span_json` with all its fields."""
    original = _writer._plain_sdk_span
    _writer._plain_sdk_span = lambda span, attrs: None  # type: ignore[assignment]
    try:
        return orjson.dumps(export_request(spans))
    finally:
        _writer._plain_sdk_span = original


@pytest.mark.parametrize("limits", [{}, {"max_span_attributes": 2, "max_span_attribute_length": 3}, {"max_links": 1}])
def test_every_span_encodes_as_the_general_encoder_does(limits: dict[str, Any]) -> None:
    spans = _spans(**limits)
    assert len(spans) > 2 * len(ATTRIBUTES) * len(SpanKind)
    for span in spans:
        expected = _general([span])
        assert export_line([span]) == expected, span.name
        assert export_line([span], [plain_attributes(span.attributes)]) == expected, span.name
        assert orjson.dumps(export_request([span])) == expected, span.name
    assert export_line(spans) == _general(spans)


def test_the_fast_path_handles_the_plain_spans() -> None:
    spans = _spans()
    plain = [s for s in spans if _writer._plain_sdk_span(s, None) is not None]
    assert {s.name for s in plain} >= {"root", "child", "remote child", "error without message", "plain links"}
    assert not any(s.name in ("events", "links", "with trace state", "link with trace state") for s in plain)
    for span in plain:
        assert orjson.dumps(span_dict(span)) == orjson.dumps(
            orjson.loads(_general([span]))["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
        )


def test_a_line_of_several_resources_and_scopes_groups_them() -> None:
    memory = InMemorySpanExporter()
    spans = []
    for service in ("a", "b"):
        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        provider.add_span_processor(SimpleSpanProcessor(memory))
        for scope in ("s1", "s2"):
            with provider.get_tracer(scope, schema_url="https://example.invalid/schema").start_as_current_span("x"):
                pass
    spans = list(memory.get_finished_spans())
    line = export_line(spans)
    assert line == orjson.dumps(export_request(spans))
    request = orjson.loads(line)
    assert len(request["resourceSpans"]) == 2
    assert [len(rs["scopeSpans"]) for rs in request["resourceSpans"]] == [2, 2]
    assert request["resourceSpans"][0]["scopeSpans"][0]["schemaUrl"] == "https://example.invalid/schema"
    assert export_line(spans[:1]) == orjson.dumps(export_request(spans[:1]))
    assert export_line([]) == b'{"resourceSpans":[]}'


def test_a_subclass_of_the_sdk_span_takes_the_general_path() -> None:
    class Odd(ReadableSpan):
        @property
        def attributes(self) -> Any:
            return {"replaced": "yes"}

    span = _spans()[0]
    odd = Odd(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=span.attributes,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )
    encoded = span_dict(odd)
    assert encoded["attributes"] == [{"key": "replaced", "value": {"stringValue": "yes"}}]


def test_plain_attributes_copies_any_mapping() -> None:
    source = {"a": 1, "b": "x"}
    for mapping in (source, MappingProxyType(source), MappingProxyType(OrderedDict(source)), _spans()[0].attributes):
        copied = plain_attributes(mapping)
        assert type(copied) is dict
        assert copied == dict(mapping)
        assert copied is not mapping
    assert plain_attributes(None) == {}
    assert plain_attributes({}) == {}


# ------------------------------------------------------------------------------- generated spans, byte for byte

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)  # JSON has no lone surrogates
_scalars = st.one_of(
    _text,
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),  # past 64 bits too: written as digits either way
    st.floats(),  # NaN and the infinities included
    st.binary(max_size=8),
    st.none(),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(_text, inner, max_size=3),
    ),
    max_leaves=8,
)
_attributes = st.dictionaries(_text, _values, max_size=5)
_ids = st.integers(min_value=1, max_value=2**64 - 1)
_trace_states = st.sampled_from(
    [None, TraceState(), TraceState([("rojo", "00f067aa0ba902b7")]), TraceState([("congo", "t61rcWkgMzE")])]
)
_RESOURCES = [Resource.create({"service.name": "a"}), Resource({"service.name": "b"}, "https://example.invalid/r")]
_SCOPES = [
    InstrumentationScope("scope.a", "1.2"),
    InstrumentationScope("scope.b", None, "https://example.invalid/s", {"s": 1}),
]


@st.composite
def _contexts(draw: st.DrawFn, trace_id: int | None = None) -> SpanContext:
    return SpanContext(
        trace_id if trace_id is not None else draw(st.integers(min_value=1, max_value=2**128 - 1)),
        draw(_ids),
        is_remote=draw(st.booleans()),
        trace_flags=TraceFlags(draw(st.sampled_from([0, 1]))),
        trace_state=draw(_trace_states),
    )


# Nested values (maps, lists of maps) in bounded attributes: SDK 1.34 and newer; older SDKs drop them, as they would.
_EXTENDED: Final[dict[str, bool]] = (
    {"extended_attributes": True}
    if "extended_attributes" in inspect.signature(BoundedAttributes.__init__).parameters
    else {}
)


@st.composite
def _sdk_spans(draw: st.DrawFn) -> ReadableSpan:
    """A finished span as the exporter may get it: from the SDK's tracer (plain attributes, bounded ones with a
    count of those dropped) or built by hand, with any mix of events, links and status."""
    trace_id = draw(st.integers(min_value=1, max_value=2**128 - 1))
    attrs: Any = draw(_attributes)
    if draw(st.booleans()):
        bounded = BoundedAttributes(draw(st.integers(0, 6)), immutable=False, **_EXTENDED)
        for key, value in attrs.items():
            bounded[key] = value
        attrs = bounded
    code = draw(st.sampled_from(list(StatusCode)))
    status = Status(code, draw(st.none() | _text) if code is StatusCode.ERROR else None)
    events = draw(
        st.lists(
            st.builds(Event, _text, st.none() | _attributes, st.integers(min_value=0, max_value=2**64 - 1)),
            max_size=2,
        )
    )
    links = draw(st.lists(st.builds(Link, _contexts(), st.none() | _attributes), max_size=2))
    start = draw(st.integers(min_value=0, max_value=2**64 - 1))
    return ReadableSpan(
        name=draw(_text),
        context=draw(_contexts(trace_id)),
        parent=draw(st.none() | _contexts(trace_id)),
        resource=draw(st.sampled_from(_RESOURCES)),
        attributes=attrs,
        events=events,
        links=links,
        kind=draw(st.sampled_from(list(SpanKind))),
        status=status,
        start_time=start,
        end_time=draw(st.integers(min_value=start, max_value=2**64 - 1)),
        instrumentation_scope=draw(st.sampled_from(_SCOPES)),
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(_sdk_spans(), min_size=1, max_size=4))
def test_the_line_encoder_writes_the_general_encoders_bytes(spans: list[ReadableSpan]) -> None:
    for span in spans:
        expected = _general([span])
        assert export_line([span]) == expected
        assert export_line([span], [plain_attributes(span.attributes)]) == expected
    expected = _general(spans)
    assert export_line(spans) == expected
    assert export_line(spans, [plain_attributes(span.attributes) for span in spans]) == expected
    assert orjson.dumps(export_request(spans)) == expected
