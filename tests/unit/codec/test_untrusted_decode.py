"""The decoder on hostile data: it builds only what the tag names, never calls anything else, and fails clearly."""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import orjson
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chronicle_otel.codec import MAX_DECODE_DEPTH, UnresolvedObject, decode, decode_value, encode, find_loaded_class
from chronicle_otel.errors import CodecError

CALLED: list[str] = []


class Point(NamedTuple):
    x: int
    y: int


class Sneaky(tuple):  # type: ignore[type-arg]
    """A tuple subclass with ``_fields`` whose constructor has side effects."""

    _fields = ("x",)

    def __new__(cls, *args: Any, **kwargs: Any) -> Sneaky:
        CALLED.append("Sneaky.__new__")
        return super().__new__(cls, args)


class NotADataclass:
    def __init__(self, **kwargs: Any) -> None:
        CALLED.append("NotADataclass.__init__")


@dataclasses.dataclass
class Order:
    symbol: str
    qty: int


class Side(enum.Enum):
    BUY = "buy"


class Exhausted(StopIteration):
    """An application's own end of an iteration."""


class Fatal(BaseException):
    def __init__(self, *args: Any) -> None:
        CALLED.append("Fatal.__init__")
        super().__init__(*args)


class AppError(Exception):
    pass


HERE = __name__


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    CALLED.clear()
    yield
    CALLED.clear()


@pytest.fixture
def evil_module(tmp_path: Path) -> Iterator[types.ModuleType]:
    """``evilapp.tools``: a module that defines boundaries and imports ``subprocess``, ``os`` and a foreign class."""
    package = types.ModuleType("evilapp")
    module = types.ModuleType("evilapp.tools")
    module.subprocess = subprocess  # type: ignore[attr-defined]
    module.Order = Order  # type: ignore[attr-defined]  # re-exported: its own module is this test module
    module.marker = tmp_path / "pwned"  # type: ignore[attr-defined]

    def __getattr__(name: str) -> Any:
        CALLED.append(f"module __getattr__({name})")
        raise AttributeError(name)

    module.__getattr__ = __getattr__  # type: ignore[attr-defined]
    package.tools = module  # type: ignore[attr-defined]
    sys.modules["evilapp"] = package
    sys.modules["evilapp.tools"] = module
    yield module
    del sys.modules["evilapp"], sys.modules["evilapp.tools"]


def tagged(tag: str, cls: str, **fields: Any) -> bytes:
    return orjson.dumps({"$type": tag, "class": cls, **fields})


@pytest.mark.parametrize("tag", ["namedtuple", "dataclass", "pydantic", "enum", "custom"])
def test_attribute_walking_through_an_imported_module_is_refused(
    tag: str, evil_module: types.ModuleType, tmp_path: Path
) -> None:
    command = ["sh", "-c", f"touch {tmp_path / 'pwned'}"]
    payload = tagged(tag, "evilapp.tools.subprocess.Popen", data={"args": command}, value=command)
    value = decode(payload, allow=["evilapp."])
    assert isinstance(value, UnresolvedObject)
    assert value.class_name == "evilapp.tools.subprocess.Popen"
    assert not (tmp_path / "pwned").exists()
    assert CALLED == []


def test_a_class_is_found_only_under_its_own_module_and_qualname(evil_module: types.ModuleType) -> None:
    assert find_loaded_class(f"{HERE}.Order") is Order
    assert find_loaded_class(f"{HERE}.Point") is Point
    assert find_loaded_class("evilapp.tools.Order") is None  # reachable there, but defined here
    assert find_loaded_class("evilapp.tools.subprocess.Popen") is None
    assert find_loaded_class("subprocess.Popen") is subprocess.Popen  # the exact name is found (allow-list decides)
    assert find_loaded_class("evilapp.tools.nothing") is None
    assert find_loaded_class(f"{HERE}.HERE") is None  # not a class
    assert CALLED == []  # the module's __getattr__ hook never ran


def test_an_allowed_foreign_class_is_not_rebuilt_under_another_name(evil_module: types.ModuleType) -> None:
    value = decode(tagged("dataclass", "evilapp.tools.Order", data={"symbol": "X", "qty": 1}), allow=["evilapp"])
    assert isinstance(value, UnresolvedObject)


