from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import logging
import random
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import chronicle_otel as chronicle
from chronicle_otel import codec
from chronicle_otel import semconv as sc
from chronicle_otel.record._payloads import encode_stream
from chronicle_otel.redact import (
    DEFAULT_KEY_PATTERNS,
    DEFAULT_SECRET_PATTERN,
    DEFAULT_VALUE_PATTERNS,
    REDACTED,
    PatternRedactor,
    Redactor,
    key_filter,
    redact_stream,
)
from tests.conftest import Recorder, make_recorder
from tests.unit.agents import record

# Look-alike secrets, assembled so that no scanner mistakes this file for a leak.
OPENAI = "sk-proj-" + "T3BlbkFJ" + "a1B2c3D4e5F6g7H8i9J0kLmNoPqR"
OPENAI_LEGACY = "sk-" + "a1B2c3D4e5F6g7H8i9J0" * 2 + "kLmNoPqR"
ANTHROPIC = "sk-ant-api03-" + "Xy7_Qw-Rt5" * 6 + "AA"
AWS_ID = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SESSION_ID = "ASIA" + "Y3FKQ2XH5RLM4NTB"
GITHUB = "ghp_" + "16C7e42F292c6912E7710c838347Ae178B4a"
GITHUB_OAUTH = "gho_" + "16C7e42F292c6912E7710c838347Ae178B4b"
GITHUB_APP = "ghs_" + "16C7e42F292c6912E7710c838347Ae178B4c"
GITHUB_PAT = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV"
SLACK = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
SLACK_USER = "xoxp-" + "123456789012-1234567890123-1234567890123-0123456789abcdef0123456789abcdef"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    + ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
    + ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
BEARER = "8a6f0c1e2d3b4a5968778695a4b3c2d1"
BASIC = base64.b64encode(b"admin:s3cr3t-P4ss").decode()
PEM_BODY = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    + PEM_BODY
    + "\nVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
    + "-----END RSA PRIVATE KEY-----"
)
URL_PASSWORD = "Tr0ub4dor-3x"
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
STRIPE_RESTRICTED = "rk_live_" + "51H8r2eZvKYlo2C0aBcDeFgH"
GOOGLE = "AIza" + "SyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe"

# (format, text holding the secret, the secret, what the text becomes)
FORMAT_CASES = [
    ("openai_key", f"key={OPENAI};", OPENAI, "key=[REDACTED];"),
    ("openai_key", f"use {OPENAI_LEGACY} now", OPENAI_LEGACY, "use [REDACTED] now"),
    ("anthropic_key", f"x-api-key: {ANTHROPIC}", ANTHROPIC, "x-api-key: [REDACTED]"),
    ("aws_access_key_id", f"id {AWS_ID}.", AWS_ID, "id [REDACTED]."),
    ("aws_access_key_id", f"({AWS_SESSION_ID})", AWS_SESSION_ID, "([REDACTED])"),
    ("github_token", f"token {GITHUB}", GITHUB, "token [REDACTED]"),
    ("github_token", f"{GITHUB_OAUTH} and more", GITHUB_OAUTH, "[REDACTED] and more"),
    ("github_token", f"'{GITHUB_APP}'", GITHUB_APP, "'[REDACTED]'"),
    ("github_pat", f"pat={GITHUB_PAT}", GITHUB_PAT, "pat=[REDACTED]"),
    ("slack_token", f"SLACK_TOKEN={SLACK}", SLACK, "SLACK_TOKEN=[REDACTED]"),
    ("slack_token", f"{SLACK_USER}", SLACK_USER, "[REDACTED]"),
    ("jwt", f"session {JWT} expired", JWT, "session [REDACTED] expired"),
    ("bearer_token", f"Authorization: Bearer {BEARER}", BEARER, "Authorization: Bearer [REDACTED]"),
    ("basic_auth", f"Authorization: Basic {BASIC}", BASIC, "Authorization: Basic [REDACTED]"),
    ("private_key", f"key:\n{PEM}\nend", PEM_BODY, "key:\n[REDACTED]\nend"),
    (
        "url_password",
        f"dsn postgres://app_user:{URL_PASSWORD}@db.internal:5432/orders ok",
        URL_PASSWORD,
        "dsn postgres://app_user:[REDACTED]@db.internal:5432/orders ok",
    ),
    ("url_password", f"redis://:{URL_PASSWORD}@cache:6379/0", URL_PASSWORD, "redis://:[REDACTED]@cache:6379/0"),
    ("stripe_key", f"stripe {STRIPE}", STRIPE, "stripe [REDACTED]"),
    ("stripe_key", f"{STRIPE_RESTRICTED}", STRIPE_RESTRICTED, "[REDACTED]"),
    ("google_api_key", f"?key={GOOGLE}&q=1", GOOGLE, "?key=[REDACTED]&q=1"),
]

ORDINARY = [
    "Ask the bearer of this letter for the basic rules, then Bearer bonds and Basic income.",
    "Basic information about the sk-learn-pipeline-examples, and the risk-assessment-framework-document.",
    "Bearer authentication is described in RFC 6750; Basic authentication in RFC 7617.",
    "request 123e4567-e89b-12d3-a456-426614174000 took 12 ms",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "https://example.com:8443/path?q=1#frag and ssh://git@github.com/org/repo.git and https://user@host/x",
    "write to bob@example.com at 10:30; ratio 3:2",
    "ASIA PACIFIC REGION, AKIA is no word, MSFT, AI agents, A quick brown fox",
    "ghost_stories and laughs_are_good_for_everyone_always; gh_cli docs; xoxo hugs",
    "eyJ is how base64 JSON starts; so does eyJhbGciOiJIUzI1NiJ9 alone",
    "gpt-4.1-mini-2025-04-14 and claude-3-5-sonnet-20241022 and task-force-alpha-bravo-charlie",
    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----",
    'He said "token" and "password" but no secret: max_tokens=5, input_tokens=12',
    "sk-",
    "",
]

