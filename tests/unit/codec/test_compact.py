"""The compact encoding of pydantic models: set fields only, nested models of their annotation's class untagged, a
class written once per run of list items. Measured on realistic streams read by the real SDKs, and checked to
rebuild every value exactly (values, ``model_fields_set``, extras), old recordings included."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, List, Optional  # noqa: UP035 - the typing forms are what SDK annotations use

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from chronicle_otel import codec
from chronicle_otel.codec import UnresolvedObject, decode, encode, join_encoded, same_encoding, upgrade_encoding
from chronicle_otel.codec._models import _model_slots
from chronicle_otel.errors import CodecError
from tests.llm_servers import LLMServer

# The SDKs are imported by the functions that read or build their values, not when pytest collects the module:
# importing anthropic alone takes about two seconds.
if TYPE_CHECKING:
    from langchain_core.messages import AIMessageChunk

HERE = __name__
SPAN_CAP = 8192
"""The default ``max_attribute_length``: a payload longer than this is cut on its span."""
SDKS = ("openai.", "anthropic.", "langchain_core.")

# ------------------------------------------------------------------------------------------------------------------
# Realistic streams: the wire format the providers send today, read by the real SDK clients

ARGS = json.dumps({"symbol": "MSFT", "quantity": 1000, "side": "sell", "order_type": "market"})
TEXT = "Selling 1,000 shares of MSFT at market, as you asked: the order goes out at the open."
CREATED = 1_754_012_345


def split(text: str, parts: int) -> list[str]:
    """``text`` in ``parts`` consecutive pieces."""
    bounds = [len(text) * i // parts for i in range(parts + 1)]
    return [text[bounds[i] : bounds[i + 1]] for i in range(parts)]


def chat_chunks(tool: bool, count: int = 20) -> list[dict[str, Any]]:
    """A streamed chat completion of ``count`` chunks (the last one the usage), as OpenAI sends it."""
    base = {
        "id": "chatcmpl-C3x9QkPz8d2VYh1mLr0TnQe5WbXs",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": "gpt-4.1-2025-04-14",
        "service_tier": "default",
        "system_fingerprint": "fp_b3f1157249",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**base, "choices": [choice], "usage": None, "obfuscation": "kZ3"}

    chunks = []
    if tool:
        call = {
            "index": 0,
            "id": "call_Xq7Tb2mN4pL9sK1vR8wYc3Jd",
            "type": "function",
            "function": {"name": "place_order", "arguments": ""},
        }
        head = {"role": "assistant", "content": None, "tool_calls": [call], "refusal": None, "annotations": []}
        chunks.append(chunk(head))
        chunks += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in split(ARGS, count - 3)]
        chunks.append(chunk({}, "tool_calls"))
    else:
        chunks.append(chunk({"role": "assistant", "content": "", "refusal": None, "annotations": []}))
        chunks += [chunk({"content": p}) for p in split(TEXT, count - 3)]
        chunks.append(chunk({}, "stop"))
    usage = {
        "prompt_tokens": 412,
        "completion_tokens": 31,
        "total_tokens": 443,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    chunks.append({**base, "choices": [], "usage": usage, "obfuscation": "q1"})
    return chunks


def response_events(tool: bool, deltas: int = 17) -> list[dict[str, Any]]:
    """A streamed Responses API answer, as OpenAI sends it."""
    rid = "resp_68a1c0ffee5b8193a2d1f0c4e7b2a9d30b1e7c6f5a4d3c2b"

    def response(status: str, output: list[Any], usage: Any) -> dict[str, Any]:
        return {
            "id": rid,
            "object": "response",
            "created_at": CREATED,
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "max_output_tokens": None,
            "max_tool_calls": None,
            "model": "gpt-4.1-2025-04-14",
            "output": output,
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "prompt_cache_key": None,
            "reasoning": {"effort": None, "summary": None},
            "safety_identifier": None,
            "service_tier": "auto",
            "store": True,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": "auto",
            "tools": [],
            "top_logprobs": 0,
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": usage,
            "user": None,
            "metadata": {},
        }

    usage = {
        "input_tokens": 412,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 31,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 443,
    }
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": response("in_progress", [], None)},
        {"type": "response.in_progress", "response": response("in_progress", [], None)},
    ]
    if tool:
        item = {
            "id": "fc_68a1c0ffee5b81939d2f",
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": "call_Xq7Tb2mN4pL9sK1vR8wYc3Jd",
            "name": "place_order",
        }
        at = {"item_id": item["id"], "output_index": 0}
        events.append({"type": "response.output_item.added", "output_index": 0, "item": item})
        for piece in split(ARGS, deltas):
            delta = {"type": "response.function_call_arguments.delta", **at, "delta": piece, "obfuscation": "aB3"}
            events.append(delta)
        events.append({"type": "response.function_call_arguments.done", **at, "arguments": ARGS})
        final = {**item, "status": "completed", "arguments": ARGS}
    else:
        item = {"id": "msg_68a1c0ffee5b81939d2f", "type": "message", "status": "in_progress", "content": []}
        item["role"] = "assistant"
        at = {"item_id": item["id"], "output_index": 0, "content_index": 0}
        empty = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        events.append({"type": "response.output_item.added", "output_index": 0, "item": item})
        events.append({"type": "response.content_part.added", **at, "part": empty})
        for piece in split(TEXT, deltas):
            delta = {"type": "response.output_text.delta", **at, "delta": piece, "logprobs": [], "obfuscation": "aB3"}
            events.append(delta)
        events.append({"type": "response.output_text.done", **at, "text": TEXT, "logprobs": []})
        part = {**empty, "text": TEXT}
        events.append({"type": "response.content_part.done", **at, "part": part})
        final = {**item, "status": "completed", "content": [part]}
    events.append({"type": "response.output_item.done", "output_index": 0, "item": final})
    events.append({"type": "response.completed", "response": response("completed", [final], usage)})
    return [{**event, "sequence_number": i} for i, event in enumerate(events)]


def message_events(tool: bool, deltas: int = 17) -> list[dict[str, Any]]:
    """A streamed Anthropic message, as Anthropic sends it."""
    start = {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-20250514",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 412,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
            "output_tokens": 1,
            "service_tier": "standard",
        },
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    if tool:
        block = {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "place_order", "input": {}}
        events.append({"type": "content_block_start", "index": 0, "content_block": block})
        for piece in split(ARGS, deltas):
            delta = {"type": "input_json_delta", "partial_json": piece}
            events.append({"type": "content_block_delta", "index": 0, "delta": delta})
        stop = "tool_use"
    else:
        events.append({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        events.append({"type": "ping"})
        for piece in split(TEXT, deltas - 1):
            events.append({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}})
        stop = "end_turn"
    events.append({"type": "content_block_stop", "index": 0})
    delta = {"stop_reason": stop, "stop_sequence": None}
    events.append({"type": "message_delta", "delta": delta, "usage": {"output_tokens": 31}})
    events.append({"type": "message_stop"})
    return events


def langchain_chunks(tool: bool) -> list[AIMessageChunk]:
    """What a LangChain chat model streams (``AIMessageChunk``: content, tool call chunks, usage)."""
    from langchain_core.messages import AIMessageChunk
    from langchain_core.messages.tool import tool_call_chunk

    chunks = []
    if tool:
        first = tool_call_chunk(name="place_order", args="", id="call_Xq7Tb2mN4pL9sK1vR8wYc3Jd", index=0)
        chunks.append(AIMessageChunk(content="", id="run-abc", tool_call_chunks=[first]))
        for piece in split(ARGS, 17):
            more = tool_call_chunk(name=None, args=piece, id=None, index=0)
            chunks.append(AIMessageChunk(content="", id="run-abc", tool_call_chunks=[more]))
        metadata = {"finish_reason": "tool_calls", "model_name": "gpt-4.1-2025-04-14"}
        chunks.append(AIMessageChunk(content="", id="run-abc", response_metadata=metadata))
    else:
        chunks += [AIMessageChunk(content=piece, id="run-abc") for piece in split(TEXT, 19)]
    usage = {"input_tokens": 412, "output_tokens": 31, "total_tokens": 443}
    chunks.append(AIMessageChunk(content="", id="run-abc", usage_metadata=usage))
    return chunks


def _route(events: dict[str, list[dict[str, Any]]], chat: bool) -> Any:
    """A route of :class:`LLMServer` that streams the events of the case the request's model names."""

    def plain(body: dict[str, Any], reply: Any, n: int, model: str) -> dict[str, Any]:
        raise AssertionError("only streams are served")

    def streamed(body: dict[str, Any], reply: Any, n: int, model: str) -> Iterator[tuple[str | None, Any]]:
        for event in events[model]:
            yield (None if chat else event["type"]), event
        if chat:
            yield None, "[DONE]"

    return plain, streamed


