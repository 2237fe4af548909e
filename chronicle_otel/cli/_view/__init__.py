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

Bounds (in ``_data``): each payload text is cut at ``MAX_PAYLOAD_CHARS`` characters, all payloads of a page together
at ``MAX_PAGE_PAYLOAD_CHARS``, and at most ``MAX_BOUNDARIES`` boundaries are shown; the page says so where it happens.

The parts, one concept each: this module is the command (arguments, where the page is written, the browser);
``_report`` reads a replay report from its JSON; ``_data`` turns a trace (and a report) into the page's data;
``_readable`` shows typed values as Python shows them; ``_page`` assembles the HTML document around the data, with
``view.css`` and ``view.js``.
"""

from __future__ import annotations

import argparse
import re
import sys
import webbrowser
from pathlib import Path
from typing import Any, TextIO

from ...errors import ChronicleError
from ...model import Trace
from ...replaying import ReplayReport
from .. import _show, _source
from .._output import clean
from ._page import render_html
from ._report import read_report

NAME = "view"


def add_parser(sub: Any) -> None:
    """The ``view`` subcommand and its options."""
    p = sub.add_parser(
        NAME,
        help="write one self-contained HTML page of a trace: tree, timeline, payloads, search",
        description="Write one self-contained HTML page of a trace, to open in a browser with no network: the "
        "boundary tree, a timeline, the session variables, a payload viewer with search, the errors highlighted, and "
        "a replay report when one is given.",
    )
    p.add_argument("trace_id", help="32 hex digits, a unique prefix of them, or latest / latest-failed / latest-error")
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
    report = read_report(args.report) if args.report else None
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
