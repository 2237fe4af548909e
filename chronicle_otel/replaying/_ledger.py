"""The replay's bookkeeping: what ran live, which overrides applied, and the findings about the run as a whole.

As the run goes: model calls that ran live unasked, inputs that changed under a stub, session variables that differ
from the recording's, network attempts the guard refused. When it ends (:meth:`Ledger.finish`): recordings never
used (or no longer called by the live code), overrides never applied, and spans the source held in conflicting
copies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .. import semconv
from .._internal.hooks import BoundarySpec
from ..config import get_config
from ..errors import NetworkBlockedError, ReplayDivergence
from ..model import Boundary, CallKey, Trace
from ..record.extension import current_session
from ._matching import Recordings
from ._options import InputMismatch
from ._report import Finding, FindingKind, ReplayReport, diff_lines


class Ledger:
    """What a replay has done so far, and the report's findings about it.

    Args:
        trace: the recorded run.
        report: the report the findings go to.
        overrides: the resolved ``override=`` (``{span id: (key as given, answer)}``).
    """

    def __init__(self, trace: Trace, report: ReplayReport, overrides: Mapping[str, tuple[str, Any]]) -> None:
        self._trace = trace
        self._report = report
        self._overrides = overrides
        self.applied: set[str] = set()
        """Span ids of the recorded calls an override answered."""
        self.ran_live: set[str] = set()
        """Span ids of the recorded calls that ran live."""
        self._finished = False

    def live_call(self, key: CallKey, name: str, kinds: tuple[str, ...], explicit: Callable[[str, str], bool]) -> None:
        """A call runs live: an LLM one is a model call, a divergence unless ``live=`` selects it (``explicit``)."""
        if "llm" not in kinds:
            return
        self._report.live_llm.append(key)
        if not any(explicit(name, kind) for kind in kinds):
            self._report.divergences.append(
                Finding(
                    FindingKind.LIVE_LLM,
                    key,
                    f"LLM boundary {name!r} ran live (a model call); stub it, or select it with live= to allow it",
                )
            )

    def input_mismatch(self, rec: Boundary, actual_text: str | None, policy: InputMismatch) -> None:
        """A stubbed call's input differs from the recording: a divergence (raised) under ``"error"``, drift under
        ``"warn"``."""
        assert rec.raw_input is not None
        details = tuple(diff_lines(rec.raw_input.text, actual_text))
        if policy is InputMismatch.ERROR:
            finding = Finding(FindingKind.INPUT_MISMATCH, rec.call_key, "stubbed call with a different input", details)
            self._report.divergences.append(finding)
            raise ReplayDivergence(str(finding), finding=finding)
        if policy is InputMismatch.WARN:
            self._report.drift.append(
                Finding(FindingKind.INPUT_DRIFT, rec.call_key, "input changed; answered from the recording", details)
            )

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
                report.changes.append(
                    Finding(
                        FindingKind.NOT_CALLED,
                        b.call_key,
                        f"the live code no longer makes the recorded {b.kind} call {b.name!r}",
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
