"""The replay's bookkeeping: what ran live, which overrides applied, and the findings about the run as a whole.

As the run goes: model calls that ran live unasked, inputs that changed under a stub, session variables that differ
from the recording's, network attempts the guard refused. When it ends (:meth:`Ledger.finish`): recordings never
used (or no longer called by the live code), overrides never applied, and spans the source held in conflicting
copies.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Mapping
from typing import Any

from .. import semconv
from .._internal.hooks import BoundarySpec
from ..config import get_config
from ..errors import NetworkBlockedError, ReplayDivergence
from ..model import Boundary, CallKey, Trace
from ..record.extension import current_session
from ._drift import DriftPolicy
from ._matching import Recordings
from ._options import InputMismatch
from ._report import DriftCause, Finding, FindingKind, ReplayReport, filtered_diff


class Ledger:
    """What a replay has done so far, and the report's findings about it.

    Args:
        trace: the recorded run.
        report: the report the findings go to.
        overrides: the resolved ``override=`` (``{span id: (key as given, answer)}``).
        policy: ``ignore=``, ``strict=`` and ``changed=``.
        limit: ``max_live_llm=``: the most model calls that may run live (None: no limit).
    """

    def __init__(
        self,
        trace: Trace,
        report: ReplayReport,
        overrides: Mapping[str, tuple[str, Any]],
        policy: DriftPolicy,
        limit: int | None = None,
    ) -> None:
        self._trace = trace
        self._report = report
        self._overrides = overrides
        self.policy = policy
        """``ignore=``, ``strict=``, ``changed=``, and the changes of the run so far."""
        self.applied: set[str] = set()
        """Span ids of the recorded calls an override answered."""
        self.ran_live: set[str] = set()
        """Span ids of the recorded calls that ran live."""
        self._finished = False
        self._limit = limit
        self._model_calls = itertools.count()

    def live_call(self, key: CallKey, name: str, kinds: tuple[str, ...], explicit: Callable[[str, str], bool]) -> None:
        """A call is about to run live: an LLM one is a model call, a divergence unless ``live=`` selects it
        (``explicit``), and one past ``max_live_llm=`` raises instead of running.

        Raises:
            ReplayDivergence: the call would pass ``max_live_llm=`` (a ``live-llm-limit`` divergence).
        """
        if "llm" not in kinds:
            return
        if self._limit is not None and next(self._model_calls) >= self._limit:  # next() is atomic under the GIL
            finding = Finding(
                FindingKind.LIVE_LLM_LIMIT,
                key,
                f"LLM boundary {name!r} did not run: the replay already made the {self._limit} live model "
                f"call{'s' if self._limit != 1 else ''} max_live_llm= allows",
            )
            self._report.divergences.append(finding)
            raise ReplayDivergence(str(finding), finding=finding)
        self._report.live_llm.append(key)
        if not any(explicit(name, kind) for kind in kinds):
            self._report.divergences.append(
                Finding(
                    FindingKind.LIVE_LLM,
                    key,
                    f"LLM boundary {name!r} ran live (a model call); stub it, or select it with live= to allow it",
                )
            )

    def input_mismatch(self, rec: Boundary, actual_text: str | None, mode: InputMismatch) -> None:
        """A stubbed call's input differs from the recording: drift under ``"warn"``, a divergence (raised) under
        ``"error"``, unless ``ignore=`` hides every difference or a declared change covers it (listed apart)."""
        assert rec.raw_input is not None
        if mode is InputMismatch.IGNORE:
            return
        lines, hidden = filtered_diff(rec.raw_input.text, actual_text, self.policy.ignored(rec.name, rec.kind))
        self._report.ignored += hidden
        if not lines:
            return
        details = tuple(lines)
        cause, why, change = self.policy.explain(rec.call_key)
        if change is None and mode is InputMismatch.ERROR:
            finding = Finding(
                FindingKind.INPUT_MISMATCH, rec.call_key, f"stubbed call with a different input ({why})", details, cause
            )
            self._report.divergences.append(finding)
            raise ReplayDivergence(str(finding), finding=finding)
        strict = change is None and self.policy.strict(rec.name, rec.kind, "input")
        finding = Finding(
            FindingKind.INPUT_DRIFT,
            rec.call_key,
            f"input changed ({why}); answered from the recording",
            details,
            cause,
            change,
            strict,
        )
        (self._report.drift if change is None else self._report.intended).append(finding)

    def unrecorded(self, key: CallKey, name: str, kind: str, message: str, details: tuple[str, ...] = ()) -> None:
        """A call with no recording runs live (``on_missing="live"``): drift, or intended under a declared change; a
        change the calls after it may show."""
        cause, why, change = self.policy.explain(key, new=True)
        self.policy.changed(key, "(ran live with no recording)", change)
        message = f"{message} ({why})"
        if change is not None:
            self._report.intended.append(Finding(FindingKind.UNRECORDED_LIVE, key, message, details, cause, change))
            return
        strict = self.policy.strict(name, kind, "new")
        self._report.drift.append(Finding(FindingKind.UNRECORDED_LIVE, key, message, details, cause, strict=strict))

    def output_changed(self, rec: Boundary, finding: Finding) -> None:
        """A live call's output differs from its recording: a change, or intended under a declared change; either way
        a change the calls after it may show."""
        change = self.policy.covering(rec.call_key)
        self.policy.changed(rec.call_key, "(output changed)", change)
        if change is None:
            self._report.changes.append(finding)
        else:
            self._report.intended.append(
                dataclasses.replace(
                    finding, cause=DriftCause.INTENDED, change=change, message=f"{finding.message} (intended: {change})"
                )
            )

    def overridden(self, rec: Boundary, text: str) -> None:
        """An ``override=`` answers the call: a change the test asked for, which the calls after it may show."""
        self.applied.add(rec.span_id)
        self.policy.changed(rec.call_key, "(overridden)", f"override {text!r}")

    def session(self, spec: BoundarySpec) -> None:
        """At the first top-level call: list the session variables that differ from the recording's."""
        root = self._trace.root
        if root is None:
            return
        config = spec.config if spec.config is not None else get_config()
        n = len(semconv.SESSION_PREFIX)
        now: dict[str, Any] = {k[n:]: v for k, v in config.session.items()}
        now.update(current_session())
        recorded = dict(root.session)
        for key in sorted(set(recorded) | set(now)):
            if key not in now:
                message = f"{key}: recorded {recorded[key]!r}, not set now"
            elif key not in recorded:
                message = f"{key}: not recorded, now {now[key]!r}"
            elif recorded[key] != now[key]:
                message = f"{key}: recorded {recorded[key]!r}, now {now[key]!r}"
            else:
                continue
            self._report.session.append(Finding(FindingKind.SESSION, (), message))

    def refused(self, key: CallKey, error: NetworkBlockedError) -> None:
        """The network guard refused an attempt made under the call ``key``: a divergence, even when the code that
        made it swallows the error."""
        what = f"{error.operation} of {error.host}" + (f":{error.port}" if error.port is not None else "")
        self._report.divergences.append(Finding(FindingKind.NETWORK, key, f"network {what} refused during the replay"))

    def finish(self, recordings: Recordings) -> ReplayReport:
        """Complete the report: recordings never used and overrides never applied become divergences (the first call
        only)."""
        if self._finished:
            return self._report
        self._finished = True
        report, trace = self._report, self._trace
        conflicting = set(trace.conflicts)
        for b in trace.boundaries if conflicting else ():
            if b.span_id in conflicting:
                report.divergences.append(
                    Finding(
                        FindingKind.CONFLICTING_RECORDINGS,
                        b.call_key,
                        f"the source holds span {b.span_id} more than once with different payloads (edited or "
                        "damaged): the replay used the most complete copy, which may not be what was recorded",
                    )
                )
        for b in recordings.unused():
            if b.parent is not None and b.parent.span_id in self.ran_live:
                message = f"the live code no longer makes the recorded {b.kind} call {b.name!r}"
                change = self.policy.intended(b.call_key)
                if change is None:
                    report.changes.append(Finding(FindingKind.NOT_CALLED, b.call_key, message))
                else:
                    report.intended.append(
                        Finding(
                            FindingKind.NOT_CALLED,
                            b.call_key,
                            f"{message} (intended: {change})",
                            cause=DriftCause.INTENDED,
                            change=change,
                        )
                    )
                continue
            report.divergences.append(
                Finding(FindingKind.UNUSED_RECORDING, b.call_key, f"recorded {b.kind} call {b.name!r} was never made")
            )
        by_id = {b.span_id: b for b in trace.boundaries}
        for span_id, (text, _) in self._overrides.items():
            if span_id not in self.applied:
                b = by_id[span_id]
                report.divergences.append(
                    Finding(
                        FindingKind.OVERRIDE_UNUSED,
                        b.call_key,
                        f"override {text!r} never applied: the call was not made",
                    )
                )
        return report
