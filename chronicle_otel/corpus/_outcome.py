"""One trace of a corpus replayed against the code as it is now, and what came of it.

A recorded success must replay as recorded: no divergence, the root's output (or items) equal. A recorded failure
is fixed when the check says so (by default: the root no longer raises).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

from .._api import publish
from ..errors import ChronicleError, ReplayDivergence, ReplayError
from ..model import Trace, format_key
from ..replaying import FindingKind, ReplayReport, ReplayRun, replay

__all__ = ["CorpusOutcome", "CorpusResult", "Check", "replay_for_corpus"]

Check = Callable[..., Any]
"""A recorded failure's check, called with those of ``trace``, ``run``, ``result`` and ``error`` (the exception the
root raised now, or None) it names. True: fixed; False or an ``AssertionError``: still failing; None (an assert-style
check that passed): fixed when the root no longer raises."""

_UNREPLAYABLE_KINDS = frozenset({FindingKind.UNRESOLVED, FindingKind.UNDECODABLE})


class CorpusOutcome(str, Enum):
    """What replaying one trace of a corpus came to (a string, like :class:`~chronicle_otel.replaying.FindingKind`)."""

    PASSED = "passed"
    """A recorded success that replays as recorded (differences a declared change explains aside)."""
    FIXED = "fixed"
    """A recorded failure the check now passes."""
    STILL_FAILING = "still failing"
    """A recorded failure the check still fails."""
    NEWLY_BROKEN = "newly broken"
    """A recorded success whose output differs now, or that raises."""
    DIVERGED = "diverged"
    """The replay could not follow the recording (a divergence: an unexpected call, a model called live…)."""
    UNREPLAYABLE = "unreplayable"
    """The trace cannot be replayed here: it does not load, its root is not defined in this process, or a stub's
    recording cannot answer."""

    def __str__(self) -> str:
        return self.value


@dataclasses.dataclass(frozen=True)
class CorpusResult:
    """The outcome of one trace, and why.

    Attributes:
        outcome: what it came to.
        reason: one line saying why.
        details: the lines that show it (a diff, the divergences, the check's message).
        report: the replay's report (None when the trace was not replayed).
        recorded_failure: the recording's root failed.
    """

    outcome: CorpusOutcome
    reason: str
    details: tuple[str, ...] = ()
    report: ReplayReport | None = None
    recorded_failure: bool = False


def replay_for_corpus(
    trace: Trace, check: Check | None = None, options: Mapping[str, Any] | None = None
) -> CorpusResult:
    """Replay ``trace`` against the code of this process and judge the outcome.

    Args:
        trace: the recorded run (its root boundary must be defined in this process: import your code first).
        check: for a recorded failure, whether it is fixed now (see :data:`Check`); default: the root no longer
            raises.
        options: keyword arguments of :func:`~chronicle_otel.replay` (default: every LLM call stubbed).

    Returns:
        The :class:`CorpusResult`.
    """
    root = trace.root
    if root is None:
        return CorpusResult(CorpusOutcome.UNREPLAYABLE, "the trace holds no boundary")
    failed = root.failed
    try:
        run = replay(trace, **dict(options or {}))
    except ChronicleError as exc:
        return CorpusResult(CorpusOutcome.UNREPLAYABLE, f"cannot replay: {exc}", recorded_failure=failed)
    result: Any = None
    error: BaseException | None = None
    try:
        with run:
            result = run.rerun_items() if root.stream else run.rerun()
    except ReplayDivergence as exc:
        error = exc
    except ReplayError as exc:
        report = run.report
        return CorpusResult(CorpusOutcome.UNREPLAYABLE, str(exc), report=report, recorded_failure=failed)
    except Exception as exc:  # the agent's own exception: a recorded failure may still raise it
        error = exc
    report = run.report
    unreplayable = [f for f in report.divergences if f.kind in _UNREPLAYABLE_KINDS]
    if unreplayable:
        return CorpusResult(
            CorpusOutcome.UNREPLAYABLE,
            f"a stub's recording cannot answer: {unreplayable[0].message}",
            tuple(str(f) for f in unreplayable[:5]),
            report,
            failed,
        )
    if report.divergences:
        first = report.divergences[0]
        return CorpusResult(
            CorpusOutcome.DIVERGED,
            f"{len(report.divergences)} divergences; first: [{first.kind}] {format_key(first.call_key)}: "
            f"{first.message}",
            tuple(str(f) for f in report.divergences[:5]),
            report,
            failed,
        )
    if failed:
        return _judge_failure(trace, run, result, error, check)
    if error is not None:
        return CorpusResult(
            CorpusOutcome.NEWLY_BROKEN,
            f"recorded a success; now raises {type(error).__name__}: {short_repr(str(error), 160)}",
            report=report,
        )
    root_key = root.call_key
    changed = [f for f in report.changes if f.call_key == root_key]
    if changed:
        return CorpusResult(
            CorpusOutcome.NEWLY_BROKEN, f"recorded a success; now {changed[0].message}", changed[0].details, report
        )
    if report.intended:
        changes = ", ".join(dict.fromkeys(f.change or "" for f in report.intended))
        return CorpusResult(
            CorpusOutcome.PASSED, f"replays as recorded but for the intended changes {changes}", report=report
        )
    return CorpusResult(CorpusOutcome.PASSED, "replays as recorded", report=report)


def _judge_failure(
    trace: Trace, run: ReplayRun, result: Any, error: BaseException | None, check: Check | None
) -> CorpusResult:
    report = run.report
    verdict: Any = None
    if check is not None:
        arguments = {"trace": trace, "run": run, "result": result, "error": error}
        try:
            accepted = set(inspect.signature(check).parameters)
            verdict = check(**{k: v for k, v in arguments.items() if k in accepted})
        except AssertionError as exc:
            text = str(exc).strip()
            message = text.splitlines()[0] if text else "the check's assertion failed"
            return _still(f"the check fails: {message}", report)
        except Exception as exc:
            return _still(f"the check raised {type(exc).__name__}: {short_repr(str(exc), 160)}", report)
    if verdict is None:  # no verdict (an assert-style check that passed): the root must no longer raise
        if error is not None:
            return _still(f"still raises {type(error).__name__}: {short_repr(str(error), 160)}", report)
        reason = "the check passes and the root returns" if check is not None else "the root returns now"
        return CorpusResult(CorpusOutcome.FIXED, f"recorded a failure; {reason}", report=report, recorded_failure=True)
    if verdict:
        return CorpusResult(
            CorpusOutcome.FIXED, "recorded a failure; the check says fixed", report=report, recorded_failure=True
        )
    return _still("the check says still failing", report)


def _still(reason: str, report: ReplayReport) -> CorpusResult:
    return CorpusResult(CorpusOutcome.STILL_FAILING, reason, report=report, recorded_failure=True)


def short_repr(text: str, width: int) -> str:
    """``text`` on one line of at most ``width`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


publish(__name__, globals())