SECRET_KEYS = [
    "password",
    "db_password",
    "passwords",
    "pwd",
    "secret",
    "client_secret",
    "clientSecret",
    "aws_secret_access_key",
    "AWS_SECRET_ACCESS_KEY",
    "api_key",
    "apiKey",
    "X-Api-Key",
    "openai_api_key",
    "access_token",
    "accessToken",
    "token",
    "bearer",
    "Authorization",
    "Proxy-Authorization",
    "credentials",
    "private_key",
    "private_key_pem",
    "signing_key",
    "stripe_key",
    "Cookie",
    "set-cookie",
    "session_id",
    "jwt",
    "card_number",
    "cvv",
    "connection_string",
    "connectionString",
    "sentry_dsn",
    "db.password",
]
PLAIN_KEYS = [
    "max_tokens",
    "maxTokens",
    "input_tokens",
    "token_count",
    "author",
    "keyboard",
    "monkey",
    "passage",
    "tokenizer",
    "model",
    "user_id",
    "prompt",
    "secretary",
    "key",
]


# ------------------------------------------------------------------ helpers


def _span_texts(span: ReadableSpan) -> list[str]:
    texts = [span.name, str(span.status.description or "")]
    texts += [f"{k}={v}" for k, v in (span.attributes or {}).items()]
    for event in span.events:
        texts.append(event.name)
        texts += [f"{k}={v}" for k, v in (event.attributes or {}).items()]
    for link in span.links:
        texts += [f"{k}={v}" for k, v in (link.attributes or {}).items()]
    return texts


def assert_nowhere(rec: Recorder, *secrets: str) -> None:
    """None of ``secrets`` is in an exported span (attributes, events, status, links) or a file of the store."""
    rec.config.force_flush()
    spans = rec.spans()
    assert spans, "nothing was recorded"
    for span in spans:
        for text in _span_texts(span):
            for secret in secrets:
                assert secret not in text, f"{secret!r} leaked into span {span.name!r}: {text[:300]}"
    files = [p for p in rec.path.rglob("*") if p.is_file()]
    assert files, "the store holds no file"
    for path in files:
        data = path.read_bytes()
        for secret in secrets:
            for form in {secret.encode(), orjson.dumps(secret)[1:-1]}:
                assert form not in data, f"{secret!r} leaked into {path.relative_to(rec.path)}"


@pytest.fixture
def rec(tmp_path: Path) -> Recorder:
    return make_recorder(tmp_path)


# ------------------------------------------------------------------ the module


def test_public_names_and_protocol() -> None:
    assert REDACTED == "[REDACTED]" == codec.REDACTED
    assert codec.DEFAULT_SECRET_PATTERN == DEFAULT_SECRET_PATTERN
    assert codec.key_filter is key_filter
    assert isinstance(PatternRedactor(), Redactor)
    assert not isinstance(lambda key: True, Redactor)
    assert set(DEFAULT_VALUE_PATTERNS) == {
        "openai_key",
        "anthropic_key",
        "stripe_key",
        "aws_access_key_id",
        "google_api_key",
        "github_token",
        "github_pat",
        "slack_token",
        "jwt",
        "bearer_token",
        "basic_auth",
        "private_key",
        "url_password",
    }
    assert all(isinstance(p, str) for p in DEFAULT_KEY_PATTERNS)


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_default_key_patterns_redact_secret_names(key: str) -> None:
    assert PatternRedactor().redact_key(key), key


@pytest.mark.parametrize("key", PLAIN_KEYS)
def test_default_key_patterns_keep_ordinary_names(key: str) -> None:
    assert not PatternRedactor().redact_key(key), key


def test_key_patterns_through_a_boundary(rec: Recorder) -> None:
    @chronicle.boundary(name="keys")
    def keys(payload: dict[str, Any]) -> None:
        pass

    payload = {k: f"v-{i}-secret-value" for i, k in enumerate(SECRET_KEYS + PLAIN_KEYS)}
    keys(payload)
    recorded = rec.io("keys", sc.INPUT)["payload"]
    assert {k for k, v in recorded.items() if v == REDACTED} == set(SECRET_KEYS)
    assert all(recorded[k] == payload[k] for k in PLAIN_KEYS)
    assert_nowhere(rec, *(payload[k] for k in SECRET_KEYS))


@pytest.mark.parametrize(("fmt", "text", "secret", "expected"), FORMAT_CASES)
def test_value_formats_in_text(fmt: str, text: str, secret: str, expected: str) -> None:
    assert PatternRedactor().redact_text(text) == expected
    only = PatternRedactor(formats=[fmt])
    assert secret not in only.redact_text(text), f"{fmt} alone misses it"
    assert re.search(DEFAULT_VALUE_PATTERNS[fmt], text), "the stand-alone pattern finds it too"


@pytest.mark.parametrize(("fmt", "text", "secret", "expected"), FORMAT_CASES)
def test_value_formats_in_json_are_replaced_in_place(fmt: str, text: str, secret: str, expected: str) -> None:
    redactor = PatternRedactor()
    value = {"note": text, "items": [text, {"nested": f"\n{text}\t"}]}
    data = codec.encode(value, redact=redactor)
    assert secret not in data.decode() and orjson.dumps(secret)[1:-1].decode() not in data.decode()
    tree = orjson.loads(data)  # still valid JSON
    assert tree["note"] == expected
    assert tree["items"][1]["nested"] == f"\n{expected}\t"
    assert codec.encode(value, redact=redactor) == data  # deterministic: replay re-encodes to the same hash


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_kept(text: str) -> None:
    redactor = PatternRedactor()
    assert redactor.redact_text(text) == text
    data = codec.encode({"text": text}, redact=redactor)
    assert data == codec.encode({"text": text})


def test_base64_data_does_not_blow_up() -> None:
    blob = base64.b64encode(random.Random(7).randbytes(256 * 1024)).decode()
    data = codec.encode({"image": blob, "mime": "image/png"}, redact=PatternRedactor())
    tree = orjson.loads(data)
    assert tree["mime"] == "image/png" and len(tree["image"]) >= len(blob) // 2


