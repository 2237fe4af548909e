"""What a streamed LLM call said: its stream items assembled into one message.

Usage::

    from chronicle_otel._assembled import assemble, diff_messages

    message = assemble(boundary.output)        # the recorded chunks: typed, or the JSON of a payload
    message.text                               # 'Selling 1,000 shares of MSFT at market.'
    message.tool_calls[0].name, message.tool_calls[0].args   # 'place_order', {'symbol': 'MSFT', 'quantity': 1000}
    message.usage, message.finish_reason, message.model, message.id
    print("\\n".join(message.lines()))         # the block `chronicle show` prints

    diff_messages(recorded, now)   # ['tool call place_order arguments: {"quantity": 1000} -> {"quantity": 10}']

Recognized streams: OpenAI chat completion chunks (and LiteLLM's, which have their shape), OpenAI Responses events,
Anthropic message events, LangChain ``AIMessageChunk`` (LangGraph's ``(chunk, metadata)`` pairs too) and, when the
caller says the stream is an LLM's, plain strings. The items may be the SDK's objects, the codec's JSON of them (a
payload read without rebuilding any class, as the ``chronicle`` command reads it) or plain JSON (``model_dump()``,
the wire format). Text is joined, tool calls are joined by index with their arguments, and the usage, finish
reason, model and id are kept. Nothing here imports an SDK.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Final

from ._api import publish
from .codec import TAG, UnresolvedObject, to_json_value, with_classes

__all__ = ["Assembled", "RebuildError", "ToolCall", "as_message", "assemble", "diff_messages", "rebuild"]

_CLASS: Final = "__class__"
"""Where a normalized item keeps the class its encoding named."""
_PLACEHOLDER: Final = "__unencodable__"
"""Where a normalized item keeps the class of a value recorded as an ``unencodable`` placeholder."""
_MAX_DEPTH: Final = 48

KINDS: Final = {
    "openai.chat": ("OpenAI chat completion", "chunks"),
    "openai.responses": ("OpenAI Responses", "events"),
    "anthropic": ("Anthropic message", "events"),
    "langchain": ("LangChain message", "chunks"),
    "text": ("text", "pieces"),
}
"""Stream kinds: ``kind -> (what, what its items are called)``."""

_ANTHROPIC_EVENTS: Final = frozenset(
    {"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta"}
    | {"message_stop", "ping"}
)
_CLASS_TYPES: Final = {
    # the ``type`` of an SDK object whose ``type`` field was left to its default (not in its encoding)
    "RawMessageStartEvent": "message_start",
    "MessageStartEvent": "message_start",
    "RawContentBlockStartEvent": "content_block_start",
    "ContentBlockStartEvent": "content_block_start",
    "RawContentBlockDeltaEvent": "content_block_delta",
    "ContentBlockDeltaEvent": "content_block_delta",
    "RawContentBlockStopEvent": "content_block_stop",
    "ContentBlockStopEvent": "content_block_stop",
    "RawMessageDeltaEvent": "message_delta",
    "MessageDeltaEvent": "message_delta",
    "RawMessageStopEvent": "message_stop",
    "MessageStopEvent": "message_stop",
    "TextDelta": "text_delta",
    "InputJSONDelta": "input_json_delta",
    "ThinkingDelta": "thinking_delta",
    "TextBlock": "text",
    "ToolUseBlock": "tool_use",
    "ThinkingBlock": "thinking",
    "ResponseCreatedEvent": "response.created",
    "ResponseInProgressEvent": "response.in_progress",
    "ResponseCompletedEvent": "response.completed",
    "ResponseIncompleteEvent": "response.incomplete",
    "ResponseFailedEvent": "response.failed",
    "ResponseOutputItemAddedEvent": "response.output_item.added",
    "ResponseOutputItemDoneEvent": "response.output_item.done",
    "ResponseTextDeltaEvent": "response.output_text.delta",
    "ResponseTextDoneEvent": "response.output_text.done",
    "ResponseFunctionCallArgumentsDeltaEvent": "response.function_call_arguments.delta",
    "ResponseFunctionCallArgumentsDoneEvent": "response.function_call_arguments.done",
    "ResponseRefusalDeltaEvent": "response.refusal.delta",
    "ResponseReasoningSummaryTextDeltaEvent": "response.reasoning_summary_text.delta",
    "ResponseReasoningTextDeltaEvent": "response.reasoning_text.delta",
    "ResponseFunctionToolCall": "function_call",
    "ResponseOutputMessage": "message",
    "ResponseOutputText": "output_text",
}


@dataclasses.dataclass
class ToolCall:
    """One tool call of an assembled message.

    Attributes:
        name: the tool's name.
        arguments: the arguments as the model wrote them (JSON text, joined from its pieces).
        id: the call's id (``call_…``, ``toolu_…``), when the stream gave one.
    """

    name: str | None = None
    arguments: str = ""
    id: str | None = None

    @property
    def args(self) -> Any:
        """The arguments parsed from JSON (``{}`` when there are none); their text when they are not JSON."""
        if not self.arguments.strip():
            return {}
        try:
            return json.loads(self.arguments)
        except ValueError:
            return self.arguments

    def to_dict(self) -> dict[str, Any]:
        """``{"name", "arguments" (parsed when JSON), "id"}``."""
        out: dict[str, Any] = {"name": self.name, "arguments": self.args}
        if self.id:
            out["id"] = self.id
        return out


@dataclasses.dataclass
class Assembled:
    """The message a stream carried.

    Attributes:
        kind: the kind of stream (a key of :data:`KINDS`: ``openai.chat``, ``openai.responses``, ``anthropic``,
            ``langchain``, ``text``).
        text: the text, joined.
        tool_calls: the tool calls, in order, each with its arguments joined.
        finish_reason: why the model stopped (``stop``, ``tool_calls``, ``end_turn``, ``completed``…).
        usage: the token usage, as the provider reports it (plain JSON).
        model: the model that answered.
        id: the response's id.
        refusal: a refusal, when the model refused.
        reasoning: reasoning or thinking text, when the stream carried some.
        items: how many items the stream had.
        placeholders: classes of items recorded as ``unencodable`` placeholders (their content is not known).
    """

    kind: str
    text: str = ""
    tool_calls: list[ToolCall] = dataclasses.field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    model: str | None = None
    id: str | None = None
    refusal: str | None = None
    reasoning: str | None = None
    items: int = 0
    placeholders: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The message as JSON: what the model said, then the rest; empty parts left out."""
        out: dict[str, Any] = {"kind": self.kind}
        if self.text:
            out["text"] = self.text
        if self.refusal:
            out["refusal"] = self.refusal
        if self.reasoning:
            out["reasoning"] = self.reasoning
        if self.tool_calls:
            out["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        for key in ("finish_reason", "usage", "model", "id"):
            value = getattr(self, key)
            if value:
                out[key] = value
        out["items"] = self.items
        if self.placeholders:
            out["placeholders"] = list(self.placeholders)
        return out

    def head(self) -> str:
        """``20 chunks, model gpt-4.1, finish tool_calls``."""
        unit = KINDS.get(self.kind, ("", "items"))[1]
        parts = [f"{self.items} {unit[:-1] if self.items == 1 else unit}"]
        if self.model:
            parts.append(f"model {self.model}")
        if self.finish_reason:
            parts.append(f"finish {self.finish_reason}")
        return ", ".join(parts)

    def lines(self, width: int | None = None) -> list[str]:
        """The message as short lines (``chronicle show``): head, text, tool calls, usage; each cut to ``width``.

        Example::

            assembled from 20 chunks, model gpt-4.1-2025-04-14, finish tool_calls
            tool call place_order {"symbol": "MSFT", "quantity": 1000}
            usage: prompt_tokens=412, completion_tokens=31, total_tokens=443
        """
        lines = [f"assembled from {self.head()}" + (f", id {self.id}" if self.id and width is None else "")]
        for label, value in (("text", self.text), ("refusal", self.refusal), ("reasoning", self.reasoning)):
            if value:
                lines.append(f"{label}: {_text(value, width)}")
        if not self.text and not self.tool_calls and not self.refusal:
            lines.append("text: ''")
        for call in self.tool_calls:
            ident = f"  (id {call.id})" if call.id and width is None else ""
            lines.append(f"tool call {call.name or '?'} {_json(call.args)}{ident}")
        if self.usage:
            lines.append("usage: " + ", ".join(f"{k}={v}" for k, v in self.usage.items() if _number(v)))
        return [_cut(line, width) for line in lines]

    def summary(self, width: int = 160) -> str:
        """The message on one line: ``stream of 20 chunks: tool call place_order {"quantity": 1000}; finish …``."""
        parts = []
        if self.text:
            parts.append(f"text {_text(self.text, 60)}")
        if self.refusal:
            parts.append(f"refusal {_text(self.refusal, 60)}")
        parts += [f"tool call {call.name or '?'} {_json(call.args)}" for call in self.tool_calls]
        if self.finish_reason:
            parts.append(f"finish {self.finish_reason}")
        unit = KINDS.get(self.kind, ("", "items"))[1]
        return _cut(f"stream of {self.items} {unit}: " + ("; ".join(parts) or "no text"), width)


def assemble(items: Iterable[Any] | None, *, strings: bool = True) -> Assembled | None:
    """The message the items of a stream carried; None when they are not a stream this module knows.

    Args:
        items: the stream's items: SDK objects, the codec's JSON of them, or plain JSON.
        strings: a stream of plain strings is text pieces (say so for an LLM's stream only: the strings a
            retriever yields are documents, not one text).
    """
    if items is None or isinstance(items, (str, bytes, Mapping)):
        return None
    try:
        raw = list(items)
    except Exception:
        return None
    plain = [_unpaired(_plain(item, 0)) for item in with_classes(raw)]
    if not plain:
        return None
    placeholders = tuple(str(p[_PLACEHOLDER]) for p in plain if isinstance(p, dict) and _PLACEHOLDER in p)
    kinds = {_kind(p) for p in plain if not (isinstance(p, dict) and _PLACEHOLDER in p)}
    if len(kinds) != 1 or None in kinds:
        return None
    kind = kinds.pop()
    assert kind is not None
    if kind == "text" and not strings:
        return None
    message = Assembled(kind, items=len(plain), placeholders=placeholders)
    _ASSEMBLERS[kind](message, [p for p in plain if isinstance(p, (dict, str)) and not _is_placeholder(p)])
    return message


def diff_messages(a: Assembled, b: Assembled) -> list[str]:
    """What differs between two assembled messages, one line each: ``text: 'a' -> 'b'``, ``tool call place_order
    arguments: {"quantity": 1000} -> {"quantity": 10}``, ``finish reason: stop -> tool_calls``; empty when they say
    the same (ids and item counts aside)."""
    lines = []
    if a.kind != b.kind:
        lines.append(f"stream: {KINDS[a.kind][0]} -> {KINDS[b.kind][0]}")
    for label in ("text", "refusal", "reasoning"):
        left, right = getattr(a, label) or "", getattr(b, label) or ""
        if left != right:
            lines.append(f"{label}: {_text(left, 120)} -> {_text(right, 120)}")
    for i in range(max(len(a.tool_calls), len(b.tool_calls))):
        if i >= len(a.tool_calls):
            call = b.tool_calls[i]
            lines.append(f"tool call {call.name}: not called -> called with {_json(call.args)}")
            continue
        if i >= len(b.tool_calls):
            call = a.tool_calls[i]
            lines.append(f"tool call {call.name}: called with {_json(call.args)} -> not called")
            continue
        left_call, right_call = a.tool_calls[i], b.tool_calls[i]
        name = left_call.name
        if left_call.name != right_call.name:
            lines.append(f"tool call {i}: {left_call.name} -> {right_call.name}")
            name = f"{left_call.name}/{right_call.name}"
        left, right = left_call.args, right_call.args
        if left != right:
            if isinstance(left, dict) and isinstance(right, dict):
                keys = [k for k in dict.fromkeys([*left, *right]) if left.get(k, _MISSING) != right.get(k, _MISSING)]
                left = {k: left[k] for k in keys if k in left}
                right = {k: right[k] for k in keys if k in right}
            lines.append(f"tool call {name} arguments: {_json(left)} -> {_json(right)}")
    for label, key in (("finish reason", "finish_reason"), ("model", "model")):
        if getattr(a, key) != getattr(b, key):
            lines.append(f"{label}: {getattr(a, key)} -> {getattr(b, key)}")
    left_usage, right_usage = a.usage or {}, b.usage or {}
    changed = [k for k in dict.fromkeys([*left_usage, *right_usage]) if left_usage.get(k) != right_usage.get(k)]
    if changed:
        before = {k: left_usage[k] for k in changed if k in left_usage}
        after = {k: right_usage[k] for k in changed if k in right_usage}
        lines.append(f"usage: {_json(before)} -> {_json(after)}")
    return lines


_MISSING: Final = object()

# ------------------------------------------------------------------------------------------------------------------
# Items as plain JSON


def _plain(value: Any, depth: int) -> Any:
    """``value`` (an SDK object, the codec's JSON of one, or JSON) as plain JSON: a model's fields in a dict that
    keeps its class under :data:`_CLASS`; a placeholder as ``{_PLACEHOLDER: class}``."""
    if depth > _MAX_DEPTH:
        return None
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, UnresolvedObject):
        if value.tag == "unencodable":
            return {_PLACEHOLDER: value.class_name}
        data = _plain(value.data, depth + 1)
        return {**data, _CLASS: value.class_name} if isinstance(data, dict) else data
    if type(value) in (list, tuple):
        return [_plain(x, depth + 1) for x in with_classes(list(value))]
    if type(value) is dict:
        tag = value.get(TAG)
        if tag is None:
            return {k: _plain(x, depth + 1) for k, x in value.items() if type(k) is str}
        if tag in ("pydantic", "dataclass", "namedtuple", "custom"):
            fields = _plain(value["fields"] if "fields" in value else value.get("data"), depth + 1)
            if isinstance(fields, dict):
                extra = fields.get("_extra") if tag == "custom" else None
                if isinstance(extra, dict):  # a registered model encoding (LiteLLM's): its extra fields beside
                    fields = {k: v for k, v in fields.items() if not k.startswith("_")} | extra
                fields[_CLASS] = value.get("class")
            return fields
        if tag == "dict":
            pairs = value.get("items")
            pairs = pairs if isinstance(pairs, list) else []
            return {
                p[0]: _plain(p[1], depth + 1)
                for p in pairs
                if isinstance(p, list) and len(p) == 2 and type(p[0]) is str
            }
        if tag in ("tuple", "set", "frozenset"):
            items = value.get("items")
            return [_plain(x, depth + 1) for x in items] if isinstance(items, list) else []
        if tag == "unencodable":
            return {_PLACEHOLDER: value.get("class")}
        if tag == "enum":
            return _plain(value.get("value"), depth + 1)
        return value
    if isinstance(value, (bytes, bytearray)):
        return None
    return _plain(to_json_value(value), depth)  # an SDK object: its encoding (never raises)


