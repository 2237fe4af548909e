"""Replay a recorded run offline: stubbed boundaries answer from the recording, changed code runs live.

Usage::

    from chronicle_otel import load_trace, replay

    trace = load_trace(".chronicle", trace_id="latest-failed")
    with replay(trace, stub={"kind:llm"}, live={"place_order"}) as run:
        result = run.rerun()
    assert result.status == "blocked"
    assert run.report.ok, run.report

API:
    :func:`replay`, :class:`ReplayRun`, :class:`ReplayReport`, :class:`Finding` — the replay.
    :class:`Trace`, :class:`Boundary`, :class:`SpanRecord`, :class:`Payload` — the immutable model of a run.
    :class:`ReplayedError` — a recorded exception whose class may not be rebuilt.
    :func:`build_trace` — assemble a :class:`Trace` from span records (for custom trace sources).
"""

from __future__ import annotations

from ..load import build_trace
from ..model import Boundary, Payload, ReplayedError, SpanRecord, Trace, format_key
from ._engine import ReplayRun, replay
from ._options import InputMismatch, OnMissing, ReplayOptions
from ._report import Finding, ReplayReport

__all__ = [
    "Boundary",
    "Finding",
    "InputMismatch",
    "OnMissing",
    "Payload",
    "ReplayOptions",
    "ReplayReport",
    "ReplayRun",
    "ReplayedError",
    "SpanRecord",
    "Trace",
    "build_trace",
    "format_key",
    "replay",
]