@pytest.mark.parametrize(
    "prefix",
    ["\n", "\t", "\x1e", '"', "\\", "é", "\\n", " \u2028 "],
    ids=["newline", "tab", "control", "quote", "backslash", "accent", "literal-backslash-n", "line-separator"],
)
def test_secrets_next_to_json_escapes(prefix: str) -> None:
    redactor = PatternRedactor()
    for secret in (OPENAI, JWT, GITHUB, AWS_ID, SLACK, STRIPE, GOOGLE):
        value = {"a": prefix + secret + prefix, "b": [secret + prefix + secret]}
        data = codec.encode(value, redact=redactor)
        assert secret not in data.decode(), (prefix, secret)
        assert orjson.loads(data)["a"].startswith(prefix), "the text around the secret is kept"


def test_escape_letters_are_no_word_before_a_secret() -> None:
    # in canonical JSON a newline before a key is the two characters "\n": the "n" must not count as a letter
    data = codec.encode({"k": f"line\n{OPENAI}"}, redact=PatternRedactor())
    assert orjson.loads(data) == {"k": "line\n[REDACTED]"}


def test_keys_of_mappings_are_scanned_too() -> None:
    data = codec.encode({OPENAI: 1, "x": {GITHUB: [AWS_ID]}}, redact=PatternRedactor())
    assert orjson.loads(data) == {REDACTED: 1, "x": {REDACTED: [REDACTED]}}


def test_redacted_tagged_values_keep_their_shape() -> None:
    @dataclasses.dataclass
    class Conn:
        host: str
        dsn: str
        url: str

    conn = Conn("db", "postgres://a:b@c/d", f"postgres://app:{URL_PASSWORD}@db/x")
    tree = orjson.loads(codec.encode((conn, {1: OPENAI}), redact=PatternRedactor()))
    data = tree["items"][0]
    assert data["$type"] == "dataclass" and data["data"]["dsn"] == REDACTED
    assert data["data"]["url"] == "postgres://app:[REDACTED]@db/x"
    assert tree["items"][1] == {"$type": "dict", "items": [[1, REDACTED]]}


def test_to_json_value_redacts_like_encode() -> None:
    value = {"password": "hunter2", "note": f"key {OPENAI}"}
    assert codec.to_json_value(value, redact=PatternRedactor()) == orjson.loads(
        codec.encode(value, redact=PatternRedactor())
    )
    assert codec.to_json_value(value) == value


def test_a_bare_key_predicate_still_works_and_fails_closed() -> None:
    assert orjson.loads(codec.encode({"password": "x", "note": OPENAI}, redact=key_filter())) == {
        "password": REDACTED,
        "note": OPENAI,
    }

    def broken(key: str) -> bool:
        raise RuntimeError("boom")

    assert orjson.loads(codec.encode({"a": "b"}, redact=broken)) == {"a": REDACTED}


def test_secrets_redacted_by_key_are_collected() -> None:
    @dataclasses.dataclass
    class Creds:
        user: str
        pin: int

    secrets: list[str] = []
    codec.encode(
        {"password": "hunter22", "credentials": Creds("bob-the-admin", 123456), "auth": ["tok-1234", "ab"], "x": 1},
        redact=PatternRedactor(),
        secrets=secrets,
    )
    assert set(secrets) == {"hunter22", "bob-the-admin", "123456", "tok-1234"}  # "ab" is too short to scrub
    nothing: list[str] = []
    codec.encode({"prompt": "hi"}, redact=PatternRedactor(), secrets=nothing)
    assert nothing == []


def test_pattern_redactor_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown value formats"):
        PatternRedactor(formats=["nope"])
    with pytest.raises(ValueError, match="invalid value pattern"):
        PatternRedactor(values=["("])
    with pytest.raises(ValueError, match="empty string"):
        PatternRedactor(values=["x*"])


def test_extra_value_patterns_and_the_secret_group() -> None:
    redactor = PatternRedactor(values=[r"ACME-[0-9]{8}", r"pin=(?P<secret>\d{4,})"])
    assert redactor.redact_text("order ACME-12345678, pin=4711 ok") == "order [REDACTED], pin=[REDACTED] ok"
    tree = orjson.loads(codec.encode({"a": "ACME-12345678 pin=4711"}, redact=redactor))
    assert tree == {"a": "[REDACTED] pin=[REDACTED]"}


def test_an_extra_pattern_crossing_a_string_falls_back_to_each_string() -> None:
    redactor = PatternRedactor(values=[r"secret.*"])  # greedy: on the JSON text it would swallow the structure
    data = codec.encode({"a": "my secret is out", "b": "fine"}, redact=redactor)
    assert orjson.loads(data) == {"a": "my [REDACTED]", "b": "fine"}


# ------------------------------------------------------------------ through a real boundary


def test_value_formats_never_reach_the_span_or_the_store(rec: Recorder) -> None:
    @chronicle.boundary(kind="tool", name="leaky")
    def leaky(prompt: str, headers: list[str], config: dict[str, Any]) -> dict[str, Any]:
        return {"echo": prompt, "env": {"SLACK": SLACK, "GOOGLE": GOOGLE}, "note": f"signed {JWT}"}

    leaky(
        f"use {OPENAI} or {ANTHROPIC}",
        [f"Authorization: Bearer {BEARER}", f"Authorization: Basic {BASIC}"],
        {"url": f"postgres://app:{URL_PASSWORD}@db/x", "pem": PEM, "ids": [AWS_ID, GITHUB, GITHUB_PAT, STRIPE]},
    )
    assert_nowhere(
        rec,
        OPENAI,
        ANTHROPIC,
        BEARER,
        BASIC,
        URL_PASSWORD,
        PEM_BODY,
        AWS_ID,
        GITHUB,
        GITHUB_PAT,
        STRIPE,
        SLACK,
        GOOGLE,
        JWT,
    )
    attrs = rec.attrs("leaky")
    assert "postgres://app:[REDACTED]@db/x" in attrs[sc.INPUT]
    assert "Authorization: Bearer [REDACTED]" in attrs[sc.INPUT]


def test_payload_hash_is_the_hash_of_the_redacted_bytes(rec: Recorder) -> None:
    @chronicle.boundary(name="hashed")
    def hashed(prompt: str) -> None:
        pass

    hashed(f"key {OPENAI}")
    attrs = rec.attrs("hashed")
    import hashlib

    assert attrs[sc.INPUT_HASH] == "sha256:" + hashlib.sha256(attrs[sc.INPUT].encode()).hexdigest()
    assert orjson.loads(attrs[sc.INPUT]) == {"prompt": "key [REDACTED]"}