def _unpaired(item: Any) -> Any:
    """LangGraph's ``(message chunk, metadata)`` pair (``stream_mode="messages"``): the chunk."""
    if isinstance(item, list) and len(item) == 2 and _kind(item[0]) == "langchain" and isinstance(item[1], dict):
        return item[0]
    return item


def _is_placeholder(item: Any) -> bool:
    return isinstance(item, dict) and _PLACEHOLDER in item


def _class(node: Any) -> str:
    name = node.get(_CLASS) if isinstance(node, dict) else None
    return name.rsplit(".", 1)[-1] if isinstance(name, str) else ""


def _type(node: Any) -> str | None:
    """A node's ``type``, or the one its class stands for when the field was left to its default."""
    if not isinstance(node, dict):
        return None
    value = node.get("type")
    if isinstance(value, str):
        return value
    return _CLASS_TYPES.get(_class(node))


def _kind(item: Any) -> str | None:
    if isinstance(item, str):
        return "text"
    if not isinstance(item, dict):
        return None
    short = _class(item)
    if short.endswith("AIMessageChunk") or item.get("type") == "AIMessageChunk":
        return "langchain"
    if item.get("object") == "chat.completion.chunk" or short in ("ChatCompletionChunk", "ModelResponseStream"):
        return "openai.chat"
    choices = item.get("choices")
    if isinstance(choices, list) and any(isinstance(c, dict) and "delta" in c for c in choices):
        return "openai.chat"
    kind = _type(item)
    if isinstance(kind, str) and kind.startswith("response."):
        return "openai.responses"
    if kind in _ANTHROPIC_EVENTS:
        return "anthropic"
    return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _usage(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    usage = {k: v for k, v in value.items() if k != _CLASS and v is not None}
    return {k: (_usage(v) if isinstance(v, dict) else v) for k, v in usage.items()} or None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _add_name(call: ToolCall, piece: Any) -> None:
    """A tool's name: given once, in pieces, or repeated whole in every chunk (some providers)."""
    if isinstance(piece, str) and piece and piece != call.name:
        call.name = (call.name or "") + piece


# ------------------------------------------------------------------------------------------------------------------
# The assemblers, one per kind of stream


def _chat(message: Assembled, chunks: list[Any]) -> None:
    text: list[str] = []
    refusal: list[str] = []
    reasoning: list[str] = []
    calls: dict[Any, ToolCall] = {}
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        message.id = message.id or _str(chunk.get("id"))
        message.model = message.model or _str(chunk.get("model"))
        if isinstance(chunk.get("usage"), dict):
            message.usage = _usage(chunk["usage"])
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict) or choice.get("index", 0) not in (0, None):
                continue  # the first choice (n > 1 is rare in agents)
            if _str(choice.get("finish_reason")):
                message.finish_reason = choice["finish_reason"]
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                continue
            for parts, field in ((text, "content"), (refusal, "refusal"), (reasoning, "reasoning_content")):
                if isinstance(delta.get(field), str):
                    parts.append(delta[field])
            function = delta.get("function_call")  # the legacy single function call
            if isinstance(function, dict):
                call = calls.setdefault("function_call", ToolCall())
                _add_name(call, function.get("name"))
                call.arguments += function.get("arguments") or ""
            for piece in delta.get("tool_calls") or ():
                if not isinstance(piece, dict):
                    continue
                key = piece.get("index")
                call = calls.setdefault(key if key is not None else piece.get("id") or len(calls), ToolCall())
                call.id = call.id or _str(piece.get("id"))
                function = piece.get("function")
                if isinstance(function, dict):
                    _add_name(call, function.get("name"))
                    call.arguments += function.get("arguments") or ""
    message.text, message.refusal = "".join(text), "".join(refusal) or None
    message.reasoning = "".join(reasoning) or None
    message.tool_calls = list(calls.values())


