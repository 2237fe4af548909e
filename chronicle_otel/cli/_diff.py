"""``chronicle diff``: two runs side by side, call by call (a recording and its replay, or any two traces).

Boundaries are aligned by call key (``run_agent[0] > plan[1]``): a call only in the second trace is *added*, one only
in the first is *missing*, and a call in both whose kind, status, input, output or error differ is *changed*, with
the differences in its payloads. The exit status is that of diff(1): 0 the same, 1 different, 2 an error.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
from typing import Any, TextIO

from .._assembled import KINDS, diff_messages
from ..codec import same_encoding
from ..errors import ChronicleError
from ..model import Boundary, CallKey, Payload, Trace, format_key
from ..replaying import diff_lines
from . import _source
from ._list import duration
from ._output import STATUS_STYLE, Output, Part, clean
from ._render import assembled_of, parse, unreplayable
from ._show import add_arguments, payload_lines, replay_of, status

NAME = "diff"
EXIT_SAME = 0
EXIT_DIFFERENT = 1
_ONE_SIDE_WIDTH = 160


def add_parser(sub: Any) -> None:
    """The ``diff`` subcommand and its options."""
    p = sub.add_parser(
        NAME,
        help="compare two traces call by call, or a recording and its replay",
        description="Compare two traces, aligned by call key: calls added, missing, or changed (kind, status, "
        "input, output or error). With one trace: a replay against the run it replays, or a recorded run against "
        "its newest replay in the store. Exit status: 0 the same, 1 different, 2 an error.",
    )
    p.add_argument(
        "a", metavar="A", help="a trace id (or unique prefix, latest, latest-failed, latest-error) or a trace file"
    )
    p.add_argument("b", metavar="B", nargs="?", help="the trace to compare A with (default: see above)")
    add_arguments(p)
    p.add_argument("--json", action="store_true", help="the differences as JSON")


@dataclasses.dataclass
class Change:
    """One call key whose calls differ (or that only one trace has)."""

    change: str  # "added", "missing" or "changed"
    call_key: CallKey
    kind: str
    name: str
    details: list[tuple[str, list[str]]]  # (what, lines): ("status", ["ERROR -> OK"]), ("output", [...])
    unreplayable: str | None = None  # the marker of a call whose values were recorded as placeholders

    def to_dict(self) -> dict[str, Any]:
        """The change as JSON."""
        return {
            "change": self.change,
            "call_key": format_key(self.call_key),
            "kind": self.kind,
            "name": self.name,
            "details": {what: lines for what, lines in self.details},
            "unreplayable": self.unreplayable,
        }


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``chronicle diff``."""
    a, b = _traces(args)
    labels = ("recorded", "now") if replay_of(b) == a.trace_id else ("in a", "in b")
    changes, same = compare(a, b, labels)
    if args.json:
        Output(out, colour=False).json(
            {
                "a": _side(a),
                "b": _side(b),
                "same": same,
                "added": sum(1 for c in changes if c.change == "added"),
                "missing": sum(1 for c in changes if c.change == "missing"),
                "changed": sum(1 for c in changes if c.change == "changed"),
                "changes": [c.to_dict() for c in changes],
            }
        )
    else:
        _print(a, b, changes, same, Output(out))
    return EXIT_DIFFERENT if changes else EXIT_SAME


def _traces(args: argparse.Namespace) -> tuple[Trace, Trace]:
    a = _load(args, args.a)
    if args.b is not None:
        return a, _load(args, args.b)
    recorded = replay_of(a)
    if recorded is not None:
        return _load(args, recorded), a
    replays = _source.replays_of(args, a.trace_id)
    if not replays:
        raise ChronicleError(
            f"trace {a.trace_id} is not a replay and has no replay in the store: name two traces (chronicle diff A B)"
        )
    return a, _load(args, replays[0])


def _load(args: argparse.Namespace, text: str) -> Trace:
    """A trace by id from ``--file`` or the store, or the trace of the file ``text`` names."""
    if not _is_id(text) and os.path.exists(text):
        return _source.load(args, "-", file=text)
    return _source.load(args, text)


def _is_id(text: str) -> bool:
    try:
        _source.check_id(text)
    except ChronicleError:
        return False
    return True


def compare(a: Trace, b: Trace, labels: tuple[str, str] = ("in a", "in b")) -> tuple[list[Change], int]:
    """The changes from ``a`` to ``b``, in call order (``a``'s, then calls only ``b`` has), and how many calls are
    the same."""
    a_keys, b_keys = a.by_key(), b.by_key()
    changes: list[Change] = []
    same = 0
    for key in dict.fromkeys([*(x.call_key for x in a.boundaries), *(x.call_key for x in b.boundaries)]):
        left, right = a_keys.get(key, []), b_keys.get(key, [])
        for i in range(max(len(left), len(right))):
            if i >= len(right):
                changes.append(Change("missing", key, left[i].kind, left[i].name, [], unreplayable(left[i])))
            elif i >= len(left):
                changes.append(Change("added", key, right[i].kind, right[i].name, [], unreplayable(right[i])))
            else:
                details = _differences(left[i], right[i], labels)
                if details:
                    marker = unreplayable(right[i]) or unreplayable(left[i])
                    changes.append(Change("changed", key, right[i].kind, right[i].name, details, marker))
                else:
                    same += 1
    return changes, same


