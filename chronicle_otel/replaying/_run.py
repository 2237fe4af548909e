"""A replay run, the public object: :func:`replay` and :class:`ReplayRun`.

The run checks its options against the trace, and while it is active (a ``with`` block, the decorator, or
``rerun()``) is the :class:`~chronicle_otel._internal.hooks.ReplayHook` the recording path hands every boundary call
to, inside the sandbox of its options (an isolated configuration, the network guard). Its parts:
:mod:`._calls` (each call matched, then stubbed or run live), :mod:`._rerun` (the root called again),
:mod:`._ledger` (what ran, and the findings when the run ends), :mod:`._report` (the report).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import inspect
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from .._api import publish
from .._internal import hooks
from .._internal.hooks import BoundarySpec
from .._internal.streams import StreamDriver
from ..config import get_config, isolated
from ..errors import ConfigError, ReplayDivergence, ReplayError
from ..model import Trace
from . import _netguard as netguard
from ._answers import UNRECORDED, unresolved
from ._calls import Calls
from ._drift import DriftPolicy
from ._ledger import Ledger
from ._matching import resolve_overrides
from ._options import LOOPBACK, InputMismatch, OnMissing, ReplayOptions, allow_list
from ._report import Finding, FindingKind, ReplayReport
from ._rerun import arguments, await_, check_arguments, close, collect, loop_running, root_function, unbound_target
from ._selection import Selection

F = TypeVar("F", bound=Callable[..., Any])


class ReplayRun:
    """An active replay of a recorded :class:`~chronicle_otel.model.Trace` (see :func:`replay`).

    Args:
        trace: the recorded run.
        options: how each call is treated (:class:`ReplayOptions`).
        **settings: the fields of :class:`ReplayOptions` instead of ``options`` (``stub=``, ``live=``…).
    """

    def __init__(self, trace: Trace, options: ReplayOptions | None = None, **settings: Any) -> None:
        if not isinstance(trace, Trace):
            raise ConfigError("trace", trace, "a Trace from load_trace()")
        if options is not None and settings:
            raise ConfigError("options", options, "either a ReplayOptions or keyword settings, not both")
        if options is None:
            unknown = sorted(set(settings) - {f.name for f in dataclasses.fields(ReplayOptions)})
            if unknown:
                raise ConfigError(unknown[0], settings[unknown[0]], "a field of ReplayOptions")
            settings = {
                k: (tuple(v) if k in ("stub", "live", "allow", "allow_hosts") and _iterable(v) else v)
                for k, v in settings.items()
            }
            options = ReplayOptions(**settings)
        self.trace = trace
        self.options = options
        selection = Selection(trace, options)  # selectors that can select nothing raise first
        overrides = resolve_overrides(options.override, trace)
        self.report = ReplayReport(strict=options.strict is True)
        self._ledger = Ledger(trace, self.report, overrides, DriftPolicy(trace, options), options.max_live_llm)
        self._calls = Calls(trace, options, selection, self.report, self._ledger, overrides)
        self._guard: contextlib.AbstractContextManager[Any] | None = None
        self._tokens: list[contextvars.Token[Any]] = []
        self._isolation: contextlib.AbstractContextManager[Path] | None = None
        self._replay_store: Path | None = None

    # ------------------------------------------------------------------ activation

    @property
    def allow(self) -> tuple[str, ...]:
        """Module prefixes whose classes recorded values are rebuilt as (registered types always are). The one
        allow-list of loading and replay: ``allow=`` of the replay, else of ``load_trace``, else the top-level
        packages that define boundaries in this process."""
        return allow_list(self.options, self.trace)

    @property
    def replay_trace_ids(self) -> tuple[str, ...]:
        """The trace ids of the replay's own spans so far: one per call made outside every boundary (``rerun()``
        makes one), where a store that records them (``isolate=False``, :attr:`replay_store`) has them; empty when
        the replay records no spans (``emit_spans=False``, or recording off)."""
        return tuple(self._calls.trace_ids)

    @property
    def replay_store(self) -> Path | None:
        """While the run is active and isolated: the temporary store the replay's own spans go to (the spans ended so
        far are written to it when this is read)."""
        if self._replay_store is not None:
            get_config().force_flush()
        return self._replay_store

    def __enter__(self) -> ReplayRun:
        if not self._tokens:
            if self.options.isolate:
                self._isolation = isolated()
                self._replay_store = self._isolation.__enter__()
            if self.options.block_network:
                self._guard = netguard.guard(self.options.allow_hosts, self._calls.where, self._calls.refused)
                self._guard.__enter__()
            self._calls.thread = threading.get_ident()
            hooks.activate(self)
        self._tokens.append(hooks.REPLAY.set(self))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        token = self._tokens.pop()
        try:
            hooks.REPLAY.reset(token)
        except ValueError:  # left in another context than entered (an async fixture's teardown task): by value
            hooks.REPLAY.set(None if token.old_value is contextvars.Token.MISSING else token.old_value)
        if self._tokens:
            return
        hooks.deactivate(self)
        if self._guard is not None:
            guard, self._guard = self._guard, None
            guard.__exit__(None, None, None)
        if self._isolation is not None:
            isolation, self._isolation = self._isolation, None
            self._replay_store = None
            isolation.__exit__(None, None, None)
        self.finish()

    def finish(self) -> ReplayReport:
        """Complete the report: recordings never used and overrides never applied become divergences.

        Called when the run ends (leaving the ``with`` block); the pytest plugin calls it as the test body ends, so
        a divergence fails the test itself. Only the first call adds findings.
        """
        return self._ledger.finish(self._calls.recordings)

    def __call__(self, func: F) -> F:
        """Use the replay as a decorator: each call of ``func`` replays afresh, and raises
        :class:`ReplayDivergence` when its report is not ok (``report`` then holds the latest report)."""
        trace, options = self.trace, self.options
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                run = ReplayRun(trace, options)
                self.report = run.report
                with run:
                    result = await func(*args, **kwargs)
                _check(run.report)
                return result

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            run = ReplayRun(trace, options)
            self.report = run.report
            with run:
                result = func(*args, **kwargs)
            _check(run.report)
            return result

        return wrapper  # type: ignore[return-value]

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
        return self._calls.call(spec, wrapped, instance, args, kwargs)

    def enter_block(self, spec: BoundarySpec, input_value: Any) -> object:
        """A ``call(...)`` block starts: match it like a live call and make it the current parent."""
        return self._calls.enter_block(spec, input_value)

    def exit_block(self, state: object, output: Any, exc: BaseException | None) -> None:
        """A ``call(...)`` block ends: compare its output with the recording."""
        self._calls.exit_block(state, output, exc)

    def declare(self, name: str) -> None:
        """``changed(name)`` ran: the differences of the call in progress (the whole run, outside every call) are
        intended."""
        self._calls.declare(name)

    # ------------------------------------------------------------------ rerun

    def root_function(self) -> Any:
        """The live function of the trace's root boundary, found by its recorded name in this process."""
        return root_function(self.trace)

    def _root_call(self, instance: Any, overrides: dict[str, Any]) -> Any:
        fn = self.root_function()  # a ReplayError when the trace has no boundary or this process lacks it
        root = self.trace.root
        assert root is not None
        values = root.decode_input(self.allow)
        names = unresolved(values, set()) if root.raw_input is not None and '"$type":' in root.raw_input.text else ()
        if names:
            listed = ", ".join(sorted(n.removeprefix(UNRECORDED) for n in names)[:5])
            finding = Finding(
                FindingKind.UNRESOLVED,
                root.call_key,
                f"the recorded input of the root holds {listed}, which may not be rebuilt here: rerun() would call it "
                "with a placeholder; pass the argument yourself (rerun(name=value)) or allow its module (allow=)",
            )
            unresolved_names = (
                {k for k, v in values.items() if unresolved(v, set())} if isinstance(values, dict) else {0}
            )
            if not unresolved_names <= set(overrides):
                self.report.divergences.append(finding)
                raise ReplayDivergence(str(finding), finding=finding)
        target = fn.__get__(instance, type(instance)) if instance is not None else unbound_target(fn, root.name)
        if isinstance(values, dict):
            values.update(overrides)
            args, kwargs = arguments(target, values)
        elif isinstance(values, list) or values is None:  # another producer's positional arguments, or none
            args, kwargs = list(values or ()), dict(overrides)
        else:
            raise ReplayError(
                f"the recorded input of root boundary {root.name!r} is a JSON {type(values).__name__}, "
                "not the call's arguments; call the function yourself inside `with replay(...)`"
            )
        check_arguments(target, args, kwargs, root.name, self.trace.trace_id)
        if self._tokens:
            return target(*args, **kwargs)
        with self:
            result = target(*args, **kwargs)
            if inspect.isawaitable(result):  # run it to the end inside the replay, not after it
                if loop_running():
                    result.close()  # type: ignore[attr-defined]
                    raise ReplayError(
                        "the root boundary is async and an event loop is running: use `await run.arerun()`"
                    )
                return asyncio.run(await_(result))
            if inspect.isgenerator(result) or inspect.isasyncgen(result) or isinstance(result, StreamDriver):
                close(result)
                raise ReplayError(
                    "the root boundary is a generator: iterate `run.rerun()` inside `with replay(...) as run:`"
                )
            return result

    def rerun(self, instance: Any = None, **overrides: Any) -> Any:
        """Call the root boundary again with its recorded input and return what it returns now.

        Args:
            instance: for a root that is a method, the object to call it on (``self`` is never recorded).
            **overrides: arguments to pass instead of the recorded ones.

        Raises:
            ReplayError: the trace has no boundary, its root function is not defined in this process, its recorded
                input does not fit the function's signature, or it is async inside a running loop.
        """
        result = self._root_call(instance, overrides)
        if inspect.isawaitable(result):
            if not loop_running():
                return asyncio.run(await_(result))
            result.close()  # type: ignore[attr-defined]
            raise ReplayError("the root boundary is async and an event loop is running: use `await run.arerun()`")
        return result

    def rerun_items(self, instance: Any = None, **overrides: Any) -> list[Any]:
        """:meth:`rerun` for a root boundary that is a generator (sync or async): the list of the items it yields now,
        read to the end inside the replay. Any other root: its return value in a one-item list."""
        with self:
            result = self._root_call(instance, overrides)
            if inspect.isawaitable(result) and not inspect.isasyncgen(result):
                if loop_running():
                    result.close()  # type: ignore[attr-defined]
                    raise ReplayError("an event loop is running: iterate `run.rerun()` with `async for` instead")
                return [asyncio.run(await_(result))]
            if hasattr(result, "__aiter__"):
                if loop_running():
                    raise ReplayError("an event loop is running: iterate `run.rerun()` with `async for` instead")
                return asyncio.run(collect(result))
            if inspect.isgenerator(result) or isinstance(result, StreamDriver) or hasattr(result, "__next__"):
                return list(result)
            return [result]

    async def arerun(self, instance: Any = None, **overrides: Any) -> Any:
        """:meth:`rerun` for an async root boundary."""
        if self._tokens:
            result = self._root_call(instance, overrides)
            return await result if inspect.isawaitable(result) else result
        with self:  # awaited inside the replay
            result = self._root_call(instance, overrides)
            return await result if inspect.isawaitable(result) else result


