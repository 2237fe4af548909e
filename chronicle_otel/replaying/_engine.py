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
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Final, TypeVar

from opentelemetry.trace import Link, SpanContext, TraceFlags

from .. import semconv
from .._internal import hooks
from .._internal.gc_pause import full_collections_spaced
from .._internal.hooks import BoundarySpec, ReplayExtra
from .._internal.names import qualified_name
from .._internal.streams import AsyncStreamDriver, StreamDriver
from .._internal.unreplayable import classes_in
from ..codec import UnresolvedObject, encode_unscanned, value_scan
from ..config import get_config, isolated
from ..errors import CodecError, ConfigError, NetworkBlockedError, ReplayDivergence, ReplayError
from ..model import Boundary, ReplayedError, Trace, format_key
from ..record._session import current_session
from ..redact import Redactor
from . import _netguard as netguard
from ._compare import Comparer, describe
from ._matching import _VERIFIED, CallInput, Frame, Recordings, check_selectors, matches, resolve_overrides
from ._options import LOOPBACK, InputMismatch, OnMissing, ReplayOptions
from ._report import Finding, ReplayReport, diff_lines, short_repr
from ._stubs import CANCELLED, Answer, override_answer, recorded_answer, stub_body, was_cancelled

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
                k: (tuple(v) if k in ("stub", "live", "allow", "allow_hosts") and _iterable(v) else v)
                for k, v in settings.items()
            }
            options = ReplayOptions(**settings)
        check_selectors("stub", options.stub, trace)
        check_selectors("live", options.live, trace, defined=hooks.boundaries)
        names = {b.name for b in trace.boundaries}
        self._literal = {s for s in (*options.stub, *options.live) if s in names or hooks.boundaries(s)}
        """Selectors that are a boundary's exact name: never read as globs (``"search[v2]"``)."""
        self.trace = trace
        self.options = options
        self._overrides = resolve_overrides(options.override, trace)
        self._applied: set[str] = set()
        self._ran_live_ids: set[str] = set()
        self._modes: dict[tuple[str, str], str] = {}
        self._finished = False
        self._session_checked = False
        self._guard: contextlib.AbstractContextManager[Any] | None = None
        self._last: Frame | None = None
        self._thread: int | None = None
        self.report = ReplayReport(strict=self.options.strict)
        self._frame: contextvars.ContextVar[Frame | None] = contextvars.ContextVar(
            "chronicle_replay_frame", default=None
        )
        self._root = Frame(())
        self._recordings = Recordings(trace)
        self._comparer = Comparer()
        self._tokens: list[contextvars.Token[Any]] = []
        self._isolation: contextlib.AbstractContextManager[Path] | None = None
        self._replay_store: Path | None = None
        self._spaced: contextlib.AbstractContextManager[None] | None = None

    # ------------------------------------------------------------------ activation

    @property
    def allow(self) -> tuple[str, ...]:
        """Module prefixes whose classes recorded values are rebuilt as (registered types always are). The one
        allow-list of loading and replay: ``allow=`` of the replay, else of ``load_trace``, else the top-level
        packages that define boundaries in this process."""
        if self.options.allow is not None:
            return self.options.allow
        loaded = self.trace.root.allow if self.trace.root is not None else None
        return loaded if loaded is not None else hooks.boundary_packages()

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
                self._guard = netguard.guard(self.options.allow_hosts, self._where, self._refused)
                self._guard.__enter__()
            self._thread = threading.get_ident()
            hooks.activate(self)
            self._spaced = full_collections_spaced()  # fewer walks over the loaded trace
            self._spaced.__enter__()
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
        if self._spaced is not None:
            spaced, self._spaced = self._spaced, None
            spaced.__exit__(None, None, None)
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
        if self._finished:
            return self.report
        self._finished = True
        conflicting = set(self.trace.conflicts)
        for b in self.trace.boundaries if conflicting else ():
            if b.span_id in conflicting:
                self.report.divergences.append(
                    Finding(
                        "conflicting-recordings",
                        b.call_key,
                        f"the source holds span {b.span_id} more than once with different payloads (edited or "
                        "damaged): the replay used the most complete copy, which may not be what was recorded",
                    )
                )
        for b in self._recordings.unused():
            if b.parent is not None and b.parent.span_id in self._ran_live_ids:
                self.report.changes.append(
                    Finding(
                        "not-called", b.call_key, f"the live code no longer makes the recorded {b.kind} call {b.name!r}"
                    )
                )
                continue
            self.report.divergences.append(
                Finding("unused-recording", b.call_key, f"recorded {b.kind} call {b.name!r} was never made")
            )
        by_id = {b.span_id: b for b in self.trace.boundaries}
        for span_id, (text, _) in self._overrides.items():
            if span_id not in self._applied:
                b = by_id[span_id]
                self.report.divergences.append(
                    Finding("override-unused", b.call_key, f"override {text!r} never applied: the call was not made")
                )
        return self.report

    def _current(self) -> tuple[Frame | None, bool]:
        """The boundary call on this context's stack; in a thread without the replay's context (asyncio resolves
        names in an executor thread), the boundary call entered last, flagged as a guess."""
        frame = self._frame.get()
        if frame is not None and frame.key:
            return frame, False
        if threading.get_ident() == self._thread:  # the replay's own thread, outside every boundary call
            return None, False
        return self._last, self._last is not None

    def _where(self) -> str:
        """The boundary on whose stack a network attempt is made (for the guard's message)."""
        frame, guessed = self._current()
        if frame is None:
            return "outside any boundary of the replay"
        where = f"during boundary {format_key(frame.key)}" + (f" ({frame.kind})" if frame.kind else "")
        return where + (" (the boundary entered last: the attempt came from another thread)" if guessed else "")

    def _refused(self, error: NetworkBlockedError) -> None:
        """The guard refused an attempt: a divergence, even when the code that made it swallows the error."""
        frame, _ = self._current()
        key = frame.key if frame is not None else ()
        what = f"{error.operation} of {error.host}" + (f":{error.port}" if error.port is not None else "")
        self.report.divergences.append(Finding("network", key, f"network {what} refused during the replay"))

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

    # ------------------------------------------------------------------ rerun

    def root_function(self) -> Any:
        """The live function of the trace's root boundary, found by its recorded name in this process."""
        root = self.trace.root
        if root is None:
            raise ReplayError(f"trace {self.trace.trace_id} has no boundary to rerun")
        found = hooks.boundaries(root.name)
        if root.function:
            exact = [f for f in found if qualified_name(f) == root.function]
            found = exact or found
        if not found:
            hint = f" (recorded from {root.function})" if root.function else ""
            raise ReplayError(
                f"no boundary named {root.name!r} is defined in this process{hint}; import the module that "
                "defines it before replaying (chronicle never imports modules named in a trace)"
            )
        qualnames = {qualified_name(f) for f in found}
        if len(qualnames) > 1:
            raise ReplayError(
                f"{len(qualnames)} different functions are named {root.name!r} ({', '.join(sorted(qualnames))}); "
                "give them distinct boundary names"
            )
        return found[-1]  # the latest definition (a module reloaded, a function redefined)

    def _root_call(self, instance: Any, overrides: dict[str, Any]) -> Any:
        fn = self.root_function()  # a ReplayError when the trace has no boundary or this process lacks it
        root = self.trace.root
        assert root is not None
        values = root.decode_input(self.allow)
        names = _unresolved(values, set()) if root.raw_input is not None and '"$type":' in root.raw_input.text else ()
        if names:
            listed = ", ".join(sorted(n.removeprefix(UNRECORDED) for n in names)[:5])
            finding = Finding(
                "unresolved",
                root.call_key,
                f"the recorded input of the root holds {listed}, which may not be rebuilt here: rerun() would call it "
                "with a placeholder; pass the argument yourself (rerun(name=value)) or allow its module (allow=)",
            )
            unresolved = {k for k, v in values.items() if _unresolved(v, set())} if isinstance(values, dict) else {0}
            if not unresolved <= set(overrides):
                self.report.divergences.append(finding)
                raise ReplayDivergence(str(finding), finding=finding)
        target = fn.__get__(instance, type(instance)) if instance is not None else _unbound_target(fn, root.name)
        if isinstance(values, dict):
            values.update(overrides)
            args, kwargs = _arguments(target, values)
        elif isinstance(values, list) or values is None:  # another producer's positional arguments, or none
            args, kwargs = list(values or ()), dict(overrides)
        else:
            raise ReplayError(
                f"the recorded input of root boundary {root.name!r} is a JSON {type(values).__name__}, "
                "not the call's arguments; call the function yourself inside `with replay(...)`"
            )
        _check_arguments(target, args, kwargs, root.name, self.trace.trace_id)
        if self._tokens:
            return target(*args, **kwargs)
        with self:
            result = target(*args, **kwargs)
            if inspect.isawaitable(result):  # run it to the end inside the replay, not after it
                if _loop_running():
                    result.close()  # type: ignore[attr-defined]
                    raise ReplayError(
                        "the root boundary is async and an event loop is running: use `await run.arerun()`"
                    )
                return asyncio.run(_await(result))
            if inspect.isgenerator(result) or inspect.isasyncgen(result) or isinstance(result, StreamDriver):
                _close(result)
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
            if not _loop_running():
                return asyncio.run(_await(result))
            result.close()  # type: ignore[attr-defined]
            raise ReplayError("the root boundary is async and an event loop is running: use `await run.arerun()`")
        return result

    def rerun_items(self, instance: Any = None, **overrides: Any) -> list[Any]:
        """:meth:`rerun` for a root boundary that is a generator (sync or async): the list of the items it yields now,
        read to the end inside the replay. Any other root: its return value in a one-item list."""
        with self:
            result = self._root_call(instance, overrides)
            if inspect.isawaitable(result) and not inspect.isasyncgen(result):
                if _loop_running():
                    result.close()  # type: ignore[attr-defined]
                    raise ReplayError("an event loop is running: iterate `run.rerun()` with `async for` instead")
                return [asyncio.run(_await(result))]
            if hasattr(result, "__aiter__"):
                if _loop_running():
                    raise ReplayError("an event loop is running: iterate `run.rerun()` with `async for` instead")
                return asyncio.run(_collect(result))
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

    # ------------------------------------------------------------------ the hook

    def _selects(self, selector: str, name: str, kind: str) -> bool:
        if selector in self._literal:
            return selector == name
        return matches(selector, name, kind)

    def _explicit_live(self, name: str, kind: str) -> bool:
        return any(self._selects(s, name, kind) for s in self.options.live)

    def _stubbed(self, rec: Boundary, kind: str) -> bool:
        """The recorded call is answered from its recording: its recorded kind is stubbed, or the kind the code
        declares now (a trace that relabels an ``llm`` call as a ``tool`` does not make it run live)."""
        if self._mode(rec.name, rec.kind) == "stub":
            return True
        return kind != rec.kind and self._mode(rec.name, kind) == "stub"

    def _mode(self, name: str, kind: str) -> str:
        known = self._modes.get((name, kind))  # the options are fixed: once per boundary name and kind
        if known is not None:
            return known
        if self._explicit_live(name, kind):
            mode = "live"
        elif any(self._selects(s, name, kind) for s in self.options.stub):
            mode = "stub"
        else:
            mode = self.options.default
        self._modes[(name, kind)] = mode
        return mode

    def _ran_live(self, key: tuple[tuple[str, int], ...], name: str, kinds: tuple[str, ...]) -> None:
        """A call runs live: an LLM one is a model call, a divergence unless ``live=`` selects it."""
        if "llm" not in kinds:
            return
        self.report.live_llm.append(key)
        if not any(self._explicit_live(name, kind) for kind in kinds):
            self.report.divergences.append(
                Finding(
                    "live-llm",
                    key,
                    f"LLM boundary {name!r} ran live (a model call); stub it, or select it with live= to allow it",
                )
            )

    def _check_session(self, spec: BoundarySpec) -> None:
        """Once, at the first top-level call: list the session variables that differ from the recording's."""
        self._session_checked = True
        root = self.trace.root
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
            self.report.session.append(Finding("session", (), message))

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
            self._check_session(spec)
        key = parent.next_key(spec.name)
        redactor = _redactor(spec)
        secrets: list[str] = []
        actual: CallInput | None = None
        if spec.binder is not None:
            bound = spec.binder.bind(args, kwargs, wrapped is not spec.raw and instance is not None)
            actual = CallInput(*encode_unscanned(bound, redact=redactor, secrets=secrets))
        rec = self._recordings.match(parent, spec.name, key, actual)
        if rec is None:
            actual_text = actual.text if actual is not None else None
            details = (
                f"input: {actual_text[:300] if actual_text else '{}'}",
                "nearest recordings:",
                *(f"  {line}" for line in self._recordings.nearest(parent, spec.name)),
            )
            if self.options.on_missing is OnMissing.LIVE:
                self.report.drift.append(Finding("unrecorded-live", key, "no recording; ran live", details))
                self._ran_live(key, spec.name, (spec.kind_value,))
                frame = self._last = Frame(key, spec.kind_value)
                return self._execute(spec, wrapped, instance, args, kwargs, frame, "live", None)
            finding = Finding("unexpected-call", key, f"no recording for this call of {spec.name!r}", details)
            self.report.divergences.append(finding)
            raise ReplayDivergence(str(finding), finding=finding)
        self._recordings.use(rec)
        out_of_order = self._recordings.check_order(parent, rec)
        if out_of_order is not None:
            self.report.divergences.append(out_of_order)
        frame = self._last = Frame(rec.call_key, rec.kind)
        override = self._overrides.get(rec.span_id)
        if override is not None or self._stubbed(rec, spec.kind_value):
            if rec.raw_input is not None and actual is not None and not actual.same_as(rec.raw_input):
                self._input_mismatch(rec, actual.text)
            self._recordings.cover(rec)
            self.report.stubbed.append(rec.call_key)
            allow = self.allow
            if override is not None:
                self._applied.add(rec.span_id)
                answer = self._override(rec, *override)
            else:
                answer = self._resolved(rec, recorded_answer(rec, allow))
                if spec.shape == "sync" and not rec.stream and not self.options.emit_spans:
                    # the common stub, answered here: no span, and a stub calls no boundary that needs its frame
                    output, error = answer()
                    if error is not None:
                        raise error
                    return output
            adapter = getattr(spec, "stream_adapter", None)
            if override is None and spec.shape in ("async", "agen") and was_cancelled(rec):
                wait = self._awaiting_cancellation(rec)  # the recorded items first, for a stream
                body = wait if spec.shape == "async" else stub_body("agen", rec, allow, None, cancelled=wait)
            else:
                body = stub_body(spec.shape, rec, allow, adapter, answer, override is not None)
            encoded = None
            if self.options.emit_spans:  # what the replay span records, as the replay already has it
                plain = override is None and adapter is None and spec.shape in ("sync", "async")
                encoded = (
                    actual.data if actual is not None else None,
                    tuple(secrets),
                    self._recorded_output(rec, redactor) if plain else None,
                )
            return self._execute(spec, body, instance, args, kwargs, frame, "stub", rec, encoded)
        self.report.live.append(rec.call_key)
        self._ran_live_ids.add(rec.span_id)
        self._ran_live(rec.call_key, rec.name, (rec.kind, spec.kind_value))
        self._comparer.expect(rec, redactor, secrets)
        return self._execute(spec, wrapped, instance, args, kwargs, frame, "live", rec)

    def _resolved(self, rec: Boundary, answer: Answer) -> Answer:
        """``answer``, and a divergence when it holds a recorded object that could not be rebuilt (the stub would
        hand the code a placeholder where it expects the class: an ``isinstance`` takes the other branch), or when
        the recording cannot answer at all (a payload cut or changed, a class that refuses the recorded data): the
        error reaches the code, which may catch it, and the report says so."""
        text = rec.raw_error.text if rec.failed and rec.raw_error is not None else None
        if text is None and rec.raw_output is not None:
            text = rec.raw_output.text
        output, error = rec.raw_output, rec.raw_error
        whole = (output is None or output.complete) and (error is None or error.complete)
        if text is None:
            return answer
        # a payload without a type tag holds no placeholder (memchr first); it may still not decode
        plain = whole and not rec.failed and ("$" not in text or '"$type":' not in text)

        def checked() -> tuple[Any, BaseException | None]:
            try:
                output, error = answer()
            except (ReplayError, CodecError) as exc:
                self.report.divergences.append(Finding("undecodable", rec.call_key, f"the stub cannot answer: {exc}"))
                raise
            if plain:
                return output, error
            names = _unresolved(output, set()) if error is None or rec.stream else set()
            for payload in (rec.raw_output, rec.raw_error):  # placeholders inside rebuilt objects too
                if payload is not None and "unencodable" in payload.text:
                    names.update(UNRECORDED + c for c in classes_in(payload.text.encode()))
            if isinstance(error, ReplayedError):
                names.add(error.type_name)
            if names:
                self._unresolved_finding(rec, names)
            return output, error

        return checked

    def _unresolved_finding(self, rec: Boundary, names: set[str]) -> None:
        listed = ", ".join(sorted(n.removeprefix(UNRECORDED) for n in names)[:5])
        never = sorted(n for n in names if _never_rebuilt(n))
        unrecorded = sorted(n.removeprefix(UNRECORDED) for n in names if n.startswith(UNRECORDED))
        if unrecorded:
            advice = (
                f"{', '.join(unrecorded[:5])} was never recorded (only its text was kept: it could not be encoded, "
                "or it came past what one stream keeps); select the boundary live, or override it (override=)"
            )
        elif never:
            advice = (
                f"{', '.join(never[:5])} is never rebuilt (a BaseException that is not an Exception): the stub raises "
                "a ReplayedError in its place; select the boundary live, or override it (override=)"
            )
        else:
            tops = {n.rsplit(".", 1)[0].split(".")[0] for n in names}
            stdlib = sorted(t for t in tops if t in sys.stdlib_module_names or t == "builtins")
            modules = sorted(f"{t}." for t in tops - set(stdlib))
            hint = f"pass allow={modules!r}" if self.options.allow is None else f"add {modules!r} to allow="
            advice = f"import the module that defines it, or {hint}" if modules else ""
            if stdlib:  # os.system, subprocess.Popen: not values a boundary returns; never allow them
                advice += ("; " if advice else "") + (
                    f"a class of {', '.join(stdlib)} (standard library) is not a value chronicle records: the trace "
                    "was probably edited; do not allow it"
                )
        # under the default allow-list a divergence; with allow= given, the placeholders were asked for
        findings = self.report.divergences if self.options.allow is None else self.report.drift
        findings.append(
            Finding(
                "unresolved",
                rec.call_key,
                f"the recording holds {listed}, which may not be rebuilt here: the stub answers with a placeholder; "
                + advice,
            )
        )

    def _awaiting_cancellation(self, rec: Boundary) -> Callable[..., Any]:
        """The stub of an async call (or the end of a stream) its caller cancelled (a timeout around it, a task
        group): it waits to be cancelled again, so the caller's timeout or task group takes the branch it took; a
        divergence when nothing cancels it within twice the recorded time and a second."""
        recorded = max(rec.end_ns - rec.start_ns, 0) / 1e9
        limit = 2 * recorded + 1.0

        async def cancelled(*args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(limit)  # the CancelledError of the caller's timeout arrives here, as it did
            finding = Finding(
                "not-cancelled",
                rec.call_key,
                f"the recorded call was cancelled by its caller after {recorded:.3g} s; nothing cancelled it in the "
                f"replay within {limit:.3g} s",
            )
            self.report.divergences.append(finding)
            raise _NotCancelled(str(finding))

        return cancelled

    def _override(self, rec: Boundary, text: str, value: Any) -> Answer:
        """The what-if answer of ``rec``, listed in the report when it is given."""
        answer = override_answer(rec, self.allow, value)

        def listed() -> tuple[Any, BaseException | None]:
            output, error = answer()
            try:
                recorded = (
                    rec.decode_error(self.allow) if rec.failed and not rec.stream else rec.decode_output(self.allow)
                )
                was = f"recorded {'raises ' if rec.failed and not rec.stream else ''}{short_repr(recorded)}"
            except ReplayError:
                was = f"recorded {describe(rec)}"
            now = f"now raises {short_repr(error)}" if error is not None else f"now {short_repr(output)}"
            self.report.overrides.append(
                Finding("override", rec.call_key, f"answered by override {text!r}", (was, now))
            )
            return output, error

        return listed

    def _input_mismatch(self, rec: Boundary, actual_text: str | None) -> None:
        assert rec.raw_input is not None
        details = tuple(diff_lines(rec.raw_input.text, actual_text))
        if self.options.on_input_mismatch is InputMismatch.ERROR:
            finding = Finding("input-mismatch", rec.call_key, "stubbed call with a different input", details)
            self.report.divergences.append(finding)
            raise ReplayDivergence(str(finding), finding=finding)
        if self.options.on_input_mismatch is InputMismatch.WARN:
            self.report.drift.append(
                Finding("input-drift", rec.call_key, "input changed; answered from the recording", details)
            )

    @staticmethod
    def _recorded_output(rec: Boundary, redactor: Any) -> bytes | None:
        """The recorded return value's canonical bytes, for the span of a stub that answers with it (scanned for
        secret values by this configuration); None when it is not whole or the call raised."""
        raw = rec.raw_output
        if rec.failed or rec.stream or raw is None or raw.status not in _VERIFIED:
            return None
        data = raw.text.encode("utf-8", "surrogatepass")
        scan = value_scan(redactor)
        return scan(data) if scan is not None else data

    def _extra(
        self, mode: str, rec: Boundary | None, encoded: tuple[bytes | None, tuple[str, ...], bytes | None] | None = None
    ) -> ReplayExtra | None:
        if not self.options.emit_spans:
            return None
        attrs = {semconv.REPLAY_OF: self.trace.trace_id, semconv.REPLAY_MODE: mode}
        links = []
        if rec is not None:
            ctx = SpanContext(int(self.trace.trace_id, 16), int(rec.span_id, 16), True, TraceFlags(TraceFlags.SAMPLED))
            links.append(Link(ctx))  # the span carries chronicle.replay.of: the link needs no attributes of its own
        if encoded is None:
            return ReplayExtra(attrs, links)
        return ReplayExtra(attrs, links, encoded[0], encoded[1], encoded[2])

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
        encoded: tuple[bytes | None, tuple[str, ...], bytes | None] | None = None,
    ) -> Any:
        extra = self._extra(mode, rec, encoded)
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
                if (
                    isinstance(exc, ReplayDivergence)
                    and not isinstance(exc, _NotCancelled)
                    and rec is not None
                    and mode == "stub"
                ):
                    # read past what the recording holds: known even when the consumer swallows the error
                    self.report.divergences.append(Finding("past-recording", rec.call_key, str(exc)))
                if state != "abandoned":  # a consumer that stops early changes nothing in the stream
                    self._compare(compare, items, exc)

            driver = AsyncStreamDriver if spec.shape == "agen" else StreamDriver
            snapshot = self._comparer.snapshot(compare) if compare is not None else None
            return driver(stream, done, functools.partial(self._frame.set, frame), self._frame.reset, snapshot)
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
        actual = CallInput(*encode_unscanned(input_value, redact=redactor, secrets=secrets))
        rec = self._recordings.match(parent, spec.name, key, actual)
        if rec is None:
            if self.options.on_missing is not OnMissing.LIVE:
                details = (
                    "nearest recordings:",
                    *(f"  {line}" for line in self._recordings.nearest(parent, spec.name)),
                )
                finding = Finding(
                    "unexpected-call", key, f"no recording for this call(...) block {spec.name!r}", details
                )
                self.report.divergences.append(finding)
                raise ReplayDivergence(str(finding), finding=finding)
            self.report.drift.append(Finding("unrecorded-live", key, "call(...) block with no recording"))
            self._ran_live(key, spec.name, (spec.kind_value,))
            frame = self._last = Frame(key, spec.kind_value)
            return _Block(self._frame.set(frame), None, self._extra("live", None), self.options.emit_spans)
        self._recordings.use(rec)
        self.report.live.append(rec.call_key)
        self._ran_live_ids.add(rec.span_id)
        self._ran_live(rec.call_key, rec.name, (rec.kind, spec.kind_value))
        self._comparer.expect(rec, redactor, secrets)
        frame = self._last = Frame(rec.call_key, rec.kind)
        return _Block(self._frame.set(frame), rec, self._extra("live", rec), self.options.emit_spans)

    def exit_block(self, state: object, output: Any, exc: BaseException | None) -> None:
        """A ``call(...)`` block ends: compare its output with the recording."""
        assert isinstance(state, _Block)
        self._frame.reset(state.token)
        self._compare(state.rec, output, exc)


