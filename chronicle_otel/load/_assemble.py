"""Assemble a :class:`~chronicle_otel.model.Trace` from the spans of one trace: boundaries, call keys, payloads.

One path for every source (the local store, files, backends): payloads are verified against their hash and
rehydrated from a payload store by hash when the span kept only a prefix; the codec version is checked; parent
chains are walked without recursion and every count is bounded (the data is untrusted).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import count
from operator import attrgetter, itemgetter
from typing import Any, Final

import orjson

from .. import semconv
from .._internal import trace_ids
from .._internal.digest import PREFIX as _PREFIX
from .._internal.digest import payload_digest, text_digest
from .._internal.gc_pause import gc_paused
from ..codec import CODEC_VERSION
from ..errors import ChronicleError, TraceLoadError, TraceNotFoundError
from ..model import Boundary, CallKey, Payload, SpanRecord, Trace, _boundary_record, _payload, format_key
from ..otlp import spans_of_request
from ..store.payloads import PayloadSource
from ..store.reader import StoreReader
from ._limits import LoadLimits, PayloadBudget
from ._merge import merge

_CODECS = {CODEC_VERSION}
_sha256 = hashlib.sha256

Fetch = Callable[[str], "bytes | None"]
"""Whole payload bytes by ``sha256:<hex>`` digest, or None."""


def payload_from_span(
    attrs: Mapping[str, Any], keys: semconv.PayloadKeys, fetch: Fetch | None, *, where: str = ""
) -> tuple[Payload | None, str | None]:
    """Build the :class:`Payload` of one attribute triple, rehydrating from the store when needed.

    Returns the payload and a warning (or None).

    Raises:
        TraceLoadError: the attribute is not text and cannot be re-encoded as JSON (``where`` names the span).
    """
    text = attrs.get(keys[0])
    if text is None:
        digest = attrs.get(keys[1])
        if not isinstance(digest, str):
            return None, None
        # The hash is there, the text is not: a collector or backend dropped the attribute instead of cutting it.
        whole = fetch(digest) if fetch is not None else None
        decoded = _text_of(whole)
        if decoded is not None and text_digest(decoded) == digest:
            return Payload(decoded, digest, "rehydrated"), None
        warning = f"{keys[0]} was dropped from the span (its hash {digest[:80]} remains) and is not in the store"
        return Payload("", digest, "missing"), warning
    if not isinstance(text, str):
        # A collector transform parsed the JSON string into a kvlist/array: re-encode it canonically.
        try:
            text = orjson.dumps(text, option=orjson.OPT_SORT_KEYS).decode()
        except orjson.JSONEncodeError as exc:
            raise TraceLoadError(f"{keys[0]} is neither text nor JSON data ({exc})", source=where or None) from None
    digest = attrs.get(keys[1])
    if not isinstance(digest, str):
        return Payload(text, None, "unverified"), None
    if text_digest(text) == digest:
        return Payload(text, digest, "ok"), None
    whole = fetch(digest) if fetch is not None else None
    decoded = _text_of(whole)
    if decoded is not None and text_digest(decoded) == digest:
        return Payload(decoded, digest, "rehydrated"), None
    if attrs.get(keys[2]) is True or attrs.get(keys[2]) == "true":
        warning = f"{keys[0]} {digest[:80]} is cut to {len(text)} characters and not in the store"
    else:  # not cut on the span: the text was changed after it was recorded (an edited trace file)
        warning = (
            f"{keys[0]} does not match its hash {digest[:80]} (changed after it was recorded?) and the store has no "
            "copy of the recorded one"
        )
    return Payload(text, digest, "missing"), warning


def _text_of(whole: bytes | None) -> str | None:
    """Payload bytes from the store as text, or None (absent, or not UTF-8)."""
    if not isinstance(whole, bytes):
        return None
    try:
        return whole.decode()
    except UnicodeDecodeError:
        return None


MAX_BOUNDARY_DEPTH: Final = 4096
"""Deepest nesting of boundaries accepted: each call key holds the whole chain from the root."""
MAX_CALL_KEY_ENTRIES: Final = 1 << 24
"""Most (name, index) entries all call keys of one trace may hold together: deep nesting times many calls would
otherwise turn a small file into gigabytes of keys."""
_MAX_CALL_INDEX: Final = 2**63 - 1


def _call_index(value: Any) -> int | None:
    """``chronicle.call.index`` as a non-negative integer (Zipkin keeps tags as strings); None when invalid."""
    if value is None:
        return 0
    if isinstance(value, bool):
        return None
    digits = isinstance(value, str) and 0 < len(value) <= 19 and value.isascii() and value.isdigit()
    whole = isinstance(value, float) and value.is_integer() and 0 <= value <= _MAX_CALL_INDEX
    if isinstance(value, int) or digits or whole:
        number = int(value)
    else:
        return None
    return number if 0 <= number <= _MAX_CALL_INDEX else None


def _boundary(
    span: SpanRecord,
    parent: Boundary | None,
    fetch: Fetch | None,
    allow: tuple[str, ...] | None,
    warnings: list[str],
    source: str = "",
) -> Boundary | None:
    attrs = span.attributes
    get = attrs.get
    name = get(_NAME)
    if not isinstance(name, str):
        return None
    codec = get(_CODEC, CODEC_VERSION)
    if codec is not CODEC_VERSION and (not isinstance(codec, str) or codec not in _CODECS):
        where = span.origin or source
        shown = repr(codec[:80]) if isinstance(codec, str) else f"a {type(codec).__name__}"
        raise TraceLoadError(
            f"span {span.span_id} ({name[:200]!r}) uses codec {shown}, not one this chronicle-otel understands "
            f"({CODEC_VERSION}); upgrade chronicle-otel",
            source=where or None,
        )
    index = get(_CALL_INDEX)
    if type(index) is not int or not 0 <= index <= _MAX_CALL_INDEX:
        index = _call_index(index)
        if index is None:
            raise TraceLoadError(
                f"span {span.span_id} ({name[:200]!r}) has {semconv.CALL_INDEX} {_shown(get(_CALL_INDEX))}",
                source=span.origin or source or None,
                expected=f"an integer from 0 to {_MAX_CALL_INDEX}",
            )
    if parent is None:
        key: CallKey = ((name, index),)
    else:
        above = parent.call_key
        if len(above) >= MAX_BOUNDARY_DEPTH:
            raise TraceLoadError(
                f"span {span.span_id}: boundaries nest deeper than {MAX_BOUNDARY_DEPTH} levels",
                source=span.origin or source or None,
            )
        key = (*above, (name, index))
    text = get(_INPUT)
    raw_input = (
        None
        if text is None and _INPUT_HASH not in attrs
        else _payload_of(text, attrs, semconv.INPUT_KEYS, fetch, span, key, warnings, source)
    )
    text = get(_OUTPUT)
    raw_output = (
        None
        if text is None and _OUTPUT_HASH not in attrs
        else _payload_of(text, attrs, semconv.OUTPUT_KEYS, fetch, span, key, warnings, source)
    )
    text = get(_ERROR)
    raw_error = (
        None
        if text is None and _ERROR_HASH not in attrs
        else _payload_of(text, attrs, semconv.ERROR_KEYS, fetch, span, key, warnings, source)
    )
    session: dict[str, Any] = {}
    if _has_session(attrs):
        session = {k[_SESSION_CUT:]: v for k, v in attrs.items() if k.startswith(_SESSION)}
    kind = get(_KIND, "custom")
    state = get(_STREAM_STATE)
    function = get(_FUNCTION)
    return _boundary_record(
        name,
        kind if isinstance(kind, str) else "custom",
        index,
        key,
        span.span_id,
        parent,
        session,
        span.start_ns,
        span.end_ns,
        span.status,
        get(_STREAM) in (True, "true"),  # Zipkin tags are strings
        state if isinstance(state, str) else None,
        function if isinstance(function, str) else None,
        raw_input,
        raw_output,
        raw_error,
        span,
        allow,
    )


def _payload_of(
    text: Any,
    attrs: Mapping[str, Any],
    keys: semconv.PayloadKeys,
    fetch: Fetch | None,
    span: SpanRecord,
    key: CallKey,
    warnings: list[str],
    source: str,
) -> Payload | None:
    """The payload whose text attribute holds ``text``: whole and verified against its hash (the common case), else
    as :func:`payload_from_span` finds it, with its warning."""
    digest = attrs.get(keys.hash)
    if (
        type(text) is str
        and type(digest) is str
        and _PREFIX + _sha256(text.encode("utf-8", "surrogatepass")).hexdigest() == digest
    ):
        return _payload(text, digest, "ok")
    where = span.origin or source
    payload, warning = payload_from_span(attrs, keys, fetch, where=f"{where} (span {span.span_id})")
    if warning:
        warnings.append(f"boundary {format_key(key)}: {warning}")
    return payload


def _has_session(attrs: Mapping[str, Any]) -> bool:
    """True unless no attribute key can start with the session prefix: their concatenation does not hold it
    (one search instead of a test per key; a key that is not text is left to the test that names it)."""
    try:
        return _SESSION in "".join(attrs)
    except TypeError:
        return True


_NAME: Final = semconv.BOUNDARY_NAME
_CODEC: Final = semconv.CODEC
_CALL_INDEX: Final = semconv.CALL_INDEX
_KIND: Final = semconv.BOUNDARY_KIND
_STREAM: Final = semconv.STREAM
_STREAM_STATE: Final = semconv.STREAM_STATE
_FUNCTION: Final = semconv.CODE_FUNCTION
_INPUT: Final = semconv.INPUT
_OUTPUT: Final = semconv.OUTPUT
_ERROR: Final = semconv.ERROR
_INPUT_HASH: Final = semconv.INPUT_HASH
_OUTPUT_HASH: Final = semconv.OUTPUT_HASH
_ERROR_HASH: Final = semconv.ERROR_HASH
_SESSION: Final = semconv.SESSION_PREFIX
_SESSION_CUT: Final = len(semconv.SESSION_PREFIX)
_SPAN_ORDER: Final = attrgetter("start_ns", "end_ns", "span_id")
_START: Final = attrgetter("start_ns")
_KEY: Final = attrgetter("call_key")
_INDEX: Final = attrgetter("call_index")
_LAST: Final = itemgetter(-1)


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return repr(value[:40])
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() <= 128:
        return repr(value)
    if isinstance(value, (bool, float)) or value is None:
        return repr(value)
    return f"a {type(value).__name__}"


def build_trace(
    trace_id: str,
    spans: Sequence[SpanRecord],
    *,
    fetch: Fetch | None = None,
    allow: Iterable[str] | None = None,
    source: str = "",
) -> Trace:
    """Assemble a :class:`Trace` from the spans of one trace.

    A boundary's parent is its nearest ancestor span that is a boundary. Start times alone cannot order parents
    before children (backends round them: Phoenix keeps µs), so each span's ancestors are built first, walking
    parent links without recursion; a parent cycle (hostile or broken data) is cut where the walk meets itself.

    Raises:
        TraceLoadError: a boundary span is malformed (unknown codec, bad call index, nesting too deep).
    """
    ordered = sorted(spans, key=_SPAN_ORDER)
    by_id = {s.span_id: s for s in ordered}
    allow_t = tuple(allow) if allow is not None else None
    warnings: list[str] = []
    if not any(s.parent_span_id is None for s in ordered):
        warnings.append("the trace's root span is missing (its parent is not in the source)")
    built: dict[str, Boundary | None] = {}
    # up[x]: the nearest boundary at or above span x, as a span below x sees it.
    up: dict[str, Boundary | None] = {}
    key_entries = 0

    for first in ordered:
        span_id = first.span_id
        if span_id in built:
            continue
        span = by_id[span_id]
        parent_id = span.parent_span_id
        if parent_id is None or parent_id in up or parent_id not in by_id:
            # The common case, the parent built already (it started first) or none in the trace: no walk.
            above = up.get(parent_id) if parent_id is not None else None
            boundary = _boundary(span, above, fetch, allow_t, warnings, source)
            built[span_id] = boundary
            if boundary is not None:
                key_entries += len(boundary.call_key)
                if key_entries > MAX_CALL_KEY_ENTRIES:
                    raise _too_many_key_entries(source)
                above = boundary
            up[span_id] = above
            continue
        chain: list[str] = []  # first, its parent, grandparent… up to a resolved span, a root or a cycle
        seen: dict[str, int] = {}
        cursor: str | None = first.span_id
        while cursor is not None and cursor in by_id and cursor not in up and cursor not in seen:
            seen[cursor] = len(chain)
            chain.append(cursor)
            cursor = by_id[cursor].parent_span_id
        cycle_at = seen.get(cursor) if cursor is not None else None
        above = up.get(cursor) if cursor is not None and cycle_at is None else None
        for span_id in reversed(chain):  # ancestors first
            boundary = _boundary(by_id[span_id], above, fetch, allow_t, warnings, source)
            built[span_id] = boundary
            if boundary is not None:
                above = boundary
                key_entries += len(boundary.call_key)
                if key_entries > MAX_CALL_KEY_ENTRIES:
                    raise _too_many_key_entries(source)
        if cycle_at is None:
            _resolve_up(chain, len(chain), built, up, by_id)
        else:
            # A span below the cycle walks around it until it meets a boundary.
            cycle = chain[cycle_at:]
            nearest: Boundary | None = None
            for k in range(2 * len(cycle) - 1, -1, -1):
                candidate = built[cycle[k % len(cycle)]]
                if candidate is not None:
                    nearest = candidate
                if k < len(cycle):
                    up[cycle[k]] = nearest
            _resolve_up(chain, cycle_at, built, up, by_id)

    found = [b for b in built.values() if b is not None]
    # Call order: start time, then depth, then call index (ties keep the order built), sorted on keys made in C.
    order = sorted(zip(map(_START, found), map(len, map(_KEY, found)), map(_INDEX, found), count()))
    boundaries = list(map(found.__getitem__, map(_LAST, order)))
    top = [b for b in boundaries if b.parent is None]
    root = top[0] if top else None
    if len(top) > 1:
        warnings.append(f"{len(top)} top-level boundaries; the first, {top[0].name!r}, is the root")
    return Trace(trace_id, tuple(ordered), tuple(boundaries), root, source, tuple(warnings))


def _too_many_key_entries(source: str) -> TraceLoadError:
    return TraceLoadError(
        f"the call keys of this trace's boundaries hold more than {MAX_CALL_KEY_ENTRIES} entries "
        "(boundaries nested deep, many times over)",
        source=source or None,
    )


def _resolve_up(
    chain: list[str],
    stop: int,
    built: Mapping[str, Boundary | None],
    up: dict[str, Boundary | None],
    by_id: Mapping[str, SpanRecord],
) -> None:
    """Fill ``up`` for ``chain[:stop]``, top-down: a span's own boundary, else what its parent sees."""
    for i in range(stop - 1, -1, -1):
        span_id = chain[i]
        boundary = built[span_id]
        if boundary is None:
            parent_id = by_id[span_id].parent_span_id
            boundary = up.get(parent_id) if parent_id is not None else None
        up[span_id] = boundary


