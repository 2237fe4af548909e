"""Helpers for your own tests: what chronicle records, captured in memory, ready to assert on and to replay.

As the OpenTelemetry SDK ships its ``InMemorySpanExporter`` for the tests of instrumented code, chronicle ships
these for the tests of code with boundaries.

Usage::

    import chronicle_otel as chronicle
    from chronicle_otel import testing

    with testing.capture() as cap:
        answer = run_agent("Sell $1,000 of MSFT")    # your code, its boundaries record as in production

    trace = cap.trace()                              # a chronicle_otel.Trace, as load_trace() would give it
    assert [b.name for b in trace.boundaries] == ["run_agent", "plan", "place_order"]
    assert trace.find("plan")[0].output == {"symbol": "MSFT", "quantity": 1000}

    with chronicle.replay(trace, stub={"kind:llm"}) as run:   # no model is called
        assert run.rerun() == answer

While the block runs, boundaries record into a private ``TracerProvider`` whose spans stay in memory: no span
reaches your OpenTelemetry pipeline or the local store, the global provider is never touched, and the configuration
that was active before the block is back after it (the block runs inside :func:`chronicle_otel.config.isolated`).
Payloads cut on their span (``CaptureOptions.max_attribute_length``) take the way they take in production, through
chronicle's exporter to a store in a temporary directory (deleted after the block), and the capture keeps them in
an :class:`InMemoryPayloadStore`: :meth:`Capture.trace` gives whole payloads, during the block or after it. Trace and
span ids come from an :class:`IncrementalIdGenerator` unless you pass ``id_generator=``: the same in every run.

Configuration: ``capture()`` takes ``service_name``, ``session``, ``capture`` and ``redaction`` as
:func:`~chronicle_otel.configure` does (each resolves from the argument, then its ``CHRONICLE_*`` variable, then the
default), not from the configuration in place when the block starts; recording is on whatever the environment says.
A ``configure()`` called inside the block (a module imported by the test) replaces the capture's configuration:
configure before the block, or pass the settings to ``capture()``. Boundaries bound to their own configuration
(``configure(local=True).boundary(...)``) record with it, not into the capture. A replay may run inside the block
(its spans are captured too); a capture cannot start inside a replay.

API:
    :func:`capture`, :class:`Capture` — spans and payloads recorded by boundaries, as :class:`~chronicle_otel.Trace`
    and :class:`~chronicle_otel.replaying.SpanRecord` objects.
    :class:`InMemoryPayloadStore` — a :class:`~chronicle_otel.store.PayloadStore` in a dict.
    :class:`IncrementalIdGenerator`, :class:`SeededIdGenerator` — deterministic trace and span ids, for
    ``capture(id_generator=...)`` or the SDK's ``TracerProvider(id_generator=...)``.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import Link, SpanKind, StatusCode

from . import semconv
from ._internal import trace_ids
from ._internal.digest import payload_digest
from .config import (
    CaptureOptions,
    ChronicleConfig,
    RedactionOptions,
    StoreOptions,
    configure,
    is_isolated,
    isolated,
)
from .errors import TraceLoadError, TraceNotFoundError
from .load import build_trace
from .model import SpanRecord, Trace

__all__ = [
    "Capture",
    "InMemoryPayloadStore",
    "IncrementalIdGenerator",
    "SeededIdGenerator",
    "capture",
]

_SOURCE = "chronicle_otel.testing.capture"
"""The :attr:`Trace.source` of a captured trace, and the source named by errors."""


# ------------------------------------------------------------------------------------------------ payloads


class InMemoryPayloadStore:
    """A payload store in a dict: whole payloads by their address ``sha256:<hex>``.

    It implements :class:`~chronicle_otel.store.PayloadStore` (and so :class:`~chronicle_otel.store.PayloadSource`):
    pass it where chronicle takes one, ``configure(payloads=store)`` to record into it or
    ``load_trace(source, store=store)`` to rehydrate from it. Thread-safe.

    Example::

        store = InMemoryPayloadStore()
        data = b'{"question":"Sell $1,000 of MSFT"}'
        store.put_payloads([(payload_digest(data), data)])
        assert store.get_payload(payload_digest(data)) == data

    Args:
        payloads: ``(digest, data)`` pairs to start with (checked as :meth:`put_payloads` checks them).
    """

    def __init__(self, payloads: Iterable[tuple[str, bytes]] = ()) -> None:
        self._lock = threading.Lock()
        self._payloads: dict[str, bytes] = {}
        self.put_payloads(payloads)

    def __repr__(self) -> str:
        return f"InMemoryPayloadStore({len(self)} payloads)"

    def __len__(self) -> int:
        with self._lock:
            return len(self._payloads)

    def __contains__(self, digest: object) -> bool:
        with self._lock:
            return digest in self._payloads

    def put_payloads(self, payloads: Iterable[tuple[str, bytes]]) -> None:
        """Store ``(digest, data)`` pairs; a digest already stored keeps its data. All or nothing.

        Raises:
            ValueError: a digest is not the sha256 of its data (nothing is stored then).
        """
        items = [(digest, bytes(data)) for digest, data in payloads]
        for digest, data in items:
            if digest != payload_digest(data):
                raise ValueError(f"payload digest mismatch: {digest[:80]} is not the sha256 of the data given")
        with self._lock:
            for digest, data in items:
                self._payloads.setdefault(digest, data)

    def get_payload(self, digest: str) -> bytes | None:
        """The payload stored under ``digest`` (checked when it was put), or None."""
        with self._lock:
            return self._payloads.get(digest)

    def get_payloads(self, digests: Iterable[str]) -> dict[str, bytes]:
        """The payloads of ``digests`` that the store holds, by digest."""
        with self._lock:
            return {d: self._payloads[d] for d in digests if d in self._payloads}

    def has_payload(self, digest: str) -> bool:
        """True when ``digest`` is stored."""
        return digest in self

    def digests(self) -> list[str]:
        """Every digest stored, sorted."""
        with self._lock:
            return sorted(self._payloads)

    def clear(self) -> None:
        """Forget every payload."""
        with self._lock:
            self._payloads.clear()


# ------------------------------------------------------------------------------------------------ ids


class IncrementalIdGenerator(IdGenerator):
    """Trace ids 1, 2, 3… and span ids 1, 2, 3…: readable in assertions, and the same in every run.

    Example::

        provider = TracerProvider(id_generator=IncrementalIdGenerator())
        chronicle.configure(tracer_provider=provider)    # the first trace is 00000000000000000000000000000001
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._trace = 0
        self._span = 0

    def generate_trace_id(self) -> int:
        """The next trace id: 1 for the first one."""
        with self._lock:
            self._trace += 1
            return self._trace

    def generate_span_id(self) -> int:
        """The next span id: 1 for the first one."""
        with self._lock:
            self._span += 1
            return self._span

    def reset(self) -> None:
        """Start again from 1."""
        with self._lock:
            self._trace = self._span = 0