def _responses(message: Assembled, events: list[Any]) -> None:
    texts: dict[Any, str] = {}
    refusal: list[str] = []
    reasoning: list[str] = []
    calls: dict[Any, ToolCall] = {}
    final: dict[str, Any] | None = None
    for event in events:
        kind = _type(event)
        if not isinstance(event, dict) or kind is None:
            continue
        if kind in ("response.created", "response.in_progress", "response.completed", "response.incomplete"):
            response = event.get("response")
            if isinstance(response, dict):
                message.id = message.id or _str(response.get("id"))
                message.model = _str(response.get("model")) or message.model
                if kind in ("response.completed", "response.incomplete"):
                    final = response
        elif kind == "response.failed":
            final = event.get("response") if isinstance(event.get("response"), dict) else final
        elif kind in ("response.output_item.added", "response.output_item.done"):
            item = event.get("item")
            if isinstance(item, dict) and _type(item) == "function_call":
                call = calls.setdefault(item.get("id") or event.get("output_index"), ToolCall())
                call.id = call.id or _str(item.get("call_id"))
                call.name = call.name or _str(item.get("name"))
                if kind == "response.output_item.done" and isinstance(item.get("arguments"), str):
                    call.arguments = item["arguments"]
        elif kind == "response.function_call_arguments.delta":
            call = calls.setdefault(event.get("item_id"), ToolCall())
            call.arguments += event.get("delta") or ""
        elif kind == "response.function_call_arguments.done" and isinstance(event.get("arguments"), str):
            calls.setdefault(event.get("item_id"), ToolCall()).arguments = event["arguments"]
        elif kind == "response.output_text.delta":
            where = (event.get("item_id"), event.get("content_index"))
            texts[where] = texts.get(where, "") + (event.get("delta") or "")
        elif kind == "response.output_text.done" and isinstance(event.get("text"), str):
            texts[(event.get("item_id"), event.get("content_index"))] = event["text"]
        elif kind == "response.refusal.delta":
            refusal.append(event.get("delta") or "")
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            reasoning.append(event.get("delta") or "")
    if final is not None:
        status = _str(final.get("status"))
        details = final.get("incomplete_details")
        reason = _str(details.get("reason")) if isinstance(details, dict) else None
        message.finish_reason = f"{status}: {reason}" if status and reason else status
        message.usage = _usage(final.get("usage")) or message.usage
        if not texts and not calls:  # no deltas read (a stream cut short, or of another shape): the final output
            _response_output(final.get("output"), texts, calls)
    message.text = "".join(texts.values())
    message.refusal = "".join(refusal) or None
    message.reasoning = "".join(reasoning) or None
    message.tool_calls = list(calls.values())


