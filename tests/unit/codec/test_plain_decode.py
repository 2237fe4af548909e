"""Decoding a payload with no type tag skips the tree walk: the result must be what the walk gives, every time new."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chronicle_otel.codec import MAX_DECODE_DEPTH, UnresolvedObject, decode, decode_value, encode
from chronicle_otel.errors import CodecError

_json = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**64 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=12),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=20,
)


def _typed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


@settings(max_examples=300, deadline=None)
@given(_json)
def test_untagged_payloads_decode_as_the_walk_decodes_them(value: Any) -> None:
    data = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    walked = decode_value(orjson.loads(data))
    assert _typed(decode(data)) == _typed(walked)
    assert _typed(decode(data.decode())) == _typed(walked)


def test_each_decode_is_a_new_value() -> None:
    data = encode({"messages": [{"role": "user", "content": "hi"}]})
    first, second = decode(data), decode(data)
    first["messages"].append("changed")
    assert second == {"messages": [{"role": "user", "content": "hi"}]}


def test_a_tag_spelled_with_escapes_is_still_a_tag() -> None:
    assert decode(r'{"\u0024type": "tuple", "items": [1, 2]}') == (1, 2)
    hidden = decode(r'{"$typ\u0065": "dataclass", "class": "os.PathLike", "data": {}}')
    assert isinstance(hidden, UnresolvedObject)


def test_nesting_past_the_bound_is_refused_without_a_tag() -> None:
    deep = "[" * (MAX_DECODE_DEPTH + 1) + "]" * (MAX_DECODE_DEPTH + 1)
    with pytest.raises(CodecError, match="MAX_DECODE_DEPTH"):
        decode(deep)
    assert decode("[" * MAX_DECODE_DEPTH + "]" * MAX_DECODE_DEPTH) is not None
    wide = orjson.dumps([{"i": i} for i in range(2 * MAX_DECODE_DEPTH)])  # many objects, shallow: the walk decides
    assert decode(wide) == [{"i": i} for i in range(2 * MAX_DECODE_DEPTH)]