def test_the_tag_must_match_the_kind_of_class() -> None:
    allow = [HERE]
    # a plain class named by a dataclass tag: its constructor never runs
    assert isinstance(decode(tagged("dataclass", f"{HERE}.NotADataclass", data={}), allow=allow), UnresolvedObject)
    # an Exception class named by a namedtuple, a dataclass by an enum tag, an enum by a pydantic tag
    assert isinstance(decode(tagged("namedtuple", f"{HERE}.AppError", data={}), allow=allow), UnresolvedObject)
    assert isinstance(decode(tagged("enum", f"{HERE}.Order", value="x"), allow=allow), UnresolvedObject)
    assert isinstance(decode(tagged("pydantic", f"{HERE}.Side", data={}), allow=allow), UnresolvedObject)
    # a BaseException-only class is never rebuilt, even when allowed
    fatal = decode(tagged("exception", f"{HERE}.Fatal", message="stop", args=["stop"]), allow=allow)
    assert isinstance(fatal, UnresolvedObject)
    assert CALLED == []


def test_the_right_kinds_still_round_trip() -> None:
    allow = [HERE]
    value = decode(encode([Order("MSFT", 3), Side.BUY, Point(1, 2), AppError("no")]), allow=allow)
    assert value[:3] == [Order("MSFT", 3), Side.BUY, Point(1, 2)]
    assert type(value[2]) is Point
    assert isinstance(value[3], AppError) and value[3].args == ("no",)


def test_a_namedtuple_is_built_without_running_its_constructor() -> None:
    value = decode(tagged("namedtuple", f"{HERE}.Sneaky", data={"x": 1}), allow=[HERE])
    assert type(value) is Sneaky and tuple(value) == (1,)
    assert CALLED == []
    with pytest.raises(CodecError, match="do not match"):
        decode(tagged("namedtuple", f"{HERE}.Point", data={"x": 1, "z": 2}), allow=[HERE])


@pytest.mark.parametrize(
    "name", ["KeyboardInterrupt", "SystemExit", "GeneratorExit", "BaseException", "BaseExceptionGroup"]
)
def test_interpreter_exits_are_never_rebuilt(name: str) -> None:
    for allow in ((), ("builtins",), ("builtins.",)):
        value = decode(tagged("exception", f"builtins.{name}", message="bye", args=[0]), allow=allow)
        assert isinstance(value, UnresolvedObject), (name, allow)
        assert value.data == {"message": "bye", "args": [0]}


@pytest.mark.parametrize("name", ["builtins.StopIteration", "builtins.StopAsyncIteration", f"{HERE}.Exhausted"])
def test_exceptions_that_end_an_iteration_are_never_rebuilt(name: str) -> None:
    for allow in ((), ("builtins",), (HERE,)):
        value = decode(tagged("exception", name, message="done", args=["done"]), allow=allow)
        assert isinstance(value, UnresolvedObject), (name, allow)
        assert value.class_name == name and value.data == {"message": "done", "args": ["done"]}


def test_builtin_exceptions_are_still_rebuilt() -> None:
    value = decode(tagged("exception", "builtins.ValueError", message="bad", args=["bad"]))
    assert type(value) is ValueError and value.args == ("bad",)


def test_allow_prefixes_respect_name_boundaries() -> None:
    data = tagged("dataclass", f"{HERE}.Order", data={"symbol": "X", "qty": 1})
    assert decode(data, allow=[HERE]) == Order("X", 1)  # a module name covers its members
    assert decode(data, allow=[HERE + "."]) == Order("X", 1)
    assert decode(data, allow=[f"{HERE}.Order"]) == Order("X", 1)
    # "tests.unit.codec.test_untrusted_dec" ≠ a module
    assert isinstance(decode(data, allow=[HERE[:-3]]), UnresolvedObject)
    assert isinstance(decode(data, allow=[""]), UnresolvedObject)


