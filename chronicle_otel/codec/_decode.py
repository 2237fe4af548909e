"""Safe decoding: chronicle-json, untrusted, back to values.

Never imports, never unpickles; a tag rebuilds only a class registered or allowed and already imported, of the kind
the tag names (made as ``_rebuild`` says). Otherwise an :class:`UnresolvedObject` keeps the class name and the
plain data. Depth, size and digit limits raise :class:`~chronicle_otel.errors.CodecError`.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import os
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final

import orjson

from ..errors import CodecError
from ._classes import (
    _BUILTIN_EXCEPTIONS,
    _VALIDATION_ERROR,
    _is_dataclass,
    _is_enum,
    _is_exception,
    _is_namedtuple,
    _is_pydantic,
    _qualname,
    find_loaded_class,
)
from ._format import MAX_DECODE_BYTES, MAX_DECODE_DEPTH, MAX_INT_DIGITS, TAG
from ._models import _model_slots
from ._rebuild import _ARGS, _blank, _construct, _construct_model, _rebuilt_validation_error, _restore_attrs
from ._registry import AllowList, _allowed, _registry_by_name


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
    from pathlib import Path, PurePosixPath, PureWindowsPath

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
