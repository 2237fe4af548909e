"""Load a recorded run from where its spans are: the local store, a trace file, or a backend.

Usage::

    from chronicle_otel import load_trace

    trace = load_trace(".chronicle", trace_id="3f8a6c2e…")        # the embedded store, by id
    trace = load_trace(".chronicle", trace_id="latest-failed")    # the most recent trace whose root failed
    trace = load_trace("incident.jsonl")                           # an OTLP/JSON file (one trace in it)
    trace = load_trace("collector-out.json.gz", trace_id="3f8a…")  # gzip, several traces: select by id

    trace = load_trace("phoenix+http://127.0.0.1:6006", trace_id="3f8a…")   # pulled from a backend by id

Backends: ``phoenix+http(s)://host:port[?project=name]``, ``jaeger+http://host:16686`` (API v1),
``jaeger-v3+http://…`` (API v3), ``tempo+http://host:3200`` (API v2, then v1), ``zipkin+http://host:9411``.
More register with :func:`register_source` or the ``chronicle_otel.trace_sources`` entry point group.

Files are recognised by content (see ``SUPPORTED_FORMATS``): OTLP/JSON, the Collector ``file`` exporter's
protobuf and zstd framings, Jaeger, Tempo, Zipkin and Phoenix JSON, plain, gzip or zstd.
OTLP/JSON files may hold one ``ExportTraceServiceRequest`` per line (the Collector ``file`` exporter) or one
JSON document (an object or a list of them), plain or gzip. Ids may be hex (any case) or base64; integer
attributes written as strings stay exact; the older ``instrumentationLibrarySpans`` shape and snake_case field
names are read too. Spans split over lines, out of order or repeated are merged.

A payload attribute cut on the span is rehydrated from the payload store by its hash (``store=``; by default
the store being read, else the local store if there is one). When neither has the whole payload, the boundary
says so (``Payload.status == "missing"``) and replaying it fails with a clear error.

API:
    :func:`load_trace`, :class:`TraceSource`, :func:`register_source`, :data:`SUPPORTED_FORMATS`
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .. import semconv
from ..errors import ChronicleError, TraceLoadError, TraceNotFoundError
from ..replay import SpanRecord, Trace, build_trace
from ..store import LocalStore, default_store_path, payload_digest
from ._files import SUPPORTED_FORMATS, read_path
from ._http import SOURCES, HttpTraceSource, JaegerSource, PhoenixSource, TempoSource, ZipkinSource
from ._limits import LoadLimits
from ._otlp import merge, spans_of_request

__all__ = [
    "SUPPORTED_FORMATS",
    "HttpTraceSource",
    "JaegerSource",
    "LoadLimits",
    "PhoenixSource",
    "TempoSource",
    "TraceSource",
    "ZipkinSource",
    "load_trace",
    "register_source",
    "source_for",
]


@runtime_checkable
class TraceSource(Protocol):
    """Where spans of recorded traces can be fetched from (a backend, a bucket…)."""

    def spans(self, trace_id: str | None, progress: Callable[[int], None] | None = None) -> Iterable[SpanRecord]:
        """The spans of ``trace_id`` (duplicates and pieces are merged by the loader)."""
        ...


_factories: dict[str, Callable[[str], TraceSource]] = {name: cls for name, cls in SOURCES.items()}
_ENTRY_POINT_GROUP = "chronicle_otel.trace_sources"


def register_source(scheme: str, factory: Callable[[str], TraceSource]) -> None:
    """Make ``load_trace("<scheme>+http://…")`` (or ``"<scheme>://…"``) use ``factory(url)``."""
    _factories[scheme] = factory


def source_for(url: str, *, limits: LoadLimits | None = None) -> TraceSource:
    """The trace source for a URL such as ``phoenix+http://127.0.0.1:6006``.

    ``limits`` goes to factories that take a ``limits`` keyword (the built-in sources do); by default they read
    :meth:`LoadLimits.from_env`.

    Raises:
        TraceLoadError: no source is registered for the URL's scheme.
    """
    scheme = url.split("://", 1)[0]
    name = scheme.split("+", 1)[0]
    factory = _factories.get(name)
    if factory is None:
        for ep in metadata.entry_points(group=_ENTRY_POINT_GROUP):
            if ep.name == name:
                factory = ep.load()
                _factories[name] = factory
                break
    if factory is None:
        from ._http import _strip_userinfo

        known = ", ".join(f"{n}+http://" for n in sorted(_factories))
        raise TraceLoadError(f"no trace source for {name!r} URLs; known: {known}", source=_strip_userinfo(url))
    if limits is not None and _accepts_limits(factory):
        return factory(url, limits=limits)  # type: ignore[call-arg]
    return factory(url)


def _accepts_limits(factory: Callable[..., object]) -> bool:
    if isinstance(factory, type) and issubclass(factory, HttpTraceSource):
        return True
    import inspect

    try:
        return "limits" in inspect.signature(factory).parameters
    except (TypeError, ValueError):  # no signature to inspect
        return False


_STORE_MANIFEST = "chronicle-store.json"


def load_trace(
    source: str | os.PathLike[str] | LocalStore | TraceSource,
    trace_id: str | None = None,
    *,
    store: LocalStore | str | os.PathLike[str] | None = None,
    allow: Iterable[str] = (),
    progress: Callable[[int], None] | None = None,
    limits: LoadLimits | None = None,
) -> Trace:
    """Load one recorded run.

    The source is untrusted input: whatever it holds, loading raises only the package's own errors, and
    ``limits`` bound what it may cost (compressed files inflate in bounded steps).

    Args:
        source: a :class:`~chronicle_otel.store.LocalStore`, a store directory, a trace file, a backend URL
            (``phoenix+http://…``) or a :class:`TraceSource`.
        trace_id: the trace to load (32 hex digits, any case). For a store, also ``"latest"`` or
            ``"latest-failed"``. May be omitted when the source holds exactly one trace.
        store: the payload store to rehydrate truncated payloads from.
        allow: module prefixes whose classes payload decoding may rebuild (registered types always are).
        progress: called with the number of spans fetched so far (backends that page).
        limits: bounds on size, inflation and time; by default :meth:`LoadLimits.from_env`.

    Returns:
        The :class:`~chronicle_otel.replay.Trace`.

    Raises:
        TraceNotFoundError: the trace id is not in the source.
        LoadLimitError: the source exceeds one of ``limits``.
        TraceLoadError: the source cannot be read, is not trace data, or holds several traces and no id was given.
    """
    payload_store = _payload_store(store)
    if isinstance(source, str) and "://" in source:
        return load_trace(
            source_for(source, limits=limits), trace_id, store=store, allow=allow, progress=progress, limits=limits
        )
    if isinstance(source, TraceSource) and not isinstance(source, LocalStore):
        spans = source.spans(trace_id, progress) if progress is not None else source.spans(trace_id)
        return _assemble(spans, trace_id, repr(source), payload_store or _default_store(), allow)
    if isinstance(source, LocalStore) or (Path(source).is_dir() and (Path(source) / _STORE_MANIFEST).exists()):
        local = source if isinstance(source, LocalStore) else LocalStore(source)
        return _from_store(local, trace_id, payload_store or local, tuple(allow))
    path = Path(source)
    if path.is_dir():
        raise TraceLoadError("a directory that is not a chronicle store", source=path, expected=_STORE_MANIFEST)
    if not path.exists():
        raise TraceLoadError("no such file or store", source=path)
    return _assemble(read_path(path, limits=limits), trace_id, path, payload_store or _default_store(), allow)


def _assemble(
    spans: Iterable[SpanRecord], trace_id: str | None, source: object, store: LocalStore | None, allow: Iterable[str]
) -> Trace:
    traces = merge(spans)
    chosen = _select(traces, trace_id, source)
    return build_trace(
        chosen, list(traces[chosen].values()), fetch=_fetcher(store, chosen), allow=allow, source=str(source)
    )


def _fetcher(store: LocalStore | None, trace_id: str) -> Callable[[str], bytes | None] | None:
    """Whole payloads by hash: the store's payload table, else the whole attributes of the store's own copy
    of the trace (a backend may cut attributes that were whole when recorded, e.g. Zipkin at 128 characters)."""
    if store is None:
        return None
    recorded: dict[str, bytes] | None = None

    def fetch(digest: str) -> bytes | None:
        nonlocal recorded
        data = store.get_payload(digest)
        if data is not None:
            return data
        if recorded is None:
            recorded = _whole_attributes(store, trace_id)
        return recorded.get(digest)

    return fetch


def _whole_attributes(store: LocalStore, trace_id: str) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    try:
        spans = [span for request in store.read_requests(trace_id) for span in spans_of_request(request)]
    except ChronicleError:  # an unreadable store only means nothing to rehydrate from
        return found
    for span in spans:
        attrs = span.attributes
        for key, hash_key in (
            (semconv.INPUT, semconv.INPUT_HASH),
            (semconv.OUTPUT, semconv.OUTPUT_HASH),
            (semconv.ERROR, semconv.ERROR_HASH),
        ):
            text, digest = attrs.get(key), attrs.get(hash_key)
            if isinstance(text, str) and isinstance(digest, str):
                data = text.encode("utf-8", "surrogatepass")
                if payload_digest(data) == digest:
                    found[digest] = data
    return found


def _default_store() -> LocalStore | None:
    default = default_store_path()
    return LocalStore(default) if (default / _STORE_MANIFEST).exists() else None


def _payload_store(store: LocalStore | str | os.PathLike[str] | None) -> LocalStore | None:
    if store is None or isinstance(store, LocalStore):
        return store
    return LocalStore(store)


def _select(traces: dict[str, Any], trace_id: str | None, source: object) -> str:
    if not traces:
        raise TraceLoadError("no spans", source=source, expected="OTLP/JSON trace data")
    if trace_id is not None:
        wanted = trace_id.strip().lower()
        if wanted not in traces:
            raise TraceNotFoundError(trace_id, source=source, candidates=sorted(traces))
        return wanted
    if len(traces) > 1:
        listing = ", ".join(f"{tid} ({_root_name(spans)})" for tid, spans in list(traces.items())[:10])
        raise TraceLoadError(f"{len(traces)} traces and no trace_id given; pick one of: {listing}", source=source)
    return next(iter(traces))


def _root_name(spans: dict[str, Any]) -> str:
    roots = [s for s in spans.values() if s.parent_span_id is None]
    return roots[0].name if roots else "no root"


def _from_store(local: LocalStore, trace_id: str | None, payloads: LocalStore, allow: tuple[str, ...]) -> Trace:
    if trace_id in (None, "latest", "latest-failed"):
        summaries = local.list_traces(limit=10, failed=True if trace_id == "latest-failed" else None)
        if not summaries:
            what = "failed traces" if trace_id == "latest-failed" else "traces"
            raise TraceLoadError(f"the store has no {what}", source=local.path)
        if trace_id is None and len(local.list_traces(limit=2)) > 1:
            listing = ", ".join(f"{t.trace_id} ({t.root_boundary or t.root_name})" for t in summaries)
            raise TraceLoadError(
                f"several traces and no trace_id given (or 'latest', 'latest-failed'); most recent: {listing}",
                source=local.path,
            )
        trace_id = summaries[0].trace_id
        if not isinstance(trace_id, str):
            raise TraceLoadError("the store's index lists a trace id that is not text", source=local.path)
    wanted = trace_id.strip().lower()
    spans: list[SpanRecord] = []
    for number, request in enumerate(local.read_requests(wanted), 1):
        spans.extend(spans_of_request(request, source=f"{local.path} (trace {wanted}, line {number})"))
    if not spans:
        recent = [t.trace_id for t in local.list_traces(limit=10)]
        raise TraceNotFoundError(trace_id, source=local.path, candidates=recent)
    merged = merge(spans).get(wanted)
    if not merged:
        raise TraceLoadError(f"the store's lines for trace {wanted} hold none of its spans", source=local.path)
    return build_trace(wanted, list(merged.values()), fetch=payloads.get_payload, allow=allow, source=str(local.path))
