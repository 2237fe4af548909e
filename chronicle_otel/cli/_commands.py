"""The ``chronicle`` command: its parser, the subcommands' table, and ``pull`` and ``gc``.

Each other subcommand is a module with ``NAME``, ``add_parser(subparsers)`` and ``run(args, out) -> int``, listed in
:data:`SUBCOMMANDS`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Protocol, TextIO

from ..errors import ChronicleError, ConfigError, TraceNotFoundError
from ..load import load_trace, write_trace
from ..model import Trace, format_key
from ..store.payloads import PayloadSource
from ..store.reader import default_store_path
from . import _diff, _gen_test, _list, _replay_all, _sample, _show, _source, _view
from ._output import Output, clean, progress


class Subcommand(Protocol):
    """A subcommand module."""

    NAME: str

    def add_parser(self, sub: Any) -> None:
        """Add the subcommand's parser to ``sub`` (what ``add_subparsers`` returns)."""

    def run(self, args: argparse.Namespace, out: TextIO) -> int:
        """Run it; return the exit status."""


SUBCOMMANDS: tuple[Subcommand, ...] = (_list, _show, _diff, _view, _gen_test, _replay_all, _sample)
"""The subcommands besides ``pull`` and ``gc``, in the order ``chronicle --help`` lists them."""