class SeededIdGenerator(IdGenerator):
    """Ids that look random, from a generator seeded with ``seed``: the same sequence in every run with that seed.

    Unlike :class:`IncrementalIdGenerator`, the ids spread over the whole range, as production's do (anything that
    samples or shards on the trace id sees them as it sees real ones).

    Args:
        seed: any int or str; the same seed gives the same ids, in any process.
    """

    def __init__(self, seed: int | str = 0) -> None:
        self._seed = seed
        self._lock = threading.Lock()
        self._random = random.Random(seed)

    def _next(self, bits: int) -> int:
        with self._lock:
            while True:  # zero is the invalid id
                value = self._random.getrandbits(bits)
                if value:
                    return value

    def generate_trace_id(self) -> int:
        """The next trace id (128 bits, never zero)."""
        return self._next(128)

    def generate_span_id(self) -> int:
        """The next span id (64 bits, never zero)."""
        return self._next(64)

    def reset(self) -> None:
        """Start the sequence again."""
        with self._lock:
            self._random.seed(self._seed)


# ------------------------------------------------------------------------------------------------ capture


class Capture:
    """What :func:`capture` records: the finished spans, in memory, and the whole payloads cut on them.

    Read it during the block or after it; every method reads the spans ended so far.

    Attributes:
        config: the configuration boundaries record with during the block.
        tracer_provider: the block's private SDK provider (spans of your own on it are captured too).
    """

    def __init__(
        self,
        tracer_provider: TracerProvider,
        exporter: InMemorySpanExporter,
        config: ChronicleConfig,
        payloads: InMemoryPayloadStore,
    ) -> None:
        self.config = config
        self.tracer_provider = tracer_provider
        self._payloads = payloads
        self._exporter = exporter
        self._lock = threading.Lock()
        self._seen = 0  # spans of the exporter whose cut payloads are asked for
        self._wanted: set[str] = set()  # digests of cut payloads not copied yet
        self._open = True

    def __repr__(self) -> str:
        state = "recording" if self._open else "closed"
        return f"<Capture {state}: {len(self._exporter.get_finished_spans())} spans, {len(self._payloads)} payloads>"

    @property
    def payloads(self) -> InMemoryPayloadStore:
        """The whole payloads of the spans ended so far whose attributes were cut, by digest."""
        self.finished_spans()
        return self._payloads

    def finished_spans(self) -> tuple[ReadableSpan, ...]:
        """The SDK spans ended so far, boundary or not, in the order they ended."""
        with self._lock:
            spans = self._exporter.get_finished_spans()
            for span in spans[self._seen :]:
                attributes = span.attributes or {}
                for keys in semconv.PAYLOAD_KEYS:
                    digest = attributes.get(keys.hash)
                    if attributes.get(keys.truncated) is True and isinstance(digest, str):
                        self._wanted.add(digest)
            self._seen = len(spans)
            self._copy_payloads()
            return spans

    def _copy_payloads(self) -> None:
        """Copy the cut payloads the spans name from the block's store into :attr:`payloads` (while it is open)."""
        store = self.config.store
        if not self._open or store is None:
            return
        self._wanted = {digest for digest in self._wanted if digest not in self._payloads}
        if self._wanted:
            self.config.force_flush()  # the store's exporter has every payload handed over so far
            found = store.get_payloads(sorted(self._wanted))
            self._payloads.put_payloads(found.items())
            self._wanted.difference_update(found)

    def spans(self) -> list[SpanRecord]:
        """The spans ended so far, as loading a trace reads them from a store.

        Each is a :class:`~chronicle_otel.replaying.SpanRecord`: ids in hex, sequences as lists, OTLP span kinds.
        """
        return [_record(span) for span in self.finished_spans()]

    def trace_ids(self) -> list[str]:
        """The ids of the traces that hold a boundary, the first started first."""
        return _boundary_traces(self.spans())

    def trace(self, trace_id: str | None = None) -> Trace:
        """One captured trace, as :func:`~chronicle_otel.load_trace` would give it: ready for ``replay()``.

        Args:
            trace_id: 32 hex digits or a unique prefix of at least 4; None when the block recorded one trace.

        Returns:
            The trace, its payloads whole.

        Raises:
            TraceLoadError: no boundary was recorded, or several traces were and ``trace_id`` is None.
            TraceNotFoundError: no captured trace with a boundary has that id.
            TypeError: ``trace_id`` is not a string.
        """
        records = self.spans()
        ids = _boundary_traces(records)
        if trace_id is None:
            if not ids:
                raise TraceLoadError("no boundary was recorded", source=_SOURCE)
            if len(ids) > 1:
                listing = ", ".join(ids[:10]) + (", …" if len(ids) > 10 else "")
                raise TraceLoadError(f"{len(ids)} traces were recorded ({listing}): pass trace_id", source=_SOURCE)
            chosen = ids[0]
        else:
            chosen = _pick(trace_id, ids)
        spans = [s for s in records if s.trace_id == chosen]
        return build_trace(chosen, spans, fetch=self._payloads.get_payload, source=_SOURCE)

    def traces(self) -> list[Trace]:
        """Every captured trace that holds a boundary, the first started first."""
        return [self.trace(trace_id) for trace_id in self.trace_ids()]

    def clear(self) -> None:
        """Forget the spans and payloads captured so far (the block goes on recording)."""
        with self._lock:
            self._exporter.clear()
            self._seen = 0
            self._wanted.clear()
            self._payloads.clear()

    def _close(self) -> None:
        """The block ends: copy the last payloads while the block's store is still there."""
        self.finished_spans()
        with self._lock:
            self._open = False


