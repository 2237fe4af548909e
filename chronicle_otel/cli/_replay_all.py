"""``chronicle replay-all``: replay a corpus of recorded traces against the code as it is now, under pytest.

It runs ``pytest --chronicle-corpus SOURCE --chronicle-corpus-only`` in this directory (its ``conftest.py`` and
``[tool.chronicle]`` apply), so the outcome table, ``--report`` and ``--junitxml`` are pytest's, and ``-n`` spreads
the traces over processes with pytest-xdist.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
from typing import Any, TextIO

from ..errors import ChronicleError

NAME = "replay-all"


def add_parser(sub: Any) -> None:
    """The ``replay-all`` subcommand and its options."""
    p = sub.add_parser(
        NAME,
        help="replay every trace of a store or trace files against the code now: fixed, still failing, broken",
        description="Replay each trace of SOURCE as a pytest test in this directory (its conftest.py imports your "
        "agent, or use --import). A recorded success must replay as recorded; a recorded failure is fixed when "
        "the check says so (--check, a conftest's pytest_chronicle_corpus_check, else: the root no longer raises). "
        "Exit status: pytest's (0: nothing newly broken or diverged).",
    )
    p.add_argument("source", help="a store directory, a trace file, a directory of trace files or a quoted glob")
    p.add_argument("--failed", action="store_true", help="only failed runs")
    p.add_argument("--since", metavar="AGE|DATE", help="only traces since (24h, 2026-11-30)")
    p.add_argument("--where", action="append", default=[], metavar="session.KEY=VALUE", help="(repeatable)")
    p.add_argument("--root", metavar="GLOB", help="only traces whose root boundary matches")
    p.add_argument("--shard", metavar="I/N", help="only the I-th of N shards, by trace id (a CI matrix)")
    p.add_argument("--limit", type=int, metavar="N", help="at most the N most recent traces")
    p.add_argument("--check", metavar="MODULE:FUNCTION", help="whether a recorded failure is fixed now")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE", help="(repeatable)")
    p.add_argument("-n", "--workers", metavar="N", help="processes (pytest-xdist): a number or auto")
    p.add_argument("--report", metavar="PATH", help="write every trace's outcome and replay report as JSON")
    p.add_argument("--junitxml", metavar="PATH", help="write JUnit XML (one testcase per trace)")
    p.add_argument(
        "--pytest-args", default="", metavar="ARGS", help="more pytest arguments as one string: --pytest-args='-q -x'"
    )


def pytest_arguments(args: argparse.Namespace) -> list[str]:
    """The pytest command line ``args`` stand for."""
    argv = ["--chronicle-corpus", args.source, "--chronicle-corpus-only", "-p", "no:cacheprovider"]
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):  # the entry point is not loaded: name the plugin
        argv += ["-p", "chronicle_otel.pytest_plugin"]
    flags = {"failed": "--chronicle-failed"}
    options = {
        "since": "--chronicle-since",
        "root": "--chronicle-root",
        "shard": "--chronicle-shard",
        "limit": "--chronicle-corpus-limit",
        "check": "--chronicle-check",
        "report": "--chronicle-report",
        "junitxml": "--junitxml",
    }
    for name, flag in flags.items():
        if getattr(args, name):
            argv.append(flag)
    for name, flag in options.items():
        value = getattr(args, name)
        if value is not None:
            argv += [flag, str(value)]
    for where in args.where:
        argv += ["--chronicle-where", where]
    for module in args.imports:
        argv += ["--chronicle-import", module]
    if args.workers:
        if importlib.util.find_spec("xdist") is None:
            raise ChronicleError("-n needs pytest-xdist: pip install pytest-xdist")
        argv += ["-n", str(args.workers)]
    try:
        extra = shlex.split(args.pytest_args or "")
    except ValueError as exc:
        raise ChronicleError(f"--pytest-args: {exc}") from None
    return argv + extra


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``chronicle replay-all``."""
    if importlib.util.find_spec("pytest") is None:
        raise ChronicleError("replay-all runs the corpus under pytest: pip install pytest")
    import pytest

    return int(pytest.main(pytest_arguments(args)))
