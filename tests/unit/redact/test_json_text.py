"""Secrets by key name inside JSON text: a string holding JSON (a tool call's arguments), whole or streamed."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import chronicle_otel as chronicle
from chronicle_otel import codec
from chronicle_otel.cli import main
from chronicle_otel.record._payloads import encode_stream
from chronicle_otel.redact import REDACTED, PatternRedactor, key_filter
from chronicle_otel.redact._json import _map_strings
from chronicle_otel.redact._json_text import MAX_JSON_TEXT, json_text_edits, redact_json_text, split_edits
from tests.conftest import make_recorder
from tests.llm_servers import Reply, anthropic_server, openai_server
from tests.otlp_sink import OtlpSink, serve_otlp

PW = "Zx9kQ2w" + "L8rTmPq4vNs7yHb3c"  # an opaque secret: found by the name it is given, never by its format
ARGS = json.dumps({"user": "bob", "password": PW})
MARKED = json.dumps({"user": "bob", "password": REDACTED})
KEYS = key_filter()


def _parts_of(secret: str, width: int = 5) -> list[str]:
    return [secret[i : i + width] for i in range(len(secret) - width + 1)]


# ------------------------------------------------------------------ one string


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (ARGS, MARKED),
        ('{"user":"bob","password":"x"}', '{"user":"bob","password":"[REDACTED]"}'),  # compact, as written
        ('\n  {"api_key": 1234, "n": 1}', '\n  {"api_key": "[REDACTED]", "n": 1}'),  # any type, leading space
        (
            '[{"token": {"a": [1, {"b": "c"}]}, "x": [true]}, {"Authorization": null}]',
            '[{"token": "[REDACTED]", "x": [true]}, {"Authorization": "[REDACTED]"}]',
        ),
        ('{"pass\\u0077ord": "x"}', '{"pass\\u0077ord": "[REDACTED]"}'),  # the key as JSON reads it
        ('{"password": "a\\"b\\\\"}', '{"password": "[REDACTED]"}'),  # escapes inside the value
        (
            '{"args": "{\\"password\\": \\"x\\", \\"n\\": 1}"}',  # JSON text inside JSON text
            '{"args": "{\\"password\\": \\"[REDACTED]\\", \\"n\\": 1}"}',
        ),
        ('{"password": "hunt', '{"password": "[REDACTED]"'),  # cut short: to the end
        ('{"secret": {"a": [1, 2', '{"secret": "[REDACTED]"'),
        ('{"a": 1}{"password": "x"}', '{"a": 1}{"password": "[REDACTED]"}'),  # one value after another
    ],
)
def test_the_values_of_secret_names_in_json_text_are_redacted(text: str, expected: str) -> None:
    assert redact_json_text(text, KEYS) == expected
    assert PatternRedactor().redact_text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        'say "password": now',  # not JSON text: text that quotes a name
        '{"text": "say \\"password\\": now", "ok": true}',  # a name inside a string value is no key
        '["password", "token"]',
        "[REDACTED]",
        '{"max_tokens": 5, "author": "ann"}',
        "",
        "   ",
    ],
)
def test_json_text_without_a_secret_name_is_the_same_object(text: str) -> None:
    assert redact_json_text(text, KEYS) is text


def test_json_text_longer_than_the_bound_is_left_to_the_value_formats() -> None:
    text = json.dumps({"pad": "x" * MAX_JSON_TEXT, "password": PW})
    assert redact_json_text(text, KEYS) is text


def test_a_failing_key_predicate_redacts() -> None:
    def broken(name: str) -> bool:
        raise RuntimeError(name)

    assert redact_json_text('{"a": 1}', broken) == '{"a": "[REDACTED]"}'


# ------------------------------------------------------------------ properties

_NAMES = ["password", "api_key", "clientSecret", "Authorization", "token", "user", "max_tokens", "id", "note", "a"]
_SECRET_NAMES = {n for n in _NAMES if KEYS(n)}
_plain_text = st.text(st.characters(blacklist_characters="§", blacklist_categories=("Cs",)), max_size=12)
_secret_text = st.builds(lambda s: "§" + s, _plain_text)  # the only strings holding §


def _json_values(leaf: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), leaf)
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(st.sampled_from(_NAMES) | _plain_text, inner, max_size=4),
        ),
        max_leaves=12,
    )


def _with_secrets(value: Any) -> Any:
    """``value`` with the value of every secret name made a secret (a § string, or a container of some)."""
    if isinstance(value, dict):
        return {k: (["§" + k, {"k": "§"}] if KEYS(k) else _with_secrets(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_secrets(v) for v in value]
    return value


_documents = _json_values(_plain_text).map(_with_secrets).filter(lambda v: isinstance(v, (dict, list)))
_layouts = st.sampled_from(
    [
        {},
        {"separators": (",", ":")},
        {"indent": 2},
        {"ensure_ascii": False},
        {"indent": "\t", "ensure_ascii": False},
    ]
)


def _keyed(value: Any) -> Any:
    """What the encoder makes of ``value`` when it walks it: secret names' values replaced."""
    return codec.to_json_value(value, redact=KEYS)