class _NotCancelled(ReplayDivergence):
    """A stub that waited to be cancelled, as its recording was, and was not (already in the report)."""


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


async def _await(awaitable: Any) -> Any:
    return await awaitable


async def _collect(stream: Any) -> list[Any]:
    return [item async for item in stream]


def _iterable(value: Any) -> bool:
    """A collection to turn into a tuple of selectors (a string is checked, and refused, as it is)."""
    return value is not None and not isinstance(value, (str, bytes)) and isinstance(value, Iterable)


def _check(report: ReplayReport) -> None:
    if not report.ok:
        raise ReplayDivergence(f"the replay diverged from the recording:\n{report}")


def _close(stream: Any) -> None:
    close = getattr(stream, "close", None) or getattr(stream, "aclose", None)
    if close is not None:
        with contextlib.suppress(Exception):
            result = close()
            if inspect.isawaitable(result):
                result.close()  # type: ignore[attr-defined]


def _never_rebuilt(name: str) -> bool:
    """Whether the class ``name`` is a ``BaseException`` that is no ``Exception`` (never rebuilt), as far as the
    modules already imported say: nothing is imported to find out."""
    if name in CANCELLED:
        return True
    module, _, qualname = name.rpartition(".")
    found: Any = sys.modules.get(module)
    for part in qualname.split(".") if found is not None else ():
        found = inspect.getattr_static(found, part, None)
    return isinstance(found, type) and issubclass(found, BaseException) and not issubclass(found, Exception)


