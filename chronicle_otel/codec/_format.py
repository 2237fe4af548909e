"""What chronicle-json/1 is: its version, the tag key of typed values, its bounds, its canonical bytes."""

from __future__ import annotations

from typing import Any, Final

import orjson

CODEC_VERSION: Final = "chronicle-json/1"
"""Version tag of the encoding, written on every boundary span."""

TAG: Final = "$type"
"""The key of a typed value's tag: ``{"$type": tag, ...}``."""

MAX_DEPTH: Final = 64
"""Containers nested deeper than this are recorded as ``unencodable``."""

MAX_DECODE_DEPTH: Final = 4 * MAX_DEPTH
"""Values nested deeper than this are refused by the decoder (:class:`~chronicle_otel.errors.CodecError`)."""

MAX_DECODE_BYTES: Final = 256 << 20
"""Payloads larger than this (bytes of JSON text) are refused by the decoder."""

MAX_INT_DIGITS: Final = 4300
"""Integers written with more digits than this are refused (parsing them costs quadratic time)."""

_INT64_MIN = -(2**63)
_UINT64_MAX = 2**64 - 1


def _canonical(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
