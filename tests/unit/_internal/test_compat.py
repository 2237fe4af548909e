"""Attributes set in one step on an SDK span are exactly those ``set_attributes`` would store."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import SpanLimits, TracerProvider

from chronicle_otel._internal.compat import set_clean_attributes

ATTRS: dict[str, Any] = {
    "chronicle.output": "x" * 1000,
    "chronicle.output.hash": "sha256:" + "a" * 64,
    "gen_ai.response.finish_reasons": ("stop", "length"),
    "gen_ai.usage.input_tokens": 212,
    "flag": True,
    "ratio": 0.5,
}


def _pair(limits: SpanLimits | None = None) -> tuple[Any, Any]:
    tracer = TracerProvider(span_limits=limits).get_tracer("t") if limits else TracerProvider().get_tracer("t")
    return tracer.start_span("a", attributes={"k": "v"}), tracer.start_span("b", attributes={"k": "v"})


@pytest.mark.parametrize(
    "attrs",
    [ATTRS, {**ATTRS, "list": ["a", "b"]}, {**ATTRS, "bad": object()}, {**ATTRS, "mixed": ("a", 1)}, {"": "empty"}],
)
def test_the_same_attributes_as_set_attributes(attrs: dict[str, Any]) -> None:
    fast, slow = _pair()
    set_clean_attributes(fast, attrs)
    slow.set_attributes(attrs)
    assert dict(fast.attributes) == dict(slow.attributes)
    assert fast.dropped_attributes == slow.dropped_attributes


@pytest.mark.parametrize(
    "limits",
    [SpanLimits(max_span_attribute_length=10), SpanLimits(max_span_attributes=3), SpanLimits(max_attributes=4)],
)
def test_limits_apply_as_the_sdk_applies_them(limits: SpanLimits) -> None:
    fast, slow = _pair(limits)
    set_clean_attributes(fast, ATTRS)
    slow.set_attributes(ATTRS)
    assert dict(fast.attributes) == dict(slow.attributes)
    assert fast.dropped_attributes == slow.dropped_attributes


def test_an_ended_span_is_left_alone() -> None:
    fast, slow = _pair()
    fast.end()
    slow.end()
    set_clean_attributes(fast, ATTRS)
    slow.set_attributes(ATTRS)
    assert dict(fast.attributes) == dict(slow.attributes) == {"k": "v"}


def test_a_span_of_another_kind_gets_set_attributes() -> None:
    class Other:
        def __init__(self) -> None:
            self.seen: dict[str, Any] = {}

        def set_attributes(self, attrs: dict[str, Any]) -> None:
            self.seen.update(attrs)

    other = Other()
    set_clean_attributes(other, ATTRS)
    assert other.seen == ATTRS
