from __future__ import annotations

import argparse
import ast
import dataclasses
import datetime as dt
import json
import keyword
import os
import re
import sys
import time
from pathlib import Path
from typing import Final, TextIO

from ..environment_variables import CHRONICLE_PAYLOADS
from ..errors import ChronicleError, ConfigError, TraceNotFoundError
from ..load import load_trace
from ..model import Boundary, Trace, format_key
from ..replay._matching import check_selectors, resolve_overrides
from ..semconv import REPLAY_OF
from ..store.payloads import PayloadSource, open_payload_store
from ..store.reader import StoreReader, default_store_path, is_store

_PAYLOADS_HELP = (
    "payload store for payloads cut on spans: s3://bucket/prefix (endpoint and credentials from the AWS_* "
    "variables) or a store directory (default $CHRONICLE_PAYLOADS)"
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chronicle", description="Inspect recorded agent runs and replay them.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="list recorded traces, newest first")
    p.add_argument("--store", help="store directory (default $CHRONICLE_HOME or ./.chronicle)")
    p.add_argument("--failed", action="store_true", help="only traces whose root failed")
    p.add_argument("--replays", action="store_true", help="also list replays recorded into the store, marked")
    p.add_argument("-n", "--limit", type=int, default=20)

    p = sub.add_parser(
        "pull",
        help="fetch a trace from a backend or file and write a portable trace file",
        epilog=_PULL_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("trace_id", help="32 hex digits")
    p.add_argument(
        "--from",
        dest="source",
        required=True,
        help="phoenix+http://…, jaeger+http://…, tempo+http://…, zipkin+http://…, a trace file, a directory of "
        "trace files (rotated Collector output) or a quoted glob pattern ('collector-out/traces*.jsonl')",
    )
    p.add_argument("-o", "--output", required=True, help="the portable OTLP/JSON file to write (.gz for gzip)")
    p.add_argument("--store", help="local store asked for cut payloads (default $CHRONICLE_HOME or ./.chronicle)")
    p.add_argument("--payloads", help=_PAYLOADS_HELP)
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

    for name, help_text in (("show", "show a trace's boundaries"), ("gen-test", "write a regression test")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("trace_id", help="32 hex digits, or latest / latest-failed")
        p.add_argument("--store", help="store directory (default $CHRONICLE_HOME or ./.chronicle)")
        p.add_argument("--file", help="read the trace from this OTLP/JSON file instead of the store")
        p.add_argument("--payloads", help=_PAYLOADS_HELP)
        if name == "gen-test":
            p.add_argument("--out", default="tests/regressions", help="directory of the test (default %(default)s)")
            p.add_argument("--name", help="test name (default: root boundary and trace id)")
            p.add_argument("--stub", action="append", help="stub selector (repeatable; default kind:llm)")
            p.add_argument("--live", action="append", default=[], help="live selector (repeatable)")
            p.add_argument("--expect", action="append", default=[], help="an assertion on `result` (repeatable)")
            p.add_argument(
                "--override",
                action="append",
                default=[],
                metavar="KEY=PYTHON_EXPR",
                help="what-if: answer the recorded call KEY (plan[0]) with the expression's value, or, for a "
                "function, with what it returns given the recorded output (repeatable)",
            )
            p.add_argument(
                "--import",
                dest="imports",
                action="append",
                default=[],
                metavar="STATEMENT",
                help='an import the test needs, e.g. "from decimal import Decimal" (repeatable)',
            )

    p = sub.add_parser(
        "gc",
        help="apply a retention policy to the store: keep every failure, sample the successes, cap age and size",
    )
    p.add_argument("--store", help="store directory (default $CHRONICLE_HOME or ./.chronicle)")
    p.add_argument(
        "--keep-failed",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep every failed trace younger than --max-age (default); --no-keep-failed samples them too",
    )
    p.add_argument("--success-rate", type=float, default=1.0, metavar="RATE", help="fraction of successes kept, 0-1")
    p.add_argument("--max-age", metavar="DURATION", help="remove traces older than this: 30d, 12h, 2w, seconds")
    p.add_argument("--max-size", metavar="SIZE", help="cap the data at this size, oldest successes first: 2GB, 500MiB")
    p.add_argument("--min-keep-failed-age", metavar="DURATION", help="never remove failures younger than this for size")
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
        The exit status: 0, :data:`EXIT_ERROR` or, for ``pull``, :data:`EXIT_INCOMPLETE`.
    """
    out = out or sys.stdout
    args = _parser().parse_args(argv)
    try:
        if args.command == "list":
            return _list(args, out)
        if args.command == "pull":
            return _pull(args, out)
        if args.command == "gc":
            return _gc(args, out)
        trace = _load(args)
        if args.command == "show":
            return _show(trace, out)
        return _gen_test(trace, args, out)
    except ChronicleError as err:
        print(f"chronicle: {_clean(err)}", file=sys.stderr)
        return EXIT_ERROR


def _store(args: argparse.Namespace) -> StoreReader:
    return StoreReader(args.store) if args.store else StoreReader(default_store_path())


def _payloads(args: argparse.Namespace) -> list[str | StoreReader]:
    """The payload stores to ask, in order: ``--payloads`` (else ``$CHRONICLE_PAYLOADS``), then the local store."""
    chain: list[str | StoreReader] = []
    url = args.payloads or os.environ.get(CHRONICLE_PAYLOADS, "").strip()
    if url and url != "local":
        chain.append(url)
    local = _store(args)
    if is_store(local.path):
        chain.append(local)
    return chain


def _load(args: argparse.Namespace) -> Trace:
    if args.file:
        tid = None if args.trace_id in ("latest", "latest-failed", "-") else args.trace_id
        return load_trace(args.file, tid, store=_payloads(args))
    return load_trace(_store(args), args.trace_id, store=_payloads(args))


def _list(args: argparse.Namespace, out: TextIO) -> int:
    failed = True if args.failed else None
    traces = _store(args).list_traces(limit=args.limit, failed=failed, include_replays=args.replays)
    print(f"{'trace id':32s}  {'started (UTC)':19s}  {'root boundary':20s} {'spans':>5s} {'ms':>9s}  status", file=out)
    for t in traces:
        started = (
            dt.datetime.fromtimestamp(t.start_ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
            if t.start_ns
            else "-"
        )
        ms = f"{t.duration_ns / 1e6:9.2f}" if t.duration_ns is not None else f"{'-':>9s}"
        status = _clean(t.status)
        if t.replay_of is not None:
            status = f"{status:5s}  replay of {_clean(t.replay_of[:8])}"
        print(
            f"{_clean(t.trace_id)}  {started:19s}  {_clean((t.root_boundary or '-')[:20]):20s} {t.span_count:5d} {ms}  "
            f"{status}",
            file=out,
        )
    return 0


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _clean(text: object) -> str:
    """``text`` safe for a terminal: control characters (escape sequences, carriage returns, bidi overrides) are
    shown as ``\\xNN``/``\\uNNNN`` escapes instead of being interpreted."""
    return _CONTROL.sub(lambda m: ascii(m.group())[1:-1], str(text))


def _short(text: str | None, width: int = 100) -> str:
    if text is None:
        return "-"
    return _clean(text if len(text) <= width else text[: width - 1] + "…")


def _replay_of(trace: Trace) -> str | None:
    """The trace id a replayed trace reran (``chronicle.replay.of`` on its spans); None for a production run."""
    for span in trace.spans:
        value = span.attributes.get(REPLAY_OF)
        if isinstance(value, str) and value:
            return value
    return None


def _show(trace: Trace, out: TextIO) -> int:
    replay_of = _replay_of(trace)
    label = f"  replay of {_clean(replay_of)}" if replay_of is not None else ""
    print(f"trace {trace.trace_id}{label}  ({len(trace.boundaries)} boundaries, {len(trace.spans)} spans)", file=out)
    for b in trace.boundaries:
        indent = "  " * (len(b.call_key) - 1)
        ms = (b.end_ns - b.start_ns) / 1e6
        head = f"{_clean(b.kind):9s} {_clean(b.name)}[{b.call_index}]  {ms:.2f} ms  {_clean(b.status)}"
        print(f"{indent}{head}", file=out)
        print(f"{indent}    in : {_short(b.raw_input.text if b.raw_input else None)}", file=out)
        if b.raw_error is not None:
            print(f"{indent}    err: {_short(b.raw_error.text)}", file=out)
        else:
            print(f"{indent}    out: {_short(b.raw_output.text if b.raw_output else None)}", file=out)
    if trace.root is not None and trace.root.session:
        print("session: " + _clean(", ".join(f"{k}={v}" for k, v in sorted(trace.root.session.items()))), file=out)
    for warning in trace.warnings:
        print(f"warning: {_clean(warning)}", file=out)
    return 0


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
    "keep_failed": "--keep-failed",
    "success_rate": "--success-rate",
    "max_age": "--max-age",
    "max_bytes": "--max-size",
    "min_keep_failed_age": "--min-keep-failed-age",
    "grace": "--grace",
}


def _gc(args: argparse.Namespace, out: TextIO) -> int:
    from ..store import RetentionPolicy, apply_retention

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
    payloads = [open_payload_store(p) if isinstance(p, str) else p for p in _payloads(args)]
    backend = "://" in args.source
    trace, growing = _fetch_until_ready(args, payloads) if backend and args.wait > 0 else (_fetch(args, payloads), None)
    path = trace.save(args.output)
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
    print(json.dumps(summary), file=out)
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


def _fetch(args: argparse.Namespace, payloads: list[PayloadSource]) -> Trace:
    """One fetch of the trace, with a progress display unless ``--quiet``."""
    progress = None if args.quiet else _ProgressBar(sys.stderr)
    trace = load_trace(args.source, args.trace_id, store=payloads, progress=progress)
    if progress is not None:
        progress.done(len(trace.spans))
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


class _ProgressBar:
    """A one-line progress display of spans fetched, redrawn in place on a terminal."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.shown = 0

    def __call__(self, count: int) -> None:
        if count == self.shown:
            return
        self.shown = count
        bar = "#" * min(30, count // 50 + 1)
        if self.tty:
            self.stream.write(f"\rfetching spans [{bar:<30}] {count}")
            self.stream.flush()

    def done(self, total: int) -> None:
        end = "\n" if self.tty else ""
        self.stream.write(f"{end if self.shown else ''}fetched {total} spans\n")
        self.stream.flush()


def _slug(text: str) -> str:
    return re.sub(r"[^0-9a-zA-Z_]+", "_", text, flags=re.ASCII).strip("_").lower()[:80] or "trace"


def _literal(text: str) -> str:
    """``text`` as a Python string literal (double-quoted when possible): recorded data enters code only this way."""
    literal = repr(text)
    if literal[0] == "'" and "'" not in text and '"' not in text:
        literal = '"' + literal[1:-1] + '"'
    if ast.literal_eval(literal) != text:  # pragma: no cover - repr() is a literal by definition
        raise ChronicleError(f"cannot write {text!r} as a Python literal")
    return literal


def _import_line(root: Boundary, project: Path) -> str:
    """The import of the module that defines the root boundary, from its recorded ``module.qualname``: the first
    statement of the test function, so that it runs inside the replay.

    Recorded names are untrusted, and importing a module runs it. The import is written only when the recorded
    module is a source file of the project directory itself that uses chronicle_otel: every part a plain ASCII
    identifier, no ``__main__``, each package level a regular folder with an ``__init__.py`` (so it cannot lose to an
    installed module of the same name, as a folder without one does), no symbolic link, and the file mentioning
    ``chronicle_otel``. Otherwise a comment asks for the import. Nothing is imported here.
    """
    module = _module_of(root.function) if isinstance(root.function, str) else None
    if module and _project_module(module, project) is not None:
        return (
            "    # Imported here, inside the replay: a configure() the module runs on import is isolated (nothing\n"
            "    # exported, nothing written to the real store).\n"
            f"    import {module}  # noqa: F401 - defines the boundaries replayed here\n\n"
        )
    return (
        f"    # import the module that defines the boundary {_literal(root.name)} here, so replay can find it\n"
        "    # (inside the replay: a configure() the module runs on import is then isolated)\n"
    )


def _module_of(function: str) -> str | None:
    """``pkg.mod`` of ``pkg.mod.Class.method``: the dotted prefix of ASCII identifiers, classes dropped."""
    names = []
    for part in function.split(".")[:-1]:
        if not (part.isascii() and part.isidentifier()) or keyword.iskeyword(part):
            break
        names.append(part)
    # Without importing, the module/class boundary is unknown: drop trailing capitalised names (classes).
    while len(names) > 1 and names[-1][:1].isupper():
        names.pop()
    return ".".join(names) or None


_MAX_SOURCE_BYTES = 4 << 20


def _project_module(module: str, project: Path) -> Path | None:
    """The source file of ``module`` inside ``project`` when it qualifies for an import (see :func:`_import_line`)."""
    parts = module.split(".")
    if "__main__" in parts or parts[0] in sys.builtin_module_names or parts[0] in sys.stdlib_module_names:
        return None
    folder = project
    for part in parts[:-1]:
        folder = folder / part
        init = folder / "__init__.py"
        if folder.is_symlink() or not folder.is_dir() or init.is_symlink() or not init.is_file():
            return None
    leaf = folder / parts[-1]
    candidates = [leaf / "__init__.py", leaf.with_name(f"{parts[-1]}.py")]
    for source in candidates:
        if source.is_symlink() or not source.is_file() or (leaf.is_symlink()):
            continue
        try:
            if source.stat().st_size > _MAX_SOURCE_BYTES or b"chronicle_otel" not in source.read_bytes():
                return None
        except OSError:
            return None
        return source
    return None


def _gen_test(trace: Trace, args: argparse.Namespace, out: TextIO) -> int:
    root = trace.root
    if root is None:
        raise ChronicleError(f"trace {trace.trace_id} has no boundary to replay")
    slug = _slug(args.name or f"{root.name}_{trace.trace_id[:8]}")
    directory = Path(args.out)
    trace_file = directory / "traces" / f"{slug}.jsonl"
    test_file = directory / f"test_{slug}.py"
    stub = args.stub or ["kind:llm"]
    check_selectors("--stub", stub, trace)
    check_selectors("--live", args.live, trace)
    options = ["stub={" + ", ".join(_literal(s) for s in dict.fromkeys(stub)) + "}"]
    if args.live:
        options.append("live={" + ", ".join(_literal(s) for s in dict.fromkeys(args.live)) + "}")
    overrides = _overrides(args.override, trace)
    if overrides:
        options.append("override=OVERRIDES")
    imports = "".join(f"{_import_statement(statement)}\n" for statement in dict.fromkeys(args.imports))
    started = dt.datetime.fromtimestamp(root.start_ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    for expr in args.expect:
        _check_expression(expr)
    expectations = "".join(f"    assert {expr}\n" for expr in args.expect) or (
        "    # The replay must reproduce the recording: no divergence (checked after the test).\n"
        "    # Add assertions on `result` for the behaviour you expect now.\n"
    )
    live_lines = _live_lines(trace, stub, args.live)
    source = (
        f'"""Regression test for trace {trace.trace_id}, recorded {started}.\n\n'
        f"Generated by `chronicle gen-test`. The trace file next to it is self-contained (payloads inlined).\n"
        f'"""\n\n'
        f"from pathlib import Path\n\n"
        f"import pytest\n\n"
        f"{imports + chr(10) if imports else ''}"
        f"{_integration_lines(trace)}"
        f"ROOT_BOUNDARY = {_literal(root.name)}\n"
        f"TRACE = Path(__file__).parent / {_literal('traces')} / {_literal(trace_file.name)}\n"
        f"{_overrides_block(overrides)}\n"
        f"{_live_comment(live_lines)}\n\n"
        f"@pytest.mark.chronicle_replay(TRACE, {', '.join(options)})\n"
        f"def test_{slug}(chronicle_replay):\n"
        f"{_import_line(root, Path.cwd())}"
        f"    result = chronicle_replay.rerun()  # an async root runs in its own event loop\n"
        f"{expectations}"
    )
    _check_module(source, test_file, _imported_names(args.imports))
    for line in live_lines:
        print(f"gen-test: {_clean(line)}", file=sys.stderr)
    trace.save(trace_file)
    test_file.parent.mkdir(parents=True, exist_ok=True)
    test_file.write_text(source, encoding="utf-8")
    print(json.dumps({"test": str(test_file), "trace": str(trace_file)}), file=out)
    return 0


@dataclasses.dataclass(frozen=True)
class _LiveCalls:
    """The boundaries of one name and kind that run their current code in the replay of the generated test."""

    kind: str
    name: str
    calls: int
    root: bool


_MAX_LIVE_LISTED = 50


def _live_calls(trace: Trace, stub: list[str], live: list[str]) -> list[_LiveCalls]:
    """The recorded calls that will run live under the selectors, by kind and name in call order.

    The decision is the replay's own (:class:`~chronicle_otel.replay.ReplayRun`). ``rerun()`` calls the root; a call
    below it runs only when no boundary above it is stubbed (a stub answers for its whole subtree), and runs live
    when it is not stubbed itself.
    """
    from ..replay import ReplayRun

    run = ReplayRun(trace, stub=tuple(dict.fromkeys(stub)), live=tuple(dict.fromkeys(live)))
    mode = {b.span_id: run._mode(b.name, b.kind) for b in trace.boundaries}
    runs: dict[str, bool] = {}

    def called(b: Boundary) -> bool:
        chain: list[Boundary] = []
        current: Boundary | None = b
        while current is not None and current.span_id not in runs:
            chain.append(current)
            current = current.parent
        if current is None:
            known = chain[-1] is trace.root  # another top-level boundary: rerun() does not call it
        else:
            known = runs[current.span_id] and mode[current.span_id] != "stub"
        for node in reversed(chain):
            runs[node.span_id] = known
            known = known and mode[node.span_id] != "stub"
        return runs[b.span_id]

    groups: dict[tuple[str, str], _LiveCalls] = {}
    for b in trace.boundaries:
        if mode[b.span_id] != "live" or not called(b):
            continue
        seen = groups.get((b.kind, b.name))
        calls = 1 if seen is None else seen.calls + 1
        is_root = b is trace.root or (seen is not None and seen.root)
        groups[(b.kind, b.name)] = _LiveCalls(b.kind, b.name, calls, is_root)
    return list(groups.values())


def _tool_calls(live_calls: list[_LiveCalls]) -> int:
    return sum(c.calls for c in live_calls if c.kind == "tool" and not c.root)


def _live_lines(trace: Trace, stub: list[str], live: list[str]) -> list[str]:
    """The live calls of the generated test, one line each (recorded names as Python literals), and for tools that
    run live, the ``--stub`` options that answer them from the recording."""
    live_calls = _live_calls(trace, stub, live)
    if not live_calls:
        return ["No boundary runs live: every call is answered from the recording."]
    lines = ["Boundaries that run LIVE (their current code runs; the others answer from the recording):"]
    shown = live_calls[:_MAX_LIVE_LISTED]
    kind_width = max(len(_literal(c.kind)) for c in shown)
    name_width = max(len(_literal(c.name)) for c in shown)
    for c in shown:
        count = f"{c.calls} call{'s' if c.calls != 1 else ''}"
        tail = "  (the root: the code under test)" if c.root else ""
        lines.append(f"  {_literal(c.kind):{kind_width}}  {_literal(c.name):{name_width}}  {count}{tail}")
    if len(live_calls) > len(shown):
        lines.append(f"  … and {len(live_calls) - len(shown)} more")
    tools = _tool_calls(live_calls)
    with_tools = [*dict.fromkeys([*stub, "kind:tool"])]
    if tools and _tool_calls(_live_calls(trace, with_tools, live)) < tools:
        options = " ".join(f"--stub {selector}" for selector in with_tools)
        lines.append("Tools that run live call what they called when recorded:")
        lines.append(f"re-generate with --stub kind:tool to answer them from the recording ({options}).")
    return lines


def _live_comment(lines: list[str]) -> str:
    """``lines`` as a comment block of the generated module: control characters escaped, so no line break can
    leave the comment."""
    return "".join(f"# {_clean(line)}\n" for line in lines)


_INTEGRATIONS: Final = {"openai": "chronicle_openai", "anthropic": "chronicle_anthropic"}
"""SDK integrations a generated test switches on when the trace has their boundaries (fixed text only)."""


def _integration_lines(trace: Trace) -> str:
    """Imports and ``instrument()`` calls of the SDK integrations whose boundaries the trace holds: without them
    the SDK calls would not be stubbed, and the replay would call the model."""
    lines = ""
    for provider, alias in _INTEGRATIONS.items():
        if any(b.name.startswith(f"{provider}.") and b.kind == "llm" for b in trace.boundaries):
            lines += f"from chronicle_otel.integrations import {provider} as {alias}\n\n{alias}.instrument()\n\n"
    return lines


def _check_expression(expr: str, option: str = "--expect") -> None:
    try:
        ast.parse(expr, mode="eval")
    except SyntaxError as exc:
        raise ChronicleError(f"{option} {expr!r} is not a Python expression: {exc.msg}") from None


def _import_statement(statement: str) -> str:
    """``statement`` when it is one import statement (``import x`` / ``from x import y``)."""
    try:
        tree = ast.parse(statement.strip())
    except SyntaxError as exc:
        raise ChronicleError(f"--import {statement!r} is not an import statement: {exc.msg}") from None
    if len(tree.body) != 1 or not isinstance(tree.body[0], (ast.Import, ast.ImportFrom)):
        raise ChronicleError(f"--import {statement!r} is not one import statement ('from decimal import Decimal')")
    return ast.unparse(tree.body[0])


def _overrides(options: list[str], trace: Trace) -> dict[str, str]:
    """``--override KEY=EXPR`` options: each key checked against the trace, each expression parsed (never run)."""
    overrides: dict[str, str] = {}
    for option in options:
        key, sep, expr = option.partition("=")
        if not sep or not key.strip() or not expr.strip():
            raise ChronicleError(f"--override {option!r}: expected KEY=PYTHON_EXPR, e.g. 'plan[0]=...'")
        _check_expression(expr.strip(), "--override")
        overrides[key.strip()] = expr.strip()
    resolve_overrides(dict.fromkeys(overrides), trace)  # every key names recorded calls
    return overrides


def _overrides_block(overrides: dict[str, str]) -> str:
    if not overrides:
        return ""
    lines = "".join(f"    {_literal(key)}: (\n        {expr}\n    ),\n" for key, expr in overrides.items())
    return f"# What-if answers given instead of the recording (see report.overrides).\nOVERRIDES = {{\n{lines}}}\n"


def _imported_names(statements: list[str]) -> set[str]:
    names: set[str] = set()
    for statement in statements:
        for node in ast.parse(statement.strip()).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update(a.name for a in node.names)
    return names


def _check_module(source: str, path: Path, extra_imports: frozenset[str] | set[str] = frozenset()) -> None:
    """The generated module parses, its only top-level statements are the expected kinds (importing only ``Path``
    and ``pytest``), and the test function imports at most one module, as its first statement."""
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:  # pragma: no cover - every recorded value enters as a literal
        raise ChronicleError(f"the generated test would not parse ({exc.msg}); nothing written") from None
    allowed = (ast.Expr, ast.ImportFrom, ast.Import, ast.Assign, ast.FunctionDef)
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    imported = {a.name for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names}
    body = functions[0].body if len(functions) == 1 else []
    imports_in_body = [i for i, node in enumerate(body) if isinstance(node, (ast.Import, ast.ImportFrom))]
    if (
        len(functions) != 1
        or not all(isinstance(node, allowed) for node in tree.body)
        or not {"Path", "pytest"} <= imported <= {"Path", "pytest", *_INTEGRATIONS, *extra_imports}
        or imports_in_body not in ([], [0])
    ):  # pragma: no cover - the template has this shape
        raise ChronicleError("the generated test has an unexpected shape; nothing written")
