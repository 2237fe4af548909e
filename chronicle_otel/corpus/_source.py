"""A corpus of recorded traces: listed from a store or trace files, filtered, sharded, each loaded on demand.

The listing is deterministic (the same source and filters give the same entries in the same order on every pytest-xdist
worker) and cheap: a store answers from its index, trace files are read once per process and their spans grouped by
trace.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from .. import semconv
from .._api import publish
from .._internal.sessions import session_matches
from ..errors import ChronicleError, ConfigError, TraceLoadError, TraceNotFoundError
from ..load import load_trace, read_spans, source_for
from ..model import SpanRecord, Trace
from ..store.reader import StoreReader, is_store

__all__ = ["Corpus", "CorpusEntry", "CorpusFilter"]

_DAY_NS = 86_400 * 10**9
_BACKEND_LIMIT = 1000
"""Most traces listed from a backend when no limit is given."""


@dataclasses.dataclass(frozen=True)
class CorpusEntry:
    """One trace of a corpus.

    Attributes:
        trace_id: 32 lowercase hex digits.
        root: the name of its root boundary ("" when it has none).
        failed: its root failed (the run raised).
        start_ns: when its root started (0 when unknown).
    """

    trace_id: str
    root: str
    failed: bool
    start_ns: int

    @property
    def test_id(self) -> str:
        """The stable id of its test: ``<first 8 hex digits>-<root>``."""
        root = "".join(c if c.isalnum() or c in "._" else "_" for c in self.root) or "no-boundary"
        return f"{self.trace_id[:8]}-{root}"


@dataclasses.dataclass(frozen=True)
class CorpusFilter:
    """Which traces of a source the corpus holds.

    Attributes:
        since_ns: only traces that started at or after this time (ns since the epoch).
        failed: only traces whose root failed.
        root: only traces whose root boundary name matches this glob.
        where: only traces whose session variables read as these values (``(key, value)`` pairs, all of them).
        shard: ``(i, n)``: only the i-th of n shards (1-based), by trace id, stable as the corpus grows.
        limit: at most this many traces (the most recent first, before sharding).
        include: traces the caller keeps besides (a predicate on the entry; None keeps all).
    """

    since_ns: int | None = None
    failed: bool = False
    root: str | None = None
    where: tuple[tuple[str, str], ...] = ()
    shard: tuple[int, int] | None = None
    limit: int | None = None
    include: Callable[[CorpusEntry], bool] | None = None

    def __post_init__(self) -> None:
        if self.shard is not None:
            i, n = self.shard
            if not (isinstance(i, int) and isinstance(n, int) and 1 <= i <= n):
                raise ConfigError("shard", f"{i}/{n}", "I/N with 1 <= I <= N, e.g. 2/4")
        if self.limit is not None and (not isinstance(self.limit, int) or self.limit < 1):
            raise ConfigError("limit", self.limit, "a positive number of traces")

    def in_shard(self, trace_id: str) -> bool:
        """``trace_id`` belongs to this filter's shard (every id does without one)."""
        if self.shard is None:
            return True
        i, n = self.shard
        return zlib.crc32(trace_id.encode()) % n == i - 1


