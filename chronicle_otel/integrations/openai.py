"""The official ``openai`` SDK: chat completions and responses, sync and async, plain, streamed and raw.

Usage::

    import chronicle_otel as chronicle
    from chronicle_otel.integrations import openai as chronicle_openai

    chronicle.configure()
    chronicle_openai.instrument()      # every OpenAI / AsyncOpenAI client, created before or after
    ...
    chronicle_openai.uninstrument()    # the original methods back

Each call of ``client.chat.completions.create``, ``client.chat.completions.parse``, ``client.responses.create``,
``client.responses.parse`` and ``client.beta.responses.create`` (where the SDK has them; ``client.beta.chat`` is
the same resource as ``client.chat``) becomes an ``llm`` boundary, however it is called:

* the input is the arguments the caller passed (no ``NOT_GIVEN``/``omit`` sentinels, no defaults, never
  ``extra_headers``; the API key and the client are never arguments), so a replayed call compares exactly, and a
  ``with_raw_response`` call compares equal to the plain call of the same request;
* a plain call records the typed ``ChatCompletion`` / ``ParsedChatCompletion`` / ``Response``;
* ``stream=True`` records each ``ChatCompletionChunk`` / response event as the consumer reads it, with the
  stream's end (``complete``, ``abandoned``, ``error``), and a replay hands back an ``openai.Stream`` (or
  ``openai.AsyncStream``) that yields the recorded typed chunks;
* ``with_raw_response.*`` and ``with_streaming_response.*`` record the response's status, request id and headers,
  then what its ``.parse()`` returns (the typed object, or the stream's chunks as read); a replay hands back a
  stand-in of the SDK's response class (``LegacyAPIResponse``, ``APIResponse``, ``AsyncAPIResponse``) whose
  ``.parse()``, ``.headers``, ``.status_code`` and ``.request_id`` answer from the recording (see
  :mod:`chronicle_otel.integrations._responses`);
* the span carries the GenAI attributes: provider ``openai``, request model and sampling parameters, response
  model and id, finish reasons and token usage (for streams, from the chunks; ``stream_options={"include_usage":
  True}`` makes the server send usage).
"""

from __future__ import annotations

import importlib
from typing import Any

from .._internal.errors import warn_once
from ._common import (
    Method,
    chat_chunk_attributes,
    default_stand_in,
    install,
    require,
    response_event_attributes,
    sdk_arguments,
    uninstall,
)
from ._responses import SdkResponses, http_library, response_adapter

__all__ = ["PROVIDER", "instrument", "uninstrument"]

PROVIDER = "openai"

_CHAT = "openai.resources.chat.completions"
_RESPONSES = "openai.resources.responses"
_BETA_RESPONSES = "openai.resources.beta.responses"


def _legacy_response_class() -> type | None:
    # The class with_raw_response returns: openai._legacy_response.LegacyAPIResponse, which the SDK does not export
    # (a private module, checked in openai 3.57). Gone in a later version, with_raw_response is taken to return the
    # public APIResponse (said once).
    try:
        cls = importlib.import_module("openai._legacy_response").LegacyAPIResponse
    except (ImportError, AttributeError):
        cls = None
    if not isinstance(cls, type):
        warn_once(
            "openai-legacy-response",
            "chronicle_otel: this openai version has no openai._legacy_response.LegacyAPIResponse; with_raw_response "
            "calls are recorded only when they return openai.APIResponse / openai.AsyncAPIResponse",
        )
        return None
    return cls


def _responses(sdk: Any) -> SdkResponses:
    legacy = _legacy_response_class()

    def response_class(mode: str, is_async: bool) -> type:
        if mode == "stream" or legacy is None:  # with_streaming_response
            return sdk.AsyncAPIResponse if is_async else sdk.APIResponse  # type: ignore[no-any-return]
        return legacy  # with_raw_response, sync or async client

    return SdkResponses(
        streams=(sdk.Stream, sdk.AsyncStream),
        responses=tuple(c for c in (legacy, sdk.APIResponse, sdk.AsyncAPIResponse) if c is not None),
        replay_stream=default_stand_in(sdk.Stream, sdk.AsyncStream),
        response_class=response_class,
        httpx=http_library(sdk),
    )


def _methods() -> list[Method]:
    sdk = require("openai", "openai")
    responses = _responses(sdk)
    found: list[Method] = []
    for module, owner, name, attributes in (
        (_CHAT, "Completions", "openai.chat.completions.create", chat_chunk_attributes),
        (_CHAT, "Completions", "openai.chat.completions.parse", None),
        (_RESPONSES, "Responses", "openai.responses.create", response_event_attributes),
        (_RESPONSES, "Responses", "openai.responses.parse", None),
        (_BETA_RESPONSES, "Responses", "openai.beta.responses.create", response_event_attributes),
    ):
        adapter = response_adapter(name, responses, attributes)
        method = name.rsplit(".", 1)[1]
        found.append(Method(module, f"{owner}.{method}", name, adapter))
        found.append(Method(module, f"Async{owner}.{method}", name, adapter))
    return found


def instrument() -> list[str]:
    """Record every call of the OpenAI SDK's chat completions and responses as an ``llm`` boundary.

    Patches the SDK's resource classes, so clients created before and after are covered. Calling it again is a
    no-op.

    Returns:
        The boundary names instrumented (``openai.chat.completions.create``…); ``client.beta.chat`` calls are
        recorded under the ``openai.chat.*`` names (the same resource).

    Raises:
        ConfigError: the ``openai`` package is not installed (``pip install 'chronicle-otel[openai]'``).
    """
    sdk = require("openai", "openai")
    return install(_methods(), provider=PROVIDER, arguments=sdk_arguments(sdk))


def uninstrument() -> int:
    """Put the SDK's original methods back; returns how many were instrumented."""
    return uninstall(_methods())
