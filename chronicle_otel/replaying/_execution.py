"""Running a call once the replay has decided how: the stub's body or the live function, in the call's frame.

The body runs as the boundary runs its function (one span, with the replay's attributes and a link to the recorded
span) unless the replay records no spans; a generator or async generator is handed back behind the shared stream
driver, which keeps the call's frame around each step. A live call's output (or error, or the items of its stream,
read to the end) is compared with its recording when it is known.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from typing import Any

from opentelemetry.trace import Link, Span, SpanContext, TraceFlags, format_trace_id

from .. import semconv
from .._internal.hooks import BoundarySpec, ReplayExtra
from .._internal.streams import AsyncStreamDriver, StreamDriver
from ..codec import value_scan
from ..errors import ReplayDivergence
from ..model import Boundary
from ._answers import NotCancelled
from ._compare import Comparer
from ._matching import _VERIFIED, Frame
from ._report import Finding, FindingKind, ReplayReport

Encoded = tuple[bytes | None, tuple[str, ...], bytes | None]
"""What the replay already encoded of a stubbed call, for its span: the input, its redacted values, the output."""


class Execution:
    """Runs the calls of one replay.

    Args:
        trace_id: the recorded trace's id (the replay's spans name it).
        emit_spans: whether the calls record the replay's own spans.
        frame: the context variable holding the boundary call in progress.
        comparer: compares live calls with their recordings.
        report: the report stream divergences go to.
        changed: told of each live call whose output differs from its recording (the finding saying how).
    """

    def __init__(
        self,
        trace_id: str,
        emit_spans: bool,
        frame: contextvars.ContextVar[Frame | None],
        comparer: Comparer,
        report: ReplayReport,
        changed: Callable[[Boundary, Finding], None],
    ) -> None:
        self._trace_id = trace_id
        self._emit_spans = emit_spans
        self._frame = frame
        self._comparer = comparer
        self._report = report
        self._changed = changed
        self.trace_ids: list[str] = []
        """The trace ids of the spans of the top-level calls run so far (the replay's own traces)."""

    def extra(
        self, mode: str, rec: Boundary | None, encoded: Encoded | None = None, top: bool = False
    ) -> ReplayExtra | None:
        """What the call's span carries for the replay (None when the replay records no spans); ``top``: the call is
        made outside every boundary, its span starts one of the replay's own traces."""
        if not self._emit_spans:
            return None
        started = self.note_trace if top else None
        attrs = {semconv.REPLAY_OF: self._trace_id, semconv.REPLAY_MODE: mode}
        links = []
        if rec is not None:
            ctx = SpanContext(int(self._trace_id, 16), int(rec.span_id, 16), True, TraceFlags(TraceFlags.SAMPLED))
            links.append(Link(ctx))  # the span carries chronicle.replay.of: the link needs no attributes of its own
        if encoded is None:
            return ReplayExtra(attrs, links, started=started)
        return ReplayExtra(attrs, links, encoded[0], encoded[1], encoded[2], started)

    @staticmethod
    def recorded_output(rec: Boundary, redactor: Any) -> bytes | None:
        """The recorded return value's canonical bytes, for the span of a stub that answers with it (scanned for
        secret values by this configuration); None when it is not whole or the call raised."""
        raw = rec.raw_output
        if rec.failed or rec.stream or raw is None or raw.status not in _VERIFIED:
            return None
        data = raw.text.encode("utf-8", "surrogatepass")
        scan = value_scan(redactor)
        return scan(data) if scan is not None else data

    def run(
        self,
        spec: BoundarySpec,
        body: Callable[..., Any],
        instance: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        frame: Frame,
        mode: str,
        rec: Boundary | None,
        encoded: Encoded | None = None,
    ) -> Any:
        """Call ``body`` (a stub's, or the live function) in ``frame``: its value, its coroutine or its stream."""
        extra = self.extra(mode, rec, encoded, len(frame.key) == 1)
        compare = rec if mode == "live" else None
        if compare is not None and compare.stream and spec.shape in ("sync", "async"):
            compare = None  # a live stream object is read after the call returns: nothing to compare yet
        if self._emit_spans:

            def run() -> Any:
                return spec.run(body, instance, args, kwargs, extra)
        else:

            def run() -> Any:
                return body(*args, **kwargs)

        if spec.shape == "async":
            return self._async(run, frame, compare)
        if spec.shape in ("gen", "agen"):
            return self._stream(spec, run, frame, mode, rec, compare)
        token = self._frame.set(frame)
        try:
            value = run()
        except BaseException as exc:
            self.compare(compare, None, exc)
            raise
        finally:
            self._frame.reset(token)
        self.compare(compare, value, None)
        return value

    def note_trace(self, span: Span) -> None:
        """A top-level call's span started: note its trace id (one of the replay's own traces)."""
        context = span.get_span_context()
        if context.is_valid:
            self.trace_ids.append(format_trace_id(context.trace_id))

    async def _async(self, run: Callable[[], Any], frame: Frame, rec: Boundary | None) -> Any:
        token = self._frame.set(frame)
        try:
            value = await run()
        except BaseException as exc:
            self.compare(rec, None, exc)
            raise
        finally:
            self._frame.reset(token)
        self.compare(rec, value, None)
        return value

    def _stream(
        self,
        spec: BoundarySpec,
        run: Callable[[], Any],
        frame: Frame,
        mode: str,
        rec: Boundary | None,
        compare: Boundary | None,
    ) -> Any:
        """A generator's (or async generator's) stream, behind the driver: each step in ``frame``; when it ends, a
        stub read past its recording is a divergence and a live one is compared with its recording."""
        token = self._frame.set(frame)
        try:
            stream = run()
        finally:
            self._frame.reset(token)

        def done(items: list[Any], state: str, exc: BaseException | None) -> None:
            if (
                isinstance(exc, ReplayDivergence)
                and not isinstance(exc, NotCancelled)
                and rec is not None
                and mode == "stub"
            ):
                # read past what the recording holds: known even when the consumer swallows the error
                self._report.divergences.append(Finding(FindingKind.PAST_RECORDING, rec.call_key, str(exc)))
            if state != "abandoned":  # a consumer that stops early changes nothing in the stream
                self.compare(compare, items, exc)

        driver = AsyncStreamDriver if spec.shape == "agen" else StreamDriver
        snapshot = self._comparer.snapshot(compare) if compare is not None else None
        return driver(stream, done, functools.partial(self._frame.set, frame), self._frame.reset, snapshot)

    def compare(self, rec: Boundary | None, value: Any, exc: BaseException | None) -> None:
        """A live call of ``rec`` ended: a change when its output (or error) differs from the recording."""
        if rec is not None:
            finding = self._comparer.compare(rec, value, exc)
            if finding is not None:
                self._changed(rec, finding)
