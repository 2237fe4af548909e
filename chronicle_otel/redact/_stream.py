"""Secrets a stream spells across its items (a key streamed a few characters per chunk), redacted."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import orjson

from ._patterns import PatternRedactor
from ._protocol import Redactor
from ._scanner import _splice

_STREAM_STRINGS: Final = 1 << 17
_STREAM_DEPTH: Final = 16


def redact_stream(data: bytes, redactor: Redactor) -> bytes:
    """A stream's items as canonical JSON (not yet scanned), with the secrets they spell together redacted.

    Such as a key streamed a few characters per chunk. The strings at one place of the items (the items
    themselves, or ``choices[0].delta.content`` of each chunk) are read as one text, in order; the part of each
    string inside a secret found there becomes :data:`REDACTED`. The built-in formats and names given with ``=``
    are looked for; the scan of the result finds the rest (and a user's own redactor sees strings one by one).
    """
    patterns = redactor if isinstance(redactor, PatternRedactor) else getattr(redactor, "first", None)
    if not isinstance(patterns, PatternRedactor):
        return data
    try:
        tree = orjson.loads(data)
        if type(tree) is not list or len(tree) < 2:
            return data
        places: dict[tuple[Any, ...], list[tuple[Any, Any]]] = {}
        budget = [_STREAM_STRINGS]
        for index, item in enumerate(tree):
            if type(item) is str:  # the items themselves: one place
                places.setdefault((), []).append((tree, index))
            else:
                _strings_by_place(item, (), places, budget, 0)
        changed = False
        for refs in places.values():
            if len(refs) > 1 and _redact_across(refs, patterns):
                changed = True
        return orjson.dumps(tree, option=orjson.OPT_SORT_KEYS) if changed else data
    except Exception:  # orjson refusing, a recursion bound: what each item's own scan left
        return data


def _strings_by_place(
    node: Any, path: tuple[Any, ...], out: dict[tuple[Any, ...], list[tuple[Any, Any]]], budget: list[int], depth: int
) -> None:
    """Collect ``(container, key)`` of every string below ``node`` by its path (bounded in count and depth)."""
    if depth > _STREAM_DEPTH or budget[0] <= 0:
        return
    if type(node) is dict:
        items: Iterable[tuple[Any, Any]] = node.items()
    elif type(node) is list:
        items = enumerate(node)
    else:
        return
    for key, value in items:
        if type(value) is str:
            budget[0] -= 1
            out.setdefault((*path, key), []).append((node, key))
        elif type(value) is dict or type(value) is list:
            _strings_by_place(value, (*path, key), out, budget, depth + 1)


def _redact_across(refs: list[tuple[Any, Any]], patterns: PatternRedactor) -> bool:
    """Redact the secrets of the strings at ``refs`` read as one text; True when there was one."""
    pieces = [container[key] for container, key in refs]
    joined = "".join(pieces)
    spans = patterns._text_spans(joined)
    if not spans:
        return False
    bounds = []
    start = 0
    for piece in pieces:
        bounds.append((start, start + len(piece)))
        start += len(piece)
    for (container, key), (lo, hi) in zip(refs, bounds, strict=True):
        inside = [(max(a, lo) - lo, min(b, hi) - lo) for a, b in spans if a < hi and b > lo]
        if inside:
            container[key] = _splice(container[key], inside)
    return True