UNRECORDED: Final = "(not recorded) "
"""Marks the class name of a placeholder for a value that was never recorded (``unencodable``: only its repr)."""


_MAX_WALKED: Final = 100_000
"""Objects :func:`_unresolved` looks at in one answer, at most."""


def _unresolved(value: Any, found: set[str], depth: int = 0, budget: list[int] | None = None) -> set[str]:
    """The class names of the placeholders in a decoded value, inside containers and inside the objects the stub
    rebuilt (their instance dictionaries and slots: a pydantic model, a dataclass), with :data:`UNRECORDED` before
    those never recorded."""
    left = [_MAX_WALKED] if budget is None else budget
    left[0] -= 1
    if left[0] < 0:
        return found
    cls = type(value)
    if cls is UnresolvedObject:
        found.add(UNRECORDED + value.class_name if value.tag == "unencodable" else value.class_name)
    elif depth >= 64 or cls in _SCALARS:
        pass
    elif cls is dict:
        for v in value.values():
            _unresolved(v, found, depth + 1, left)
    elif cls in (list, tuple, set, frozenset):
        for v in value:
            _unresolved(v, found, depth + 1, left)
    else:
        for v in _attributes(value):
            _unresolved(v, found, depth + 1, left)
    return found


_SCALARS: Final = frozenset({str, int, float, bool, bytes, type(None)})


