"""The replay session: each boundary call is matched to its recording, then stubbed or run live, and reported.

The parts: :mod:`._matching` (selectors, call keys, recordings used), :mod:`._stubs` (bodies that answer from the
recording), :mod:`._compare` (live outputs against the recording), :mod:`._report` (the findings). This module
orchestrates them behind the :class:`~chronicle_otel._internal.hooks.ReplayHook` seam the recording path calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from opentelemetry.trace import Link, SpanContext, TraceFlags

from .. import semconv
from .._internal import hooks
from .._internal.digest import payload_digest
from .._internal.hooks import BoundarySpec, ReplayExtra
from .._internal.streams import AsyncStreamDriver, StreamDriver
from ..codec import encode
from ..config import get_config, isolated
from ..errors import ConfigError, ReplayDivergence, ReplayError
from ..model import Boundary, Trace
from ..redact import Redactor
from ._compare import Comparer
from ._matching import Frame, Recordings, matches
from ._options import InputMismatch, OnMissing, ReplayOptions
from ._report import Finding, ReplayReport, diff_lines
from ._stubs import stub_body

F = TypeVar("F", bound=Callable[..., Any])


def _redactor(spec: BoundarySpec) -> Redactor | None:
    """The redactor of the boundary's own configuration, as when it recorded: compare redacted with redacted."""
    config = spec.config if spec.config is not None else get_config()
    redact: Redactor | None = config.redact
    return redact


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
                k: (tuple(v) if k in ("stub", "live", "allow") and v is not None else v) for k, v in settings.items()
            }
            options = ReplayOptions(**settings)
        self.trace = trace
        self.options = options
        self.report = ReplayReport(strict=self.options.strict)
        self._frame: contextvars.ContextVar[Frame | None] = contextvars.ContextVar(
            "chronicle_replay_frame", default=None
        )
        self._root = Frame(())
        self._recordings = Recordings(trace)
        self._comparer = Comparer()
        self._tokens: list[contextvars.Token[Any]] = []
        self._isolation: contextlib.AbstractContextManager[Path] | None = None
        self.replay_store: Path | None = None
        """While the run is active and isolated: the temporary store the replay's own spans go to."""

    # ------------------------------------------------------------------ activation

    @property
    def allow(self) -> tuple[str, ...]:
        """Module prefixes whose classes recorded values are rebuilt as: ``allow=`` or, by default, the top-level
        packages of the boundaries defined in this process, plus the trace's own allow-list."""
        trace_allow = self.trace.root.allow if self.trace.root is not None else ()
        if self.options.allow is not None:
            return self.options.allow + trace_allow
        packages = set()
        for w in hooks.all_boundaries():
            module = getattr(w, "__module__", None)
            if isinstance(module, str) and module != "builtins":
                packages.add(module.split(".")[0] + ".")
        return tuple(sorted(packages)) + trace_allow

    def __enter__(self) -> ReplayRun:
        if not self._tokens and self.options.isolate:
            self._isolation = isolated()
            self.replay_store = self._isolation.__enter__()
        self._tokens.append(hooks.REPLAY.set(self))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        hooks.REPLAY.reset(self._tokens.pop())
        if not self._tokens and self._isolation is not None:
            isolation, self._isolation = self._isolation, None
            self.replay_store = None
            isolation.__exit__(None, None, None)
        if not self._tokens:
            for b in self._recordings.unused():
                self.report.divergences.append(
                    Finding("unused-recording", b.call_key, f"recorded {b.kind} call {b.name!r} was never made")
                )

    def __call__(self, func: F) -> F:
        """Use the replay as a decorator: each call of ``func`` replays afresh."""
        trace, options = self.trace, self.options
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with ReplayRun(trace, options):
                    return await func(*args, **kwargs)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with ReplayRun(trace, options):
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    # ------------------------------------------------------------------ rerun

    def root_function(self) -> Any:
        """The live function of the trace's root boundary, found by its recorded name in this process."""
        root = self.trace.root
        if root is None:
            raise ReplayError(f"trace {self.trace.trace_id} has no boundary to rerun")
        found = hooks.boundaries(root.name)
        if root.function:
            exact = [f for f in found if f"{f.__module__}.{f.__qualname__}" == root.function]
            found = exact or found
        if not found:
            hint = f" (recorded from {root.function})" if root.function else ""
            raise ReplayError(
                f"no boundary named {root.name!r} is defined in this process{hint}; import the module that "
                "defines it before replaying (chronicle never imports modules named in a trace)"
            )
        qualnames = {f"{f.__module__}.{f.__qualname__}" for f in found}
        if len(qualnames) > 1:
            raise ReplayError(
                f"{len(qualnames)} different functions are named {root.name!r} ({', '.join(sorted(qualnames))}); "
                "give them distinct boundary names"
            )
        return found[-1]  # the latest definition (a module reloaded, a function redefined)

    def _root_call(self, instance: Any, overrides: dict[str, Any]) -> Any:
        assert self.trace.root is not None
        fn = self.root_function()
        values = self.trace.root.decode_input(self.allow)
        values.update(overrides)
        target = fn.__get__(instance, type(instance)) if instance is not None else fn
        args, kwargs = _arguments(fn, values, bound=instance is not None)
        if not self._tokens:
            with self:
                return target(*args, **kwargs)
        return target(*args, **kwargs)

    def rerun(self, instance: Any = None, **overrides: Any) -> Any:
        """Call the root boundary again with its recorded input and return what it returns now.

        Args:
            instance: for a root that is a method, the object to call it on (``self`` is never recorded).
            **overrides: arguments to pass instead of the recorded ones.

        Raises:
            ReplayError: the root function is not defined in this process, or is async inside a running loop.
        """
        result = self._root_call(instance, overrides)
        if inspect.isawaitable(result):
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                return asyncio.run(_await(result))
            result.close()  # type: ignore[attr-defined]
            raise ReplayError("the root boundary is async and an event loop is running: use `await run.arerun()`")
        return result

    async def arerun(self, instance: Any = None, **overrides: Any) -> Any:
        """:meth:`rerun` for an async root boundary."""
        result = self._root_call(instance, overrides)
        return await result if inspect.isawaitable(result) else result

    # ------------------------------------------------------------------ the hook

    def _mode(self, name: str, kind: str) -> str:
        if any(matches(s, name, kind) for s in self.options.live):
            return "live"
        if any(matches(s, name, kind) for s in self.options.stub):
            return "stub"
        return self.options.default

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
        key = parent.next_key(spec.name)
        redactor = _redactor(spec)
        secrets: list[str] = []
        actual_text: str | None = None
        if spec.binder is not None:
            bound = spec.binder.bind(args, kwargs, wrapped is not spec.raw and instance is not None)
            actual_text = encode(bound, redact=redactor, secrets=secrets).decode()
        digest = payload_digest(actual_text.encode()) if actual_text is not None else None
        rec = self._recordings.match(parent, spec.name, key, digest)
        if rec is None:
            details = (
                f"input: {actual_text[:300] if actual_text else '{}'}",
                "nearest recordings:",
                *(f"  {line}" for line in self._recordings.nearest(parent, spec.name)),
            )
            if self.options.on_missing is OnMissing.LIVE:
                self.report.drift.append(Finding("unrecorded-live", key, "no recording; ran live", details))
                return self._execute(spec, wrapped, instance, args, kwargs, Frame(key), "live", None)
            finding = Finding("unexpected-call", key, f"no recording for this call of {spec.name!r}", details)
            self.report.divergences.append(finding)
            raise ReplayDivergence(str(finding))
        self._recordings.use(rec)
        out_of_order = self._recordings.check_order(parent, rec)
        if out_of_order is not None:
            self.report.divergences.append(out_of_order)
        frame = Frame(rec.call_key)
        if self._mode(rec.name, rec.kind) == "stub":
            if rec.raw_input is not None and digest is not None and rec.raw_input.digest != digest:
                self._input_mismatch(rec, actual_text)
            self._recordings.cover(rec)
            self.report.stubbed.append(rec.call_key)
            body = stub_body(spec.shape, rec, self.allow, getattr(spec, "stream_adapter", None))
            return self._execute(spec, body, instance, args, kwargs, frame, "stub", rec)
        self.report.live.append(rec.call_key)
        self._comparer.expect(rec, redactor, secrets)
        return self._execute(spec, wrapped, instance, args, kwargs, frame, "live", rec)

    def _input_mismatch(self, rec: Boundary, actual_text: str | None) -> None:
        assert rec.raw_input is not None
        details = tuple(diff_lines(rec.raw_input.text, actual_text))
        if self.options.on_input_mismatch is InputMismatch.ERROR:
            finding = Finding("input-mismatch", rec.call_key, "stubbed call with a different input", details)
            self.report.divergences.append(finding)
            raise ReplayDivergence(str(finding))
        if self.options.on_input_mismatch is InputMismatch.WARN:
            self.report.drift.append(
                Finding("input-drift", rec.call_key, "input changed; answered from the recording", details)
            )

    def _extra(self, mode: str, rec: Boundary | None) -> ReplayExtra | None:
        if not self.options.emit_spans:
            return None
        attrs = {semconv.REPLAY_OF: self.trace.trace_id, semconv.REPLAY_MODE: mode}
        links = []
        if rec is not None:
            ctx = SpanContext(int(self.trace.trace_id, 16), int(rec.span_id, 16), True, TraceFlags(TraceFlags.SAMPLED))
            links.append(Link(ctx, {semconv.REPLAY_OF: self.trace.trace_id}))
        return ReplayExtra(attrs, links)

    def _execute(
        self,
        spec: BoundarySpec,
        body: Callable[..., Any],
        instance: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        frame: Frame,
        mode: str,
        rec: Boundary | None,
    ) -> Any:
        extra = self._extra(mode, rec)
        compare = rec if mode == "live" else None
        if compare is not None and compare.stream and spec.shape in ("sync", "async"):
            compare = None  # a live stream object is read after the call returns: nothing to compare yet
        if self.options.emit_spans:

            def run() -> Any:
                return spec.run(body, instance, args, kwargs, extra)
        else:

            def run() -> Any:
                return body(*args, **kwargs)

        if spec.shape == "async":
            return self._async(run, frame, compare)
        if spec.shape in ("gen", "agen"):
            token = self._frame.set(frame)
            try:
                stream = run()
            finally:
                self._frame.reset(token)

            def done(items: list[Any], state: str, exc: BaseException | None) -> None:
                if state != "abandoned":  # a consumer that stops early changes nothing in the stream
                    self._compare(compare, items, exc)

            driver = AsyncStreamDriver if spec.shape == "agen" else StreamDriver
            return driver(stream, done, functools.partial(self._frame.set, frame), self._frame.reset)
        token = self._frame.set(frame)
        try:
            value = run()
        except BaseException as exc:
            self._compare(compare, None, exc)
            raise
        finally:
            self._frame.reset(token)
        self._compare(compare, value, None)
        return value

    async def _async(self, run: Callable[[], Any], frame: Frame, rec: Boundary | None) -> Any:
        token = self._frame.set(frame)
        try:
            value = await run()
        except BaseException as exc:
            self._compare(rec, None, exc)
            raise
        finally:
            self._frame.reset(token)
        self._compare(rec, value, None)
        return value

    def _compare(self, rec: Boundary | None, value: Any, exc: BaseException | None) -> None:
        if rec is not None:
            finding = self._comparer.compare(rec, value, exc)
            if finding is not None:
                self.report.changes.append(finding)

    # ------------------------------------------------------------------ call(...) blocks

    def enter_block(self, spec: BoundarySpec, input_value: Any) -> object:
        """A ``call(...)`` block starts: match it like a live call and make it the current parent."""
        parent = self._frame.get() or self._root
        key = parent.next_key(spec.name)
        redactor = _redactor(spec)
        secrets: list[str] = []
        digest = payload_digest(encode(input_value, redact=redactor, secrets=secrets))
        rec = self._recordings.match(parent, spec.name, key, digest)
        if rec is None:
            self.report.drift.append(Finding("unrecorded-live", key, "call(...) block with no recording"))
            return _Block(self._frame.set(Frame(key)), None)
        self._recordings.use(rec)
        self.report.live.append(rec.call_key)
        self._comparer.expect(rec, redactor, secrets)
        return _Block(self._frame.set(Frame(rec.call_key)), rec)

    def exit_block(self, state: object, output: Any, exc: BaseException | None) -> None:
        """A ``call(...)`` block ends: compare its output with the recording."""
        assert isinstance(state, _Block)
        self._frame.reset(state.token)
        self._compare(state.rec, output, exc)


