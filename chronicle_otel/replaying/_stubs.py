"""Stubs: bodies that answer a call from its recording, shaped like the function they stand in for."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import Any, Final

import orjson

from .._assembled import Assembled, RebuildError, rebuild
from .._internal.hooks import Shape
from ..codec import ENDS_ITERATION, find_loaded_class
from ..errors import ReplayDivergence, ReplayError
from ..model import Boundary, ReplayedError, format_key
from ..record.adapters import StreamAdapter, StreamReplay

Answer = Callable[[], "tuple[Any, BaseException | None]"]
"""What a stub answers, computed when it runs: ``(output, error)``; for a stream, the items and the error after them."""


def recorded_answer(rec: Boundary, allow: tuple[str, ...]) -> Answer:
    """The recording's own answer, decoded with ``allow``."""

    def answer() -> tuple[Any, BaseException | None]:
        if rec.failed and not rec.stream:
            return None, _error(rec, allow)
        return rec.decode_output(allow), (_error(rec, allow) if rec.failed else None)

    return answer


def override_answer(rec: Boundary, allow: tuple[str, ...], override: Any) -> Answer:
    """A what-if answer: ``override`` itself, or, when it is a function, what it returns given the recorded output
    (the recorded exception for a call that raised; the list of items for a stream). An exception (instance or
    class) is raised: by a stub of a stream, where the call would raise it (see :func:`stub_body`); a list of items
    that ends with an exception yields the items before it, then raises it.

    For a stream, the answer is the list of items it yields, or, for an LLM's stream, the message they carry (a
    dict such as ``{"content": "…", "tool_calls": [{"name": "place_order", "arguments": {"quantity": 10}}]}``, its
    text as a string, or an :class:`~chronicle_otel._assembled.Assembled`): the stub then yields items of the
    recorded kind (OpenAI chat chunks, Responses events, Anthropic events, LangChain chunks, text) that carry it,
    made of the SDK's classes after the recorded items, so its accumulators and helpers work on them."""

    def answer() -> tuple[Any, BaseException | None]:
        value = override
        if callable(override) and not isinstance(override, type):
            value = override(_error(rec, allow) if rec.failed and not rec.stream else rec.decode_output(allow))
        if isinstance(value, type) and issubclass(value, BaseException):
            value = _instance(rec, value)
        if isinstance(value, BaseException):
            return None, value
        if rec.stream and isinstance(value, (list, tuple)) and value and _is_exception(value[-1]):
            last = value[-1]
            return list(value[:-1]), last if isinstance(last, BaseException) else _instance(rec, last)
        if rec.stream and isinstance(value, (Assembled, Mapping, str)):
            value = _stream_of(rec, allow, value)
        return value, None

    return answer


def _stream_of(rec: Boundary, allow: tuple[str, ...], message: Any) -> list[Any]:
    """The items of the recorded call's kind that carry ``message`` (see :func:`override_answer`)."""
    recorded = rec.decode_output(allow)
    if not isinstance(recorded, list):
        recorded = []
    try:
        return rebuild(recorded, message, strings=rec.kind == "llm")
    except RebuildError as exc:
        raise ReplayError(
            f"the override of the stream {rec.name!r} could not be made into items of the recorded kind: {exc}"
        ) from None
    except ValueError as exc:
        raise ReplayError(
            f"the override of the stream {rec.name!r} must be the list of items it yields, or, for an LLM's stream, "
            f"the message they carry; a {type(message).__name__} was given, and {exc}"
        ) from None


CANCELLED: Final = frozenset({"asyncio.exceptions.CancelledError", "asyncio.CancelledError"})
"""How a recording names the error of a call that its caller cancelled (a timeout around it, a task group)."""


def was_cancelled(rec: Boundary) -> bool:
    """Whether the recorded call ended cancelled by its caller rather than raising an error of its own."""
    if not rec.failed or rec.raw_error is None or "CancelledError" not in rec.raw_error.text:
        return False
    try:
        envelope = orjson.loads(rec.raw_error.text)
    except orjson.JSONDecodeError:
        return False
    return isinstance(envelope, dict) and envelope.get("type") in CANCELLED


