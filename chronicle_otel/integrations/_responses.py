"""The SDKs' response wrappers: ``with_raw_response`` and ``with_streaming_response``, recorded typed and replayed.

``client.chat.completions.with_raw_response.create(...)`` (which langchain-openai uses for every call),
``client.messages.with_raw_response.create(...)`` (langchain-anthropic) and ``with_streaming_response.*`` (the
OpenAI Agents SDK) call the resource's own instrumented method with one extra header, and get back the SDK's
response object (``LegacyAPIResponse``, ``APIResponse``, ``AsyncAPIResponse``) instead of the parsed value. The
adapter built here (:func:`response_adapter`) records such a call as what the caller reads from it:

* when the method returns, a :class:`ResponseHead`: the status code, the request id and the headers
  (``x-request-id``/``request-id``, ``openai-*``, ``anthropic-*``, ``x-ratelimit-*``, ``retry-after``, the content
  type and the others, but never one that may carry a credential or a session: ``set-cookie``,
  ``www-authenticate``, any name with ``key``, ``token``, ``auth``…; the values pass the configured redaction);
* then the body as the SDK's ``.parse()`` returns it: the typed ``ChatCompletion`` / ``Message``…, or for
  ``stream=True`` the stream's items as they are read. A body that is already read (``with_raw_response`` without
  ``stream=True``) is parsed at once (the SDK caches the result, so the caller's own ``.parse()`` gets the same
  object); otherwise the call's span stays open until the caller parses it, reads the stream to its end, or
  closes the response (the ``with`` block of ``with_streaming_response``).

The call is stored like a stream object's: its items are the head, then the body. In a replay the stub hands
back a stand-in that is an instance of the SDK's response class (built without the SDK's ``__init__``):
``.parse()`` returns the recorded object (or an SDK-typed replay stream of the recorded items), ``.headers``
(case-insensitive), ``.status_code``, ``.request_id``, ``.http_response``/``.http_request``, and ``.text``/
``.json()``/``.read()`` from the recorded object's JSON. The replayed call's own header decides the shape: a
recording made through ``with_raw_response`` answers a plain call with the parsed object, and a plain
``stream=True`` recording answers a ``with_raw_response`` call with a response around the replayed stream.

A response whose body the caller never parses (read with ``iter_bytes()``/``iter_lines()``, or dropped) is
recorded with its head only, and said once: a replay's ``.parse()`` then raises
:class:`~chronicle_otel.ReplayDivergence`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import importlib
import inspect
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import orjson
import wrapt

from .._internal.errors import handle_internal_errors, warn_once
from ..codec import UnresolvedObject, register_type
from ..errors import ReplayDivergence
from ..record.adapters import StreamAdapter, StreamEnd, StreamRecorder, StreamReplay, record_stream
from ..record.extension import response_attributes

__all__ = ["HEAD_TYPE_NAME", "RESPONSE_TYPE_NAME", "ResponseHead", "SdkResponses", "response_adapter"]

HEAD_TYPE_NAME = "chronicle_otel.integrations.ResponseHead"
"""The name a :class:`ResponseHead` is recorded under (a registered codec type)."""

RESPONSE_TYPE_NAME = "chronicle_otel.integrations.SdkResponse"
"""The name a response object is recorded under when a boundary of the user's returns it (``return
client.chat.completions.with_raw_response.create(...)``): its head and what was parsed of it by then."""

if TYPE_CHECKING:
    _Proxy = wrapt.ObjectProxy[Any]
else:
    _Proxy = wrapt.ObjectProxy  # not subscriptable at run time before wrapt 2

RAW_RESPONSE_HEADER = "x-stainless-raw-response"
"""The header the SDKs' ``with_raw_response``/``with_streaming_response`` wrappers add to the call's
``extra_headers`` (``"true"``/``"raw"``/``"stream"``); the SDKs' own constant lives in a private module
(``openai._constants``, ``anthropic._constants``: ``X-Stainless-Raw-Response``, checked in openai 3.57 and
anthropic 2.15), so the wire name is spelled here. Without it a replayed call is taken for a plain one."""

_KEPT_HEADERS = frozenset({"x-request-id", "request-id", "retry-after", "retry-after-ms", "content-type"})
_KEPT_PREFIXES = ("openai-", "anthropic-", "x-ratelimit-")
_NEVER_KEPT = ("cookie", "auth", "key", "token", "secret", "password", "credential", "session")
_guard = handle_internal_errors("recording the response object of an SDK call")

_BODY_HEADERS = frozenset({"content-length", "content-encoding", "transfer-encoding"})
"""Headers that describe the bytes on the wire: left out of a replayed HTTP response, whose body is rebuilt."""


class ResponseHead:
    """What a response wrapper says before its body: status, request id, the headers code reads.

    Attributes:
        status_code: the HTTP status.
        headers: the recorded headers, lower-case names (joined with ``", "`` when repeated).
        request_id: the SDK's ``response.request_id``.
        http_version: ``HTTP/1.1``…
        method: the request's method.
        url: the request's URL without query, fragment or user info.
        streamed: the body is a server-sent event stream (``stream=True``).
        sdk_class: the SDK's response class that was returned (``openai._legacy_response.LegacyAPIResponse``).
    """

    __slots__ = ("headers", "http_version", "method", "request_id", "sdk_class", "status_code", "streamed", "url")

    def __init__(
        self,
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
        request_id: str | None = None,
        http_version: str = "HTTP/1.1",
        method: str = "POST",
        url: str = "",
        streamed: bool = False,
        sdk_class: str = "",
    ) -> None:
        self.status_code = status_code
        self.headers: dict[str, str] = dict(headers or {})
        self.request_id = request_id
        self.http_version = http_version
        self.method = method
        self.url = url
        self.streamed = streamed
        self.sdk_class = sdk_class

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ResponseHead) and _head_data(self) == _head_data(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ResponseHead(status_code={self.status_code}, request_id={self.request_id!r}, streamed={self.streamed})"


def _head_data(head: ResponseHead) -> dict[str, Any]:
    return {name: getattr(head, name) for name in ResponseHead.__slots__}


def _head_from_data(data: Any) -> ResponseHead:
    """A head from recorded data (untrusted): fields of the wrong type are left at their defaults."""
    if not isinstance(data, dict):
        return ResponseHead()

    def text(name: str, default: str) -> str:
        value = data.get(name)
        return value if isinstance(value, str) else default

    status = data.get("status_code")
    headers = data.get("headers")
    request_id = data.get("request_id")
    return ResponseHead(
        status_code=status if isinstance(status, int) and not isinstance(status, bool) else 200,
        headers={k: v for k, v in headers.items() if isinstance(k, str) and isinstance(v, str)}
        if isinstance(headers, dict)
        else {},
        request_id=request_id if isinstance(request_id, str) else None,
        http_version=text("http_version", "HTTP/1.1"),
        method=text("method", "POST"),
        url=text("url", ""),
        streamed=data.get("streamed") is True,
        sdk_class=text("sdk_class", ""),
    )


register_type(ResponseHead, encode=_head_data, decode=_head_from_data, name=HEAD_TYPE_NAME)


def _as_head(item: Any) -> ResponseHead | None:
    if isinstance(item, ResponseHead):
        return item
    if isinstance(item, UnresolvedObject) and item.tag == "custom" and item.class_name == HEAD_TYPE_NAME:
        return _head_from_data(item.data)
    return None


def _split(items: list[Any]) -> tuple[ResponseHead | None, list[Any]]:
    """The head of a recorded response (None for a plain stream's items) and the items after it."""
    head = _as_head(items[0]) if items else None
    return head, (items[1:] if head is not None else items)


# ------------------------------------------------------------------------------------------- the SDK's classes


@dataclasses.dataclass(frozen=True)
class SdkResponses:
    """The classes of one SDK that :func:`response_adapter` recognises and stands in for.

    Attributes:
        streams: the SDK's stream classes (``Stream``, ``AsyncStream``).
        responses: its response wrapper classes (``LegacyAPIResponse``, ``APIResponse``, ``AsyncAPIResponse``).
        replay_stream: builds the SDK-typed replay stream of recorded items.
        response_class: the response class a replayed call gets, from its raw-response header value and whether
            the client is async; None for a plain call.
        httpx: the HTTP library the SDK's responses are made of (``httpx2``, or ``httpx`` for older SDKs).
    """

    streams: tuple[type, ...]
    responses: tuple[type, ...]
    replay_stream: Callable[[StreamReplay], Any]
    response_class: Callable[[str, bool], type | None]
    httpx: Any


def http_library(sdk: Any) -> Any:
    """The HTTP package the SDK is built on: the package of the client class its public ``DefaultHttpxClient``
    extends (``httpx2`` for openai 3.x and anthropic 2.x, ``httpx`` before)."""
    client = getattr(sdk, "DefaultHttpxClient", None)
    sdk_name = getattr(sdk, "__name__", "")
    for base in getattr(client, "__mro__", ())[1:]:
        package = base.__module__.split(".")[0]
        if package not in (sdk_name, "builtins"):
            try:
                return importlib.import_module(package)
            except ImportError:  # pragma: no cover - the SDK imported it
                break
    return importlib.import_module("httpx")


def raw_mode(kwargs: Mapping[str, Any]) -> str | None:
    """The value of the raw-response header a call was made with (``"true"``, ``"raw"``, ``"stream"``), or None
    for a plain call."""
    headers = kwargs.get("extra_headers")
    if not isinstance(headers, Mapping):
        return None
    for name, value in headers.items():
        if isinstance(name, str) and name.lower() == RAW_RESPONSE_HEADER and isinstance(value, str):
            return value.lower()
    return None


# ---------------------------------------------------------------------------------------------------- recording


def _kept(name: str) -> bool:
    """Whether a response header is recorded: the ones code reads always, then every other one except those that
    may carry a credential or a session (``set-cookie``, ``www-authenticate``, any ``*key*``/``*token*`` name)."""
    if name in _KEPT_HEADERS or name.startswith(_KEPT_PREFIXES):
        return True
    return not any(word in name for word in _NEVER_KEPT)


def _safe_url(url: Any) -> str:
    try:
        parts = urlsplit(str(url))
    except ValueError:
        return ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def response_head(response: Any, known: tuple[type, ...] = ()) -> ResponseHead:
    """The head of an SDK response, read from its public properties; ``sdk_class`` is the first of ``known`` it is
    an instance of (a replay's stand-in names the SDK class it stands in for), else its own class."""
    headers: dict[str, str] = {}
    content_type = ""
    try:
        for name, value in response.headers.items():
            lower = str(name).lower()
            if lower == "content-type":
                content_type = str(value)
            if _kept(lower):
                headers[lower] = f"{headers[lower]}, {value}" if lower in headers else str(value)
    except Exception:
        pass
    head = ResponseHead(
        headers=headers,
        streamed=content_type.split(";")[0].strip().lower() == "text/event-stream",
        sdk_class=_class_name(next((c for c in type(response).__mro__ if c in known), type(response))),
    )
    for field, read in (
        ("status_code", lambda: int(response.status_code)),
        ("request_id", lambda: response.request_id),
        ("http_version", lambda: str(response.http_version)),
        ("method", lambda: str(response.method)),
        ("url", lambda: _safe_url(response.url)),
    ):
        try:
            value = read()
        except Exception:
            continue
        if field != "request_id" or isinstance(value, str):
            setattr(head, field, value)
    return head


def _class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class _RecordingResponse(_Proxy):
    """A transparent proxy of an SDK response that records the body the caller parses from it.

    Not a :class:`~chronicle_otel.adapters.RecordingProxy`: a boundary of the user's that returns it records it as a
    value (its head and body so far, :data:`RESPONSE_TYPE_NAME`), not as a stream it would wait for.
    """

    def __init__(self, wrapped: Any, recorder: StreamRecorder, name: str, sdk: SdkResponses, streamed: bool) -> None:
        super().__init__(wrapped)
        self._self_recorder = recorder
        self._self_name = name
        self._self_sdk = sdk
        self._self_streamed = streamed
        self._self_stream: tuple[Any, Any] | None = None  # (the SDK's stream, its recording proxy)

    def __repr__(self) -> str:
        return repr(self.__wrapped__)

    def _self_took(self, value: Any) -> Any:
        """What ``parse()`` returns to the caller: a stream wrapped to record its items, or ``value`` recorded."""
        try:
            return self._self_record_body(value)
        except Exception as exc:  # the caller gets the SDK's own value, unrecorded
            _guard.absorb(exc)
            return value

    def _self_record_body(self, value: Any) -> Any:
        recorder = self._self_recorder
        parsed = self._self_stream
        if parsed is not None and parsed[0] is value:
            return parsed[1]  # the SDK's cached stream: the same recording proxy again
        if isinstance(value, self._self_sdk.streams):
            if recorder.done or parsed is not None:
                return value
            proxy = record_stream(value, recorder)
            self._self_stream = (value, proxy)
            return proxy
        if recorder.done:
            return value
        if isinstance(value, self._self_sdk.httpx.Response):  # parse(to=httpx.Response): no typed body
            return value
        recorder.item(value)
        recorder.end("complete")
        return value

    def _self_failed(self, exc: BaseException) -> None:
        self._self_recorder.end("error", exc)

    def _self_abandon(self, closed: bool) -> None:
        """The response is closed (``closed``) or dropped: the call ends here, abandoned if it had not ended. A stream
        parsed from a response that is only dropped is still read: it ends on its own."""
        recorder = self._self_recorder
        if recorder.done or (self._self_stream is not None and not closed):
            return
        if len(recorder.items) <= 1:
            warn_once(
                f"sdk-response-unparsed:{self._self_name}",
                "chronicle_otel: a response of %s (with_raw_response / with_streaming_response) was closed or "
                "dropped before its .parse(): the call is recorded with its status and headers only, and a replay's "
                ".parse() raises ReplayDivergence. Read it with .parse() (not iter_bytes()/iter_lines() or the "
                "http_response) to record the typed body",
                self._self_name,
            )
        recorder.end("abandoned")

    def _self_read_body(self) -> bool:
        """Whether the body read by ``read()``/``text()``/``json()`` can be parsed now, to be recorded typed."""
        return not self._self_streamed and not self._self_recorder.done

    def __del__(self) -> None:
        try:
            if getattr(self, "_self_recorder", None) is not None:
                self._self_abandon(closed=False)
        except Exception:  # at interpreter exit, or a half-built proxy
            pass


class _RecordingLegacyResponse(_RecordingResponse):
    """openai's ``LegacyAPIResponse`` (``with_raw_response``): a sync ``parse()``, the body read with the headers
    unless ``stream=True``."""

    def parse(self, **kwargs: Any) -> Any:
        """The SDK's ``parse()``; the value (or the stream's items) recorded."""
        try:
            value = self.__wrapped__.parse(**kwargs)
        except BaseException as exc:
            self._self_failed(exc)
            raise
        return self._self_took(value)


class _RecordingSyncResponse(_RecordingLegacyResponse):
    """A sync ``APIResponse``: ``parse()``, and ``read()``/``text()``/``json()``/``close()``."""

    def _self_parse_read_body(self) -> None:
        if self._self_read_body():
            with contextlib.suppress(Exception):  # the caller never asked for it: what it does with the body is its own
                self._self_took(self.__wrapped__.parse())

    def read(self) -> Any:
        """The SDK's ``read()``; the body is parsed to be recorded typed."""
        data = self.__wrapped__.read()
        self._self_parse_read_body()
        return data

    def text(self) -> Any:
        """The SDK's ``text()``; the body is parsed to be recorded typed."""
        data = self.__wrapped__.text()
        self._self_parse_read_body()
        return data

    def json(self) -> Any:
        """The SDK's ``json()``; the body is parsed to be recorded typed."""
        data = self.__wrapped__.json()
        self._self_parse_read_body()
        return data

    def close(self) -> Any:
        """The SDK's ``close()`` (the end of a ``with_streaming_response`` block): the call ends unless a parsed
        stream is still being read."""
        try:
            return self.__wrapped__.close()
        finally:
            self._self_abandon(closed=True)


class _RecordingAsyncResponse(_RecordingResponse):
    """An ``AsyncAPIResponse``: ``await parse()``, ``read()``, ``text()``, ``json()``, ``close()``."""

    async def parse(self, **kwargs: Any) -> Any:
        """The SDK's ``parse()``; the value (or the stream's items) recorded."""
        try:
            value = await self.__wrapped__.parse(**kwargs)
        except BaseException as exc:
            self._self_failed(exc)
            raise
        return self._self_took(value)

    async def _self_parse_read_body(self) -> None:
        if self._self_read_body():
            with contextlib.suppress(Exception):
                self._self_took(await self.__wrapped__.parse())

    async def read(self) -> Any:
        """The SDK's ``read()``; the body is parsed to be recorded typed."""
        data = await self.__wrapped__.read()
        await self._self_parse_read_body()
        return data

    async def text(self) -> Any:
        """The SDK's ``text()``; the body is parsed to be recorded typed."""
        data = await self.__wrapped__.text()
        await self._self_parse_read_body()
        return data

    async def json(self) -> Any:
        """The SDK's ``json()``; the body is parsed to be recorded typed."""
        data = await self.__wrapped__.json()
        await self._self_parse_read_body()
        return data

    async def close(self) -> Any:
        """The SDK's ``close()`` (the end of an ``async with`` block of ``with_streaming_response``)."""
        try:
            return await self.__wrapped__.close()
        finally:
            self._self_abandon(closed=True)


def _record_response(response: Any, recorder: StreamRecorder, name: str, sdk: SdkResponses) -> Any:
    head = response_head(response, sdk.responses)
    recorder.item(head)
    cls = type(response)
    if inspect.iscoroutinefunction(getattr(cls, "parse", None)):
        return _RecordingAsyncResponse(response, recorder, name, sdk, head.streamed)
    proxy_cls = _RecordingSyncResponse if callable(getattr(cls, "close", None)) else _RecordingLegacyResponse
    proxy = proxy_cls(response, recorder, name, sdk, head.streamed)
    if not head.streamed and _is_read(response):  # with_raw_response: the body came with the headers
        try:
            value = response.parse()
        except Exception as exc:  # the caller's own parse() raises it again (nothing cached)
            recorder.end("error", exc)
        else:
            proxy._self_took(value)
    return proxy


def _is_read(response: Any) -> bool:
    try:
        return bool(response.is_closed)
    except Exception:
        return False


def _envelope(proxy: _RecordingResponse) -> dict[str, Any]:
    """A response returned by a boundary of the user's: what was recorded of it so far (the head, the body if it
    was parsed, the stream's items read by then)."""
    items = list(proxy._self_recorder.items)
    parsed_stream = proxy._self_stream
    if len(items) <= 1 or parsed_stream is not None or proxy._self_streamed:
        warn_once(
            f"sdk-response-returned:{proxy._self_name}",
            "chronicle_otel: a boundary returned a response of %s before its body was parsed or its stream read: "
            "the boundary records what was read by then, and a replay's .parse() raises ReplayDivergence past it. "
            "Return the parsed value (or parse it before returning) to record the whole",
            proxy._self_name,
        )
    if parsed_stream is not None:
        stream_async = isinstance(parsed_stream[0], proxy._self_sdk.streams[1:])
    else:
        stream_async = inspect.iscoroutinefunction(getattr(type(proxy.__wrapped__), "parse", None))
    return {"items": items, "stream_async": stream_async}


def _from_envelope(data: Any) -> Any:
    """The replay's stand-in of a response a boundary of the user's returned (its SDK class as recorded)."""
    items = data.get("items") if isinstance(data, dict) else None
    head, rest = _split(items) if isinstance(items, list) else (None, [])
    known = _KNOWN.get(head.sdk_class) if head is not None else None
    if head is None or known is None:  # an SDK this process has not instrumented: nothing to stand in with
        return UnresolvedObject("custom", RESPONSE_TYPE_NAME, data)
    cls, sdk = known
    state: StreamEnd = "complete" if rest and not head.streamed else "abandoned"
    replay = StreamReplay(rest, None, state, data.get("stream_async") is True, (), {})
    return _stand_in(cls, _Replayed(head, replay, rest, sdk))


register_type(_RecordingResponse, encode=_envelope, decode=_from_envelope, name=RESPONSE_TYPE_NAME)

_KNOWN: dict[str, tuple[type, SdkResponses]] = {}
"""The SDK response classes of the integrations built in this process, by name: a recorded response is stood in
for only by one of these."""


# ------------------------------------------------------------------------------------------------------ replay


class _Replayed:
    """What a replayed response answers from: the recorded head and body."""

    __slots__ = ("error", "head", "header_map", "http", "items", "parsed", "replay", "sdk", "state", "stream")

    def __init__(self, head: ResponseHead, replay: StreamReplay, items: list[Any], sdk: SdkResponses) -> None:
        self.head = head
        self.replay = replay
        self.items = items
        self.sdk = sdk
        self.error = replay.error
        self.state = replay.state
        self.stream: Any = None
        self.http: Any = None
        self.header_map: Any = None
        self.parsed: dict[Any, Any] = {}

    def body(self) -> Any:
        """The recorded ``parse()`` result: the value, an SDK-typed replay stream, or the recorded error raised."""
        if self.head.streamed:
            if self.stream is None:
                self.stream = self.sdk.replay_stream(dataclasses.replace(self.replay, items=self.items))
            return self.stream
        if self.items:
            value = self.items[0]
            _set_request_id(value, self.head.request_id)
            return value
        if self.error is not None:
            raise self.error
        raise ReplayDivergence(
            "the recorded response of this call was never parsed (its body was read some other way, or not at "
            "all): there is no recorded body to return"
        )

    def parse(self, to: Any) -> Any:
        key = to if to is not None else "default"
        if key in self.parsed:
            return self.parsed[key]
        value = self.body()
        if to is not None and not self.head.streamed:
            value = self._converted(value, to)
        self.parsed[key] = value
        return value

    def _converted(self, value: Any, to: Any) -> Any:
        try:
            if isinstance(value, to):
                return value
        except TypeError:  # a generic alias
            pass
        origin = typing.get_origin(to) or to
        if to is str:
            return self.response().text
        if origin in (dict, list, object):
            return self.response().json()
        if to in (int, float):
            return to(self.response().text)
        if to is bool:
            return self.response().text.strip().lower() == "true"
        if isinstance(to, type) and issubclass(to, self.sdk.httpx.Response):
            return self.response()
        validate = getattr(to, "model_validate", None)
        if callable(validate):
            return validate(self.response().json())
        return value

    def headers(self) -> Any:
        """The recorded headers as the SDK's HTTP library's case-insensitive ``Headers``."""
        if self.header_map is None:
            self.header_map = self.sdk.httpx.Headers(_header_pairs(self.head.headers))
        return self.header_map

    def response(self) -> Any:
        """The HTTP response the stand-in stands on, built when first asked for (the body from the recording)."""
        if self.http is None:
            httpx = self.sdk.httpx
            head = self.head
            try:
                request = httpx.Request(head.method or "POST", head.url or _NOWHERE)
            except Exception:  # a recorded method or URL the HTTP library refuses
                request = httpx.Request("POST", _NOWHERE)
            self.http = httpx.Response(
                head.status_code,
                headers=_header_pairs(head.headers, skip=_BODY_HEADERS),
                content=self._content(),
                request=request,
                extensions={"http_version": head.http_version.encode("ascii", "replace")},
            )
            self.http.elapsed = datetime.timedelta(0)
        return self.http

    def _content(self) -> bytes:
        if self.head.streamed:
            parts = []
            for item in self.items:
                kind = getattr(item, "type", None)
                event = f"event: {kind}\n" if isinstance(kind, str) else ""
                parts.append(f"{event}data: {_json(item).decode()}\n\n")
            return "".join(parts).encode()
        if not self.items:
            return b""
        value = self.items[0]
        return value.encode() if isinstance(value, str) else _json(value)

    def close_stream(self) -> Any:
        stream, self.stream = self.stream, None
        return stream.close() if stream is not None else None


_NOWHERE = "http://replay.invalid/"


def _header_pairs(headers: Mapping[str, str], skip: frozenset[str] = frozenset()) -> list[tuple[bytes, bytes]]:
    """The recorded headers as bytes (any text a trace holds is a valid header value: UTF-8, one line)."""
    return [
        (name.encode("ascii", "replace"), " ".join(value.splitlines()).encode())
        for name, value in headers.items()
        if name not in skip and name.isprintable() and " " not in name
    ]


def _json(value: Any) -> bytes:
    """The JSON the API sent for a recorded object (its set fields, by alias)."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            value = dump(mode="json", by_alias=True, exclude_unset=True)
        except Exception:
            value = dump(mode="json")
    try:
        return orjson.dumps(value)
    except TypeError:
        return orjson.dumps(str(value))


def _set_request_id(value: Any, request_id: str | None) -> None:
    """The SDKs put the request id on a parsed model as ``_request_id`` (documented in their READMEs; a pydantic
    private attribute the codec does not record): given back from the head. Checked in openai 3.57 and anthropic
    2.15; a model without the attribute is left as it is."""
    if request_id is None:
        return
    try:
        if getattr(value, "_request_id", "absent") is None:
            value._request_id = request_id
    except Exception:
        pass


class _ReplayedResponseBase:
    """What every replayed response shares: the head's properties and the HTTP response built from it."""

    _chronicle_replay: _Replayed
    retries_taken = 0

    @property
    def headers(self) -> Any:
        """The recorded headers (case-insensitive)."""
        return self._chronicle_replay.headers()

    @property
    def status_code(self) -> int:
        """The recorded status code."""
        return self._chronicle_replay.head.status_code

    @property
    def request_id(self) -> str | None:
        """The recorded request id."""
        return self._chronicle_replay.head.request_id

    @property
    def http_response(self) -> Any:
        """An HTTP response with the recorded status, headers and body (the recorded object's JSON)."""
        return self._chronicle_replay.response()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} [{self.status_code}] request_id={self.request_id!r}>"