class _Block:
    __slots__ = ("rec", "token")

    def __init__(self, token: contextvars.Token[Frame | None], rec: Boundary | None) -> None:
        self.token = token
        self.rec = rec


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _arguments(fn: Any, values: dict[str, Any], *, bound: bool) -> tuple[list[Any], dict[str, Any]]:
    """Turn recorded ``{param: value}`` into call arguments, honouring positional-only and ``*args``/``**kw``."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return [], dict(values)
    if bound and params:
        params = params[1:]
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    rest = dict(values)
    for p in params:
        if p.name not in rest:
            continue
        value = rest.pop(p.name)
        if p.kind is p.POSITIONAL_ONLY:
            args.append(value)
        elif p.kind is p.VAR_POSITIONAL:
            args.extend(value)
        elif p.kind is p.VAR_KEYWORD:
            kwargs.update(value)
        else:
            kwargs[p.name] = value
    kwargs.update(rest)
    return args, kwargs


def replay(
    trace: Trace,
    *,
    stub: Iterable[str] = ("kind:llm",),
    live: Iterable[str] = (),
    default: str = "live",
    on_input_mismatch: InputMismatch | str = "warn",
    on_missing: OnMissing | str = "error",
    strict: bool = False,
    allow: Iterable[str] | None = None,
    emit_spans: bool = True,
    isolate: bool = True,
) -> ReplayRun:
    """Replay a recorded run: stubbed boundaries answer from the recording, the others run live.

    Usage::

        trace = load_trace("incident.jsonl")
        with replay(trace, stub={"kind:llm"}, live={"place_order"}) as run:
            result = run.rerun()       # the root boundary, called again with its recorded input
        assert run.report.ok, run.report

    Each boundary call is matched to its recording by its call key (the chain of ``(name, call index)`` from
    the root); concurrent siblings that arrive in another order are matched by their input hash.

    Args:
        trace: the recorded run (:func:`~chronicle_otel.load_trace`).
        stub: selectors of boundaries answered from the recording: a name, a glob (``"crm.*"``) or
            ``"kind:<kind>"``. Default: every LLM boundary.
        live: selectors of boundaries that run the current code; they win over ``stub``. Their outputs are
            compared with the recording (``report.changes``).
        default: what boundaries matched by neither do: ``"live"`` (default) or ``"stub"``.
        on_input_mismatch: a stubbed call whose input differs: ``"warn"`` (default; listed as drift, the
            stub still answers), ``"error"`` (raises :class:`ReplayDivergence`) or ``"ignore"``.
        on_missing: a call with no recording: ``"error"`` (raises :class:`ReplayDivergence`) or ``"live"``.
        strict: drift also makes ``report.ok`` false.
        allow: module prefixes whose classes recorded values may be rebuilt as. Default: the top-level
            packages that define boundaries in this process.
        emit_spans: record the replay's own spans (``chronicle.replay.of`` and a link to each original span).
        isolate: while the run is active, nothing is exported and nothing reaches the real store: the replay's
            spans go to a temporary store (``run.replay_store``), and a ``configure()`` called meanwhile (a module
            imported by the test) is sandboxed (see :func:`chronicle_otel.config.isolated`). False records the
            replay into the process's real pipeline.

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
        allow=allow,  # type: ignore[arg-type]
        emit_spans=emit_spans,
        isolate=isolate,
    )
    return ReplayRun(trace, options)