def _attributes(value: Any) -> list[Any]:
    """The values an object holds in its instance dictionary, its pydantic extras and its slots (read without
    running the class's own ``__getattr__``); a container subclass's items."""
    out: list[Any] = []
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        out.extend(value.values() if isinstance(value, dict) else value)
    try:
        namespace = object.__getattribute__(value, "__dict__")
    except AttributeError:
        namespace = None
    if type(namespace) is dict:
        out.extend(namespace.values())
    for name in ("__pydantic_extra__", "__pydantic_private__"):
        try:
            extra = object.__getattribute__(value, name)
        except AttributeError:
            continue
        if type(extra) is dict:
            out.extend(extra.values())
    for klass in type(value).__mro__:
        for slot in klass.__dict__.get("__slots__", ()) if isinstance(klass.__dict__.get("__slots__"), tuple) else ():
            try:
                out.append(object.__getattribute__(value, slot))
            except (AttributeError, TypeError):
                continue
    return out


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _unbound_target(fn: Any, name: str) -> Any:
    """What ``rerun()`` calls without an instance: a classmethod or staticmethod through its class (found by the
    function's own module and qualified name, in modules already imported), else the function itself. A method
    needs the object to call it on: a :class:`ReplayError` saying so."""
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    path = str(getattr(fn, "__qualname__", "")).split(".")
    owner: Any = module
    for part in path[:-1] if module is not None and "<locals>" not in path else ():
        owner = inspect.getattr_static(owner, part, None)
    if not isinstance(owner, type):
        return fn
    attr = inspect.getattr_static(owner, path[-1], None)
    if isinstance(attr, (classmethod, staticmethod)):
        return getattr(owner, path[-1])
    if attr is not None:
        raise ReplayError(
            f"root boundary {name!r} is a method of {owner.__qualname__}: pass the object to call it on, "
            f"rerun(instance=...) (self is never recorded)"
        )
    return fn