def read_streams() -> dict[str, list[Any]]:
    """Every realistic stream, as the real SDK clients read it from a local server (typed, as they made it)."""
    import anthropic
    import openai

    wire = {
        "chat-tool": chat_chunks(True),
        "chat-text": chat_chunks(False),
        "responses-tool": response_events(True),
        "responses-text": response_events(False),
        "anthropic-tool": message_events(True),
        "anthropic-text": message_events(False),
    }
    error = lambda message: {"error": {"message": message}}  # noqa: E731
    routes = {
        "/v1/chat/completions": _route(wire, chat=True),
        "/v1/responses": _route(wire, chat=False),
        "/v1/messages": _route(wire, chat=False),
    }
    with pytest.MonkeyPatch.context() as env:
        for name in list(os.environ):
            if name.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
                env.delenv(name)
        with LLMServer(routes, error) as server:
            oa = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
            an = anthropic.Anthropic(base_url=server.url, api_key="test", max_retries=0)
            try:
                messages: Any = [{"role": "user", "content": "sell"}]
                read: dict[str, list[Any]] = {}
                for case in ("chat-tool", "chat-text"):
                    read[case] = list(oa.chat.completions.create(model=case, messages=messages, stream=True))
                for case in ("responses-tool", "responses-text"):
                    read[case] = list(oa.responses.create(model=case, input="sell", stream=True))
                for case in ("anthropic-tool", "anthropic-text"):
                    read[case] = list(an.messages.create(model=case, max_tokens=99, messages=messages, stream=True))
            finally:
                oa.close()
                an.close()
    read["langchain-tool"] = langchain_chunks(True)
    read["langchain-text"] = langchain_chunks(False)
    return read


