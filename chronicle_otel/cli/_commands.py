from __future__ import annotations

import argparse
import ast
import datetime as dt
import json
import keyword
import os
import re
import sys
from pathlib import Path
from typing import TextIO

from ..environment_variables import CHRONICLE_PAYLOADS
from ..errors import ChronicleError
from ..load import load_trace
from ..model import Boundary, Trace
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
    p.add_argument("-n", "--limit", type=int, default=20)

    p = sub.add_parser("pull", help="fetch a trace from a backend or file and write a portable trace file")
    p.add_argument("trace_id", help="32 hex digits")
    p.add_argument(
        "--from",
        dest="source",
        required=True,
        help="phoenix+http://…, jaeger+http://…, tempo+http://…, zipkin+http://…, or a trace file",
    )
    p.add_argument("-o", "--output", required=True, help="the portable OTLP/JSON file to write (.gz for gzip)")
    p.add_argument("--store", help="local store asked for cut payloads (default $CHRONICLE_HOME or ./.chronicle)")
    p.add_argument("--payloads", help=_PAYLOADS_HELP)
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
    return parser


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    """Run the ``chronicle`` command; returns the exit status."""
    out = out or sys.stdout
    args = _parser().parse_args(argv)
    try:
        if args.command == "list":
            return _list(args, out)
        if args.command == "pull":
            return _pull(args, out)
        trace = _load(args)
        if args.command == "show":
            return _show(trace, out)
        return _gen_test(trace, args, out)
    except ChronicleError as err:
        print(f"chronicle: {_clean(err)}", file=sys.stderr)
        return 2


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
    traces = _store(args).list_traces(limit=args.limit, failed=True if args.failed else None)
    print(f"{'trace id':32s}  {'started (UTC)':19s}  {'root boundary':20s} {'spans':>5s} {'ms':>9s}  status", file=out)
    for t in traces:
        started = (
            dt.datetime.fromtimestamp(t.start_ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
            if t.start_ns
            else "-"
        )
        ms = f"{t.duration_ns / 1e6:9.2f}" if t.duration_ns is not None else f"{'-':>9s}"
        print(
            f"{_clean(t.trace_id)}  {started:19s}  {_clean((t.root_boundary or '-')[:20]):20s} {t.span_count:5d} {ms}  "
            f"{_clean(t.status)}",
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


def _show(trace: Trace, out: TextIO) -> int:
    print(f"trace {trace.trace_id}  ({len(trace.boundaries)} boundaries, {len(trace.spans)} spans)", file=out)
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


def _pull(args: argparse.Namespace, out: TextIO) -> int:
    progress = None if args.quiet else _ProgressBar(sys.stderr)
    trace = load_trace(args.source, args.trace_id, store=_payloads(args), progress=progress)
    if progress is not None:
        progress.done(len(trace.spans))
    path = trace.save(args.output)
    missing = [b for b in trace.boundaries for p in (b.raw_input, b.raw_output, b.raw_error) if p and not p.complete]
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
        "missing_payloads": len(missing),
    }
    print(json.dumps(summary), file=out)
    for warning in trace.warnings:
        print(f"warning: {_clean(warning)}", file=sys.stderr)
    return 0


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
    """The import of the module that defines the root boundary, from its recorded ``module.qualname``.

    Recorded names are untrusted, and importing a module runs it. The import is written only when the recorded
    module is a source file of the project directory itself that uses chronicle_otel: every part a plain ASCII
    identifier, no ``__main__``, each package level a regular folder with an ``__init__.py`` (so it cannot lose to an
    installed module of the same name, as a folder without one does), no symbolic link, and the file mentioning
    ``chronicle_otel``. Otherwise a comment asks for the import. Nothing is imported here.
    """
    module = _module_of(root.function) if isinstance(root.function, str) else None
    if module and _project_module(module, project) is not None:
        return f"import {module}  # noqa: F401 - defines the boundaries replayed here\n"
    return f"# import the module that defines the boundary {_literal(root.name)} here, so replay can find it\n"


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
    options = ["stub={" + ", ".join(_literal(s) for s in dict.fromkeys(stub)) + "}"]
    if args.live:
        options.append("live={" + ", ".join(_literal(s) for s in dict.fromkeys(args.live)) + "}")
    started = dt.datetime.fromtimestamp(root.start_ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    for expr in args.expect:
        _check_expression(expr)
    expectations = "".join(f"    assert {expr}\n" for expr in args.expect) or (
        "    # The replay must reproduce the recording: no divergence (checked after the test).\n"
        "    # Add assertions on `result` for the behaviour you expect now.\n"
    )
    source = (
        f'"""Regression test for trace {trace.trace_id}, recorded {started}.\n\n'
        f"Generated by `chronicle gen-test`. The trace file next to it is self-contained (payloads inlined).\n"
        f'"""\n\n'
        f"from pathlib import Path\n\n"
        f"import pytest\n\n"
        f"{_import_line(root, Path.cwd())}\n"
        f"ROOT_BOUNDARY = {_literal(root.name)}\n"
        f"TRACE = Path(__file__).parent / {_literal('traces')} / {_literal(trace_file.name)}\n\n\n"
        f"@pytest.mark.chronicle_replay(TRACE, {', '.join(options)})\n"
        f"def test_{slug}(chronicle_replay):\n"
        f"    result = chronicle_replay.rerun()  # an async root runs in its own event loop\n"
        f"{expectations}"
    )
    _check_module(source, test_file)
    trace.save(trace_file)
    test_file.parent.mkdir(parents=True, exist_ok=True)
    test_file.write_text(source, encoding="utf-8")
    print(json.dumps({"test": str(test_file), "trace": str(trace_file)}), file=out)
    return 0


def _check_expression(expr: str) -> None:
    try:
        ast.parse(expr, mode="eval")
    except SyntaxError as exc:
        raise ChronicleError(f"--expect {expr!r} is not a Python expression: {exc.msg}") from None


def _check_module(source: str, path: Path) -> None:
    """The generated module parses, and its only top-level statements are the expected kinds."""
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:  # pragma: no cover - every recorded value enters as a literal
        raise ChronicleError(f"the generated test would not parse ({exc.msg}); nothing written") from None
    allowed = (ast.Expr, ast.ImportFrom, ast.Import, ast.Assign, ast.FunctionDef)
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    if len(functions) != 1 or not all(isinstance(node, allowed) for node in tree.body):  # pragma: no cover
        raise ChronicleError("the generated test has an unexpected shape; nothing written")
