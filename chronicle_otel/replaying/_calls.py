"""Each boundary call during a replay: matched to its recording, then answered from it or run live.

The recording path hands every call made while the replay is active to :meth:`Calls.call` (``call(...)`` blocks to
:meth:`Calls.enter_block`): the call's key is made under the call in progress, its input encoded as the boundary
would record it, and the recording found (:mod:`._matching`). A call with no recording is a divergence or runs live
(``on_missing``); an overridden or stubbed one is answered from the recording (:mod:`._stubs`, checked by
:mod:`._answers`); any other runs the current code and is compared with its recording. :mod:`._execution` runs
what was decided.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Mapping
from typing import Any

from .._internal.hooks import BoundarySpec, ReplayExtra
from ..codec import encode_unscanned
from ..config import get_config
from ..errors import NetworkBlockedError, ReplayDivergence
from ..model import Boundary, Trace, format_key
from ..redact import Redactor
from ._answers import Answers
from ._compare import Comparer
from ._execution import Execution
from ._ledger import Ledger
from ._matching import CallInput, Frame, Recordings
from ._options import OnMissing, ReplayOptions, allow_list
from ._report import Finding, FindingKind, ReplayReport
from ._selection import Selection
from ._stubs import recorded_answer, stub_body, was_cancelled


def _redactor(spec: BoundarySpec) -> Redactor | None:
    """The redactor of the boundary's own configuration, as when it recorded: compare redacted with redacted."""
    config = spec.config if spec.config is not None else get_config()
    redact: Redactor | None = config.redact
    return redact