def stub_body(
    shape: Shape,
    rec: Boundary,
    allow: tuple[str, ...],
    stream_adapter: Any = None,
    answer: Answer | None = None,
    overridden: bool = False,
    cancelled: Callable[..., Any] | None = None,
) -> Callable[..., Any]:
    """A callable that returns the recorded output (rebuilt), re-raises the recorded error or re-yields the stream.

    Sync or async, generator or async generator, as ``shape`` says; the answer (``answer``, by default the
    recording's) is computed when the stub runs. A method whose recorded call returned a stream object answers
    with the object its ``stream_adapter`` builds from the recorded items (and error). An async generator whose
    consumer cancelled it awaits ``cancelled`` after the recorded items, to be cancelled again.

    An override that is an exception is raised where the real call raises a failed request: a generator's at its
    first item; a stream object's at the call (the SDKs send the request there), or, when the stand-in is a manager
    (``messages.stream(...)``), on entering its block.
    """
    get = answer if answer is not None else recorded_answer(rec, allow)
    if rec.stream and shape in ("sync", "async"):  # a function that returned a stream object
        return _stream_stand_in(shape, rec, get, stream_adapter or _GENERIC, overridden)

    def result() -> Any:
        value, error = get()
        if error is not None:
            raise error
        return value

    def items() -> tuple[list[Any], BaseException | None]:
        value, error = get()
        if value is None and error is not None:  # an override that is an exception: raised before any item
            return [], error
        return stream_items(rec, value, overridden), error

    if shape == "async":

        async def async_body(*args: Any, **kwargs: Any) -> Any:
            value = result()
            if overridden and inspect.isawaitable(value):  # an async function given as the override
                value = await value
            return value

        return async_body
    if shape == "gen":

        def gen_body(*args: Any, **kwargs: Any) -> Iterator[Any]:
            recorded, error = items()
            yield from recorded
            if error is not None:
                raise error
            if not overridden:
                _past_the_recording(rec, len(recorded))

        return gen_body
    if shape == "agen":

        async def agen_body(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            recorded, error = items()
            for item in recorded:
                yield item
            if cancelled is not None:
                await cancelled()
            if error is not None:
                raise error
            if not overridden:
                _past_the_recording(rec, len(recorded))

        return agen_body

    def body(*args: Any, **kwargs: Any) -> Any:
        return result()

    return body


def _stream_stand_in(shape: Shape, rec: Boundary, get: Answer, adapter: Any, overridden: bool) -> Callable[..., Any]:
    def build(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        value, error = get()
        at_call = overridden and value is None and error is not None  # an override that is an exception
        items = [] if at_call else stream_items(rec, value, overridden)
        state = rec.stream_state if rec.stream_state in ("complete", "abandoned", "error") else None
        if overridden:  # the override is the whole stream
            state = "error" if error is not None else "complete"
        replayed = StreamReplay(items, error, state, shape == "async", args, dict(kwargs))  # type: ignore[arg-type]
        stand_in = adapter.stand_in(replayed)
        if at_call and error is not None and _read_directly(stand_in):
            raise error  # the SDK sends the request at the call: a connection error or timeout is raised there
        return stand_in  # a manager (messages.stream(...)) sends it on entering its block: it raises there

    if shape == "async":

        async def async_body(*args: Any, **kwargs: Any) -> Any:
            return build(args, kwargs)

        return async_body

    def body(*args: Any, **kwargs: Any) -> Any:
        return build(args, kwargs)

    return body


_GENERIC = StreamAdapter(is_stream=lambda value: False)
"""The stand-in of a stream object a boundary returned with no adapter of its own: a ``ReplayedStream``."""


def _read_directly(stand_in: Any) -> bool:
    """Whether a stream's stand-in is the stream itself (iterated at once), not a manager whose ``with`` block
    sends the request."""
    cls = type(stand_in)
    return hasattr(cls, "__iter__") or hasattr(cls, "__aiter__") or hasattr(cls, "__next__")


def _is_exception(value: Any) -> bool:
    return isinstance(value, BaseException) or (isinstance(value, type) and issubclass(value, BaseException))


def _instance(rec: Boundary, cls: type[BaseException]) -> BaseException:
    try:
        return cls()
    except Exception as exc:
        raise ReplayError(
            f"the override of {rec.name!r} is the exception class {cls.__name__}, which cannot be built "
            f"without arguments ({type(exc).__name__}: {exc}); give an instance"
        ) from None


def stream_items(rec: Boundary, value: Any, overridden: bool) -> list[Any]:
    """The items a stub of a stream re-yields: the recorded list, or an override's iterable (not a string)."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if not overridden:
        return []
    if isinstance(value, (str, bytes, bytearray, dict)) or not isinstance(value, Iterable):
        raise ReplayError(
            f"the override of the stream {rec.name!r} must be the list of items it yields, not a {type(value).__name__}"
        )
    return list(value)


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
    if isinstance(error, ReplayedError) and ends_iteration(error.type_name):
        # Raised where the code may wait for a StopIteration, it says why it came instead, and from which call.
        error.args = (
            f"{error.args[0]} (recorded by {format_key(rec.call_key)}; a stub never raises {error.type_name}, which "
            "would end the caller's iteration silently (map(), next(), a for loop): it raises this ReplayedError "
            "in its place)",
        )
    return error


def ends_iteration(type_name: str) -> bool:
    """Whether the recorded class ``type_name`` is one of :data:`~chronicle_otel.codec.ENDS_ITERATION` or a subclass,
    as far as the modules already imported say (nothing is imported to find out)."""
    if type_name in _BUILTIN_STOPS:
        return True
    cls = find_loaded_class(type_name)
    return cls is not None and issubclass(cls, ENDS_ITERATION)


_BUILTIN_STOPS: Final = frozenset(f"builtins.{cls.__name__}" for cls in ENDS_ITERATION)
