"""The encoder's fast path: a dict or list of JSON natives goes to orjson as it is, without the walk that builds a
copy. It must give the walk's bytes exactly, and every value it cannot vouch for must go to the walk."""

from __future__ import annotations

import enum
import math
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chronicle_otel import codec
from chronicle_otel.codec import MAX_DEPTH, decode, encode, key_filter
from chronicle_otel.codec._encode import _native
from chronicle_otel.codec._format import _canonical
from chronicle_otel.codec._walk import _Walker
from chronicle_otel.redact import PatternRedactor, redact_encoded


class Mood(enum.Enum):
    CALM = "calm"


def _walked(value: Any, redact: Any = None, secrets: list[str] | None = None) -> bytes:
    """What the encoder wrote before the fast path: the walk, then orjson, then the value scan."""
    if redact is None:
        return _canonical(_Walker(None, secrets).walk(value, 0))
    if isinstance(redact, PatternRedactor):
        return redact.redact_json(_canonical(_Walker(redact.key_predicate, secrets).walk(value, 0)))
    key, redactor = codec.resolve(redact)
    data = _canonical(_Walker(key, secrets).walk(value, 0))
    return data if redactor is None else redact_encoded(data, redactor)


_keys = st.one_of(
    st.text(max_size=8),
    st.sampled_from(["$type", "password", "api_key", "token", "items", "Authorization"]),
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["sk-" + "a" * 40, "Bearer abcdefghijklmnopqrstuvwxyz0123", Mood.CALM, uuid.UUID(int=7)]),
    st.binary(max_size=4),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(_keys, inner, max_size=5),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.integers(-3, 3), inner, max_size=2),
    ),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.lists(_values, max_size=4), st.dictionaries(_keys, _values, max_size=5)))
def test_the_fast_path_writes_the_walks_bytes(value: Any) -> None:
    for redact in (None, PatternRedactor(), key_filter([r"(?i)token"])):
        secrets: list[str] = []
        walked_secrets: list[str] = []
        assert encode(value, redact=redact, secrets=secrets) == _walked(value, redact, walked_secrets)
        assert secrets == walked_secrets


class _Key(str):
    """A str subclass: equal to (and hashing as) the plain key, which the key filter may have let through."""


class _Color(str, enum.Enum):
    ITEMS = "items"


_SHARED = PatternRedactor()  # one key filter across examples: the keys it let through are then checked in one step
_learned_keys = st.one_of(_keys, st.sampled_from([_Key("items"), _Key("token"), _Color.ITEMS, _Key("$type")]))
_learned_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(_learned_keys, inner, max_size=5)),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_learned_keys, _learned_values, max_size=5))
def test_the_fast_path_writes_the_walks_bytes_once_the_keys_are_known(value: Any) -> None:
    _SHARED.redact_key("items")
    _SHARED.redact_key("token")
    for _ in range(2):  # the second time every key of the value is known to the filter
        secrets: list[str] = []
        walked_secrets: list[str] = []
        assert encode(value, redact=_SHARED, secrets=secrets) == _walked(value, _SHARED, walked_secrets)
        assert secrets == walked_secrets


def test_a_key_equal_to_a_known_one_but_of_another_type_takes_the_walk() -> None:
    redact = PatternRedactor()
    assert encode({"items": 1}, redact=redact) == b'{"items":1}'
    assert "items" in redact.key_predicate.safe  # type: ignore[attr-defined]
    for odd in ({_Key("items"): 1}, {_Color.ITEMS: 1}):
        assert encode(odd, redact=redact) == _walked(odd, redact)
        assert encode(odd, redact=redact) != b'{"items":1}'


@pytest.mark.parametrize(
    "value",
    [
        {"x": math.nan},
        {"x": [math.inf]},
        {"x": 2**64},
        {"x": -(2**63) - 1},
        {"x": (1, 2)},
        {"x": Mood.CALM},
        {"$type": "dict", "items": []},
        {"password": "hunter2"},
        {1: "one"},
        [{"nested": {"api_key": "k"}}],
    ],
)
def test_values_the_fast_path_cannot_vouch_for_take_the_walk(value: Any) -> None:
    assert not _native(value, 0, PatternRedactor().key_predicate, None)
    assert encode(value, redact=PatternRedactor()) == _walked(value, PatternRedactor())


def test_integer_bounds_are_the_walks() -> None:
    for n in (-(2**63), 2**64 - 1):
        assert _native([n], 0, None, None)
        assert encode([n]) == _walked([n])
    for n in (-(2**63) - 1, 2**64):
        assert not _native([n], 0, None, None)
        assert decode(encode([n])) == [n]


def test_nesting_at_the_depth_bound_is_cut_as_before() -> None:
    for depth in (MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 3 * MAX_DEPTH):
        value: Any = "leaf"
        for _ in range(depth):
            value = [value]
        assert encode(value) == _walked(value)


def test_a_cycle_is_cut_as_before() -> None:
    cycle: dict[str, Any] = {"name": "loop"}
    cycle["self"] = cycle
    data = encode(cycle)
    assert data == _walked(cycle)
    assert b"<cycle>" in data


def test_a_lone_surrogate_is_recorded_instead_of_raising() -> None:
    value = {"text": "half \ud800 a pair", "fine": "ok", "\udc00key": [1, "\ud83d"]}
    data = encode(value, redact=PatternRedactor())
    tree = decode(data)
    assert tree["fine"] == "ok"
    assert isinstance(tree["text"], codec.UnresolvedObject)
    assert tree["text"].tag == "unencodable"
    assert "\\ud800" in tree["text"].data
    assert tree["\\udc00key"][0] == 1
    assert isinstance(tree["\\udc00key"][1], codec.UnresolvedObject)
    assert encode("\ud800") == encode("\ud800")  # deterministic: the bytes still address the payload