def _response_output(output: Any, texts: dict[Any, str], calls: dict[Any, ToolCall]) -> None:
    for i, item in enumerate(output if isinstance(output, list) else ()):
        kind = _type(item)
        if kind == "function_call":
            calls[i] = ToolCall(_str(item.get("name")), item.get("arguments") or "", _str(item.get("call_id")))
        elif kind == "message":
            for j, part in enumerate(item.get("content") or ()):
                if _type(part) == "output_text" and isinstance(part.get("text"), str):
                    texts[(i, j)] = part["text"]


def _anthropic(message: Assembled, events: list[Any]) -> None:
    texts: dict[Any, list[str]] = {}
    calls: dict[Any, ToolCall] = {}
    inputs: dict[Any, Any] = {}
    order: list[Any] = []  # block indexes in the order their blocks began
    reasoning: list[str] = []
    usage: dict[str, Any] = {}
    for event in events:
        kind = _type(event)
        if not isinstance(event, dict):
            continue
        index = event.get("index")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            start = event["message"]
            message.id = _str(start.get("id"))
            message.model = _str(start.get("model"))
            usage.update(_usage(start.get("usage")) or {})
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            block = event["content_block"]
            order.append(index)
            if _type(block) in ("tool_use", "server_tool_use"):
                calls[index] = ToolCall(_str(block.get("name")), id=_str(block.get("id")))
                inputs[index] = block.get("input")  # whole when no delta follows
            elif _type(block) == "text":
                texts[index] = [block.get("text") or ""]
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            delta = event["delta"]
            if _type(delta) == "text_delta":
                texts.setdefault(index, []).append(delta.get("text") or "")
            elif _type(delta) == "input_json_delta":
                calls.setdefault(index, ToolCall()).arguments += delta.get("partial_json") or ""
            elif _type(delta) == "thinking_delta":
                reasoning.append(delta.get("thinking") or "")
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, dict) and _str(delta.get("stop_reason")):
                message.finish_reason = delta["stop_reason"]
            usage.update(_usage(event.get("usage")) or {})
    for index, call in calls.items():
        if not call.arguments and isinstance(inputs.get(index), dict) and inputs[index]:
            call.arguments = json.dumps(inputs[index])
    order += [i for i in [*texts, *calls] if i not in order]
    message.text = "".join("".join(texts[i]) for i in order if i in texts)
    message.tool_calls = [calls[i] for i in order if i in calls]
    message.reasoning = "".join(reasoning) or None
    message.usage = usage or None


