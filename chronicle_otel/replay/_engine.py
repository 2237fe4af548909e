"""The replay session: matches each boundary call to its recording, stubs or runs it, and reports."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import fnmatch
import functools
import hashlib
import inspect
import itertools
from collections.abc import Callable, Iterable
from enum import Enum
from types import TracebackType
from typing import Any, TypeVar

import orjson
from opentelemetry.trace import Link, SpanContext, TraceFlags

from .. import semconv
from .._internal import hooks
from ..codec import encode
from ..config import get_config
from ..errors import ConfigError, ReplayDivergence, ReplayError
from ..redact import Redactor, _error_secrets, _scrub_text
from ._model import Boundary, Trace, format_key
from ._report import Finding, ReplayReport, diff_lines

Key = tuple[tuple[str, int], ...]
F = TypeVar("F", bound=Callable[..., Any])


class InputMismatch(str, Enum):
    """What a stubbed call whose input differs from the recording does."""

    ERROR = "error"
    WARN = "warn"
    IGNORE = "ignore"


class OnMissing(str, Enum):
    """What a call with no recording does."""

    ERROR = "error"
    LIVE = "live"


def _choice(enum: type[Enum], name: str, value: Any) -> Any:
    try:
        return enum(value)
    except ValueError:
        raise ConfigError(name, value, "one of " + ", ".join(repr(m.value) for m in enum)) from None


@dataclasses.dataclass
class _Frame:
    key: Key
    counters: dict[str, itertools.count[int]] = dataclasses.field(default_factory=dict)
    last: Boundary | None = None

    def next_index(self, name: str) -> int:
        counter = self.counters.get(name)
        if counter is None:
            counter = self.counters.setdefault(name, itertools.count())
        return next(counter)


@dataclasses.dataclass(frozen=True)
class _Extra:
    """Attributes and links that spans emitted during replay carry (read by the recording path)."""

    attributes: dict[str, Any]
    links: list[Link]


def _matches(selector: str, name: str, kind: str) -> bool:
    if selector.startswith("kind:"):
        return kind == selector[5:]
    if any(c in selector for c in "*?["):
        return fnmatch.fnmatchcase(name, selector)
    return name == selector


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _redactor(spec: Any) -> Redactor | None:
    """The redactor of the boundary's own configuration, as when it recorded: compare redacted with redacted."""
    return (spec.config or get_config()).redact