_clean = clean


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chronicle", description="Inspect recorded agent runs and replay them.")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in SUBCOMMANDS:
        command.add_parser(sub)

    p = sub.add_parser(
        "pull",
        help="fetch a trace from a backend or file and write a portable trace file",
        epilog=_PULL_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("trace_id", nargs="?", help="32 hex digits (or --since: every trace of a window)")
    p.add_argument(
        "--since",
        type=_list.since,
        metavar="AGE|DATE",
        help="instead of one trace id: every trace since then (24h, 2026-11-30), each written to -o DIRECTORY/"
        "<trace id>.jsonl (a backend URL lists them by its search: Jaeger needs ?service=NAME)",
    )
    p.add_argument("--failed", action="store_true", help="with --since: only runs whose root failed")
    p.add_argument("--root", metavar="GLOB", help="with --since: only runs whose root boundary matches")
    p.add_argument("--limit", type=int, metavar="N", help="with --since: at most N traces (default 1000)")
    p.add_argument(
        "--from",
        dest="source",
        required=True,
        help="phoenix+http://…, jaeger+http://…, tempo+http://…, zipkin+http://…, a trace file, a directory of "
        "trace files (rotated Collector output) or a quoted glob pattern ('collector-out/traces*.jsonl')",
    )
    p.add_argument("-o", "--output", required=True, help="the portable OTLP/JSON file to write (.gz for gzip)")
    p.add_argument("--store", help="local store asked for cut payloads (default $CHRONICLE_HOME or ./.chronicle)")
    p.add_argument("--payloads", help=_source.PAYLOADS_HELP)
    p.add_argument(
        "--wait",
        type=_duration,
        default=0.0,
        metavar="DURATION",
        help="for a backend: fetch again until the span count is stable and the trace complete, for at most "
        "DURATION (30s, 2m, 500ms, or seconds); a trace not found yet is waited for",
    )
    p.add_argument(
        "--allow-incomplete",
        action="store_true",
        help=f"exit 0 for a trace with missing payloads or no boundary (default: exit {EXIT_INCOMPLETE})",
    )
    p.add_argument("--poll-interval", type=_duration, default=_POLL_INTERVAL, help=argparse.SUPPRESS)
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")

    p = sub.add_parser(
        "gc",
        help="apply a retention policy to the store: keep every trace with an error, sample the others, cap age "
        "and size",
        description="Apply a retention policy to the store. A trace with errors (a failed run, or any span that "
        "ended with ERROR status, such as a retried tool call) is kept unless --no-keep-errors; the others are "
        "sampled at --success-rate.",
    )
    p.add_argument("--store", help="store directory (default $CHRONICLE_HOME or ./.chronicle)")
    p.add_argument(
        "--keep-errors",
        "--keep-failed",  # its earlier name
        dest="keep_failed",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep every trace with an error (a failed run, or any span that ended with ERROR status) younger than "
        "--max-age (default); --no-keep-errors samples them too",
    )
    p.add_argument(
        "--success-rate", type=float, default=1.0, metavar="RATE", help="fraction of traces without errors kept, 0-1"
    )
    p.add_argument("--max-age", metavar="DURATION", help="remove traces older than this: 30d, 12h, 2w, seconds")
    p.add_argument(
        "--max-size", metavar="SIZE", help="cap the data at this size, oldest traces without errors first: 2GB, 500MiB"
    )
    p.add_argument(
        "--min-keep-errors-age",
        "--min-keep-failed-age",  # its earlier name
        dest="min_keep_failed_age",
        metavar="DURATION",
        help="never remove traces with errors younger than this for size",
    )
    p.add_argument("--grace", default="10m", metavar="DURATION", help="leave what was written this recently (10m)")
    p.add_argument("--keep-payloads", action="store_true", help="keep payloads no trace refers to")
    p.add_argument("--vacuum", action="store_true", help="then shrink the index file (writers wait meanwhile)")
    p.add_argument("--dry-run", action="store_true", help="change nothing; report what would be removed")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


EXIT_ERROR = 2
"""Exit status of a command that failed (bad arguments, unreadable source, trace not found): nothing written."""
EXIT_INCOMPLETE = 3
"""Exit status of ``pull`` when the trace it wrote is incomplete (a payload missing, no boundary, still growing)."""

_PULL_EPILOG = f"""\
exit status:
  0  the trace file is written and complete
  {EXIT_ERROR}  an error; nothing is written
  {EXIT_INCOMPLETE}  the trace file and the summary are written, but the trace is incomplete:
     a payload missing, no boundary, or still growing when --wait ran out
     (one line per problem on stderr); with --allow-incomplete, exit 0
"""

EXIT_BROKEN_PIPE = 141
"""Exit status when the reader of the output went away (``chronicle show ID | head -1``), as for a process that
SIGPIPE ended: 128 + 13."""

_POLL_INTERVAL = 1.5
"""Seconds between two fetches of ``pull --wait``."""
_clock = time.monotonic
_sleep = time.sleep


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    """Run the ``chronicle`` command.

    Args:
        argv: the arguments (default ``sys.argv[1:]``).
        out: where results go (default stdout); progress, warnings and errors go to stderr.

    Returns:
        The exit status: 0, :data:`EXIT_ERROR`, for ``pull`` :data:`EXIT_INCOMPLETE`, for ``diff`` 1 when the traces
        differ, or :data:`EXIT_BROKEN_PIPE` when the reader of the output closed it early.
    """
    to_stdout = out is None
    stream = sys.stdout if out is None else out
    args = _parser().parse_args(argv)
    try:
        try:
            code = _run(args, stream)
        except ChronicleError as err:
            print(f"chronicle: {clean(err)}", file=sys.stderr)
            code = EXIT_ERROR
        stream.flush()  # a closed pipe shows here rather than at exit
    except BrokenPipeError:
        if to_stdout:
            _silence_stdout()
        return EXIT_BROKEN_PIPE
    return code


def _run(args: argparse.Namespace, out: TextIO) -> int:
    if args.command == "pull":
        return _pull(args, out)
    if args.command == "gc":
        return _gc(args, out)
    for command in SUBCOMMANDS:
        if args.command == command.NAME:
            return command.run(args, out)
    raise ChronicleError(f"unknown command {args.command!r}")  # pragma: no cover - argparse refuses it first


def _silence_stdout() -> None:
    """Point stdout at the null device, so that the interpreter's last flush at exit does not fail again (the way
    the Python documentation's note on SIGPIPE does it)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no file descriptor behind stdout: nothing is flushed to it
        pass


_store = _source.store
_payloads = _source.payloads
_open_payloads = _source.open_payloads


def _duration(text: str) -> float:
    """``30s``, ``2m``, ``500ms``, ``1h`` or plain seconds, as seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)?\s*", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 30s, 2m, 500ms or 10")
    seconds = float(match.group(1)) * {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[match.group(2) or "s"]
    if seconds > 7 * 86400:
        raise argparse.ArgumentTypeError(f"{text!r} is more than a week")
    return seconds


_GC_FLAGS = {
    "keep_failed": "--keep-errors",
    "success_rate": "--success-rate",
    "max_age": "--max-age",
    "max_bytes": "--max-size",
    "min_keep_failed_age": "--min-keep-errors-age",
    "grace": "--grace",
}


def _gc(args: argparse.Namespace, out: TextIO) -> int:
    from ..store import RetentionPolicy, apply_retention

    _source.check_named_store(args)
    try:
        policy = RetentionPolicy(
            keep_failed=args.keep_failed,
            success_rate=args.success_rate,
            max_age=args.max_age,
            max_bytes=args.max_size,
            min_keep_failed_age=args.min_keep_failed_age,
        )
        report = apply_retention(
            args.store or default_store_path(),
            policy,
            dry_run=args.dry_run,
            grace=args.grace,
            remove_payloads=not args.keep_payloads,
            vacuum=args.vacuum,
        )
    except ConfigError as err:
        raise ConfigError(_GC_FLAGS.get(err.name, err.name), err.value, err.expected) from None
    print(json.dumps(report.to_dict()) if args.json else report.summary(), file=out)
    for warning in report.warnings:
        print(f"warning: {_clean(warning)}", file=sys.stderr)
    return 0


def _pull(args: argparse.Namespace, out: TextIO) -> int:
    if args.since is not None:
        if args.trace_id is not None:
            raise ChronicleError("pull takes a trace id or --since (every trace of a window), not both")
        return _pull_window(args, out)
    if args.trace_id is None:
        raise ChronicleError("pull needs a trace id, or --since 24h for every trace of a window")
    if args.failed or args.root or args.limit:
        raise ChronicleError("--failed, --root and --limit select traces of a window: give --since")
    backend = "://" in args.source
    with contextlib.ExitStack() as opened:
        payloads = [_open_payloads(p, opened) if isinstance(p, str) else p for p in _payloads(args, opened)]
        if backend and args.wait > 0:
            trace, growing = _fetch_until_ready(args, payloads)
        else:
            trace, growing = _fetch(args, payloads), None
    path = write_trace(trace, args.output)
    problems = _problems(trace)
    if growing is not None:
        before, after = growing
        problems.append(
            {
                "problem": "still-growing",
                "message": f"the trace was still growing when --wait ran out ({before} then {after} spans)",
                "spans": after,
            }
        )
    summary = {
        "trace": trace.trace_id,
        "file": str(path),
        "spans": len(trace.spans),
        "boundaries": len(trace.boundaries),
        "rehydrated": sum(
            1
            for b in trace.boundaries
            for p in (b.raw_input, b.raw_output, b.raw_error)
            if p and p.status == "rehydrated"
        ),
        "missing_payloads": sum(1 for p in problems if p["problem"] == "missing-payload"),
        "complete": not problems,
        "problems": problems,
    }
    if args.json:
        print(json.dumps(summary), file=out)
    else:
        _say_pulled(summary, Output(out))
    digests = [str(p["digest"]) for p in problems if p.get("digest")]
    for warning in trace.warnings:
        if not any(digest in warning for digest in digests):  # said below, with the boundary
            print(f"warning: {_clean(warning)}", file=sys.stderr)
    label = "warning: incomplete trace" if args.allow_incomplete else "chronicle: incomplete trace"
    for problem in problems:
        print(f"{label}: {_clean(problem['message'])}", file=sys.stderr)
    if problems and not args.allow_incomplete:
        hints = ["name the payload store (--payloads, --store)", "accept it (--allow-incomplete)"]
        if backend:
            hints.insert(1, "wait for the backend (--wait 30s)")
        print(
            f"chronicle: {_clean(path)} is written but incomplete; {', '.join(hints[:-1])} or {hints[-1]}",
            file=sys.stderr,
        )
        return EXIT_INCOMPLETE
    return 0


def _pull_window(args: argparse.Namespace, out: TextIO) -> int:
    """``pull --since``: every trace of the window, each written as ``<trace id>.jsonl`` in the ``-o`` directory."""
    from ..corpus import Corpus, CorpusFilter

    directory = Path(args.output)
    if directory.exists() and not directory.is_dir():
        raise ChronicleError(f"-o {_clean(directory)}: with --since, -o names a directory")
    chosen = CorpusFilter(since_ns=args.since, failed=args.failed, root=args.root, limit=args.limit)
    with contextlib.ExitStack() as opened:
        payloads = [_open_payloads(p, opened) if isinstance(p, str) else p for p in _payloads(args, opened)]
        corpus = Corpus(args.source, chosen, store=payloads or None)
        opened.callback(corpus.close)
        entries = corpus.entries()
        directory.mkdir(parents=True, exist_ok=True)
        written, incomplete = [], 0
        for entry in entries:
            try:
                trace = corpus.load(entry)
            except ChronicleError as exc:
                print(f"chronicle: {entry.trace_id}: not pulled: {_clean(str(exc))}", file=sys.stderr)
                incomplete += 1
                continue
            path = write_trace(trace, directory / f"{trace.trace_id}.jsonl")
            problems = _problems(trace)
            incomplete += bool(problems)
            for problem in problems:
                print(f"warning: {trace.trace_id}: {_clean(problem['message'])}", file=sys.stderr)
            written.append(
                {
                    "trace": trace.trace_id,
                    "file": str(path),
                    "root": entry.root,
                    "failed": entry.failed,
                    "complete": not problems,
                }
            )
    if args.json:
        print(json.dumps({"directory": str(directory), "traces": written, "incomplete": incomplete}), file=out)
    else:
        print(
            f"pulled {len(written)} traces into {_clean(directory)}"
            + (f" ({incomplete} incomplete)" if incomplete else ""),
            file=out,
        )
    return EXIT_INCOMPLETE if incomplete and not args.allow_incomplete else 0


def _fetch(args: argparse.Namespace, payloads: list[PayloadSource]) -> Trace:
    """One fetch of the trace; unless ``--quiet``, a progress bar on a terminal and the number of spans fetched."""
    if args.quiet:
        return load_trace(args.source, args.trace_id, store=payloads)
    with progress("fetching spans", None) as update:
        trace = load_trace(args.source, args.trace_id, store=payloads, progress=update)
    print(f"fetched {len(trace.spans)} spans", file=sys.stderr)
    return trace


def _fetch_until_ready(args: argparse.Namespace, payloads: list[PayloadSource]) -> tuple[Trace, tuple[int, int] | None]:
    """Fetch the trace again every ``--poll-interval`` seconds until its span count is the same twice in a row and
    (unless ``--allow-incomplete``) it is complete, for at most ``--wait`` seconds.

    Returns:
        The last trace fetched, and the span counts of the last two fetches when it was still growing at the end.

    Raises:
        TraceNotFoundError: the backend still does not have the trace when the time is up.
    """
    deadline = _clock() + args.wait
    previous: int | None = None
    while True:
        try:
            trace = _fetch(args, payloads)
        except TraceNotFoundError:
            if _clock() >= deadline:
                raise
            count: int | None = None
            reason = "the backend does not have the trace yet"
        else:
            count = len(trace.spans)
            problems = _problems(trace)
            stable = count == previous
            if stable and (args.allow_incomplete or not problems):
                return trace, None
            if _clock() >= deadline:
                return trace, None if stable or previous is None else (previous, count)
            if not stable:
                reason = "checking that no span is still arriving" if previous is None else "spans still arriving"
            else:
                reason = f"{len(problems)} problem(s): {problems[0]['message']}"
        previous = count
        pause = max(0.0, min(args.poll_interval, deadline - _clock()))
        if not args.quiet:
            print(f"waiting: {_clean(reason)}; fetching again in {pause:.1f}s", file=sys.stderr)
        _sleep(pause)


def _problems(trace: Trace) -> list[dict[str, object]]:
    """What makes ``trace`` unusable for a replay: no boundary, payloads whose whole text no store has."""
    problems: list[dict[str, object]] = []
    if not trace.boundaries:
        problems.append(
            {
                "problem": "no-boundary",
                "message": f"{len(trace.spans)} spans and no boundary: not a recorded run, or not all ingested yet",
                "spans": len(trace.spans),
            }
        )
    for b in trace.boundaries:
        for field, payload in (("input", b.raw_input), ("output", b.raw_output), ("error", b.raw_error)):
            if payload is None or payload.status != "missing":
                continue
            digest = (payload.digest or "no hash")[:19]
            problems.append(
                {
                    "problem": "missing-payload",
                    "message": f"{b.kind} {b.name!r} ({format_key(b.call_key)}, span {b.span_id}): the {field} "
                    f"payload {digest}… is cut to {len(payload.text)} characters and no payload store has it",
                    "boundary": b.name,
                    "call_key": format_key(b.call_key),
                    "span_id": b.span_id,
                    "payload": field,
                    "digest": payload.digest[:80] if payload.digest else None,
                }
            )
    return problems


def _say_pulled(summary: dict[str, Any], out: Output) -> None:
    """What ``pull`` wrote, in a line (the problems follow on stderr)."""
    rehydrated = summary["rehydrated"]
    fetched = f", {rehydrated} payloads fetched from a payload store" if rehydrated else ""
    state = (
        ("complete", "green")
        if summary["complete"]
        else (f"incomplete: {len(summary['problems'])} problem(s)", "bold red")
    )
    out.line(
        ("wrote ", "green"),
        (clean(summary["file"]), "bold"),
        f": trace {summary['trace']}, {summary['spans']} spans, {summary['boundaries']} boundaries{fetched}; ",
        state,
    )
