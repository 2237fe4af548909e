"""``chronicle show``: a trace's boundaries as a tree, with their values as Python shows them."""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
from collections.abc import Sequence
from typing import Any, TextIO

from ..errors import ConfigError
from ..model import Boundary, Payload, Trace, format_key
from ..replaying import resolve_overrides
from ..semconv import REPLAY_OF
from . import _render, _source
from ._list import duration
from ._output import STATUS_STYLE, Output, Part, clean

NAME = "show"
_PLAIN_WIDTH = 100  # characters of a cut value in a pipe


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options ``show``, ``gen-test`` and ``diff`` share: where the trace is read."""
    p.add_argument("--store", help="store directory (default $CHRONICLE_HOME or ./.chronicle)")
    p.add_argument("--file", help="read the trace from this OTLP/JSON file instead of the store")
    p.add_argument("--payloads", help=_source.PAYLOADS_HELP)


def add_parser(sub: Any) -> None:
    """The ``show`` subcommand and its options."""
    p = sub.add_parser(
        NAME,
        help="show a trace's boundaries and their values",
        description="Show a trace: its boundaries as a tree, each with its input and output (or error) as Python "
        "shows them. Values are cut to one line unless --full; --boundary shows chosen calls whole. A streamed LLM "
        "call shows the message its items carried (text, tool calls, usage); --full adds every item, --raw shows "
        "the items only.",
    )
    p.add_argument("trace_id", help="32 hex digits, a unique prefix of them, or latest / latest-failed / latest-error")
    add_arguments(p)
    p.add_argument("--full", action="store_true", help="show every value whole, over several lines when long")
    p.add_argument("--raw", action="store_true", help="show a stream's items as recorded, not the message they carry")
    p.add_argument(
        "--boundary",
        action="append",
        default=[],
        metavar="NAME_OR_KEY",
        help="show only these calls, whole: a name (every call of it) or a call key ('plan[0]', "
        "'run_agent[0] > plan[1]'); repeatable",
    )
    p.add_argument("--json", action="store_true", help="the trace as JSON: boundaries with their payloads")


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``chronicle show``."""
    trace = _source.load(args)
    chosen = select(trace, args.boundary, "--boundary")
    if args.json:
        Output(out, colour=False).json(document(trace, chosen))
        return 0
    output = Output(out)
    header(trace, output)
    raw = bool(getattr(args, "raw", False))
    if chosen is None:
        width = None if args.full else _width(output)
        for b, depth in tree(trace.boundaries):
            _tree_entry(b, depth, output, width, raw=raw)
    else:
        for b in chosen:
            _detail(b, output, raw=raw)
    for warning in trace.warnings:
        output.line(("warning: ", "yellow"), clean(warning))
    return 0


def select(trace: Trace, wanted: list[str], option: str) -> list[Boundary] | None:
    """The boundaries ``wanted`` names (names or call keys), in call order; None when nothing is asked for.

    Raises:
        ConfigError: a name or key that names no recorded call (the recorded ones listed, the closest first).
    """
    if not wanted:
        return None
    span_ids: set[str] = set()
    for text in wanted:
        try:
            span_ids.update(resolve_overrides({text: None}, trace))
        except ConfigError as err:
            raise ConfigError(option, text, err.expected) from None
    return [b for b in trace.boundaries if b.span_id in span_ids]


def replay_of(trace: Trace) -> str | None:
    """The trace id a replayed trace reran (``chronicle.replay.of`` on its spans); None for a production run."""
    for span in trace.spans:
        value = span.attributes.get(REPLAY_OF)
        if isinstance(value, str) and value:
            return value
    return None


def status(b: Boundary) -> str:
    """``OK`` or ``ERROR`` (a span status of ``UNSET`` is a call that returned)."""
    return "ERROR" if b.status == "ERROR" or b.raw_error is not None else "OK"


