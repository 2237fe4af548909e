"""Adapters for SDK methods: what of a call is recorded, and how a returned stream object is recorded and replayed.

An SDK method rarely looks like a plain function. Its signature lists every option with a sentinel default
(``openai.NOT_GIVEN``), so recording the bound arguments records dozens of sentinels whose text differs from run to
run; and with ``stream=True`` it returns a stream *object* (``openai.Stream``) rather than a generator, which the
codec cannot store and a stub cannot stand in for. :func:`chronicle_otel.instrument` takes two adapters for that:

* :class:`Arguments` — record only the arguments the caller passed, without the values an SDK uses to mean
  "not given", and never the ones named in ``exclude`` (headers, clients, keys);
* :class:`StreamAdapter` — recognise the stream object a call returns, hand the consumer a proxy with the same
  interface that records each item as it is read (the span stays open until the stream ends: ``complete``,
  ``abandoned`` when closed or dropped early, ``error``), and, in a replay, build the object that stands in for it
  from the recorded items.

Usage, for a client library whose ``Client.generate(stream=True)`` returns a ``TokenStream``::

    from chronicle_otel.adapters import Arguments, StreamAdapter

    chronicle.instrument(
        mylib.Client, "generate", kind="llm", provider="mylib",
        arguments=Arguments(passed_only=True, skip=lambda v: v is mylib.NOT_GIVEN, exclude={"headers"}),
        stream=StreamAdapter(is_stream=lambda v: isinstance(v, mylib.TokenStream)),
    )

The default recording proxy forwards every attribute to the real stream and intercepts iteration (``for``,
``next``, ``async for``), ``close``/``aclose`` and the context-manager protocol. The default replay object is a
:class:`ReplayedStream` (:class:`AsyncReplayedStream` for an async stream) with that same interface, yielding the
recorded items, then raising the recorded error if the stream failed. The OpenAI and Anthropic integrations
(:mod:`chronicle_otel.integrations`) are built on these adapters.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Collection, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import wrapt

from ..errors import ReplayDivergence
from .session_attrs import AttributeValue

__all__ = [
    "Arguments",
    "AsyncReplayedStream",
    "RecordingAsyncStream",
    "RecordingProxy",
    "RecordingStream",
    "ReplayedResponse",
    "ReplayedStream",
    "StreamAdapter",
    "StreamEnd",
    "StreamRecorder",
    "StreamReplay",
    "record_stream",
]

if TYPE_CHECKING:
    _Proxy = wrapt.ObjectProxy[Any]
else:
    _Proxy = wrapt.ObjectProxy  # not subscriptable at run time before wrapt 2

StreamEnd = Literal["complete", "abandoned", "error"]
"""How a recorded stream ended."""


@dataclasses.dataclass(frozen=True)
class Arguments:
    """Which arguments of a call are recorded as its input.

    Args:
        passed_only: record only the arguments the caller passed (no defaults filled in).
        skip: a value for which this returns True is left out (an SDK's "not given" sentinel).
        exclude: parameter names never recorded (headers, an HTTP client, credentials).
    """

    passed_only: bool = False
    skip: Callable[[Any], bool] | None = None
    exclude: Collection[str] = ()

    def select(self, bound: dict[str, Any]) -> dict[str, Any]:
        """``bound`` without the excluded names and skipped values."""
        exclude, skip = self.exclude, self.skip
        if not exclude and skip is None:
            return bound
        return {k: v for k, v in bound.items() if k not in exclude and not (skip is not None and _skipped(skip, v))}


def _skipped(skip: Callable[[Any], bool], value: Any) -> bool:
    try:
        return bool(skip(value))
    except Exception:  # a predicate that cannot judge a value keeps it
        return False


@dataclasses.dataclass(frozen=True)
class StreamReplay:
    """What a replay knows of a recorded stream when it builds the object that stands in for it.

    Attributes:
        items: the recorded items, rebuilt as typed objects where allowed.
        error: the exception the stream raised, rebuilt, or None.
        state: how the recorded stream ended.
        is_async: the recorded call was a coroutine (the stand-in must be an async stream).
        args: the positional arguments of the call being replayed (``self`` excluded).
        kwargs: its keyword arguments.
    """

    items: list[Any]
    error: BaseException | None
    state: StreamEnd | None
    is_async: bool
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


class StreamRecorder:
    """Receives the items of one recorded stream and reports its end once (thread-safe).

    Args:
        on_done: called once with ``(recorded items, state, exc)`` when the stream ends.
        snapshot: what is recorded of an item, taken when the consumer reads it (its encoding at that moment), so
            a consumer that edits a chunk in place afterwards never changes the recording. Default: the item.

    Attributes:
        items: the items as read (the live objects, for attributes computed from them at the end).
    """

    __slots__ = ("_done", "_lock", "_on_done", "_recorded", "_snapshot", "items")

    def __init__(
        self,
        on_done: Callable[[list[Any], StreamEnd, BaseException | None], None],
        snapshot: Callable[[Any], Any] | None = None,
    ) -> None:
        self.items: list[Any] = []
        self._recorded: list[Any] = [] if snapshot is not None else self.items
        self._snapshot = snapshot
        self._on_done = on_done
        self._done = False
        self._lock = threading.Lock()

    @property
    def done(self) -> bool:
        """True once the stream has ended."""
        return self._done

    def item(self, value: Any) -> None:
        """One item read by the consumer."""
        if not self._done:
            self.items.append(value)
            if self._snapshot is not None:
                self._recorded.append(self._snapshot(value))

    def end(self, state: StreamEnd, exc: BaseException | None = None) -> None:
        """The stream ended (the first call wins); never raises."""
        with self._lock:
            if self._done:
                return
            self._done = True
        self._on_done(self._recorded, state, exc)


@dataclasses.dataclass(frozen=True)
class StreamAdapter:
    """How :func:`chronicle_otel.instrument` records and replays a method that returns a stream object.

    Args:
        is_stream: True for a value the method returned that is a stream (``stream=True`` calls); other values are
            recorded as ordinary return values.
        record: wraps the stream for recording: ``record(stream, recorder)`` returns what the caller gets, and
            must call ``recorder.item(x)`` for each item read and ``recorder.end(state, exc)`` once. Default:
            :func:`record_stream`, a transparent proxy.
        replay: builds the stand-in for a recorded stream from a :class:`StreamReplay`. Default:
            :class:`ReplayedStream` / :class:`AsyncReplayedStream` of the recorded items.
        attributes: span attributes computed from the items when the stream ends (GenAI model, id, usage).
    """

    is_stream: Callable[[Any], bool]
    record: Callable[[Any, StreamRecorder], Any] | None = None
    replay: Callable[[StreamReplay], Any] | None = None
    attributes: Callable[[list[Any]], Mapping[str, AttributeValue]] | None = None

    def wrap(self, stream: Any, recorder: StreamRecorder) -> Any:
        """The object the caller receives instead of ``stream``."""
        wrapped = (self.record or record_stream)(stream, recorder)
        if isinstance(wrapped, RecordingProxy):
            wrapped._self_adapter = self  # a boundary that returns it on records it as a stream too
        return wrapped

    def stand_in(self, replayed: StreamReplay) -> Any:
        """The object a stubbed call returns."""
        if self.replay is not None:
            return self.replay(replayed)
        cls = AsyncReplayedStream if replayed.is_async else ReplayedStream
        return cls(replayed.items, replayed.error, replayed.state)


# ------------------------------------------------------------------------------------ recording proxies


def record_stream(stream: Any, recorder: StreamRecorder) -> Any:
    """A proxy of ``stream`` that records each item the consumer reads.

    The proxy is async when ``stream`` has ``__anext__`` or ``__aiter__``.
    """
    if hasattr(type(stream), "__anext__") or hasattr(type(stream), "__aiter__"):
        return RecordingAsyncStream(stream, recorder)
    return RecordingStream(stream, recorder)


class RecordingProxy(_Proxy):
    """A transparent proxy (every attribute forwarded) that reports to a :class:`StreamRecorder`.

    Dropped before the stream ended, it reports the stream abandoned.
    """

    def __init__(self, wrapped: Any, recorder: StreamRecorder) -> None:
        super().__init__(wrapped)
        self._self_recorder = recorder
        self._self_iterator: Any = None
        self._self_adapter: StreamAdapter | None = None

    def __del__(self) -> None:
        recorder = getattr(self, "_self_recorder", None)
        if recorder is not None and not recorder.done:
            recorder.end("abandoned")


class RecordingStream(RecordingProxy):
    """A transparent proxy of a sync stream that records what is read from it."""

    def __iter__(self) -> RecordingStream:
        return self

    def __next__(self) -> Any:
        recorder = self._self_recorder
        if self._self_iterator is None:
            wrapped = self.__wrapped__
            self._self_iterator = wrapped if hasattr(type(wrapped), "__next__") else iter(wrapped)
        try:
            item = next(self._self_iterator)
        except StopIteration:
            recorder.end("complete")
            raise
        except BaseException as exc:
            recorder.end("error", exc)
            raise
        recorder.item(item)
        return item

    def close(self) -> Any:
        """Close the stream; it is recorded as abandoned unless it had already ended."""
        try:
            return self.__wrapped__.close()
        finally:
            self._self_recorder.end("abandoned")

    def __enter__(self) -> RecordingStream:
        enter = getattr(self.__wrapped__, "__enter__", None)
        if enter is not None:
            enter()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Any:
        try:
            leave = getattr(self.__wrapped__, "__exit__", None)
            return leave(exc_type, exc, tb) if leave is not None else None
        finally:
            self._self_recorder.end("abandoned")


class RecordingAsyncStream(RecordingProxy):
    """A transparent proxy of an async stream that records what is read from it."""

    def __aiter__(self) -> RecordingAsyncStream:
        return self

    async def __anext__(self) -> Any:
        recorder = self._self_recorder
        if self._self_iterator is None:
            wrapped = self.__wrapped__
            self._self_iterator = wrapped if hasattr(type(wrapped), "__anext__") else wrapped.__aiter__()
        try:
            item = await self._self_iterator.__anext__()
        except StopAsyncIteration:
            recorder.end("complete")
            raise
        except BaseException as exc:
            recorder.end("error", exc)
            raise
        recorder.item(item)
        return item

    async def close(self) -> Any:
        """Close the stream; it is recorded as abandoned unless it had already ended."""
        try:
            close = getattr(self.__wrapped__, "close", None) or self.__wrapped__.aclose
            result = close()
            if hasattr(result, "__await__"):
                result = await result
            return result
        finally:
            self._self_recorder.end("abandoned")

    async def aclose(self) -> Any:
        """:meth:`close` under the async-generator name."""
        return await self.close()

    async def __aenter__(self) -> RecordingAsyncStream:
        enter = getattr(self.__wrapped__, "__aenter__", None)
        if enter is not None:
            await enter()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Any:
        try:
            leave = getattr(self.__wrapped__, "__aexit__", None)
            return (await leave(exc_type, exc, tb)) if leave is not None else None
        finally:
            self._self_recorder.end("abandoned")


# ------------------------------------------------------------------------------------ replay stand-ins


class ReplayedResponse:
    """Stands in for the HTTP response of a replayed stream: nothing was requested, so nothing to read or close."""

    status_code = 200
    http_version = "HTTP/1.1"
    request = None

    def __init__(self) -> None:
        self.headers: dict[str, str] = {}
        self.is_closed = False

    def close(self) -> None:
        """Mark the response closed."""
        self.is_closed = True

    async def aclose(self) -> None:
        """Mark the response closed."""
        self.is_closed = True


class _ReplayedItems:
    """The recorded items of a replayed stream, then its error; closing ends it.

    A stream whose recording was abandoned (the consumer stopped early) has no recorded end: reading past its
    items raises :class:`~chronicle_otel.ReplayDivergence` instead of ending as if the stream were complete.
    """

    def __init__(self, items: list[Any], error: BaseException | None = None, state: StreamEnd | None = None) -> None:
        self._items = list(items)
        self._error = error
        self._state = state
        self._position = 0
        self._closed = False
        self.response = ReplayedResponse()

    def _step(self) -> tuple[bool, Any]:
        """``(True, item)``, or ``(False, None)`` at the end; raises the recorded error once, after the items."""
        if self._closed:
            return False, None
        if self._position < len(self._items):
            self._position += 1
            return True, self._items[self._position - 1]
        self._closed = True
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        if self._state == "abandoned":
            raise ReplayDivergence(
                f"the recorded stream was abandoned by its consumer after {len(self._items)} items; "
                "the replay reads further than the recording goes"
            )
        return False, None


class ReplayedStream(_ReplayedItems):
    """A sync stream that yields recorded items, then raises the recorded error if there was one.

    Iterable (``for``, ``next``), a context manager, with ``close()`` and a ``response`` stand-in, like the stream
    objects of the OpenAI and Anthropic SDKs.
    """

    def __iter__(self) -> ReplayedStream:
        return self

    def __next__(self) -> Any:
        more, item = self._step()
        if not more:
            raise StopIteration
        return item

    def close(self) -> None:
        """Stop the stream: later reads end at once."""
        self._closed = True
        self.response.close()

    def __enter__(self) -> ReplayedStream:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncReplayedStream(_ReplayedItems):
    """An async stream that yields recorded items, then raises the recorded error if there was one.

    ``async for``, ``await anext()``, ``async with``, ``await close()`` and a ``response`` stand-in.
    """

    def __aiter__(self) -> AsyncReplayedStream:
        return self

    async def __anext__(self) -> Any:
        more, item = self._step()
        if not more:
            raise StopAsyncIteration
        return item

    async def close(self) -> None:
        """Stop the stream: later reads end at once."""
        self._closed = True
        await self.response.aclose()

    async def aclose(self) -> None:
        """:meth:`close` under the async-generator name."""
        await self.close()

    async def __aenter__(self) -> AsyncReplayedStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
