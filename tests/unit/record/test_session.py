from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel.record._session import current_session
from tests.conftest import Recorder

U = sc.SESSION_PREFIX + "user_id"
P = sc.SESSION_PREFIX + "prompt_version"


def test_nested_sessions_override_and_restore(recorder: Recorder) -> None:
    @chronicle.boundary(name="s")
    def s(tag: str) -> str:
        return tag

    with chronicle.session(user_id="u-17", prompt_version="v12"):
        s("outer")
        with chronicle.session(prompt_version="v13", extra={"a": [1, 2]}):
            assert current_session() == {"user_id": "u-17", "prompt_version": "v13", "extra": '{"a":[1,2]}'}
            s("inner")
        s("after")
    s("none")
    by_tag = {recorder_input(sp): dict(sp.attributes or {}) for sp in recorder.spans()}
    assert (by_tag["outer"][U], by_tag["outer"][P]) == ("u-17", "v12")
    assert (by_tag["inner"][U], by_tag["inner"][P]) == ("u-17", "v13")
    assert by_tag["inner"][sc.SESSION_PREFIX + "extra"] == '{"a":[1,2]}'
    assert by_tag["after"][P] == "v12" and sc.SESSION_PREFIX + "extra" not in by_tag["after"]
    assert U not in by_tag["none"]
    assert current_session() == {}


def recorder_input(span: Any) -> str:
    import json

    return json.loads(span.attributes[sc.INPUT])["tag"]


def test_session_restored_after_an_exception() -> None:
    with pytest.raises(RuntimeError), chronicle.session(user_id="x"):
        raise RuntimeError
    assert current_session() == {}


def test_session_as_decorator_sync_and_async(recorder: Recorder) -> None:
    @chronicle.session(channel="slack")
    def handle() -> dict[str, Any]:
        return current_session()

    @chronicle.session(channel="web")
    async def ahandle() -> dict[str, Any]:
        await asyncio.sleep(0)
        return current_session()

    assert handle() == {"channel": "slack"}
    assert asyncio.run(ahandle()) == {"channel": "web"}
    assert current_session() == {}
    # re-entrant: the same decorated function nested in itself
    calls = []

    @chronicle.session(depth="n")
    def rec(n: int) -> None:
        calls.append(current_session())
        if n:
            rec(n - 1)

    rec(2)
    assert calls == [{"depth": "n"}] * 3 and current_session() == {}


def test_sessions_are_isolated_between_threads() -> None:
    seen: dict[int, dict[str, Any]] = {}
    barrier = threading.Barrier(8)

    def work(i: int) -> None:
        with chronicle.session(user_id=f"u-{i}"):
            barrier.wait(timeout=10)
            seen[i] = current_session()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {i: {"user_id": f"u-{i}"} for i in range(8)}


async def test_sessions_are_isolated_between_tasks() -> None:
    async def work(i: int) -> dict[str, Any]:
        with chronicle.session(user_id=f"u-{i}"):
            await asyncio.sleep(0.001 * (i % 3))
            return current_session()

    assert await asyncio.gather(*(work(i) for i in range(50))) == [{"user_id": f"u-{i}"} for i in range(50)]


def test_invalid_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="dotted"):
        chronicle.session(**{"a..b": 1})


def test_a_session_made_before_configure_is_redacted_by_the_rules_configured_since(tmp_path: Any) -> None:
    from tests.conftest import make_recorder

    iban = "DE89370400440532013000"
    per_request = chronicle.session(iban=iban)  # at import time, before the application configures

    @chronicle.session(iban=iban)
    def handler() -> str:
        return pay(iban)

    recorder = make_recorder(tmp_path, redaction=chronicle.RedactionOptions(keys=[r"(?i)iban"]))

    @chronicle.boundary(kind="tool", name="pay")
    def pay(account: str) -> str:
        return "ok"

    with per_request:
        assert pay(iban) == "ok"
    assert handler() == "ok"
    recorder.config.force_flush()
    spans = [s for s in recorder.memory.get_finished_spans() if s.name == "pay"]
    assert len(spans) == 2
    for span in spans:
        assert (span.attributes or {})[f"{sc.SESSION_PREFIX}iban"] == "[REDACTED]"


def test_more_session_variables_than_the_span_limit_never_cost_the_boundary_its_own_attributes(
    recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    @chronicle.boundary(kind="llm", name="limits.plan")
    def plan(request: str) -> str:
        return request.upper()

    with (
        caplog.at_level(logging.WARNING, logger="chronicle_otel"),
        chronicle.session(**{f"var{i}": i for i in range(140)}),
    ):
        plan("sell")
    attrs = recorder.attrs("limits.plan")
    for key in (sc.BOUNDARY_NAME, sc.BOUNDARY_KIND, sc.CALL_INDEX, sc.CODEC, sc.INPUT, sc.OUTPUT, sc.OUTPUT_HASH):
        assert key in attrs, key
    assert len(attrs) == 128 and sum(k.startswith(sc.SESSION_PREFIX) for k in attrs) < 140
    said = [r.getMessage() for r in caplog.records if "span limit" in r.getMessage()]
    assert len(said) == 1 and "'limits.plan'" in said[0] and "session variables first" in said[0]
    trace = chronicle.load_trace(recorder.path, "latest")
    assert [b.name for b in trace.boundaries] == ["limits.plan"]
