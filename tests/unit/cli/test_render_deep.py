"""``chronicle show --full`` renders any payload the decoder accepts: a hostile one nested deep is cut, never a
RecursionError."""

from __future__ import annotations

from typing import Any

from chronicle_otel.cli._render import render


def _nested(depth: int, tagged: bool) -> Any:
    value: Any = []
    for _ in range(depth):
        value = {"$type": "tuple", "items": [value]} if tagged else [value]
    return value


def test_a_deep_payload_is_cut_in_full_and_in_short() -> None:
    for tagged in (False, True):
        for width in (None, 100):
            text = "\n".join(render(_nested(900, tagged), width=width))
            assert "…" in text