def assemble(
    spans: Iterable[SpanRecord],
    trace_id: str | None,
    source: str,
    payloads: PayloadSources | None,
    allow: Iterable[str] | None,
) -> Trace:
    """The one assembly path of every source: merge pieces, pick the trace, build it with payloads from ``payloads``."""
    with gc_paused():  # reading and building make many objects and no cycles
        conflicts: dict[str, set[str]] = {}
        traces = merge(spans, conflicts)
        chosen = _select(traces, trace_id, source)
        return assemble_merged(chosen, traces[chosen], conflicts.get(chosen, ()), source, payloads, allow)


def assemble_merged(
    trace_id: str,
    spans: Mapping[str, SpanRecord],
    conflicts: Iterable[str],
    source: str,
    payloads: PayloadSources | None,
    allow: Iterable[str] | None,
) -> Trace:
    """Build the trace whose copies of each span are merged already (``spans`` by span id), with payloads from
    ``payloads``; ``conflicts`` are the span ids whose copies had different payloads."""
    with gc_paused():
        records = list(spans.values())
        fetch = payloads.fetcher(trace_id, records) if payloads is not None else None
        trace = build_trace(trace_id, records, fetch=fetch, allow=allow, source=source)
        conflicting = sorted(conflicts)
        if not conflicting:
            return trace
        said = [
            f"span {span_id} is in the source more than once with different payloads (an edited or damaged "
            "source: not a retry); the most complete copy is kept, and a replay reports the call"
            for span_id in conflicting[:20]
        ]
        return dataclasses.replace(trace, warnings=(*trace.warnings, *said), conflicts=tuple(conflicting))


