"""OTLP/JSON values and Python values, both ways: the one mapping the reader and the writer share.

=====================  ==========================  ====================================================
Python                 OTLP ``AnyValue``           notes
=====================  ==========================  ====================================================
``str``                ``stringValue``
``bool``               ``boolValue``
``int``                ``intValue``                written as a JSON string, so 64-bit integers stay exact
``float``              ``doubleValue``             NaN and ±infinity as ``"NaN"``, ``"Infinity"``, ``"-Infinity"``
``bytes``              ``bytesValue``              standard base64
a sequence (a list)    ``arrayValue``
a mapping (a dict)     ``kvlistValue``             a ``KeyValue`` list, as attributes are
=====================  ==========================  ====================================================

Ids are lowercase hex (read from hex in any case, or base64); span kinds and status codes are OTLP's numbers (read
from numbers or protobuf enum names). Writing takes what the SDK and the trace model hold and never fails (anything
else is written as its ``str``); reading takes untrusted documents, in camelCase or snake_case, and raises
:class:`~chronicle_otel.errors.TraceLoadError` for a value of the wrong type, naming where it is.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from .._internal.untrusted import MAX_VALUE_DEPTH, Where, check_depth, describe
from ..errors import TraceLoadError

SPAN_KINDS: Final = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
"""OTLP's span kinds: protobuf enum name -> number (OTLP/JSON writes the number; some writers the name)."""

STATUS_CODES: Final = {"UNSET": 0, "OK": 1, "ERROR": 2}
"""A span status, as :class:`~chronicle_otel.model.SpanRecord` keeps it -> its OTLP number."""

STATUS_NAMES: Final[dict[int | str, str]] = {
    **{number: name for name, number in STATUS_CODES.items()},
    **{f"STATUS_CODE_{name}": name for name in STATUS_CODES},
}
"""An OTLP status code, as a number or a protobuf enum name -> the span status it stands for."""

FLAG_HAS_IS_REMOTE: Final = 0x100
"""Span and link ``flags``: whether the parent (or linked) span context is remote is known."""
FLAG_IS_REMOTE: Final = 0x200
"""Span and link ``flags``: the parent (or linked) span context is remote."""

HEX = re.compile(r"[0-9a-fA-F]+")


# ------------------------------------------------------------------------------------------------------- writing


def _double(value: float) -> dict[str, Any]:
    if math.isnan(value):
        return {"doubleValue": "NaN"}
    if math.isinf(value):
        return {"doubleValue": "Infinity" if value > 0 else "-Infinity"}
    return {"doubleValue": value}


def _int_value(value: int) -> dict[str, Any]:
    return {"intValue": str(value)}


_SCALARS: dict[type, Any] = {
    str: lambda v: {"stringValue": v},
    bool: lambda v: {"boolValue": v},
    int: _int_value,
    float: _double,
}


def encode_value(value: Any) -> dict[str, Any]:
    """Encode one attribute value as an OTLP ``AnyValue``."""
    t = type(value)
    if t is str:
        return {"stringValue": value}
    if t is tuple or t is list:  # the SDK keeps sequence attributes as tuples
        return {"arrayValue": {"values": [{"stringValue": v} if type(v) is str else encode_value(v) for v in value]}}
    encode = _SCALARS.get(t)
    if encode is not None:
        return encode(value)  # type: ignore[no-any-return]
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, str):
        return {"stringValue": str(value)}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return _double(value)
    if isinstance(value, (bytes, bytearray)):
        return {"bytesValue": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, Mapping):
        return {"kvlistValue": {"values": encode_attributes(value)}}
    if isinstance(value, Sequence):
        return {"arrayValue": {"values": [encode_value(v) for v in value]}}
    return {"stringValue": str(value)}


def plain_attributes(attrs: Mapping[str, Any] | None) -> dict[str, Any]:
    """``attrs`` as a plain dict (a copy): cheap to iterate and to look keys up in.

    The SDK's ``BoundedAttributes`` (behind ``ReadableSpan.attributes``) iterates and looks keys up through the
    ``MutableMapping`` mixin, a Python call per key; its ``copy()`` is one C-level copy of its dict.
    """
    copy = getattr(attrs, "copy", None)  # first: an empty mapping's length may be a Python call too
    if copy is not None:
        copied = copy()  # a dict, or an OrderedDict from older SDKs
        return copied if type(copied) is dict else dict(copied)
    return dict(attrs) if attrs else {}


