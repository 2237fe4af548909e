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

A pydantic model is written compactly and rebuilt exactly (values, ``model_fields_set``, extras): only the fields
that were set, a nested model of its field's own annotation class without its tag, and in a list, the class of a run
of models of one class once (a stream of SDK chunks). Recordings of earlier versions (every field, ``unset``) decode
as before; :func:`same_encoding` compares one with a value encoded now.

Decoding is safe on untrusted data: it never unpickles, never imports a module named in the data and
rebuilds only a class of the kind the tag names (a dataclass, a pydantic model, an enum, a namedtuple,
an :class:`Exception` subclass: its constructor, then the recorded fields put back) whose own ``__module__`` and
``__qualname__`` are exactly the recorded name, and that is registered, or allowed by module prefix
(``allow=["myapp"]``) and already imported; otherwise the decoder returns an :class:`UnresolvedObject`
that keeps the class name and the plain data. Depth, size and digit limits raise :class:`CodecError`.
"""

from __future__ import annotations

import base64
import builtins
import dataclasses
import datetime as _dt
import enum
import math
import os
import re
import sys
import types
import typing
import uuid
from collections.abc import Callable, Iterable, Mapping, MutableSequence, Sequence
from decimal import Decimal
from pathlib import PurePath, PureWindowsPath
from typing import Any, Final, cast

import orjson

from ._internal.names import module_name
from .errors import CodecError
from .redact import (
    DEFAULT_SECRET_PATTERN,
    REDACTED,
    KeyFilter,
    PatternRedactor,
    Redactor,
    collect_secrets,
    key_filter,
    redact_assignments,
    redact_encoded,
    redact_tree,
    resolve,
)

__all__ = [
    "CODEC_VERSION",
    "DEFAULT_SECRET_PATTERN",
    "MAX_DECODE_BYTES",
    "MAX_DECODE_DEPTH",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "REDACTED",
    "UnresolvedObject",
    "decode",
    "decode_value",
    "encode",
    "encode_unscanned",
    "find_loaded_class",
    "join_encoded",
    "key_filter",
    "register_type",
    "same_encoding",
    "to_json_value",
    "upgrade_encoding",
    "value_scan",
    "with_classes",
]

CODEC_VERSION: Final = "chronicle-json/1"
"""Version tag of the encoding, written on every boundary span."""

MAX_DEPTH: Final = 64
"""Containers nested deeper than this are recorded as ``unencodable``."""

TAG: Final = "$type"

_INT64_MIN = -(2**63)
_UINT64_MAX = 2**64 - 1


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
    return f"{module_name(cls.__module__)}.{cls.__qualname__}"


# ---------------------------------------------------------------------------------------------- encode

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


def _siblings(items: list[Any]) -> list[Any]:
    """A list's encoded ``items``, a model's class left out after an item of the same class.

    A stream of chunks names its class once: the decoder takes it from the model before.
    """
    previous = None
    for i, item in enumerate(items):
        if type(item) is dict and item.get(TAG) == "pydantic" and "fields" in item:
            name = item.get("class")
            if name is None:
                continue  # already written so
            if name == previous:
                items[i] = {k: x for k, x in item.items() if k != "class"}
            previous = name
        else:
            previous = None
    return items


def with_classes(items: list[Any]) -> list[Any]:
    """The items of an encoded list (JSON, as a payload holds it) with the class of every model written out.

    In a list, a model of the class of the model before it leaves its class out (a stream of chunks names it once);
    a reader of the JSON that names classes (``chronicle show``) puts it back with this. The list itself when no
    item leaves its class out.
    """
    out: list[Any] | None = None
    previous: Any = None
    for i, item in enumerate(items):
        if type(item) is dict and item.get(TAG) == "pydantic" and "fields" in item:
            if "class" in item:
                previous = item["class"]
            else:
                if out is None:
                    out = list(items)
                out[i] = {**item, "class": previous}
        else:
            previous = None
    return items if out is None else out


_MODEL_HEAD: Final = b'{"$type":"pydantic","class":"'


def join_encoded(parts: Iterable[bytes]) -> bytes:
    """The encoding of a list from the encodings of its items (a stream's items, each encoded when yielded).

    The bytes are those :func:`encode` writes for the list of the items: a model's class written once for a run of
    items of that class.

    Args:
        parts: the canonical bytes of each item, in order (unscanned or scanned alike).
    """
    out: list[bytes] = []
    previous = b""
    for part in parts:
        if part.startswith(_MODEL_HEAD):
            end = part.find(b'"', len(_MODEL_HEAD))
            name = part[len(_MODEL_HEAD) : end]
            if end > 0 and part.startswith(b',"fields":', end + 1):  # this version's encoding of a model
                if name == previous:
                    part = b'{"$type":"pydantic"' + part[end + 1 :]
                previous = name
                out.append(part)
                continue
        previous = b""
        out.append(part)
    return b"[" + b",".join(out) + b"]"


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


_Slot = tuple["type | None", "type | None"]
"""Where a field's annotation names exactly one model class: ``(class of the value itself, class of the items of a
list value)``, each None when the annotation names none or several there."""

_slots_cache: dict[type, dict[str, _Slot]] = {}
_LIST_ORIGINS: Final = frozenset({list, Sequence, MutableSequence})


def _field_names(cls: type) -> Mapping[str, Any]:
    """The declared fields of a pydantic class, by name (without the deprecated instance access)."""
    fields = getattr(cls, "__pydantic_fields__", None)
    if not isinstance(fields, Mapping):
        fields = getattr(cls, "model_fields", None)
    return fields if isinstance(fields, Mapping) else {}


def _model_slots(cls: type) -> dict[str, _Slot]:
    """The fields of the pydantic class ``cls`` whose values may be written without their class.

    By field name: the one model class the annotation names for the value (``delta: ChoiceDelta``,
    ``Optional[Usage]``) and for the items of a list value (``List[Choice]``). Read from the class alone, never from
    data; the same answer for the encoder and the decoder, so a class named nowhere in a payload is the class its
    annotation names.
    """
    cached = _slots_cache.get(cls)
    if cached is not None:
        return cached
    slots: dict[str, _Slot] = {}
    if getattr(cls, "__pydantic_fields_complete__", True) is True:  # annotations resolved (forward references too)
        for name, info in _field_names(cls).items():
            annotation = getattr(info, "annotation", None)
            direct: set[type] = set()
            listed: set[type] = set()
            try:
                _annotated_models(annotation, False, direct, listed, 0)
            except Exception:  # an annotation typing cannot take apart: the field keeps full tags
                continue
            one = next(iter(direct)) if len(direct) == 1 else None
            items = next(iter(listed)) if len(listed) == 1 else None
            if type(name) is str and (one is not None or items is not None):
                slots[name] = (one, items)
    if len(_slots_cache) < 4096:
        _slots_cache[cls] = slots
    return slots


def _annotated_models(annotation: Any, in_list: bool, direct: set[type], listed: set[type], depth: int) -> None:
    """Collect the model classes ``annotation`` names for a value (``direct``) and for a list's items (``listed``).

    Through ``Optional``/``Union``/``Annotated`` and one level of ``list``/``List``/``Sequence``.
    """
    if depth > 8:
        return
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        _annotated_models(typing.get_args(annotation)[0], in_list, direct, listed, depth + 1)
    elif origin is typing.Union or origin is types.UnionType:
        for arg in typing.get_args(annotation):
            _annotated_models(arg, in_list, direct, listed, depth + 1)
    elif origin in _LIST_ORIGINS:
        args = typing.get_args(annotation)
        if not in_list and len(args) == 1:
            _annotated_models(args[0], True, direct, listed, depth + 1)
    elif isinstance(annotation, type) and _is_pydantic(annotation) and _generic_origin(annotation) is annotation:
        (listed if in_list else direct).add(annotation)


def _placed(encoded: Any, value: Any, slot: _Slot) -> Any:
    """The encoding of a field's ``value`` at a field of ``slot``.

    A model of the annotation's class is its fields alone; any other mapping is in the tagged ``dict`` form, so that
    no plain object there is taken for the model.
    """
    one, items = slot
    if type(encoded) is dict and one is not None:
        return _inline(encoded, value, one)
    if type(encoded) is list and items is not None:
        same = type(value) is list and len(value) == len(encoded)
        return [_inline(e, value[i] if same else None, items) if type(e) is dict else e for i, e in enumerate(encoded)]
    return encoded


def _inline(encoded: dict[str, Any], value: Any, cls: type) -> Any:
    if TAG not in encoded:  # a mapping where the annotation names a model: kept a mapping
        items = sorted(([k, x] for k, x in encoded.items()), key=lambda kv: _canonical(kv[0]))
        return {TAG: "dict", "items": items}
    if (
        encoded[TAG] == "pydantic"
        and len(encoded) == (3 if "class" in encoded else 2)
        and value is not None
        and _generic_origin(type(value)) is cls
        and type(encoded.get("fields")) is dict
        and TAG not in encoded["fields"]
    ):
        return encoded["fields"]
    return encoded


def _generic_origin(cls: type) -> type:
    """The generic model a parametrized pydantic class was made from (``Page[Item]`` -> ``Page``).

    The parametrized class lives in no module namespace; its fields hold the typed values either way.
    """
    metadata = getattr(cls, "__pydantic_generic_metadata__", None)
    origin = metadata.get("origin") if isinstance(metadata, dict) else None
    return origin if isinstance(origin, type) else cls


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


_VALIDATION_ERROR: Final = "pydantic_core._pydantic_core.ValidationError"
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


def _rebuilt_validation_error(attrs: Any) -> BaseException | None:
    """A pydantic ``ValidationError`` made from its recorded title and errors, or None.

    Made by pydantic's own public constructor, ``from_exception_data``, from data only; None when pydantic is not
    imported or the data does not fit.

    An error type pydantic does not know (a validator's ``PydanticCustomError``) comes back as a custom error with the
    recorded message.
    """
    core = sys.modules.get("pydantic_core")
    if core is None or type(attrs) is not dict:
        return None
    title, lines = attrs.get("title"), attrs.get("line_errors")
    if type(title) is not str or type(lines) is not list or not all(type(x) is dict for x in lines):
        return None
    details = []
    for line in lines:
        detail: dict[str, Any] = {
            "type": line.get("type"),
            "loc": tuple(line.get("loc") or ()),
            "input": line.get("input"),
        }
        if type(line.get("ctx")) is dict:
            detail["ctx"] = line["ctx"]
        details.append(detail)
    try:
        return cast(BaseException, core.ValidationError.from_exception_data(title, details))
    except Exception:
        pass
    try:  # as custom errors: the recorded type and message
        custom = [
            {
                "type": core.PydanticCustomError(
                    str(x.get("type")), str(x.get("msg", "")).replace("{", "{{").replace("}", "}}")
                ),
                "loc": tuple(x.get("loc") or ()),
                "input": x.get("input"),
            }
            for x in lines
        ]
        return cast(BaseException, core.ValidationError.from_exception_data(title, custom))
    except Exception:
        return None


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


def _native(
    value: Any,
    depth: int,
    key: KeyFilter | None,
    known: Mapping[str, bool] | None,
    safe: set[str] | frozenset[str] | None = None,
) -> bool:
    """True when ``value`` (a dict or a list) encodes to itself.

    That is: JSON natives only (64-bit integers, finite floats, str keys), no key named ``$type``, no key ``key``
    redacts, nested less than :data:`MAX_DEPTH`. orjson then writes the canonical bytes straight from it, and the
    walk that builds a copy is skipped. It only reads: a cycle or anything else ends it at the first doubt, and the
    walk decides.
    """
    if depth >= MAX_DEPTH:
        return False
    if type(value) is dict:
        if TAG in value:
            return False
        values: Iterable[Any] = value.values()
        if key is not None:
            # every key one the key filter already let through, in one C-level pass; a str subclass equal to one
            # passes here, and orjson then refuses it (the walk decides)
            if safe is None or not safe.issuperset(value):
                for k in value:
                    if type(k) is not str:
                        return False
                    hit = known.get(k) if known is not None else None
                    if hit is None:
                        hit = key(k)
                    if hit:
                        return False
        else:
            for k in value:
                if type(k) is not str:
                    return False
    else:
        values = value
    depth += 1
    isfinite = math.isfinite
    for v in values:
        t = type(v)
        if t is str or t is bool or v is None:
            continue
        if t is int:
            if _INT64_MIN <= v <= _UINT64_MAX:
                continue
            return False
        if t is float:
            if isfinite(v):
                continue
            return False
        if (t is dict or t is list) and _native(v, depth, key, known, safe):
            continue
        return False
    return True


def _encoded(value: Any, key: KeyFilter | None, secrets: list[str] | None) -> bytes:
    """The canonical bytes of ``value``, redacted by key name with ``key``: orjson alone when :func:`_native`."""
    t = type(value)
    if (t is dict or t is list) and _native(value, 0, key, getattr(key, "known", None), getattr(key, "safe", None)):
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:
            pass  # a lone surrogate, or a container changed meanwhile: the walk's answer
    tree = _Walker(key, secrets).walk(value, 0)
    try:
        return _canonical(tree)
    except orjson.JSONEncodeError:  # a string UTF-8 cannot hold (a lone surrogate): kept as its repr
        return _canonical(_utf8_only(tree, 0))


def _utf8_only(tree: Any, depth: int) -> Any:
    """A walked ``tree`` with every string UTF-8 cannot hold made ``unencodable`` (a key: its escaped form)."""
    if type(tree) is str:
        try:
            tree.encode()
        except UnicodeEncodeError:
            return _unencodable(tree, "a lone surrogate, which UTF-8 cannot hold")
        return tree
    if depth > 4 * MAX_DEPTH:  # a walked tree is bounded (tags nest at most a few levels per value level)
        return None
    if type(tree) is list:
        return [_utf8_only(v, depth + 1) for v in tree]
    if type(tree) is dict:
        return {k.encode("utf-8", "backslashreplace").decode(): _utf8_only(v, depth + 1) for k, v in tree.items()}
    return tree


def to_json_value(value: Any, *, redact: KeyFilter | Redactor | None = None, secrets: list[str] | None = None) -> Any:
    """Turn ``value`` into JSON-native data (dicts, lists, str, numbers, bool, None) with type tags.

    Never raises: what cannot be encoded becomes an ``unencodable`` tag.

    Args:
        value: any Python value.
        redact: a :class:`~chronicle_otel.redact.Redactor` (key names and secret values) or a predicate on
            key names; redacted values become :data:`REDACTED`.
        secrets: a list that receives the text forms of the values redacted by key name.
    """
    if redact is None:
        return _Walker(None, secrets).walk(value, 0)
    key, redactor = resolve(redact)
    tree = _Walker(key, secrets).walk(value, 0)
    return tree if redactor is None else redact_tree(tree, redactor)


def encode(value: Any, *, redact: KeyFilter | Redactor | None = None, secrets: list[str] | None = None) -> bytes:
    """Encode ``value`` as canonical JSON bytes (UTF-8, sorted keys, no whitespace).

    Equal values give equal bytes, so the sha256 of the result identifies the value. With a
    :class:`~chronicle_otel.redact.Redactor`, the bytes (and so the hash) are those of the redacted value.
    Never raises.

    Args:
        value: any Python value.
        redact: a :class:`~chronicle_otel.redact.Redactor` (key names and secret values) or a predicate on
            key names; redacted values become :data:`REDACTED`.
        secrets: a list that receives the text forms of the values redacted by key name.
    """
    data, scan = encode_unscanned(value, redact=redact, secrets=secrets)
    return data if scan is None else scan(data)


def encode_unscanned(
    value: Any, *, redact: KeyFilter | Redactor | None, secrets: list[str] | None = None
) -> tuple[bytes, Callable[[bytes], bytes] | None]:
    """:func:`encode` in two steps: the bytes with keys redacted, and the scan for secret values.

    The scan (None when ``redact`` has none) redacts the secret values in those bytes: ``scan(data)`` is what
    :func:`encode` returns. For a comparison with a recorded encoding: when the unscanned bytes already equal it,
    the scan is not needed.
    """
    if redact is None:
        return _encoded(value, None, secrets), None
    if isinstance(redact, PatternRedactor):  # the default: one scan of the encoded bytes
        return _encoded(value, redact.key_predicate, secrets), redact.redact_json
    key, redactor = resolve(redact)
    return _encoded(value, key, secrets), _scan_of(redactor)


def value_scan(redact: KeyFilter | Redactor | None) -> Callable[[bytes], bytes] | None:
    """The scan :func:`encode` runs on its bytes with ``redact``: secret values replaced (None: ``redact`` has none)."""
    if redact is None:
        return None
    if isinstance(redact, PatternRedactor):
        return redact.redact_json
    return _scan_of(resolve(redact)[1])


def _scan_of(redactor: Redactor | None) -> Callable[[bytes], bytes] | None:
    if redactor is None:
        return None

    def scan(data: bytes) -> bytes:
        return redact_encoded(data, redactor)

    return scan


# ---------------------------------------------------------------------------------------------- decode

AllowList = Iterable[str]

MAX_DECODE_DEPTH: Final = 4 * MAX_DEPTH
"""Values nested deeper than this are refused by the decoder (:class:`~chronicle_otel.errors.CodecError`)."""

MAX_DECODE_BYTES: Final = 256 << 20
"""Payloads larger than this (bytes of JSON text) are refused by the decoder."""

MAX_INT_DIGITS: Final = 4300
"""Integers written with more digits than this are refused (parsing them costs quadratic time)."""

_DECODE_ERRORS = (KeyError, TypeError, ValueError, AttributeError, OverflowError, IndexError, ArithmeticError)


def decode(data: bytes | str, *, allow: AllowList = ()) -> Any:
    """Decode bytes written by :func:`encode`. Safe on untrusted data.

    Decoding never imports a module, never unpickles and never calls anything but the constructor of a class that is
    registered with :func:`register_type`, or allowed by ``allow`` and already imported, and whose own
    ``__module__`` and ``__qualname__`` are exactly the recorded name, of the kind the tag names (a dataclass, a
    pydantic model, an enum, a namedtuple, an :class:`Exception` subclass). Everything else becomes an
    :class:`UnresolvedObject`.

    Args:
        data: canonical JSON bytes or text.
        allow: module prefixes whose classes may be rebuilt (``"myapp."``, ``"myapp"`` or ``"myapp.models.Order"``).
            Classes are only looked up among modules already imported; nothing is imported.

    Raises:
        CodecError: ``data`` is not chronicle-json, is malformed, nested deeper than :data:`MAX_DECODE_DEPTH` or
            larger than :data:`MAX_DECODE_BYTES`.
    """
    if len(data) > MAX_DECODE_BYTES:
        raise CodecError(f"payload of {len(data)} bytes is larger than MAX_DECODE_BYTES ({MAX_DECODE_BYTES})")
    try:
        tree = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise CodecError(f"not chronicle-json: {exc}") from None
    if _untagged(data):
        return tree  # plain JSON within the depth bound: decoding would copy it unchanged
    return decode_value(tree, allow=allow)


def _untagged(data: bytes | str) -> bool:
    """True when ``data`` holds no type tag and nests no deeper than :data:`MAX_DECODE_DEPTH`.

    It opens no more objects and arrays than that; a tag spelled with escapes would show a backslash-u, so none may.
    """
    if isinstance(data, str):  # a one-character search is a memchr: the longer ones run only when it finds one
        if ("$" in data and TAG in data) or ("\\" in data and "\\u" in data):
            return False
        return data.count("{") + data.count("[") <= MAX_DECODE_DEPTH
    if (b"$" in data and b"$type" in data) or (b"\\" in data and b"\\u" in data):
        return False
    return data.count(b"{") + data.count(b"[") <= MAX_DECODE_DEPTH


def decode_value(tree: Any, *, allow: AllowList = ()) -> Any:
    """Decode JSON-native data produced by :func:`to_json_value` (see :func:`decode`)."""
    if isinstance(allow, str):
        allow = (allow,)
    return _Decoder(tuple(allow)).value(tree, 0)


def _allowed(name: str, allow: tuple[str, ...]) -> bool:
    for prefix in allow:
        if not isinstance(prefix, str) or not prefix:
            continue
        if prefix.endswith("."):
            if name.startswith(prefix):
                return True
        elif name == prefix or name.startswith(prefix + "."):
            return True
    return False


class _Decoder:
    __slots__ = ("allow",)

    def __init__(self, allow: tuple[str, ...]) -> None:
        self.allow = allow

    def value(self, v: Any, depth: int) -> Any:
        cls = type(v)
        if cls is list:
            if depth >= MAX_DECODE_DEPTH:
                raise CodecError(f"value nested deeper than MAX_DECODE_DEPTH ({MAX_DECODE_DEPTH})")
            return self.items(v, depth + 1)
        if cls is dict:
            if depth >= MAX_DECODE_DEPTH:
                raise CodecError(f"value nested deeper than MAX_DECODE_DEPTH ({MAX_DECODE_DEPTH})")
            tag = v.get(TAG)
            if tag is None:
                return {k: self.value(x, depth + 1) for k, x in v.items()}
            handler = _DECODERS.get(tag) if type(tag) is str else None
            if handler is None:
                rest = {k: self.value(x, depth + 1) for k, x in v.items() if k != TAG}
                name = v.get("class")
                return UnresolvedObject(str(tag)[:200], name if type(name) is str else "", rest)
            try:
                return handler(self, v, depth + 1)
            except CodecError:
                raise
            except _DECODE_ERRORS as exc:
                raise CodecError(f"malformed {tag!r} value: {_short(exc)}") from None
        return v

    def items(self, v: list[Any], depth: int, cls: type | None = None) -> list[Any]:
        """The items of a list.

        A model without its class is of the class of the model before it; with ``cls`` (the one model class a
        field's annotation names for its items), a plain object is a model of ``cls``.
        """
        out: list[Any] = []
        previous: tuple[str, type | None] | None = None
        for x in v:
            if type(x) is dict:
                if cls is not None and TAG not in x:
                    out.append(_dec_inline(self, cls, x, depth))
                    previous = (_qualname(cls), cls)
                    continue
                if x.get(TAG) == "pydantic" and "fields" in x:
                    if depth >= MAX_DECODE_DEPTH:
                        raise CodecError(f"value nested deeper than MAX_DECODE_DEPTH ({MAX_DECODE_DEPTH})")
                    try:
                        if "class" in x:
                            name = _str(x, "class")
                            previous = (name, self.resolve(name, _is_pydantic))
                        elif previous is None:
                            raise ValueError("a model without its class, and no model before it in its list")
                        out.append(_dec_model(self, x, depth + 1, *previous))
                    except CodecError:
                        raise
                    except _DECODE_ERRORS as exc:
                        raise CodecError(f"malformed 'pydantic' value: {_short(exc)}") from None
                    continue
            out.append(self.value(x, depth))
            previous = None
        return out

    def resolve(self, name: Any, kind: Callable[[type], bool]) -> type | None:
        """The class recorded as ``name``, when registered, or allowed and already imported, and of ``kind``."""
        if type(name) is not str:
            raise TypeError("'class' must be a string")
        entry = _registry_by_name.get(name)
        if entry is not None:
            return entry.cls if kind(entry.cls) else None
        if not _allowed(name, self.allow):
            return None
        cls = find_loaded_class(name)
        if cls is None:
            return None
        try:
            return cls if kind(cls) else None
        except Exception:
            return None


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 300 else text[:299] + "…"


def upgrade_encoding(text: str) -> str:
    """A recorded payload's ``text`` as this version encodes the same value.

    The encoding of pydantic models changed: the fields that were set, nested models of their annotation's class
    and runs of one class written once.

    For comparing a recording made by an earlier version with a value encoded now: the text is returned unchanged
    when it holds no model written the earlier way. Nothing is imported or built; the annotations of classes already
    imported are read. Raises :class:`CodecError` for text that is not chronicle-json.
    """
    if not _earlier_models(text):
        return text
    try:
        tree = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise CodecError(f"not chronicle-json: {exc}") from None
    try:
        return _canonical(_upgrade(tree, 0)).decode()
    except (TypeError, ValueError, KeyError, orjson.JSONEncodeError) as exc:
        raise CodecError(f"malformed payload: {_short(exc)}") from None


_EARLIER_HEAD: Final = '{"$type":"pydantic","class":"'


def _earlier_models(text: str) -> bool:
    """Whether ``text`` holds a model written as an earlier version wrote it (``data`` right after its class)."""
    start = text.find(_EARLIER_HEAD)
    while start >= 0:
        end = text.find('"', start + len(_EARLIER_HEAD))
        if end < 0:
            return False
        if text.startswith(',"data":', end + 1):
            return True
        start = text.find(_EARLIER_HEAD, end)
    return False


def same_encoding(recorded: str, actual: str) -> bool:
    """Whether a recorded payload text and one encoded now hold the same value (see :func:`upgrade_encoding`)."""
    if recorded == actual:
        return True
    try:
        upgraded = upgrade_encoding(recorded)
    except CodecError:
        return False
    if upgraded is recorded:
        return False
    if upgraded == actual:
        return True
    if '"set_extras":' not in actual:
        return False
    try:  # an earlier version did not record which extras were set: compared without, every model named
        return _canonical(_expanded(orjson.loads(upgraded), 0)) == _canonical(_expanded(orjson.loads(actual), 0))
    except (orjson.JSONDecodeError, orjson.JSONEncodeError, CodecError, TypeError, ValueError):
        return False


def _expanded(tree: Any, depth: int, one: type | None = None, items: type | None = None) -> Any:
    """An encoding with every model tagged with its class and without ``set_extras``.

    For comparing encodings that differ only in what an earlier version could not record. ``one``/``items``: the
    model class an untagged object here is, or the items of a list here are (a field's annotation).
    """
    if depth > MAX_DECODE_DEPTH:
        raise CodecError(f"value nested deeper than MAX_DECODE_DEPTH ({MAX_DECODE_DEPTH})")
    if type(tree) is list:
        out = []
        previous = None
        for e in tree:
            if type(e) is dict and TAG not in e and items is not None:
                e = {TAG: "pydantic", "class": _qualname(items), "fields": e}
            if type(e) is dict and e.get(TAG) == "pydantic" and "fields" in e:
                previous = e.get("class", previous)
                out.append(_expanded_model(e, previous, depth + 1))
            else:
                previous = None
                out.append(_expanded(e, depth + 1))
        return out
    if type(tree) is not dict:
        return tree
    tag = tree.get(TAG)
    if tag is None:
        if one is not None:
            return _expanded_model({TAG: "pydantic", "fields": tree}, _qualname(one), depth)
        return {k: _expanded(x, depth + 1) for k, x in tree.items()}
    if tag == "pydantic" and "fields" in tree:
        return _expanded_model(tree, tree.get("class"), depth)
    structural = _STRUCTURAL.get(tag) if type(tag) is str else None
    return {
        k: [_expanded(e, depth + 1) for e in x] if k == structural and type(x) is list else _expanded(x, depth + 1)
        for k, x in tree.items()
    }


def _expanded_model(tree: dict[str, Any], name: Any, depth: int) -> dict[str, Any]:
    fields = tree["fields"]
    cls = find_loaded_class(name) if type(name) is str else None
    slots = _model_slots(cls) if cls is not None and _is_pydantic(cls) else {}
    if type(fields) is dict and TAG not in fields:
        fields = {k: _expanded(x, depth + 1, *slots.get(k, (None, None))) for k, x in fields.items()}
    else:
        fields = _expanded(fields, depth + 1)
    out = {TAG: "pydantic", "class": name, "fields": fields}
    if "private" in tree:
        out["private"] = _expanded(tree["private"], depth + 1)
    return out


_STRUCTURAL: Final = {"dict": "items", "tuple": "items", "set": "items", "frozenset": "items", "exception": "args"}
"""Lists a tag holds as its own structure (pairs, items, arguments), written item by item rather than as a value."""


def _upgrade(tree: Any, depth: int) -> Any:
    if depth > MAX_DECODE_DEPTH:
        raise CodecError(f"value nested deeper than MAX_DECODE_DEPTH ({MAX_DECODE_DEPTH})")
    if type(tree) is list:
        return _siblings([_upgrade(x, depth + 1) for x in tree])
    if type(tree) is not dict:
        return tree
    tag = tree.get(TAG)
    if tag is None:
        return {k: _upgrade(x, depth + 1) for k, x in tree.items()}
    if tag == "pydantic" and "data" in tree and "fields" not in tree:
        return _upgrade_model(tree, depth)
    structural = _STRUCTURAL.get(tag) if type(tag) is str else None
    out: dict[str, Any] = {}
    for k, x in tree.items():
        if k == TAG:
            out[k] = x
        elif k == structural and type(x) is list:
            items = [
                [_upgrade(e, depth + 2) for e in pair]
                if tag == "dict" and type(pair) is list
                else _upgrade(pair, depth)
                for pair in x
            ]
            if tag == "dict":  # ordered as the encoder orders them: by the encoding of the key, which may change
                items.sort(key=lambda pair: _canonical(pair[0] if type(pair) is list and pair else pair))
            elif tag in ("set", "frozenset"):
                items.sort(key=_canonical)
            out[k] = items
        else:
            out[k] = _upgrade(x, depth + 1)
    return out


def _upgrade_model(tree: dict[str, Any], depth: int) -> dict[str, Any]:
    """A model recorded as ``data`` (every field) and ``unset``, written as this version writes it."""
    unset = tree.get("unset") or []
    unset = set(unset) if type(unset) is list else set()
    data = tree["data"]
    fields: Any
    if type(data) is dict and TAG not in data:
        fields = {k: _upgrade(x, depth + 1) for k, x in data.items() if k not in unset}
    elif type(data) is dict and data.get(TAG) == "dict" and type(data.get("items")) is list:
        pairs = [p for p in data["items"] if not (type(p) is list and len(p) == 2 and p[0] in unset)]
        fields = _upgrade({TAG: "dict", "items": pairs}, depth + 1)
    else:
        fields = _upgrade(data, depth + 1)
    name = tree.get("class")
    out: dict[str, Any] = {TAG: "pydantic", "class": name, "fields": fields}
    if "private" in tree:
        out["private"] = _upgrade(tree["private"], depth + 1)
    cls = find_loaded_class(name) if type(name) is str else None
    if cls is not None and type(fields) is dict and TAG not in fields and _is_pydantic(cls):
        for field, slot in _model_slots(cls).items():
            if field in fields:
                fields[field] = _placed_by_name(fields[field], slot)
    return out


def _placed_by_name(encoded: Any, slot: _Slot) -> Any:
    """:func:`_placed` for an encoding without its value: the class is known by the name the encoding gives."""
    one, items = slot
    if type(encoded) is dict and one is not None:
        return _inline_by_name(encoded, encoded.get("class"), _qualname(one))
    if type(encoded) is list and items is not None:
        name = _qualname(items)
        out = []
        previous = None
        for e in encoded:
            if type(e) is dict and e.get(TAG) == "pydantic" and "fields" in e:
                previous = e.get("class", previous)
                out.append(_inline_by_name(e, previous, name))
            else:
                previous = None
                out.append(_inline_by_name(e, None, name) if type(e) is dict else e)
        return out
    return encoded


def _inline_by_name(encoded: dict[str, Any], recorded: Any, wanted: str) -> Any:
    if TAG not in encoded:
        return _inline(encoded, None, object)
    if (
        encoded[TAG] == "pydantic"
        and recorded == wanted
        and len(encoded) == (3 if "class" in encoded else 2)
        and type(encoded.get("fields")) is dict
        and TAG not in encoded["fields"]
    ):
        return encoded["fields"]
    return encoded


def find_loaded_class(name: str) -> type | None:
    """The class whose own ``__module__`` and ``__qualname__`` make ``name``, among modules already imported.

    Never imports and never runs code: the qualified name is followed through the ``__dict__`` of the module and of
    classes defined in it (no ``getattr``, so no module ``__getattr__`` hook and no descriptor runs), and the class
    found must name itself exactly ``name``: a class reached through another module's namespace
    (``myapp.tools.subprocess.Popen``) is not found.
    """
    parts = name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:i])
        module = sys.modules.get(module_name)
        if module is None:
            continue
        obj: Any = module
        for attr in parts[i:]:
            namespace = getattr(obj, "__dict__", None) if obj is module else _class_dict(obj)
            if not isinstance(namespace, Mapping):
                return None
            obj = namespace.get(attr)
            if not isinstance(obj, type):
                return None
        cls: type = obj
        own_module = cls.__dict__.get("__module__")
        own_qualname = type.__dict__["__qualname__"].__get__(cls)
        if own_module == module_name and own_qualname == ".".join(parts[i:]):
            return cls
        return None
    return None


def _class_dict(obj: Any) -> Mapping[str, Any] | None:
    if not isinstance(obj, type):
        return None
    namespace = type.__dict__["__dict__"].__get__(obj)
    return namespace if isinstance(namespace, Mapping) else None


def _is_dataclass(cls: type) -> bool:
    return isinstance(cls, type) and "__dataclass_fields__" in _class_dict_chain(cls)


def _class_dict_chain(cls: type) -> set[str]:
    names: set[str] = set()
    for base in cls.__mro__:
        names.update(type.__dict__["__dict__"].__get__(base))
    return names


def _is_pydantic(cls: type) -> bool:
    pydantic = sys.modules.get("pydantic")
    base = getattr(pydantic, "BaseModel", None) if pydantic is not None else None
    return isinstance(base, type) and isinstance(cls, type) and issubclass(cls, base)


def _is_namedtuple(cls: type) -> bool:
    if not (isinstance(cls, type) and issubclass(cls, tuple)):
        return False
    fields = next((type.__dict__["__dict__"].__get__(b).get("_fields") for b in cls.__mro__ if b is not tuple), None)
    return isinstance(fields, tuple) and all(type(f) is str for f in fields)


def _is_enum(cls: type) -> bool:
    return isinstance(cls, type) and issubclass(cls, enum.Enum)


def _is_exception(cls: type) -> bool:
    return isinstance(cls, type) and issubclass(cls, Exception)


def _is_any(cls: type) -> bool:
    return True


_BUILTIN_EXCEPTIONS: Final = {
    f"builtins.{name}": obj
    for name, obj in vars(builtins).items()
    if isinstance(obj, type) and issubclass(obj, Exception) and obj.__module__ == "builtins"
}
"""Builtin exceptions a recording may name: :class:`Exception` subclasses only (never ``KeyboardInterrupt``,
``SystemExit``, ``GeneratorExit`` or another ``BaseException``-only class)."""


def _str(v: Any, key: str) -> str:
    value = v[key]
    if type(value) is not str:
        raise TypeError(f"{key!r} must be a string")
    return value


def _dec_int(d: _Decoder, v: dict[str, Any], depth: int) -> Any:
    text = _str(v, "value")
    if len(text) > MAX_INT_DIGITS + 1:
        raise CodecError(f"integer with more than MAX_INT_DIGITS ({MAX_INT_DIGITS}) digits")
    return int(text)


def _dec_float(d: _Decoder, v: dict[str, Any], depth: int) -> Any:
    text = _str(v, "value")
    if len(text) > 64:
        raise ValueError("float text longer than 64 characters")
    return float(text)


def _dec_dict(d: _Decoder, v: dict[str, Any], depth: int) -> Any:
    out = {}
    for k, x in v["items"]:
        key = d.value(k, depth)
        if isinstance(key, (list, dict, set)):
            key = _freeze(key, depth)
        out[key] = d.value(x, depth)
    return out


def _freeze(v: Any, depth: int) -> Any:
    if depth >= MAX_DECODE_DEPTH:
        raise CodecError(f"value nested deeper than MAX_DECODE_DEPTH ({MAX_DECODE_DEPTH})")
    if isinstance(v, list):
        return tuple(_freeze(x, depth + 1) for x in v)
    if isinstance(v, dict):
        return tuple(sorted(((k, _freeze(x, depth + 1)) for k, x in v.items()), key=repr))
    if isinstance(v, set):
        return frozenset(_freeze(x, depth + 1) for x in v)
    return v


def _items(v: dict[str, Any]) -> list[Any]:
    items = v["items"]
    if type(items) is not list:
        raise TypeError("'items' must be a list")
    return items


def _dec_tuple(d: _Decoder, v: dict[str, Any], depth: int) -> Any:
    return tuple(d.value(x, depth) for x in _items(v))


def _dec_set(d: _Decoder, v: dict[str, Any], depth: int) -> Any:
    items = [_freeze(d.value(x, depth), depth) for x in _items(v)]
    return frozenset(items) if v[TAG] == "frozenset" else set(items)


def _dec_bytes(d: _Decoder, v: dict[str, Any], depth: int) -> Any:
    return base64.b64decode(_str(v, "b64"), validate=True)


def _dec_datetime(d: _Decoder, v: dict[str, Any], depth: int) -> Any:
    value = _dt.datetime.fromisoformat(_str(v, "iso"))
    if "tz" in v:
        import zoneinfo  # zone data, never code: ZoneInfo rejects keys that are paths

        try:
            value = value.replace(tzinfo=zoneinfo.ZoneInfo(_str(v, "tz")))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
            raise ValueError(f"unknown time zone {v['tz']!r}") from None
    return value.replace(fold=_fold(v))


def _fold(v: dict[str, Any]) -> int:
    fold = v.get("fold", 0)
    if fold not in (0, 1) or type(fold) is not int:
        raise ValueError("'fold' must be 0 or 1")
    return fold


def _dec_date(d: _Decoder, v: dict[str, Any], depth: int) -> Any:
    return _dt.date.fromisoformat(_str(v, "iso"))


def _dec_time(d: _Decoder, v: dict[str, Any], depth: int) -> Any:
    return _dt.time.fromisoformat(_str(v, "iso")).replace(fold=_fold(v))


def _dec_timedelta(d: _Decoder, v: dict[str, Any], depth: int) -> Any:
    parts = [v["days"], v["seconds"], v["microseconds"]]
    if any(type(p) is not int for p in parts):
        raise TypeError("timedelta parts must be integers")
    return _dt.timedelta(days=parts[0], seconds=parts[1], microseconds=parts[2])


def _dec_decimal(d: _Decoder, v: dict[str, Any], depth: int) -> Any:
    text = _str(v, "value")
    if len(text) > MAX_INT_DIGITS + 64:
        raise CodecError(f"decimal with more than MAX_INT_DIGITS ({MAX_INT_DIGITS}) digits")
    value = Decimal(text)
    if value.is_finite() and abs(value.adjusted()) > _MAX_DECIMAL_EXPONENT:
        raise CodecError(f"decimal exponent beyond ±{_MAX_DECIMAL_EXPONENT}")
    return value


_MAX_DECIMAL_EXPONENT: Final = 999_999  # decimal's default context: a larger one explodes in later arithmetic


def _dec_uuid(d: _Decoder, v: dict[str, Any], depth: int) -> Any:
    return uuid.UUID(_str(v, "value"))


def _dec_complex(d: _Decoder, v: dict[str, Any], depth: int) -> Any:
    real, imag = d.value(v["real"], depth), d.value(v["imag"], depth)
    if not all(type(x) in (int, float) for x in (real, imag)):
        raise TypeError("complex parts must be numbers")
    return complex(real, imag)


def _dec_path(d: _Decoder, v: dict[str, Any], depth: int) -> Any:
    from pathlib import Path, PurePosixPath

    text = _str(v, "value")
    if v.get("flavour") == "windows":
        return Path(text) if not v.get("pure") and os.name == "nt" else PureWindowsPath(text)
    return PurePosixPath(text) if v.get("pure") else Path(text)


def _dec_enum(d: _Decoder, v: dict[str, Any], depth: int) -> Any:
    value = d.value(v["value"], depth)
    name = _str(v, "class")
    cls = d.resolve(name, _is_enum)
    if cls is not None:
        try:
            return cls(value)
        except Exception:  # the member is gone or renamed since the recording
            pass
    return UnresolvedObject("enum", name, value)


def _dec_fields(tag: str, kind: Callable[[type], bool]) -> Callable[[_Decoder, dict[str, Any], int], Any]:
    def dec(d: _Decoder, v: dict[str, Any], depth: int) -> Any:
        data = d.value(v["data"], depth)
        name = _str(v, "class")
        cls = d.resolve(name, kind)
        if cls is None:
            return UnresolvedObject(tag, name, data)
        if type(data) is not dict:
            raise TypeError("'data' must be a mapping")
        unset = v.get("unset", [])
        if type(unset) is not list or not all(type(u) is str for u in unset):
            raise TypeError("'unset' must be a list of field names")
        private = d.value(v.get("private", {}), depth)
        if type(private) is not dict:
            raise TypeError("'private' must be a mapping")
        try:
            if tag == "pydantic":
                return _construct_model(cls, data, unset, private)
            return _construct(tag, cls, data)
        except CodecError:
            raise
        except Exception as exc:  # the class's own validation refused the recorded data
            raise CodecError(f"cannot rebuild {name} from the recorded data: {_short(exc)}") from None

    return dec


_old_pydantic = _dec_fields("pydantic", _is_pydantic)


def _dec_pydantic(d: _Decoder, v: dict[str, Any], depth: int) -> Any:
    """A pydantic model: ``fields`` (the fields that were set), or, as recorded before, ``data`` and ``unset``."""
    if "fields" not in v:
        return _old_pydantic(d, v, depth)
    if "class" not in v:
        raise ValueError("a model without its class outside a list")
    name = _str(v, "class")
    return _dec_model(d, v, depth, name, d.resolve(name, _is_pydantic))


def _dec_model(d: _Decoder, v: dict[str, Any], depth: int, name: str, cls: type | None) -> Any:
    """A model of this version's encoding, of the class recorded as ``name`` (``cls`` when it may be rebuilt)."""
    if cls is None:
        return UnresolvedObject("pydantic", name, d.value(v["fields"], depth))
    set_extras = v.get("set_extras", [])
    if type(set_extras) is not list or not all(type(f) is str for f in set_extras):
        raise TypeError("'set_extras' must be a list of field names")
    private = d.value(v.get("private", {}), depth)
    if type(private) is not dict:
        raise TypeError("'private' must be a mapping")
    data = _model_data(d, cls, v["fields"], depth)
    try:
        return _construct_model(cls, data, [], private, set_extras)
    except CodecError:
        raise
    except Exception as exc:  # the class's own code refused the recorded data
        raise CodecError(f"cannot rebuild {name} from the recorded data: {_short(exc)}") from None


def _model_data(d: _Decoder, cls: type, raw: Any, depth: int) -> dict[str, Any]:
    """The decoded ``fields`` of a model of ``cls``.

    A plain object where the annotation names one model class is that class, rebuilt: ``cls`` was registered or
    allowed, so is the class its own annotation names.
    """
    if type(raw) is not dict or TAG in raw:  # keys JSON cannot hold: the tagged dict form, nothing untagged inside
        data = d.value(raw, depth)
        if type(data) is not dict:
            raise TypeError("'fields' must be a mapping")
        return data
    if depth >= MAX_DECODE_DEPTH:
        raise CodecError(f"value nested deeper than MAX_DECODE_DEPTH ({MAX_DECODE_DEPTH})")
    slots = _model_slots(cls)
    out: dict[str, Any] = {}
    for key, x in raw.items():
        slot = slots.get(key) if slots else None
        if slot is None:
            out[key] = d.value(x, depth + 1)
        elif slot[0] is not None and type(x) is dict and TAG not in x:
            out[key] = _dec_inline(d, slot[0], x, depth + 1)
        elif slot[1] is not None and type(x) is list:
            if depth + 1 >= MAX_DECODE_DEPTH:
                raise CodecError(f"value nested deeper than MAX_DECODE_DEPTH ({MAX_DECODE_DEPTH})")
            out[key] = d.items(x, depth + 2, slot[1])
        else:
            out[key] = d.value(x, depth + 1)
    return out


def _dec_inline(d: _Decoder, cls: type, raw: dict[str, Any], depth: int) -> Any:
    """A nested model written as its fields alone, rebuilt as the class its field's annotation names."""
    data = _model_data(d, cls, raw, depth)
    try:
        return _construct_model(cls, data, [], {})
    except CodecError:
        raise
    except Exception as exc:
        raise CodecError(f"cannot rebuild {_qualname(cls)} from the recorded data: {_short(exc)}") from None


def _names_field(key: Any, declared: Mapping[str, Any]) -> bool:
    """``key`` names a declared field, by its name or its alias."""
    if key in declared:
        return True
    return any(getattr(field, "alias", None) == key for field in declared.values())


def _needs_fields(cls: Any, declared: Mapping[str, Any]) -> bool:
    """The class cannot be made of extra fields alone: it keeps none, or it has a required field."""
    config = getattr(cls, "model_config", None)
    if not isinstance(config, Mapping) or config.get("extra") != "allow":
        return True
    return any(_required(field) for field in declared.values())


def _required(field: Any) -> bool:
    try:
        return bool(field.is_required())
    except Exception:
        return False


def _construct_model(
    cls: Any, data: dict[str, Any], unset: list[str], private: dict[str, Any], set_extras: list[str] | None = None
) -> Any:
    """The model as it was recorded, rebuilt with ``model_construct``.

    Its fields (by name, also for a field the class names by alias), its extra fields and which fields were set
    (the fields ``data`` names, and the extras in ``set_extras``) come back as recorded. The values were validated
    when the model was made; the class's validators do not run again (a parametrized generic model is recorded as
    its generic class, whose type variables would refuse the values its parameters allowed).
    """
    skip = set(unset)  # filled in with their defaults, as when recorded; passing them would mark them set
    declared = getattr(cls, "model_fields", None) or {}
    if declared and data and not any(_names_field(key, declared) for key in data) and _needs_fields(cls, declared):
        # not one recorded field is a field of the class: the recording names another class (a trace edited to name
        # a class it was not made of) — an object of the class with none of its fields set would be handed over
        raise TypeError(f"none of the recorded fields ({', '.join(sorted(map(str, data))[:5])}) is a field of it")
    values: dict[str, Any] = {}
    aliases: list[str] = []
    for key, val in data.items():
        if type(key) is not str or key in skip:
            continue
        alias = getattr(declared.get(key), "alias", None)
        if type(alias) is str and alias and alias not in declared and alias not in data:
            # a field the class names by alias (``schema_`` for ``schema``) is given by its alias: model_construct
            # takes the name only under populate_by_name
            values[alias] = val
            aliases.append(alias)
        else:
            values[key] = val
    model = cls.model_construct(**values)
    if aliases:  # a construct that took the alias for the field and kept it as an extra too (the OpenAI SDK's)
        extra = getattr(model, "__pydantic_extra__", None)
        if isinstance(extra, dict):
            for alias in aliases:
                extra.pop(alias, None)
    if set_extras:
        fields_set = object.__getattribute__(model, "__pydantic_fields_set__")
        object.__setattr__(model, "__pydantic_fields_set__", fields_set | {k for k in set_extras if k in data})
    if private:
        declared = getattr(cls, "__private_attributes__", None) or {}
        store = getattr(model, "__pydantic_private__", None)
        namespace = object.__getattribute__(model, "__dict__")
        class_names = _class_dict_chain(cls)
        for key, value in private.items():
            if type(key) is not str or not key.startswith("_") or key.startswith("__"):
                continue
            if key in declared and isinstance(store, dict):
                store[key] = value  # a declared private attribute, in pydantic's private dict
            elif key not in class_names and isinstance(namespace, dict):
                namespace[key] = value  # an instance attribute that shadows nothing of the class
    return model


def _construct(tag: str, cls: Any, data: dict[str, Any]) -> Any:
    if tag == "namedtuple":
        fields = cls._fields
        if set(data) != set(fields):
            raise TypeError(f"fields {sorted(map(str, data))} do not match {list(fields)}")
        return tuple.__new__(cls, [data[f] for f in fields])  # no user code runs: the tuple is built as is
    # Made as the code made it (its __post_init__ derives the state the fields do not hold), then every field set
    # back to its recorded value: a __post_init__ that changes a field (a prefix added) does not change it twice.
    # One that cannot run again (an InitVar is never stored) is skipped: the fields alone, as recorded.
    fields = dataclasses.fields(cls)
    missing = dataclasses.MISSING
    for f in fields:  # a field added to the class since the recording takes its default; one without, no value
        if f.name not in data and f.default is missing and f.default_factory is missing:
            raise TypeError(f"the recording has no value for the field {f.name!r}")
    try:
        obj = cls(**{f.name: data[f.name] for f in fields if f.init and f.name in data})
    except Exception:
        obj = _blank(cls)
        for f in fields:
            if f.name not in data:
                default = f.default if f.default is not missing else f.default_factory()  # type: ignore[operator]
                object.__setattr__(obj, f.name, default)
    for f in fields:
        if f.name in data:
            object.__setattr__(obj, f.name, data[f.name])  # as the generated __init__ does, frozen or with slots
    return obj


_ARGS: Final[Any] = BaseException.__dict__["args"]
"""The ``args`` slot of every exception, set without the class's own ``__setattr__``."""


def _blank(cls: type, args: tuple[Any, ...] = ()) -> Any:
    """An instance of ``cls`` made by the nearest builtin ``__new__`` of its bases: none of its own code runs.

    For a class whose constructor refuses the recorded data.
    """
    for base in cls.__mro__:
        if base.__module__ == "builtins" and "__new__" in base.__dict__:
            return base.__new__(cls, *args)
    raise TypeError(f"{cls.__qualname__} has no builtin base to make it from")  # pragma: no cover - object is one


def _restore_attrs(obj: Any, attrs: dict[str, Any]) -> None:
    """Put back the recorded plain attributes, into the instance dict directly: no descriptor or __setattr__ runs."""
    try:
        namespace = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return
    if type(namespace) is dict:
        for key, value in attrs.items():
            if type(key) is str and not key.startswith("_"):
                namespace[key] = value


def _dec_exception(d: _Decoder, v: dict[str, Any], depth: int) -> Any:
    raw_args = v.get("args", [])
    if type(raw_args) is not list:
        raise TypeError("'args' must be a list")
    args = [d.value(a, depth) for a in raw_args]
    name = _str(v, "class")
    message = v.get("message", "")
    raw_attrs = v.get("attrs", {})
    if type(raw_attrs) is not dict:
        raise TypeError("'attrs' must be a mapping")
    attrs = d.value(raw_attrs, depth)
    if name == _VALIDATION_ERROR:  # made by pydantic's own constructor from data: never a class the trace chose
        rebuilt = _rebuilt_validation_error(attrs)
        if rebuilt is not None:
            return rebuilt
    cls = _BUILTIN_EXCEPTIONS.get(name) if name.startswith("builtins.") else d.resolve(name, _is_exception)
    if cls is not None:
        # Made by its constructor from the recorded args (what __init__ derives: errno, a private attribute), then
        # the recorded args and plain attributes put back over what it set: a message formatted in __init__ is not
        # formatted twice, a keyword's default does not replace the recorded value (status_code=500 for 429).
        try:
            error = cls(*args)
        except Exception:  # a constructor with required keywords (an SDK error): built without running it
            try:
                error = _blank(cls, tuple(args))
            except Exception:
                error = _blank(cls)
        _ARGS.__set__(error, tuple(args))
        if type(attrs) is dict:
            _restore_attrs(error, attrs)
        return error
    return UnresolvedObject("exception", name, {"message": message if type(message) is str else "", "args": args})


def _dec_custom(d: _Decoder, v: dict[str, Any], depth: int) -> Any:
    data = d.value(v["data"], depth)
    name = _str(v, "class")
    entry = _registry_by_name.get(name)
    if entry is None:
        return UnresolvedObject("custom", name, data)
    try:
        return entry.decode(data)
    except Exception as exc:
        raise CodecError(f"the decoder registered for {name} failed: {_short(exc)}") from None


def _dec_unencodable(d: _Decoder, v: dict[str, Any], depth: int) -> Any:
    name, text = v.get("class", ""), v.get("repr", "")
    return UnresolvedObject("unencodable", name if type(name) is str else "", text if type(text) is str else "")


_DECODERS: dict[str, Callable[[_Decoder, dict[str, Any], int], Any]] = {
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
    "dataclass": _dec_fields("dataclass", _is_dataclass),
    "pydantic": _dec_pydantic,
    "namedtuple": _dec_fields("namedtuple", _is_namedtuple),
    "exception": _dec_exception,
    "custom": _dec_custom,
    "unencodable": _dec_unencodable,
}