def test_truncated_payloads_in_the_store_are_redacted(tmp_path: Path) -> None:
    rec = make_recorder(tmp_path, capture=chronicle.CaptureOptions(max_attribute_length=64))

    @chronicle.boundary(name="big")
    def big(text: str) -> str:
        return text

    big("x" * 500 + f" {GITHUB} " + "y" * 500)
    assert rec.attrs("big")[sc.INPUT_TRUNCATED] is True
    assert_nowhere(rec, GITHUB)


def test_exception_repeating_a_redacted_argument(rec: Recorder) -> None:
    @chronicle.boundary(name="login")
    def login(user: str, password: str) -> None:
        raise ValueError(f"bad password {password} for {user}")

    with pytest.raises(ValueError, match="hunter2-swordfish") as caught:
        login("bob", "hunter2-swordfish")
    assert str(caught.value) == "bad password hunter2-swordfish for bob"  # the user's exception is untouched
    assert_nowhere(rec, "hunter2-swordfish")

    span = rec.span("login")
    (event,) = span.events
    assert event.name == "exception"
    assert dict(event.attributes or {}).keys() == {
        "exception.type",
        "exception.message",
        "exception.stacktrace",
        "exception.escaped",
    }
    assert event.attributes is not None
    assert event.attributes["exception.type"] == "ValueError"
    assert event.attributes["exception.message"] == "bad password [REDACTED] for bob"
    assert event.attributes["exception.escaped"] == "True"
    stacktrace = str(event.attributes["exception.stacktrace"])
    assert (
        "Traceback (most recent call last)" in stacktrace
        and "ValueError: bad password [REDACTED] for bob" in stacktrace
    )
    assert span.status.description == "ValueError: bad password [REDACTED] for bob"
    error = rec.io("login", sc.ERROR)
    assert error["message"] == "bad password [REDACTED] for bob"
    assert error["args"] == ["bad password [REDACTED] for bob"]
    assert rec.io("login", sc.INPUT) == {"user": "bob", "password": REDACTED}


@pytest.mark.parametrize(
    "arguments",
    [
        '{"user": "bob", "password": "hunter2-swordfish"}',
        '[{"login": {"user": "bob", "password": "hunter2-swordfish"}}]',
        '{"call": "{\\"user\\": \\"bob\\", \\"password\\": \\"hunter2-swordfish\\"}"}',  # JSON text in JSON text
    ],
)
def test_exception_repeating_a_secret_of_json_text_arguments(rec: Recorder, arguments: str) -> None:
    """A tool call's arguments as JSON text (as models send them): the password redacted from the input is
    scrubbed from the error too, whatever its depth in the text."""

    @chronicle.boundary(kind="tool", name="login_tool")
    def login_tool(args: str) -> None:
        raise ValueError("bad password hunter2-swordfish for bob")

    with pytest.raises(ValueError, match="hunter2-swordfish"):
        login_tool(arguments)
    assert_nowhere(rec, "hunter2-swordfish")
    assert rec.span("login_tool").status.description == "ValueError: bad password [REDACTED] for bob"
    assert rec.io("login_tool", sc.ERROR)["message"] == "bad password [REDACTED] for bob"


def test_json_text_secrets_are_collected_only_from_what_redaction_removed() -> None:
    from chronicle_otel.redact import collect_json_text_secrets

    found: list[str] = []
    value = {
        "args": '{"user": "bob", "password": "hunter22", "token": 123456, "pin": {"code": "7781-x"}}',
        "items": ['{"api_key": "plain-api-key-42"}', "not json", '{"note": "keep me"}'],
        "short": '{"password": "ab"}',  # too short to scrub: it would shred any message
    }
    collect_json_text_secrets(value, key_filter(), found)
    assert set(found) == {"hunter22", "123456", "plain-api-key-42"}


class AuthError(Exception):
    pass


def test_exception_args_chained_causes_and_nested_secrets(rec: Recorder) -> None:
    @chronicle.boundary(name="connect")
    def connect(settings: dict[str, Any], prompt: str) -> None:
        try:
            raise ConnectionError(f"cannot reach db as {settings['db']['password']}")
        except ConnectionError as exc:
            raise AuthError("denied", settings["api_key"], prompt) from exc

    with pytest.raises(AuthError):
        connect({"db": {"password": "Pa55-w0rd-db"}, "api_key": "plain-api-key-42"}, f"my key is {OPENAI}")
    assert_nowhere(rec, "Pa55-w0rd-db", "plain-api-key-42", OPENAI)
    (event,) = rec.span("connect").events
    assert event.attributes is not None
    stacktrace = str(event.attributes["exception.stacktrace"])
    assert "cannot reach db as [REDACTED]" in stacktrace and "The above exception was the direct cause" in stacktrace
    assert rec.io("connect", sc.ERROR)["args"] == ["denied", REDACTED, "my key is [REDACTED]"]
    assert event.attributes["exception.type"] == f"{__name__}.AuthError"


def test_exception_leaving_outer_boundaries_is_scrubbed_there_too(rec: Recorder) -> None:
    @chronicle.boundary(kind="tool", name="vault.login")
    def vault_login(user: str, password: str) -> None:
        raise PermissionError(f"{user}/{password} refused")

    @chronicle.boundary(kind="agent", name="agent.direct")
    def direct(task: str) -> None:
        vault_login("svc", "inner-only-pw-1")  # the outer boundary never saw the password

    @chronicle.boundary(kind="agent", name="agent.wrapping")
    def wrapping(task: str) -> None:
        try:
            vault_login("svc", "inner-only-pw-2")
        except PermissionError as exc:
            raise RuntimeError(f"task {task} failed: {exc}") from exc

    with pytest.raises(PermissionError):
        direct("sync")
    with pytest.raises(RuntimeError):
        wrapping("sync")
    assert_nowhere(rec, "inner-only-pw-1", "inner-only-pw-2")
    assert rec.span("agent.wrapping").status.description == "RuntimeError: task sync failed: svc/[REDACTED] refused"