class PayloadSources:
    """The payload stores asked, in order, for payloads cut on spans; ``whole`` is a local store whose own copy of
    the trace may hold attributes a backend cut (Zipkin keeps 128 characters). ``limits`` gives the budget of bytes
    read from the stores for one trace (:attr:`~chronicle_otel.load.LoadLimits.max_payload_bytes`)."""

    def __init__(
        self, chain: Sequence[PayloadSource], whole: StoreReader | None = None, limits: LoadLimits | None = None
    ) -> None:
        self.chain = list(chain)
        self.whole = whole
        self.limits = limits

    def fetcher(self, trace_id: str, spans: Sequence[SpanRecord]) -> Fetch | None:
        """Whole payloads by hash for the spans of one trace; the ones cut on spans are fetched at once, in bulk
        where a store can (object storage), when the first one is asked for.

        Every byte read from the stores counts against one budget for the trace: a store that takes ``reserve=``
        (object storage) counts each object before reading its body, any other each payload it returns. A fetch
        that would pass ``max_payload_bytes`` raises :class:`~chronicle_otel.errors.LoadLimitError`.
        """
        if not self.chain and self.whole is None:
            return None
        cache: dict[str, bytes] | None = None  # fetched on the first call: a trace with nothing cut asks for nothing
        readers: list[_StoreReads] = []
        asked: set[str] = set()  # digests every bulk store was asked for already: not asked again one by one
        recorded: dict[str, bytes] | None = None

        def fetch(digest: str) -> bytes | None:
            nonlocal cache, recorded
            if cache is None:
                limits = self.limits if self.limits is not None else LoadLimits.from_env()
                budget = PayloadBudget(limits.max_payload_bytes, trace_id)
                readers.extend(_StoreReads(store, budget) for store in self.chain)
                asked.update(_cut_digests(spans))
                cache = _prefetch(asked, readers)
            data = cache.get(digest)
            if data is not None:
                return data
            for reads in readers:
                if reads.bulk and digest in asked:
                    continue
                data = reads.one(digest)
                if data is not None:
                    return data
            if self.whole is None:
                return None
            if recorded is None:
                recorded = _whole_attributes(self.whole, trace_id)
            return recorded.get(digest)

        return fetch


