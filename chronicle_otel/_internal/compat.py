"""The one place that touches OpenTelemetry SDK internals: private fields of spans, attribute maps and samplers.

Each function checks the exact SDK types and the shape of the private fields it uses, and otherwise takes the public
API (or leaves the span as it is), so an SDK release that changes its internals costs speed, not correctness. Its
tests (``tests/unit/_internal/test_compat.py``, ``export/test_batch_shed.py``, ``export/test_batch_pack.py``,
``record/test_call_path.py``) and recording's run against the newest SDK release in ``make test-newest-sdk``, which
CI runs.

* :func:`set_clean_attributes` and :func:`attribute_blind`: a finished call's attributes set on an SDK span in one
  step. ``Span.set_attributes`` cleans every value again (type checks, sequence copies, one lock round per key):
  for the dozen attributes chronicle sets at the end of every call, that is about a tenth of the call's cost.
  chronicle's values are already clean (str, bool, int, float, or tuples of str), so when the span is the SDK's
  own, with no value-length limit and room for them all, they are put into its attribute mapping at once, under
  the span's and the mapping's locks, exactly as the SDK would store them. Anything else (another SDK, a limit
  that would cut or drop, a span already ended, internals of another shape) goes through ``set_attributes``.
* :func:`shed_empty_containers`: an ended span waiting for export holds fewer objects the garbage collector walks.
* :func:`events_and_links`: an SDK span's event and link lists, without the copies its properties make.
* :class:`SpanPacker`: an ended span held for a collector that does not take it, as a tuple of plain values the
  garbage collector no longer walks, and back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, sampling
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode

__all__ = ["SpanPacker", "attribute_blind", "events_and_links", "set_clean_attributes", "shed_empty_containers"]

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


_KINDS: Final = tuple(SpanKind)
_CODES: Final = tuple(StatusCode)


class SpanPacker:
    """Ended SDK spans as tuples of plain values (str, int, float, bool, None and tuples of them), which the cyclic
    garbage collector stops walking at its first pass over them, and back.

    A span queued for export is walked by every full collection, on whichever thread triggers it: four tracked
    objects each (the span, its context, its trace flags, its attribute view). While a collector is down, the OTLP
    queue holds up to 16,384 of them, and each full collection took 40 to 50 ms instead of 10 to 20 ms: the
    slowest call of the application, paid by whichever call triggered it. Packed, they cost a full collection
    nothing.

    Only what the OTLP encoding reads is kept, and a span with anything else (events, links, a trace state, a
    dropped attribute, a status description the SDK would warn about, an SDK of another shape) is not packed:
    :meth:`pack` returns None and the span waits as it is. The resource, scope and instrumentation info are shared
    by many spans: they are kept once, in this packer, by index (up to :attr:`MAX_SHARED` of them).
    """

    MAX_SHARED: Final = 64

    def __init__(self) -> None:
        self._shared: list[tuple[Any, Any, Any]] = []  # (resource, scope, instrumentation info)
        self._last: tuple[Any, Any, Any, int] | None = None

    def _ref(self, resource: Any, scope: Any, info: Any) -> int | None:
        last = self._last
        if last is not None and last[0] is resource and last[1] is scope and last[2] is info:
            return last[3]
        found = [n for n, (r, s, i) in enumerate(self._shared) if r is resource and s is scope and i is info]
        if found:
            index = found[0]
        elif len(self._shared) >= self.MAX_SHARED:
            return None
        else:
            self._shared.append((resource, scope, info))  # held for the packer's life
            index = len(self._shared) - 1
        self._last = (resource, scope, info, index)
        return index

    def pack(self, span: ReadableSpan) -> tuple[Any, ...] | None:
        """``span`` as a tuple of plain values, or None when it is not one this packer can rebuild as it was."""
        if type(span) is not ReadableSpan or not _PACKABLE:
            return None
        context, parent, attrs, status = span._context, span._parent, span._attributes, span._status
        if type(context) is not SpanContext or span._events != () or span._links != () or context[4]:
            return None  # events, links, a trace state: kept as they are
        if type(attrs) is not MappingProxyType:  # None, or attributes of which some were dropped
            if attrs is not None:
                return None
            attrs = _NO_ATTRIBUTES
        if type(status) is not Status:
            return None
        code, description = status._status_code, status._description
        if description is not None and code is not StatusCode.ERROR:
            return None
        if parent is None:
            parent_ids: tuple[Any, ...] = (None, 0, False, 0)
        elif type(parent) is SpanContext and not parent[4]:
            parent_ids = (parent[0], parent[1], parent[2], int(parent[3]))  # TraceFlags is walked: a plain int
        else:
            return None
        shared = self._ref(span._resource, span._instrumentation_scope, span._instrumentation_info)
        if shared is None:
            return None
        # One flat tuple (two inner ones, the attribute names and values: a tuple holding a dict would never be
        # left out of collections): each nested tuple is one more pass of the collector before it stops walking it.
        return (
            span._name,
            context[0],
            context[1],
            context[2],
            int(context[3]),
            *parent_ids,
            shared,
            tuple(attrs),
            tuple(attrs.values()),
            span._kind.value,
            code.value,
            description,
            span._start_time,
            span._end_time,
        )

    def unpack(self, packed: tuple[Any, ...]) -> ReadableSpan:
        """The span :meth:`pack` made ``packed`` from, as a new ``ReadableSpan`` of the same values."""
        (
            name,
            trace_id,
            span_id,
            remote,
            flags,
            parent_trace_id,
            parent_span_id,
            parent_remote,
            parent_flags,
            shared,
            names,
            values,
            kind,
            code,
            description,
            start,
            end,
        ) = packed
        resource, scope, info = self._shared[shared]
        parent = None
        if parent_trace_id is not None:
            parent = SpanContext(parent_trace_id, parent_span_id, parent_remote, TraceFlags(parent_flags))
        return ReadableSpan(
            name=name,
            context=SpanContext(trace_id, span_id, remote, TraceFlags(flags)),
            parent=parent,
            resource=resource,
            attributes=MappingProxyType(dict(zip(names, values, strict=True))),
            events=(),
            links=(),
            kind=SpanKind(kind),
            instrumentation_info=info,
            status=Status(StatusCode(code), description),
            start_time=start,
            end_time=end,
            instrumentation_scope=scope,
        )


_NO_ATTRIBUTES: Final[Mapping[str, Any]] = MappingProxyType({})


def _packable() -> bool:
    """Whether this SDK's spans have the shape :class:`SpanPacker` reads (checked once, at import): the fields of
    ``ReadableSpan`` and ``Status``, and ``SpanContext`` as the tuple (trace id, span id, remote, flags, state…)."""
    try:
        fields = set(vars(ReadableSpan("_", resource=Resource.get_empty())))
        status = Status(StatusCode.ERROR, "x")
        context = SpanContext(1, 2, True, TraceFlags(1))
        return (
            fields == _READABLE_FIELDS
            and (status._status_code, status._description) == (StatusCode.ERROR, "x")
            and tuple(context[:4]) == (1, 2, True, 1)
            and not context[4]
        )
    except Exception:  # another shape altogether
        return False


_READABLE_FIELDS: Final = frozenset(
    (
        "_name",
        "_context",
        "_kind",
        "_instrumentation_info",
        "_instrumentation_scope",
        "_parent",
        "_start_time",
        "_end_time",
        "_attributes",
        "_events",
        "_links",
        "_resource",
        "_status",
    )
)
_PACKABLE: Final = _packable()
