"""Secrets a stream spells across its items (a key streamed a few characters per chunk), redacted."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import orjson

from ._json_text import json_text_edits, split_edits
from ._patterns import PatternRedactor
from ._protocol import KeyFilter, Redactor
from ._scanner import _splice

_STREAM_STRINGS: Final = 1 << 17
_STREAM_DEPTH: Final = 16

_Ref = tuple[Any, Any, int]
"""Where a string of an item is: its container, its key there, and the item's index in the stream."""


def redact_stream(data: bytes, redactor: Redactor) -> bytes:
    """A stream's items as canonical JSON (not yet scanned), with the secrets they spell together redacted.

    Such as a key streamed a few characters per chunk. The strings at one place of the items (the items
    themselves, or ``choices[0].delta.content`` of each chunk) are read as one text, in order; the part of each
    string inside a secret found there becomes :data:`REDACTED`. The built-in formats and names given with ``=``
    are looked for; the scan of the result finds the rest (and a user's own redactor sees strings one by one).

    JSON text streamed in pieces (a tool call's arguments, ``choices[0].delta.tool_calls[0].function.arguments``)
    is read whole too, per place and kind of item (a model's class and its ``type``: the argument deltas of a
    Responses stream apart from its text deltas): the value of a secret-named key becomes ``"[REDACTED]"`` in the
    item where it starts, and the rest of it is removed from the items that follow, so the pieces joined are the
    arguments redacted, and no piece keeps a part of the secret.
    """
    patterns = redactor if isinstance(redactor, PatternRedactor) else getattr(redactor, "first", None)
    if not isinstance(patterns, PatternRedactor):
        patterns = None
    try:
        tree = orjson.loads(data)
        if type(tree) is not list or len(tree) < 2:
            return data
        places: dict[tuple[Any, ...], list[_Ref]] = {}
        budget = [_STREAM_STRINGS]
        for index, item in enumerate(tree):
            if type(item) is str:  # the items themselves: one place
                places.setdefault((), []).append((tree, index, index))
            else:
                _strings_by_place(item, (), places, budget, 0, index)
        changed = False
        redact_key = patterns.key_predicate if patterns is redactor else redactor.redact_key  # a cached one if may
        kinds: list[Any] = []  # of each item, once a place may hold JSON text
        for refs in places.values():
            if len(refs) < 2:
                continue
            pieces = [container[key] for container, key, _ in refs]
            joined = "".join(pieces)
            if '"' in joined and ":" in joined:  # what a key needs
                kinds = kinds or _kinds(tree)
                if _redact_keys_across(refs, pieces, kinds, redact_key):
                    changed = True
                    pieces = [container[key] for container, key, _ in refs]
                    joined = "".join(pieces)
            if patterns is not None and _redact_across(refs, pieces, joined, patterns):
                changed = True
        return orjson.dumps(tree, option=orjson.OPT_SORT_KEYS) if changed else data
    except Exception:  # orjson refusing, a recursion bound: what each item's own scan left
        return data


def _kinds(items: list[Any]) -> list[tuple[Any, Any]]:
    """The kind of each stream item: its model class (a stream of models names it once) and its ``type``."""
    out: list[tuple[Any, Any]] = []
    model = None
    for item in items:
        if type(item) is not dict:
            out.append((None, None))
            model = None
            continue
        body = item
        if item.get("$type") == "pydantic":
            model = item.get("class", model)
            fields = item.get("fields")
            body = fields if type(fields) is dict else {}
        else:
            model = None
        kind = body.get("type")
        out.append((model, kind if type(kind) is str else None))
    return out


def _strings_by_place(
    node: Any, path: tuple[Any, ...], out: dict[tuple[Any, ...], list[_Ref]], budget: list[int], depth: int, item: int
) -> None:
    """Collect ``(container, key, item)`` of every string below ``node`` by its path (bounded in count and depth)."""
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
            out.setdefault((*path, key), []).append((node, key, item))
        elif type(value) is dict or type(value) is list:
            _strings_by_place(value, (*path, key), out, budget, depth + 1, item)


def _redact_keys_across(refs: list[_Ref], pieces: list[str], kinds: list[Any], redact_key: KeyFilter) -> bool:
    """Redact the secret-named keys of the JSON text the strings at ``refs`` spell, by kind of item; True when one
    was."""
    by_kind: dict[Any, list[int]] = {}
    for i, (_, _, item) in enumerate(refs):
        by_kind.setdefault(kinds[item], []).append(i)
    changed = False
    for members in by_kind.values():
        if len(members) < 2:  # one string: the scan of the whole payload reads it
            continue
        texts = [pieces[i] for i in members]
        edits = json_text_edits("".join(texts), redact_key)
        if edits:
            for i, piece in zip(members, split_edits(texts, edits), strict=True):
                container, key, _ = refs[i]
                container[key] = piece
            changed = True
    return changed


def _redact_across(refs: list[_Ref], pieces: list[str], joined: str, patterns: PatternRedactor) -> bool:
    """Redact the secrets of the strings at ``refs`` (``pieces``, ``joined``) read as one text; True when there was
    one."""
    spans = patterns._text_spans(joined)
    if not spans:
        return False
    bounds = []
    start = 0
    for piece in pieces:
        bounds.append((start, start + len(piece)))
        start += len(piece)
    for (container, key, _), (lo, hi) in zip(refs, bounds, strict=True):
        inside = [(max(a, lo) - lo, min(b, hi) - lo) for a, b in spans if a < hi and b > lo]
        if inside:
            container[key] = _splice(container[key], inside)
    return True
