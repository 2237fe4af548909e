from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import math
import uuid
from collections import namedtuple
from decimal import Decimal
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

import orjson
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chronicle_otel import codec
from chronicle_otel.codec import REDACTED, UnresolvedObject, decode, encode, key_filter, register_type
from chronicle_otel.errors import CodecError


class Side(enum.Enum):
    BUY = "buy"
    SELL = "sell"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass(frozen=True)
class Order:
    symbol: str
    qty: int
    side: Side = Side.BUY


@dataclasses.dataclass
class WithDerived:
    a: int
    b: int = dataclasses.field(init=False, default=0)


class Quote(pydantic.BaseModel):
    symbol: str
    price: Decimal
    at: dt.datetime


class Fill(pydantic.BaseModel):
    quote: Quote
    legs: list[Order]


Point = namedtuple("Point", "x y")


class Money:
    def __init__(self, amount: Decimal, currency: str) -> None:
        self.amount, self.currency = amount, currency

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Money) and (self.amount, self.currency) == (other.amount, other.currency)

    __hash__ = None  # type: ignore[assignment]


register_type(Money, encode=lambda m: [m.amount, m.currency], decode=lambda d: Money(d[0], d[1]))

ALLOW = [__name__]


def roundtrip(value: Any) -> Any:
    return decode(encode(value), allow=ALLOW)


# ------------------------------------------------------------------ strategies

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),  # beyond 64 bits too
    st.floats(allow_nan=False),
    st.text(),
)
typed_scalars = st.one_of(
    st.datetimes(timezones=st.none() | st.timezones()),
    st.dates(),
    st.times(),
    st.timedeltas(),
    st.decimals(allow_nan=False),
    st.uuids(),
    st.binary(),
    st.sampled_from(list(Side) + list(Level)),
    st.builds(lambda s: PurePosixPath("/" + s.replace("\x00", "")), st.text(max_size=20)),
    st.complex_numbers(allow_nan=False, allow_infinity=False),
    st.builds(Order, st.text(max_size=8), st.integers(), st.sampled_from(list(Side))),
    st.builds(lambda d, c: Money(d, c), st.decimals(allow_nan=False, places=2), st.text(max_size=3)),
    st.builds(Point, st.integers(), st.text(max_size=5)),
)
hashable = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=10), st.uuids(), st.decimals(allow_nan=False)
)
values = st.recursive(
    json_scalars | typed_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(st.text(max_size=8), children, max_size=4),
        st.dictionaries(st.integers() | st.tuples(st.integers(), st.text(max_size=3)), children, max_size=3),
        st.sets(hashable, max_size=4),
        st.frozensets(hashable, max_size=4),
    ),
    max_leaves=12,
)


def normal(value: Any) -> Any:
    """Equality helper: Decimal('1.0') == Decimal('1.00') but we also want the exact representation back."""
    return value


@settings(max_examples=300, deadline=None)
@given(values)
def test_roundtrip_every_type(value: Any) -> None:
    back = roundtrip(value)
    assert back == value
    assert type(back) is type(value)
    assert encode(back) == encode(value)  # canonical: the round trip re-encodes to the same bytes


@settings(max_examples=100, deadline=None)
@given(st.decimals(allow_nan=False))
def test_decimal_keeps_its_exact_representation(value: Decimal) -> None:
    assert str(roundtrip(value)) == str(value)


@settings(max_examples=100, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_floats_including_nan_and_infinity(value: float) -> None:
    back = roundtrip(value)
    assert (math.isnan(back) and math.isnan(value)) or back == value


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=5), st.integers(), max_size=6))
def test_canonical_encoding_ignores_insertion_order(d: dict[str, int]) -> None:
    reversed_d = dict(reversed(list(d.items())))
    assert encode(d) == encode(reversed_d)
    text = encode(d).decode()
    assert (
        " " not in text.replace(" ", "")
        and text == orjson.dumps(orjson.loads(text), option=orjson.OPT_SORT_KEYS).decode()
    )


def test_non_string_keys_and_sets_are_canonical() -> None:
    assert encode({2: "b", 1: "a"}) == encode({1: "a", 2: "b"})
    assert encode({3, 1, 2}) == encode({2, 3, 1})


def test_pydantic_models_nested() -> None:
    q = Quote(symbol="MSFT", price=Decimal("190.12"), at=dt.datetime(2026, 11, 29, 9, 30, tzinfo=dt.timezone.utc))
    fill = Fill(quote=q, legs=[Order("MSFT", 5)])
    tree = orjson.loads(encode(fill))
    assert tree["$type"] == "pydantic" and tree["class"] == f"{__name__}.Fill"
    assert roundtrip(fill) == fill


def test_dataclass_with_non_init_field() -> None:
    w = WithDerived(1)
    w.b = 7
    assert roundtrip(w) == w


def test_exceptions() -> None:
    back = roundtrip(ValueError("bad", 3))
    assert type(back) is ValueError and back.args == ("bad", 3)

    class Private(Exception):
        pass

    unresolved = decode(encode(Private("x")))
    assert unresolved == UnresolvedObject(
        "exception", f"{__name__}.{Private.__qualname__}", {"message": "x", "args": ["x"]}
    )


