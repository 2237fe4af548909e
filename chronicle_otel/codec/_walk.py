"""The encoding walk: a value as JSON-native data with type tags, one encoder per type.

Never fails: what cannot be encoded, a cycle and a value nested deeper than :data:`MAX_DEPTH` become an
``unencodable`` tag. Keys a key filter names are redacted on the way, and the values they held collected.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import enum
import math
import re
import sys
import uuid
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, Final

from .._internal.names import module_name
from ..redact import REDACTED, KeyFilter, collect_secrets, redact_assignments
from ._classes import _VALIDATION_ERROR, _qualname
from ._format import _INT64_MIN, _UINT64_MAX, MAX_DEPTH, TAG, _canonical
from ._models import _field_names, _generic_origin, _model_slots, _placed, _siblings
from ._registry import _on_register, _Registered, _registry_by_class

_Encoder = Callable[[Any, "_Walker", int], Any]


class _Walker:
    """One encoding pass: cycle guard and redaction by key name.

    With ``secrets``, the text forms of the values redacted by key are appended to it (so that an error
    repeating one of them can be scrubbed); this costs nothing until a key matches.
    """

    __slots__ = ("active", "redact", "secrets")

    def __init__(self, redact: KeyFilter | None, secrets: list[str] | None = None) -> None:
        self.redact = redact
        self.secrets = secrets
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
            return _unencodable(value, "nested deeper than MAX_DEPTH", self.redact)
        ident = id(value)
        active = self.active
        if ident in active:
            return _unencodable(value, "<cycle>")
        active.add(ident)
        try:
            if cls is dict:  # the two containers of every payload, without the encoder lookup
                return self.mapping(value, depth + 1)
            if cls is list:
                walk = self.walk
                depth += 1
                return _siblings([x if type(x) is str else walk(x, depth) for x in value])
            encoder = _encoder_cache.get(cls)
            if encoder is None:
                encoder = _find_encoder(cls)  # may run a hostile metaclass's __getattr__ or __subclasscheck__
            return encoder(value, self, depth + 1)
        except Exception as exc:
            return _unencodable(value, _reason(exc), self.redact)
        finally:
            active.discard(ident)

    def mapping(self, value: Mapping[Any, Any], depth: int) -> Any:
        redact = self.redact
        if TAG not in value:
            out: dict[str, Any] = {}
            walk = self.walk
            known = getattr(redact, "known", None) if redact is not None else None  # a key_filter's own cache
            for k, v in value.items():
                if type(k) is not str:
                    break  # keys that JSON cannot hold: the tagged form below
                if redact is not None:
                    hit = known.get(k) if known is not None else None
                    if hit is None:
                        hit = redact(k)
                    if hit:
                        out[k] = REDACTED
                        if self.secrets is not None:
                            collect_secrets(v, self.secrets)
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
            if secret and self.secrets is not None:
                collect_secrets(v, self.secrets)
            items.append([self.walk(k, depth), REDACTED if secret else self.walk(v, depth)])
        items.sort(key=lambda kv: _canonical(kv[0]))
        return {TAG: "dict", "items": items}


def _unencodable(value: Any, reason: str, redact: KeyFilter | None = None) -> dict[str, Any]:
    """The ``unencodable`` tag of ``value``: its class and its ``repr``, cut to 1,000 characters.

    With ``redact``, what the text assigns to a secret name (``password='…'``, ``'api_key': '…'``,
    ``token=…``) is redacted first: a value kept as text is out of reach of redaction by key.
    """
    cls = type(value)
    module = type.__dict__["__module__"].__get__(cls)
    name = f"{module_name(module) if isinstance(module, str) else module}.{type.__dict__['__qualname__'].__get__(cls)}"
    if reason == "<cycle>":
        return {TAG: "unencodable", "class": name, "repr": reason}
    try:
        text = repr(value)
        if type(text) is not str:
            raise TypeError("__repr__ returned a non-string")
    except Exception:
        text = f"<{name} object: repr failed>"
    text = _cut(text, _REPR_CUT)
    if redact is not None:
        text = redact_assignments(text, redact)
        reason = redact_assignments(reason, redact)
    return {TAG: "unencodable", "class": name, "repr": text, "reason": reason}


_REPR_CUT: Final = 1000
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_\-.+/=~]{0,256}")


def _cut(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, never inside a run of token characters shorter than 256.

    A key or token across the cut stays whole, for the scan for secret values to find: a part of one would pass it.
    """
    if len(text) <= limit:
        return text
    end = _TOKEN_RUN.match(text, limit)
    return text[: end.end() if end is not None else limit] + "…"


def _reason(exc: Exception) -> str:
    try:
        return _cut(f"{type(exc).__name__}: {exc}"[:1000], 500)
    except Exception:
        return type(exc).__name__


def _enc_dict(v: Any, w: _Walker, d: int) -> Any:
    return w.mapping(v, d)


def _enc_list(v: Any, w: _Walker, d: int) -> Any:
    walk = w.walk
    return _siblings([x if type(x) is str else walk(x, d) for x in v])


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
    from pathlib import PureWindowsPath  # imported already: ``v`` is a path

    encoded = {TAG: "path", "value": str(v), "pure": not hasattr(v, "exists")}
    if isinstance(v, PureWindowsPath):  # a Windows path read as a POSIX one would be another path
        encoded["flavour"] = "windows"
    return encoded


def _enc_enum(v: enum.Enum, w: _Walker, d: int) -> Any:
    return {TAG: "enum", "class": _qualname(type(v)), "name": v.name, "value": w.walk(v.value, d)}


