"""``chronicle view``: one self-contained HTML page of a trace.

The page holds the boundary tree (collapsible), a waterfall timeline, the session variables, a payload viewer with
a search box that filters boundaries by payload text, the errors highlighted, and the replay report when one is
given. It needs nothing but the file: no network, no CDN, no external font; the style and the script are inline
and allowed by their SHA-256 hashes in a Content-Security-Policy that forbids everything else.

Trace data is untrusted (anyone who can send spans writes it), so it never becomes markup. Every value is rendered
to text here, embedded as JSON inside ``<script type="application/json">`` with ``<``, ``>`` and ``&`` escaped
(and every non-ASCII character, U+2028/U+2029 included, as a ``\\uXXXX`` escape), read with ``JSON.parse`` and put
into the page with ``textContent`` only. The policy also requires Trusted Types with no policy allowed, so an
HTML string sink would be refused by the browser even if the script had one. Payloads are never decoded to
Python objects: the viewer reads their JSON and names the recorded classes without importing or building any.

Bounds: each payload text is cut at :data:`MAX_PAYLOAD_CHARS` characters, all payloads of a page together at
:data:`MAX_PAGE_PAYLOAD_CHARS`, and at most :data:`MAX_BOUNDARIES` boundaries are shown; the page says so where it
happens.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import dataclasses
import datetime as dt
import hashlib
import html
import json
import re
import sys
import webbrowser
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Final, TextIO, TypeAlias

import orjson

from ..codec import with_classes
from ..errors import ChronicleError
from ..model import Boundary, Payload, Trace, format_key
from ..replaying import Finding, FindingKind, ReplayReport
from ..semconv import REPLAY_OF
from ..version import __version__
from . import _render, _show, _source
from ._output import clean
from ._render import model_fields

NAME = "view"

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
_MAX_REPORT_BYTES = 16 * 1024 * 1024
_MAX_DEPTH = 64
_WIDTH = 100
_INDENT = "    "
_STACKTRACE = "exception.stacktrace"
_KINDS = frozenset({"llm", "tool", "retrieval", "guardrail", "agent", "memory", "custom"})
_REPORT_SECTIONS = (
    ("divergences", "Divergences"),
    ("drift", "Drift"),
    ("changes", "Changes"),
    ("overrides", "Overrides"),
    ("session", "Session variables that differ from the recording"),
)


# --------------------------------------------------------------------------------------------------------------------
# The command


def add_parser(sub: Any) -> None:
    """The ``view`` subcommand and its options."""
    p = sub.add_parser(
        NAME,
        help="write one self-contained HTML page of a trace: tree, timeline, payloads, search",
        description="Write one self-contained HTML page of a trace, to open in a browser with no network: the "
        "boundary tree, a timeline, the session variables, a payload viewer with search, the errors highlighted, and "
        "a replay report when one is given.",
    )
    p.add_argument("trace_id", help="32 hex digits, a unique prefix of them, or latest / latest-failed")
    _show.add_arguments(p)
    p.add_argument(
        "--out",
        metavar="FILE.html",
        help="the page to write, or a directory for it (default ./chronicle-<first 8 digits of the id>.html)",
    )
    p.add_argument("--open", action="store_true", help="then open the page in the web browser")
    p.add_argument(
        "--report",
        metavar="REPORT.json",
        help="a replay report of the trace to show with it: the JSON of dataclasses.asdict(run.report)",
    )


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``chronicle view``: write the page, print its path, open it when asked."""
    report = _read_report(args.report) if args.report else None
    return write_page(_source.load(args), args, out, report)


def write_page(
    trace: Trace,
    args: argparse.Namespace,
    out: TextIO,
    report: tuple[ReplayReport, str | None] | None = None,
) -> int:
    """Write the page of ``trace`` where ``args.out`` says, print its path, open it under ``args.open``.

    Args:
        trace: the trace.
        args: the parsed ``view`` arguments.
        out: where the path of the page is printed.
        report: a replay report and the trace id it names (if it names one).

    Returns:
        The exit status (0).

    Raises:
        ChronicleError: the page cannot be written.
    """
    if report is not None and report[1] is not None and report[1] != trace.trace_id:
        print(
            f"warning: the report {clean(args.report)} is of trace {clean(report[1])}, not {trace.trace_id}; its "
            "findings are shown, but may not match these boundaries",
            file=sys.stderr,
        )
    page = render_html(trace, report[0] if report is not None else None)
    default_name = f"chronicle-{_file_part(trace.trace_id[:8])}.html"
    path = Path(args.out) if args.out else Path(default_name)
    if path.is_dir():
        path = path / default_name
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise ChronicleError(f"cannot write the page {clean(path)}: {exc.strerror or exc}") from None
    print(path, file=out)
    if args.open and not webbrowser.open(path.resolve().as_uri()):
        print(f"chronicle: no web browser found; open {path.resolve().as_uri()} yourself", file=sys.stderr)
    return 0


