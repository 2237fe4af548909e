"""Local stand-ins for the OpenAI and Anthropic HTTP APIs, for tests that drive the real SDK clients.

Each server listens on 127.0.0.1 on an ephemeral port, records every request it receives and answers with
queued :class:`Reply` objects in the JSON shapes (plain and server-sent events) that the ``openai`` and
``anthropic`` SDKs parse. Ids are derived from the request number (``chatcmpl-000001``, ``resp_000001``,
``msg_000001`` …) and timestamps are fixed (``created`` is 1_700_000_000), so tests can assert them::

    with openai_server() as server:
        server.reply_with(Reply("hello"))
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="test-key", max_retries=0)
        ...
        client.close()

Served routes: ``POST /v1/chat/completions`` and ``POST /v1/responses`` (OpenAI), ``POST /v1/messages``
(Anthropic). Any other route answers 404 with an error body in the provider's shape.

Both SDKs build their ``httpx2`` clients with ``trust_env``: an ``HTTP(S)_PROXY``/``ALL_PROXY`` variable would
send requests for 127.0.0.1 to the proxy, so tests clear those variables (or pass ``NO_PROXY=127.0.0.1``).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

_CREATED = 1_700_000_000
"""The fixed ``created`` / ``created_at`` timestamp of every answer."""

_JOIN_TIMEOUT = 5.0
_POLL_INTERVAL = 0.02  # how soon ``close()`` is noticed by the serving loop


@dataclass
class Reply:
    """One queued answer.

    Attributes:
        text: The assistant text to answer with.
        model: The model named in the answer; empty echoes the request's ``model``.
        input_tokens: Prompt tokens reported in the usage.
        output_tokens: Completion tokens reported in the usage.
        tool_call: ``(name, arguments)`` of one tool call: an OpenAI ``tool_calls`` entry (a ``function_call``
            output item for the Responses API) or an Anthropic ``tool_use`` block.
        parsed_json: Structured output: when set, its JSON serialization replaces ``text`` as the content.
    """

    text: str
    model: str = ""
    input_tokens: int = 11
    output_tokens: int = 7
    tool_call: tuple[str, dict[str, Any]] | None = None
    parsed_json: dict[str, Any] | None = None

    @property
    def content(self) -> str:
        """The text the answer carries: ``parsed_json`` serialized, or ``text``."""
        return self.text if self.parsed_json is None else json.dumps(self.parsed_json)

    @property
    def arguments(self) -> str:
        """The tool call's arguments as the JSON string the APIs send (empty without a tool call)."""
        return "" if self.tool_call is None else json.dumps(self.tool_call[1])


def _pieces(text: str, parts: int = 3) -> list[str]:
    """Split ``text`` into exactly ``parts`` consecutive pieces (some empty when the text is shorter)."""
    bounds = [len(text) * i // parts for i in range(parts + 1)]
    return [text[bounds[i] : bounds[i + 1]] for i in range(parts)]


def _sse(events: Iterator[tuple[str | None, Any]]) -> bytes:
    """Encode ``(event name or None, data)`` pairs as a ``text/event-stream`` body; str data is sent verbatim."""
    out: list[str] = []
    for name, data in events:
        if name is not None:
            out.append(f"event: {name}\n")
        out.append(f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n")
    return "".join(out).encode()


# --- OpenAI: chat completions ------------------------------------------------------------------------------------


def _chat_completion(body: dict[str, Any], reply: Reply, n: int, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None, "annotations": []}
    if reply.tool_call is not None:
        if not reply.content:
            message["content"] = None
        message["tool_calls"] = [
            {
                "id": f"call_{n:06d}",
                "type": "function",
                "function": {"name": reply.tool_call[0], "arguments": reply.arguments},
            }
        ]
    return {
        "id": f"chatcmpl-{n:06d}",
        "object": "chat.completion",
        "created": _CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "stop" if reply.tool_call is None else "tool_calls",
            }
        ],
        "usage": _chat_usage(reply),
        "system_fingerprint": "fp_test",
    }


