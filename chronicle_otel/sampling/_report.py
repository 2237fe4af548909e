"""The report of a sampling: each sample, the distinct outcomes with their counts, the check's pass rate, the cost."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import orjson

from .._api import publish
from ..replaying import ReplayReport, diff_lines

_SHOWN_DIFFERENCES = 3
"""Differences from the most frequent outcome shown under each other outcome."""
_WIDTH = 110
"""Characters of an outcome shown in the table."""


@dataclasses.dataclass(frozen=True)
class Sample:
    """One sample: a replay of the trace with the chosen call live.

    Attributes:
        index: its number, from 1.
        outcome: the canonical JSON of what the root returned, or of the exception it raised.
        raised: the root raised (``outcome`` is the exception).
        summary: the outcome on one line, as Python shows it.
        result: what the root returned (None when it raised).
        error: the exception the root raised, or None.
        passed: the check's verdict (None without a check, or for a sample not counted).
        check_message: why the check failed: the assertion's text, or what the check raised.
        reached: the chosen call ran live (a sample that never made it is not counted).
        cut: the sample was stopped at its share of ``max_calls`` (not counted).
        live_calls: the model calls it made (LLM boundaries that ran live).
        input_tokens: tokens the live model calls reported (``gen_ai.usage.input_tokens``), None when none did.
        output_tokens: likewise for ``gen_ai.usage.output_tokens``.
        trace_id: the trace id of its spans (in the store, when the samples are stored), or None.
        seconds: how long it took.
        report: its replay's report.
    """

    index: int
    outcome: str
    raised: bool
    summary: str
    result: Any = dataclasses.field(repr=False)
    error: BaseException | None = dataclasses.field(repr=False)
    passed: bool | None
    check_message: str | None
    reached: bool
    cut: bool
    live_calls: int
    input_tokens: int | None
    output_tokens: int | None
    trace_id: str | None
    seconds: float
    report: ReplayReport = dataclasses.field(repr=False)

    @property
    def counted(self) -> bool:
        """The sample counts in the outcomes and the pass rate: it reached the chosen call and was not cut."""
        return self.reached and not self.cut

    def to_dict(self) -> dict[str, Any]:
        """The sample as plain JSON values (its replay report included)."""
        return {
            "index": self.index,
            "outcome": self.outcome,
            "raised": self.raised,
            "summary": self.summary,
            "passed": self.passed,
            "check_message": self.check_message,
            "reached": self.reached,
            "cut": self.cut,
            "live_calls": self.live_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "trace_id": self.trace_id,
            "seconds": round(self.seconds, 6),
            "report": {"ok": self.report.ok, **orjson.loads(orjson.dumps(dataclasses.asdict(self.report)))},
        }


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One distinct outcome of the counted samples.

    Attributes:
        outcome: the canonical JSON of the root's return value, or of the exception it raised.
        raised: the root raised.
        summary: the outcome on one line, as Python shows it.
        samples: the numbers of the samples that ended so.
        passed: how many of them the check passed (None without a check).
        differences: how it differs from the most frequent outcome (empty for that one).
    """

    outcome: str
    raised: bool
    summary: str
    samples: tuple[int, ...]
    passed: int | None
    differences: tuple[str, ...] = ()

    @property
    def count(self) -> int:
        """How many samples ended so."""
        return len(self.samples)

    def to_dict(self) -> dict[str, Any]:
        """The outcome as plain JSON values."""
        return {
            "outcome": self.outcome,
            "raised": self.raised,
            "summary": self.summary,
            "count": self.count,
            "samples": list(self.samples),
            "passed": self.passed,
            "differences": list(self.differences),
        }


def outcomes_of(samples: list[Sample]) -> list[Outcome]:
    """The distinct outcomes of the counted samples, the most frequent first (ties: the one seen first)."""
    groups: dict[tuple[bool, str], list[Sample]] = {}
    for s in samples:
        if s.counted:
            groups.setdefault((s.raised, s.outcome), []).append(s)
    ordered = sorted(groups.values(), key=lambda group: (-len(group), group[0].index))
    found: list[Outcome] = []
    for group in ordered:
        first = group[0]
        passed = None if first.passed is None else sum(1 for s in group if s.passed)
        differences: tuple[str, ...] = ()
        if found:
            lines = diff_lines(found[0].outcome, first.outcome, ("#1", f"#{len(found) + 1}"))
            differences = tuple(lines[:_SHOWN_DIFFERENCES]) + (
                (f"… and {len(lines) - _SHOWN_DIFFERENCES} more",) if len(lines) > _SHOWN_DIFFERENCES else ()
            )
        found.append(
            Outcome(first.outcome, first.raised, first.summary, tuple(s.index for s in group), passed, differences)
        )
    return found