class _ReplayedSyncResponse(_ReplayedResponseBase):
    def parse(self, *, to: Any = None) -> Any:
        """The recorded body (``to`` converts it like the SDK does)."""
        return self._chronicle_replay.parse(to)


class _ReplayedClosableResponse(_ReplayedSyncResponse):
    def close(self) -> None:
        """Close the replayed stream, if the body is one."""
        self._chronicle_replay.close_stream()
        if self._chronicle_replay.http is not None:
            self._chronicle_replay.http.close()


class _ReplayedAsyncResponse(_ReplayedResponseBase):
    async def parse(self, *, to: Any = None) -> Any:
        """The recorded body (``to`` converts it like the SDK does)."""
        return self._chronicle_replay.parse(to)

    async def close(self) -> None:
        """Close the replayed stream, if the body is one."""
        closing = self._chronicle_replay.close_stream()
        if inspect.isawaitable(closing):
            await closing
        if self._chronicle_replay.http is not None:
            await self._chronicle_replay.http.aclose()


@functools.cache
def _stand_in_class(base: type) -> type:
    """A subclass of the SDK's response class whose every method used here comes from the replay mixin."""
    mixin: type
    if inspect.iscoroutinefunction(getattr(base, "parse", None)):
        mixin = _ReplayedAsyncResponse
    elif callable(getattr(base, "close", None)):
        mixin = _ReplayedClosableResponse
    else:  # openai's LegacyAPIResponse: no close()
        mixin = _ReplayedSyncResponse
    return type(f"Replayed{base.__name__}", (mixin, base), {"__module__": __name__})


