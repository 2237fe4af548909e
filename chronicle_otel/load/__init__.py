"""Load a recorded run from where its spans are: the local store or an OTLP/JSON file.

Usage::

    from chronicle_otel import load_trace

    trace = load_trace(".chronicle", trace_id="3f8a6c2e…")        # the embedded store, by id
    trace = load_trace(".chronicle", trace_id="latest-failed")    # the most recent trace whose root failed
    trace = load_trace("incident.jsonl")                           # an OTLP/JSON file (one trace in it)
    trace = load_trace("collector-out.json.gz", trace_id="3f8a…")  # gzip, several traces: select by id

OTLP/JSON files may hold one ``ExportTraceServiceRequest`` per line (the Collector ``file`` exporter) or one
JSON document (an object or a list of them), plain or gzip. Ids may be hex (any case) or base64; integer
attributes written as strings stay exact; the older ``instrumentationLibrarySpans`` shape and snake_case field
names are read too. Spans split over lines, out of order or repeated are merged.

A payload attribute cut on the span is rehydrated from the payload store by its hash (``store=``; by default
the store being read, else the local store if there is one). When neither has the whole payload, the boundary
says so (``Payload.status == "missing"``) and replaying it fails with a clear error.

API:
    :func:`load_trace`
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import TraceLoadError, TraceNotFoundError
from ..replay import SpanRecord, Trace, build_trace
from ..store import LocalStore, default_store_path
from ._otlp import merge, read_file, spans_of_request

__all__ = ["load_trace"]

_STORE_MANIFEST = "chronicle-store.json"


def load_trace(
    source: str | os.PathLike[str] | LocalStore,
    trace_id: str | None = None,
    *,
    store: LocalStore | str | os.PathLike[str] | None = None,
    allow: Iterable[str] = (),
) -> Trace:
    """Load one recorded run.

    Args:
        source: a :class:`~chronicle_otel.store.LocalStore`, a store directory, or an OTLP/JSON file.
        trace_id: the trace to load (32 hex digits, any case). For a store, also ``"latest"`` or
            ``"latest-failed"``. May be omitted when the source holds exactly one trace.
        store: the payload store to rehydrate truncated payloads from.
        allow: module prefixes whose classes payload decoding may rebuild (registered types always are).

    Returns:
        The :class:`~chronicle_otel.replay.Trace`.

    Raises:
        TraceNotFoundError: the trace id is not in the source.
        TraceLoadError: the source cannot be read, is not trace data, or holds several traces and no id was given.
    """
    payload_store = _payload_store(store)
    if isinstance(source, LocalStore) or (Path(source).is_dir() and (Path(source) / _STORE_MANIFEST).exists()):
        local = source if isinstance(source, LocalStore) else LocalStore(source)
        return _from_store(local, trace_id, payload_store or local, tuple(allow))
    path = Path(source)
    if path.is_dir():
        raise TraceLoadError("a directory that is not a chronicle store", source=path, expected=_STORE_MANIFEST)
    if not path.exists():
        raise TraceLoadError("no such file or store", source=path)
    if payload_store is None:
        default = default_store_path()
        if (default / _STORE_MANIFEST).exists():
            payload_store = LocalStore(default)
    traces = merge(read_file(path))
    chosen = _select(traces, trace_id, path)
    return build_trace(
        chosen,
        list(traces[chosen].values()),
        fetch=payload_store.get_payload if payload_store is not None else None,
        allow=allow,
        source=str(path),
    )


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
    wanted = trace_id.strip().lower()
    spans: list[SpanRecord] = []
    for number, request in enumerate(local.read_requests(wanted), 1):
        spans.extend(spans_of_request(request, source=f"{local.path} (trace {wanted}, line {number})"))
    if not spans:
        recent = [t.trace_id for t in local.list_traces(limit=10)]
        raise TraceNotFoundError(trace_id, source=local.path, candidates=recent)
    merged = merge(spans)
    return build_trace(
        wanted, list(merged[wanted].values()), fetch=payloads.get_payload, allow=allow, source=str(local.path)
    )