@pytest.fixture(scope="module")
def streams() -> dict[str, list[Any]]:
    """:func:`read_streams`, once per module."""
    return read_streams()


# ------------------------------------------------------------------------------------------------------------------
# Helpers: the encoding of an earlier version, and exact comparison


def old_tree(value: Any) -> Any:
    """``value`` as an earlier version encoded it: every field of a model, ``unset`` for those left to defaults."""
    if isinstance(value, BaseModel):
        cls = type(value)
        names = list(type(value).model_fields)
        data = {name: getattr(value, name) for name in names}
        for key, extra in (value.__pydantic_extra__ or {}).items():
            data.setdefault(key, extra)
        name = f"{cls.__module__}.{cls.__qualname__}"
        tree: dict[str, Any] = {"$type": "pydantic", "class": name, "data": old_tree(data)}
        unset = [name for name in names if name not in value.model_fields_set]
        if unset:
            tree["unset"] = unset
        private = {k: v for k, v in (value.__pydantic_private__ or {}).items() if v is not None}
        if private:
            tree["private"] = private
        return tree
    if type(value) is list:
        return [old_tree(x) for x in value]
    if type(value) is dict:
        if all(type(k) is str for k in value) and "$type" not in value:
            return {k: old_tree(x) for k, x in value.items()}
        pairs = sorted(([old_tree(k), old_tree(x)] for k, x in value.items()), key=lambda kv: orjson.dumps(kv[0]))
        return {"$type": "dict", "items": pairs}
    return codec.to_json_value(value)


def old_encode(value: Any) -> bytes:
    return orjson.dumps(old_tree(value), option=orjson.OPT_SORT_KEYS)


