"""Recordings of earlier versions compared with values encoded now.

The encoding of pydantic models changed (the fields that were set, nested models of their annotation's class, a run
of one class named once): :func:`upgrade_encoding` writes an earlier recording as this version would, and
:func:`same_encoding` says whether a recording and an encoding made now hold the same value.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from ..errors import CodecError
from ._classes import _is_pydantic, _qualname, find_loaded_class
from ._decode import _short
from ._format import MAX_DECODE_DEPTH, TAG, _canonical
from ._models import _inline, _model_slots, _siblings, _Slot


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