def nested_lists(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_depth_is_bounded() -> None:
    assert decode(nested_lists(MAX_DECODE_DEPTH - 1)) is not None
    for depth in (MAX_DECODE_DEPTH + 1, 600, 1000):
        with pytest.raises(CodecError, match="MAX_DECODE_DEPTH"):
            decode(nested_lists(depth))
    deep_tags: Any = 0
    for _ in range(MAX_DECODE_DEPTH + 5):
        deep_tags = {"$type": "tuple", "items": [deep_tags]}
    with pytest.raises(CodecError, match="MAX_DECODE_DEPTH"):
        decode_value(deep_tags)


@pytest.mark.parametrize(
    "payload",
    [
        {"$type": "timedelta", "days": 10**10, "seconds": 0, "microseconds": 0},
        {"$type": "complex", "real": {"$type": "int", "value": "9" * 400}, "imag": 0},
        {"$type": "int", "value": "9" * 5000},
        {"$type": "decimal", "value": "9" * 100_000},
        {"$type": "decimal", "value": "1e999999999999999999"},
        {"$type": "float", "value": "1" * 1000},
        {"$type": "datetime", "iso": "2026-01-01T00:00:00", "tz": "../../etc/passwd"},
        {"$type": "datetime", "iso": 5},
        {"$type": "bytes", "b64": "not base64!"},
        {"$type": "dict", "items": [[1]]},
        {"$type": "dict", "items": "ab"},
        {"$type": "tuple", "items": {"a": 1}},
        {"$type": "set", "items": 5},
        {"$type": "uuid", "value": "x"},
        {"$type": "exception", "class": 5},
        {"$type": "exception", "class": "builtins.ValueError", "args": "abc"},
        {"$type": "enum", "class": ["x"], "value": 1},
        {"$type": "datetime", "iso": "2026-01-01T00:00:00", "fold": 7},
    ],
)
def test_malformed_values_raise_codec_error(payload: dict[str, Any]) -> None:
    with pytest.raises(CodecError):
        decode(orjson.dumps(payload))


def test_unknown_tags_and_odd_fields_stay_data() -> None:
    value = decode(b'{"$type":["x"],"class":{"a":1},"v":1}')
    assert isinstance(value, UnresolvedObject) and value.class_name == "" and value.data == {"class": {"a": 1}, "v": 1}


def test_registered_decoder_failures_are_codec_errors() -> None:
    from chronicle_otel.codec import register_type

    class Money:
        def __init__(self, cents: int) -> None:
            self.cents = cents

    register_type(Money, encode=lambda m: m.cents, decode=lambda d: Money(int(d)), name="tests.Money")
    with pytest.raises(CodecError, match=r"tests\.Money"):
        decode(b'{"$type":"custom","class":"tests.Money","data":"abc"}')


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=30,
)
TAGS = st.sampled_from(
    [
        "int",
        "float",
        "dict",
        "tuple",
        "set",
        "frozenset",
        "bytes",
        "datetime",
        "date",
        "time",
        "timedelta",
        "decimal",
        "uuid",
        "complex",
        "path",
        "enum",
        "dataclass",
        "pydantic",
        "namedtuple",
        "exception",
        "custom",
        "unencodable",
    ]
)
CLASSES = st.sampled_from(
    [f"{HERE}.Order", f"{HERE}.Point", f"{HERE}.Side", f"{HERE}.Fatal", "builtins.SystemExit", "os.system", ""]
)


def tagged_values() -> st.SearchStrategy[Any]:
    leaf = st.builds(
        lambda tag, cls, fields: {"$type": tag, "class": cls, **fields},
        TAGS,
        CLASSES | st.integers(-5, 5),
        st.dictionaries(
            st.sampled_from(["value", "items", "data", "iso", "b64", "days", "seconds", "microseconds", "args"]),
            JSON,
            max_size=4,
        ),
    )
    return st.recursive(leaf | JSON, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c))


@settings(max_examples=150, deadline=None)
@given(tagged_values())
def test_arbitrary_tagged_data_decodes_or_raises_codec_error(tree: Any) -> None:
    with contextlib.suppress(CodecError):
        decode(orjson.dumps(tree), allow=[HERE, "builtins", "os"])
    assert CALLED == []


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_raise_codec_error(data: bytes) -> None:
    with contextlib.suppress(CodecError):
        decode(data)


class HostileMeta(type):
    def __getattr__(cls, name: str) -> Any:
        raise RuntimeError(f"no {name}")

    def __subclasscheck__(cls, other: Any) -> bool:
        raise RuntimeError("no subclass check")


class Hostile(metaclass=HostileMeta):
    pass


class BadRepr:
    def __repr__(self) -> str:
        raise ValueError("no repr")


class NonStrRepr:
    def __repr__(self) -> Any:
        return 42


def test_encode_never_raises() -> None:
    for value in (Hostile(), Hostile, BadRepr(), NonStrRepr(), {"k": Hostile()}, [BadRepr()]):
        data = encode(value)
        assert orjson.loads(data) is not None
    tagged_value = orjson.loads(encode(Hostile()))
    assert tagged_value["$type"] == "unencodable" and tagged_value["class"].endswith("Hostile")


class _Quote(pydantic.BaseModel):
    symbol: str
    price: float


class _Fill(pydantic.BaseModel):
    filled: int = 0


def test_a_model_recorded_as_another_class_whose_fields_it_does_not_have_is_refused() -> None:
    data = encode(_Quote(symbol="MSFT", price=1.5)).decode().replace("._Quote", "._Fill")
    with pytest.raises(CodecError, match=r"none of the recorded fields \(price, symbol\) is a field of it"):
        decode(data, allow=(f"{__name__}.",))
    assert decode(encode(_Fill()), allow=(f"{__name__}.",)) == _Fill(), "a model with no field set is rebuilt"