def same(a: Any, b: Any, path: str = "$", *, extras_set: bool = True) -> None:
    """``a`` and ``b`` hold the same values: same types, fields, extras, private attributes and fields set."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, BaseModel):
        expected = a.model_fields_set if extras_set else a.model_fields_set & set(type(a).model_fields)
        assert b.model_fields_set == expected, f"{path}: fields set {b.model_fields_set} != {expected}"
        assert (a.__pydantic_extra__ or {}).keys() == (b.__pydantic_extra__ or {}).keys(), f"{path}: extras"
        assert a.__pydantic_private__ == b.__pydantic_private__, f"{path}: private"
        for name in a.__dict__:
            same(a.__dict__[name], b.__dict__[name], f"{path}.{name}", extras_set=extras_set)
        for name, value in (a.__pydantic_extra__ or {}).items():
            same(value, b.__pydantic_extra__[name], f"{path}.{name}", extras_set=extras_set)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{path}: {len(a)} != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):  # noqa: B905 - lengths checked
            same(x, y, f"{path}[{i}]", extras_set=extras_set)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), f"{path}: keys {list(a)} != {list(b)}"
        for key in a:
            same(a[key], b[key], f"{path}.{key}", extras_set=extras_set)
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


# ------------------------------------------------------------------------------------------------------------------
# Realistic streams: bytes, exact rebuild, old recordings


def test_a_twenty_chunk_streamed_tool_call_fits_the_span_cap(streams: dict[str, list[Any]]) -> None:
    chunks = streams["chat-tool"]
    assert len(chunks) == 20 and all(type(c).__name__ == "ChatCompletionChunk" for c in chunks)
    assert len(old_encode(chunks)) > 2.5 * SPAN_CAP, "every field and class name, in every chunk"
    assert len(encode(chunks)) <= SPAN_CAP
    assert join_encoded([encode(c) for c in chunks]) == encode(chunks), "a stream joined from its items: the same"


@pytest.mark.parametrize(
    "case", ["chat-tool", "chat-text", "responses-tool", "responses-text", "anthropic-tool", "anthropic-text"]
)
def test_every_stream_is_smaller_and_rebuilds_exactly(streams: dict[str, list[Any]], case: str) -> None:
    items = streams[case]
    data = encode(items)
    assert len(data) < 0.85 * len(old_encode(items))
    assert join_encoded([encode(i) for i in items]) == data
    back = decode(data, allow=SDKS)
    same(items, back)
    assert [i.to_dict() for i in back] == [i.to_dict() for i in items], "the SDK's own view: the unset left out"
    assert encode(back) == data


@pytest.mark.parametrize("case", ["langchain-tool", "langchain-text"])
def test_langchain_chunks_rebuild_exactly(streams: dict[str, list[Any]], case: str) -> None:
    items = streams[case]
    back = decode(encode(items), allow=SDKS)
    same(items, back)
    assert sum(back[1:], back[0]) == sum(items[1:], items[0]), "LangChain's own accumulation"


def test_the_sdk_accumulates_the_rebuilt_chunks_as_it_did(streams: dict[str, list[Any]]) -> None:
    from openai.lib.streaming.chat import ChatCompletionStreamState

    def final(chunks: list[Any]) -> Any:
        state = ChatCompletionStreamState()
        for chunk in chunks:
            state.handle_chunk(chunk)
        return state.get_final_completion()

    for case in ("chat-tool", "chat-text"):
        chunks = streams[case]
        assert final(decode(encode(chunks), allow=SDKS)).to_dict() == final(chunks).to_dict()
    message = final(decode(encode(streams["chat-tool"]), allow=SDKS)).choices[0].message
    assert json.loads(message.tool_calls[0].function.arguments) == json.loads(ARGS)


@pytest.mark.parametrize("case", ["chat-tool", "responses-text", "anthropic-tool", "langchain-tool"])
def test_old_recordings_decode_as_before_and_compare_equal(streams: dict[str, list[Any]], case: str) -> None:
    items = streams[case]
    old = old_encode(items)
    same(items, decode(old, allow=SDKS), extras_set=False)  # an earlier version did not record set extras
    assert same_encoding(old.decode(), encode(items).decode()), "a replay sees no drift in an old recording"
    if b"set_extras" not in encode(items):
        assert upgrade_encoding(old.decode()) == encode(items).decode()


def test_the_byte_measurements(streams: dict[str, list[Any]]) -> None:
    """The numbers of docs/streams.md: the stored ``chronicle.output`` of each stream, before and after."""
    sizes = {case: (len(old_encode(items)), len(encode(items))) for case, items in streams.items()}
    for case, (before, after) in sizes.items():
        print(f"{case:16s} {len(streams[case]):3d} items  {before:6,d} -> {after:6,d} characters")
    assert sizes["chat-tool"][1] <= SPAN_CAP
    assert all(after < before for before, after in sizes.values())


# ------------------------------------------------------------------------------------------------------------------
# Models of every shape, generated


class Leaf(BaseModel):
    x: int = 0
    label: str | None = None


class SubLeaf(Leaf):
    z: int = 1


class Twig(BaseModel):
    y: str = "y"


class Noted(BaseModel):
    v: int = 0
    _note: str | None = PrivateAttr(None)


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    a: int = 1
    leaf: Leaf | None = None


class Aliased(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    value: int = Field(0, alias="Value")
    leaf: Leaf | None = Field(None, alias="theLeaf")


class Tree(BaseModel):
    leaf: Leaf | None = None
    leaves: list[Leaf] = []
    maybe_leaves: Optional[List[Leaf]] = None  # noqa: UP006, UP045 - the typing forms SDKs use
    either: Leaf | Twig | None = None
    leaf_or_map: Leaf | dict[str, int] | None = None
    leaf_or_twigs: Leaf | list[Twig] | None = None
    by_name: dict[str, Leaf] = {}
    anything: Any = None
    loose: Loose | None = None
    aliased: Aliased | None = None
    noted: Noted | None = None
    children: list[Tree] = []


HOW = st.sampled_from(["init", "construct", "validate"])
NAMES = st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=6,
)


def made(cls: type[BaseModel], how: str, kwargs: dict[str, Any]) -> Any:
    if how == "construct":
        return cls.model_construct(**kwargs)
    if how == "validate":
        return cls.model_validate(kwargs)
    return cls(**kwargs)


@st.composite
def leaves(draw: st.DrawFn) -> Any:
    cls = draw(st.sampled_from([Leaf, Leaf, SubLeaf]))
    optional = {"x": st.integers(0, 3), "label": st.none() | st.text(max_size=3)}
    kwargs = draw(st.fixed_dictionaries({}, optional=optional))
    return made(cls, draw(HOW), kwargs)  # x=0 given is a default set explicitly: it stays set


@st.composite
def looses(draw: st.DrawFn) -> Any:
    kwargs = draw(st.fixed_dictionaries({}, optional={"a": st.integers(0, 2), "leaf": leaves()}))
    names = NAMES.filter(lambda n: n not in ("a", "leaf")) | st.just("$type")
    kwargs.update(draw(st.dictionaries(names, JSON | leaves(), max_size=2)))
    return made(Loose, draw(HOW), kwargs)  # validated: the extras count as set; constructed: they do not


@st.composite
def aliaseds(draw: st.DrawFn) -> Any:
    by_alias = draw(st.booleans())
    names = ("Value", "theLeaf") if by_alias else ("value", "leaf")
    kwargs = draw(st.fixed_dictionaries({}, optional={names[0]: st.integers(0, 2), names[1]: leaves()}))
    return Aliased.model_validate(kwargs) if by_alias else made(Aliased, draw(HOW), kwargs)


@st.composite
def noteds(draw: st.DrawFn) -> Any:
    noted = Noted(v=draw(st.integers(0, 2)))
    noted._note = draw(st.none() | st.text(max_size=3))
    return noted


def trees(depth: int = 2) -> st.SearchStrategy[Any]:
    @st.composite
    def build(draw: st.DrawFn) -> Any:
        fields: dict[str, Any] = {
            "leaf": st.none() | leaves(),
            "leaves": st.lists(leaves(), max_size=3),
            "maybe_leaves": st.none() | st.lists(leaves(), max_size=3),
            "either": st.none() | leaves() | st.builds(Twig, y=st.text(max_size=2)),
            "leaf_or_map": st.none() | leaves() | st.dictionaries(NAMES, st.integers(0, 3), max_size=2),
            "leaf_or_twigs": st.none() | leaves() | st.lists(st.builds(Twig), max_size=2),
            "by_name": st.dictionaries(NAMES, leaves(), max_size=2),
            "anything": JSON | leaves() | st.lists(leaves() | JSON, max_size=4),
            "loose": st.none() | looses(),
            "aliased": st.none() | aliaseds(),
            "noted": st.none() | noteds(),
        }
        if depth:
            fields["children"] = st.lists(trees(depth - 1), max_size=2)
        kwargs = draw(st.fixed_dictionaries({}, optional=fields))
        how = draw(st.sampled_from(["init", "construct"]))  # validation would copy the nested models it is given
        return made(Tree, how, kwargs)

    return build()


VALUES = st.lists(trees() | leaves() | looses() | JSON | st.text(max_size=3), max_size=5) | trees()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(VALUES)
def test_models_of_every_shape_rebuild_with_their_fields_set(value: Any) -> None:
    data = encode(value)
    same(value, decode(data, allow=[HERE]))
    if type(value) is list:
        assert join_encoded([encode(v) for v in value]) == data


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(VALUES)
def test_old_format_payloads_decode_and_compare_equal(value: Any) -> None:
    old = old_encode(value)
    same(value, decode(old, allow=[HERE]), extras_set=False)
    assert same_encoding(old.decode(), encode(value).decode())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees())
def test_without_the_allow_list_nothing_is_rebuilt(value: Any) -> None:
    decoded = decode(encode(value))
    assert isinstance(decoded, UnresolvedObject) and decoded.class_name == f"{HERE}.Tree"

    def no_models(x: Any) -> None:
        assert not isinstance(x, BaseModel)
        for y in x.values() if isinstance(x, dict) else x if isinstance(x, list) else ():
            no_models(y)
        if isinstance(x, UnresolvedObject):
            no_models(x.data)

    no_models(decoded)


# ------------------------------------------------------------------------------------------------------------------
# The rules, one by one


def test_only_the_fields_that_were_set_are_written() -> None:
    tree = orjson.loads(encode(Leaf(x=0)))
    assert tree == {"$type": "pydantic", "class": f"{HERE}.Leaf", "fields": {"x": 0}}
    assert decode(encode(Leaf()), allow=[HERE]).model_fields_set == set()
    assert decode(encode(Leaf(x=0)), allow=[HERE]).model_fields_set == {"x"}


def test_a_nested_model_of_its_annotations_class_is_written_without_its_class() -> None:
    tree = orjson.loads(encode(Tree(leaf=Leaf(x=1), leaves=[Leaf(x=2), SubLeaf(x=3)], either=Twig())))
    fields = tree["fields"]
    assert fields["leaf"] == {"x": 1}
    assert fields["leaves"][0] == {"x": 2} and fields["leaves"][1]["class"] == f"{HERE}.SubLeaf"
    assert fields["either"]["class"] == f"{HERE}.Twig", "a union of two models keeps the class"


def test_a_mapping_where_a_model_may_be_stays_a_mapping() -> None:
    value = Tree(leaf_or_map={"x": 1})
    assert orjson.loads(encode(value))["fields"]["leaf_or_map"]["$type"] == "dict"
    back = decode(encode(value), allow=[HERE])
    assert back.leaf_or_map == {"x": 1} and type(back.leaf_or_map) is dict


def test_a_run_of_one_class_names_it_once() -> None:
    items = [Leaf(x=1), Leaf(x=2), Twig(), Leaf(x=3), {"x": 4}, Leaf(x=5)]
    tree = orjson.loads(encode(items))
    assert [("class" in t) if isinstance(t, dict) and "$type" in t else None for t in tree] == [
        True,
        False,
        True,
        True,
        None,
        True,
    ]
    same(items, decode(encode(items), allow=[HERE]))


def test_extras_a_validated_model_counts_as_set_are_recorded() -> None:
    value = Loose.model_validate({"a": 1, "newer": [1]})
    assert value.model_fields_set == {"a", "newer"}
    assert orjson.loads(encode(value))["set_extras"] == ["newer"]
    same(value, decode(encode(value), allow=[HERE]))


@pytest.mark.parametrize(
    "payload",
    [
        {"$type": "pydantic", "fields": {"x": 1}},  # no class and no model before it
        [{"$type": "pydantic", "fields": {"x": 1}}],
        [1, {"$type": "pydantic", "fields": {"x": 1}}],
        {"$type": "pydantic", "class": f"{HERE}.Leaf", "fields": {"x": 1}, "set_extras": "x"},
        {"$type": "pydantic", "class": f"{HERE}.Leaf", "fields": [1]},
    ],
)
def test_malformed_compact_payloads_are_codec_errors(payload: Any) -> None:
    with pytest.raises(CodecError):
        decode(orjson.dumps(payload), allow=[HERE])


def test_a_class_named_by_the_previous_item_is_rebuilt_only_when_allowed() -> None:
    data = encode([Leaf(x=1), Leaf(x=2)])
    assert [type(v) for v in decode(data, allow=[HERE])] == [Leaf, Leaf]
    unresolved = decode(data)
    assert unresolved == [
        UnresolvedObject("pydantic", f"{HERE}.Leaf", {"x": 1}),
        UnresolvedObject("pydantic", f"{HERE}.Leaf", {"x": 2}),
    ]


class Late(BaseModel):
    later: Missing | None = None  # type: ignore[name-defined]  # noqa: F821 - a forward reference to nothing


def test_a_model_whose_annotations_are_not_resolved_keeps_its_tags() -> None:
    assert _model_slots(Late) == {}
    assert decode(encode(Late.model_construct(later={"x": 1})), allow=[HERE]).later == {"x": 1}


def test_sdk_values_of_another_kind_still_round_trip() -> None:
    """A whole response (not a stream) of each SDK: private attributes and nested unions included."""
    from openai.types.chat import ChatCompletion

    completion = ChatCompletion.construct(
        id="chatcmpl-1",
        object="chat.completion",
        created=CREATED,
        model="gpt-4.1",
        choices=[
            {
                "index": 0,
                "finish_reason": "stop",
                "logprobs": None,
                "message": {"role": "assistant", "content": "hi", "refusal": None, "annotations": []},
            }
        ],
    )
    completion._request_id = "req_1"  # type: ignore[attr-defined]
    back = decode(encode(completion), allow=SDKS)
    same(completion, back)
    assert back.to_dict() == completion.to_dict()


def test_a_drift_report_lists_what_changed_not_how_models_used_to_be_written() -> None:
    from chronicle_otel.replaying._report import diff_lines

    recorded = old_encode({"order": Tree(leaf=Leaf(x=1), leaves=[Leaf(x=2), Leaf(x=3)])}).decode()
    same_now = encode({"order": Tree(leaf=Leaf(x=1), leaves=[Leaf(x=2), Leaf(x=3)])}).decode()
    changed = encode({"order": Tree(leaf=Leaf(x=5), leaves=[Leaf(x=2), Leaf(x=3)])}).decode()
    assert same_encoding(recorded, same_now) and diff_lines(recorded, same_now) == []
    assert not same_encoding(recorded, changed)
    assert diff_lines(recorded, changed) == ["$.order.leaf.x: recorded 1 != now 5"]


def test_a_field_named_by_alias_comes_back_under_its_name_and_never_as_an_extra() -> None:
    from openai.types.responses.response_format_text_json_schema_config import (
        ResponseFormatTextJSONSchemaConfig as SchemaConfig,
    )

    sdk = SchemaConfig.model_validate(
        {"name": "Order", "schema": {"type": "object"}, "strict": True, "type": "json_schema"}
    )
    rebuilt = decode(encode(sdk), allow=("openai.",))
    assert rebuilt == sdk and rebuilt.schema_ == {"type": "object"}
    assert rebuilt.model_fields_set == sdk.model_fields_set and not rebuilt.__pydantic_extra__

    model = AliasedConfig.model_validate({"schema": {"a": 1}})
    again = decode(encode(model), allow=(f"{__name__}.",))
    assert again == model and again.model_fields_set == {"schema_"}


class AliasedConfig(BaseModel):
    """A field named by alias, without populate_by_name."""

    schema_: dict[str, int] = Field(alias="schema")
    other: int = 1