class RateLimited(Exception):
    """An SDK-style error: a keyword with a default, a message formatted from the argument."""

    def __init__(self, symbol: str, status_code: int = 500) -> None:
        super().__init__(f"rate limited on {symbol!r}")
        self.symbol, self.status_code = symbol, status_code


class Formatted(OSError):
    def __init__(self, path: str) -> None:
        super().__init__(2, "gone", path)


class Unreachable(ConnectionError):
    def __init__(self, *args: Any, host: str = "?") -> None:
        super().__init__(*args)
        self.host = host
        self._retries = 3  # derived, private: not recorded, made again by the constructor


def test_an_exception_is_rebuilt_with_its_recorded_args_and_attributes_over_what_init_sets() -> None:
    back = roundtrip(RateLimited("MSFT", status_code=429))
    assert type(back) is RateLimited and back.status_code == 429 and back.symbol == "MSFT"
    assert back.args == ("rate limited on 'MSFT'",) and str(back) == "rate limited on 'MSFT'"  # not formatted twice
    assert type(roundtrip(Formatted("/x"))) is Formatted  # a constructor that refuses the args: built without it
    unicode = roundtrip(UnicodeDecodeError("utf-8", b"\xff", 0, 1, "bad"))
    assert unicode.reason == "bad" and unicode.start == 0
    unreachable = roundtrip(Unreachable(111, "connection refused", host="db1"))
    assert (unreachable.errno, unreachable.host, unreachable._retries) == (111, "db1", 3)
    assert str(unreachable) == "[Errno 111] connection refused"


@dataclasses.dataclass
class Tagged:
    text: str

    def __post_init__(self) -> None:
        self.text = "[bot] " + self.text
        self.side = Side.SELL if "sell" in self.text else Side.BUY  # derived outside the fields, not plain data
        self._key = ("k", self.text.count("[bot]") > 0)  # derived, private


@dataclasses.dataclass(frozen=True, slots=True)
class Scaled:
    value: int
    factor: dataclasses.InitVar[int]

    def __post_init__(self, factor: int) -> None:
        object.__setattr__(self, "value", self.value * factor)


def test_a_dataclass_is_rebuilt_by_its_constructor_with_its_recorded_fields_put_back() -> None:
    back = roundtrip(Tagged("sell 5"))
    assert back.text == "[bot] sell 5"  # the field as recorded: the tag once
    assert back.side is Side.SELL and back._key == ("k", True)  # what __post_init__ derives, derived again
    assert orjson.loads(encode(Tagged("x"))).keys() == {"$type", "class", "data"}  # the encoding is the fields
    scaled = roundtrip(Scaled(5, 10))
    assert type(scaled) is Scaled and scaled.value == 50  # an InitVar is never stored: built from the fields alone


def test_a_dataclass_field_added_since_the_recording_takes_its_default() -> None:
    data = orjson.loads(encode(Order("MSFT", 1)))
    del data["data"]["side"]
    assert decode(orjson.dumps(data), allow=[__name__]) == Order("MSFT", 1, Side.BUY)
    del data["data"]["qty"]
    with pytest.raises(CodecError, match="no value for the field 'qty'"):
        decode(orjson.dumps(data), allow=[__name__])


def test_a_windows_path_comes_back_as_a_windows_path() -> None:
    back = roundtrip(PureWindowsPath(r"C:\Users\x\report.txt"))
    assert type(back) is PureWindowsPath and back.name == "report.txt" and back.drive == "C:"
    assert "flavour" not in orjson.loads(encode(PurePosixPath("/a")))  # POSIX paths encode as before


def test_registered_type_is_rebuilt_without_allow_list() -> None:
    m = Money(Decimal("1000.00"), "USD")
    assert decode(encode(m)) == m


def test_decoding_is_allow_listed() -> None:
    data = encode({"order": Order("MSFT", 1), "side": Side.SELL})
    side = UnresolvedObject("enum", f"{__name__}.Side", "buy")
    plain = decode(data)
    assert plain["order"] == UnresolvedObject(
        "dataclass", f"{__name__}.Order", {"symbol": "MSFT", "qty": 1, "side": side}
    )
    assert plain["side"] == UnresolvedObject("enum", f"{__name__}.Side", "sell")
    assert decode(data, allow=[__name__ + "."]) == {"order": Order("MSFT", 1), "side": Side.SELL}
    only_order = decode(data, allow=[f"{__name__}.Order"])
    assert isinstance(only_order["order"], Order) and only_order["order"].side == side
    assert isinstance(only_order["side"], UnresolvedObject)


