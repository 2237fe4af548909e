"""``chronicle list``: find the run that matters, by status, root, session variable, time or payload text."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from .._internal import ages
from .._internal.sessions import session_matches
from ..errors import ChronicleError
from ..load import load_trace
from ..model import Trace
from ..store.reader import StoreReader, TraceSummary
from . import _source
from ._output import STATUS_STYLE, Output, Part, clean, progress, table

NAME = "list"
DEFAULT_SCAN = 1000
"""Most recent traces read by ``--where`` and ``--contains`` unless ``--scan`` says otherwise."""
_SHORT_ID = 8


def add_parser(sub: Any) -> None:
    """The ``list`` subcommand and its options."""
    p = sub.add_parser(
        NAME,
        help="list recorded traces, newest first; filter by status, root, session variable, time or payload text",
        description="List recorded traces, newest first. Filters combine (all must hold). --failed, --errors, --root, "
        "--since and an id prefix are answered by the store's index; --where and --contains read the traces, the "
        f"--scan most recent ones ({DEFAULT_SCAN} by default) that pass the other filters.",
    )
    p.add_argument("prefix", nargs="?", help="only trace ids starting with these hex digits")
    p.add_argument("--store", help="store directory (default $CHRONICLE_HOME or ./.chronicle)")
    p.add_argument("--failed", action="store_true", help="only failed runs: traces whose root failed")
    p.add_argument(
        "--errors",
        action="store_true",
        help="only traces with an error: any span that failed, the root's or another's (a retried tool call counts)",
    )
    p.add_argument("--root", metavar="NAME", help="only traces whose root boundary is NAME (a glob: 'support_*')")
    p.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="session.KEY=VALUE",
        help="only traces recorded with this session variable (repeatable: all must match)",
    )
    p.add_argument(
        "--since",
        type=since,
        metavar="WHEN",
        help="only traces started since: an age (30m, 2h, 3d, 1w) or a UTC date or time (2026-11-30, 2026-11-30T10:00)",
    )
    p.add_argument(
        "--contains",
        metavar="TEXT",
        help="only traces with TEXT in a payload (input, output or error; case-insensitive)",
    )
    p.add_argument("--replays", action="store_true", help="also list replays recorded into the store, marked")
    p.add_argument("-n", "--limit", type=_positive, default=20, help="at most this many traces (default %(default)s)")
    p.add_argument(
        "--scan",
        type=_positive,
        default=DEFAULT_SCAN,
        metavar="N",
        help="--where and --contains read at most the N most recent traces (default %(default)s)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per trace, one per line")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return value


def since(text: str, now: Callable[[], float] = time.time) -> int:
    """``2h`` (an age), ``2026-11-30`` or ``2026-11-30T10:00`` (UTC unless an offset is given), as ns since the
    epoch (an ``argparse`` type)."""
    try:
        return ages.since(text, now)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _conditions(args: argparse.Namespace) -> list[tuple[str, str]]:
    """``--where`` options as ``(key, value)`` pairs."""
    pairs = []
    for option in args.where:
        key, sep, value = option.partition("=")
        key = key.strip()
        if not sep or not key.startswith("session.") or not key[len("session.") :]:
            raise ChronicleError(f"--where {option!r}: expected session.KEY=VALUE (e.g. session.user=alice)")
        pairs.append((key[len("session.") :], value))
    return pairs


def contains(trace: Trace, text: str) -> bool:
    """True when ``text`` (case-insensitive) is in the canonical JSON of a payload of ``trace``."""
    wanted = text.casefold()
    for b in trace.boundaries:
        for payload in (b.raw_input, b.raw_output, b.raw_error):
            if payload is not None and wanted in payload.text.casefold():
                return True
    return False


def session_of(trace: Trace) -> dict[str, Any]:
    """The session variables of a trace: those of its boundaries, the root's first."""
    found: dict[str, Any] = {}
    ordered = ([trace.root] if trace.root is not None else []) + list(trace.boundaries)
    for b in ordered:
        for key, value in b.session.items():
            found.setdefault(key, value)
    return found


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``chronicle list``."""
    where = _conditions(args)
    if args.prefix is not None:
        _source.check_id(args.prefix)
        if args.prefix.strip().lower() in _source.LATEST:
            raise ChronicleError(
                f"{args.prefix!r}: list takes an id prefix; see the newest traces with `chronicle list`"
            )
    with contextlib.ExitStack() as opened:
        reader = _source.existing_store(args, opened)
        filters: dict[str, Any] = {
            "failed": True if args.failed else None,
            "errors": True if args.errors else None,
            "include_replays": args.replays,
            "root": args.root,
            "since_ns": args.since,
            "id_prefix": args.prefix.strip().lower() if args.prefix else None,
        }
        loaded: dict[str, Trace | None] = {}
        scanned = 0
        if where or args.contains is not None:
            candidates = reader.list_traces(limit=args.scan + 1, **filters)
            more = len(candidates) > args.scan  # traces past the --scan most recent
            candidates = candidates[: args.scan]
            rows: list[TraceSummary] = []
            with progress("searching traces", len(candidates)) as update:
                for scanned, summary in enumerate(candidates, 1):
                    trace = loaded[summary.trace_id] = _load(reader, summary.trace_id)
                    update(scanned)
                    if trace is None:
                        continue
                    session = session_of(trace)
                    if all(session_matches(session, k, v) for k, v in where) and (
                        args.contains is None or contains(trace, args.contains)
                    ):
                        rows.append(summary)
                        if len(rows) == args.limit:
                            break
            capped = more and scanned == len(candidates) and len(rows) < args.limit
        else:
            rows = reader.list_traces(limit=args.limit, **filters)
            capped = False
        with progress("reading traces", len(rows)) as update:
            for i, summary in enumerate(rows, 1):
                if summary.trace_id not in loaded:
                    loaded[summary.trace_id] = _load(reader, summary.trace_id)
                update(i)
        shorts = _short_ids(reader, [t.trace_id for t in rows])
        if not rows:
            _say_none(reader, args, filters)
        if args.json:
            output = Output(out, colour=False)
            for summary in rows:
                output.json(_document(summary, loaded.get(summary.trace_id)))
        else:
            _table(rows, loaded, shorts, Output(out))
    if capped:
        print(
            f"chronicle: searched the {args.scan} most recent traces that pass the other filters; "
            "--scan N searches more",
            file=sys.stderr,
        )
    return 0


def _load(reader: StoreReader, trace_id: str) -> Trace | None:
    """The trace, payloads rehydrated from the store; None when it cannot be read (shown without its details)."""
    try:
        return load_trace(reader, trace_id, store=[reader])
    except ChronicleError:
        return None


def _short_ids(reader: StoreReader, ids: list[str]) -> dict[str, str]:
    """The shortest prefix of each id, at least 8 digits, that names only it in the store."""
    shorts = {}
    for tid in ids:
        size = _SHORT_ID
        while size < 32 and len(reader.list_traces(id_prefix=tid[:size], include_replays=True, limit=2)) > 1:
            size += 4
        shorts[tid] = tid[:size]
    return shorts


def _say_none(reader: StoreReader, args: argparse.Namespace, filters: dict[str, Any]) -> None:
    if not reader.list_traces(limit=1, include_replays=True):
        print(f"chronicle: {_source.empty_store(reader.path)}", file=sys.stderr)
    elif not args.replays and not reader.list_traces(limit=1):
        print("chronicle: the store holds only replays; --replays lists them", file=sys.stderr)
    else:
        print("chronicle: no trace matches", file=sys.stderr)


def status_of(summary: TraceSummary) -> str | None:
    """``OK``, ``ERROR``, or None while the root span is not stored (a run still going, or its root lost)."""
    if summary.status is None:
        return None
    return "ERROR" if summary.status == "ERROR" else "OK"


def started(start_ns: int | None) -> str:
    """``2026-11-30 10:00:00`` (UTC), or ``-``."""
    if not start_ns:
        return "-"
    return dt.datetime.fromtimestamp(start_ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def duration(ns: int | None) -> str:
    """``850 µs``, ``12.3 ms``, ``4.21 s``, ``3m 05s``."""
    if ns is None:
        return "-"
    if ns < 1_000_000:
        return f"{ns / 1000:.0f} µs"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:.1f} ms"
    if ns < 60_000_000_000:
        return f"{ns / 1e9:.2f} s"
    seconds = int(ns // 1_000_000_000)
    return f"{seconds // 60}m {seconds % 60:02d}s"


def _table(rows: list[TraceSummary], loaded: dict[str, Trace | None], shorts: dict[str, str], out: Output) -> None:
    if not rows:
        return
    lines: list[list[Part]] = [
        [
            ("ID", "bold"),
            ("STATUS", "bold"),
            ("STARTED (UTC)", "bold"),
            ("DURATION", "bold"),
            ("BOUNDARIES", "bold"),
            ("ROOT", "bold"),
        ]
    ]
    for t in rows:
        trace = loaded.get(t.trace_id)
        status = status_of(t) or "-"
        line: list[Part] = [
            (shorts[t.trace_id], "yellow"),
            (status, STATUS_STYLE.get(status, "")),
            started(t.start_ns),
            duration(t.duration_ns),
            str(len(trace.boundaries)) if trace is not None else "?",
            clean(t.root_boundary or t.root_name or "-"),
        ]
        if t.replay_of is not None:
            line.append((f"replay of {clean(t.replay_of[:_SHORT_ID])}", "magenta"))
        unreplayable = _unreplayable(trace)
        if unreplayable:
            line.append((f"unreplayable: {unreplayable} call{'s' if unreplayable != 1 else ''}", "red"))
        lines.append(line)
    table(lines, out, right=frozenset({4}))


def _unreplayable(trace: Trace | None) -> int:
    """Calls of ``trace`` recorded with values held as unencodable placeholders (a stub cannot answer them)."""
    return 0 if trace is None else sum(1 for b in trace.boundaries if b.unreplayable)


def _document(t: TraceSummary, trace: Trace | None) -> dict[str, Any]:
    return {
        "trace_id": t.trace_id,
        "status": status_of(t),
        "start": dt.datetime.fromtimestamp(t.start_ns / 1e9, dt.timezone.utc).isoformat() if t.start_ns else None,
        "start_ns": t.start_ns,
        "duration_ms": t.duration_ns / 1e6 if t.duration_ns is not None else None,
        "root": t.root_boundary or t.root_name,
        "root_kind": t.root_boundary_kind,
        "boundaries": len(trace.boundaries) if trace is not None else None,
        "spans": t.span_count,
        "errors": t.error_count,
        "service": t.service,
        "session": session_of(trace) if trace is not None else None,
        "replay_of": t.replay_of,
        "unreplayable": _unreplayable(trace) if trace is not None else None,
    }