def header(trace: Trace, out: Output) -> None:
    """The trace's id, what it replays, its size, status, time and session."""
    recorded = replay_of(trace)
    label: list[Part] = [("  replay of ", "magenta"), (clean(recorded), "magenta")] if recorded is not None else []
    size = f"  ({len(trace.boundaries)} boundaries, {len(trace.spans)} spans)"
    out.line(("trace ", "bold"), (trace.trace_id, "bold yellow"), *label, size)
    root = trace.root
    if root is None:
        return
    state = status(root)
    when = dt.datetime.fromtimestamp(root.start_ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    out.line((state, STATUS_STYLE[state]), f"  {when}  {duration(root.end_ns - root.start_ns)}")
    if root.session:
        values = ", ".join(f"{k}={_session_value(v)}" for k, v in sorted(root.session.items()))
        out.line(("session: ", "dim"), clean(values))


def _session_value(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def _width(out: Output) -> int:
    if not out.colour:
        return _PLAIN_WIDTH
    return max(60, shutil.get_terminal_size((120, 24)).columns)


def _label(b: Boundary) -> list[Part]:
    state = status(b)
    parts: list[Part] = [
        (f"{clean(b.kind):9s}", "cyan"),
        " ",
        (f"{clean(b.name)}[{b.call_index}]", "bold"),
        f"  {duration(b.end_ns - b.start_ns)}  ",
        (state, STATUS_STYLE[state]),
    ]
    if b.stream:
        parts.append((f"  stream {clean(b.stream_state or '')}".rstrip(), "dim"))
    marker = _render.unreplayable(b)
    if marker is not None:
        parts.append((f"  {clean(marker)}", "red"))
    return parts


def tree(boundaries: Sequence[Boundary]) -> list[tuple[Boundary, int]]:
    """``boundaries`` (in start order) depth first, each with its depth: every call under its parent boundary (by
    parent span, as the HTML view nests them), so the children of calls that ran in parallel stay under their own
    parent. A boundary whose parent is not among them starts a tree of its own."""
    ids = {id(b) for b in boundaries}
    children: dict[int, list[Boundary]] = {}
    tops: list[Boundary] = []
    for b in boundaries:
        if b.parent is not None and id(b.parent) in ids and b.parent is not b:
            children.setdefault(id(b.parent), []).append(b)
        else:
            tops.append(b)
    order: list[tuple[Boundary, int]] = []
    stack = [(b, 0) for b in reversed(tops)]
    seen: set[int] = set()
    while stack:
        b, depth = stack.pop()
        if id(b) in seen:
            continue
        seen.add(id(b))
        order.append((b, depth))
        stack.extend((c, depth + 1) for c in reversed(children.get(id(b), [])))
    return order


def _tree_entry(b: Boundary, depth: int, out: Output, width: int | None, *, raw: bool = False) -> None:
    indent = "  " * depth
    out.line(indent, *_label(b))
    pad = indent + "    "
    line_width = None if width is None else max(20, width - len(pad) - 5)
    _value(out, pad, "in : ", b.raw_input, line_width, args=True)
    if b.raw_error is not None and not b.stream:
        _value(out, pad, "err: ", b.raw_error, line_width, error=True)
        return
    stream = None if raw else stream_lines(b, line_width)
    if stream is not None:
        out.line(pad, ("out:", "dim"))
        for line in stream:
            out.line(pad, "    ", clean(line))
    else:
        _value(out, pad, "out: ", b.raw_output, line_width)
    if b.raw_error is not None:
        _value(out, pad, "err: ", b.raw_error, line_width, error=True)


def stream_lines(b: Boundary, width: int | None) -> list[str] | None:
    """A streamed call's output as the message its items carried (the items after it when ``width`` is None: in
    full); None when it did not stream, or streamed items of no kind :mod:`chronicle_otel._assembled` knows."""
    payload = b.raw_output
    if not b.stream or payload is None or not payload.complete:
        return None
    parsed, value = _render.parse(payload.text)
    message = _render.assembled_of(b, value) if parsed else None
    if message is None:
        return None
    lines = message.lines(width)
    if width is None:
        lines.append(f"the {message.head().split(',')[0]}:")
        lines += ["    " + line for line in _render.render(value, width=None)]
    return lines


def _value(
    out: Output,
    pad: str,
    label: str,
    payload: Payload | None,
    width: int | None,
    *,
    args: bool = False,
    error: bool = False,
) -> None:
    style = "red" if error else "dim"
    lines = payload_lines(payload, width, args=args, error=error)
    if len(lines) == 1:
        out.line(pad, (label, style), clean(lines[0]))
        return
    out.line(pad, (label.rstrip(), style))
    for line in lines:
        out.line(pad, "    ", clean(line))


def payload_lines(payload: Payload | None, width: int | None, *, args: bool = False, error: bool = False) -> list[str]:
    """A payload as readable lines: one cut line for a ``width``, else all of it. A payload that no store holds
    whole shows the part the span kept, and says so."""
    if payload is None:
        return ["-"]
    if not payload.complete:
        kept = payload.text if width is None or len(payload.text) <= width else payload.text[: width - 1] + "…"
        digest = (payload.digest or "no hash")[:19]
        return [f"{kept}  [cut to {len(payload.text)} characters; no payload store has {digest}…]"]
    parsed, value = _render.parse(payload.text)
    if not parsed:
        text = str(value)
        return [text if width is None or len(text) <= width else text[: width - 1] + "…"]
    return _render.render(value, width=width, args=args, error=error)


def _detail(b: Boundary, out: Output, *, raw: bool = False) -> None:
    out.line(*_label(b), ("  " + format_key(b.call_key), "dim"))
    fields = [
        ("span", b.span_id + (f"  (parent {b.parent.span_id})" if b.parent is not None else "")),
        ("function", b.function or "-"),
        ("started", dt.datetime.fromtimestamp(b.start_ns / 1e9, dt.timezone.utc).isoformat(timespec="microseconds")),
    ]
    if b.session:
        fields.append(("session", ", ".join(f"{k}={_session_value(v)}" for k, v in sorted(b.session.items()))))
    for name, value in fields:
        out.line("    ", (f"{name:9s}", "dim"), clean(value))
    payloads = [("input", b.raw_input, {"args": True}), ("output", b.raw_output, {})]
    if b.raw_error is not None:
        payloads = [payloads[0], ("error", b.raw_error, {"error": True})]
    if b.stream and b.raw_error is not None:
        payloads.insert(1, ("output", b.raw_output, {}))
    for name, payload, how in payloads:
        state = f" ({payload.status}, {len(payload.text)} characters)" if payload is not None else ""
        out.line("    ", (f"{name}{state}:", "red" if name == "error" else "dim"))
        stream = stream_lines(b, None) if name == "output" and not raw else None
        for line in stream if stream is not None else payload_lines(payload, None, **how):
            out.line("        ", clean(line))


def document(trace: Trace, chosen: list[Boundary] | None = None) -> dict[str, Any]:
    """The trace as a JSON document: payloads as their canonical JSON (type tags kept), parsed."""
    root = trace.root
    return {
        "trace_id": trace.trace_id,
        "replay_of": replay_of(trace),
        "status": status(root) if root is not None else None,
        "root": root.name if root is not None else None,
        "start_ns": root.start_ns if root is not None else None,
        "duration_ms": (root.end_ns - root.start_ns) / 1e6 if root is not None else None,
        "session": dict(root.session) if root is not None else {},
        "spans": len(trace.spans),
        "boundaries": [boundary_document(b) for b in (trace.boundaries if chosen is None else chosen)],
        "warnings": list(trace.warnings),
    }


def boundary_document(b: Boundary) -> dict[str, Any]:
    """One boundary as JSON; a payload no store holds whole is null, and listed under ``incomplete``."""
    doc: dict[str, Any] = {
        "name": b.name,
        "kind": b.kind,
        "call_key": format_key(b.call_key),
        "call_index": b.call_index,
        "span_id": b.span_id,
        "parent_span_id": b.parent.span_id if b.parent is not None else None,
        "function": b.function,
        "status": status(b),
        "start_ns": b.start_ns,
        "duration_ms": (b.end_ns - b.start_ns) / 1e6,
        "stream": b.stream_state if b.stream else None,
        "session": dict(b.session),
    }
    incomplete = []
    doc["assembled"] = None
    doc["unreplayable"] = _render.unreplayable(b)
    for name, payload in (("input", b.raw_input), ("output", b.raw_output), ("error", b.raw_error)):
        if payload is None:
            doc[name] = None
        elif not payload.complete:
            doc[name] = None
            incomplete.append(name)
        else:
            parsed, value = _render.parse(payload.text)
            doc[name] = value if parsed else None
            if not parsed:
                incomplete.append(name)
            elif name == "output":
                message = _render.assembled_of(b, value)
                doc["assembled"] = message.to_dict() if message is not None else None
    doc["incomplete"] = incomplete
    return doc
