"""The chronicle-json codec: canonical JSON for boundary payloads.

Usage::

    from chronicle_otel.codec import encode, decode

    data = encode({"order": Order(symbol="MSFT", qty=3)})  # bytes: sorted keys, no whitespace
    decode(data, allow=["myapp."])                           # Order rebuilt: its module is allowed

Encoding never fails. JSON natives pass through; other values become tagged objects
``{"$type": tag, ...}`` that carry what the decoder needs: pydantic models, dataclasses, enums,
datetimes, Decimal, UUID, bytes, tuples, sets, paths, exceptions, big integers, NaN/Inf and types
registered with :func:`register_type`. What cannot be encoded becomes
``{"$type": "unencodable", "class": ..., "repr": ...}``; cycles and values nested deeper than
:data:`MAX_DEPTH` are cut the same way.

Decoding is safe: it never unpickles and never imports a module named in the data. Typed objects
(dataclasses, pydantic models, enums, exceptions) are rebuilt only when their class is registered,
allowed by module prefix (``allow=["myapp."]``) and already imported; otherwise the decoder
returns an :class:`UnresolvedObject` that keeps the class name and the plain data.
"""

from __future__ import annotations

import base64
import builtins
import dataclasses
import datetime as _dt
import enum
import math
import re
import sys
import uuid
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from pathlib import PurePath
from typing import Any, Final

import orjson

from .errors import CodecError

__all__ = [
    "CODEC_VERSION",
    "DEFAULT_SECRET_PATTERN",
    "MAX_DEPTH",
    "REDACTED",
    "UnresolvedObject",
    "decode",
    "decode_value",
    "encode",
    "key_filter",
    "register_type",
    "to_json_value",
]

CODEC_VERSION: Final = "chronicle-json/1"
"""Version tag of the encoding, written on every boundary span."""

MAX_DEPTH: Final = 64
"""Containers nested deeper than this are recorded as ``unencodable``."""

REDACTED: Final = "[REDACTED]"
"""Replacement for values whose key names a secret."""

TAG: Final = "$type"

_INT64_MIN = -(2**63)
_UINT64_MAX = 2**64 - 1

KeyFilter = Callable[[str], bool]
"""Predicate on a mapping key or argument name: True when its value must be redacted."""


@dataclasses.dataclass(frozen=True)
class UnresolvedObject:
    """A typed value whose class the decoder was not allowed to rebuild.

    Attributes:
        tag: the codec tag (``dataclass``, ``pydantic``, ``enum``, ``exception``, ``custom``, ``unencodable``…).
        class_name: the fully qualified class name recorded in the trace.
        data: the decoded plain data (fields, value or args).
    """

    tag: str
    class_name: str
    data: Any


@dataclasses.dataclass(frozen=True)
class _Registered:
    cls: type
    name: str
    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]


_registry_by_class: dict[type, _Registered] = {}
_registry_by_name: dict[str, _Registered] = {}


