"""The official ``anthropic`` SDK: ``messages`` and ``beta.messages``, sync and async, plain, streamed and raw.

Usage::

    import chronicle_otel as chronicle
    from chronicle_otel.integrations import anthropic as chronicle_anthropic

    chronicle.configure()
    chronicle_anthropic.instrument()      # every Anthropic / AsyncAnthropic client
    ...
    chronicle_anthropic.uninstrument()

Each call of ``client.messages.create``, ``client.messages.parse`` and ``client.messages.stream`` becomes an
``llm`` boundary (``anthropic.messages.*``), and so does each of ``client.beta.messages`` (``anthropic.beta.
messages.*``; langchain-anthropic sends a request with ``betas`` there). The input is the arguments the caller
passed (no ``NOT_GIVEN``/``omit``, no defaults, never ``extra_headers``). A plain call records the typed
``Message``. A stream records each raw event (``message_start``, ``content_block_delta``…) as it is read — for
``messages.stream(...)``, the events under the SDK's ``MessageStream``, whichever of its helpers reads them
(``text_stream``, ``get_final_message()``, ``until_done()``, iteration) — and a replay rebuilds the same objects
from them: an ``anthropic.Stream`` for ``stream=True``, and for ``messages.stream(...)`` the SDK's own
``MessageStreamManager`` over the recorded events, so every helper behaves as it did. ``with_raw_response.*`` and
``with_streaming_response.*`` record the response's status, request id and headers, then what its ``.parse()``
returns (the ``Message``, or the stream's events as read); a replay hands back a stand-in ``anthropic.APIResponse``
(``AsyncAPIResponse``) answering ``.parse()``, ``.headers``, ``.status_code`` and ``.request_id`` from the
recording (see :mod:`chronicle_otel.integrations._responses`). The span carries the GenAI attributes (provider
``anthropic``, request model, response id and model, stop reason, input and output tokens).
"""

from __future__ import annotations

import inspect
from types import TracebackType
from typing import Any

from .._internal.errors import warn_once
from ..record.adapters import RecordingProxy, StreamAdapter, StreamRecorder, StreamReplay, record_stream
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
from ._responses import SdkResponses, http_library, response_adapter

__all__ = ["PROVIDER", "instrument", "uninstrument"]

PROVIDER = "anthropic"

_MESSAGES = "anthropic.resources.messages"
_BETA_MESSAGES = "anthropic.resources.beta.messages"


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


def _responses(sdk: Any) -> SdkResponses:
    def response_class(mode: str, is_async: bool) -> type:
        return sdk.AsyncAPIResponse if is_async else sdk.APIResponse  # type: ignore[no-any-return]

    return SdkResponses(
        streams=(sdk.Stream, sdk.AsyncStream),
        responses=(sdk.APIResponse, sdk.AsyncAPIResponse),
        replay_stream=default_stand_in(sdk.Stream, sdk.AsyncStream),
        response_class=response_class,
        httpx=http_library(sdk),
    )


def _stream_adapters(sdk: Any, sync_manager: type, async_manager: type) -> tuple[StreamAdapter, StreamAdapter]:
    # messages.stream(...): its manager recorded, and in a replay the SDK's own manager over the recorded events.
    managers = (sync_manager, async_manager)
    httpx = http_library(sdk)

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
            events.response.request = _replayed_request(httpx, replayed.kwargs)
            failed_request = replayed.error if replayed.error is not None and not replayed.items else None

            def sync_request() -> Any:
                if failed_request is not None:  # the request itself failed: entering the block raises, as it did
                    raise failed_request
                return events

            if is_async:

                async def request() -> Any:
                    return sync_request()

                return _manager(async_manager, request(), output_format)
            return _manager(sync_manager, sync_request, output_format)

        return stand_in

    return (
        StreamAdapter(
            is_stream=is_manager,
            record=record_manager,
            replay=manager_stand_in(False),
            attributes=message_event_attributes,
        ),
        StreamAdapter(
            is_stream=is_manager,
            record=record_manager,
            replay=manager_stand_in(True),
            attributes=message_event_attributes,
        ),
    )


def _methods() -> list[Method]:
    sdk = require("anthropic", "anthropic")
    from anthropic.lib import streaming

    responses = _responses(sdk)
    found: list[Method] = []
    for module, prefix, managers in (
        (_MESSAGES, "anthropic.messages", ("MessageStreamManager", "AsyncMessageStreamManager")),
        (_BETA_MESSAGES, "anthropic.beta.messages", ("BetaMessageStreamManager", "BetaAsyncMessageStreamManager")),
    ):
        create = response_adapter(f"{prefix}.create", responses, message_event_attributes)
        parse = response_adapter(f"{prefix}.parse", responses)
        found += [
            Method(module, "Messages.create", f"{prefix}.create", create),
            Method(module, "AsyncMessages.create", f"{prefix}.create", create),
            Method(module, "Messages.parse", f"{prefix}.parse", parse),
            Method(module, "AsyncMessages.parse", f"{prefix}.parse", parse),
        ]
        sync_manager, async_manager = (getattr(streaming, name, None) for name in managers)
        if isinstance(sync_manager, type) and isinstance(async_manager, type):
            sync_stream, async_stream = _stream_adapters(sdk, sync_manager, async_manager)
            found += [
                Method(module, "Messages.stream", f"{prefix}.stream", sync_stream),
                Method(module, "AsyncMessages.stream", f"{prefix}.stream", async_stream),
            ]
    return found


def _replayed_request(httpx: Any, kwargs: dict[str, Any]) -> Any:
    # The request a replayed messages.stream(...) stands on: the beta helper reads its anthropic-beta header (the
    # SDK sets it from betas) to decide how to parse a tool's streamed arguments.
    headers = {}
    extra = kwargs.get("extra_headers")
    if isinstance(extra, dict):
        headers.update({k: v for k, v in extra.items() if isinstance(k, str) and isinstance(v, str)})
    betas = kwargs.get("betas")
    if isinstance(betas, (list, tuple)) and betas:
        headers.setdefault("anthropic-beta", ",".join(str(beta) for beta in betas))
    try:
        return httpx.Request("POST", "http://replay.invalid/v1/messages", headers=headers)
    except Exception:  # a header value the HTTP library refuses
        return httpx.Request("POST", "http://replay.invalid/v1/messages")


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
        The boundary names instrumented (``anthropic.messages.create``, ``anthropic.beta.messages.create``…).

    Raises:
        ConfigError: the ``anthropic`` package is not installed (``pip install 'chronicle-otel[anthropic]'``).
    """
    sdk = require("anthropic", "anthropic")
    return install(_methods(), provider=PROVIDER, arguments=sdk_arguments(sdk))


def uninstrument() -> int:
    """Put the SDK's original methods back; returns how many were instrumented."""
    return uninstall(_methods())