@contextlib.contextmanager
def capture(
    *,
    id_generator: IdGenerator | None = None,
    service_name: str | None = None,
    session: Mapping[str, Any] | None = None,
    capture: CaptureOptions | None = None,
    redaction: RedactionOptions | Literal[False] | None = None,
) -> Iterator[Capture]:
    """Capture what boundaries record while the block runs, in memory (see the module documentation).

    Example::

        with capture() as cap:
            run_agent("Sell $1,000 of MSFT")
        trace = cap.trace()

    Args:
        id_generator: where trace and span ids come from. Default: a new :class:`IncrementalIdGenerator`.
        service_name: ``service.name`` of the captured spans' resource.
        session: session variables stamped on every boundary span, as ``configure(session=...)``.
        capture: :class:`~chronicle_otel.CaptureOptions`, as ``configure(capture=...)``.
        redaction: :class:`~chronicle_otel.RedactionOptions` or False, as ``configure(redaction=...)``.

    Yields:
        The :class:`Capture`, readable during the block and after it.

    Raises:
        RuntimeError: a replay (or another capture, or an ``isolated()`` block) is running.
        ConfigError: a setting is invalid.
    """
    if is_isolated():
        raise RuntimeError(
            "capture() cannot start inside a replay, an isolated() block or another capture: it would replace their "
            "configuration; start the capture first and replay inside it"
        )
    provider = TracerProvider(
        resource=Resource.create({SERVICE_NAME: service_name} if service_name else {}),
        id_generator=id_generator if id_generator is not None else IncrementalIdGenerator(),
        sampler=ALWAYS_ON,
        shutdown_on_exit=False,
    )
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))  # first: it has a span before the store does
    try:
        with isolated():
            config = configure(
                tracer_provider=provider,
                service_name=service_name,
                session=session,
                capture=capture,
                redaction=redaction,
                store=StoreOptions(processor="simple", durable=False),  # the isolation's temporary directory
                enabled=True,
                otlp=False,
                flush_on_signals=False,
            )
            captured = Capture(provider, exporter, config, InMemoryPayloadStore())
            try:
                yield captured
            finally:
                captured._close()
    finally:
        provider.shutdown()