def _langchain(message: Assembled, chunks: list[Any]) -> None:
    text: list[str] = []
    calls: dict[Any, ToolCall] = {}
    usage: dict[str, Any] = {}
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        message.id = message.id or _str(chunk.get("id"))
        content = chunk.get("content")
        if isinstance(content, str):
            text.append(content)
        elif isinstance(content, list):
            for block in content:
                if isinstance(block, str):
                    text.append(block)
                elif isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
                    text.append(block["text"])
        pieces = chunk.get("tool_call_chunks") or ()
        for piece in pieces:
            if not isinstance(piece, dict):
                continue
            key = piece.get("index")
            call = calls.setdefault(key if key is not None else piece.get("id") or len(calls), ToolCall())
            call.id = call.id or _str(piece.get("id"))
            _add_name(call, piece.get("name"))
            call.arguments += piece.get("args") or ""
        if not pieces:  # a whole message given as one chunk: its parsed tool calls
            for whole in chunk.get("tool_calls") or ():
                if isinstance(whole, dict) and _str(whole.get("name")):
                    arguments = whole.get("args")
                    text_args = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
                    calls[len(calls)] = ToolCall(whole["name"], text_args, _str(whole.get("id")))
        metadata = chunk.get("response_metadata")
        if isinstance(metadata, dict):
            reason = _str(metadata.get("finish_reason")) or _str(metadata.get("stop_reason"))
            message.finish_reason = reason or message.finish_reason
            message.model = _str(metadata.get("model_name")) or _str(metadata.get("model")) or message.model
        _sum_into(usage, chunk.get("usage_metadata"))
    message.text = "".join(text)
    message.tool_calls = list(calls.values())
    message.usage = usage or None


