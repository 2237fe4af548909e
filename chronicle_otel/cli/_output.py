"""What the ``chronicle`` command writes: plain text in a pipe, colours on a terminal, progress on a terminal's stderr.

Colours are used only when the output is a terminal and ``NO_COLOR`` is unset or empty (https://no-color.org);
progress bars only when stderr is a terminal. Both are drawn by ``rich``, imported only then. Recorded text reaches
the terminal only through :func:`clean`: control characters are shown escaped, never interpreted.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

Part = str | tuple[str, str]
"""A piece of a line: plain text, or ``(text, style)`` with a ``rich`` style such as ``"bold red"``."""

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def clean(text: object) -> str:
    """``text`` safe for a terminal: control characters (escape sequences, carriage returns, bidi overrides) are
    shown as ``\\xNN``/``\\uNNNN`` escapes instead of being interpreted."""
    return _CONTROL.sub(lambda m: ascii(m.group())[1:-1], str(text))


def wants_colour(stream: TextIO) -> bool:
    """True when ``stream`` is a terminal and ``NO_COLOR`` is unset or empty."""
    if os.environ.get("NO_COLOR", ""):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):  # a closed or unusual stream
        return False


class Output:
    """Lines of text to ``stream``, styled when it is a terminal (see :func:`wants_colour`).

    Args:
        stream: where the lines go.
        colour: force colours on or off (default: :func:`wants_colour`).
    """

    def __init__(self, stream: TextIO, colour: bool | None = None) -> None:
        self.stream = stream
        self.colour = wants_colour(stream) if colour is None else colour
        self._console: Any = None

    def line(self, *parts: Part) -> None:
        """Write one line made of ``parts`` (plain strings, or ``(text, style)`` pairs)."""
        if not self.colour:
            self.stream.write("".join(p if isinstance(p, str) else p[0] for p in parts) + "\n")
            return
        from rich.text import Text

        text = Text(no_wrap=True, end="\n")
        for part in parts:
            if isinstance(part, str):
                text.append(part)
            else:
                text.append(part[0], style=part[1] or None)
        self._rich().print(text, soft_wrap=True)

    def json(self, document: object) -> None:
        """Write ``document`` as one line of JSON."""
        self.stream.write(json.dumps(document, ensure_ascii=False) + "\n")

    def _rich(self) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(
                file=self.stream,
                force_terminal=True,
                highlight=False,
                markup=False,
                emoji=False,
                soft_wrap=True,
            )
        return self._console


STATUS_STYLE = {"OK": "green", "ERROR": "bold red"}
"""Styles of the statuses a table or a tree shows."""


def table(rows: list[list[Part]], out: Output, right: frozenset[int] = frozenset()) -> None:
    """Columns aligned on the widest cell; column numbers in ``right`` are right-aligned. The last column is not
    padded."""
    if not rows:
        return
    widths = [0] * max(len(r) for r in rows)
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(_text(cell)))
    for row in rows:
        parts: list[Part] = []
        for i, cell in enumerate(row):
            last = i == len(row) - 1
            text = _text(cell)
            pad = "" if last and i not in right else " " * (widths[i] - len(text))
            if i:
                parts.append("  ")
            if i in right:
                parts.append(pad)
            parts.append(cell)
            if i not in right and not last:
                parts.append(pad)
        out.line(*parts)


def _text(part: Part) -> str:
    return part if isinstance(part, str) else part[0]


@contextlib.contextmanager
def progress(description: str, total: int | None, stream: TextIO | None = None) -> Iterator[Callable[[int], None]]:
    """A progress bar on ``stream`` (default stderr) while the block runs, when it is a terminal; else nothing.

    Yields:
        ``update(done)``: the number of items done so far.
    """
    stream = stream if stream is not None else sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError, OSError):
        tty = False
    if not tty:
        yield lambda done: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    count = MofNCompleteColumn() if total is not None else TextColumn("{task.completed}", markup=False)
    columns = [TextColumn("{task.description}", markup=False), BarColumn(), count, TimeElapsedColumn()]
    console = Console(file=stream, highlight=False, markup=False, emoji=False)
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(clean(description), total=total)
        yield lambda done: bar.update(task, completed=done)
