"""The official ``openai`` SDK: chat completions and responses, sync and async, plain and streamed.

Usage::

    import chronicle_otel as chronicle
    from chronicle_otel.integrations import openai as chronicle_openai

    chronicle.configure()
    chronicle_openai.instrument()      # every OpenAI / AsyncOpenAI client, created before or after
    ...
    chronicle_openai.uninstrument()    # the original methods back

Each call of ``client.chat.completions.create``, ``client.chat.completions.parse`` and
``client.responses.create`` (and ``responses.parse`` where the SDK has it) becomes an ``llm`` boundary:

* the input is the arguments the caller passed (no ``NOT_GIVEN``/``omit`` sentinels, no defaults, never
  ``extra_headers``; the API key and the client are never arguments), so a replayed call compares exactly;
* a plain call records the typed ``ChatCompletion`` / ``ParsedChatCompletion`` / ``Response``;
* ``stream=True`` records each ``ChatCompletionChunk`` / response event as the consumer reads it, with the
  stream's end (``complete``, ``abandoned``, ``error``), and a replay hands back an ``openai.Stream`` (or
  ``openai.AsyncStream``) that yields the recorded typed chunks;
* the span carries the GenAI attributes: provider ``openai``, request model and sampling parameters, response
  model and id, finish reasons and token usage (for streams, from the chunks; ``stream_options={"include_usage":
  True}`` makes the server send usage).
"""

from __future__ import annotations

from typing import Any

from ..adapters import StreamAdapter
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

__all__ = ["PROVIDER", "instrument", "uninstrument"]

PROVIDER = "openai"

_CHAT = "openai.resources.chat.completions"
_RESPONSES = "openai.resources.responses"


def _methods() -> list[Method]:
    sdk = require("openai", "openai")
    streams = (sdk.Stream, sdk.AsyncStream)

    def is_stream(value: Any) -> bool:
        return isinstance(value, streams)

    stand_in = default_stand_in(sdk.Stream, sdk.AsyncStream)
    chat = StreamAdapter(is_stream=is_stream, replay=stand_in, attributes=chat_chunk_attributes)
    responses = StreamAdapter(is_stream=is_stream, replay=stand_in, attributes=response_event_attributes)
    return [
        Method(_CHAT, "Completions.create", "openai.chat.completions.create", chat),
        Method(_CHAT, "AsyncCompletions.create", "openai.chat.completions.create", chat),
        Method(_CHAT, "Completions.parse", "openai.chat.completions.parse"),
        Method(_CHAT, "AsyncCompletions.parse", "openai.chat.completions.parse"),
        Method(_RESPONSES, "Responses.create", "openai.responses.create", responses),
        Method(_RESPONSES, "AsyncResponses.create", "openai.responses.create", responses),
        Method(_RESPONSES, "Responses.parse", "openai.responses.parse"),
        Method(_RESPONSES, "AsyncResponses.parse", "openai.responses.parse"),
    ]


def instrument() -> list[str]:
    """Record every call of the OpenAI SDK's chat completions and responses as an ``llm`` boundary.

    Patches the SDK's resource classes, so clients created before and after are covered. Calling it again is a
    no-op.

    Returns:
        The boundary names instrumented (``openai.chat.completions.create``…).

    Raises:
        ConfigError: the ``openai`` package is not installed (``pip install 'chronicle-otel[openai]'``).
    """
    sdk = require("openai", "openai")
    return install(_methods(), provider=PROVIDER, arguments=sdk_arguments(sdk))


def uninstrument() -> int:
    """Put the SDK's original methods back; returns how many were instrumented."""
    return uninstall(_methods())
