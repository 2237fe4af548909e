"""Load a recorded run from where its spans are: the local store, a trace file, or a backend.

Usage::

    from chronicle_otel import load_trace, write_trace

    trace = load_trace(".chronicle", trace_id="3f8a6c2e…")        # the embedded store, by id
    trace = load_trace(".chronicle", trace_id="latest-failed")    # the most recent trace whose root failed
    trace = load_trace("incident.jsonl")                           # an OTLP/JSON file (one trace in it)
    trace = load_trace("collector-out.json.gz", trace_id="3f8a…")  # gzip, several traces: select by id
    trace = load_trace("collector-out/", trace_id="3f8a…")         # every trace file of a directory, merged
    trace = load_trace("collector-out/traces*.jsonl", trace_id="3f8a…")  # every file a glob pattern matches

    trace = load_trace("phoenix+http://127.0.0.1:6006", trace_id="3f8a…")   # pulled from a backend by id

    write_trace(trace, "tests/traces/incident-42.jsonl")          # a portable file, payloads inlined

Backends: ``phoenix+http(s)://host:port[?project=name]``, ``jaeger+http://host:16686`` (API v1),
``jaeger-v3+http://…`` (API v3), ``tempo+http://host:3200`` (API v2, then v1), ``zipkin+http://host:9411``.
More register with :func:`register_source` or the ``chronicle_otel.trace_sources`` entry point group.

Files are recognised by content (see ``SUPPORTED_FORMATS``): OTLP/JSON, the Collector ``file`` exporter's
protobuf and zstd framings, Jaeger, Tempo, Zipkin and Phoenix JSON, plain, gzip or zstd.
OTLP/JSON files may hold one ``ExportTraceServiceRequest`` per line (the Collector ``file`` exporter) or one
JSON document (an object or a list of them), plain or gzip. Ids may be hex (any case) or base64; integer
attributes written as strings stay exact; the older ``instrumentationLibrarySpans`` shape and snake_case field
names are read too. Spans split over lines, out of order or repeated are merged.

A directory that is not a chronicle store is read as trace files: every regular file in it (not below it) named
``*.json``, ``*.jsonl``, ``*.ndjson``, ``*.pb``, ``*.proto`` or ``*.otlp``, optionally with ``.gz``, ``.zst`` or
``.zstd`` after it; hidden files are skipped. That is the Collector ``file`` exporter's rotation: ``traces.jsonl``
and its backups ``traces-2026-11-30T10-00-00.000.jsonl``. A glob pattern (``*``, ``?``, ``[…]``, not an existing
path) reads every regular file it matches, whatever its name. The spans of all the files are merged, so a trace split
across rotated files loads whole. Each file has the bounds of :class:`LoadLimits`; at most :data:`MAX_TRACE_FILES`
files are read.

A payload attribute cut on the span is rehydrated from the payload store by its hash and verified: ``store=``
(``s3://bucket/prefix`` for object storage shared by a fleet, or a store directory; by default
``$CHRONICLE_PAYLOADS``), then the store being read, then the local store if there is one. When none has the whole
payload, the boundary says so (``Payload.status == "missing"``) and replaying it fails with a clear error.

``write_trace`` writes a trace back out as one OTLP/JSON file (``.gz``: gzip) holding its whole payloads, to
commit beside the tests that replay it.

API:
    :func:`load_trace`, :func:`write_trace`, :func:`read_spans`, :class:`TraceSource`, :func:`register_source`,
    :data:`SUPPORTED_FORMATS`
"""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import Protocol, runtime_checkable

from .._api import publish
from .._internal.gc_pause import gc_paused
from ..environment_variables import CHRONICLE_PAYLOADS
from ..errors import TraceLoadError
from ..model import SpanRecord, Trace
from ..store.payloads import PayloadSource, open_payload_store
from ..store.reader import MANIFEST, StoreReader, default_store_path, is_store
from ._assemble import PayloadSources, assemble, assemble_merged, build_trace, select_from_store
from ._files import SUPPORTED_FORMATS, read_path
from ._http import SOURCES, HttpTraceSource, JaegerSource, PhoenixSource, TempoSource, ZipkinSource
from ._limits import LoadLimits
from ._write import write_trace

