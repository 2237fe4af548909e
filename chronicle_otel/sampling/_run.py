"""``sample()``: N replays of a recorded run, each with one chosen call live and everything before it frozen."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .. import semconv
from .._api import publish
from ..codec import encode
from ..config import get_config, isolated
from ..errors import ChronicleError, ConfigError, ReplayError
from ..load import load_trace
from ..model import Boundary, Trace, format_key
from ..replaying import FindingKind, OnMissing, ReplayOptions, ReplayRun, Selection, short_repr
from ..store import StoreReader
from ._report import Sample, SampleReport, outcomes_of

Check = Callable[[Any, "BaseException | None"], object]
"""A check of one sample: ``check(result, error)``, true when the sample passes (an ``AssertionError`` fails it)."""

_AFTER = ("stub", "live")
_SUMMARY_WIDTH = 400


def sample(
    trace: Trace,
    *,
    live: str,
    n: int = 20,
    check: Check | None = None,
    after: str = "stub",
    concurrency: int = 4,
    max_calls: int | None = None,
    stub: Iterable[str] = (),
    store: str | os.PathLike[str] | StoreReader | None = None,
    allow: Iterable[str] | None = None,
    block_network: bool = True,
    allow_hosts: Iterable[str] | None = None,
    instance: Any = None,
    arguments: Mapping[str, Any] | None = None,
) -> SampleReport:
    """Sample the behaviour of one recorded call: replay the run ``n`` times with that call live.

    Replay settles what is deterministic; sampling answers how often the model still does the wrong thing. In each
    sample every boundary call the recording shows before the chosen one (in recorded start order, tools included)
    answers from its recording, the frozen prefix; the chosen call runs its real code (its provider, or whatever
    server the code points at), and so does the code after it. The LLM calls after it are answered from their
    recordings (``after="stub"``) or run live (``after="live"``); a call with no recording runs live (the flow may
    differ from the recording's). The root boundary is called again with its recorded input, as
    :meth:`ReplayRun.rerun <chronicle_otel.ReplayRun.rerun>` does.

    Usage::

        trace = chronicle.load_trace(".chronicle", "3f2a9c…")
        report = chronicle.sample(trace, live="plan", n=20, check=lambda result, error: result.receipt.value <= 1000)
        print(report)                    # the distinct outcomes with their counts, the pass rate, the cost
        assert report.pass_rate >= 0.95

    The first sample runs alone, then the others ``concurrency`` at a time, each in a thread of its own (code that
    starts threads without copying the context answers to the replay entered last: use ``concurrency=1``). Every
    sample may make at most ``max_calls // n`` model calls (LLM boundaries run live); one more raises
    :class:`~chronicle_otel.ReplayDivergence` in it instead of calling the model, and the sample is counted as cut.
    The network guard of replay stays on: only this machine is reachable unless ``allow_hosts`` names the provider
    (``["localhost", "127.0.0.0/8", "::1", "api.openai.com"]``) or ``block_network=False``.

    Args:
        trace: the recorded run (:func:`~chronicle_otel.load_trace`).
        live: the call to sample: a call key (``"plan[0]"``, ``"run_agent[0] > plan[1]"``) or a boundary name or glob
            (its first recorded call). Usually an LLM call; any recorded call may be chosen (the calls under it run
            live with it).
        n: the number of samples.
        check: ``check(result, error)`` for each sample: what the root returned (None when it raised) and the
            exception it raised (or None). True passes; false or an ``AssertionError`` fails (its text is kept); any
            other exception fails too and is reported as the check's.
        after: what the LLM calls after the chosen one do: ``"stub"`` (answered from their recordings, matched as a
            replay matches them) or ``"live"``.
        concurrency: how many samples run at once.
        max_calls: the most model calls all samples together may make. Default: twice what ``n`` samples would make
            if each made the LLM calls the recording shows from the chosen call on. At least ``n``.
        stub: selectors of more boundaries to answer from the recording after the chosen call (a tool with side
            effects: ``{"place_order"}``); the chosen call and the calls under it always run live.
        store: record the samples into this local store, as replays of the trace (``chronicle list --replays``
            lists them, ``chronicle show`` shows them). Default: they are recorded into a temporary store, deleted
            when the sampling ends.
        allow: module prefixes whose classes recorded values are rebuilt as (as :func:`~chronicle_otel.replay`).
        block_network: the replay's network guard (see :func:`~chronicle_otel.replay`).
        allow_hosts: what the guard lets through (host names, addresses, networks); default this machine only.
        instance: for a root boundary that is a method, the object to call it on.
        arguments: arguments to pass to the root instead of the recorded ones.

    Returns:
        A :class:`SampleReport`: the outcomes, the pass rate, the model calls and tokens, each sample's replay.

    Raises:
        ConfigError: a bad argument, or ``live`` names no recorded call (the recorded keys are listed).
        ReplayError: the root boundary is not defined in this process, or the first sample never made the chosen
            call live (nothing more is sampled).
    """
    _check_arguments(n, check, after, concurrency, max_calls)
    chosen = _chosen(trace, live)
    per_sample, limit = _limits(trace, chosen, after, n, max_calls)
    if isinstance(stub, str):
        raise ConfigError("stub", stub, "a set of selectors, not a string")
    extra = tuple(stub)
    options = ReplayOptions(
        stub=(*(("kind:llm",) if after == "stub" else ()), *extra),
        live=("kind:llm",) if after == "live" else (),
        on_missing=OnMissing.LIVE,
        allow=tuple(allow) if allow is not None else None,
        block_network=block_network,
        allow_hosts=tuple(allow_hosts) if allow_hosts is not None else ReplayOptions.allow_hosts,
        live_from=format_key(chosen.call_key),
        max_live_llm=per_sample,
    )
    wanted = _store_path(store)
    started = time.perf_counter()
    with isolated(wanted) as where:  # every sample's replay records into this store (nested, it shares it)
        if wanted is not None and where.resolve() != wanted.resolve():
            raise ConfigError(
                "store", str(wanted), f"None: this runs inside a replay, whose spans go to {where}; sample outside it"
            )
        ReplayRun(trace, options).root_function()  # a ReplayError naming the module to import, before any model call
        sampler = _Sampler(trace, options, chosen, check, instance, dict(arguments or {}))
        first = sampler.one(1)
        if not first.reached:
            raise ReplayError(
                f"sample 1 of trace {trace.trace_id} never made {format_key(chosen.call_key)} live, so nothing is "
                f"sampled; its replay:\n{first.report}"
            )
        samples = [first]
        if n > 1:
            with ThreadPoolExecutor(max_workers=min(concurrency, n - 1), thread_name_prefix="chronicle-sample") as pool:
                samples.extend(pool.map(sampler.one, range(2, n + 1)))
        samples = _with_usage(samples, where)
    return SampleReport(
        trace_id=trace.trace_id,
        live=format_key(chosen.call_key),
        after=after,
        samples=tuple(samples),
        outcomes=tuple(outcomes_of(samples)),
        checked=check is not None,
        max_calls=limit,
        seconds=time.perf_counter() - started,
        store=wanted,
    )


def _check_arguments(n: Any, check: Any, after: Any, concurrency: Any, max_calls: Any) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ConfigError("n", n, "a number of samples, 1 or more")
    if check is not None and not callable(check):
        raise ConfigError("check", check, "a function check(result, error) -> bool")
    if after not in _AFTER:
        raise ConfigError("after", after, "'stub' (LLM calls after the live one answer from the recording) or 'live'")
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise ConfigError("concurrency", concurrency, "a number of samples run at once, 1 or more")
    if max_calls is not None and (not isinstance(max_calls, int) or isinstance(max_calls, bool) or max_calls < n):
        raise ConfigError("max_calls", max_calls, f"None or a number of model calls, at least n ({n})")


def _chosen(trace: Trace, live: Any) -> Boundary:
    """The recorded call ``live`` names (as ``live_from=`` of a replay reads it)."""
    if not isinstance(live, str) or not live.strip():
        raise ConfigError("live", live, "a recorded call key such as 'plan[0]', or a boundary name")
    try:
        chosen = Selection(trace, ReplayOptions(stub=(), live_from=live.strip())).live_from
    except ConfigError as err:
        raise ConfigError("live", live, err.expected) from None
    assert chosen is not None
    return chosen


def _limits(trace: Trace, chosen: Boundary, after: str, n: int, max_calls: int | None) -> tuple[int, int]:
    """Each sample's share of the model calls, and the limit of all of them."""
    if max_calls is None:
        prefix = len(chosen.call_key)
        after_it = False
        recorded = 0
        for b in trace.boundaries:  # in call order: the chosen call, then what is under it and what comes after
            after_it = after_it or b.span_id == chosen.span_id
            under = b.call_key[:prefix] == chosen.call_key
            if b.kind == "llm" and after_it and (under or after == "live"):
                recorded += 1
        max_calls = 2 * n * max(1, recorded)
    return max_calls // n, max_calls


def _store_path(store: Any) -> Path | None:
    if store is None:
        return None
    if isinstance(store, StoreReader):
        return Path(store.path)
    if isinstance(store, (str, os.PathLike)) and str(store):
        return Path(store)
    raise ConfigError("store", store, "a store directory or a LocalStore, or None (samples not kept)")


class _Sampler:
    """Takes one sample at a time (from any thread)."""

    def __init__(
        self,
        trace: Trace,
        options: ReplayOptions,
        chosen: Boundary,
        check: Check | None,
        instance: Any,
        arguments: dict[str, Any],
    ) -> None:
        self.trace = trace
        self.options = options
        self.chosen = chosen
        self.check = check
        self.instance = instance
        self.arguments = arguments
        self.items = trace.root is not None and trace.root.stream

    def one(self, index: int) -> Sample:
        """Replay the trace once with the chosen call live, and check the outcome."""
        run = ReplayRun(self.trace, self.options)
        result: Any = None
        error: BaseException | None = None
        started = time.perf_counter()
        try:
            with run:
                rerun = run.rerun_items if self.items else run.rerun
                result = rerun(self.instance, **self.arguments)
        except Exception as exc:  # the sample's outcome, not the sampling's failure
            error = exc
        seconds = time.perf_counter() - started
        report = run.report
        reached = self.chosen.call_key in report.live
        cut = any(f.kind is FindingKind.LIVE_LLM_LIMIT for f in report.divergences)
        passed, message = (None, None) if self.check is None or not reached or cut else self._verdict(result, error)
        return Sample(
            index=index,
            outcome=_canonical(result if error is None else error),
            raised=error is not None,
            summary=_summary(result, error),
            result=result,
            error=error,
            passed=passed,
            check_message=message,
            reached=reached,
            cut=cut,
            live_calls=len(report.live_llm),
            input_tokens=None,
            output_tokens=None,
            trace_id=run.replay_trace_ids[0] if run.replay_trace_ids else None,
            seconds=seconds,
            report=report,
        )

    def _verdict(self, result: Any, error: BaseException | None) -> tuple[bool, str | None]:
        assert self.check is not None
        try:
            verdict = self.check(result, error)
        except AssertionError as exc:
            return False, str(exc) or "assertion failed"
        except Exception as exc:
            return False, f"the check raised {type(exc).__name__}: {exc}"
        return (True, None) if verdict else (False, f"the check returned {verdict!r}")


def _canonical(value: Any) -> str:
    """The canonical JSON of an outcome (redacted as this process records): equal outcomes, equal text."""
    return encode(value, redact=get_config().redact).decode("utf-8", "surrogatepass")


def _summary(result: Any, error: BaseException | None) -> str:
    """An outcome on one line: the value as Python shows it, or the exception raised."""
    if error is None:
        return short_repr(result, _SUMMARY_WIDTH)
    try:
        message = str(error)
    except Exception:  # an exception whose text cannot be had: its type says enough
        message = "?"
    text = " ".join(f"raised {type(error).__name__}: {message}".split())
    return text if len(text) <= _SUMMARY_WIDTH else text[: _SUMMARY_WIDTH - 1] + "…"


def _with_usage(samples: list[Sample], where: Path) -> list[Sample]:
    """The samples with the tokens their live model calls reported, read from their spans in the store ``where``."""
    if not any(s.trace_id for s in samples):
        return samples
    get_config().force_flush()
    out = []
    for s in samples:
        tokens: tuple[int | None, int | None] = (None, None)
        if s.trace_id is not None:
            with contextlib.suppress(ChronicleError):  # spans the pipeline dropped: usage unknown, said as n/a
                tokens = _usage(load_trace(where, s.trace_id, store=[]))
        out.append(dataclasses.replace(s, input_tokens=tokens[0], output_tokens=tokens[1]))
    return out


def _usage(replayed: Trace) -> tuple[int | None, int | None]:
    """The tokens the live LLM calls of a replay reported (``gen_ai.usage.*``); a call inside another LLM call that
    reported usage (a framework's model call and the SDK call under it) is not counted twice."""
    live = [
        b
        for b in replayed.boundaries
        if b.kind == "llm" and b.span.attributes.get(semconv.REPLAY_MODE) == "live" and _reports_usage(b)
    ]
    counted = set(map(id, live))
    totals: list[int | None] = [None, None]
    for b in live:
        parent = b.parent
        while parent is not None and id(parent) not in counted:
            parent = parent.parent
        if parent is not None:
            continue
        for i, key in enumerate((semconv.GEN_AI_USAGE_INPUT_TOKENS, semconv.GEN_AI_USAGE_OUTPUT_TOKENS)):
            value = b.span.attributes.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                totals[i] = (totals[i] or 0) + value
    return totals[0], totals[1]


def _reports_usage(b: Boundary) -> bool:
    attrs = b.span.attributes
    return semconv.GEN_AI_USAGE_INPUT_TOKENS in attrs or semconv.GEN_AI_USAGE_OUTPUT_TOKENS in attrs


publish(__name__, globals())