def encode_attributes(attrs: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Encode an attribute mapping as a list of OTLP ``KeyValue``."""
    if not attrs:
        return []
    items = attrs if type(attrs) is dict else plain_attributes(attrs)
    # One comprehension, strings inline: this runs for every attribute of every span.
    return [
        {
            "key": k,
            "value": {"stringValue": v} if type(v) is str else _int_value(v) if type(v) is int else encode_value(v),
        }
        for k, v in items.items()
    ]


# ------------------------------------------------------------------------------------------------------- reading


def decode_value(value: Any, where: Where | None = None, field: str = "value", depth: int = 0) -> Any:
    """An OTLP ``AnyValue`` (camelCase or snake_case) as a Python value; 64-bit integers stay exact.

    Raises:
        TraceLoadError: the value has the wrong type for its kind, or nests deeper than ``MAX_VALUE_DEPTH``.
    """
    at = where if where is not None else Where(None)
    if not isinstance(value, Mapping):
        if value is None or isinstance(value, (str, bool, int, float)):
            return at.integer(value, field) if type(value) is int else value
        raise at.error(field, value, "an OTLP AnyValue object")
    if depth >= MAX_VALUE_DEPTH:
        raise at.fail(f"{field} nests deeper than {MAX_VALUE_DEPTH} levels")
    for key in ("stringValue", "string_value"):
        v = value.get(key)
        if v is not None:
            return at.text(v, f"{field}.{key}")
    for key in ("intValue", "int_value"):
        v = value.get(key)
        if v is not None:
            return at.integer(v, f"{field}.{key}")
    for key in ("boolValue", "bool_value"):
        v = value.get(key)
        if v is not None:
            if isinstance(v, bool):
                return v
            if isinstance(v, str) and v.lower() in ("true", "false"):
                return v.lower() == "true"
            raise at.error(f"{field}.{key}", v, "true or false")
    for key in ("doubleValue", "double_value"):
        v = value.get(key)
        if v is not None:
            return at.real(v, f"{field}.{key}")
    for key in ("arrayValue", "array_value"):
        v = value.get(key)
        if v is not None:
            values = at.items(at.mapping(v, f"{field}.{key}").get("values"), f"{field}.{key}.values")
            out: list[Any] = []
            for i, item in enumerate(values):
                out.append(decode_value(item, at, f"{field}.{key}.values[{i}]", depth + 1))
            return out
    for key in ("kvlistValue", "kvlist_value"):
        v = value.get(key)
        if v is not None:
            return decode_attributes(
                at.mapping(v, f"{field}.{key}").get("values"), at, f"{field}.{key}.values", depth + 1
            )
    for key in ("bytesValue", "bytes_value"):
        v = value.get(key)
        if v is not None:
            return at.base64(v, f"{field}.{key}")
    return None


def decode_attributes(
    items: Any, where: Where | None = None, field: str = "attributes", depth: int = 0
) -> dict[str, Any]:
    """An OTLP ``KeyValue`` list as a dict.

    Raises:
        TraceLoadError: ``items`` is not a list of ``{"key": str, "value": AnyValue}`` objects.
    """
    at = where if where is not None else Where(None)
    if isinstance(items, Mapping):  # already a mapping (some backends)
        out = {}
        for key, value in items.items():
            out[at.text(key, f"{field} key")] = check_depth(value, at, f"{field}.{key}", MAX_VALUE_DEPTH - depth)
        return out
    out = {}
    for i, kv in at.mappings(items, field):
        key = at.text(kv.get("key"), f"{field}[{i}].key")
        out[key] = decode_value(kv.get("value"), at, f"{field}[{i}].value", depth)
    return out


def normalize_id(value: Any, size: int, *, source: object = None, line: int | None = None, field: str) -> str | None:
    """A trace id (``size`` 16) or span id (8) as lowercase hex, from hex or base64; None when empty."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and len(value) <= size * 2:
        if len(value) == size * 2 and HEX.fullmatch(value):
            return value.lower()
        try:
            raw = base64.b64decode(value, validate=True)
        except ValueError:
            raw = b""
        if len(raw) == size:
            return raw.hex()
        if HEX.fullmatch(value):  # 64-bit Jaeger/Zipkin ids, zero-padded
            return value.lower().rjust(size * 2, "0")
    raise TraceLoadError(
        f"{field} {describe(value)} is neither {size * 2} hex digits nor base64 of {size} bytes",
        source=source,
        line=line,
    )


def decode_kind(raw: Any, at: Where) -> int:
    """A span's ``kind`` (a number or an enum name) as its OTLP number; unknown kinds are 0 (unspecified)."""
    if isinstance(raw, str):
        return SPAN_KINDS.get(raw, 0)
    kind = at.integer(raw, "kind", low=-(2**31), high=2**31)
    return kind if 0 <= kind <= 5 else 0


def decode_status(raw: Any, at: Where) -> tuple[str, str]:
    """A span's ``status`` object as ``(status, message)``; unknown codes are ``"UNSET"``."""
    if not isinstance(raw, Mapping):
        return "UNSET", ""
    code = raw.get("code", 0)
    if isinstance(code, bool) or not isinstance(code, (int, str)):
        if code is not None:
            raise at.error("status.code", code, "a status code")
        code = 0
    return STATUS_NAMES.get(code, "UNSET"), at.scalar_text(raw.get("message"), "status.message")
