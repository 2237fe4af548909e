"""The canonical bytes of the codec are an address: their sha256 names a payload in every store. These hashes were
computed by the codec before it was optimised; any change to the encoding shows here."""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import decimal
import enum
import hashlib
import json
import uuid
from typing import Any

import pytest

from chronicle_otel.codec import encode
from chronicle_otel.redact import PatternRedactor

# The module the classes stood in when the hashes were computed (tests/unit/test_codec_pinned.py): a class's recorded
# name is part of the bytes.
PINNED_MODULE = "tests.unit.test_codec_pinned"


class Color(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


@dataclasses.dataclass
class Point:
    x: int
    y: float


Pair = collections.namedtuple("Pair", "a b")

for _cls in (Color, Level, Point, Pair):
    _cls.__module__ = PINNED_MODULE


def values() -> dict[str, Any]:
    cycle: list[Any] = []
    cycle.append(cycle)
    return {
        "plain": {
            "messages": [{"role": "user", "content": "Sell $1,000 of MSFT"}],
            "temperature": 0.7,
            "n": 1,
            "stream": False,
            "stop": None,
        },
        "nested": {"a": {"b": {"c": [1, 2.5, "x", None, True]}}},
        "tuple": (1, "a", (2,)),
        "set": {3, 1, 2},
        "frozenset": frozenset({"b", "a"}),
        "enum": [Color.RED, Level.HIGH],
        "dataclass": Point(1, 2.0),
        "namedtuple": Pair(1, "b"),
        "datetime": dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.timezone.utc),
        "date_time_delta": [dt.date(2026, 1, 2), dt.time(3, 4, 5), dt.timedelta(days=1, seconds=2)],
        "decimal": decimal.Decimal("190.42"),
        "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "floats": [float("nan"), float("inf"), -0.0, 1e300],
        "ints": [2**63, -(2**64), 2**70, True, 0],
        "bytes": b"\x00\xffabc",
        "non_str_keys": {1: "a", (2, 3): "b", None: "c"},
        "tag_key": {"$type": "dict", "items": []},
        "secret_key": {"api_key": "sk-proj-4f9Qm2xT7vLp8RzK3nWb1234", "user": "u-17"},
        "secret_value": {"note": "key sk-proj-4f9Qm2xT7vLp8RzK3nWb1234 here"},
        "cycle": cycle,
        "str_subclass": [collections.UserString("x"), type("Text", (str,), {})("y")],
        "dict_subclass": collections.OrderedDict([("b", 1), ("a", 2)]),
        "deep": json.loads("[" * 70 + "]" * 70),
    }


PINNED = {
    "bytes": "1c150326fcd53326b7dab3f2626c079233475fe14776f915ef6384fbe412ef67",
    "cycle": "6118e8fb4dff09ec3af805ca31403f211f348b0023919af8a832b6158c9110dd",
    "dataclass": "76fad23110ce705b9a68d3d668e3bb5aaa1ad61a861cdd3f1e87a9e78944b729",
    "date_time_delta": "c03b9f0cfd48852d802043f35d0d93cc1ff0e9af71e3a99df41bd518076471e9",
    "datetime": "21d99bc328a74336b3168cb90153fc0b88de438b7b42f2b7c762b721b56091a5",
    "decimal": "b1a0e80d24dee264c3d3a244683526efbc57dcfe6db20d995dd671f5268c26d5",
    "deep": "9b4e869142351b3575af7487359c2051a5d976a397d9b9061791c7848874f7a3",
    "dict_subclass": "d3626ac30a87e6f7a6428233b3c68299976865fa5508e4267c5415c76af7a772",
    "enum": "82e8a8e03f89eac34c435e6ddecfa4b36bf1152b002b2d7add1acc6300f58aa4",
    "floats": "30dc6122403a70672ea773ed021710a731a17e6fda6ac03256914a6a46e1c6a6",
    "frozenset": "548ce2baa5140a30c0e3a5ee1c793b8764ebae7f13b1b72be8a38a2ee3991788",
    "ints": "227f63353c6c6a35301143bac85489f35901d040a09f2a9f964397206717d281",
    "namedtuple": "4fe31cb3395040c2112d75430d32dab4727110a25e1519a54c48e0503bd58855",
    "nested": "0f96c0bc3125a4c8aef481922cbb28adb0dbe8a68e36203c959d232747abbb50",
    "non_str_keys": "78f66e61aadc98f682dbb330c01e036270609606cf8766ac6f044a901ee434d6",
    "plain": "7f5fc6a2fa3c41b5989add886c15ab95124be2057d3db15a3ba2adcb1631d3c7",
    "secret_key": "76fc170c14b344a07c9e75d58e5d5177f0080a5baaa6551933cdab8e29ee0ef9",
    "secret_value": "19f04a87c6ebf837afebe0f33fa5e1aa9f172b9dc503821f271340d49899c66e",
    "set": "6fbaf9bc6d581041da5e6b4ca1ac0fd29a599652f89db6a69ea05462b7b3ba57",
    "str_subclass": "db2bffb8161cdb35763d552cd234ba73d48058ec291d8378c022d10dd2c313fa",
    "tag_key": "2d2b79315e923d689feafde9b3800a28c1aefd75bd6c58eca2b2c0f1291cdd5e",
    "tuple": "5ca6c96aff2ec2dbcbf2f5999f46f56307619db5870975a241370bb9f36ad3ba",
    "uuid": "0fc1e4f998cf6168e4604235d4963269ecacc8c772802f2c2a0e3684c706ad37",
}


@pytest.mark.parametrize("name", sorted(values()))
def test_canonical_bytes_are_pinned(name: str) -> None:
    data = encode(values()[name], redact=PatternRedactor())
    assert hashlib.sha256(data).hexdigest() == PINNED[name], data[:300]
