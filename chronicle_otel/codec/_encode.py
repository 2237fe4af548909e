"""Canonical bytes of a value: JSON natives straight through orjson, the rest walked; then redacted.

Redaction by key name happens during the walk; the scan for secret values runs on the bytes, once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from ..redact import KeyFilter, PatternRedactor, Redactor, redact_encoded, redact_tree, resolve
from ._format import _INT64_MIN, _UINT64_MAX, MAX_DEPTH, TAG, _canonical
from ._walk import _unencodable, _Walker


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
