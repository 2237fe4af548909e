"""Stubs: bodies that answer a call from its recording, shaped like the function they stand in for."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from .._internal.hooks import Shape
from ..adapters import StreamAdapter, StreamReplay
from ..errors import ReplayDivergence
from ..model import Boundary


def stub_body(shape: Shape, rec: Boundary, allow: tuple[str, ...], stream_adapter: Any = None) -> Callable[..., Any]:
    """A callable that returns the recorded output (rebuilt), re-raises the recorded error or re-yields the stream.

    Sync or async, generator or async generator, as ``shape`` says; the recording is decoded when the stub runs.
    A method whose recorded call returned a stream object answers with the object its ``stream_adapter`` builds
    from the recorded items (and error).
    """
    if rec.stream and shape in ("sync", "async"):  # a function that returned a stream object
        return _stream_stand_in(shape, rec, allow, stream_adapter or _GENERIC)

    def result() -> Any:
        if rec.failed and not rec.stream:
            raise _error(rec, allow)
        return rec.decode_output(allow)

    def items() -> list[Any]:
        value = rec.decode_output(allow)
        return list(value) if isinstance(value, (list, tuple)) else []

    if shape == "async":

        async def async_body(*args: Any, **kwargs: Any) -> Any:
            return result()

        return async_body
    if shape == "gen":

        def gen_body(*args: Any, **kwargs: Any) -> Iterator[Any]:
            recorded = items()
            yield from recorded
            if rec.failed:
                raise _error(rec, allow)
            _past_the_recording(rec, len(recorded))

        return gen_body
    if shape == "agen":

        async def agen_body(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            recorded = items()
            for item in recorded:
                yield item
            if rec.failed:
                raise _error(rec, allow)
            _past_the_recording(rec, len(recorded))

        return agen_body

    def body(*args: Any, **kwargs: Any) -> Any:
        return result()

    return body


def _stream_stand_in(shape: Shape, rec: Boundary, allow: tuple[str, ...], adapter: Any) -> Callable[..., Any]:
    def build(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        value = rec.decode_output(allow)
        items = list(value) if isinstance(value, (list, tuple)) else []
        error = _error(rec, allow) if rec.failed else None
        state = rec.stream_state if rec.stream_state in ("complete", "abandoned", "error") else None
        replayed = StreamReplay(items, error, state, shape == "async", args, dict(kwargs))  # type: ignore[arg-type]
        return adapter.stand_in(replayed)

    if shape == "async":

        async def async_body(*args: Any, **kwargs: Any) -> Any:
            return build(args, kwargs)

        return async_body

    def body(*args: Any, **kwargs: Any) -> Any:
        return build(args, kwargs)

    return body


_GENERIC = StreamAdapter(is_stream=lambda value: False)
"""The stand-in of a stream object a boundary returned with no adapter of its own: a ``ReplayedStream``."""


def _past_the_recording(rec: Boundary, count: int) -> None:
    """The consumer asks for more than a stream abandoned early recorded: there is no recorded answer."""
    if rec.stream_state == "abandoned":
        raise ReplayDivergence(
            f"the recorded stream {rec.name!r} was abandoned by its consumer after {count} items; "
            "the replay reads further than the recording goes"
        )


def _error(rec: Boundary, allow: tuple[str, ...]) -> BaseException:
    error = rec.decode_error(allow)
    assert error is not None  # rec.failed
    return error