@dataclasses.dataclass(frozen=True)
class SampleReport:
    """What :func:`~chronicle_otel.sample` found: the distribution of outcomes with one call live.

    Attributes:
        trace_id: the recorded trace sampled.
        live: the call key of the call that ran live (``run_agent[0] > plan[0]``).
        after: what the LLM calls after it did: ``"stub"`` (answered from the recording) or ``"live"``.
        samples: every sample, in order.
        outcomes: the distinct outcomes of the counted samples, the most frequent first.
        checked: a check was given.
        max_calls: the most model calls the sampling could make (each sample's share: ``max_calls // n``).
        seconds: the wall-clock time of the whole sampling.
        store: the store the samples were recorded into (as replays of the trace), or None when they were not kept.
    """

    trace_id: str
    live: str
    after: str
    samples: tuple[Sample, ...]
    outcomes: tuple[Outcome, ...]
    checked: bool
    max_calls: int
    seconds: float
    store: Path | None = None

    @property
    def n(self) -> int:
        """The number of samples taken."""
        return len(self.samples)

    @property
    def counted(self) -> int:
        """The samples that count: they reached the chosen call and were not cut at the model-call limit."""
        return sum(1 for s in self.samples if s.counted)

    @property
    def cut(self) -> int:
        """The samples stopped at their share of ``max_calls`` (not counted)."""
        return sum(1 for s in self.samples if s.cut)

    @property
    def passed(self) -> int | None:
        """The counted samples the check passed (None without a check)."""
        return sum(1 for s in self.samples if s.counted and s.passed) if self.checked else None

    @property
    def pass_rate(self) -> float | None:
        """The share of the counted samples the check passed, 0 to 1 (None without a check or counted sample)."""
        passed = self.passed
        return None if passed is None or not self.counted else passed / self.counted

    @property
    def live_calls(self) -> int:
        """The model calls made: LLM boundaries that ran live, in every sample."""
        return sum(s.live_calls for s in self.samples)

    @property
    def input_tokens(self) -> int | None:
        """Input tokens the live model calls reported, in all (None when none reported usage)."""
        return _total(s.input_tokens for s in self.samples)

    @property
    def output_tokens(self) -> int | None:
        """Output tokens the live model calls reported, in all (None when none reported usage)."""
        return _total(s.output_tokens for s in self.samples)

    def share(self, outcome: Outcome) -> float:
        """The share of the counted samples that ended with ``outcome``, 0 to 1."""
        return outcome.count / self.counted if self.counted else 0.0

    def headline(self) -> str:
        """One line: what was sampled and how."""
        after = "answered from the recording" if self.after == "stub" else "live"
        return (
            f"sampled {self.live} of trace {self.trace_id} {self.n} times, everything before it frozen as recorded "
            f"(LLM calls after it: {after})"
        )

    def totals(self) -> str:
        """One line: pass rate, model calls, tokens and time."""
        parts = []
        if self.checked:
            rate = self.pass_rate
            shown = f"{rate:.0%}" if rate is not None else "n/a"
            parts.append(f"pass rate {shown} ({self.passed}/{self.counted})")
        not_counted = self.n - self.counted
        if not_counted:
            parts.append(f"{not_counted} not counted ({self.cut} cut at the model-call limit)")
        parts.append(f"live model calls {self.live_calls} (limit {self.max_calls})")
        tokens_in, tokens_out = self.input_tokens, self.output_tokens
        parts.append(
            "tokens n/a (no usage reported)"
            if tokens_in is None and tokens_out is None
            else f"tokens {tokens_in or 0} in, {tokens_out or 0} out"
        )
        per = sum(s.seconds for s in self.samples) / self.n if self.n else 0.0
        parts.append(f"{self.seconds:.2f} s ({per:.3f} s per sample)")
        return "; ".join(parts)

    def rows(self) -> list[list[str]]:
        """The outcome table: a header, then per outcome its number, count, share, check and summary."""
        rows = [["#", "count", "share", *(["check"] if self.checked else []), "outcome"]]
        for i, outcome in enumerate(self.outcomes, 1):
            check = []
            if self.checked:
                passed = outcome.passed or 0
                check = ["pass" if passed == outcome.count else "FAIL" if not passed else f"{passed} pass"]
            summary = outcome.summary if len(outcome.summary) <= _WIDTH else outcome.summary[: _WIDTH - 1] + "…"
            rows.append([str(i), str(outcome.count), f"{self.share(outcome):.0%}", *check, summary])
        return rows

    def difference_lines(self) -> list[str]:
        """How each outcome differs from the most frequent one, a line per difference (``#2 $.quantity: …``)."""
        return [f"  #{i} {line}" for i, o in enumerate(self.outcomes, 1) for line in o.differences]

    def __str__(self) -> str:
        rows = self.rows()
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = [self.headline()]
        for row in rows:
            cells = [
                cell.rjust(width) if i < 3 else cell.ljust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=True))
            ]
            lines.append("  ".join(cells).rstrip())
        return "\n".join([*lines, *self.difference_lines(), self.totals()])

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON values (``chronicle sample --json``)."""
        return {
            "trace_id": self.trace_id,
            "live": self.live,
            "after": self.after,
            "n": self.n,
            "counted": self.counted,
            "cut": self.cut,
            "checked": self.checked,
            "passed": self.passed,
            "pass_rate": self.pass_rate,
            "outcomes": [{**o.to_dict(), "share": self.share(o)} for o in self.outcomes],
            "live_calls": self.live_calls,
            "max_calls": self.max_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "seconds": round(self.seconds, 6),
            "store": str(self.store) if self.store is not None else None,
            "samples": [s.to_dict() for s in self.samples],
        }


def _total(values: Any) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


publish(__name__, globals())