def register_type(
    cls: type,
    *,
    encode: Callable[[Any], Any],
    decode: Callable[[Any], Any],
    name: str | None = None,
) -> None:
    """Teach the codec a type: how to turn it into encodable data and back.

    Registered types are always rebuilt by the decoder (registration is the allow-list).

    Args:
        cls: the type; subclasses use the same functions unless registered themselves.
        encode: turns an instance into a value the codec can encode (JSON natives or other known types).
        decode: turns that decoded value back into an instance.
        name: the stable name recorded in traces; default ``module.qualname`` of ``cls``.

    Example::

        register_type(Money, encode=lambda m: [str(m.amount), m.currency], decode=lambda d: Money(*d))
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_type() needs a class, got {cls!r}")
    entry = _Registered(cls, name or _qualname(cls), encode, decode)
    _registry_by_class[cls] = entry
    _registry_by_name[entry.name] = entry
    _encoder_cache.clear()


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


# ---------------------------------------------------------------------------------------------- encode

_Encoder = Callable[[Any, "_Walker", int], Any]


class _Walker:
    """One encoding pass: cycle guard and redaction."""

    __slots__ = ("active", "redact")

    def __init__(self, redact: KeyFilter | None) -> None:
        self.redact = redact
        self.active: set[int] = set()

    def walk(self, value: Any, depth: int) -> Any:
        cls = type(value)
        if cls is str or cls is bool or value is None:
            return value
        if cls is int:
            return value if _INT64_MIN <= value <= _UINT64_MAX else {TAG: "int", "value": str(value)}
        if cls is float:
            return value if math.isfinite(value) else {TAG: "float", "value": repr(value)}
        if depth >= MAX_DEPTH:
            return _unencodable(value, "nested deeper than MAX_DEPTH")
        encoder = _encoder_cache.get(cls)
        if encoder is None:
            encoder = _find_encoder(cls)
        ident = id(value)
        if ident in self.active:
            return {TAG: "unencodable", "class": _qualname(cls), "repr": "<cycle>"}
        self.active.add(ident)
        try:
            return encoder(value, self, depth + 1)
        except Exception as exc:
            return _unencodable(value, f"{type(exc).__name__}: {exc}")
        finally:
            self.active.discard(ident)

    def mapping(self, value: Mapping[Any, Any], depth: int) -> Any:
        redact = self.redact
        if TAG not in value:
            out: dict[str, Any] = {}
            walk = self.walk
            for k, v in value.items():
                if type(k) is not str:
                    break  # keys that JSON cannot hold: the tagged form below
                if redact is not None and redact(k):
                    out[k] = REDACTED
                    continue
                t = type(v)  # the common JSON scalars inline: this loop runs for every key of every payload
                if t is str or t is bool or v is None or (t is float and math.isfinite(v)):
                    out[k] = v
                else:
                    out[k] = walk(v, depth)
            else:
                return out
        items = []
        for k, v in value.items():
            secret = redact is not None and isinstance(k, str) and redact(k)
            items.append([self.walk(k, depth), REDACTED if secret else self.walk(v, depth)])
        items.sort(key=lambda kv: _canonical(kv[0]))
        return {TAG: "dict", "items": items}


def _unencodable(value: Any, reason: str) -> dict[str, Any]:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__qualname__} object: repr failed>"
    if len(text) > 1000:
        text = text[:1000] + "…"
    return {TAG: "unencodable", "class": _qualname(type(value)), "repr": text, "reason": reason}


def _enc_dict(v: Any, w: _Walker, d: int) -> Any:
    return w.mapping(v, d)


def _enc_list(v: Any, w: _Walker, d: int) -> Any:
    walk = w.walk
    return [x if type(x) is str else walk(x, d) for x in v]


def _enc_tuple(v: Any, w: _Walker, d: int) -> Any:
    if hasattr(v, "_fields"):  # namedtuple: keep field names, rebuild as a tuple unless allowed
        return {TAG: "namedtuple", "class": _qualname(type(v)), "data": w.mapping(v._asdict(), d)}
    return {TAG: "tuple", "items": [w.walk(x, d) for x in v]}


def _enc_set(v: Any, w: _Walker, d: int) -> Any:
    items = [w.walk(x, d) for x in v]
    items.sort(key=_canonical)
    return {TAG: "frozenset" if isinstance(v, frozenset) else "set", "items": items}


def _enc_bytes(v: Any, w: _Walker, d: int) -> Any:
    return {TAG: "bytes", "b64": base64.b64encode(bytes(v)).decode("ascii")}


def _enc_datetime(v: _dt.datetime, w: _Walker, d: int) -> Any:
    key = getattr(v.tzinfo, "key", None)  # a zoneinfo.ZoneInfo: keep the zone, not only today's offset
    if isinstance(key, str):
        out: dict[str, Any] = {TAG: "datetime", "iso": v.replace(tzinfo=None).isoformat(), "tz": key}
    else:
        out = {TAG: "datetime", "iso": v.isoformat()}
    if v.fold:
        out["fold"] = 1
    return out


def _enc_date(v: Any, w: _Walker, d: int) -> Any:
    return {TAG: "date", "iso": v.isoformat()}


def _enc_time(v: _dt.time, w: _Walker, d: int) -> Any:
    out: dict[str, Any] = {TAG: "time", "iso": v.isoformat()}
    if v.fold:
        out["fold"] = 1
    return out


def _enc_timedelta(v: _dt.timedelta, w: _Walker, d: int) -> Any:
    return {TAG: "timedelta", "days": v.days, "seconds": v.seconds, "microseconds": v.microseconds}


def _enc_decimal(v: Any, w: _Walker, d: int) -> Any:
    return {TAG: "decimal", "value": str(v)}


def _enc_uuid(v: Any, w: _Walker, d: int) -> Any:
    return {TAG: "uuid", "value": str(v)}


def _enc_complex(v: complex, w: _Walker, d: int) -> Any:
    return {TAG: "complex", "real": w.walk(v.real, d), "imag": w.walk(v.imag, d)}


def _enc_path(v: Any, w: _Walker, d: int) -> Any:
    return {TAG: "path", "value": str(v), "pure": not hasattr(v, "exists")}


def _enc_enum(v: enum.Enum, w: _Walker, d: int) -> Any:
    return {TAG: "enum", "class": _qualname(type(v)), "name": v.name, "value": w.walk(v.value, d)}


def _enc_dataclass(v: Any, w: _Walker, d: int) -> Any:
    data = {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}
    return {TAG: "dataclass", "class": _qualname(type(v)), "data": w.mapping(data, d)}


def _enc_pydantic(v: Any, w: _Walker, d: int) -> Any:
    data = {name: getattr(v, name) for name in type(v).model_fields}
    return {TAG: "pydantic", "class": _qualname(type(v)), "data": w.mapping(data, d)}


def _enc_exception(v: BaseException, w: _Walker, d: int) -> Any:
    return {
        TAG: "exception",
        "class": _qualname(type(v)),
        "message": _safe_str(v),
        "args": [w.walk(a, d) for a in v.args],
    }


def _enc_int_subclass(v: int, w: _Walker, d: int) -> Any:
    return w.walk(int(v), d)


def _enc_float_subclass(v: float, w: _Walker, d: int) -> Any:
    return w.walk(float(v), d)


def _enc_str_subclass(v: str, w: _Walker, d: int) -> Any:
    return str(v)


def _enc_registered(entry: _Registered) -> _Encoder:
    def enc(v: Any, w: _Walker, d: int) -> Any:
        return {TAG: "custom", "class": entry.name, "data": w.walk(entry.encode(v), d)}

    return enc


def _enc_unencodable(v: Any, w: _Walker, d: int) -> Any:
    return _unencodable(v, "no encoder for this type")


def _safe_str(v: object) -> str:
    try:
        return str(v)
    except Exception:
        return f"<{type(v).__qualname__}: str() failed>"


_BASE_ENCODERS: list[tuple[type, _Encoder]] = [
    # the first base of the class's MRO found here wins (enums are checked before this table)
    (dict, _enc_dict),
    (list, _enc_list),
    (tuple, _enc_tuple),
    (frozenset, _enc_set),
    (set, _enc_set),
    (bytes, _enc_bytes),
    (bytearray, _enc_bytes),
    (memoryview, _enc_bytes),
    (_dt.datetime, _enc_datetime),
    (_dt.date, _enc_date),
    (_dt.time, _enc_time),
    (_dt.timedelta, _enc_timedelta),
    (Decimal, _enc_decimal),
    (uuid.UUID, _enc_uuid),
    (complex, _enc_complex),
    (PurePath, _enc_path),
    (BaseException, _enc_exception),
    (int, _enc_int_subclass),
    (float, _enc_float_subclass),
    (str, _enc_str_subclass),
]
_encoder_cache: dict[type, _Encoder] = {}


def _find_encoder(cls: type) -> _Encoder:
    encoder = _lookup_encoder(cls)
    if len(_encoder_cache) < 4096:
        _encoder_cache[cls] = encoder
    return encoder


def _lookup_encoder(cls: type) -> _Encoder:
    for base in cls.__mro__:
        entry = _registry_by_class.get(base)
        if entry is not None:
            return _enc_registered(entry)
    if issubclass(cls, enum.Enum):
        return _enc_enum
    if dataclasses.is_dataclass(cls):
        return _enc_dataclass
    if _is_pydantic_model(cls):
        return _enc_pydantic
    base_table = dict(_BASE_ENCODERS)
    for base in cls.__mro__:
        if base in base_table:
            return base_table[base]
    if isinstance(cls, type) and issubclass(cls, Mapping):
        return _enc_dict
    return _enc_unencodable


def _is_pydantic_model(cls: type) -> bool:
    pydantic = sys.modules.get("pydantic")
    if pydantic is None:
        return False
    base = getattr(pydantic, "BaseModel", None)
    return base is not None and issubclass(cls, base)


def _canonical(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def to_json_value(value: Any, *, redact: KeyFilter | None = None) -> Any:
    """Turn ``value`` into JSON-native data (dicts, lists, str, numbers, bool, None) with type tags.

    Never raises: what cannot be encoded becomes an ``unencodable`` tag.

    Args:
        value: any Python value.
        redact: optional predicate on key names; matching values become :data:`REDACTED`.
    """
    return _Walker(redact).walk(value, 0)


def encode(value: Any, *, redact: KeyFilter | None = None) -> bytes:
    """Encode ``value`` as canonical JSON bytes (UTF-8, sorted keys, no whitespace).

    Equal values give equal bytes, so the sha256 of the result identifies the value.
    Never raises.

    Args:
        value: any Python value.
        redact: optional predicate on key names; matching values become :data:`REDACTED`.
    """
    return _canonical(_Walker(redact).walk(value, 0))


# ---------------------------------------------------------------------------------------------- decode

AllowList = Iterable[str]


def decode(data: bytes | str, *, allow: AllowList = ()) -> Any:
    """Decode bytes written by :func:`encode`.

    Args:
        data: canonical JSON bytes or text.
        allow: module prefixes whose classes may be rebuilt (``"myapp."`` or ``"myapp.models.Order"``).
            Classes are only looked up among modules already imported; nothing is imported.

    Raises:
        CodecError: ``data`` is not JSON.
    """
    try:
        tree = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise CodecError(f"not chronicle-json: {exc}") from None
    return decode_value(tree, allow=allow)


def decode_value(tree: Any, *, allow: AllowList = ()) -> Any:
    """Decode JSON-native data produced by :func:`to_json_value` (see :func:`decode`)."""
    return _Decoder(tuple(allow)).value(tree)


class _Decoder:
    __slots__ = ("allow",)

    def __init__(self, allow: tuple[str, ...]) -> None:
        self.allow = allow

    def value(self, v: Any) -> Any:
        cls = type(v)
        if cls is list:
            return [self.value(x) for x in v]
        if cls is dict:
            tag = v.get(TAG)
            if tag is None:
                return {k: self.value(x) for k, x in v.items()}
            handler = _DECODERS.get(tag)
            if handler is None:
                return UnresolvedObject(str(tag), str(v.get("class", "")), {k: x for k, x in v.items() if k != TAG})
            try:
                return handler(self, v)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise CodecError(f"malformed {tag!r} value {v!r}: {exc}") from None
        return v

    def resolve(self, name: str) -> type | None:
        entry = _registry_by_name.get(name)
        if entry is not None:
            return entry.cls
        if not any(name == p or name.startswith(p) for p in self.allow):
            return None
        return _find_loaded_class(name)


def _find_loaded_class(name: str) -> type | None:
    """Find ``module.Qual.Name`` among already imported modules; never imports."""
    parts = name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:i]))
        if module is None:
            continue
        obj: Any = module
        for attr in parts[i:]:
            obj = getattr(obj, attr, None)
            if obj is None:
                return None
        return obj if isinstance(obj, type) else None
    return None


def _dec_int(d: _Decoder, v: dict[str, Any]) -> Any:
    return int(v["value"])


def _dec_float(d: _Decoder, v: dict[str, Any]) -> Any:
    return float(v["value"])


def _dec_dict(d: _Decoder, v: dict[str, Any]) -> Any:
    out = {}
    for k, x in v["items"]:
        key = d.value(k)
        if isinstance(key, (list, dict)):
            key = _freeze(key)
        out[key] = d.value(x)
    return out


def _freeze(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    return v


def _dec_tuple(d: _Decoder, v: dict[str, Any]) -> Any:
    return tuple(d.value(x) for x in v["items"])


def _dec_set(d: _Decoder, v: dict[str, Any]) -> Any:
    items = [_freeze(d.value(x)) for x in v["items"]]
    return frozenset(items) if v[TAG] == "frozenset" else set(items)


def _dec_bytes(d: _Decoder, v: dict[str, Any]) -> Any:
    return base64.b64decode(v["b64"], validate=True)


def _dec_datetime(d: _Decoder, v: dict[str, Any]) -> Any:
    value = _dt.datetime.fromisoformat(v["iso"])
    if "tz" in v:
        import zoneinfo  # zone data, never code: ZoneInfo rejects keys that are paths

        try:
            value = value.replace(tzinfo=zoneinfo.ZoneInfo(v["tz"]))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {v['tz']!r}") from None
    return value.replace(fold=v.get("fold", 0))


def _dec_date(d: _Decoder, v: dict[str, Any]) -> Any:
    return _dt.date.fromisoformat(v["iso"])


def _dec_time(d: _Decoder, v: dict[str, Any]) -> Any:
    return _dt.time.fromisoformat(v["iso"]).replace(fold=v.get("fold", 0))


def _dec_timedelta(d: _Decoder, v: dict[str, Any]) -> Any:
    return _dt.timedelta(days=v["days"], seconds=v["seconds"], microseconds=v["microseconds"])


def _dec_decimal(d: _Decoder, v: dict[str, Any]) -> Any:
    return Decimal(v["value"])


def _dec_uuid(d: _Decoder, v: dict[str, Any]) -> Any:
    return uuid.UUID(v["value"])


def _dec_complex(d: _Decoder, v: dict[str, Any]) -> Any:
    return complex(d.value(v["real"]), d.value(v["imag"]))


def _dec_path(d: _Decoder, v: dict[str, Any]) -> Any:
    from pathlib import Path, PurePosixPath

    return PurePosixPath(v["value"]) if v.get("pure") else Path(v["value"])


def _dec_enum(d: _Decoder, v: dict[str, Any]) -> Any:
    value = d.value(v["value"])
    cls = d.resolve(v["class"])
    if cls is not None and issubclass(cls, enum.Enum):
        return cls(value)
    return UnresolvedObject("enum", v["class"], value)


def _dec_fields(tag: str) -> Callable[[_Decoder, dict[str, Any]], Any]:
    def dec(d: _Decoder, v: dict[str, Any]) -> Any:
        data = d.value(v["data"])
        cls = d.resolve(v["class"])
        if cls is None:
            return UnresolvedObject(tag, v["class"], data)
        if tag == "pydantic":
            return cls.model_validate(data)  # type: ignore[attr-defined]
        if tag == "namedtuple":
            return cls(**data)
        init = {f.name: data[f.name] for f in dataclasses.fields(cls) if f.init and f.name in data}
        obj = cls(**init)
        for f in dataclasses.fields(cls):
            if not f.init and f.name in data:
                object.__setattr__(obj, f.name, data[f.name])
        return obj

    return dec


def _dec_exception(d: _Decoder, v: dict[str, Any]) -> Any:
    args = [d.value(a) for a in v.get("args", [])]
    name = v["class"]
    cls = getattr(builtins, name[len("builtins.") :], None) if name.startswith("builtins.") else d.resolve(name)
    if isinstance(cls, type) and issubclass(cls, BaseException):
        try:
            return cls(*args)
        except Exception:
            pass
    return UnresolvedObject("exception", name, {"message": v.get("message", ""), "args": args})


def _dec_custom(d: _Decoder, v: dict[str, Any]) -> Any:
    data = d.value(v["data"])
    entry = _registry_by_name.get(v["class"])
    if entry is None:
        return UnresolvedObject("custom", v["class"], data)
    return entry.decode(data)


def _dec_unencodable(d: _Decoder, v: dict[str, Any]) -> Any:
    return UnresolvedObject("unencodable", v.get("class", ""), v.get("repr", ""))


_DECODERS: dict[str, Callable[[_Decoder, dict[str, Any]], Any]] = {
    "int": _dec_int,
    "float": _dec_float,
    "dict": _dec_dict,
    "tuple": _dec_tuple,
    "set": _dec_set,
    "frozenset": _dec_set,
    "bytes": _dec_bytes,
    "datetime": _dec_datetime,
    "date": _dec_date,
    "time": _dec_time,
    "timedelta": _dec_timedelta,
    "decimal": _dec_decimal,
    "uuid": _dec_uuid,
    "complex": _dec_complex,
    "path": _dec_path,
    "enum": _dec_enum,
    "dataclass": _dec_fields("dataclass"),
    "pydantic": _dec_fields("pydantic"),
    "namedtuple": _dec_fields("namedtuple"),
    "exception": _dec_exception,
    "custom": _dec_custom,
    "unencodable": _dec_unencodable,
}

# A key name is looked up in a bounded cache so redaction costs one dict lookup per key.
_SECRET_NAMES = (
    r"pass(word|wd|phrase)?",
    r"pwd",
    r"secret([_-]?key)?",
    r"api[_-]?key",
    r"(access|refresh|id|auth|bearer|session|csrf)?[_-]?token",
    r"auth(orization)?",
    r"credentials?",
    r"private[_-]?key",
    r"(set[_-]?)?cookie",
    r"session[_-]?id",
    r"jwt",
    r"ssn",
    r"(credit[_-]?)?card[_-]?number",
    r"cvv",
)
DEFAULT_SECRET_PATTERN: Final = r"(?i)(?:.*[_.-])?(?:" + "|".join(_SECRET_NAMES) + r")"
"""Key names whose values are redacted by default: ``password``, ``api_key``, ``openai_api_key``,
``access_token``, ``Authorization``, ``cookie``… (whole name or last ``_``/``-``/``.`` segment; so
``max_tokens`` and ``author`` are kept)."""


def key_filter(patterns: Iterable[str] = (DEFAULT_SECRET_PATTERN,)) -> KeyFilter:
    """Build a cached predicate that is True for key names fully matching any of ``patterns``."""
    regexes = [re.compile(p) for p in patterns]
    cache: dict[str, bool] = {}

    def matches(key: str) -> bool:
        hit = cache.get(key)
        if hit is None:
            hit = any(r.fullmatch(key) is not None for r in regexes)
            if len(cache) < 10_000:
                cache[key] = hit
        return hit

    return matches