def _file_part(text: str) -> str:
    return re.sub(r"[^0-9A-Za-z_-]", "_", text) or "trace"


# --------------------------------------------------------------------------------------------------------------------
# Replay reports as JSON


def load_report(path: str | Path) -> ReplayReport:
    """Read a replay report written as JSON (``json.dumps(dataclasses.asdict(run.report))``).

    Args:
        path: the JSON file.

    Returns:
        The report.

    Raises:
        ChronicleError: the file cannot be read, is not JSON or not a report.
    """
    return _read_report(path)[0]


def _read_report(path: str | Path) -> tuple[ReplayReport, str | None]:
    where = f"--report {clean(path)}"
    try:
        with open(path, "rb") as f:
            raw = f.read(_MAX_REPORT_BYTES + 1)
    except OSError as exc:
        raise ChronicleError(f"{where}: {exc.strerror or exc}") from None
    if len(raw) > _MAX_REPORT_BYTES:
        raise ChronicleError(f"{where}: larger than {_MAX_REPORT_BYTES // (1024 * 1024)} MB")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ChronicleError(f"{where}: not JSON ({exc})") from None
    report = report_from_dict(data, where=where)
    trace_id = data.get("trace_id") if isinstance(data, dict) else None
    return report, trace_id if isinstance(trace_id, str) else None


def report_from_dict(data: object, where: str = "the report") -> ReplayReport:
    """A :class:`~chronicle_otel.replaying.ReplayReport` from its JSON form, every field checked.

    The form is the one ``dataclasses.asdict(report)`` gives (call keys as lists of ``[name, index]``); other
    keys (``ok``, ``trace_id``) are ignored.

    Args:
        data: the parsed JSON.
        where: names the source in error messages.

    Returns:
        The report.

    Raises:
        ChronicleError: ``data`` is not a report.
    """
    if not isinstance(data, dict):
        raise ChronicleError(f"{where}: expected a JSON object (a replay report), got {type(data).__name__}")
    findings: dict[str, list[Finding]] = {}
    for name, _ in _REPORT_SECTIONS:
        items = data.get(name, [])
        if not isinstance(items, list):
            raise ChronicleError(f"{where}: {name} must be a list of findings")
        findings[name] = [_finding(item, f"{where}: {name}[{i}]") for i, item in enumerate(items)]
    keys: dict[str, list[tuple[tuple[str, int], ...]]] = {}
    for name in ("stubbed", "live", "live_llm"):
        items = data.get(name, [])
        if not isinstance(items, list):
            raise ChronicleError(f"{where}: {name} must be a list of call keys")
        keys[name] = [_call_key(item, f"{where}: {name}[{i}]") for i, item in enumerate(items)]
    strict = data.get("strict", False)
    if not isinstance(strict, bool):
        raise ChronicleError(f"{where}: strict must be true or false")
    return ReplayReport(
        divergences=findings["divergences"],
        drift=findings["drift"],
        changes=findings["changes"],
        overrides=findings["overrides"],
        session=findings["session"],
        stubbed=keys["stubbed"],
        live=keys["live"],
        live_llm=keys["live_llm"],
        strict=strict,
    )


def _finding(item: object, where: str) -> Finding:
    if not isinstance(item, dict):
        raise ChronicleError(f"{where}: expected an object with kind, call_key, message and details")
    kind, message, details = item.get("kind"), item.get("message", ""), item.get("details", [])
    if not isinstance(kind, str) or not isinstance(message, str):
        raise ChronicleError(f"{where}: kind and message must be strings")
    if not isinstance(details, list) or not all(isinstance(d, str) for d in details):
        raise ChronicleError(f"{where}: details must be a list of strings")
    call_key = _call_key(item.get("call_key", []), where)
    try:
        known = FindingKind(kind)
    except ValueError:
        raise ChronicleError(f"{where}: unknown kind {kind!r} (a FindingKind: {', '.join(FindingKind)})") from None
    return Finding(known, call_key, message, tuple(details))


