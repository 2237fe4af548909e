"""The replay report: divergences, drift and changes, each explaining itself."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import orjson

from ..model import format_key

_MAX_DIFFS = 12


def json_diff(recorded: Any, actual: Any, path: str = "$") -> Iterator[str]:
    """Readable differences between two JSON trees: ``$.order.data.quantity: 1000 != 5``."""
    if isinstance(recorded, dict) and isinstance(actual, dict):
        for key in sorted(set(recorded) | set(actual), key=str):
            sub = f"{path}.{key}"
            if key not in actual:
                yield f"{sub}: recorded {_short(recorded[key])}, now missing"
            elif key not in recorded:
                yield f"{sub}: not recorded, now {_short(actual[key])}"
            else:
                yield from json_diff(recorded[key], actual[key], sub)
    elif isinstance(recorded, list) and isinstance(actual, list):
        for i, (r, a) in enumerate(zip(recorded, actual)):  # noqa: B905 - lengths compared below
            yield from json_diff(r, a, f"{path}[{i}]")
        if len(recorded) != len(actual):
            yield f"{path}: recorded {len(recorded)} items, now {len(actual)}"
    elif recorded != actual or type(recorded) is not type(actual):
        yield f"{path}: recorded {_short(recorded)} != now {_short(actual)}"


def _short(value: Any, width: int = 80) -> str:
    text = orjson.dumps(value).decode() if not isinstance(value, str) else repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def diff_lines(recorded_text: str | None, actual_text: str | None) -> list[str]:
    """The first differences between two canonical JSON payload texts."""
    try:
        recorded = orjson.loads(recorded_text) if recorded_text is not None else None
        actual = orjson.loads(actual_text) if actual_text is not None else None
    except orjson.JSONDecodeError:
        return [f"recorded {_short(recorded_text)} != now {_short(actual_text)}"]
    lines = list(json_diff(recorded, actual))
    if len(lines) > _MAX_DIFFS:
        lines = [*lines[:_MAX_DIFFS], f"… and {len(lines) - _MAX_DIFFS} more differences"]
    return lines


@dataclasses.dataclass(frozen=True)
class Finding:
    """One entry of a :class:`ReplayReport`.

    Attributes:
        kind: ``unexpected-call``, ``unused-recording``, ``input-mismatch``, ``order``, ``input-drift``,
            ``unrecorded-live``, ``output-changed``.
        call_key: the call key concerned (recorded key for recordings, actual key for calls).
        message: one line saying what happened.
        details: the differences or candidates, one per line.
    """

    kind: str
    call_key: tuple[tuple[str, int], ...]
    message: str
    details: tuple[str, ...] = ()

    def __str__(self) -> str:
        head = f"[{self.kind}] {format_key(self.call_key)}: {self.message}"
        return "\n".join([head, *(f"    {line}" for line in self.details)])


@dataclasses.dataclass
class ReplayReport:
    """What a replay found.

    Attributes:
        divergences: calls with no recording, recordings never used, changed order, input mismatches under
            ``on_input_mismatch="error"``. Any of them makes :attr:`ok` false.
        drift: stubbed calls whose input changed under ``"warn"`` (expected after a fix: downstream LLM
            calls see new inputs; the stub still answers), and unrecorded calls run live under ``on_missing="live"``.
        changes: live boundaries whose output (or error) differs from the recording — usually the point of the fix.
        stubbed: call keys answered from the recording.
        live: call keys that ran live.
        strict: when true, drift also makes :attr:`ok` false.
    """

    divergences: list[Finding] = dataclasses.field(default_factory=list)
    drift: list[Finding] = dataclasses.field(default_factory=list)
    changes: list[Finding] = dataclasses.field(default_factory=list)
    stubbed: list[tuple[tuple[str, int], ...]] = dataclasses.field(default_factory=list)
    live: list[tuple[tuple[str, int], ...]] = dataclasses.field(default_factory=list)
    strict: bool = False

    @property
    def ok(self) -> bool:
        """No divergence (and, when strict, no drift)."""
        return not self.divergences and not (self.strict and self.drift)

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        lines = [
            f"replay {'ok' if self.ok else 'FAILED'}: {len(self.stubbed)} stubbed, {len(self.live)} live, "
            f"{len(self.divergences)} divergences, {len(self.drift)} drift, {len(self.changes)} changes"
        ]
        for title, findings in (("divergences", self.divergences), ("drift", self.drift), ("changes", self.changes)):
            if findings:
                lines.append(f"{title}:")
                lines.extend("  " + str(f).replace("\n", "\n  ") for f in findings)
        return "\n".join(lines)
