"""The one place that touches OpenTelemetry SDK internals: private fields of spans, attribute maps and samplers.

Each function checks the exact SDK types and the shape of the private fields it uses, and otherwise takes the public
API (or leaves the span as it is), so an SDK release that changes its internals costs speed, not correctness. Its
tests (``tests/unit/_internal/test_compat.py``, ``export/test_batch_shed.py``, ``record/test_call_path.py``) and
recording's run against the newest SDK release in ``make test-newest-sdk``, which CI runs.

* :func:`set_clean_attributes` and :func:`attribute_blind`: a finished call's attributes set on an SDK span in one
  step. ``Span.set_attributes`` cleans every value again (type checks, sequence copies, one lock round per key):
  for the dozen attributes chronicle sets at the end of every call, that is about a tenth of the call's cost.
  chronicle's values are already clean (str, bool, int, float, or tuples of str), so when the span is the SDK's
  own, with no value-length limit and room for them all, they are put into its attribute mapping at once, under
  the span's and the mapping's locks, exactly as the SDK would store them. Anything else (another SDK, a limit
  that would cut or drop, a span already ended, internals of another shape) goes through ``set_attributes``.
* :func:`shed_empty_containers`: an ended span waiting for export holds fewer objects the garbage collector walks.
* :func:`events_and_links`: an SDK span's event and link lists, without the copies its properties make.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import ReadableSpan, sampling
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.util import BoundedList

__all__ = ["attribute_blind", "events_and_links", "set_clean_attributes", "shed_empty_containers"]

_SCALARS = frozenset((str, bool, int, float))


def _all_clean(attrs: Mapping[str, Any]) -> bool:
    scalars = _SCALARS
    for key, value in attrs.items():
        if type(key) is not str or not key:
            return False
        t = type(value)
        if t not in scalars and not (t is tuple and all(type(v) is str for v in value)):
            return False
    return True


def set_clean_attributes(span: Any, attrs: Mapping[str, Any]) -> None:
    """``span.set_attributes(attrs)``, in one step when it is safe (see the module docstring)."""
    if isinstance(span, SdkSpan):
        bounded = getattr(span, "_attributes", None)
        lock = getattr(span, "_lock", None)
        if type(bounded) is BoundedAttributes and lock is not None:
            store = getattr(bounded, "_dict", None)
            inner = getattr(bounded, "_lock", None)
            if (
                type(store) is dict
                and inner is not None
                and bounded.max_value_len is None
                and not getattr(bounded, "_immutable", True)
            ):
                with lock, inner:
                    room = bounded.maxlen is None or len(store) + len(attrs) <= bounded.maxlen
                    if getattr(span, "_end_time", 0) is None and room and _all_clean(attrs):
                        store.update(attrs)
                        return
    span.set_attributes(attrs)


_BLIND_SAMPLERS = frozenset(
    cls
    for cls in (
        getattr(sampling, "StaticSampler", None),
        getattr(sampling, "TraceIdRatioBased", None),
        getattr(sampling, "ParentBasedTraceIdRatio", None),
        getattr(sampling, "ParentBased", None),
        getattr(sampling, "_ParentBasedAlwaysOn", None),
        getattr(sampling, "_ParentBasedAlwaysOff", None),
    )
    if cls is not None
)
_PARENT_BASED_DELEGATES = (
    "_root",
    "_remote_parent_sampled",
    "_remote_parent_not_sampled",
    "_local_parent_sampled",
    "_local_parent_not_sampled",
)


def attribute_blind(tracer: Any) -> bool:
    """True when ``tracer`` is the SDK's and its sampler is one of the SDK's own, which never read a span's starting
    attributes: the attributes can then be set right after the start, in one step, instead of being cleaned one by
    one by the span's constructor. A sampler of your own (or a subclass) sees them at the start as usual."""

    def blind(sampler: Any, depth: int) -> bool:
        if type(sampler) not in _BLIND_SAMPLERS or depth > 2:
            return False
        delegates = [getattr(sampler, name, None) for name in _PARENT_BASED_DELEGATES]
        return all(d is None for d in delegates) or all(d is not None and blind(d, depth + 1) for d in delegates)

    return isinstance(tracer, SdkTracer) and blind(getattr(tracer, "sampler", None), 0)


def shed_empty_containers(span: ReadableSpan) -> None:
    """Let an ended SDK span wait for export holding fewer objects that the cyclic garbage collector walks.

    The SDK hands processors its events and links as ``BoundedList`` (a list object, a deque and a lock each) and its
    attributes as ``BoundedAttributes`` (a mapping and a lock), empty or not. When thousands of spans wait in a
    queue (a loop that outpaces the export thread), every full collection walks all of them: about 12 µs per call
    in the benchmark's saturated loop, 4 µs once these are shed. Empty lists become ``()`` and attributes of which
    nothing was dropped become a read-only view of the dict they wrap, so every public property of the span
    (``events``, ``links``, ``attributes``, the ``dropped_*`` counts, ``to_json()``) reads as before, here and in
    every other processor the span was handed to, and a write through the private field is refused as before.
    """
    events, links, attrs = span._events, span._links, span._attributes
    if type(events) is BoundedList and not events.dropped and not len(events):
        span._events = ()
    if type(links) is BoundedList and not links.dropped and not len(links):
        span._links = ()
    if type(attrs) is BoundedAttributes and not attrs.dropped:
        inner = getattr(attrs, "_dict", None)
        if type(inner) is dict:
            span._attributes = MappingProxyType(inner)


def events_and_links(span: ReadableSpan) -> tuple[Sequence[Any], Sequence[Any]]:
    """An SDK span's own event and link lists: the ``events`` and ``links`` properties copy them under a lock.

    ``ReadableSpan`` sets both in its constructor. Read only: the caller must not change them.
    """
    return span._events, span._links