def test_exception_of_an_async_boundary_and_a_call_block(rec: Recorder) -> None:
    @chronicle.boundary(name="afetch")
    async def afetch(token: str) -> None:
        raise PermissionError(f"token {token} rejected")

    with pytest.raises(PermissionError):
        asyncio.run(afetch("tok-abcdef-0123"))
    with pytest.raises(KeyError), chronicle.call("legacy", input={"secret": "s3cr3t-legacy-value"}):
        raise KeyError("s3cr3t-legacy-value")
    assert_nowhere(rec, "tok-abcdef-0123", "s3cr3t-legacy-value")
    assert rec.span("afetch").status.description == "PermissionError: token [REDACTED] rejected"


def test_exception_of_a_generator_boundary(rec: Recorder) -> None:
    @chronicle.boundary(name="stream")
    def stream(password: str) -> Any:
        yield 1
        raise RuntimeError(f"lost {password} and {GITHUB}")

    with pytest.raises(RuntimeError):
        list(stream("gen-secret-99"))
    assert_nowhere(rec, "gen-secret-99", GITHUB)


def test_exception_text_keeps_ordinary_words(rec: Recorder) -> None:
    @chronicle.boundary(name="plain")
    def plain(user: str, max_tokens: int) -> None:
        raise ValueError(f"user {user} asked for {max_tokens} tokens")

    with pytest.raises(ValueError):
        plain("bob", 5000)
    assert rec.span("plain").status.description == "ValueError: user bob asked for 5000 tokens"


def test_redaction_false_records_everything_as_it_is(tmp_path: Path) -> None:
    rec = make_recorder(tmp_path, redaction=False)

    @chronicle.boundary(name="raw")
    def raw(password: str) -> None:
        raise ValueError(f"bad {password} {OPENAI}")

    with pytest.raises(ValueError):
        raw("hunter2")
    assert rec.span("raw").status.description == f"ValueError: bad hunter2 {OPENAI}"
    assert rec.io("raw", sc.INPUT) == {"password": "hunter2"}


# ------------------------------------------------------------------ sessions


def test_session_values_are_redacted(rec: Recorder) -> None:
    @chronicle.boundary(name="in_session")
    def in_session() -> None:
        pass

    with chronicle.session(api_key=ANTHROPIC, note=f"token is {GITHUB}", user="u-17", extra={"password": "nested-pw"}):
        in_session()
    attrs = rec.attrs("in_session")
    assert attrs[sc.SESSION_PREFIX + "api_key"] == REDACTED
    assert attrs[sc.SESSION_PREFIX + "note"] == "token is [REDACTED]"
    assert attrs[sc.SESSION_PREFIX + "user"] == "u-17"
    assert orjson.loads(str(attrs[sc.SESSION_PREFIX + "extra"])) == {"password": REDACTED}
    assert_nowhere(rec, ANTHROPIC, GITHUB, "nested-pw")


def test_configured_session_values_are_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHRONICLE_SESSION", f"deploy_token=env-token-123,owner=team-a,note=see {SLACK}")
    rec = make_recorder(
        tmp_path,
        session={"db_password": "cfg-pw-456", "dsn": "mysql://u:p@h/d", "db_url": f"postgres://a:{URL_PASSWORD}@h/d"},
    )

    @chronicle.boundary(name="configured")
    def configured() -> None:
        pass

    configured()
    attrs = rec.attrs("configured")
    assert attrs[sc.SESSION_PREFIX + "db_password"] == REDACTED
    assert attrs[sc.SESSION_PREFIX + "deploy_token"] == REDACTED
    assert attrs[sc.SESSION_PREFIX + "dsn"] == REDACTED
    assert attrs[sc.SESSION_PREFIX + "db_url"] == "postgres://a:[REDACTED]@h/d"
    assert attrs[sc.SESSION_PREFIX + "owner"] == "team-a"
    assert attrs[sc.SESSION_PREFIX + "note"] == "see [REDACTED]"
    assert_nowhere(rec, "cfg-pw-456", "env-token-123", URL_PASSWORD, SLACK)


# ------------------------------------------------------------------ configuration


def test_options_add_value_patterns_and_can_turn_formats_off(tmp_path: Path) -> None:
    rec = make_recorder(tmp_path, redaction=chronicle.RedactionOptions(values=[r"ACME-[0-9]{8}"]))

    @chronicle.boundary(name="opts")
    def opts(text: str) -> None:
        pass

    opts(f"ACME-12345678 {OPENAI}")
    assert rec.io("opts", sc.INPUT) == {"text": "[REDACTED] [REDACTED]"}

    rec2 = make_recorder(tmp_path / "2", redaction=chronicle.RedactionOptions(value_defaults=False))
    opts(f"ACME-12345678 {OPENAI}")
    assert rec2.io("opts", sc.INPUT) == {"text": f"ACME-12345678 {OPENAI}"}


def test_env_adds_value_patterns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHRONICLE_REDACT_VALUES", r"ACME-\d{4,8}, INTERNAL-[A-Z]{3}")
    rec = make_recorder(tmp_path)

    @chronicle.boundary(name="env_values")
    def env_values(text: str) -> None:
        pass

    env_values(f"ACME-123456 INTERNAL-XYZ {JWT}")
    assert rec.io("env_values", sc.INPUT) == {"text": "[REDACTED] [REDACTED] [REDACTED]"}


def test_env_false_turns_value_patterns_off_unless_the_argument_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHRONICLE_REDACT_VALUES", "false")
    rec = make_recorder(tmp_path)

    @chronicle.boundary(name="env_off")
    def env_off(text: str, password: str) -> None:
        pass

    env_off(OPENAI, "pw-1234")
    assert rec.io("env_off", sc.INPUT) == {"text": OPENAI, "password": REDACTED}  # key names still apply

    rec2 = make_recorder(tmp_path / "2", redaction=chronicle.RedactionOptions(value_defaults=True))
    env_off(OPENAI, "pw-1234")
    assert rec2.io("env_off", sc.INPUT) == {"text": REDACTED, "password": REDACTED}


