"""A redactor applied to JSON: every string of a JSON-native tree, or of canonical JSON bytes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

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


def redact_tree(tree: Any, redactor: Redactor) -> Any:
    """JSON-native ``tree`` with every string (keys included) passed through ``redactor.redact_text``."""
    return _map_strings(tree, redactor.redact_text)


def redact_encoded(data: bytes, redactor: Redactor) -> bytes:
    """Canonical JSON ``data`` with the secret values ``redactor`` finds replaced, still canonical JSON."""
    fast = getattr(redactor, "redact_json", None)
    return fast(data) if fast is not None else _redact_json_strings(data, redactor.redact_text)
