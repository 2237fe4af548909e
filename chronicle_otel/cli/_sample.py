"""``chronicle sample``: the outcomes of one recorded call run live N times, everything before it frozen.

The agent's code runs in this process, so its modules are imported, but only those named on the command line
(``--import``, ``--check``): chronicle never imports a module a trace names. They are imported inside the sampling's
sandbox, so a ``configure()`` they run on import records nowhere else.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from ..config import isolated
from ..errors import ChronicleError, ConfigError, ReplayError
from ..replaying import ReplayOptions, ReplayRun
from ..sampling import SampleReport, sample
from . import _source
from ._definitions import is_module_name
from ._output import Output, Part, clean, table
from ._show import add_arguments

NAME = "sample"

EXIT_BELOW = 1
"""Exit status when ``--min-pass-rate`` is given and the pass rate is below it."""

_FLAGS = {
    "live": "--live",
    "n": "-n",
    "after": "--after",
    "concurrency": "--concurrency",
    "max_calls": "--max-calls",
    "stub": "--stub",
    "allow_hosts": "--allow-host",
}


def add_parser(sub: Any) -> None:
    """The ``sample`` subcommand and its options."""
    p = sub.add_parser(
        NAME,
        help="run one recorded call live N times, everything before it frozen: the distribution of outcomes",
        description="Sample behaviour from a frozen prefix: replay the trace N times; in each, every call recorded "
        "before the --live one answers from the recording, the --live call and the code after it run live (LLM "
        "calls after it answer from the recording unless --after live). Prints the distinct outcomes with their "
        "counts, the check's pass rate, the model calls and tokens. The agent's modules are imported only when "
        "named (--import, --check).",
    )
    p.add_argument("trace_id", help="32 hex digits, a unique prefix of them, or latest / latest-failed / latest-error")
    add_arguments(p)
    p.add_argument(
        "--live", required=True, metavar="NAME_OR_KEY", help="the call to run live: a call key (plan[0]) or a name"
    )
    p.add_argument("-n", type=int, default=20, help="the number of samples (default %(default)s)")
    p.add_argument(
        "--check",
        metavar="MODULE:FUNCTION",
        help="check(result, error) for each sample: true passes, false or an AssertionError fails",
    )
    p.add_argument(
        "--after",
        choices=("stub", "live"),
        default="stub",
        help="what the LLM calls after the live one do: answer from the recording (default) or run live",
    )
    p.add_argument("--concurrency", type=int, default=4, help="samples run at once (default %(default)s)")
    p.add_argument(
        "--max-calls",
        type=int,
        metavar="N",
        help="the most model calls in all; each sample may make N // -n (default: twice what the recording makes "
        "from the live call on, per sample)",
    )
    p.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="a module to import first: the one that defines the root boundary (repeatable)",
    )
    p.add_argument(
        "--stub",
        action="append",
        default=[],
        metavar="SELECTOR",
        help="answer these boundaries from the recording after the live call too (a tool with side effects; "
        "repeatable)",
    )
    p.add_argument(
        "--allow-host",
        dest="allow_hosts",
        action="append",
        default=[],
        metavar="HOST",
        help="a host the live calls may reach besides this machine: the provider's (repeatable)",
    )
    p.add_argument("--allow-network", action="store_true", help="no network guard: the live code may reach any host")
    p.add_argument(
        "--allow",
        action="append",
        default=None,
        metavar="PREFIX",
        help="rebuild recorded classes of these modules typed (repeatable; default: the imported packages)",
    )
    p.add_argument(
        "--record",
        action="store_true",
        help="record the samples into the store as replays of the trace (chronicle list --replays)",
    )
    p.add_argument(
        "--min-pass-rate",
        type=float,
        metavar="RATE",
        help=f"exit {EXIT_BELOW} when the check's pass rate is below RATE (0 to 1)",
    )
    p.add_argument("--json", action="store_true", help="the report as JSON, each sample's replay included")


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``chronicle sample``."""
    if args.min_pass_rate is not None and (args.check is None or not 0 <= args.min_pass_rate <= 1):
        raise ConfigError("--min-pass-rate", args.min_pass_rate, "a rate from 0 to 1, with --check")
    for name in (*args.imports, *([args.check.partition(":")[0]] if args.check else [])):
        if not is_module_name(name):
            raise ConfigError("--import" if name in args.imports else "--check", name, "a module name: pkg.mod")
    trace = _source.load(args)
    record = _source.store_path(args) if args.record else None
    with isolated(record):
        with _cwd_importable():
            for name in args.imports:
                _import(name, "--import")
            check = _check(args.check) if args.check else None
        try:
            ReplayRun(trace, stub=()).root_function()
        except ReplayError as err:
            raise ReplayError(f"{err}: name it with --import MODULE") from None
        hosts = [*ReplayOptions.allow_hosts, *args.allow_hosts] if args.allow_hosts else None  # this machine too
        try:
            report = sample(
                trace,
                live=args.live,
                n=args.n,
                check=check,
                after=args.after,
                concurrency=args.concurrency,
                max_calls=args.max_calls,
                stub=args.stub,
                store=record,
                allow=args.allow,
                block_network=not args.allow_network,
                allow_hosts=hosts,
            )
        except ConfigError as err:
            raise ConfigError(_FLAGS.get(err.name, err.name), err.value, err.expected) from None
    if args.json:
        Output(out, colour=False).json(report.to_dict())
    else:
        show(report, Output(out))
    rate = report.pass_rate
    if args.min_pass_rate is not None and (rate is None or rate < args.min_pass_rate):
        shown = "n/a" if rate is None else f"{rate:.0%}"
        print(f"chronicle: pass rate {shown} is below --min-pass-rate {args.min_pass_rate:.0%}", file=sys.stderr)
        return EXIT_BELOW
    return 0


@contextlib.contextmanager
def _cwd_importable() -> Iterator[None]:
    """The working directory first on ``sys.path`` while the block runs, as ``python -m`` has it."""
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        yield
    finally:
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove(cwd)


def _import(name: str, option: str) -> Any:
    try:
        return importlib.import_module(name)
    except Exception as exc:  # the user's module: whatever it raises, said with the option that named it
        raise ChronicleError(f"{option} {name}: {type(exc).__name__}: {clean(exc)}") from exc


def _check(spec: str) -> Callable[[Any, BaseException | None], object]:
    """The function ``--check MODULE:FUNCTION`` names."""
    module_name, _, function = spec.partition(":")
    if not function or not all(part.isidentifier() for part in function.split(".")):
        raise ConfigError("--check", spec, "MODULE:FUNCTION, e.g. mychecks:sold_what_was_asked")
    found: Any = _import(module_name, "--check")
    for part in function.split("."):
        found = getattr(found, part, None)
    if not callable(found):
        raise ConfigError("--check", spec, f"a function check(result, error) defined in {module_name}")
    return found  # type: ignore[no-any-return]


def show(report: SampleReport, out: Output) -> None:
    """The report as a table: the distinct outcomes with counts and shares, how each differs from the most frequent
    one, then the totals."""
    out.line((clean(report.headline()), "bold"))
    rows: list[list[Part]] = []
    for i, row in enumerate(report.rows()):
        cells: list[Part] = [clean(cell) if i else (clean(cell), "bold") for cell in row]
        if i and report.checked:
            verdict = row[3]
            cells[3] = (verdict, "green" if verdict == "pass" else "bold red" if verdict == "FAIL" else "yellow")
        rows.append(cells)
    table(rows, out, right=frozenset({0, 1, 2}))
    for line in report.difference_lines():
        out.line((clean(line), "dim"))
    out.line(clean(report.totals()))
