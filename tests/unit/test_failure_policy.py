"""Instrumentation never breaks the user's code: chronicle's own failures are logged once and swallowed."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import chronicle_otel as chronicle
from chronicle_otel import _boundary as boundary_module
from chronicle_otel._internal.buffer import PayloadBuffer
from tests.conftest import Recorder


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name == "chronicle_otel"]


@pytest.mark.parametrize("stage", ["input", "output"])
def test_encoding_failure_keeps_return_value(
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    swallow_internal_errors: None,
    stage: str,
) -> None:
    real = boundary_module._payload

    def broken(attrs: Any, pending: Any, keys: Any, *args: Any, **kwargs: Any) -> None:
        if (stage == "input") == (keys is boundary_module._INPUT_KEYS):
            raise RuntimeError("encoder blew up")
        real(attrs, pending, keys, *args, **kwargs)

    monkeypatch.setattr(boundary_module, "_payload", broken)

    @chronicle.boundary(name="f")
    def f(x: int) -> int:
        return x + 1

    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        assert [f(i) for i in range(5)] == [1, 2, 3, 4, 5]
    assert len(warnings_of(caplog)) == 1
    assert "your code still runs" in warnings_of(caplog)[0]


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


def test_our_own_suite_sees_internal_errors(recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("bug in chronicle")

    monkeypatch.setattr(boundary_module, "_payload", broken)

    @chronicle.boundary(name="h")
    def h() -> int:
        return 1

    with pytest.raises(RuntimeError, match="bug in chronicle"):
        h()


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