def _iterable(value: Any) -> bool:
    """A collection to turn into a tuple of selectors (a string is checked, and refused, as it is)."""
    return value is not None and not isinstance(value, (str, bytes)) and isinstance(value, Iterable)


def _check(report: ReplayReport) -> None:
    if not report.ok:
        raise ReplayDivergence(f"the replay diverged from the recording:\n{report}")


def replay(
    trace: Trace,
    *,
    stub: Iterable[str] = ("kind:llm",),
    live: Iterable[str] = (),
    default: str = "live",
    on_input_mismatch: InputMismatch | str = "warn",
    on_missing: OnMissing | str = "error",
    strict: bool | Mapping[str, str] = False,
    ignore: Iterable[str] | Mapping[str, Iterable[str]] = (),
    changed: Iterable[str] | Mapping[str, str | Iterable[str]] = (),
    allow: Iterable[str] | None = None,
    emit_spans: bool = True,
    isolate: bool = True,
    block_network: bool = True,
    allow_hosts: Iterable[str] = LOOPBACK,
    override: Mapping[str, Any] | None = None,
    live_from: str | None = None,
    max_live_llm: int | None = None,
) -> ReplayRun:
    """Replay a recorded run: stubbed boundaries answer from the recording, the others run live.

    Usage::

        trace = load_trace("incident.jsonl")
        with replay(trace, stub={"kind:llm"}, live={"place_order"}) as run:
            result = run.rerun()       # the root boundary, called again with its recorded input
        assert run.report.ok, run.report

        # what if the model had said 100,000 shares?
        with replay(trace, override={"plan[0]": lambda order: dataclasses.replace(order, quantity=100_000)}) as run:
            assert run.rerun().status == "blocked"

    Each boundary call is matched to its recording by its call key (the chain of ``(name, call index)`` from
    the root); concurrent siblings that arrive in another order are matched by their input hash.

    Args:
        trace: the recorded run (:func:`~chronicle_otel.load_trace`).
        stub: selectors of boundaries answered from the recording: a name, a glob (``"crm.*"``) or
            ``"kind:<kind>"``. Default: every LLM boundary. A selector that can select nothing (an unknown kind,
            a name or glob no recorded boundary has: a typo) raises :class:`ConfigError`.
        live: selectors of boundaries that run the current code; they win over ``stub``. Their outputs are
            compared with the recording (``report.changes``). An LLM boundary that runs live without being
            selected here is a ``live-llm`` divergence: a replay calls a model only when asked to.
        default: what boundaries matched by neither do: ``"live"`` (default) or ``"stub"``.
        on_input_mismatch: a stubbed call whose input differs: ``"warn"`` (default; listed as drift, the
            stub still answers), ``"error"`` (raises :class:`ReplayDivergence`) or ``"ignore"``.
        on_missing: a call with no recording: ``"error"`` (raises :class:`ReplayDivergence`) or ``"live"``.
        strict: drift also makes ``report.ok`` false: ``True`` for all drift, or per selector,
            ``{"kind:llm": "input"}``: a changed input of those boundaries fails the replay (``"all"``: any drift of
            them, a call with no recording run live included). Intended changes never fail it.
        ignore: paths of inputs whose differences are not drift, for volatile request fields:
            ``["$.stream_options", "$.metadata.request_id", "$..id"]`` for every boundary, or per selector
            ``{"openai.*": ["$.stream_options"]}``. A path is written as the report writes it; ``*``/``[*]`` match
            any field or item, ``..name`` a field at any depth. Counted in ``report.ignored``.
        changed: declared intended changes, the test's side of :func:`~chronicle_otel.changed`: selectors of
            boundaries whose changed output (and the drift it alone causes after it) is intended,
            ``["check_order"]`` or ``{"guardrail-v2": ["check_order"]}``. Listed in ``report.intended``.
        allow: module prefixes whose classes recorded values may be rebuilt as (registered types always are).
            Default: the ``allow=`` the trace was loaded with, else the top-level packages that define boundaries
            in this process (the same default as :attr:`Boundary.output <chronicle_otel.model.Boundary.output>`).
        emit_spans: record the replay's own spans (``chronicle.replay.of`` and a link to each original span).
        isolate: while the run is active, nothing is exported and nothing reaches the real store: the replay's
            spans go to a temporary store (``run.replay_store``), and a ``configure()`` called meanwhile (a module
            imported by the test) is sandboxed (see :func:`chronicle_otel.config.isolated`). False records the
            replay into the process's real pipeline.
        block_network: while the run is active, a DNS lookup or a connection to a host not in ``allow_hosts``
            raises :class:`~chronicle_otel.errors.NetworkBlockedError` naming the boundary on whose stack it was
            made, and is a ``network`` divergence (even when the code that tried swallows the error). In this process
            only: child processes (``subprocess``, ``os.system``, ``multiprocessing`` by spawn or forkserver) are
            not covered.
        allow_hosts: host names, addresses and networks the guard lets through. Default: this machine
            (``localhost``, ``127.0.0.0/8``, ``::1``); empty: nothing.
        override: what-if answers, ``{call key: value}``: that recorded call is answered with ``value``
            instead of its recording (an exception is raised). A callable gets the recorded output (the recorded
            exception for a call that raised) and returns the answer. Keys as :func:`format_key` writes them
            (``"run_agent[0] > plan[0]"``), their tail when unique (``"plan[0]"``) or a bare name (every call).
            Listed in ``report.overrides``.
        live_from: a recorded call from which the run goes live: a call key (``"plan[0]"``) or a name or glob (its
            first call). Every call recorded before it, except those that enclose it, answers from its recording
            whatever ``stub=`` and ``live=`` say (the frozen prefix); it, the calls under it and the calls enclosing it
            run live (an LLM one as if ``live=`` selected it); the calls after it follow ``stub=``, ``live=`` and
            ``default=``. What :func:`~chronicle_otel.sample` runs many times.
        max_live_llm: at most this many LLM boundaries run live; the next one raises :class:`ReplayDivergence` (a
            ``live-llm-limit`` divergence) instead of calling the model. Default: no limit.

    Returns:
        A :class:`ReplayRun`: a context manager (and decorator) with ``rerun()`` and ``report``.

    Raises:
        ConfigError: a bad option value (the message lists the valid ones).
    """
    options = ReplayOptions(
        stub=stub,  # type: ignore[arg-type]  # checked and made a tuple by ReplayOptions
        live=live,  # type: ignore[arg-type]
        default=default,
        on_input_mismatch=on_input_mismatch,  # type: ignore[arg-type]
        on_missing=on_missing,  # type: ignore[arg-type]
        strict=strict,
        ignore=ignore,  # type: ignore[arg-type]  # checked and kept as ((selector, paths), ...) by ReplayOptions
        changed=changed,  # type: ignore[arg-type]
        allow=allow,  # type: ignore[arg-type]
        emit_spans=emit_spans,
        isolate=isolate,
        block_network=block_network,
        allow_hosts=allow_hosts,  # type: ignore[arg-type]
        override=override if override is not None else {},
        live_from=live_from,
        max_live_llm=max_live_llm,
    )
    return ReplayRun(trace, options)


publish(__name__, globals())
