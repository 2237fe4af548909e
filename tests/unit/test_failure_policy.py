"""Instrumentation never breaks the user's code: chronicle's own failures are logged once and swallowed."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel._internal import errors
from chronicle_otel._internal.buffer import PayloadBuffer
from tests.conftest import Recorder, make_recorder


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    """chronicle's warnings about its own failures (a value recorded as a placeholder is said on its own)."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING
        and r.name == "chronicle_otel"
        and "unencodable placeholder" not in r.getMessage()
    ]


class LazyResponse:
    """An SDK response whose usage is fetched on first access, and the fetch fails."""

    model = "m-1"

    @property
    def usage(self) -> Any:
        raise RuntimeError("usage not loaded")


class KeyShy:
    """A user's redactor that fails on every key name."""

    def redact_key(self, name: str) -> bool:
        raise RuntimeError("no keys today")

    def redact_text(self, text: str) -> str:
        return text


@pytest.mark.parametrize("stage", ["start", "input", "output"])
def test_a_failing_recording_stage_keeps_return_value(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, swallow_internal_errors: None, stage: str
) -> None:
    options: dict[str, Any] = {"redaction": chronicle.RedactionOptions(redactor=KeyShy())} if stage == "input" else {}
    rec = make_recorder(tmp_path, **options)
    results = [LazyResponse() if stage == "output" else i for i in range(5)]

    def broken_switch() -> bool:
        raise RuntimeError("switch is broken")

    @chronicle.boundary(name="f", kind="llm", enabled=broken_switch if stage == "start" else True)
    def f(i: int) -> Any:
        return results[i]

    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        assert all(f(i) is results[i] for i in range(5))
    assert len(warnings_of(caplog)) == 1
    assert "your code still runs" in warnings_of(caplog)[0]
    # a call that could not start has no span; one whose recording failed later still ends its span
    assert len(rec.spans()) == (0 if stage == "start" else 5)


def test_a_failing_result_still_ends_the_span_with_what_was_recorded(
    recorder: Recorder, swallow_internal_errors: None
) -> None:
    @chronicle.boundary(name="lazy", kind="llm")
    def lazy(prompt: str) -> LazyResponse:
        return LazyResponse()

    assert isinstance(lazy("hi"), LazyResponse)
    attrs = recorder.attrs("lazy")
    assert recorder.io("lazy", sc.INPUT) == {"prompt": "hi"}
    assert sc.OUTPUT in attrs and sc.GEN_AI_USAGE_INPUT_TOKENS not in attrs