@pytest.mark.parametrize(
    ("env", "options", "name"),
    [
        ({"CHRONICLE_REDACT_VALUES": "("}, None, "CHRONICLE_REDACT_VALUES"),
        ({"CHRONICLE_REDACT_VALUES": "a*"}, None, "CHRONICLE_REDACT_VALUES"),
        ({"CHRONICLE_REDACT_KEYS": "[x"}, None, "CHRONICLE_REDACT_KEYS"),
        ({}, chronicle.RedactionOptions(values=["(?P<secret>"]), "RedactionOptions.values"),
        ({}, chronicle.RedactionOptions(keys=["*"]), "RedactionOptions.keys"),
        ({}, chronicle.RedactionOptions(redactor=object()), "RedactionOptions.redactor"),  # type: ignore[arg-type]
    ],
)
def test_bad_patterns_name_their_source(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    options: chronicle.RedactionOptions | None,
    name: str,
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(chronicle.ConfigError, match=re.escape(name)) as caught:
        chronicle.configure(store=False, redaction=options, local=True)
    assert caught.value.name == name


class Upper:
    """A user's redactor: names ending in _pin are secret; digits are masked."""

    def redact_key(self, name: str) -> bool:
        return name.endswith("_pin")

    def redact_text(self, text: str) -> str:
        return re.sub(r"\d", "#", text)


class Broken:
    def redact_key(self, name: str) -> bool:
        raise RuntimeError("no keys today")

    def redact_text(self, text: str) -> str:
        raise RuntimeError("no text today")


def test_a_users_redactor_runs_after_the_patterns(tmp_path: Path) -> None:
    rec = make_recorder(tmp_path, redaction=chronicle.RedactionOptions(redactor=Upper()))

    @chronicle.boundary(name="custom")
    def custom(card_pin: str, text: str, password: str) -> None:
        raise ValueError(f"pin {card_pin} wrong for order 42")

    with pytest.raises(ValueError):
        custom("1234", f"order 42 {OPENAI}", "pw")
    assert rec.io("custom", sc.INPUT) == {"card_pin": REDACTED, "text": "order ## [REDACTED]", "password": REDACTED}
    assert rec.span("custom").status.description == "ValueError: pin [REDACTED] wrong for order ##"


def test_a_failing_redactor_is_logged_once_and_redacts_everything(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rec = make_recorder(tmp_path, redaction=chronicle.RedactionOptions(redactor=Broken()))

    @chronicle.boundary(name="broken")
    def broken(name: str) -> str:
        return name.upper()

    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        assert broken("bob") == "BOB"
        assert broken("alice") == "ALICE"
    for span in rec.spans():
        attrs = dict(span.attributes or {})
        assert "bob" not in str(attrs[sc.INPUT]) and "alice" not in str(attrs[sc.INPUT])
        assert "BOB" not in str(attrs[sc.OUTPUT]) and "ALICE" not in str(attrs[sc.OUTPUT])
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2  # one per method, not one per call
    assert "no keys today" in caplog.text and "no text today" in caplog.text


# ------------------------------------------------------------------ replay


@chronicle.boundary(kind="llm", name="r.llm")
def r_llm(prompt: str, api_key: str) -> str:
    return f"answer to {prompt}"


@chronicle.boundary(kind="tool", name="r.tool")
def r_tool(password: str) -> str:
    raise PermissionError(f"password {password} expired; see {GITHUB}")


@chronicle.boundary(kind="agent", name="r.agent")
def r_agent(prompt: str) -> str:
    with contextlib.suppress(PermissionError):
        r_tool("tool-pw-7788")
    return r_llm(f"{prompt} with {OPENAI}", api_key="sk-not-really-a-key")


def test_replay_compares_redacted_with_redacted(rec: Recorder) -> None:
    trace = record(rec, r_agent, "hello")
    with chronicle.replay(trace, stub={"kind:llm"}) as run:
        assert run.rerun() == f"answer to hello with {REDACTED}"  # the stub answers with what was recorded
    assert run.report.ok, run.report
    assert run.report.drift == [] and run.report.changes == [], run.report


@chronicle.boundary(kind="tool", name="r.inner")
def r_inner(password: str) -> None:
    raise PermissionError(f"password {password} expired")


@chronicle.boundary(kind="agent", name="r.outer")
def r_outer(task: str) -> None:
    try:
        r_inner("inner-pw-3344")
    except PermissionError as exc:
        raise RuntimeError(f"{task}: {exc}") from exc


@pytest.mark.parametrize("emit_spans", [True, False])
def test_replay_of_an_error_scrubbed_of_an_inner_secret(rec: Recorder, emit_spans: bool) -> None:
    trace = record(rec, r_outer, "t1", raises=RuntimeError)
    assert "inner-pw-3344" not in str(trace.boundaries[0].raw_error.text if trace.boundaries[0].raw_error else "")
    with pytest.raises(RuntimeError), chronicle.replay(trace, stub=(), emit_spans=emit_spans) as run:
        run.rerun()
    assert run.report.changes == [], run.report


@pytest.mark.parametrize("redaction", [False, chronicle.RedactionOptions(keys=[r"(?i)account"])])
def test_replay_uses_the_boundarys_own_configuration(tmp_path: Path, redaction: Any) -> None:
    make_recorder(tmp_path / "global")  # the process-wide configuration: default redaction
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    local = chronicle.configure(
        tracer_provider=provider,
        store=chronicle.StoreOptions(path=tmp_path / "local", processor="simple", durable=False),
        redaction=redaction,
        local=True,
    )

    @local.boundary(kind="llm", name="l.llm")
    def l_llm(account: str, password: str) -> str:
        return "ok"

    @local.boundary(kind="agent", name="l.agent")
    def l_agent(user: str) -> str:
        return l_llm(f"acct-{user}", "pw-5566")  # computed afresh on replay, not read back from the recording

    l_agent("u1")
    local.force_flush()
    assert local.store is not None
    trace = chronicle.load_trace(local.store, "latest")
    with chronicle.replay(trace, stub={"kind:llm"}, on_input_mismatch="error") as run:
        assert run.rerun() == "ok"
    assert run.report.ok and run.report.drift == [], run.report


# ------------------------------------------------------------------ property: the fast path agrees with the text path

FRAGMENTS = [
    OPENAI,
    ANTHROPIC,
    AWS_ID,
    GITHUB,
    GITHUB_PAT,
    SLACK,
    JWT,
    STRIPE,
    GOOGLE,
    PEM,
    "Bearer " + BEARER,
    "Basic " + BASIC,
    f"postgres://u:{URL_PASSWORD}@h/d",
    " ",
    "\n",
    "\t",
    "\\",
    "\\n",
    '"',
    "'",
    "é",
    "\x1e",
    "\u2028",
    "x",
    "-",
    "_",
    ":",
    "/",
    "@",
    ".",
    "sk-",
    "eyJ",
    "Bearer",
    "Basic",
    "://",
    "-----BEGIN",
]
SEPARATORS = [" ", "\n", "\t", '"', "\\", "\\n", ":", "/", "@", "=", ",", "é", "\x1e", "\u2028"]
SECRETS = [OPENAI, ANTHROPIC, AWS_ID, GITHUB, GITHUB_PAT, SLACK, JWT, STRIPE, GOOGLE, PEM_BODY, BEARER, BASIC]
pieces = st.lists(st.tuples(st.sampled_from(SEPARATORS), st.sampled_from(FRAGMENTS)), max_size=10)


@settings(max_examples=300, deadline=None)
@given(pieces, pieces, st.sampled_from(SEPARATORS))
def test_json_fast_path_agrees_with_the_text_path(
    parts: list[tuple[str, str]], key_parts: list[tuple[str, str]], end: str
) -> None:
    redactor = PatternRedactor()
    text = "".join(sep + fragment for sep, fragment in parts) + end
    key = "".join(sep + fragment for sep, fragment in key_parts) + end
    data = codec.encode({"v": [text, {key: text}]}, redact=redactor)
    tree = orjson.loads(data)  # always valid JSON
    expected = redactor.redact_text(text)
    assert tree == {"v": [expected, {redactor.redact_text(key): expected}]}
    for secret in SECRETS:
        assert secret not in data.decode()


# ------------------------------------------------------------------------------------------------ leaks closed

PW = "Zx9kQ2w" + "L8rTmPq4vNs7yHb3c"  # an opaque secret: found by the name it is given, never by its format


def _exported(recorder: Recorder) -> str:
    """Everything the recorder's spans carry (attributes, events, status), as one text."""
    recorder.config.force_flush()
    return repr(
        [
            (dict(s.attributes or {}), [dict(e.attributes or {}) for e in s.events], s.status.description)
            for s in recorder.memory.get_finished_spans()
        ]
    )


def test_secret_formats_inside_bytes_are_redacted_and_the_bytes_stay_bytes() -> None:
    raw = f"Authorization: Bearer {PW}\r\nX-Key: {OPENAI}\r\n".encode()
    data = codec.encode({"request": raw, "ok": b"\x00\xffplain"}, redact=PatternRedactor())
    value = codec.decode(data)
    assert isinstance(value["request"], bytes) and value["ok"] == b"\x00\xffplain"
    assert PW.encode() not in value["request"] and OPENAI.encode() not in value["request"]
    assert value["request"] == f"Authorization: Bearer {REDACTED}\r\nX-Key: {REDACTED}\r\n".encode()
    assert base64.b64encode(raw).decode() not in data.decode()


@pytest.mark.parametrize(
    "name",
    ["DBPassword", "OpenAIApiKey", "JWTSecret", "X-Auth-Key", "Ocp-Apim-Subscription-Key", "AccountKey", "account_key"],
)
def test_acronyms_and_header_style_key_names_are_secret(name: str) -> None:
    assert key_filter()(name)


@pytest.mark.parametrize("name", ["MAXTokens", "HTTPAuthor", "aws_access_key_id", "sort_key", "cache_key", "hotkey"])
def test_their_look_alikes_are_not(name: str) -> None:
    assert not key_filter()(name)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"host=db.invalid user=app password={PW} sslmode=require", "password=[REDACTED] sslmode=require"),
        (f"https://api.invalid/v1/items?api_key={PW}&page=2", "?api_key=[REDACTED]&page=2"),
        (f"Server=db;Password={PW};AccountKey={PW}==;", "Password=[REDACTED];AccountKey=[REDACTED];"),
        (f"--token = {PW}", "--token = [REDACTED]"),
    ],
)
def test_a_value_given_a_secret_name_in_text_is_redacted(text: str, expected: str) -> None:
    redactor = PatternRedactor()
    assert PW not in redactor.redact_text(text) and expected in redactor.redact_text(text)
    in_json = redactor.redact_json(orjson.dumps({"q": text}))
    assert PW not in in_json.decode() and orjson.loads(in_json)["q"].endswith(redactor.redact_text(text)[-12:])