def _sum_into(total: dict[str, Any], usage: Any) -> None:
    """LangChain adds up the usage of the chunks of one message (input tokens in one, output in another)."""
    if not isinstance(usage, dict):
        return
    for key, value in usage.items():
        if key == _CLASS or value is None:
            continue
        if _number(value) and _number(total.get(key, 0)):
            total[key] = total.get(key, 0) + value
        elif isinstance(value, dict):
            inner = total.setdefault(key, {})
            if isinstance(inner, dict):
                _sum_into(inner, value)


def _text_pieces(message: Assembled, pieces: list[Any]) -> None:
    message.text = "".join(p for p in pieces if isinstance(p, str))


_ASSEMBLERS: Final = {
    "openai.chat": _chat,
    "openai.responses": _responses,
    "anthropic": _anthropic,
    "langchain": _langchain,
    "text": _text_pieces,
}

# ------------------------------------------------------------------------------------------------------------------
# Text


def _cut(text: str, width: int | None) -> str:
    return text if width is None or len(text) <= width else text[: max(width - 1, 1)] + "…"


def _text(text: str, width: int | None) -> str:
    return repr(text) if width is None or len(text) <= width else repr(text[:width]) + "…"


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


# ------------------------------------------------------------------------------------------------------------------
# A stream rebuilt from a message: what-if overrides of a streamed call

MESSAGE_KEYS: Final = ("content", "text", "tool_calls", "finish_reason", "usage", "model", "id", "refusal")
"""The keys a message given as a dict may have (``content`` and ``text`` are the same)."""


def as_message(value: Any) -> Assembled:
    """``value`` as a message: an :class:`Assembled`, a string (its text) or a dict such as
    ``{"content": "…", "tool_calls": [{"name": "place_order", "arguments": {"quantity": 10}}]}``.

    A tool call is a :class:`ToolCall`, or a dict with ``name`` and ``arguments`` (a dict, or its JSON text;
    ``args`` and ``input`` are read too, and OpenAI's ``{"function": {"name", "arguments"}}``) and an optional
    ``id``.

    Raises:
        ValueError: a key or a tool call this does not read.
    """
    if isinstance(value, Assembled):
        return dataclasses.replace(value, tool_calls=[dataclasses.replace(c) for c in value.tool_calls])
    if isinstance(value, str):
        return Assembled("", text=value)
    if not isinstance(value, Mapping):
        raise ValueError(f"a message is a str, a dict or an Assembled, not a {type(value).__name__}")
    unknown = [k for k in value if k not in MESSAGE_KEYS]
    if unknown:
        raise ValueError(f"a message has no key {unknown[0]!r}; its keys are {', '.join(MESSAGE_KEYS)}")
    text = value.get("content", value.get("text")) or ""
    if not isinstance(text, str):
        raise ValueError(f"a message's content is its text, not a {type(text).__name__}")
    usage = value.get("usage")
    if usage is not None and not isinstance(usage, Mapping):
        raise ValueError("a message's usage is a dict of token counts")
    message = Assembled(
        "",
        text=text,
        finish_reason=_str(value.get("finish_reason")),
        usage=dict(usage) if usage is not None else None,
        model=_str(value.get("model")),
        id=_str(value.get("id")),
        refusal=_str(value.get("refusal")),
    )
    calls = value.get("tool_calls") or []
    if not isinstance(calls, (list, tuple)):
        raise ValueError("a message's tool_calls is a list")
    message.tool_calls = [_tool_call(call) for call in calls]
    return message


def _tool_call(value: Any) -> ToolCall:
    if isinstance(value, ToolCall):
        return dataclasses.replace(value)
    if not isinstance(value, Mapping):
        raise ValueError(f"a tool call is a dict with name and arguments, not a {type(value).__name__}")
    function = value.get("function")
    source: Mapping[str, Any] = function if isinstance(function, Mapping) else value
    name = source.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"a tool call needs its name: {value!r}")
    arguments: Any = next((source[k] for k in ("arguments", "args", "input") if k in source), {})
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall(name, text, _str(value.get("id")))


def rebuild(template: list[Any], value: Any, *, strings: bool = True) -> list[Any]:
    """The items of a stream of the recorded kind that carry the message ``value`` (see :func:`as_message`).

    The recorded items are the template: their classes (the SDK's own, so its accumulators and helpers work on
    the new items: ``ChatCompletionStreamState``, ``MessageStream.get_final_message()``, ``ResponseStream``), and
    the id, model, timestamps and usage the message does not give. What the message gives replaces the recorded
    text, tool calls, finish reason and usage. ``strings``: a recorded stream of plain strings is an LLM's text (then
    the message's text is the one item).

    Raises:
        ValueError: ``value`` is no message, or the recorded items are not an LLM's stream this module knows or
            were not rebuilt as their classes (not allowed).
        RebuildError: the SDK's classes refused the items made from the message.
    """
    message = as_message(value)
    recorded = assemble(template, strings=strings)
    if recorded is None:
        raise ValueError("the recorded items are not an LLM's stream of a kind chronicle knows (chunks, events)")
    kind = recorded.kind
    if kind == "text":
        if isinstance(value, str):  # a string given for a stream of strings is more likely its pieces gone wrong
            raise ValueError("a stream of strings is overridden by its pieces, or by {'content': text}")
        return [message.text] if message.text else []
    typed = [item for item in template if hasattr(type(item), "model_validate")]
    if not typed:
        raise ValueError(
            "the recorded items were not rebuilt as their classes (not allowed: pass allow=[...]), so no item of "
            "their kind can be made"
        )
    try:
        return _REBUILDERS[kind](typed, message, recorded)
    except Exception as exc:
        text = " ".join(str(exc).split())
        raise RebuildError(f"{type(exc).__name__}: {text[:500]}") from None