def _call_key(item: object, where: str) -> tuple[tuple[str, int], ...]:
    if not isinstance(item, list):
        raise ChronicleError(f"{where}: a call key is a list of [name, index] pairs")
    key = []
    for part in item:
        if (
            not isinstance(part, list)
            or len(part) != 2
            or not isinstance(part[0], str)
            or not isinstance(part[1], int)
            or isinstance(part[1], bool)
        ):
            raise ChronicleError(f"{where}: a call key is a list of [name, index] pairs, got {_short(part)}")
        key.append((part[0], part[1]))
    return tuple(key)


def _short(value: object) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:59] + "…"


# --------------------------------------------------------------------------------------------------------------------
# The page


def render_html(trace: Trace, report: ReplayReport | None = None) -> str:
    """The self-contained HTML page of ``trace`` (and of a replay report of it).

    Args:
        trace: the trace to show.
        report: a replay report of it, shown in its own panel and beside the boundaries it names.

    Returns:
        The whole page: one HTML document with its style, script and data inline.
    """
    data = _page_data(trace, report)
    style, script = _asset("_view.css"), _asset("_view.js")
    policy = (
        "default-src 'none'; "
        f"script-src '{_sha256(script)}'; "
        f"style-src '{_sha256(style)}'; "
        "img-src data:; base-uri 'none'; form-action 'none'; "
        "require-trusted-types-for 'script'; trusted-types 'none'"
    )
    name = _CONTROL.sub("?", trace.root.name[:80]) if trace.root else "trace"
    title = f"chronicle · {name} · {trace.trace_id[:8]}".encode("utf-8", "replace").decode("utf-8")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(policy, quote=False)}">\n'
        '<meta name="referrer" content="no-referrer">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="generator" content="chronicle view">\n'
        '<link rel="icon" href="data:,">\n'
        f"<title>{html.escape(title)}</title>\n"
        f"<style>{style}</style>\n"
        "</head>\n<body>\n"
        f"{_BODY}"
        f'<script type="application/json" id="chronicle-data">{_json_for_script(data)}</script>\n'
        f"<script>{script}</script>\n"
        "</body>\n</html>\n"
    )


_BODY: Final = """\
<noscript><p class="noscript">This page shows the trace with JavaScript, which is switched off.</p></noscript>
<header id="head"></header>
<section id="panels"></section>
<main id="app">
<nav id="side" aria-label="Boundaries">
<div class="searchbar"><input id="search" type="search" placeholder="Search names and payloads  ( / )"
 aria-label="Search boundaries by name and payload text" autocomplete="off" spellcheck="false">
<span id="matches" aria-live="polite"></span></div>
<div id="tree" role="tree" aria-label="Boundary tree"></div>
</nav>
<div id="content">
<section id="timeline" aria-label="Timeline"></section>
<section id="details" aria-label="Selected boundary"></section>
</div>
</main>
<footer id="foot"></footer>
"""