class Corpus:
    """The traces of a source that a filter selects, each loaded when asked for.

    Args:
        source: a chronicle store directory, a trace file, a directory of trace files, a glob pattern of them, or a
            backend URL (``phoenix+http://…``, ``jaeger+http://…?service=NAME``, ``tempo+http://…``,
            ``zipkin+http://…``): its traces since ``filter.since_ns`` (by default the last day), at most
            ``filter.limit`` (by default 1,000), each fetched once per process.
        filter: which traces (default: all).
        store: payload stores to rehydrate cut payloads from (as :func:`~chronicle_otel.load_trace` takes them).

    Raises:
        TraceLoadError: the source cannot be read.
    """

    def __init__(self, source: str | os.PathLike[str], filter: CorpusFilter | None = None, store: Any = None) -> None:
        self.source = os.fspath(source)
        self.filter = filter if filter is not None else CorpusFilter()
        self._store = store
        self._reader: StoreReader | None = None
        self._spans: dict[str, list[SpanRecord]] | None = None
        self._entries: list[CorpusEntry] | None = None
        self._errors: dict[str, ChronicleError] = {}

    # ------------------------------------------------------------------ listing

    def entries(self) -> list[CorpusEntry]:
        """The traces, oldest first (then by id): the same list on every call and every process."""
        if self._entries is None:
            listed = self._list_store() if is_store(self.source) else self._list_files()
            chosen = [e for e in listed if self._keeps(e)]
            if self.filter.where:
                chosen = [e for e in chosen if self._session_matches(e)]
            if self.filter.limit is not None:
                chosen = sorted(chosen, key=lambda e: (-e.start_ns, e.trace_id))[: self.filter.limit]
            chosen = [e for e in chosen if self.filter.in_shard(e.trace_id)]
            self._entries = sorted(chosen, key=lambda e: (e.start_ns, e.trace_id))
        return self._entries

    def _keeps(self, entry: CorpusEntry) -> bool:
        f = self.filter
        if entry.trace_id in self._errors:
            return True  # fetched in the window, then not loadable: its test says why
        if f.failed and not entry.failed:
            return False
        if f.since_ns is not None and entry.start_ns < f.since_ns:
            return False
        if f.root is not None and not fnmatch.fnmatchcase(entry.root, f.root):
            return False
        return f.include is None or f.include(entry)

    def _list_store(self) -> list[CorpusEntry]:
        reader = self._open_store()
        f = self.filter
        summaries = reader.list_traces(failed=True if f.failed else None, root=f.root, since_ns=f.since_ns)
        return [
            CorpusEntry(s.trace_id, s.root_boundary or "", s.failed, s.start_ns or 0)
            for s in summaries
            if s.root_boundary  # a trace with no boundary (a service span only) has nothing to replay
        ]

    def _list_files(self) -> list[CorpusEntry]:
        spans = self._grouped()
        entries = [CorpusEntry(trace_id, "", False, 0) for trace_id in self._errors]
        for trace_id, records in spans.items():
            root = _root_boundary(records)
            if root is None:
                continue
            entries.append(
                CorpusEntry(
                    trace_id,
                    str(root.attributes.get(semconv.BOUNDARY_NAME, root.name)),
                    root.status == "ERROR",
                    root.start_ns or 0,
                )
            )
        return entries

    def _session_matches(self, entry: CorpusEntry) -> bool:
        try:
            trace = self.load(entry)
        except Exception:  # an unloadable trace stays in the corpus: its test says why
            return True
        session = trace.root.session if trace.root is not None else {}
        return all(session_matches(dict(session), k, v) for k, v in self.filter.where)

    # ------------------------------------------------------------------ loading

    def load(self, entry: CorpusEntry) -> Trace:
        """The trace of ``entry``, payloads rehydrated.

        Raises:
            TraceLoadError: it cannot be loaded (the package's own error, naming why).
        """
        if is_store(self.source):
            return load_trace(self._open_store(), entry.trace_id, store=self._payloads())
        records = self._grouped().get(entry.trace_id)
        error = self._errors.get(entry.trace_id)
        if error is not None:
            raise error
        if records is None:
            raise TraceNotFoundError(entry.trace_id, source=self.source)
        return load_trace(_Spans(records, self.source), entry.trace_id, store=self._payloads())

    def _payloads(self) -> Any:
        return self._store

    def _open_store(self) -> StoreReader:
        if self._reader is None:
            self._reader = StoreReader(self.source)
        return self._reader

    def _grouped(self) -> dict[str, list[SpanRecord]]:
        if self._spans is None:
            grouped: dict[str, list[SpanRecord]] = {}
            if "://" in self.source:
                self._fetch(grouped)
            else:
                for record in read_spans(self.source):
                    grouped.setdefault(record.trace_id, []).append(record)
            self._spans = grouped
        return self._spans

    def _fetch(self, grouped: dict[str, list[SpanRecord]]) -> None:
        """A backend's traces of the window (``since``, by default the last day), each fetched whole; one that
        cannot be is kept as its error, which its test shows."""
        source = source_for(self.source)
        search = getattr(source, "trace_ids", None)
        if search is None:
            raise TraceLoadError("this backend cannot list traces; pull them into files first", source=self.source)
        since = self.filter.since_ns if self.filter.since_ns is not None else time.time_ns() - _DAY_NS
        for trace_id in search(since, self.filter.limit or _BACKEND_LIMIT):
            try:
                grouped[trace_id] = list(source.spans(trace_id))
            except ChronicleError as exc:
                self._errors[trace_id] = exc

    def close(self) -> None:
        """Close the store the corpus reads (a later call opens it again)."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def __enter__(self) -> Corpus:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self.entries())

    def __iter__(self) -> Iterator[CorpusEntry]:
        return iter(self.entries())


class _Spans:
    """The spans of one trace, read already, as a trace source."""

    def __init__(self, records: list[SpanRecord], where: str) -> None:
        self._records = records
        self._where = where

    def spans(self, trace_id: str | None, progress: Any = None) -> Iterable[SpanRecord]:
        return self._records

    def __repr__(self) -> str:
        return self._where


def _root_boundary(records: Sequence[SpanRecord]) -> SpanRecord | None:
    """The outermost boundary span of a trace's spans (its parent is not a boundary of the trace)."""
    boundaries = {r.span_id: r for r in records if semconv.BOUNDARY_KIND in r.attributes}
    roots = [r for r in boundaries.values() if r.parent_span_id not in boundaries]
    return min(roots, key=lambda r: (r.start_ns or 0, r.span_id)) if roots else None


publish(__name__, globals())
