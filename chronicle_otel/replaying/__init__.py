"""Replay a recorded run offline: stubbed boundaries answer from the recording, changed code runs live.

Usage::

    from chronicle_otel import load_trace, replay

    trace = load_trace(".chronicle", trace_id="latest-failed")
    with replay(trace, stub={"kind:llm"}, live={"place_order"}) as run:
        result = run.rerun()
    assert result.status == "blocked"
    assert run.report.ok, run.report

API:
    :func:`replay`, :class:`ReplayRun`, :class:`ReplayOptions`, :class:`ReplayReport`, :class:`Finding`,
    :class:`FindingKind`, :class:`DriftCause` — the replay.
    :class:`Trace`, :class:`Boundary`, :class:`SpanRecord`, :class:`Payload` — the immutable model of a run.
    :class:`ReplayedError` — a recorded exception whose class may not be rebuilt.
    :func:`build_trace` — assemble a :class:`Trace` from span records (for custom trace sources).
    :func:`check_selectors`, :func:`resolve_overrides`, :class:`Selection` — what ``stub=``, ``live=`` and
    ``override=`` select in a trace, as a replay decides it (the ``chronicle`` command checks and shows them).
    :func:`diff_lines` — the differences between two payloads, as the report lists them; :func:`short_repr` — a
    value on one line, as the report shows it.
    :func:`find_refusal` — the :class:`~chronicle_otel.NetworkBlockedError` under an exception that wraps it (an
    HTTP client's connection error, say).
"""

from __future__ import annotations

from ..load import build_trace
from ..model import Boundary, Payload, ReplayedError, SpanRecord, Trace, format_key
from ._matching import check_selectors, resolve_overrides
from ._netguard import find_refusal
from ._options import InputMismatch, OnMissing, ReplayOptions
from ._report import DriftCause, Finding, FindingKind, ReplayReport, diff_lines, short_repr
from ._run import ReplayRun, replay
from ._selection import Selection

__all__ = [
    "Boundary",
    "DriftCause",
    "Finding",
    "FindingKind",
    "InputMismatch",
    "OnMissing",
    "Payload",
    "ReplayOptions",
    "ReplayReport",
    "ReplayRun",
    "ReplayedError",
    "Selection",
    "SpanRecord",
    "Trace",
    "build_trace",
    "check_selectors",
    "diff_lines",
    "find_refusal",
    "format_key",
    "replay",
    "resolve_overrides",
    "short_repr",
]