def _differences(x: Boundary, y: Boundary, labels: tuple[str, str]) -> list[tuple[str, list[str]]]:
    details: list[tuple[str, list[str]]] = []
    if x.kind != y.kind:
        details.append(("kind", [f"{x.kind} -> {y.kind}"]))
    if status(x) != status(y):
        details.append(("status", [f"{status(x)} -> {status(y)}"]))
    for what, left, right in (
        ("input", x.raw_input, y.raw_input),
        ("output", x.raw_output, y.raw_output),
        ("error", x.raw_error, y.raw_error),
    ):
        lines = _stream_diff(x, y) if what == "output" else None
        if lines is None:
            lines = _payload_diff(left, right, labels, error=what == "error")
        if lines:
            details.append((what, lines))
    return details


def _stream_diff(x: Boundary, y: Boundary) -> list[str] | None:
    """The differences of two streamed calls' messages (``text: … -> …``, ``tool call place_order arguments: …``);
    None when either did not stream a message :mod:`chronicle_otel._assembled` knows."""
    left, right = x.raw_output, y.raw_output
    if left is None or right is None or not left.complete or not right.complete:
        return None
    a = assembled_of(x, parse(left.text)[1])
    b = assembled_of(y, parse(right.text)[1])
    if a is None or b is None:
        return None
    if same_encoding(left.text, right.text) or same_encoding(right.text, left.text):
        return []
    lines = diff_messages(a, b)
    if lines:
        return lines
    unit = KINDS[b.kind][1]
    counts = f": {a.items} -> {b.items} {unit}" if a.items != b.items else f" ({unit} differ)"
    return [f"the same message, streamed differently{counts}"]


def _payload_diff(
    left: Payload | None, right: Payload | None, labels: tuple[str, str], *, error: bool = False
) -> list[str]:
    if left is None and right is None:
        return []
    if left is None or right is None:  # one side has none: the other shown whole, as Python shows it
        how = {"error": True} if error else {}
        shown = [payload_lines(p, _ONE_SIDE_WIDTH, **how)[0] if p is not None else "-" for p in (left, right)]
        return [f"{labels[0]} {shown[0]}, {labels[1]} {shown[1]}"]
    cut = [labels[i] for i, p in enumerate((left, right)) if p is not None and not p.complete]
    if cut:
        if left is not None and right is not None and left.digest and left.digest == right.digest:
            return []  # the same hash: the same payload, whole or not
        return [f"cannot compare: the payload {' and '.join(cut)} is cut and no payload store has it whole"]
    if (
        left is not None
        and right is not None
        and (same_encoding(left.text, right.text) or same_encoding(right.text, left.text))
    ):
        return []  # the same value (one side may be written as an earlier version wrote it)
    return diff_lines(left.text if left else None, right.text if right else None, labels)


def _side(t: Trace) -> dict[str, Any]:
    root = t.root
    return {
        "trace_id": t.trace_id,
        "replay_of": replay_of(t),
        "root": root.name if root is not None else None,
        "status": status(root) if root is not None else None,
        "start_ns": root.start_ns if root is not None else None,
        "boundaries": len(t.boundaries),
    }


_MARK: dict[str, tuple[str, str]] = {"added": ("+", "green"), "missing": ("-", "red"), "changed": ("~", "yellow")}


def _print(a: Trace, b: Trace, changes: list[Change], same: int, out: Output) -> None:
    for side, t in (("a", a), ("b", b)):
        out.line(f"{side}: ", *_describe(t))
    for c in changes:
        mark, style = _MARK[c.change]
        marker: list[Part] = [(f"  {clean(c.unreplayable)}", "red")] if c.unreplayable else []
        out.line(
            (f"{mark} {c.change:8s} ", style),
            (f"{clean(c.kind):9s} ", "cyan"),
            (clean(format_key(c.call_key)), "bold"),
            *marker,
        )
        for what, lines in c.details:
            if len(lines) == 1:
                out.line(f"    {what}: ", clean(lines[0]))
                continue
            out.line(f"    {what}:")
            for line in lines:
                out.line("      ", clean(line))
    counts = {k: sum(1 for c in changes if c.change == k) for k in ("changed", "added", "missing")}
    summary = ", ".join(f"{n} {k}" for k, n in counts.items())
    calls = f"{same} call{'' if same == 1 else 's'} the same"
    out.line(("the same" if not changes else "different", "bold"), f": {calls}, {summary}")


def _describe(t: Trace) -> list[Part]:
    root = t.root
    parts: list[Part] = [(t.trace_id, "yellow")]
    if root is not None:
        state = status(root)
        when = dt.datetime.fromtimestamp(root.start_ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        parts += [f"  {clean(root.name)}  ", (state, STATUS_STYLE[state]), f"  {when}  "]
        parts.append(f"{duration(root.end_ns - root.start_ns)}  {len(t.boundaries)} boundaries")
    recorded = replay_of(t)
    if recorded is not None:
        parts.append((f"  replay of {clean(recorded[:8])}", "magenta"))
    return parts
