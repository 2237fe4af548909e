"""Where the encoding of a pydantic model leaves its class out, and how a reader finds it again.

A field whose annotation names one model class holds that model as its fields alone (:func:`_model_slots`, read from
the class, never from data); in a list, a model of the class of the model before it leaves its class out (a stream of
chunks names it once: :func:`join_encoded`, :func:`with_classes`). The encoder, the decoder and the comparison with
earlier recordings read the same answers.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterable, Mapping, MutableSequence, Sequence
from typing import Any, Final

from ._classes import _is_pydantic
from ._format import TAG, _canonical


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