def _asset(name: str) -> str:
    return resources.files(__package__ or "chronicle_otel.cli").joinpath(name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def _json_for_script(data: object) -> str:
    """``data`` as JSON that is inert inside a ``<script>`` element.

    ``ensure_ascii`` writes every non-ASCII character as an escape (U+2028/U+2029, lone surrogates included);
    ``<``, ``>`` and ``&`` become escapes too, so no ``</script>``, ``<!--`` or character reference can appear.
    """
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _cap(text: object, limit: int = _MAX_NAME) -> str:
    value = text if isinstance(text, str) else str(text)
    return value if len(value) <= limit else value[: limit - 1] + "…"


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
        return _cap(value, _MAX_VALUE)
    try:
        return _cap(json.dumps(value, ensure_ascii=False, default=str), _MAX_VALUE)
    except (TypeError, ValueError):
        return _cap(repr(value), _MAX_VALUE)


def _session(values: Mapping[str, Any]) -> list[list[str]]:
    return [[_cap(k, _MAX_NAME), _value_text(v)] for k, v in sorted(values.items(), key=lambda kv: str(kv[0]))]


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


def _page_data(trace: Trace, report: ReplayReport | None) -> dict[str, Any]:
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
            "name": _cap(b.name),
            "kind": _cap(b.kind, 100),
            "kc": b.kind if b.kind in _KINDS else "other",
            "index": b.call_index,
            "key": _cap(format_key(b.call_key), 4 * _MAX_NAME),
            "parent": parent,
            "start": _ms(b.start_ns - t0),
            "end": _ms(max(b.end_ns, b.start_ns) - t0),
            "status": _status(b),
            "message": _cap(b.span.status_message, _MAX_VALUE) if b.span.status_message else "",
            "function": _cap(b.function) if isinstance(b.function, str) else "",
            "span_id": _cap(b.span_id, 64),
            "stream": bool(b.stream),
            "stream_state": _cap(b.stream_state, 64) if b.stream_state else "",
            "session": _session(b.session) if dict(b.session) != session else None,
            "unreplayable": marker or "",
            "input": _payload(b.raw_input, budget, _call_head(b), marker=marker),
            "output": _payload(b.raw_output, budget, stream=b, marker=marker if b.raw_input is None else None),
            "error": _payload(b.raw_error, budget, error=True, marker=marker if first == "error" else None),
            "stack": _stack(b, budget),
        }
        boundaries.append(item)
    failed = sum(1 for b in trace.boundaries if _status(b) == "ERROR")
    return {
        "version": __version__,
        "trace": {
            "id": _cap(trace.trace_id, 64),
            "root": _cap(root.name) if root is not None else "",
            "status": _status(root) if root is not None else "",
            "started": _utc(root.start_ns) if root is not None else "-",
            "duration": _ms(max(root.end_ns - root.start_ns, 0)) if root is not None else 0,
            "span": _ms(t1 - t0),
            "boundaries": len(trace.boundaries),
            "shown": len(shown),
            "spans": len(trace.spans),
            "errors": failed,
            "source": _cap(trace.source, _MAX_VALUE),
            "replay_of": _cap(_replay_of(trace) or "", 64),
            "session": _session(session),
            "warnings": [_cap(w, _MAX_VALUE) for w in trace.warnings[:_MAX_WARNINGS]],
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
                return budget.take(_cap(text, MAX_PAYLOAD_CHARS))
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
        digest = f" ({_cap(payload.digest, 100)})" if payload.digest else ""
        notes.append(
            f"incomplete: only the first {size:,} characters were recorded, and no payload store has the whole "
            f"payload{digest}"
        )
    elif size > _MAX_PARSE_CHARS:
        notes.append(f"{size:,} characters: shown as recorded, not parsed")
    pretty = _pretty_json(parsed, payload.text) if ok else payload.text
    readable = _readable(parsed, head=head, error=error) if ok else None
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
    if depth > _MAX_DEPTH:
        return False
    if isinstance(value, dict):
        return "$type" in value or any(_has_tags(v, depth + 1) for v in value.values())
    if isinstance(value, list):
        return any(_has_tags(v, depth + 1) for v in value)
    return False


# --------------------------------------------------------------------------------------------------------------------
# Typed values shown readably: Intent(category='refund', confidence=0.75), Decimal('49.99'), Color.RED…


@dataclasses.dataclass
class _Group:
    """A container: ``open`` items ``close``, each item ``prefix`` + node; laid out on one line when it fits."""

    open: str
    close: str
    items: list[tuple[str, _Node]]
    one_tuple: bool = False


_Node: TypeAlias = "str | _Group"


class _Full(Exception):
    """The readable text reached its size bound."""


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


class _Converter:
    """JSON of the chronicle codec → display nodes, bounded in nodes and depth."""

    def __init__(self, nodes: int = 200_000) -> None:
        self.left = nodes

    def node(self, value: Any, depth: int = 0) -> _Node:
        self.left -= 1
        if self.left < 0 or depth > _MAX_DEPTH:
            return "…"
        if isinstance(value, str):
            return _string(value)
        if value is None or isinstance(value, (bool, int, float)):
            return repr(value)
        if isinstance(value, list):
            return _Group("[", "]", [("", self.node(v, depth + 1)) for v in with_classes(value)])
        if isinstance(value, dict):
            tag = value.get("$type")
            if isinstance(tag, str):
                typed = self.tagged(tag, value, depth)
                if typed is not None:
                    return typed
            return _Group("{", "}", [(f"{_string(str(k))}: ", self.node(v, depth + 1)) for k, v in value.items()])
        return _cap(repr(value), 200)

    def fields(self, head: str, data: Any, depth: int) -> _Node:
        if isinstance(data, dict):
            return _Group(f"{head}(", ")", [(f"{_field(k)}=", self.node(v, depth + 1)) for k, v in data.items()])
        return _Group(f"{head}(", ")", [("", self.node(data, depth + 1))])

    def tagged(self, tag: str, v: dict[str, Any], depth: int) -> _Node | None:
        short = _class_name(v.get("class"))
        if tag in ("pydantic", "dataclass", "namedtuple"):
            return self.fields(short, model_fields(v), depth)
        if tag == "enum":
            name = v.get("name")
            return f"{short}.{name}" if isinstance(name, str) and name.isidentifier() else self.fields(short, v, depth)
        if tag in ("tuple", "set", "frozenset"):
            items = v.get("items")
            if not isinstance(items, list):
                return None
            nodes = [("", self.node(x, depth + 1)) for x in items]
            if tag == "tuple":
                return _Group("(", ")", nodes, one_tuple=len(nodes) == 1)
            if not nodes:
                return f"{tag}()"
            return _Group("{", "}", nodes) if tag == "set" else _Group("frozenset({", "})", nodes)
        if tag == "dict":
            items = v.get("items")
            if not isinstance(items, list) or not all(isinstance(kv, list) and len(kv) == 2 for kv in items):
                return None
            return _Group(
                "{", "}", [(f"{_one_line(self.node(k, depth + 1))}: ", self.node(x, depth + 1)) for k, x in items]
            )
        if tag == "exception":
            args = v.get("args")
            nodes = [("", self.node(a, depth + 1)) for a in args] if isinstance(args, list) else []
            if not nodes and isinstance(v.get("message"), str):
                nodes = [("", _string(v["message"]))]
            return _Group(f"{short}(", ")", nodes)
        if tag == "custom":
            return self.fields(short, v.get("data"), depth)
        if tag == "unencodable":
            return f"<unencodable {_cap(v.get('class', '?'), 200)}: {_cap(v.get('repr', ''), 500)}>"
        return self.scalar(tag, v)

    def scalar(self, tag: str, v: dict[str, Any]) -> _Node | None:
        value = v.get("value")
        if tag == "decimal" and isinstance(value, str):
            return f"Decimal({_string(value)})"
        if tag == "uuid" and isinstance(value, str):
            return f"UUID({_string(value)})"
        if tag == "int" and isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value):
            return value
        if tag == "float" and isinstance(value, str):
            return f"float({_string(value)})"
        if tag == "path" and isinstance(value, str):
            return f"{'PurePath' if v.get('pure') else 'Path'}({_string(value)})"
        iso = v.get("iso")
        if tag in ("datetime", "date", "time") and isinstance(iso, str):
            tz = v.get("tz")
            zone = f", tz={_string(tz)}" if isinstance(tz, str) else ""
            return f"{tag}({_string(iso)}{zone})"
        if tag == "timedelta":
            parts = [f"{k}={v[k]}" for k in ("days", "seconds", "microseconds") if isinstance(v.get(k), int) and v[k]]
            return f"timedelta({', '.join(parts)})"
        if tag == "complex":
            return f"complex({_one_line(self.node(v.get('real')))}, {_one_line(self.node(v.get('imag')))})"
        if tag == "bytes" and isinstance(v.get("b64"), str):
            try:
                raw = base64.b64decode(v["b64"][: 4 * MAX_PAYLOAD_CHARS], validate=True)
            except (binascii.Error, ValueError):
                return f"bytes(b64={_string(_cap(v['b64'], 200))})"
            return _cap(repr(raw), MAX_PAYLOAD_CHARS)
        return None


def _class_name(name: object) -> str:
    """``Intent`` of ``supportbot.agent.Intent``; a name that is no identifier is quoted."""
    if not isinstance(name, str) or not name:
        return "object"
    short = name.rsplit(".", 1)[-1]
    return short if short.isidentifier() else f"<{_cap(name, 200)}>"


def _field(name: object) -> str:
    text = str(name)
    return text if text.isidentifier() else _string(text)


def _string(text: str) -> str:
    """A string as a Python literal; a long text of several lines keeps its line breaks in triple quotes."""
    if "\n" in text and len(text) > 40:
        body = _CONTROL.sub(lambda m: ascii(m.group())[1:-1], text).replace('"""', '\\"\\"\\"')
        if body.endswith('"'):
            body = body[:-1] + '\\"'
        return f'"""{body}"""'
    return repr(text)


def _one_line(node: _Node) -> str:
    text = _compact(node, 400)
    return text if text is not None else "…"


def _compact(node: _Node, limit: int) -> str | None:
    """``node`` on one line when it takes at most ``limit`` characters; else None (stops as soon as it knows)."""
    if isinstance(node, str):
        return node if len(node) <= limit and "\n" not in node else None
    used = len(node.open) + len(node.close) + (1 if node.one_tuple else 0)
    parts = []
    for i, (prefix, child) in enumerate(node.items):
        sep = ", " if i else ""
        text = _compact(child, limit - used - len(sep) - len(prefix))
        if text is None:
            return None
        parts.append(f"{sep}{prefix}{text}")
        used += len(parts[-1])
        if used > limit:
            return None
    return f"{node.open}{''.join(parts)}{',' if node.one_tuple else ''}{node.close}"


def _layout(node: _Node, indent: str, out: list[str], left: list[int]) -> None:
    text = _compact(node, max(_WIDTH - len(indent), 40))
    if text is None and isinstance(node, str):
        text = node
    if text is not None:
        _emit(text, out, left)
        return
    assert isinstance(node, _Group)
    inner = indent + _INDENT
    _emit(node.open + "\n", out, left)
    for prefix, child in node.items:
        _emit(inner + prefix, out, left)
        _layout(child, inner, out, left)
        _emit(",\n", out, left)
    _emit(indent + node.close, out, left)


def _emit(text: str, out: list[str], left: list[int]) -> None:
    if len(text) > left[0]:
        out.append(text[: left[0]])
        raise _Full
    left[0] -= len(text)
    out.append(text)


def _readable(value: Any, head: str = "", *, error: bool = False) -> str:
    """``value`` (a payload's JSON) as text a person reads: typed values as Python shows them, a call's input as
    ``name(arg=value)``, an error as ``ValueError('message')``; at most :data:`MAX_PAYLOAD_CHARS` characters (one
    more means it was cut)."""
    converter = _Converter()
    node: _Node
    if error and isinstance(value, dict) and "$type" not in value:
        node = converter.tagged(
            "exception", {"class": value.get("type"), "args": value.get("args"), "message": value.get("message")}, 0
        ) or converter.node(value)
        if isinstance(node, _Group) and isinstance(value.get("attrs"), dict):
            node.items.extend((f"{_field(k)}=", converter.node(x, 1)) for k, x in value["attrs"].items())
    elif head and isinstance(value, dict) and "$type" not in value:
        node = converter.fields(head, value, 0)
    else:
        node = converter.node(value)
    out: list[str] = []
    with contextlib.suppress(_Full, RecursionError):
        _layout(node, "", out, [MAX_PAYLOAD_CHARS + 1])
    return "".join(out)


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
    for name, title in _REPORT_SECTIONS:
        findings: list[Finding] = getattr(report, name)
        sections.append(
            {
                "name": name,
                "title": title,
                "count": len(findings),
                "findings": [
                    {
                        "kind": _cap(f.kind, 100),
                        "key": _cap(format_key(f.call_key), 4 * _MAX_NAME) if f.call_key else "",
                        "message": _cap(f.message, _MAX_VALUE),
                        "details": [_cap(d, _MAX_VALUE) for d in f.details[:50]],
                        "boundary": at(f.call_key),
                    }
                    for f in findings[:_MAX_FINDINGS]
                ],
            }
        )
    summary = str(report).split("\n", 1)[0]
    return {
        "ok": report.ok,
        "summary": _cap(summary, _MAX_VALUE),
        "strict": report.strict,
        "sections": sections,
        "max_findings": _MAX_FINDINGS,
        "stubbed": sorted({at(k) for k in report.stubbed} - {-1}),
        "live": sorted({at(k) for k in report.live} - {-1}),
        "live_llm": sorted({at(k) for k in report.live_llm} - {-1}),
    }