@settings(max_examples=300, deadline=None)
@given(_documents, _layouts)
def test_json_text_stays_valid_json_of_the_same_shape_without_a_secret(value: Any, layout: dict[str, Any]) -> None:
    text = json.dumps(value, **layout)
    redacted = redact_json_text(text, KEYS)
    assert json.loads(redacted) == _keyed(value)  # valid, the same shape, redacted as a mapping is
    assert "§" not in redacted and "\\u00a7" not in redacted
    if not any(KEYS(k) for k in _keys_of(value)):
        assert redacted is text


def _keys_of(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _keys_of(v)
    elif isinstance(value, list):
        for v in value:
            yield from _keys_of(v)


@settings(max_examples=200, deadline=None)
@given(_documents, _documents, _layouts)
def test_json_text_inside_json_text_is_redacted_too(outer: Any, inner: Any, layout: dict[str, Any]) -> None:
    value = {"arguments": json.dumps(inner, **layout), "rest": outer}
    redacted = json.loads(redact_json_text(json.dumps(value, **layout), KEYS))
    assert json.loads(redacted["arguments"]) == _keyed(inner)
    assert redacted["rest"] == _keyed(outer)


@settings(max_examples=200, deadline=None)
@given(_documents, _layouts, st.data())
def test_json_text_cut_anywhere_keeps_no_part_of_a_secret(value: Any, layout: dict[str, Any], data: Any) -> None:
    text = json.dumps(value, **{**layout, "ensure_ascii": False})
    cut = data.draw(st.integers(0, len(text)))
    assert "§" not in redact_json_text(text[:cut], KEYS)


@settings(max_examples=300, deadline=None)
@given(_documents, _layouts, st.lists(st.integers(0, 400), max_size=8))
def test_json_text_streamed_in_pieces_joins_to_the_redacted_text(
    value: Any, layout: dict[str, Any], cuts: list[int]
) -> None:
    text = json.dumps(value, **{**layout, "ensure_ascii": False})
    bounds = sorted({min(c, len(text)) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *bounds], [*bounds, len(text)], strict=True)]
    split = split_edits(pieces, json_text_edits(text, KEYS))
    assert "".join(split) == redact_json_text(text, KEYS)
    assert all("§" not in piece for piece in split)
    # through the stream encoder, as the chunks of a streamed tool call
    chunks = [_chunk(piece) for piece in pieces]
    encoded = encode_stream(chunks, PatternRedactor())
    assert "§".encode() not in encoded and b"\\u00a7" not in encoded
    joined = "".join(c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] for c in orjson.loads(encoded))
    assert json.loads(joined) == _keyed(value)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(_NAMES), _documents.map(json.dumps) | _plain_text, max_size=4))
def test_the_payload_scan_agrees_with_the_text_path(payload: dict[str, Any]) -> None:
    redactor = PatternRedactor()
    fast = orjson.loads(redactor.redact_json(codec.encode_unscanned(payload, redact=redactor)[0]))
    assert fast == _map_strings(codec.to_json_value(payload, redact=KEYS), redactor.redact_text)


def _chunk(arguments: str, index: int = 0) -> dict[str, Any]:
    call = {"index": index, "function": {"arguments": arguments}}
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}


# ------------------------------------------------------------------ payloads and streams


def test_a_payload_string_holding_json_keeps_its_layout() -> None:
    data = codec.encode({"arguments": ARGS, "other": 'He said "hi"'}, redact=PatternRedactor())
    assert orjson.loads(data) == {"arguments": MARKED, "other": 'He said "hi"'}


def test_a_payload_without_json_text_is_returned_as_is() -> None:
    data = codec.encode({"content": 'He said "password": no', "n": 1})
    assert PatternRedactor().redact_json(data) is data


