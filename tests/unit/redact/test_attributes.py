"""Redaction beyond payloads: static span attributes, GenAI attributes, escaped copies in exception text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import chronicle_otel as chronicle
from tests.conftest import Recorder

KEY = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"


def everything(recorder: Recorder) -> str:
    """All that left the process: every span attribute, event and status, and the store's files."""
    recorder.config.force_flush()
    texts = []
    for span in recorder.spans():
        texts.append(json.dumps(dict(span.attributes or {}), default=str))
        texts.extend(json.dumps(dict(e.attributes or {}), default=str) for e in span.events)
        texts.append(span.status.description or "")
    texts.extend(p.read_text(errors="replace") for p in Path(recorder.path).rglob("*.jsonl"))
    return "\n".join(texts)


def test_static_attributes_are_redacted(recorder: Recorder) -> None:
    @chronicle.boundary(kind="tool", name="t.static", attributes={"api_key": "STATIC-SECRET", "note": KEY, "n": 3})
    def f() -> int:
        return 1

    assert f() == 1 and f() == 1
    seen = everything(recorder)
    assert "STATIC-SECRET" not in seen and KEY not in seen
    attrs = recorder.spans()[0].attributes or {}
    assert attrs["api_key"] == "[REDACTED]" and attrs["n"] == 3 and "[REDACTED]" in str(attrs["note"])


def test_genai_attributes_are_redacted(recorder: Recorder) -> None:
    @chronicle.boundary(kind="llm", name="t.llm", provider="openai")
    def llm(prompt: str, model: str) -> dict[str, str]:
        return {"id": KEY, "model": "https://user:MODELPW@llm.invalid/gpt"}

    llm("hi", model="https://user:MODELPW@llm.invalid/gpt")
    seen = everything(recorder)
    assert "MODELPW" not in seen and KEY not in seen
    attrs = recorder.spans()[0].attributes or {}
    assert str(attrs["gen_ai.request.model"]).startswith("https://user:")


@pytest.mark.parametrize(
    "secret", [r"hunter2\secret", 'abc"def-SECRET', 'it\'s "both"', "tab\there", "ünïcödé-secret-1"]
)
def test_escaped_copies_of_a_redacted_argument_leave_no_trace(recorder: Recorder, secret: str) -> None:
    @chronicle.boundary(kind="tool", name="t.login")
    def login(password: str) -> None:
        raise ValueError(f"rejected {password!r} / " + json.dumps({"key": password}))

    with pytest.raises(ValueError):
        login(secret)
    seen = everything(recorder)
    for form in (secret, repr(secret)[1:-1], json.dumps(secret)[1:-1]):
        assert form not in seen, form
