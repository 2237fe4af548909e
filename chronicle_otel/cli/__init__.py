"""The ``chronicle`` command: find a recorded run, inspect it, compare it, and turn it into a regression test.

Usage::

    chronicle list [--failed] [--root NAME] [--where session.KEY=VALUE] [--since 2h] [--contains TEXT]
                   [--replays] [-n 20] [--json] [PREFIX]
    chronicle show TRACE_ID [--full] [--boundary NAME_OR_KEY] [--json]
    chronicle diff A [B] [--json]
    chronicle view TRACE_ID [--out FILE.html] [--open] [--report REPORT.json]
    chronicle gen-test TRACE_ID [--out tests/regressions] [--stub kind:llm] [--live NAME]
                                [--expect "result.status == 'blocked'"] [--import STATEMENT] [--override KEY=EXPR]
                                [--name SLUG] [--json]
    chronicle pull TRACE_ID --from SOURCE -o incident.jsonl [--wait 30s] [--allow-incomplete] [--json]
    chronicle gc [--success-rate 0.1] [--max-age 30d] [--max-size 2GB] [--dry-run]

Every command reading a trace takes ``--store DIR`` (default ``$CHRONICLE_HOME``, else ``./.chronicle``) or
``--file trace.jsonl``. ``TRACE_ID`` is 32 hex digits, a unique prefix of at least 4 of them (``17b55ba4``), or
``latest`` / ``latest-failed`` / ``latest-error``. A *failed* trace is a run whose root failed (``list --failed``,
``latest-failed``); a trace *with errors* has any span that failed, the root's or another's, such as a retried tool
call (``list --errors``, ``latest-error``, the error count of ``view``, what ``gc`` keeps). Replays recorded into
the store (``replay(trace, isolate=False)``) are kept apart: ``list`` shows them only with ``--replays`` (marked
``replay of`` and the recorded trace id), ``latest``, ``latest-failed`` and ``latest-error`` never pick one, ``show``
labels one, and ``diff REPLAY`` compares it with the run it replays.

Output is plain text in a pipe, coloured on a terminal (unless ``NO_COLOR`` is set), and JSON with ``--json``; a
reader that stops early (``chronicle show ID | head -1``) ends the command quietly.
"""

from __future__ import annotations

from ._commands import main

__all__ = ["main"]
