"""A redactor applied to JSON: every string of a JSON-native tree, or of canonical JSON bytes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from ._json_text import with_json_keys
from ._protocol import Redactor


def _map_strings(node: Any, fn: Callable[[str], str]) -> Any:
    """``node`` (JSON-native data) with ``fn`` applied to every string, mapping keys included."""
    if type(node) is str:
        return fn(node)
    if type(node) is list:
        return [_map_strings(x, fn) for x in node]
    if type(node) is dict:
        return {fn(k): _map_strings(v, fn) for k, v in node.items()}
    return node


def _redact_json_strings(data: bytes, fn: Callable[[str], str]) -> bytes:
    """Canonical JSON ``data`` with ``fn`` applied to every string in it, re-encoded canonically."""
    return orjson.dumps(_map_strings(orjson.loads(data), fn), option=orjson.OPT_SORT_KEYS)


def _text_rule(redactor: Redactor) -> Callable[[str], str]:
    """What a string of a payload goes through: ``redactor.redact_text``, after the keys of JSON text are redacted
    with ``redactor.redact_key`` when the redactor does not do it itself (a user's own)."""
    if getattr(redactor, "redact_json", None) is not None:  # the built-in ones: their redact_text does it
        return redactor.redact_text
    return with_json_keys(redactor.redact_text, redactor.redact_key)


def redact_tree(tree: Any, redactor: Redactor) -> Any:
    """JSON-native ``tree`` with every string (keys included) passed through ``redactor.redact_text``.

    A string that is JSON text first has the values of the keys ``redactor.redact_key`` names replaced.
    """
    return _map_strings(tree, _text_rule(redactor))


def redact_encoded(data: bytes, redactor: Redactor) -> bytes:
    """Canonical JSON ``data`` with the secret values ``redactor`` finds replaced, still canonical JSON.

    A string that is JSON text first has the values of the keys ``redactor.redact_key`` names replaced.
    """
    fast = getattr(redactor, "redact_json", None)
    return fast(data) if fast is not None else _redact_json_strings(data, _text_rule(redactor))
