"""Sample behaviour from a frozen prefix: one recorded call live, N times, everything before it as recorded.

Replay settles the deterministic half of a fix; sampling answers the other: "does the model still over-sell one time
in twenty after the prompt fix?". Each sample is a replay of the recorded run in which every call recorded before the
chosen one answers from its recording, the chosen call runs live (its real provider, or a local server the code
points at) and so does the code after it.

Usage::

    import chronicle_otel as chronicle

    trace = chronicle.load_trace(".chronicle", "latest-failed")
    report = chronicle.sample(trace, live="plan", n=20, check=lambda result, error: result.status == "blocked")
    print(report)            # the distinct outcomes with their counts, the pass rate, model calls, tokens, time
    assert report.pass_rate == 1.0

The same from the command line: ``chronicle sample TRACE_ID --live plan -n 20 --check mymod:check --import mymod``;
in pytest: ``@pytest.mark.chronicle_sample("traces/x.jsonl", live="plan", n=20, min_pass_rate=0.95)``.

API:
    :func:`sample` — take the samples; :class:`SampleReport` — what they showed; :class:`Sample` — one of them;
    :class:`Outcome` — one distinct outcome and the samples that ended so.
"""

from __future__ import annotations

from ._report import Outcome, Sample, SampleReport
from ._run import sample

__all__ = ["Outcome", "Sample", "SampleReport", "sample"]
