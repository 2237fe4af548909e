"""The official ``anthropic`` SDK: messages, sync and async, plain, ``stream=True`` and ``messages.stream(...)``.

Usage::

    import chronicle_otel as chronicle
    from chronicle_otel.integrations import anthropic as chronicle_anthropic

    chronicle.configure()
    chronicle_anthropic.instrument()      # every Anthropic / AsyncAnthropic client
    ...
    chronicle_anthropic.uninstrument()

Each call of ``client.messages.create``, ``client.messages.parse`` and ``client.messages.stream`` becomes an
``llm`` boundary. The input is the arguments the caller passed (no ``NOT_GIVEN``/``omit``, no defaults, never
``extra_headers``). A plain call records the typed ``Message``. A stream records each raw event
(``message_start``, ``content_block_delta``…) as it is read — for ``messages.stream(...)``, the events under the
SDK's ``MessageStream``, whichever of its helpers reads them (``text_stream``, ``get_final_message()``,
``until_done()``, iteration) — and a replay rebuilds the same objects from them: an ``anthropic.Stream`` for
``stream=True``, and for ``messages.stream(...)`` the SDK's own ``MessageStreamManager`` over the recorded events,
so every helper behaves as it did. The span carries the GenAI attributes (provider ``anthropic``, request model,
response id and model, stop reason, input and output tokens).
"""

from __future__ import annotations

import inspect
from types import TracebackType
from typing import Any

from .._internal.errors import warn_once
from ..adapters import RecordingProxy, StreamAdapter, StreamRecorder, StreamReplay, record_stream
from ._common import (
    Method,
    default_stand_in,
    install,
    message_event_attributes,
    replayed_stream_class,
    require,
    sdk_arguments,
    uninstall,
)

__all__ = ["PROVIDER", "instrument", "uninstrument"]

PROVIDER = "anthropic"

_MESSAGES = "anthropic.resources.messages"


class _RecordingManager(RecordingProxy):
    """``messages.stream(...)``'s manager, recording the raw events its ``MessageStream`` reads."""

    def _self_record(self, message_stream: Any) -> Any:
        raw = getattr(message_stream, "_raw_stream", None)
        if raw is None:  # an SDK version whose helper keeps its events elsewhere: the span ends unrecorded
            warn_once(
                "anthropic-raw-stream",
                "chronicle_otel: this anthropic version's MessageStream has no _raw_stream; messages.stream() "
                "calls are recorded without their events",
            )
            self._self_recorder.end("abandoned")
            return message_stream
        message_stream._raw_stream = record_stream(raw, self._self_recorder)
        return message_stream

    def __enter__(self) -> Any:
        try:
            stream = self.__wrapped__.__enter__()
        except BaseException as exc:  # the request failed (429, 529…): the call failed, with no event
            self._self_recorder.end("error", exc)
            raise
        return self._self_record(stream)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Any:
        try:
            return self.__wrapped__.__exit__(exc_type, exc, tb)
        finally:
            self._self_recorder.end("abandoned")

    async def __aenter__(self) -> Any:
        try:
            stream = await self.__wrapped__.__aenter__()
        except BaseException as exc:
            self._self_recorder.end("error", exc)
            raise
        return self._self_record(stream)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Any:
        try:
            return await self.__wrapped__.__aexit__(exc_type, exc, tb)
        finally:
            self._self_recorder.end("abandoned")


def _methods() -> list[Method]:
    sdk = require("anthropic", "anthropic")
    from anthropic.lib.streaming import AsyncMessageStreamManager, MessageStreamManager

    streams = (sdk.Stream, sdk.AsyncStream)
    managers = (MessageStreamManager, AsyncMessageStreamManager)

    def is_stream(value: Any) -> bool:
        return isinstance(value, streams)

    def is_manager(value: Any) -> bool:
        return isinstance(value, managers)

    def record_manager(manager: Any, recorder: StreamRecorder) -> Any:
        return _RecordingManager(manager, recorder)

    def manager_stand_in(is_async: bool) -> Any:
        def stand_in(replayed: StreamReplay) -> Any:
            output_format = replayed.kwargs.get("output_format", sdk.NOT_GIVEN)
            if output_format is None or isinstance(output_format, sdk.Omit):
                output_format = sdk.NOT_GIVEN
            cls = replayed_stream_class(sdk.AsyncStream if is_async else sdk.Stream, is_async)
            events = cls(replayed.items, replayed.error, replayed.state)
            failed_request = replayed.error if replayed.error is not None and not replayed.items else None

            def sync_request() -> Any:
                if failed_request is not None:  # the request itself failed: entering the block raises, as it did
                    raise failed_request
                return events

            if is_async:

                async def request() -> Any:
                    return sync_request()

                return _manager(AsyncMessageStreamManager, request(), output_format)
            return _manager(MessageStreamManager, sync_request, output_format)

        return stand_in

    create = StreamAdapter(
        is_stream=is_stream,
        replay=default_stand_in(sdk.Stream, sdk.AsyncStream),
        attributes=message_event_attributes,
    )
    sync_stream = StreamAdapter(
        is_stream=is_manager, record=record_manager, replay=manager_stand_in(False), attributes=message_event_attributes
    )
    async_stream = StreamAdapter(
        is_stream=is_manager, record=record_manager, replay=manager_stand_in(True), attributes=message_event_attributes
    )
    return [
        Method(_MESSAGES, "Messages.create", "anthropic.messages.create", create),
        Method(_MESSAGES, "AsyncMessages.create", "anthropic.messages.create", create),
        Method(_MESSAGES, "Messages.parse", "anthropic.messages.parse"),
        Method(_MESSAGES, "AsyncMessages.parse", "anthropic.messages.parse"),
        Method(_MESSAGES, "Messages.stream", "anthropic.messages.stream", sync_stream),
        Method(_MESSAGES, "AsyncMessages.stream", "anthropic.messages.stream", async_stream),
    ]


def _manager(cls: type, request: Any, output_format: Any) -> Any:
    """The SDK's stream manager over recorded events (``output_format`` only where the SDK takes it)."""
    try:
        takes_format = "output_format" in inspect.signature(cls).parameters
    except (TypeError, ValueError):
        takes_format = False
    return cls(request, output_format=output_format) if takes_format else cls(request)


def instrument() -> list[str]:
    """Record every call of the Anthropic SDK's messages API as an ``llm`` boundary.

    Patches the SDK's resource classes, so clients created before and after are covered. Calling it again is a
    no-op.

    Returns:
        The boundary names instrumented (``anthropic.messages.create``…).

    Raises:
        ConfigError: the ``anthropic`` package is not installed (``pip install 'chronicle-otel[anthropic]'``).
    """
    sdk = require("anthropic", "anthropic")
    return install(_methods(), provider=PROVIDER, arguments=sdk_arguments(sdk))


def uninstrument() -> int:
    """Put the SDK's original methods back; returns how many were instrumented."""
    return uninstall(_methods())