@pytest.mark.parametrize("text", ["QUJDRA==", "c2VjcmV0UHdk==", "max_tokens=5 author=bob", "a == b", "x=1&y=2"])
def test_padding_and_ordinary_assignments_are_left_alone(text: str) -> None:
    assert PatternRedactor().redact_text(text) == text


class _Settings:
    def __init__(self) -> None:
        self.db_password = PW
        self.user = "ann"

    def __repr__(self) -> str:
        return f"_Settings(db_password={self.db_password!r}, user={self.user!r})"


def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"password": PW}
    for _ in range(levels):
        value = {"n": value}
    return value


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(_Settings(), id="an object kept as its repr"),
        pytest.param(_deep(70), id="nested deeper than MAX_DEPTH"),
        pytest.param({1: 0, "password": PW, "\ud800": 1}, id="a dict JSON cannot hold"),
    ],
)
def test_values_kept_as_text_are_redacted_by_the_names_they_give(value: Any) -> None:
    data = codec.encode({"x": value}, redact=PatternRedactor())
    assert PW not in data.decode("utf-8", "replace")
    assert REDACTED in data.decode("utf-8", "replace")


def test_a_repr_cut_never_keeps_part_of_a_secret() -> None:
    text = f"_Settings(user={'u' * 960!r}, x={OPENAI!r})"  # the cut at 1,000 characters falls inside the key
    assert text.index(OPENAI) + 12 < 1000 < text.index(OPENAI) + len(OPENAI)

    class Long:
        def __repr__(self) -> str:
            return text

    data = codec.encode({"x": Long()}, redact=PatternRedactor()).decode()
    assert OPENAI[:12] not in data and REDACTED in data


