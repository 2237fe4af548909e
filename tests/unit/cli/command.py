"""The ``chronicle`` command run in this process, as the CLI tests (and tests of what the CLI shows) run it."""

from __future__ import annotations

import io
import sys

from chronicle_otel.cli import main


class TTY(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def run(*args: str, out: io.StringIO | None = None) -> tuple[int, str, str]:
    """``chronicle ARGS``: the exit status, what it wrote, and what it said on stderr."""
    out = out if out is not None else io.StringIO()
    err = io.StringIO()
    old = sys.stderr
    sys.stderr = err
    try:
        code = main(list(args), out=out)
    finally:
        sys.stderr = old
    return code, out.getvalue(), err.getvalue()