__all__ = [
    "MAX_TRACE_FILES",
    "SUPPORTED_FORMATS",
    "HttpTraceSource",
    "JaegerSource",
    "LoadLimits",
    "PhoenixSource",
    "TempoSource",
    "TraceSource",
    "ZipkinSource",
    "build_trace",
    "load_trace",
    "read_spans",
    "register_source",
    "source_for",
    "write_trace",
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


def load_trace(
    source: str | os.PathLike[str] | StoreReader | TraceSource,
    trace_id: str | None = None,
    *,
    store: PayloadSource | str | os.PathLike[str] | Sequence[PayloadSource | str | os.PathLike[str]] | None = None,
    allow: Iterable[str] | None = None,
    progress: Callable[[int], None] | None = None,
    limits: LoadLimits | None = None,
) -> Trace:
    """Load one recorded run.

    The source is untrusted input: whatever it holds, loading raises only the package's own errors, and
    ``limits`` bound what it may cost (compressed files inflate in bounded steps).

    Args:
        source: a :class:`~chronicle_otel.store.LocalStore` (or :class:`~chronicle_otel.store.StoreReader`), a store
            directory, a trace file, a directory of trace files, a glob pattern of trace files
            (``"collector-out/traces*.jsonl"``), a backend URL (``phoenix+http://…``) or a :class:`TraceSource`.
        trace_id: the trace to load (32 hex digits, any case). For a store, also ``"latest"`` (the newest
            finished run: not one whose root span is still running), ``"latest-failed"`` (the newest run whose root
            failed) or ``"latest-error"`` (the newest with any ERROR span). May be omitted when the source holds
            exactly one trace.
        store: the payload store to rehydrate payloads cut on spans from: ``s3://bucket/prefix``, a store
            directory or a :class:`~chronicle_otel.store.PayloadSource`, or a list of them to ask in order. Default:
            ``$CHRONICLE_PAYLOADS`` when it names object storage. The store being read and the local store
            (``$CHRONICLE_HOME``) are asked after them.
        allow: module prefixes whose classes payload decoding may rebuild (registered types always are). Default:
            the top-level packages that define boundaries in this process when the value is read.
        progress: called with the number of spans fetched so far (backends that page).
        limits: bounds on size, inflation and time; by default :meth:`LoadLimits.from_env`.

    Returns:
        The :class:`~chronicle_otel.model.Trace`.

    Raises:
        TraceNotFoundError: the trace id is not in the source.
        TypeError: ``trace_id`` is not a string.
        LoadLimitError: the source exceeds one of ``limits``.
        TraceLoadError: the source cannot be read, is not trace data, holds several traces and no id was given, or
            is a directory or pattern with no trace file or more than :data:`MAX_TRACE_FILES` of them.
        StoreError: a store directory is damaged, or the object store cannot be reached.
        ConfigError: the payload store setting is malformed.
    """
    if trace_id is not None and not isinstance(trace_id, str):
        raise TypeError(
            f"trace_id is a str (32 hex digits, or 'latest' for a store) or None, not {type(trace_id).__name__}"
        )
    with contextlib.ExitStack() as opened:  # the stores opened here are closed once the trace is built
        payloads = _payload_store(store, opened)
        if isinstance(source, str) and "://" in source:
            source = source_for(source, limits=limits)
        if isinstance(source, StoreReader) or (not isinstance(source, TraceSource) and is_store(source)):
            local = source if isinstance(source, StoreReader) else StoreReader(source)
            if local is not source:
                opened.callback(local.close)
            with gc_paused():  # one pause for reading and building: the spans read are not collected in between
                spans, conflicts, chosen = select_from_store(local, trace_id)
                sources = _sources(payloads, local, opened, limits)
                return assemble_merged(chosen, spans, conflicts, str(local.path), sources, allow)
        if isinstance(source, TraceSource):
            spans_iter = source.spans(trace_id, progress) if progress is not None else source.spans(trace_id)
            return assemble(spans_iter, trace_id, repr(source), _sources(payloads, None, opened, limits), allow)
        path = Path(source)
        if path.is_dir():
            files = _trace_files(_named_like_traces(path), path)
            if not files:
                raise TraceLoadError("a directory that is not a chronicle store", source=path, expected=_DIRECTORY)
            sources = _sources(payloads, None, opened, limits)
            return assemble(_read_all(files, limits), trace_id, str(path), sources, allow)
        if not path.exists() and _is_pattern(os.fspath(source)):
            pattern = os.fspath(source)
            files = _trace_files((Path(p) for p in glob.iglob(pattern)), pattern)
            if not files:
                raise TraceLoadError("no file matches the pattern", source=pattern)
            sources = _sources(payloads, None, opened, limits)
            return assemble(_read_all(files, limits), trace_id, pattern, sources, allow)
        if not path.exists():
            raise TraceLoadError("no such file or store", source=path)
        sources = _sources(payloads, None, opened, limits)
        return assemble(read_path(path, limits=limits), trace_id, str(path), sources, allow)


def read_spans(source: str | os.PathLike[str], *, limits: LoadLimits | None = None) -> Iterator[SpanRecord]:
    """The spans of every trace in a trace file, a directory of trace files or a glob pattern of them, as read (not
    merged or checked: :func:`load_trace` does that for one trace).

    Raises:
        TraceLoadError: the source cannot be read or is not trace data (as :func:`load_trace` says).
    """
    path = Path(source)
    if path.is_dir():
        files = _trace_files(_named_like_traces(path), path)
        if not files:
            raise TraceLoadError("a directory with no trace file", source=path, expected=_DIRECTORY)
        yield from _read_all(files, limits)
    elif not path.exists() and _is_pattern(os.fspath(source)):
        files = _trace_files((Path(p) for p in glob.iglob(os.fspath(source))), os.fspath(source))
        if not files:
            raise TraceLoadError("no file matches the pattern", source=os.fspath(source))
        yield from _read_all(files, limits)
    elif not path.exists():
        raise TraceLoadError("no such file or store", source=path)
    else:
        yield from read_path(path, limits=limits)


MAX_TRACE_FILES = 10_000
"""Most files a directory or a glob pattern may give one :func:`load_trace` (each file has the bounds of
:class:`LoadLimits`)."""

_TRACE_SUFFIXES = (".json", ".jsonl", ".ndjson", ".pb", ".proto", ".otlp")
_COMPRESSION_SUFFIXES = (".gz", ".zst", ".zstd")
_DIRECTORY = f"{MANIFEST}, or trace files: *.json, *.jsonl, *.ndjson, *.pb, *.proto, *.otlp, maybe .gz/.zst"


def _is_pattern(text: str) -> bool:
    return any(c in text for c in "*?[")


def _named_like_traces(directory: Path) -> Iterator[Path]:
    """The files of ``directory`` (not below it) whose names say they hold trace data; hidden files skipped."""
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                name = entry.name.lower()
                if name.startswith("."):
                    continue
                for suffix in _COMPRESSION_SUFFIXES:
                    if name.endswith(suffix):
                        name = name[: -len(suffix)]
                        break
                if name.endswith(_TRACE_SUFFIXES):
                    yield Path(entry.path)
    except OSError as exc:
        raise TraceLoadError(f"cannot list the directory ({exc.strerror or exc})", source=directory) from None


def _trace_files(candidates: Iterable[Path], source: object) -> list[Path]:
    """The regular files among ``candidates`` (links followed; directories, pipes and devices skipped), sorted."""
    files: list[Path] = []
    try:
        for candidate in candidates:
            if not candidate.is_file():
                continue
            files.append(candidate)
            if len(files) > MAX_TRACE_FILES:
                raise TraceLoadError(
                    f"more than {MAX_TRACE_FILES} trace files; name fewer with a glob pattern",
                    source=source,
                    expected=f"at most {MAX_TRACE_FILES} files",
                )
    finally:
        close = getattr(candidates, "close", None)
        if close is not None:
            close()  # the directory listing, when it stopped early
    return sorted(files)


def _read_all(files: Sequence[Path], limits: LoadLimits | None) -> Iterator[SpanRecord]:
    """The spans of every file in turn (the loader merges the pieces of a trace split across them)."""
    bounds = limits if limits is not None else LoadLimits.from_env()
    for path in files:
        yield from read_path(path, limits=bounds)


def _sources(
    explicit: list[PayloadSource], local: StoreReader | None, opened: contextlib.ExitStack, limits: LoadLimits | None
) -> PayloadSources:
    """Where cut payloads are looked for, in order: the stores given (or ``$CHRONICLE_PAYLOADS``), the store
    being read, the default local store (opened here, closed with ``opened``); read within ``limits``."""
    chain = list(explicit)
    if local is not None and all(s is not local for s in chain):
        chain.append(local)
    if local is None:
        default = default_store_path()
        if (default / MANIFEST).is_file() and not any(  # asked only when sound: it was not named by the caller
            isinstance(s, StoreReader) and s.path.resolve() == default.resolve() for s in chain
        ):
            chain.append(opened.enter_context(contextlib.closing(StoreReader(default))))
    whole = local if local is not None else next((s for s in chain if isinstance(s, StoreReader)), None)
    return PayloadSources(chain, whole, limits)


def _payload_store(
    store: PayloadSource | str | os.PathLike[str] | Sequence[PayloadSource | str | os.PathLike[str]] | None,
    opened: contextlib.ExitStack,
) -> list[PayloadSource]:
    """The payload stores ``store`` names; those opened here from a URL or a directory are closed with ``opened``."""
    if store is None:
        configured = os.environ.get(CHRONICLE_PAYLOADS, "").strip()
        if not configured or configured == "local":
            return []
        store = configured
    items: list[PayloadSource | str | os.PathLike[str]] = (
        list(store) if isinstance(store, (list, tuple)) else [store]  # type: ignore[list-item]
    )
    chain: list[PayloadSource] = []
    for item in items:
        if isinstance(item, (str, os.PathLike)):
            named = open_payload_store(item)
            close = getattr(named, "close", None)
            if callable(close):
                opened.callback(close)
            chain.append(named)
        elif callable(getattr(item, "get_payload", None)):
            chain.append(item)
        else:
            raise TraceLoadError(f"store= is not a payload store: {type(item).__name__}", expected="get_payload()")
    return chain


publish(__name__, globals())
