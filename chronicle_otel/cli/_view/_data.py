"""The page's data: a trace (and a replay report of it) as the JSON the page's script shows.

Every value becomes text here, cut to its bound; payloads are shown as their JSON (pretty-printed) and readably
(:mod:`._readable`), never decoded to Python objects. The page embeds this data inert (:mod:`._page`).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from ...model import Boundary, Payload, Trace, format_key
from ...replaying import Finding, ReplayReport
from ...semconv import REPLAY_OF
from ...version import __version__
from .. import _render
from ._readable import MAX_DEPTH, cap, readable_text
from ._report import SECTIONS

MAX_PAYLOAD_CHARS: Final = 256 * 1024
"""Each payload view (pretty JSON, readable form, stack trace) is cut at this many characters."""
MAX_BOUNDARIES: Final = 20_000
"""At most this many boundaries (the first in call order) are shown."""
MAX_PAGE_PAYLOAD_CHARS: Final = 64 * 1024 * 1024
"""All payload views of one page together; past it, payloads are left out with a note."""

_MAX_PARSE_CHARS = 16 * 1024 * 1024
"""A payload text longer than this is shown raw (its first characters), not parsed."""
_MAX_NAME = 1_000
_MAX_VALUE = 4_096
_MAX_WARNINGS = 200
_MAX_FINDINGS = 2_000
_STACKTRACE = "exception.stacktrace"
_KINDS = frozenset({"llm", "tool", "retrieval", "guardrail", "agent", "memory", "custom"})


def _status(b: Boundary) -> str:
    return "ERROR" if b.failed or b.status == "ERROR" else "OK"


def _ms(ns: int) -> float:
    return round(ns / 1e6, 3)


def _utc(ns: int) -> str:
    try:
        return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
    except (OverflowError, OSError, ValueError):
        return "-"


def _value_text(value: object) -> str:
    if isinstance(value, str):
        return cap(value, _MAX_VALUE)
    try:
        return cap(json.dumps(value, ensure_ascii=False, default=str), _MAX_VALUE)
    except (TypeError, ValueError):
        return cap(repr(value), _MAX_VALUE)


def _session(values: Mapping[str, Any]) -> list[list[str]]:
    return [[cap(k, _MAX_NAME), _value_text(v)] for k, v in sorted(values.items(), key=lambda kv: str(kv[0]))]


def _replay_of(trace: Trace) -> str | None:
    for span in trace.spans:
        value = span.attributes.get(REPLAY_OF)
        if isinstance(value, str) and value:
            return value
    return None


class _Budget:
    """The characters of payload text a page may still embed."""

    def __init__(self, chars: int) -> None:
        self.left = chars

    def take(self, text: str) -> str:
        self.left -= len(text)
        return text


def page_data(trace: Trace, report: ReplayReport | None) -> dict[str, Any]:
    """What the page shows of ``trace`` (and of ``report``): JSON-ready, every text cut to its bound."""
    shown = trace.boundaries[:MAX_BOUNDARIES]
    index = {id(b): i for i, b in enumerate(shown)}
    t0 = min((b.start_ns for b in shown), default=0)
    t1 = max((max(b.end_ns, b.start_ns) for b in shown), default=t0)
    root = trace.root or (shown[0] if shown else None)
    session = dict(root.session) if root is not None else {}
    budget = _Budget(MAX_PAGE_PAYLOAD_CHARS)
    boundaries = []
    for b in shown:
        parent = index.get(id(b.parent), -1) if b.parent is not None else -1
        marker = _render.unreplayable(b)  # said in the note of the first payload the page shows
        first = "input" if b.raw_input is not None else "output" if b.raw_output is not None else "error"
        item: dict[str, Any] = {
            "name": cap(b.name, _MAX_NAME),
            "kind": cap(b.kind, 100),
            "kc": b.kind if b.kind in _KINDS else "other",
            "index": b.call_index,
            "key": cap(format_key(b.call_key), 4 * _MAX_NAME),
            "parent": parent,
            "start": _ms(b.start_ns - t0),
            "end": _ms(max(b.end_ns, b.start_ns) - t0),
            "status": _status(b),
            "message": cap(b.span.status_message, _MAX_VALUE) if b.span.status_message else "",
            "function": cap(b.function, _MAX_NAME) if isinstance(b.function, str) else "",
            "span_id": cap(b.span_id, 64),
            "stream": bool(b.stream),
            "stream_state": cap(b.stream_state, 64) if b.stream_state else "",
            "session": _session(b.session) if dict(b.session) != session else None,
            "unreplayable": marker or "",
            "input": _payload(b.raw_input, budget, _call_head(b), marker=marker),
            "output": _payload(b.raw_output, budget, stream=b, marker=marker if b.raw_input is None else None),
            "error": _payload(b.raw_error, budget, error=True, marker=marker if first == "error" else None),
            "stack": _stack(b, budget),
        }
        boundaries.append(item)
    errors = sum(1 for b in trace.boundaries if _status(b) == "ERROR")  # any call that failed: a trace "with errors"
    return {
        "version": __version__,
        "trace": {
            "id": cap(trace.trace_id, 64),
            "root": cap(root.name, _MAX_NAME) if root is not None else "",
            "status": _status(root) if root is not None else "",
            "started": _utc(root.start_ns) if root is not None else "-",
            "duration": _ms(max(root.end_ns - root.start_ns, 0)) if root is not None else 0,
            "span": _ms(t1 - t0),
            "boundaries": len(trace.boundaries),
            "shown": len(shown),
            "spans": len(trace.spans),
            "errors": errors,
            "source": cap(trace.source, _MAX_VALUE),
            "replay_of": cap(_replay_of(trace) or "", 64),
            "session": _session(session),
            "warnings": [cap(w, _MAX_VALUE) for w in trace.warnings[:_MAX_WARNINGS]],
            "more_warnings": max(0, len(trace.warnings) - _MAX_WARNINGS),
        },
        "limits": {
            "payload_chars": MAX_PAYLOAD_CHARS,
            "boundaries": MAX_BOUNDARIES,
            "page_chars": MAX_PAGE_PAYLOAD_CHARS,
            "budget_spent": budget.left < 0,
        },
        "boundaries": boundaries,
        "report": _report_data(report, trace, index) if report is not None else None,
    }


def _call_head(b: Boundary) -> str:
    name = b.function if isinstance(b.function, str) and b.function else b.name
    short = name.rsplit(".", 1)[-1] or name
    return short if short.isidentifier() else "call"


def _stack(b: Boundary, budget: _Budget) -> str:
    for event in b.span.events:
        if event.get("name") == "exception":
            attributes = event.get("attributes") or {}
            text = attributes.get(_STACKTRACE) if isinstance(attributes, Mapping) else None
            if isinstance(text, str) and text and budget.left > 0:
                return budget.take(cap(text, MAX_PAYLOAD_CHARS))
    return ""


_STATUS_NOTES: Final = {
    "rehydrated": "fetched from the payload store by its hash",
    "unverified": "no hash was recorded: the text is shown as found",
}


def _payload(
    payload: Payload | None,
    budget: _Budget,
    head: str = "",
    *,
    error: bool = False,
    stream: Boundary | None = None,
    marker: str | None = None,
) -> Any:
    """The views of one payload: ``json`` (pretty-printed), ``readable`` (typed values as Python would show
    them), the status and a note; None when the boundary has no such payload.

    ``stream``: the boundary whose output this is; when it streamed an LLM's message, the readable view starts with
    the message its items carried (``assembled``, also given as JSON), then the items. ``marker``: said first in the
    note (a payload that holds ``unencodable`` placeholders).
    """
    if payload is None:
        return None
    size = len(payload.text)
    notes = []
    if marker:
        notes.append(marker)
    if payload.status in _STATUS_NOTES:
        notes.append(_STATUS_NOTES[payload.status])
    if budget.left <= 0:
        notes.append(
            f"not embedded: this page already holds {MAX_PAGE_PAYLOAD_CHARS // (1024 * 1024)} M characters of "
            "payloads (use chronicle show for this boundary)"
        )
        return {"json": "", "readable": None, "status": payload.status, "note": "; ".join(notes), "size": size}
    parsed: Any = None
    ok = False
    if payload.complete and size <= _MAX_PARSE_CHARS:
        try:
            parsed, ok = orjson.loads(payload.text), True
        except orjson.JSONDecodeError:
            notes.append("not valid JSON: shown as recorded")
    if not payload.complete:
        digest = f" ({cap(payload.digest, 100)})" if payload.digest else ""
        notes.append(
            f"incomplete: only the first {size:,} characters were recorded, and no payload store has the whole "
            f"payload{digest}"
        )
    elif size > _MAX_PARSE_CHARS:
        notes.append(f"{size:,} characters: shown as recorded, not parsed")
    pretty = _pretty_json(parsed, payload.text) if ok else payload.text
    readable = readable_text(parsed, head=head, error=error, limit=MAX_PAYLOAD_CHARS) if ok else None
    message = _render.assembled_of(stream, parsed) if ok and stream is not None else None
    if message is not None and readable is not None:
        unit = message.head().split(",")[0]
        readable = "\n".join([*message.lines(None), "", f"the {unit}:", readable])
    cut = len(pretty) > MAX_PAYLOAD_CHARS or (readable is not None and len(readable) > MAX_PAYLOAD_CHARS)
    if cut:
        pretty = pretty[:MAX_PAYLOAD_CHARS]
        readable = readable[:MAX_PAYLOAD_CHARS] if readable is not None else None
        notes.append(f"cut at {MAX_PAYLOAD_CHARS // 1024} K characters (the recorded payload has {size:,})")
    return {
        "json": budget.take(pretty),
        "readable": budget.take(readable) if readable is not None else None,
        "status": payload.status,
        "note": "; ".join(notes),
        "size": size,
        "cut": cut,
        "typed": ok and _has_tags(parsed),
        "assembled": message.to_dict() if message is not None else None,
    }


def _pretty_json(value: Any, raw: str) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    except orjson.JSONEncodeError:  # nested deeper than orjson writes
        return raw


def _has_tags(value: Any, depth: int = 0) -> bool:
    if depth > MAX_DEPTH:
        return False
    if isinstance(value, dict):
        return "$type" in value or any(_has_tags(v, depth + 1) for v in value.values())
    if isinstance(value, list):
        return any(_has_tags(v, depth + 1) for v in value)
    return False


# --------------------------------------------------------------------------------------------------------------------
# The replay report


def _report_data(report: ReplayReport, trace: Trace, index: Mapping[int, int]) -> dict[str, Any]:
    by_key: dict[tuple[tuple[str, int], ...], int] = {}
    for b in trace.boundaries:
        i = index.get(id(b))
        if i is not None:
            by_key.setdefault(tuple(b.call_key), i)

    def at(key: Sequence[tuple[str, int]]) -> int:
        return by_key.get(tuple((str(n), int(i)) for n, i in key), -1)

    sections = []
    for name, title in SECTIONS:
        findings: list[Finding] = getattr(report, name)
        sections.append(
            {
                "name": name,
                "title": title,
                "count": len(findings),
                "findings": [
                    {
                        "kind": cap(f"{f.kind}, {f.cause}" if f.cause is not None and not f.change else f.kind, 100),
                        "key": cap(format_key(f.call_key), 4 * _MAX_NAME) if f.call_key else "",
                        "message": cap(f.message, _MAX_VALUE),
                        "details": [cap(d, _MAX_VALUE) for d in f.details[:50]],
                        "boundary": at(f.call_key),
                    }
                    for f in findings[:_MAX_FINDINGS]
                ],
            }
        )
    summary = str(report).split("\n", 1)[0]
    return {
        "ok": report.ok,
        "summary": cap(summary, _MAX_VALUE),
        "strict": report.strict,
        "sections": sections,
        "max_findings": _MAX_FINDINGS,
        "stubbed": sorted({at(k) for k in report.stubbed} - {-1}),
        "live": sorted({at(k) for k in report.live} - {-1}),
        "live_llm": sorted({at(k) for k in report.live_llm} - {-1}),
    }