def _cut_digests(spans: Sequence[SpanRecord]) -> set[str]:
    """The addresses of the payloads cut on ``spans`` (at most :data:`MAX_PREFETCH`)."""
    wanted: set[str] = set()
    for span in spans:
        attrs = span.attributes
        for keys in semconv.PAYLOAD_KEYS:
            if attrs.get(keys.truncated) is not True:
                continue
            digest = attrs.get(keys.hash)
            if isinstance(digest, str) and len(digest) == 71:
                wanted.add(digest)
                if len(wanted) >= MAX_PREFETCH:
                    return wanted
    return wanted


def _prefetch(wanted: set[str], readers: Sequence[_StoreReads]) -> dict[str, bytes]:
    """The payloads of ``wanted``, asked of each store that fetches in bulk, in order, for those still missing."""
    found: dict[str, bytes] = {}
    for reads in readers:
        missing = sorted(wanted - found.keys())
        if not missing:
            break
        if reads.bulk:
            found.update(reads.many(missing))
    return found


class _StoreReads:
    """The reads of one payload store for one trace, every byte counted in the trace's budget: before an object's
    body is read, for a store whose ``get_payloads`` takes ``reserve=`` (object storage); once a payload is
    returned, for any other."""

    def __init__(self, store: PayloadSource, budget: PayloadBudget) -> None:
        self.store = store
        self.budget = budget
        where = getattr(store, "url", None) or getattr(store, "path", None)
        self.name = str(where) if where is not None else type(store).__name__
        get_many = getattr(store, "get_payloads", None)
        self.bulk = callable(get_many)
        self.reserves = self.bulk and _takes_reserve(get_many)

    def many(self, digests: list[str]) -> dict[str, bytes]:
        """``get_payloads(digests)``, counted."""
        get_many: Callable[..., dict[str, bytes]] = self.store.get_payloads  # type: ignore[attr-defined]
        if self.reserves:
            return get_many(digests, reserve=self.budget.taker(self.name))
        found = get_many(digests)
        for data in found.values():
            self._count(data)
        return found

    def one(self, digest: str) -> bytes | None:
        """``get_payload(digest)``, counted (through ``get_payloads`` where that reserves)."""
        if self.reserves:
            return self.many([digest]).get(digest)
        data = self.store.get_payload(digest)
        self._count(data)
        return data

    def _count(self, data: object) -> None:
        if isinstance(data, (bytes, bytearray)):
            self.budget.take(len(data), self.name)