def _arguments(fn: Any, values: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Turn recorded ``{param: value}`` into arguments of the callable ``fn`` (bound when it is a method), honouring
    positional-only parameters and ``*args``/``**kw``: the parameters before a recorded ``*args`` go by position."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return [], dict(values)
    star = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), None)
    by_position = star is not None and bool(values.get(star))
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    rest = dict(values)
    for p in params:
        if p.name not in rest:
            if by_position and p.kind is p.POSITIONAL_OR_KEYWORD and p.default is not p.empty:
                args.append(p.default)  # a gap before *args: its default, as the call had it
            continue
        value = rest.pop(p.name)
        if p.kind is p.POSITIONAL_ONLY or (by_position and p.kind is p.POSITIONAL_OR_KEYWORD):
            args.append(value)
        elif p.kind is p.VAR_POSITIONAL:
            if not isinstance(value, (list, tuple)):
                raise ReplayError(f"the recorded *{p.name} is a {type(value).__name__}, not a list of arguments")
            args.extend(value)
        elif p.kind is p.VAR_KEYWORD:
            if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
                raise ReplayError(f"the recorded **{p.name} is not an object of keyword arguments")
            kwargs.update(value)
        else:
            kwargs[p.name] = value
    kwargs.update(rest)
    return args, kwargs