def test_streamed_arguments_redacted_in_the_item_where_the_secret_starts() -> None:
    pieces = ['{"pass', 'word": "hun', "ter2", '"}']
    encoded = orjson.loads(encode_stream([_chunk(p) for p in pieces], PatternRedactor()))
    assert [c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] for c in encoded] == [
        '{"pass',
        'word": "[REDACTED]"',  # the value (a JSON string) starts here: the marker, as a JSON string
        "",  # wholly inside it: removed
        "}",  # its closing quote removed
    ]


def test_the_text_and_the_arguments_of_one_stream_are_read_apart() -> None:
    """A Responses stream: text deltas and argument deltas share the field ``delta``; read by the event's type."""
    text_events = [{"type": "response.output_text.delta", "delta": d} for d in ['Say "', "hi", '" {']]
    args_events = [{"type": "response.function_call_arguments.delta", "delta": d} for d in ['{"api', '_key": "k1234']]
    items = [*text_events, *args_events, {"type": "response.function_call_arguments.delta", "delta": '5"}'}]
    encoded = orjson.loads(encode_stream(items, PatternRedactor()))
    assert "".join(e["delta"] for e in encoded[3:]) == '{"api_key": "[REDACTED]"}'
    assert "".join(e["delta"] for e in encoded[:3]) == 'Say "hi" {'


def test_parallel_tool_calls_streamed_into_one_field() -> None:
    first, second = json.dumps({"city": "Paris"}), json.dumps({"token": PW})
    chunks = [_chunk(first[:5]), _chunk(first[5:]), _chunk(second[:12], 1), _chunk(second[12:], 1)]
    encoded = encode_stream(chunks, PatternRedactor())
    assert not any(part.encode() in encoded for part in _parts_of(PW))
    assert b"Paris" in encoded


def test_a_users_key_names_apply_to_json_text(tmp_path: Path) -> None:
    class AccountKeys:
        def redact_key(self, name: str) -> bool:
            return name == "account"

        def redact_text(self, text: str) -> str:
            return text

    text = json.dumps({"account": "acct-991", "password": PW, "n": 1})
    expected = json.dumps({"account": REDACTED, "password": REDACTED, "n": 1})
    rec = make_recorder(tmp_path, redaction=chronicle.RedactionOptions(redactor=AccountKeys()))
    assert rec.config.redact is not None
    assert rec.config.redact.redact_text(text) == expected
    assert orjson.loads(codec.encode([text], redact=rec.config.redact)) == [expected]
    # a user's redactor alone, through the codec: its key names, by the same rule
    alone = json.dumps({"account": REDACTED, "password": PW, "n": 1})  # its own names only
    assert orjson.loads(codec.encode([text], redact=AccountKeys())) == [alone]
    rec = make_recorder(tmp_path / "b", redaction=chronicle.RedactionOptions(keys=[r"(?i)account"]))
    assert rec.config.redact is not None
    assert rec.config.redact.redact_text(text) == expected


# ------------------------------------------------------------------ end to end, through the real SDKs


@pytest.fixture
def otlp() -> Iterator[OtlpSink]:
    with serve_otlp() as sink:
        yield sink


@pytest.fixture
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDKs build their HTTP clients with trust_env: a proxy from the environment would take 127.0.0.1 away."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


@chronicle.boundary(kind="tool", name="json_text.login")
def login(arguments: str) -> str:
    """A tool called with the model's arguments as the JSON text they are, answering with JSON text."""
    return json.dumps({"ok": True, **json.loads(arguments)})


@chronicle.boundary(kind="agent", name="json_text.agent")
def tool_agent(openai_url: str, anthropic_url: str) -> list[str]:
    """Ask for the tool call every way the SDKs give one (plain, streamed, helper stream), and run it."""
    import anthropic
    import openai

    oa = openai.OpenAI(base_url=f"{openai_url}/v1", api_key="test-key", max_retries=0)
    an = anthropic.Anthropic(base_url=anthropic_url, api_key="test-key", max_retries=0)
    ask: Any = [{"role": "user", "content": "log me in"}]
    try:
        plain = oa.chat.completions.create(model="gpt-test", messages=ask)
        call = plain.choices[0].message.tool_calls[0]  # type: ignore[index]
        seen = [call.function.arguments]  # type: ignore[union-attr]
        with oa.chat.completions.create(model="gpt-test", messages=ask, stream=True) as stream:
            pieces = [c.choices[0].delta.tool_calls[0].function.arguments or "" for c in stream if _has_call(c)]
        seen.append("".join(pieces))
        with oa.chat.completions.stream(model="gpt-test", messages=ask) as helper:
            final = helper.get_final_completion()
        seen.append(final.choices[0].message.tool_calls[0].function.arguments)  # type: ignore[index,union-attr]
        events = list(oa.responses.create(model="gpt-test", input="log me in", stream=True))
        seen.append("".join(e.delta for e in events if e.type == "response.function_call_arguments.delta"))
        with an.messages.create(model="claude-test", max_tokens=64, messages=ask, stream=True) as claude:
            deltas = [e.delta for e in claude if e.type == "content_block_delta"]
        seen.append("".join(getattr(d, "partial_json", "") for d in deltas))
        history = [*ask, {"role": "assistant", "tool_calls": [call.model_dump()]}]
        history.append({"role": "tool", "tool_call_id": call.id, "content": login(seen[0])})
        oa.chat.completions.create(model="gpt-test", messages=history)
    finally:
        oa.close()
        an.close()
    return seen