def _takes_reserve(method: object) -> bool:
    """True when a store's ``get_payloads`` takes the ``reserve=`` keyword (object storage does)."""
    import inspect

    try:
        return "reserve" in inspect.signature(method).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):  # no signature to inspect
        return False


MAX_PREFETCH: Final = 100_000
"""Most payloads fetched in bulk for one trace (the rest, if any, are fetched one by one)."""


def select_from_store(local: StoreReader, trace_id: str | None) -> tuple[dict[str, SpanRecord], set[str], str]:
    """The spans of ``trace_id`` (or ``latest``, ``latest-failed``, ``latest-error``) from a store, by span id, the ids
    of spans whose copies had different payloads, and the chosen trace id.

    The copies of a span are merged as each line is read (the lines are parsed one at a time), as for trace files:
    an index that lists one line many times costs the time to read it, not memory for every copy.
    """
    if trace_id in (None, "latest", "latest-failed", "latest-error"):
        summaries = local.list_traces(
            limit=10,
            failed=True if trace_id == "latest-failed" else None,
            errors=True if trace_id == "latest-error" else None,
        )
        if not summaries:
            what = {"latest-failed": "failed traces", "latest-error": "traces with an error"}.get(trace_id or "")
            what = what or "traces"
            raise TraceLoadError(f"the store has no {what}", source=local.path)
        if trace_id is None and len(local.list_traces(limit=2)) > 1:
            listing = ", ".join(f"{t.trace_id} ({t.root_boundary or t.root_name})" for t in summaries)
            raise TraceLoadError(
                f"several traces and no trace_id given (or 'latest', 'latest-failed'); most recent: {listing}",
                source=local.path,
            )
        # The newest finished run: a trace whose root span is not stored yet (start_ns None) is still being
        # recorded (its inner calls were exported before the run around them ended); taken only when no listed
        # trace is finished.
        finished = [t for t in summaries if t.start_ns is not None]
        trace_id = (finished or summaries)[0].trace_id
        if not isinstance(trace_id, str):
            raise TraceLoadError("the store's index lists a trace id that is not text", source=local.path)
    wanted = trace_id.strip().lower()
    if not trace_ids.is_full(wanted) and trace_ids.is_prefix(wanted):  # a unique prefix names its trace
        found = local.list_traces(id_prefix=wanted, include_replays=True, limit=11)
        if found:
            wanted = trace_ids.pick(wanted, [t.trace_id for t in found], source=local.path, more=len(found) > 10)
    conflicts: dict[str, set[str]] = {}
    with gc_paused():  # many objects and no cycles
        traces = merge(
            (
                span
                for number, request in enumerate(local.iter_requests(wanted), 1)
                for span in spans_of_request(request, source=f"{local.path} (trace {wanted}, line {number})")
            ),
            conflicts,
        )
    if not traces:
        recent = [t.trace_id for t in local.list_traces(limit=10)]
        raise TraceNotFoundError(trace_id, source=local.path, candidates=recent)
    if wanted not in traces:
        raise TraceLoadError(f"the store's lines for trace {wanted} hold none of its spans", source=local.path)
    return traces[wanted], conflicts.get(wanted, set()), wanted