class Calls:
    """The boundary calls of one replay (the work of its :class:`~chronicle_otel._internal.hooks.ReplayHook`).

    Args:
        trace: the recorded run.
        options: the replay's options.
        selection: their stub or live decision.
        report: the replay's report.
        ledger: what the replay has done so far.
        overrides: the resolved ``override=`` (``{span id: (key as given, answer)}``).
    """

    def __init__(
        self,
        trace: Trace,
        options: ReplayOptions,
        selection: Selection,
        report: ReplayReport,
        ledger: Ledger,
        overrides: Mapping[str, tuple[str, Any]],
    ) -> None:
        self._trace = trace
        self._options = options
        self._report = report
        self._ledger = ledger
        self._overrides = overrides
        self.selection = selection
        self.recordings = Recordings(trace)
        """The recorded calls, and which of them the replay has used."""
        self._comparer = Comparer()
        self._answers = Answers(report, options)
        self._frame: contextvars.ContextVar[Frame | None] = contextvars.ContextVar(
            "chronicle_replay_frame", default=None
        )
        self._root = Frame(())
        self._last: Frame | None = None
        self._session_checked = False
        self.thread: int | None = None
        """The thread that entered the replay (set when it is entered)."""
        self._execution = Execution(
            trace.trace_id, options.emit_spans, self._frame, self._comparer, report, ledger.output_changed
        )

    @property
    def trace_ids(self) -> list[str]:
        """The trace ids of the spans of the top-level calls made so far, in call order."""
        return self._execution.trace_ids

    # ------------------------------------------------------------------ where the code is

    def _current(self) -> tuple[Frame | None, bool]:
        """The boundary call on this context's stack; in a thread without the replay's context (asyncio resolves
        names in an executor thread), the boundary call entered last, flagged as a guess."""
        frame = self._frame.get()
        if frame is not None and frame.key:
            return frame, False
        if threading.get_ident() == self.thread:  # the replay's own thread, outside every boundary call
            return None, False
        return self._last, self._last is not None

    def where(self) -> str:
        """The boundary on whose stack a network attempt is made (for the guard's message)."""
        frame, guessed = self._current()
        if frame is None:
            return "outside any boundary of the replay"
        where = f"during boundary {format_key(frame.key)}" + (f" ({frame.kind})" if frame.kind else "")
        return where + (" (the boundary entered last: the attempt came from another thread)" if guessed else "")

    def declare(self, name: str) -> None:
        """``changed(name)`` ran under the call in progress (outside every call: the whole run)."""
        frame, _ = self._current()
        self._ledger.policy.declare(frame.key if frame is not None else (), name)

    def refused(self, error: NetworkBlockedError) -> None:
        """The guard refused an attempt: a divergence, even when the code that made it swallows the error."""
        frame, _ = self._current()
        self._ledger.refused(frame.key if frame is not None else (), error)

    # ------------------------------------------------------------------ the hook

    def call(
        self,
        spec: BoundarySpec,
        wrapped: Callable[..., Any],
        instance: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """Handle one boundary call (the recording path hands every call here while the replay is active)."""
        parent = self._frame.get() or self._root
        if not self._session_checked and parent is self._root:
            self._session_checked = True
            self._ledger.session(spec)
        key = parent.next_key(spec.name)
        redactor = _redactor(spec)
        secrets: list[str] = []
        actual: CallInput | None = None
        if spec.binder is not None:
            bound = spec.binder.bind(args, kwargs, wrapped is not spec.raw and instance is not None)
            actual = CallInput(*encode_unscanned(bound, redact=redactor, secrets=secrets))
        rec = self.recordings.match(parent, spec.name, key, actual)
        if rec is None:
            actual_text = actual.text if actual is not None else None
            details = (
                f"input: {actual_text[:300] if actual_text else '{}'}",
                "nearest recordings:",
                *(f"  {line}" for line in self.recordings.nearest(parent, spec.name)),
            )
            if self._options.on_missing is OnMissing.LIVE:
                self._ledger.live_call(key, spec.name, (spec.kind_value,), self.selection.live_check(None, key))
                self._ledger.unrecorded(key, spec.name, spec.kind_value, "no recording; ran live", details)
                frame = self._last = Frame(key, spec.kind_value)
                return self._execution.run(spec, wrapped, instance, args, kwargs, frame, "live", None)
            finding = Finding(FindingKind.UNEXPECTED_CALL, key, f"no recording for this call of {spec.name!r}", details)
            self._report.divergences.append(finding)
            raise ReplayDivergence(str(finding), finding=finding)
        self.recordings.use(rec)
        out_of_order = self.recordings.check_order(parent, rec)
        if out_of_order is not None:
            self._report.divergences.append(out_of_order)
        frame = self._last = Frame(rec.call_key, rec.kind)
        override = self._overrides.get(rec.span_id)
        if override is not None or self.selection.stubbed(rec, spec.kind_value):
            return self._stub(spec, instance, args, kwargs, frame, rec, override, actual, secrets, redactor)
        self._ledger.live_call(rec.call_key, rec.name, (rec.kind, spec.kind_value), self.selection.live_check(rec, key))
        self._report.live.append(rec.call_key)
        self._ledger.ran_live.add(rec.span_id)
        self._comparer.expect(rec, redactor, secrets)
        return self._execution.run(spec, wrapped, instance, args, kwargs, frame, "live", rec)

    def _stub(
        self,
        spec: BoundarySpec,
        instance: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        frame: Frame,
        rec: Boundary,
        override: tuple[str, Any] | None,
        actual: CallInput | None,
        secrets: list[str],
        redactor: Redactor | None,
    ) -> Any:
        """Answer the call from its recording ``rec`` (or from its override)."""
        if rec.raw_input is not None and actual is not None and not actual.same_as(rec.raw_input):
            self._ledger.input_mismatch(rec, actual.text, self._options.on_input_mismatch)
        self.recordings.cover(rec)
        self._report.stubbed.append(rec.call_key)
        allow = allow_list(self._options, self._trace)  # as it is now: a module imported meanwhile may add to it
        if override is not None:
            self._ledger.overridden(rec, override[0])
            answer = self._answers.overridden(rec, *override, allow)
        else:
            answer = self._answers.checked(rec, recorded_answer(rec, allow))
            if spec.shape == "sync" and not rec.stream and not self._options.emit_spans:
                # the common stub, answered here: no span, and a stub calls no boundary that needs its frame
                output, error = answer()
                if error is not None:
                    raise error
                return output
        adapter = getattr(spec, "stream_adapter", None)
        if override is None and spec.shape in ("async", "agen") and was_cancelled(rec):
            wait = self._answers.awaiting_cancellation(rec)  # the recorded items first, for a stream
            body = wait if spec.shape == "async" else stub_body("agen", rec, allow, None, cancelled=wait)
        else:
            body = stub_body(spec.shape, rec, allow, adapter, answer, override is not None)
        encoded = None
        if self._options.emit_spans:  # what the replay span records, as the replay already has it
            plain = override is None and adapter is None and spec.shape in ("sync", "async")
            encoded = (
                actual.data if actual is not None else None,
                tuple(secrets),
                self._execution.recorded_output(rec, redactor) if plain else None,
            )
        return self._execution.run(spec, body, instance, args, kwargs, frame, "stub", rec, encoded)

    # ------------------------------------------------------------------ call(...) blocks

    def enter_block(self, spec: BoundarySpec, input_value: Any) -> object:
        """A ``call(...)`` block starts: match it like a live call and make it the current parent."""
        parent = self._frame.get() or self._root
        key = parent.next_key(spec.name)
        redactor = _redactor(spec)
        secrets: list[str] = []
        actual = CallInput(*encode_unscanned(input_value, redact=redactor, secrets=secrets))
        rec = self.recordings.match(parent, spec.name, key, actual)
        emit_spans = self._options.emit_spans
        if rec is None:
            if self._options.on_missing is not OnMissing.LIVE:
                details = (
                    "nearest recordings:",
                    *(f"  {line}" for line in self.recordings.nearest(parent, spec.name)),
                )
                finding = Finding(
                    FindingKind.UNEXPECTED_CALL, key, f"no recording for this call(...) block {spec.name!r}", details
                )
                self._report.divergences.append(finding)
                raise ReplayDivergence(str(finding), finding=finding)
            self._ledger.live_call(key, spec.name, (spec.kind_value,), self.selection.live_check(None, key))
            self._ledger.unrecorded(key, spec.name, spec.kind_value, "call(...) block with no recording")
            frame = self._last = Frame(key, spec.kind_value)
            extra = self._execution.extra("live", None, top=len(key) == 1)
            return _Block(self._frame.set(frame), None, extra, emit_spans)
        self.recordings.use(rec)
        self._ledger.live_call(rec.call_key, rec.name, (rec.kind, spec.kind_value), self.selection.live_check(rec, key))
        self._report.live.append(rec.call_key)
        self._ledger.ran_live.add(rec.span_id)
        self._comparer.expect(rec, redactor, secrets)
        frame = self._last = Frame(rec.call_key, rec.kind)
        extra = self._execution.extra("live", rec, top=len(key) == 1)
        return _Block(self._frame.set(frame), rec, extra, emit_spans)

    def exit_block(self, state: object, output: Any, exc: BaseException | None) -> None:
        """A ``call(...)`` block ends: compare its output with the recording."""
        assert isinstance(state, _Block)
        self._frame.reset(state.token)
        self._execution.compare(state.rec, output, exc)


class _Block:
    __slots__ = ("extra", "rec", "record", "token")

    def __init__(
        self, token: contextvars.Token[Frame | None], rec: Boundary | None, extra: ReplayExtra | None, record: bool
    ) -> None:
        self.token = token
        self.rec = rec
        self.extra = extra
        """The replay's attributes and link for the block's span."""
        self.record = record
        """Whether the block records a span (``emit_spans``)."""