def _has_call(chunk: Any) -> bool:
    return bool(chunk.choices and chunk.choices[0].delta.tool_calls)


def test_a_tool_calls_secret_is_nowhere_chronicle_writes(tmp_path: Path, otlp: OtlpSink, no_proxies: None) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from chronicle_otel.integrations import anthropic as chronicle_anthropic
    from chronicle_otel.integrations import openai as chronicle_openai

    store = chronicle.StoreOptions(path=tmp_path / ".chronicle", processor="simple", durable=False, compress=False)
    rec = make_recorder(tmp_path, store=store)  # its files as written: OTLP/JSON lines, the index
    rec.provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=otlp.url, timeout=5)))
    chronicle_openai.instrument()
    chronicle_anthropic.instrument()
    tool_call = ("login", {"user": "bob", "password": PW})
    try:
        with openai_server() as oa, anthropic_server() as an:
            oa.reply_with(*[Reply("", tool_call=tool_call) for _ in range(4)], Reply("Logged in."))
            an.reply_with(Reply("", tool_call=tool_call))
            seen = tool_agent(oa.url, an.url)
    finally:
        chronicle_openai.uninstrument()
        chronicle_anthropic.uninstrument()
    assert seen == [ARGS] * 5, "the caller gets every answer as sent"
    rec.config.force_flush()

    written: dict[str, bytes] = {}
    for span in rec.spans():  # the span attributes, as the SDK holds them
        written[f"span {span.name}"] = repr(dict(span.attributes or {})).encode()
    for i, request in enumerate(otlp.requests):  # the OTLP export, as sent
        written[f"otlp request {i}"] = request.SerializeToString()
    written.update({f"store {p.name}": p.read_bytes() for p in rec.path.rglob("*") if p.is_file()})
    trace = chronicle.load_trace(rec.path, "latest")
    saved = chronicle.write_trace(trace, tmp_path / "saved" / "incident.jsonl")
    written["saved trace"] = saved.read_bytes()
    store_args = ["latest", "--store", str(rec.path)]
    assert main(["gen-test", *store_args, "--out", str(tmp_path / "gen")], out=io.StringIO()) == 0
    written.update({f"gen-test {p.name}": p.read_bytes() for p in (tmp_path / "gen").rglob("*") if p.is_file()})
    page = tmp_path / "view.html"
    assert main(["view", *store_args, "--out", str(page)], out=io.StringIO()) == 0
    written["html view"] = page.read_bytes()

    assert otlp.requests and len(written) > 8
    for where, data in written.items():
        for part in _parts_of(PW):
            assert part.encode() not in data, f"{part!r} of the secret leaked into {where}"
    assert any(b"[REDACTED]" in data for where, data in written.items() if where.startswith("otlp"))
    assert b"[REDACTED]" in written["saved trace"] and b"[REDACTED]" in written["html view"]
    assert any(b"[REDACTED]" in data for where, data in written.items() if where.endswith(".jsonl"))

    by_name: dict[str, list[Any]] = {}
    for b in trace.boundaries:
        by_name.setdefault(b.name, []).append(b)
    (tool,) = by_name["json_text.login"]
    assert tool.decode_input() == {"arguments": MARKED}
    assert json.loads(tool.decode_output()) == {"ok": True, "user": "bob", "password": REDACTED}
    streamed = [b for b in trace.boundaries if b.stream]
    assert len(streamed) == 4  # chat, chat helper, responses, anthropic
    for b in streamed:  # the pieces joined are the arguments redacted
        calls = chronicle.assemble(b.decode_output(("openai.", "anthropic."))).tool_calls
        assert [c.arguments for c in calls] == [MARKED], b.name
