"""The ``chronicle`` command: list and show recorded traces, and turn one into a regression test.

Usage::

    chronicle list [--store DIR] [--failed] [--replays] [-n 20]
    chronicle show TRACE_ID [--store DIR | --file trace.jsonl]
    chronicle gen-test TRACE_ID [--store DIR | --file F] [--out tests/regressions] [--stub kind:llm] [--live NAME]
                                [--expect "result.status == 'blocked'"] [--name SLUG]
    chronicle pull TRACE_ID --from SOURCE -o incident.jsonl [--wait 30s] [--allow-incomplete]
    chronicle gc [--store DIR] [--success-rate 0.1] [--max-age 30d] [--max-size 2GB] [--dry-run]

``TRACE_ID`` is 32 hex digits, or ``latest`` / ``latest-failed`` for the store. Replays recorded into the store
(``replay(trace, isolate=False)``) are kept apart: ``list`` shows them only with ``--replays`` (marked ``replay of``
and the recorded trace id), ``latest`` and ``latest-failed`` never pick one, and ``show`` labels one by its id.
"""

from __future__ import annotations

from ._commands import main

__all__ = ["main"]