# ------------------------------------------------------------------------------------------------ span records

_KINDS = {SpanKind.INTERNAL: 1, SpanKind.SERVER: 2, SpanKind.CLIENT: 3, SpanKind.PRODUCER: 4, SpanKind.CONSUMER: 5}
_STATUS = {StatusCode.UNSET: "UNSET", StatusCode.OK: "OK", StatusCode.ERROR: "ERROR"}
_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200


def _value(value: Any) -> Any:
    """An attribute value as loading reads it back from OTLP/JSON: the SDK's tuples are lists."""
    if isinstance(value, (tuple, list)):
        return [_value(v) for v in value]
    return value


def _attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    return {key: _value(value) for key, value in (attributes or {}).items()}


def _link(link: Link) -> dict[str, Any]:
    ctx = link.context
    return {
        "trace_id": f"{ctx.trace_id:032x}",
        "span_id": f"{ctx.span_id:016x}",
        "attributes": _attributes(link.attributes),
        "trace_state": ctx.trace_state.to_header() if ctx.trace_state else "",
        "flags": _HAS_IS_REMOTE | (_IS_REMOTE if ctx.is_remote else 0),
    }


def _record(span: ReadableSpan) -> SpanRecord:
    """The :class:`SpanRecord` loading would make of ``span`` once exported to a store as OTLP/JSON."""
    ctx = span.get_span_context()
    assert ctx is not None
    parent = span.parent
    scope = span.instrumentation_scope
    return SpanRecord(
        trace_id=f"{ctx.trace_id:032x}",
        span_id=f"{ctx.span_id:016x}",
        parent_span_id=f"{parent.span_id:016x}" if parent is not None else None,
        name=span.name,
        kind=_KINDS.get(span.kind, 0),
        start_ns=span.start_time or 0,
        end_ns=span.end_time or 0,
        attributes=_attributes(span.attributes),
        status=_STATUS.get(span.status.status_code, "UNSET"),
        status_message=span.status.description or "",
        events=tuple(
            {"name": e.name, "time_ns": e.timestamp, "attributes": _attributes(e.attributes)} for e in span.events
        ),
        links=tuple(_link(link) for link in span.links),
        resource=_attributes(span.resource.attributes if span.resource is not None else None),
        scope=scope.name if scope is not None else "",
        trace_state=ctx.trace_state.to_header() if ctx.trace_state else "",
        flags=_HAS_IS_REMOTE | (_IS_REMOTE if parent is not None and parent.is_remote else 0),
        origin=_SOURCE,
    )


def _boundary_traces(records: Sequence[SpanRecord]) -> list[str]:
    first: dict[str, int] = {}
    for span in records:
        if isinstance(span.attributes.get(semconv.BOUNDARY_NAME), str):
            start = first.get(span.trace_id)
            first[span.trace_id] = span.start_ns if start is None else min(start, span.start_ns)
    return sorted(first, key=lambda tid: (first[tid], tid))


def _pick(trace_id: str, ids: list[str]) -> str:
    if not isinstance(trace_id, str):
        raise TypeError(f"trace_id is a str (32 hex digits or a unique prefix) or None, not {type(trace_id).__name__}")
    if trace_ids.is_full(trace_id):
        wanted = trace_id.strip().lower()
        if wanted in ids:
            return wanted
    elif trace_ids.is_prefix(trace_id):
        return trace_ids.pick(trace_id, ids, source=_SOURCE)
    raise TraceNotFoundError(trace_id, source=_SOURCE, candidates=ids)
