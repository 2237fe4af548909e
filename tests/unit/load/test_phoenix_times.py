"""Phoenix's ISO 8601 times read the same on every supported Python (3.10's ``fromisoformat`` is the narrowest)."""

from __future__ import annotations

import pytest

from chronicle_otel._internal.untrusted import Where
from chronicle_otel.errors import TraceLoadError
from chronicle_otel.load._phoenix import _ns

NOON = 1_704_110_400_000_000_000  # 2024-01-01T12:00:00Z in ns


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-01T12:00:00Z", NOON),
        ("2024-01-01T12:00:00+00:00", NOON),
        ("2024-01-01T12:00:00.5+00:00", NOON + 500_000_000),
        ("2024-01-01T12:00:00.25Z", NOON + 250_000_000),
        ("2024-01-01T12:00:00,25Z", NOON + 250_000_000),
        ("2024-01-01T12:00:00.123456789Z", NOON + 123_456_000),  # microseconds kept, as datetime does
        ("2024-01-01T12:00:00.123+0000", NOON + 123_000_000),
        ("2024-01-01T13:00:00+01", NOON),
        ("2024-01-01 07:00:00.5-05:00", NOON + 500_000_000),
        ("2024-01-01T12:00:00", NOON),  # no offset: UTC
        ("2024-01-01", NOON - 12 * 3600 * 10**9),
    ],
)
def test_iso_times_in_every_spelling_phoenix_may_send(text: str, expected: int) -> None:
    assert _ns(text, Where("phoenix.json"), "start_time") == expected


@pytest.mark.parametrize("text", ["2024-01-01T12:00:00.5.5Z", "noon", "2024-13-01T00:00:00Z", "2024-01-01T12:00:00+1"])
def test_malformed_times_are_load_errors(text: str) -> None:
    with pytest.raises(TraceLoadError, match="an ISO 8601 time"):
        _ns(text, Where("phoenix.json"), "start_time")