class ReplayRun:
    """An active replay of a recorded :class:`~chronicle_otel.replay.Trace` (see :func:`replay`)."""

    def __init__(
        self,
        trace: Trace,
        *,
        stub: Iterable[str] = ("kind:llm",),
        live: Iterable[str] = (),
        default: str = "live",
        on_input_mismatch: InputMismatch | str = InputMismatch.WARN,
        on_missing: OnMissing | str = OnMissing.ERROR,
        strict: bool = False,
        allow: Iterable[str] | None = None,
        emit_spans: bool = True,
    ) -> None:
        if not isinstance(trace, Trace):
            raise ConfigError("trace", trace, "a Trace from load_trace()")
        if isinstance(stub, str) or isinstance(live, str):
            raise ConfigError("stub/live", stub if isinstance(stub, str) else live, "a set of selectors, not a string")
        if default not in ("live", "stub"):
            raise ConfigError("default", default, "'live' or 'stub'")
        self.trace = trace
        self.stub = tuple(stub)
        self.live = tuple(live)
        self.default = default
        self.on_input_mismatch = _choice(InputMismatch, "on_input_mismatch", on_input_mismatch)
        self.on_missing = _choice(OnMissing, "on_missing", on_missing)
        self.strict = strict
        self._allow = None if allow is None else tuple(allow)
        self.emit_spans = emit_spans
        self.report = ReplayReport(strict=strict)
        self._frame: contextvars.ContextVar[_Frame | None] = contextvars.ContextVar(
            "chronicle_replay_frame", default=None
        )
        self._root = _Frame(())
        self._by_key = trace.by_key()
        self._children: dict[Key, list[Boundary]] = {}
        for b in trace.boundaries:
            self._children.setdefault(b.call_key[:-1], []).append(b)
        self._used: set[str] = set()
        self._covered: set[str] = set()
        self._tokens: list[contextvars.Token[Any]] = []
        self._redaction: dict[str, tuple[Redactor | None, list[str]]] = {}  # live recordings: how to compare

    # ------------------------------------------------------------------ activation

    @property
    def allow(self) -> tuple[str, ...]:
        """Module prefixes whose classes recorded values are rebuilt as: ``allow=`` or, by default, the top-level
        packages of the boundaries defined in this process, plus the trace's own allow-list."""
        if self._allow is not None:
            return self._allow + self.trace_allow
        packages = set()
        for w in hooks.all_boundaries():
            module = getattr(w, "__module__", None)
            if isinstance(module, str) and module != "builtins":
                packages.add(module.split(".")[0] + ".")
        return tuple(sorted(packages)) + self.trace_allow

    @property
    def trace_allow(self) -> tuple[str, ...]:
        return self.trace.root.allow if self.trace.root is not None else ()

    def __enter__(self) -> ReplayRun:
        self._tokens.append(hooks.REPLAY.set(self))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        hooks.REPLAY.reset(self._tokens.pop())
        if not self._tokens:
            self._report_unused()

    def __call__(self, func: F) -> F:
        """Use the replay as a decorator: each call of ``func`` replays afresh."""
        settings = dict(
            stub=self.stub,
            live=self.live,
            default=self.default,
            on_input_mismatch=self.on_input_mismatch,
            on_missing=self.on_missing,
            strict=self.strict,
            allow=self._allow,
            emit_spans=self.emit_spans,
        )
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with ReplayRun(self.trace, **settings):
                    return await func(*args, **kwargs)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with ReplayRun(self.trace, **settings):
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
        if any(_matches(s, name, kind) for s in self.live):
            return "live"
        if any(_matches(s, name, kind) for s in self.stub):
            return "stub"
        return self.default

    def _match(self, parent: _Frame, name: str, key: Key, actual: str | None) -> Boundary | None:
        keyed = next((b for b in self._by_key.get(key, ()) if b.span_id not in self._used), None)
        if keyed is not None and (actual is None or keyed.raw_input is None or keyed.raw_input.digest == actual):
            return keyed
        if actual is not None:  # concurrent siblings run in another order: find the one with this input
            for b in self._children.get(parent.key, ()):
                if b.name == name and b.span_id not in self._used and b.raw_input and b.raw_input.digest == actual:
                    return b
        return keyed

    def _nearest(self, parent: _Frame, name: str) -> list[str]:
        siblings = self._children.get(parent.key, [])
        same = [b for b in siblings if b.name == name]
        pool = same or siblings
        return [
            f"{format_key(b.call_key)}{' (already used)' if b.span_id in self._used else ''}" for b in pool[:5]
        ] or ["(no recordings under this parent)"]

    def _input(
        self,
        spec: Any,
        wrapped: Any,
        instance: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        secrets: list[str] | None = None,
    ) -> str:
        bound = spec.binder.bind(args, kwargs, wrapped is not spec.raw and instance is not None)
        return encode(bound, redact=_redactor(spec), secrets=secrets).decode()

    def call(self, spec: Any, wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Handle one boundary call (the recording path hands every call here while the replay is active)."""
        parent = self._frame.get() or self._root
        key = (*parent.key, (spec.name, parent.next_index(spec.name)))
        secrets: list[str] = []
        actual_text = self._input(spec, wrapped, instance, args, kwargs, secrets) if spec.binder is not None else None
        actual = _digest(actual_text.encode()) if actual_text is not None else None
        rec = self._match(parent, spec.name, key, actual)
        if rec is None:
            details = (
                f"input: {actual_text[:300] if actual_text else '{}'}",
                "nearest recordings:",
                *tuple(f"  {line}" for line in self._nearest(parent, spec.name)),
            )
            if self.on_missing is OnMissing.LIVE:
                self.report.drift.append(Finding("unrecorded-live", key, "no recording; ran live", details))
                return self._execute(spec, wrapped, instance, args, kwargs, _Frame(key), "live", None)
            finding = Finding("unexpected-call", key, f"no recording for this call of {spec.name!r}", details)
            self.report.divergences.append(finding)
            raise ReplayDivergence(str(finding))
        self._used.add(rec.span_id)
        self._check_order(parent, rec)
        mode = self._mode(rec.name, rec.kind)
        frame = _Frame(rec.call_key)
        if mode == "stub":
            if rec.raw_input is not None and actual is not None and rec.raw_input.digest != actual:
                self._input_mismatch(rec, actual_text)
            self._cover(rec)
            self.report.stubbed.append(rec.call_key)
            return self._execute(spec, self._stub_body(spec, rec), instance, args, kwargs, frame, "stub", rec)
        self.report.live.append(rec.call_key)
        self._redaction[rec.span_id] = (_redactor(spec), secrets)
        return self._execute(spec, wrapped, instance, args, kwargs, frame, "live", rec)

    def _check_order(self, parent: _Frame, rec: Boundary) -> None:
        last = parent.last
        parent.last = rec
        if last is not None and rec.end_ns <= last.start_ns:  # recorded entirely before the previous call
            self.report.divergences.append(
                Finding(
                    "order",
                    rec.call_key,
                    f"called after {format_key(last.call_key)}, but recorded before it",
                )
            )

    def _input_mismatch(self, rec: Boundary, actual_text: str | None) -> None:
        assert rec.raw_input is not None
        details = tuple(diff_lines(rec.raw_input.text, actual_text))
        if self.on_input_mismatch is InputMismatch.ERROR:
            finding = Finding("input-mismatch", rec.call_key, "stubbed call with a different input", details)
            self.report.divergences.append(finding)
            raise ReplayDivergence(str(finding))
        if self.on_input_mismatch is InputMismatch.WARN:
            self.report.drift.append(
                Finding("input-drift", rec.call_key, "input changed; answered from the recording", details)
            )

    def _cover(self, rec: Boundary) -> None:
        """A stubbed call's recorded children will not run: they count as used."""
        stack = [rec.call_key]
        while stack:
            key = stack.pop()
            for child in self._children.get(key, ()):
                self._covered.add(child.span_id)
                stack.append(child.call_key)

    def _stub_body(self, spec: Any, rec: Boundary) -> Callable[..., Any]:
        allow = self.allow

        def result() -> Any:
            if rec.failed and not rec.stream:
                raise rec.decode_error(allow)  # type: ignore[misc]
            return rec.decode_output(allow)

        if spec.shape == "async":

            async def async_body(*args: Any, **kwargs: Any) -> Any:
                return result()

            return async_body
        if spec.shape == "gen":

            def gen_body(*args: Any, **kwargs: Any) -> Any:
                yield from rec.decode_output(allow) or []
                if rec.failed:
                    raise rec.decode_error(allow)  # type: ignore[misc]

            return gen_body
        if spec.shape == "agen":

            async def agen_body(*args: Any, **kwargs: Any) -> Any:
                for item in rec.decode_output(allow) or []:
                    yield item
                if rec.failed:
                    raise rec.decode_error(allow)  # type: ignore[misc]

            return agen_body

        def body(*args: Any, **kwargs: Any) -> Any:
            return result()

        return body

    def _extra(self, mode: str, rec: Boundary | None) -> _Extra | None:
        if not self.emit_spans:
            return None
        attrs = {semconv.REPLAY_OF: self.trace.trace_id, semconv.REPLAY_MODE: mode}
        links = []
        if rec is not None:
            ctx = SpanContext(int(self.trace.trace_id, 16), int(rec.span_id, 16), True, TraceFlags(TraceFlags.SAMPLED))
            links.append(Link(ctx, {semconv.REPLAY_OF: self.trace.trace_id}))
        return _Extra(attrs, links)

    def _execute(
        self,
        spec: Any,
        body: Any,
        instance: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        frame: _Frame,
        mode: str,
        rec: Boundary | None,
    ) -> Any:
        extra = self._extra(mode, rec)
        compare = rec if mode == "live" else None
        if self.emit_spans:

            def run() -> Any:
                return spec.runner(spec, body, instance, args, kwargs, extra)
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
            return self._gen(stream, frame, compare) if spec.shape == "gen" else self._agen(stream, frame, compare)
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

    async def _async(self, run: Callable[[], Any], frame: _Frame, rec: Boundary | None) -> Any:
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

    def _gen(self, stream: Any, frame: _Frame, rec: Boundary | None) -> Any:
        items: list[Any] = []
        send: Any = None
        while True:
            token = self._frame.set(frame)
            try:
                item = stream.send(send)
            except StopIteration as stop:
                self._compare(rec, items, None)
                return stop.value
            except BaseException as exc:
                self._compare(rec, items, exc)
                raise
            finally:
                self._frame.reset(token)
            items.append(item)
            send = yield item

    async def _agen(self, stream: Any, frame: _Frame, rec: Boundary | None) -> Any:
        items: list[Any] = []
        while True:
            token = self._frame.set(frame)
            try:
                item = await stream.__anext__()
            except StopAsyncIteration:
                self._compare(rec, items, None)
                return
            except BaseException as exc:
                self._compare(rec, items, exc)
                raise
            finally:
                self._frame.reset(token)
            items.append(item)
            yield item

    def _compare(self, rec: Boundary | None, value: Any, exc: BaseException | None) -> None:
        """For a live call: note in the report how its output differs from the recording."""
        if rec is None:
            return
        redactor, secrets = self._redaction.get(rec.span_id, (get_config().redact, []))
        try:
            if exc is not None:
                envelope = orjson.loads(rec.raw_error.text) if rec.raw_error and rec.raw_error.complete else {}
                message = (
                    str(exc) if redactor is None else _scrub_text(redactor, str(exc), _error_secrets(exc, secrets))
                )
                same = (
                    envelope.get("type") == f"{type(exc).__module__}.{type(exc).__qualname__}"
                    and envelope.get("message") == message
                )
                if not same:
                    was = f"recorded {_describe_recording(rec)}"
                    self.report.changes.append(
                        Finding("output-changed", rec.call_key, f"now raises {type(exc).__name__}: {message}; {was}")
                    )
                return
            actual = encode(value, redact=redactor).decode()
            if rec.failed and not rec.stream:
                self.report.changes.append(
                    Finding("output-changed", rec.call_key, f"now returns; recorded {_describe_recording(rec)}")
                )
            elif rec.raw_output is None or not rec.raw_output.complete or rec.raw_output.text != actual:
                recorded = rec.raw_output.text if rec.raw_output is not None else None
                self.report.changes.append(
                    Finding("output-changed", rec.call_key, "output differs", tuple(diff_lines(recorded, actual)))
                )
        except ReplayError as err:
            self.report.changes.append(Finding("output-changed", rec.call_key, f"cannot compare: {err}"))

    # ------------------------------------------------------------------ call(...) blocks

    def enter_block(self, spec: Any, input_value: Any) -> tuple[contextvars.Token[Any], Boundary | None]:
        """A ``call(...)`` block starts: match it like a live call and make it the current parent."""
        parent = self._frame.get() or self._root
        key = (*parent.key, (spec.name, parent.next_index(spec.name)))
        secrets: list[str] = []
        actual = _digest(encode(input_value, redact=_redactor(spec), secrets=secrets))
        rec = self._match(parent, spec.name, key, actual)
        if rec is None:
            self.report.drift.append(Finding("unrecorded-live", key, "call(...) block with no recording"))
            return self._frame.set(_Frame(key)), None
        self._used.add(rec.span_id)
        self.report.live.append(rec.call_key)
        self._redaction[rec.span_id] = (_redactor(spec), secrets)
        return self._frame.set(_Frame(rec.call_key)), rec

    def exit_block(self, token: contextvars.Token[Any], rec: Boundary | None, output: Any, exc: Any) -> None:
        """A ``call(...)`` block ends: compare its output with the recording."""
        self._frame.reset(token)
        self._compare(rec, output, exc)

    # ------------------------------------------------------------------ end of the block

    def _report_unused(self) -> None:
        unused_keys: set[Key] = set()
        for b in self.trace.boundaries:
            if b.span_id in self._used or b.span_id in self._covered:
                continue
            if any(b.call_key[:i] in unused_keys for i in range(1, len(b.call_key))):
                continue  # its parent is already reported
            unused_keys.add(b.call_key)
            self.report.divergences.append(
                Finding("unused-recording", b.call_key, f"recorded {b.kind} call {b.name!r} was never made")
            )


def _describe_recording(rec: Boundary) -> str:
    if rec.failed and rec.raw_error is not None:
        return f"error {rec.raw_error.text[:200]}"
    return f"output {rec.raw_output.text[:200] if rec.raw_output else 'null'}"


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

    Returns:
        A :class:`ReplayRun`: a context manager (and decorator) with ``rerun()`` and ``report``.

    Raises:
        ConfigError: a bad policy value (the message lists the valid ones).
    """
    return ReplayRun(
        trace,
        stub=stub,
        live=live,
        default=default,
        on_input_mismatch=on_input_mismatch,
        on_missing=on_missing,
        strict=strict,
        allow=allow,
        emit_spans=emit_spans,
    )