def test_handoff_failure_keeps_the_exception(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, swallow_internal_errors: None
) -> None:
    assert recorder.config.payload_buffer is not None

    def full(self: PayloadBuffer, span_id: int, payloads: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(PayloadBuffer, "put", full)
    original = LookupError("not found")

    @chronicle.boundary(name="g")
    def g(text: str) -> None:
        raise original

    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        for _ in range(3):
            with pytest.raises(LookupError) as info:
                g("x" * 20_000)
            assert info.value is original
    assert len(warnings_of(caplog)) == 1


def test_our_own_suite_sees_internal_errors(recorder: Recorder) -> None:
    @chronicle.boundary(name="h", kind="llm")
    def h() -> LazyResponse:
        return LazyResponse()

    with pytest.raises(RuntimeError, match="usage not loaded"):
        h()
    assert [s.name for s in recorder.spans()] == ["h"]  # the span is ended all the same


def test_a_users_failing_code_is_logged_even_in_our_own_suite(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    make_recorder(tmp_path, redaction=chronicle.RedactionOptions(redactor=KeyShy()))

    @chronicle.boundary(name="k")
    def k(x: int) -> int:
        return x

    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        assert k(3) == 3
    assert "no keys today" in caplog.text


def test_wrong_arguments_fail_like_the_undecorated_function(recorder: Recorder) -> None:
    @chronicle.boundary(name="strict")
    def strict(a: int, *, b: int) -> int:
        return a + b

    def plain(a: int, *, b: int) -> int:
        return a + b

    for args, kwargs in (((1, 2), {}), ((), {"b": 1}), ((1,), {"b": 1, "c": 2})):
        with pytest.raises(TypeError) as ours:
            strict(*args, **kwargs)
        with pytest.raises(TypeError) as theirs:
            plain(*args, **kwargs)
        assert str(ours.value).replace("strict", "plain") == str(theirs.value)


def test_user_objects_with_hostile_dunders_are_recorded_safely(recorder: Recorder) -> None:
    class Hostile:
        def __repr__(self) -> str:
            raise RuntimeError("repr")

        def __eq__(self, other: object) -> bool:
            raise RuntimeError("eq")

        __hash__ = object.__hash__

    h = Hostile()

    @chronicle.boundary(name="hostile")
    def hostile(x: Any) -> Any:
        return x

    assert hostile(h) is h
    assert recorder.io("hostile")["$type"] == "unencodable"


def test_the_guard_as_a_block_and_on_a_caught_exception(caplog: pytest.LogCaptureFixture) -> None:
    guard = errors.handle_internal_errors("doing %s for %r", "work", "f")
    external = errors.handle_internal_errors("calling someone else's code", external=True)
    with pytest.raises(LookupError), guard:  # our own suite: chronicle's failures surface
        raise LookupError("bug")
    with pytest.raises(LookupError):
        guard.absorb(LookupError("bug"))
    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        with external:
            raise ValueError("their bug")  # someone else's failure is logged, even here
        external.absorb(ValueError("their bug"))
        errors.RAISE_INTERNAL_ERRORS = False
        with guard:
            raise OSError("disk full")
    assert [m.split(" failed")[0] for m in warnings_of(caplog)] == [
        "chronicle_otel: calling someone else's code",
        "chronicle_otel: calling someone else's code",  # another cause: raised elsewhere
        "chronicle_otel: doing work for 'f'",
    ]
    with pytest.raises(KeyboardInterrupt), guard:  # never swallowed
        raise KeyboardInterrupt


class ClassShy:
    """A lazy proxy whose ``__class__`` fails to resolve (its setup fails)."""

    @property  # type: ignore[misc]
    def __class__(self) -> Any:
        raise RuntimeError("lazy object setup failed")


def test_a_return_value_whose_class_raises_is_returned(recorder: Recorder, swallow_internal_errors: None) -> None:
    import asyncio

    value = ClassShy()

    @chronicle.boundary(kind="tool", name="lazy.sync")
    def sync() -> Any:
        return value

    @chronicle.boundary(kind="tool", name="lazy.async")
    async def run_async() -> Any:
        return value

    assert sync() is value
    assert asyncio.run(run_async()) is value
    recorder.config.force_flush()
    ended = {span.name for span in recorder.memory.get_finished_spans()}
    assert {"lazy.sync", "lazy.async"} <= ended  # their spans ended too


@pytest.mark.parametrize("where", ["report", "fail", "succeed"])
def test_at_the_recursion_limit_the_function_keeps_its_own_value_and_exception(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch, swallow_internal_errors: None, where: str
) -> None:
    """Near the recursion limit, recording (or reporting its own failure) raises RecursionError: the call's record
    is lost, never what the function returned or raised."""
    from chronicle_otel.record import _recording

    def overflow(*args: Any, **kwargs: Any) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    if where == "report":  # the recording fails, and logging that failure overflows too
        monkeypatch.setattr(errors, "log_once", overflow)
        monkeypatch.setattr(_recording.Call, "_error", overflow)
        monkeypatch.setattr(_recording.Call, "_output", overflow, raising=False)
    else:
        monkeypatch.setattr(_recording.Call, where, overflow)
    original = LookupError("own")

    @chronicle.boundary(name="deep")
    def deep(fail: bool) -> object:
        if fail:
            raise original
        return original

    with pytest.raises(LookupError) as info:
        deep(True)
    assert info.value is original and info.value.__context__ is None
    assert deep(False) is original

    async def adeep() -> object:
        return original

    import asyncio

    assert asyncio.run(chronicle.boundary(name="adeep")(adeep)()) is original


def test_payloads_the_full_hand_off_buffer_drops_are_counted_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = chronicle.StoreOptions(path=tmp_path / ".chronicle", buffer_bytes=50_000, max_delay=60)
    rec = make_recorder(tmp_path, store=store)

    @chronicle.boundary(name="big", kind="tool")
    def big(text: str) -> str:
        return "ok"

    for i in range(6):  # 40 KB inputs, cut on the span: each waits for the exporter in the buffer
        big(f"{i}" * 40_000)
    rec.config.force_flush()
    stats = rec.config.stats()
    assert stats.store is not None and stats.store.dropped_payloads == 5  # each newer one pushed the older out
    assert stats.dropped == 5
    missing = 0
    for summary in rec.store.list_traces(limit=10):
        boundary = chronicle.load_trace(rec.store.path, summary.trace_id).boundaries[0]
        missing += boundary.raw_input is not None and not boundary.raw_input.complete
    assert missing == 5
    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        rec.config.shutdown()
    assert any("5 whole payloads were dropped" in m for m in warnings_of(caplog))


def test_the_store_has_a_deadline_at_exit_too(tmp_path: Path) -> None:
    """An index another process keeps locked would hold the exit for as long: the store gets 60 s, or exit_timeout."""
    from chronicle_otel.config._pipeline import STORE_EXIT_TIMEOUT
    from chronicle_otel.export._batch import BatchProcessor

    for exit_timeout, expected in ((5.0, STORE_EXIT_TIMEOUT), (120.0, 120.0)):
        config = chronicle.configure(
            store=chronicle.StoreOptions(path=tmp_path / f"s{exit_timeout}"), exit_timeout=exit_timeout, local=True
        )
        (store,) = [p for p in config.processors if isinstance(p, BatchProcessor) and p.name == "store"]
        assert store.shutdown_timeout == expected
        config.shutdown()