def _check_arguments(target: Any, args: list[Any], kwargs: dict[str, Any], name: str, trace_id: str) -> None:
    """Refuse, before the call, recorded arguments the function's signature does not take now (a parameter renamed
    since the recording, or a tampered trace): a ``TypeError`` from the call itself would be the function's own."""
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # not introspectable: the call decides
        return
    # Under another decorator (``functools.wraps``) the signature shown is the inner function's, which may take
    # arguments the decorator supplies itself: then only names and counts it cannot take are refused here.
    wrapped = getattr(target, "__wrapped__", None)
    exact = wrapped is not None and not hasattr(wrapped, "__wrapped__")
    try:
        (signature.bind if exact else signature.bind_partial)(*args, **kwargs)
    except TypeError as exc:
        raise ReplayError(
            f"the recorded input of root boundary {name!r} (trace {trace_id}) does not fit its signature now: {exc}; "
            "pass the arguments to rerun(...), or call the function yourself inside `with replay(...)`"
        ) from None


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
    block_network: bool = True,
    allow_hosts: Iterable[str] = LOOPBACK,
    override: Mapping[str, Any] | None = None,
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
        strict: drift also makes ``report.ok`` false.
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
            made, and is a ``network`` divergence (even when the code that tried swallows the error).
        allow_hosts: host names, addresses and networks the guard lets through. Default: this machine
            (``localhost``, ``127.0.0.0/8``, ``::1``); empty: nothing.
        override: what-if answers, ``{call key: value}``: that recorded call is answered with ``value``
            instead of its recording (an exception is raised). A callable gets the recorded output (the recorded
            exception for a call that raised) and returns the answer. Keys as :func:`format_key` writes them
            (``"run_agent[0] > plan[0]"``), their tail when unique (``"plan[0]"``) or a bare name (every call).
            Listed in ``report.overrides``.

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
        block_network=block_network,
        allow_hosts=allow_hosts,  # type: ignore[arg-type]
        override=override if override is not None else {},
    )
    return ReplayRun(trace, options)