def _chat_usage(reply: Reply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def _chat_chunks(body: dict[str, Any], reply: Reply, n: int, model: str) -> Iterator[tuple[str | None, Any]]:
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> tuple[None, dict[str, Any]]:
        data: dict[str, Any] = {
            "id": f"chatcmpl-{n:06d}",
            "object": "chat.completion.chunk",
            "created": _CREATED,
            "model": model,
            "system_fingerprint": "fp_test",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if include_usage:
            data["usage"] = None
        return None, data

    yield chunk({"role": "assistant", "content": "", "refusal": None})
    for piece in _pieces(reply.content):
        yield chunk({"content": piece})
    if reply.tool_call is not None:
        head = {"name": reply.tool_call[0], "arguments": ""}
        yield chunk({"tool_calls": [{"index": 0, "id": f"call_{n:06d}", "type": "function", "function": head}]})
        for piece in _pieces(reply.arguments):
            yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
    yield chunk({}, "stop" if reply.tool_call is None else "tool_calls")
    if include_usage:
        _, last = chunk({})
        last.update(choices=[], usage=_chat_usage(reply))
        yield None, last
    yield None, "[DONE]"


# --- OpenAI: responses -------------------------------------------------------------------------------------------


def _response_items(reply: Reply, n: int, *, done: bool) -> list[dict[str, Any]]:
    """The ``output`` items of a response: a message (when there is text or no tool call), then a function call."""
    items: list[dict[str, Any]] = []
    status = "completed" if done else "in_progress"
    if reply.content or reply.tool_call is None:
        text = {"type": "output_text", "text": reply.content if done else "", "annotations": [], "logprobs": []}
        content = [text] if done else []
        items.append(
            {"id": f"msg_{n:06d}", "type": "message", "role": "assistant", "status": status, "content": content}
        )
    if reply.tool_call is not None:
        items.append(
            {
                "id": f"fc_{n:06d}",
                "type": "function_call",
                "call_id": f"call_{n:06d}",
                "name": reply.tool_call[0],
                "arguments": reply.arguments if done else "",
                "status": status,
            }
        )
    return items


def _response(body: dict[str, Any], reply: Reply, n: int, model: str, *, done: bool = True) -> dict[str, Any]:
    usage = {
        "input_tokens": reply.input_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": reply.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }
    return {
        "id": f"resp_{n:06d}",
        "object": "response",
        "created_at": _CREATED,
        "completed_at": _CREATED if done else None,
        "status": "completed" if done else "in_progress",
        "model": model,
        "output": _response_items(reply, n, done=True) if done else [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": body.get("tools", []),
        "text": body.get("text", {"format": {"type": "text"}}),
        "temperature": 1.0,
        "top_p": 1.0,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "metadata": {},
        "usage": usage if done else None,
    }


def _response_events(body: dict[str, Any], reply: Reply, n: int, model: str) -> Iterator[tuple[str | None, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response(body, reply, n, model, done=False)},
        {"type": "response.in_progress", "response": _response(body, reply, n, model, done=False)},
    ]
    final_items = _response_items(reply, n, done=True)
    for index, (added, final) in enumerate(zip(_response_items(reply, n, done=False), final_items, strict=True)):
        where = {"item_id": added["id"], "output_index": index}
        events.append({"type": "response.output_item.added", "output_index": index, "item": added})
        if added["type"] == "message":
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            at = {**where, "content_index": 0}
            events.append({"type": "response.content_part.added", **at, "part": part})
            for piece in _pieces(reply.content):
                events.append({"type": "response.output_text.delta", **at, "delta": piece, "logprobs": []})
            events.append({"type": "response.output_text.done", **at, "text": reply.content, "logprobs": []})
            events.append({"type": "response.content_part.done", **at, "part": final["content"][0]})
        else:
            for piece in _pieces(reply.arguments):
                events.append({"type": "response.function_call_arguments.delta", **where, "delta": piece})
            events.append({"type": "response.function_call_arguments.done", **where, "arguments": reply.arguments})
        events.append({"type": "response.output_item.done", "output_index": index, "item": final})
    events.append({"type": "response.completed", "response": _response(body, reply, n, model)})
    for sequence_number, event in enumerate(events):
        yield event["type"], {**event, "sequence_number": sequence_number}


# --- Anthropic: messages -----------------------------------------------------------------------------------------


def _message_blocks(reply: Reply, n: int) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.content or reply.tool_call is None:
        blocks.append({"type": "text", "text": reply.content, "citations": None})
    if reply.tool_call is not None:
        name, arguments = reply.tool_call
        blocks.append({"type": "tool_use", "id": f"toolu_{n:06d}", "name": name, "input": arguments})
    return blocks


def _message(body: dict[str, Any], reply: Reply, n: int, model: str) -> dict[str, Any]:
    return {
        "id": f"msg_{n:06d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _message_blocks(reply, n),
        "stop_reason": "end_turn" if reply.tool_call is None else "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": reply.input_tokens,
            "output_tokens": reply.output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def _message_events(body: dict[str, Any], reply: Reply, n: int, model: str) -> Iterator[tuple[str | None, Any]]:
    start = _message(body, reply, n, model)
    start.update(content=[], stop_reason=None, usage={**start["usage"], "output_tokens": 1})
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}, {"type": "ping"}]
    for index, block in enumerate(_message_blocks(reply, n)):
        if block["type"] == "text":
            events.append({"type": "content_block_start", "index": index, "content_block": {**block, "text": ""}})
            deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(reply.content)]
        else:
            events.append({"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}})
            deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in _pieces(reply.arguments)]
        events.extend({"type": "content_block_delta", "index": index, "delta": delta} for delta in deltas)
        events.append({"type": "content_block_stop", "index": index})
    stop_reason = "end_turn" if reply.tool_call is None else "tool_use"
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": reply.output_tokens},
        }
    )
    events.append({"type": "message_stop"})
    for event in events:
        yield event["type"], event


# --- the server --------------------------------------------------------------------------------------------------

_Plain = Callable[[dict[str, Any], Reply, int, str], dict[str, Any]]
_Streamed = Callable[[dict[str, Any], Reply, int, str], Iterator[tuple[str | None, Any]]]

_OPENAI_ROUTES: dict[str, tuple[_Plain, _Streamed]] = {
    "/v1/chat/completions": (_chat_completion, _chat_chunks),
    "/v1/responses": (_response, _response_events),
}
_ANTHROPIC_ROUTES: dict[str, tuple[_Plain, _Streamed]] = {"/v1/messages": (_message, _message_events)}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30.0  # an idle keep-alive connection ends on its own
    disable_nagle_algorithm = True  # headers and body go out in two writes: no delayed-ACK stall between them
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.owner._lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.owner._lock:
            self.server.connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: tests read ``LLMServer.requests`` instead of a log."""

    def do_GET(self) -> None:
        self._send(404, "application/json", self.server.owner._error("not found"))

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        headers = {name.lower(): value for name, value in self.headers.items()}
        owner = self.server.owner
        n, reply = owner._record({"path": self.path, "body": body, "headers": headers})
        route = owner._routes.get(urlsplit(self.path).path)
        if route is None or not isinstance(body, dict):
            status, message = (404, "not found") if route is None else (400, "the body is not a JSON object")
            self._send(status, "application/json", owner._error(message))
            return
        plain, streamed = route
        model = reply.model or str(body.get("model", ""))
        if body.get("stream"):
            self._send(200, "text/event-stream; charset=utf-8", _sse(streamed(body, reply, n, model)))
        else:
            self._send(200, "application/json", json.dumps(plain(body, reply, n, model)).encode())

    def _send(self, status: int, content_type: str, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, owner: LLMServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.owner = owner
        self.connections: set[socket.socket] = set()


class LLMServer:
    """A running stand-in for one provider's HTTP API on 127.0.0.1; also a context manager that closes it.

    Attributes:
        url: ``http://127.0.0.1:PORT``. OpenAI clients take ``base_url=url + "/v1"``, Anthropic clients ``url``.
        requests: Every request received, in order: ``{"path", "body" (parsed JSON or None), "headers"}``
            with lower-cased header names.
    """

    def __init__(self, routes: dict[str, tuple[_Plain, _Streamed]], error: Callable[[str], dict[str, Any]]) -> None:
        self._routes = routes
        self._error_body = error
        self._lock = threading.Lock()
        self._replies: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        self._server = _Server(self)
        host, port = self._server.server_address[:2]
        self.url = f"http://{host!s}:{port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(_POLL_INTERVAL,), name=f"llm-server-{port}", daemon=True
        )
        self._thread.start()

    def count(self) -> int:
        """The number of requests received so far."""
        with self._lock:
            return len(self.requests)

    def reply_with(self, *replies: Reply) -> None:
        """Queue answers, used in order; once the queue is empty every request is answered with ``Reply("ok")``."""
        with self._lock:
            self._replies.extend(replies)

    def close(self) -> None:
        """Stop serving, drop open keep-alive connections and wait (bounded) for the serving thread."""
        self._server.shutdown()
        with self._lock:
            for connection in list(self._server.connections):
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
        self._server.server_close()
        self._thread.join(_JOIN_TIMEOUT)

    def __enter__(self) -> LLMServer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _record(self, request: dict[str, Any]) -> tuple[int, Reply]:
        with self._lock:
            self.requests.append(request)
            reply = self._replies.popleft() if self._replies else Reply("ok")
            return len(self.requests), reply

    def _error(self, message: str) -> bytes:
        return json.dumps(self._error_body(message)).encode()


def openai_server() -> LLMServer:
    """Start a server speaking the OpenAI chat completions and responses APIs on an ephemeral 127.0.0.1 port."""
    return LLMServer(
        _OPENAI_ROUTES,
        lambda message: {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}},
    )


def anthropic_server() -> LLMServer:
    """Start a server speaking the Anthropic messages API on an ephemeral 127.0.0.1 port."""
    return LLMServer(
        _ANTHROPIC_ROUTES,
        lambda message: {"type": "error", "error": {"type": "invalid_request_error", "message": message}},
    )