def _stand_in(cls: type, replayed: _Replayed) -> Any:
    stand_in: Any = object.__new__(_stand_in_class(cls))  # never the SDK's __init__: no client, no HTTP response
    stand_in._chronicle_replay = replayed
    return stand_in


def _plain_answer(head: ResponseHead, rest: list[Any], replayed: StreamReplay, sdk: SdkResponses) -> Any:
    """A plain call answered from a recorded response: what its ``parse()`` returned."""
    return _Replayed(head, replayed, rest, sdk).body()


# --------------------------------------------------------------------------------------------------- the adapter


def response_adapter(
    name: str,
    sdk: SdkResponses,
    stream_attributes: Callable[[list[Any]], Mapping[str, Any]] | None = None,
) -> StreamAdapter:
    """The adapter of one SDK method: its ``stream=True`` streams and its response wrappers, recorded and replayed.

    Args:
        name: the boundary name (said in warnings).
        sdk: the SDK's classes.
        stream_attributes: the GenAI span attributes of the method's stream items.
    """
    kinds = (*sdk.streams, *sdk.responses)
    for cls in sdk.responses:
        _KNOWN[_class_name(cls)] = (cls, sdk)

    def is_stream(value: Any) -> bool:
        return isinstance(value, kinds)

    def record(value: Any, recorder: StreamRecorder) -> Any:
        if isinstance(value, sdk.responses):
            return _record_response(value, recorder, name, sdk)
        return record_stream(value, recorder)

    def replay(replayed: StreamReplay) -> Any:
        head, rest = _split(replayed.items)
        mode = raw_mode(replayed.kwargs)
        if head is None:  # a plain stream's recording, or an override's items (``[chat_completion]``)
            streamed = replayed.kwargs.get("stream") is True
            if mode is None and streamed:
                return sdk.replay_stream(replayed)
            head = ResponseHead(
                headers={"content-type": "text/event-stream" if streamed else "application/json"}, streamed=streamed
            )
        if mode is None:
            return _plain_answer(head, rest, replayed, sdk)
        cls = sdk.response_class(mode, replayed.is_async)
        if cls is None:
            return _plain_answer(head, rest, replayed, sdk)
        return _stand_in(cls, _Replayed(head, replayed, rest, sdk))

    def attributes(items: list[Any]) -> Mapping[str, Any]:
        head, rest = _split(items)
        if head is None or head.streamed:
            return stream_attributes(rest) if stream_attributes is not None else {}
        return response_attributes(rest[0]) if rest else {}

    return StreamAdapter(is_stream=is_stream, record=record, replay=replay, attributes=attributes)
