"""The stream driver: one wrapper for generators and async generators, shared by recording and replay.

A boundary whose function is a generator (or an async generator) returns a :class:`StreamDriver`
(:class:`AsyncStreamDriver`) around the stream the function made. The driver

- forwards ``send``, ``throw`` and ``close`` (``asend``, ``athrow``, ``aclose``) to the inner stream,
  so the consumer sees the stream's own items, return value and exceptions;
- runs a per-step hook around each resume of the inner stream: ``token = enter()`` before it,
  ``exit(token)`` after it (recording attaches the boundary's OpenTelemetry context, replay sets its frame);
- collects the yielded items, each as ``snapshot(item)`` when a snapshot is given (the item as it was when
  yielded: a consumer or the stream itself may change a mutable item afterwards);
- calls ``on_done(items, state, exc)`` exactly once, where ``state`` is ``"complete"`` (the stream
  returned), ``"error"`` (it raised ``exc``) or ``"abandoned"`` (the consumer closed it, or dropped it
  and it was garbage-collected, whether or not it was ever iterated).

Usage::

    driver = drive(stream, on_done=record, enter=lambda: context.attach(ctx), exit=context.detach)

A sync stream dropped unfinished (``break`` out of a ``for`` loop) is closed inside the step hook
before ``on_done`` runs, with the items yielded so far. An async stream cannot be awaited from a
finalizer: ``on_done`` runs at once and the event loop's own async-generator finalizer closes the
inner stream.

``on_done``, ``enter``, ``exit`` and ``snapshot`` must not raise: they run on the consumer's call path.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Generator
from typing import Any, Literal

StreamState = Literal["complete", "abandoned", "error"]
"""How a stream ended."""

OnDone = Callable[[list[Any], StreamState, BaseException | None], None]
"""Called once when a stream ends: the items it yielded, how it ended, and the exception when it raised."""

Enter = Callable[[], Any]
"""Called before each resume of the inner stream; returns a token for :data:`Exit`."""

Exit = Callable[[Any], None]
"""Called after each resume of the inner stream with the token :data:`Enter` returned."""

Snapshot = Callable[[Any], Any]
"""What the driver keeps of an item when it is yielded."""


def _no_enter() -> None:
    return None


def _no_exit(token: Any) -> None:
    return None


class StreamDriver(Generator[Any, Any, Any]):
    """Drives a generator: forwards the generator protocol, collects items, reports the end once.

    Args:
        inner: the generator to drive.
        on_done: called once with ``(items, state, exc)`` when the stream ends.
        enter: called before each resume; its result is passed to ``exit``.
        exit: called after each resume.
        snapshot: what to keep of each item when it is yielded (the item itself by default).
    """

    __slots__ = ("_done", "_enter", "_exit", "_inner", "_items", "_on_done", "_snapshot")

    def __init__(
        self,
        inner: Generator[Any, Any, Any],
        on_done: OnDone,
        enter: Enter | None = None,
        exit: Exit | None = None,
        snapshot: Snapshot | None = None,
    ) -> None:
        self._inner = inner
        self._on_done = on_done
        self._enter: Enter = enter or _no_enter
        self._exit: Exit = exit or _no_exit
        self._snapshot = snapshot
        self._items: list[Any] = []
        self._done = False

    def _end(self, token: Any, state: StreamState, exc: BaseException | None) -> None:
        self._exit(token)
        if not self._done:
            self._done = True
            self._on_done(self._items, state, exc)

    def send(self, value: Any = None) -> Any:
        """Resume the stream with ``value``; return its next item (``StopIteration`` when it returns)."""
        token = self._enter()
        try:
            item = self._inner.send(value)
        except StopIteration:
            self._end(token, "complete", None)
            raise
        except BaseException as exc:
            self._end(token, "error", exc)
            raise
        self._exit(token)
        self._items.append(item if self._snapshot is None else self._snapshot(item))
        return item

    __next__ = send

    def __iter__(self) -> StreamDriver:
        return self

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        """Raise an exception inside the stream; return the next item it yields, if it handles it."""
        token = self._enter()
        try:
            item = self._inner.throw(typ) if val is None and tb is None else self._inner.throw(typ, val, tb)
        except StopIteration:
            self._end(token, "complete", None)
            raise
        except BaseException as exc:
            self._end(token, "error", exc)
            raise
        self._exit(token)
        self._items.append(item if self._snapshot is None else self._snapshot(item))
        return item

    def close(self) -> None:
        """Close the inner stream; the stream ends as ``abandoned`` unless it had already ended."""
        token = self._enter()
        try:
            self._inner.close()
        except BaseException as exc:
            self._end(token, "error", exc)
            raise
        self._end(token, "abandoned", None)

    def __del__(self) -> None:
        if not self._done:
            self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self._inner!r}>"


class AsyncStreamDriver(AsyncGenerator[Any, Any]):
    """Drives an async generator: forwards the async-generator protocol, collects items, reports the end once.

    Args:
        inner: the async generator to drive.
        on_done: called once with ``(items, state, exc)`` when the stream ends.
        enter: called before each resume; its result is passed to ``exit``.
        exit: called after each resume.
        snapshot: what to keep of each item when it is yielded (the item itself by default).
    """

    __slots__ = ("_done", "_enter", "_exit", "_inner", "_items", "_on_done", "_snapshot")

    def __init__(
        self,
        inner: AsyncGenerator[Any, Any],
        on_done: OnDone,
        enter: Enter | None = None,
        exit: Exit | None = None,
        snapshot: Snapshot | None = None,
    ) -> None:
        self._inner = inner
        self._on_done = on_done
        self._enter: Enter = enter or _no_enter
        self._exit: Exit = exit or _no_exit
        self._snapshot = snapshot
        self._items: list[Any] = []
        self._done = False

    def _end(self, token: Any, state: StreamState, exc: BaseException | None) -> None:
        self._exit(token)
        if not self._done:
            self._done = True
            self._on_done(self._items, state, exc)

    async def asend(self, value: Any = None) -> Any:
        """Resume the stream with ``value``; return its next item (``StopAsyncIteration`` at the end)."""
        step = self._inner.asend(value)
        token = self._enter()
        try:
            item = await step
        except StopAsyncIteration:
            self._end(token, "complete", None)
            raise
        except BaseException as exc:
            self._end(token, "error", exc)
            raise
        self._exit(token)
        self._items.append(item if self._snapshot is None else self._snapshot(item))
        return item

    __anext__ = asend

    def __aiter__(self) -> AsyncStreamDriver:
        return self

    async def athrow(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        """Raise an exception inside the stream; return the next item it yields, if it handles it."""
        step = self._inner.athrow(typ) if val is None and tb is None else self._inner.athrow(typ, val, tb)
        token = self._enter()
        try:
            item = await step
        except StopAsyncIteration:
            self._end(token, "complete", None)
            raise
        except BaseException as exc:
            self._end(token, "error", exc)
            raise
        self._exit(token)
        self._items.append(item if self._snapshot is None else self._snapshot(item))
        return item

    async def aclose(self) -> None:
        """Close the inner stream; the stream ends as ``abandoned`` unless it had already ended."""
        token = self._enter()
        try:
            await self._inner.aclose()
        except BaseException as exc:
            self._end(token, "error", exc)
            raise
        self._end(token, "abandoned", None)

    def __del__(self) -> None:
        if not self._done:
            self._done = True
            self._on_done(self._items, "abandoned", None)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self._inner!r}>"


def drive(
    stream: Generator[Any, Any, Any] | AsyncGenerator[Any, Any],
    *,
    on_done: OnDone,
    enter: Enter | None = None,
    exit: Exit | None = None,
) -> StreamDriver | AsyncStreamDriver:
    """Wrap ``stream`` (a generator or an async generator) in the matching driver.

    Args:
        stream: the stream a generator or async-generator function returned.
        on_done: called once with ``(items, state, exc)`` when the stream ends.
        enter: called before each resume of ``stream``; its result is passed to ``exit``.
        exit: called after each resume.

    Returns:
        A :class:`StreamDriver` for a generator, an :class:`AsyncStreamDriver` for an async generator.
    """
    if isinstance(stream, AsyncGenerator):
        return AsyncStreamDriver(stream, on_done, enter, exit)
    return StreamDriver(stream, on_done, enter, exit)