def _whole_attributes(store: StoreReader, trace_id: str) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    try:
        for request in store.iter_requests(trace_id):  # one line at a time: only the payloads found are kept
            for span in spans_of_request(request):
                attrs = span.attributes
                for keys in semconv.PAYLOAD_KEYS:
                    text, digest = attrs.get(keys.text), attrs.get(keys.hash)
                    if isinstance(text, str) and isinstance(digest, str) and digest not in found:
                        data = text.encode("utf-8", "surrogatepass")
                        if payload_digest(data) == digest:
                            found[digest] = data
    except ChronicleError:  # an unreadable store only means nothing (more) to rehydrate from
        return found
    return found


def _select(traces: Mapping[str, Mapping[str, SpanRecord]], trace_id: str | None, source: str) -> str:
    if not traces:
        raise TraceLoadError("no spans", source=source, expected="OTLP/JSON trace data")
    if trace_id is not None:
        wanted = trace_id.strip().lower()
        if wanted not in traces and len(wanted) == 16 and "0" * 16 + wanted in traces:
            wanted = "0" * 16 + wanted  # a 64-bit id as Jaeger and Zipkin show it; spans hold it zero-padded
        if wanted not in traces and trace_ids.is_prefix(wanted) and any(t.startswith(wanted) for t in traces):
            wanted = trace_ids.pick(wanted, traces, source=source)
        if wanted not in traces:
            raise TraceNotFoundError(trace_id, source=source, candidates=sorted(traces))
        return wanted
    if len(traces) > 1:
        listing = ", ".join(f"{tid} ({_root_name(spans)})" for tid, spans in list(traces.items())[:10])
        raise TraceLoadError(f"{len(traces)} traces and no trace_id given; pick one of: {listing}", source=source)
    return next(iter(traces))


def _root_name(spans: Mapping[str, SpanRecord]) -> str:
    roots = [s for s in spans.values() if s.parent_span_id is None]
    return roots[0].name if roots else "no root"