class _AuthError(Exception):
    def __init__(self, api_key: str) -> None:
        super().__init__("auth failed")
        self.api_key = api_key

    def __str__(self) -> str:
        return f"auth failed for key {self.api_key}"


def test_an_error_s_message_is_scrubbed_of_what_its_args_and_attributes_hold_under_secret_names(
    recorder: Recorder,
) -> None:
    @chronicle.boundary(kind="tool", name="leaky.attr")
    def attr() -> None:
        raise _AuthError(PW)

    @chronicle.boundary(kind="tool", name="leaky.args")
    def args() -> None:
        raise RuntimeError({"db_password": PW, "host": "db"})

    for fn in (attr, args):
        with pytest.raises(Exception, match=PW):  # the caller gets the exception as raised
            fn()
    exported = _exported(recorder)
    assert PW not in exported
    assert "auth failed for key [REDACTED]" in exported


def test_a_secret_streamed_a_few_characters_per_item_is_redacted(recorder: Recorder) -> None:
    @chronicle.boundary(kind="llm", name="leaky.tokens")
    def tokens() -> Any:
        yield from ["Your key is ", OPENAI[:10], OPENAI[10:30], OPENAI[30:], "."]

    @chronicle.boundary(kind="llm", name="leaky.chunks")
    def chunks() -> Any:
        for i, piece in enumerate(["Key: ", OPENAI[:12], OPENAI[12:], " ok"]):
            yield {"id": f"c{i}", "choices": [{"delta": {"content": piece}, "index": 0}], "model": "m"}

    assert "".join(tokens()) == f"Your key is {OPENAI}."  # the caller gets every item as yielded
    assert len(list(chunks())) == 4
    exported = _exported(recorder)
    for start in range(0, len(OPENAI) - 16, 4):
        assert OPENAI[start : start + 16] not in exported
    assert "Your key is " in exported and '"content":" ok"' in exported


@settings(max_examples=200, deadline=None)
@given(cuts=st.lists(st.integers(min_value=1, max_value=len(OPENAI) + 20), max_size=6))
def test_however_a_stream_is_cut_the_items_never_spell_the_secret(cuts: list[int]) -> None:
    text = f"the key {OPENAI} and password={PW} end"
    bounds = sorted({min(c, len(text) - 1) for c in cuts})
    items = [text[a:b] for a, b in zip([0, *bounds], [*bounds, len(text)], strict=True) if b > a]
    joined = "".join(orjson.loads(encode_stream(items, PatternRedactor())))
    assert OPENAI[8:24] not in joined and PW not in joined
    assert joined.startswith("the key ") and joined.endswith(" end")


def test_a_stream_without_a_secret_across_items_is_kept_as_encoded() -> None:
    redactor = PatternRedactor()
    data = codec.encode(["plain ", "text ", "whole here"], redact=redactor)
    assert redact_stream(data, redactor) is data
    assert encode_stream(["a ", f"whole {OPENAI} here"], redactor) == codec.encode(
        ["a ", f"whole {OPENAI} here"], redact=redactor
    )


def test_a_name_after_an_escape_in_json_is_read_without_the_escape_s_letter() -> None:
    data = orjson.dumps({"a": f"line1\npassword={PW}", "b": f"C:\\password={PW}", "c": f"x\\\npwd={PW}"})
    redacted = orjson.loads(PatternRedactor().redact_json(data))
    assert redacted == {"a": "line1\npassword=[REDACTED]", "b": "C:\\password=[REDACTED]", "c": "x\\\npwd=[REDACTED]"}


@pytest.mark.parametrize(
    "secret",
    [
        "sk-proj-" + "a1B2c3D4e5" * 60,
        "sk-ant-api03-" + "Xy7_Qw-Rt5" * 60,
        "sk_live_" + "4eC39HqLyj" * 60,
        "AIza" + "SyDaGmWKa4" * 60,
        "ghp_" + "16C7e42F29" * 60,
        "github_pat_" + "11ABCDEFG_" * 60,
        "xoxb-" + "1234567890-" * 60,
        "eyJhbGciOiJSUzI1NiJ9.eyJ" + "zdWIiOiIx" * 700 + "." + "c2lnbmF0dXJl" * 40,
        "Bearer " + "8a6f0c1e2d3b4a59/+." * 60,
        "eyJhbGciOiJSUzI1NiJ9.eyJ" + "zdWIiOiIx" * 9_000 + "." + "c2lnbmF0dXJl" * 30,
        "Basic " + base64.b64encode(b"svc-" + b"x" * 200 + b"@tenant.example.com:s3cret-pass").decode(),
    ],
    ids=[
        "openai",
        "anthropic",
        "stripe",
        "google",
        "github",
        "github-pat",
        "slack",
        "jwt",
        "bearer",
        "jwt-80kb",
        "basic",
    ],
)
def test_a_secret_longer_than_the_scan_reads_at_once_is_redacted_whole(secret: str) -> None:
    redactor = PatternRedactor()
    for text in (secret, f"key: {secret}, then text", f"task-{'task-' * 50} {secret}"):
        redacted = redactor.redact_text(text)
        assert secret[-40:] not in redacted and REDACTED in redacted, redacted[:200]
    data = codec.encode({"note": f"use {secret} now"}, redact=redactor).decode()
    assert secret[-40:] not in data


def test_many_look_alikes_in_one_text_are_each_read_once() -> None:
    # "task-task-…", "sk-sk-…", repeated PEM headers: each anchor is a look-alike (or inside the secret before);
    # the scan reads a bounded run at each and goes on, so a key at the end is still found
    redactor = PatternRedactor()
    for filler in ("task-" * 20_000, "sk-" * 20_000, "AIza" * 20_000, "eyJ" * 20_000):
        text = filler + " " + OPENAI
        redacted = redactor.redact_text(text)
        assert OPENAI not in redacted and redacted.endswith(REDACTED)
    pem = "-----BEGIN PRIVATE KEY-----" * 2_000
    assert redactor.redact_text(pem) == REDACTED