class RebuildError(ValueError):
    """The SDK's classes refused the items made from a message (a usage without the counts they require…)."""


def _set(item: Any, name: str) -> bool:
    return name in getattr(item, "model_fields_set", ())


def _rebuild_chat(template: list[Any], message: Assembled, recorded: Assembled) -> list[Any]:
    first = template[0]
    cls = type(first)
    base = {k: getattr(first, k) for k in ("id", "created", "model", "object", "system_fingerprint") if _set(first, k)}
    base.update({k: getattr(first, k) for k in ("service_tier",) if _set(first, k)})
    base["model"] = message.model or base.get("model")
    base["id"] = message.id or base.get("id")
    with_usage_key = _set(first, "usage")
    usage_chunk = next((c for c in template if not getattr(c, "choices", None) and getattr(c, "usage", None)), None)
    ids = [c.id for c in recorded.tool_calls]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> Any:
        data = {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        if with_usage_key:
            data["usage"] = None
        return cls.model_validate(data)

    chunks = [chunk({"role": "assistant", "content": "" if message.text else None})]
    if message.text:
        chunks.append(chunk({"content": message.text}))
    if message.refusal:
        chunks.append(chunk({"refusal": message.refusal}))
    for i, call in enumerate(message.tool_calls):
        ident = call.id or (ids[i] if i < len(ids) and ids[i] else f"call_override_{i}")
        head = {"index": i, "id": ident, "type": "function", "function": {"name": call.name, "arguments": ""}}
        chunks.append(chunk({"tool_calls": [head]}))
        chunks.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": call.arguments}}]}))
    finish = message.finish_reason or ("tool_calls" if message.tool_calls else "stop")
    chunks.append(chunk({}, finish))
    if usage_chunk is not None or message.usage:
        usage = usage_chunk.usage.model_dump(exclude_unset=True) if usage_chunk is not None else {}
        chunks.append(cls.model_validate({**base, "choices": [], "usage": {**usage, **(message.usage or {})}}))
    return chunks


def _members(annotation: Any, out: list[type]) -> list[type]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated or origin is typing.Union or origin is types.UnionType:
        args = typing.get_args(annotation)
        for arg in args[:1] if origin is typing.Annotated else args:
            _members(arg, out)
    elif isinstance(annotation, type):
        out.append(annotation)
    return out


def _event_classes(template: list[Any], union: str) -> dict[str, type]:
    """The SDK's event classes by their ``type``, from the union ``union`` of the package of the recorded events'
    classes (already imported: nothing is imported here)."""
    package = type(template[0]).__module__.rpartition(".")[0]
    found = getattr(sys.modules.get(package), union, None)
    classes: dict[str, type] = {}
    for cls in _members(found, []):
        field = getattr(cls, "model_fields", {}).get("type")
        annotation = getattr(field, "annotation", None)
        if typing.get_origin(annotation) is typing.Literal:
            for name in typing.get_args(annotation):
                classes.setdefault(name, cls)
    if not classes:
        raise ValueError(f"the SDK of the recorded events has no {package}.{union}")
    return classes


def _rebuild_anthropic(template: list[Any], message: Assembled, recorded: Assembled) -> list[Any]:
    classes = _event_classes(template, "RawMessageStreamEvent")

    def event(data: dict[str, Any]) -> Any:
        return classes[data["type"]].model_validate(data)  # type: ignore[attr-defined]

    start = next((e for e in template if getattr(e, "type", None) == "message_start"), None)
    if start is None:
        raise ValueError("the recorded stream has no message_start event to take the message's id and model from")
    updates = {k: v for k, v in (("id", message.id), ("model", message.model)) if v}
    events = [start.model_copy(update={"message": start.message.model_copy(update=updates)}) if updates else start]
    ids = [c.id for c in recorded.tool_calls]
    index = 0
    if message.text:
        events.append(event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}))
        delta = {"type": "text_delta", "text": message.text}
        events.append(event({"type": "content_block_delta", "index": 0, "delta": delta}))
        events.append(event({"type": "content_block_stop", "index": 0}))
        index = 1
    for i, call in enumerate(message.tool_calls):
        ident = call.id or (ids[i] if i < len(ids) and ids[i] else f"toolu_override_{i}")
        block: dict[str, Any] = {"type": "tool_use", "id": ident, "name": call.name, "input": {}}
        events.append(event({"type": "content_block_start", "index": index, "content_block": block}))
        delta = {"type": "input_json_delta", "partial_json": call.arguments}
        events.append(event({"type": "content_block_delta", "index": index, "delta": delta}))
        events.append(event({"type": "content_block_stop", "index": index}))
        index += 1
    recorded_delta = next((e for e in template if getattr(e, "type", None) == "message_delta"), None)
    usage = {"output_tokens": 0}
    if recorded_delta is not None and getattr(recorded_delta, "usage", None) is not None:
        usage = recorded_delta.usage.model_dump(exclude_unset=True)
    if message.usage:
        usage = {**usage, **{k: v for k, v in message.usage.items() if k.endswith("tokens")}}
    stop = message.finish_reason or ("tool_use" if message.tool_calls else "end_turn")
    events.append(
        event({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": usage})
    )
    events.append(event({"type": "message_stop"}))
    return events


def _rebuild_responses(template: list[Any], message: Assembled, recorded: Assembled) -> list[Any]:
    classes = _event_classes(template, "ResponseStreamEvent")
    sequence = iter(range(1 << 30))

    def event(data: dict[str, Any]) -> Any:
        return classes[data["type"]].model_validate({**data, "sequence_number": next(sequence)})  # type: ignore[attr-defined]

    def recorded_event(kind: str) -> Any:
        return next((e for e in template if getattr(e, "type", None) == kind), None)

    def again(found: Any, **update: Any) -> Any:
        return found.model_copy(update={**update, "sequence_number": next(sequence)})

    created = recorded_event("response.created")
    events = []
    if created is not None:
        updates = {k: v for k, v in (("id", message.id), ("model", message.model)) if v}
        events.append(again(created, response=created.response.model_copy(update=updates)))
    progress = recorded_event("response.in_progress")
    if progress is not None:
        events.append(again(progress))
    final_items: list[Any] = []
    index = 0
    if message.text:
        item: dict[str, Any] = {"id": "msg_override_0", "type": "message", "role": "assistant", "content": []}
        item["status"] = "in_progress"
        where = {"item_id": item["id"], "output_index": index, "content_index": 0}
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        events.append(event({"type": "response.output_item.added", "output_index": index, "item": item}))
        events.append(event({"type": "response.content_part.added", **where, "part": part}))
        events.append(event({"type": "response.output_text.delta", **where, "delta": message.text, "logprobs": []}))
        events.append(event({"type": "response.output_text.done", **where, "text": message.text, "logprobs": []}))
        part = {**part, "text": message.text}
        events.append(event({"type": "response.content_part.done", **where, "part": part}))
        done = {**item, "status": "completed", "content": [part]}
        events.append(event({"type": "response.output_item.done", "output_index": index, "item": done}))
        final_items.append(events[-1].item)
        index += 1
    ids = [c.id for c in recorded.tool_calls]
    for i, call in enumerate(message.tool_calls):
        call_id = call.id or (ids[i] if i < len(ids) and ids[i] else f"call_override_{i}")
        item = {"id": f"fc_override_{i}", "type": "function_call", "status": "in_progress", "arguments": ""}
        item["call_id"], item["name"] = call_id, call.name
        where = {"item_id": item["id"], "output_index": index}
        events.append(event({"type": "response.output_item.added", "output_index": index, "item": item}))
        events.append(event({"type": "response.function_call_arguments.delta", **where, "delta": call.arguments}))
        done_args = {"type": "response.function_call_arguments.done", **where, "arguments": call.arguments}
        events.append(event({**done_args, "name": call.name}))
        done = {**item, "status": "completed", "arguments": call.arguments}
        events.append(event({"type": "response.output_item.done", "output_index": index, "item": done}))
        final_items.append(events[-1].item)
        index += 1
    completed = recorded_event("response.completed")
    if completed is not None:
        update: dict[str, Any] = {"output": final_items}
        update.update({k: v for k, v in (("id", message.id), ("model", message.model)) if v})
        usage = completed.response.usage
        if message.usage is not None and usage is not None:
            update["usage"] = type(usage).model_validate({**usage.model_dump(), **message.usage})
        events.append(again(completed, response=completed.response.model_copy(update=update)))
    return events


def _rebuild_langchain(template: list[Any], message: Assembled, recorded: Assembled) -> list[Any]:
    first = template[0]
    pieces = [
        {"name": call.name, "args": call.arguments, "id": call.id or f"call_override_{i}", "index": i}
        for i, call in enumerate(message.tool_calls)
    ]
    metadata: dict[str, Any] = {}
    if message.finish_reason or recorded.finish_reason:  # said as the recorded model said it, for this message
        metadata["finish_reason"] = message.finish_reason or ("tool_calls" if message.tool_calls else "stop")
    if message.model or recorded.model:
        metadata["model_name"] = message.model or recorded.model
    kwargs: dict[str, Any] = {"content": message.text, "id": message.id or first.id, "tool_call_chunks": pieces}
    if metadata:
        kwargs["response_metadata"] = metadata
    usage = message.usage if message.usage is not None else recorded.usage
    if usage and all(k in usage for k in ("input_tokens", "output_tokens", "total_tokens")):
        kwargs["usage_metadata"] = usage
    return [type(first)(**kwargs)]


_REBUILDERS: Final = {
    "openai.chat": _rebuild_chat,
    "anthropic": _rebuild_anthropic,
    "openai.responses": _rebuild_responses,
    "langchain": _rebuild_langchain,
}

publish(__name__, globals())