def _enc_dataclass(v: Any, w: _Walker, d: int) -> Any:
    data = {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}
    return {TAG: "dataclass", "class": _qualname(type(v)), "data": w.mapping(data, d)}


def _enc_pydantic(v: Any, w: _Walker, d: int) -> Any:
    """A pydantic model as ``{"$type": "pydantic", "class": …, "fields": {…}}``: the fields that were set, and extras.

    A field left to its default is left out (``model_construct`` fills it in again and leaves it unset, so
    ``model_dump(exclude_unset=True)`` and an SDK's ``to_dict()`` see what they saw). A nested model whose class is
    its field's own annotation (see :func:`_model_slots`) is written as its ``fields`` alone: the decoder knows the
    class from the annotation. ``set_extras`` lists the extras ``model_fields_set`` holds (a validated model counts
    them as set; ``model_construct`` would not).
    """
    cls = type(v)
    origin = _generic_origin(cls)
    declared = _field_names(cls)
    fields_set = getattr(v, "__pydantic_fields_set__", None)
    known = isinstance(fields_set, (set, frozenset))
    data = {name: getattr(v, name) for name in declared if not known or name in fields_set}  # type: ignore[operator]
    extra = getattr(v, "__pydantic_extra__", None)
    extras: list[str] = []
    if isinstance(extra, dict):  # fields a model with extra="allow" kept (an API's newer fields)
        for key, value in extra.items():
            if isinstance(key, str) and key not in data and key not in declared:
                data[key] = value
                extras.append(key)
    fields = w.mapping(data, d)
    if type(fields) is dict and TAG not in fields:
        slots = _model_slots(origin)
        if slots:
            for name, slot in slots.items():
                if name in fields:
                    fields[name] = _placed(fields[name], data[name], slot)
    encoded: dict[str, Any] = {TAG: "pydantic", "class": _qualname(origin), "fields": fields}
    if known and extras:
        more = sorted(k for k in extras if k in fields_set)  # type: ignore[operator]
        if more:  # extras a validated model counts as set: the rebuild is told, not left to derive it
            encoded["set_extras"] = more
    kept = {}
    for source in (getattr(v, "__pydantic_private__", None), getattr(v, "__dict__", None)):
        if isinstance(source, dict):  # plain-data private attributes (an SDK's ``_request_id``)
            for key, value in source.items():
                private = type(key) is str and key.startswith("_") and not key.startswith("__")
                if private and value is not None and _plain(value, 2):
                    kept[key] = value
    if kept:
        encoded["private"] = w.mapping(kept, d)
    return encoded


def _enc_exception(v: BaseException, w: _Walker, d: int) -> Any:
    encoded = {
        TAG: "exception",
        "class": _qualname(type(v)),
        "message": _safe_str(v),
        "args": [w.walk(a, d) for a in v.args],
    }
    attrs = exception_attrs(v)
    if attrs:
        encoded["attrs"] = w.mapping(attrs, d)
    return encoded


_MAX_EXCEPTION_ATTRS: Final = 32


def exception_attrs(exc: BaseException) -> dict[str, Any]:
    """The public attributes of an exception that hold plain data (an SDK error's ``status_code``, ``body``…).

    A replayed error then answers what handlers read; objects (an HTTP response) are left out. A pydantic
    ``ValidationError`` (the model's answer did not fit the schema) keeps its title and errors, from which it is
    rebuilt.
    """
    if type(exc).__name__ == "ValidationError" and _qualname(type(exc)) == _VALIDATION_ERROR:
        return _validation_state(exc)
    try:
        namespace = object.__getattribute__(exc, "__dict__")
    except AttributeError:
        return {}
    if type(namespace) is not dict:
        return {}
    attrs: dict[str, Any] = {}
    for key, value in list(namespace.items())[:_MAX_EXCEPTION_ATTRS]:
        if type(key) is str and not key.startswith("_") and _plain(value, 4):
            attrs[key] = value
    return attrs


_MAX_LINE_ERRORS: Final = 256


def _validation_state(exc: Any) -> dict[str, Any]:
    """The title and the errors (type, location, message, input, context) of a pydantic ``ValidationError``."""
    try:
        title = exc.title
        errors = exc.errors(include_url=False)
    except Exception:
        return {}
    lines = []
    for error in errors[:_MAX_LINE_ERRORS]:
        line = {"type": error.get("type"), "loc": list(error.get("loc", ())), "msg": error.get("msg")}
        if "input" in error:
            line["input"] = error["input"]
        if error.get("ctx"):
            line["ctx"] = error["ctx"]
        lines.append(line)
    return {"title": title, "line_errors": lines}


def _plain(value: Any, depth: int) -> bool:
    if value is None or type(value) in (str, int, float, bool):
        return True
    if depth <= 0:
        return False
    if type(value) is list:
        return len(value) <= 256 and all(_plain(v, depth - 1) for v in value)
    if type(value) is dict:
        return len(value) <= 256 and all(type(k) is str and _plain(v, depth - 1) for k, v in value.items())
    return False


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
    return _unencodable(v, "no encoder for this type", w.redact)


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
    (BaseException, _enc_exception),
    (int, _enc_int_subclass),
    (float, _enc_float_subclass),
    (str, _enc_str_subclass),
]
_encoder_cache: dict[type, _Encoder] = {}
_on_register.append(_encoder_cache.clear)  # a type registered later wins over the encoder chosen before


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
    pathlib = sys.modules.get("pathlib")  # a path's class is pathlib's: without it no value is a path
    if pathlib is not None:
        base_table[pathlib.PurePath] = _enc_path
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