def test_decoding_never_imports_or_executes() -> None:
    import sys

    assert "antigravity" not in sys.modules
    evil = orjson.dumps(
        [
            {"$type": "dataclass", "class": "antigravity.Thing", "data": {}},
            {"$type": "exception", "class": "os.system", "message": "", "args": ["echo hacked"]},
            {"$type": "enum", "class": "subprocess.Popen", "name": "x", "value": ["id"]},
            {"$type": "pickle", "data": "gASVAAAA"},
        ]
    )
    out = decode(evil, allow=["antigravity", "os", "subprocess"])
    assert "antigravity" not in sys.modules
    assert all(isinstance(x, UnresolvedObject) for x in out)


def test_unencodable_values_never_fail() -> None:
    class Weird:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    lock = __import__("threading").Lock()
    tree = orjson.loads(encode({"lock": lock, "weird": Weird(), "fn": len, "gen": (i for i in [])}))
    assert tree["lock"]["$type"] == "unencodable"
    assert "lock" in tree["lock"]["repr"]
    assert tree["weird"]["$type"] == "unencodable" and "repr failed" in tree["weird"]["repr"]
    assert tree["fn"]["$type"] == "unencodable"


def test_a_failing_encoder_is_contained() -> None:
    class Boom:
        pass

    def explode(_: Boom) -> Any:
        raise RuntimeError("encoder exploded")

    register_type(Boom, encode=explode, decode=lambda d: Boom())
    tree = orjson.loads(encode({"ok": 1, "bad": Boom()}))
    assert tree["ok"] == 1
    assert tree["bad"]["$type"] == "unencodable"
    assert tree["bad"]["reason"] == "RuntimeError: encoder exploded"


def test_cycles_are_cut() -> None:
    a: list[Any] = [1]
    a.append(a)
    d: dict[str, Any] = {"k": 1}
    d["self"] = d
    tree = orjson.loads(encode({"a": a, "d": d}))
    assert tree["a"][1] == {"$type": "unencodable", "class": "builtins.list", "repr": "<cycle>"}
    assert tree["d"]["self"]["repr"] == "<cycle>"
    shared = [1, 2]
    assert orjson.loads(encode([shared, shared])) == [[1, 2], [1, 2]]  # shared, not cyclic


def test_deep_nesting_is_cut_at_max_depth() -> None:
    deep: Any = "leaf"
    for _ in range(codec.MAX_DEPTH + 50):
        deep = [deep]
    tree = orjson.loads(encode(deep))
    depth = 0
    while isinstance(tree, list):
        tree = tree[0]
        depth += 1
    assert depth == codec.MAX_DEPTH
    assert tree["$type"] == "unencodable"


def test_huge_values_encode_whole() -> None:
    big = {"rows": [{"i": i, "s": "x" * 100} for i in range(20_000)]}
    data = encode(big)
    assert len(data) > 2_000_000
    assert decode(data) == big


def test_big_integers_and_bools_keep_types() -> None:
    for v in (2**64, -(2**63) - 1, 2**63 - 1, True, False, 0):
        back = roundtrip(v)
        assert back == v and type(back) is type(v)


def test_paths_keep_concrete_or_pure() -> None:
    assert roundtrip(Path("/tmp/x")) == Path("/tmp/x") and isinstance(roundtrip(Path("/tmp/x")), Path)
    assert type(roundtrip(PurePosixPath("a/b"))) is PurePosixPath


def test_uuid_and_bytes() -> None:
    u = uuid.uuid4()
    assert roundtrip({"id": u, "blob": b"\x00\xff"}) == {"id": u, "blob": b"\x00\xff"}


def test_user_dict_with_type_key_is_not_confused_with_a_tag() -> None:
    v = {"$type": "datetime", "iso": "2020-01-01"}
    assert roundtrip(v) == v


def test_malformed_tags_and_non_json_raise_codec_error() -> None:
    with pytest.raises(CodecError, match="malformed 'datetime'"):
        decode(b'{"$type":"datetime","iso":42}')
    with pytest.raises(CodecError, match="not chronicle-json"):
        decode(b"{not json")


def test_unknown_tags_are_kept_unresolved() -> None:
    assert decode(b'{"$type":"from-the-future","class":"x.Y","v":1}') == UnresolvedObject(
        "from-the-future", "x.Y", {"class": "x.Y", "v": 1}
    )


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("password", True),
        ("db_password", True),
        ("openai_api_key", True),
        ("apiKey", True),
        ("x-api-key", True),
        ("Authorization", True),
        ("access_token", True),
        ("token", True),
        ("Cookie", True),
        ("client_secret", True),
        ("card_number", True),
        ("max_tokens", False),
        ("input_tokens", False),
        ("author", False),
        ("user_id", False),
        ("model", False),
        ("tokenizer", False),
    ],
)
def test_default_redaction_keys(key: str, secret: bool) -> None:
    assert key_filter()(key) is secret


def test_redaction_reaches_nested_models_and_non_string_key_maps() -> None:
    @dataclasses.dataclass
    class Creds:
        user: str
        password: str

    tree = orjson.loads(encode({"c": Creds("bob", "hunter2"), 1: {"token": "t"}}, redact=key_filter()))
    assert "hunter2" not in str(tree) and "'t'" not in str(tree)
    assert REDACTED in str(tree)
