"""Secrets by key name inside JSON text: a string holding a JSON object or array (an LLM tool call's arguments).

``'{"user": "bob", "password": "hunter2"}'`` is a string to the encoder, so redaction by key name (which walks
mappings) never sees its keys. Here such a string has the value of every secret-named key replaced by
``"[REDACTED]"``, in place: the rest of the text is kept as written, so valid JSON stays valid JSON of the same
shape. JSON text inside JSON text (a tool call's arguments inside a recorded message) is followed a few levels.

The reading is tolerant: JSON cut short (a stream's first items, a partial snapshot) or several JSON values one
after the other (the arguments of parallel tool calls, streamed into one field) are read as far as they go, and a
secret value the text ends in is redacted to the end.

Cost: a string is looked at only when its first non-space character is ``{`` or ``[``, and holds a quote and a
colon (two ``memchr``); it is then parsed (orjson) and its key names looked up in the key filter's cache (one set
operation per object), and only when one is secret (or a nested JSON text may hold one) is the text read token by
token. In a payload's canonical JSON, a string can hold JSON text with keys only when the payload holds an escaped
quote then a colon (``\\":``, spaces between): a payload without a backslash costs a ``memchr``, one with a backslash
one more search.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from json import decoder
from typing import Any, Final

import orjson

from ._protocol import REDACTED, KeyFilter

MAX_JSON_TEXT: Final = 1 << 20
"""The longest string (in characters) read as JSON text; a longer one is left to the value formats."""

_MAX_NESTING: Final = 4
"""How many levels of JSON text inside JSON text are followed."""

_REPLACEMENT: Final = f'"{REDACTED}"'
"""What a secret-named key's value becomes: the marker as a JSON string."""

JSON_HEADS: Final = frozenset("{[ \t\r\n")
"""The first characters of JSON text (an object or array, perhaps after spaces): a cheap look before a call."""

_SPACES: Final = frozenset(" \t\r\n")
_JSON_START = re.compile(r"[ \t\r\n]*[\[{]")

_KEY_NAME = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"[ \t\r\n]*:')
"""A key and its colon: what a secret name needs to be one (the quick look before a full read)."""

_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[{}\[\]:,]|[^ \t\r\n{}\[\]:,"]+')
"""One JSON token: a string (its closing quote missing at the end of cut text), punctuation, or a scalar."""

_INNER_KEY = re.compile(r'\\"[ \\nrt]*:')
"""In JSON text, what a key of JSON text inside one of its strings needs: an escaped quote, then spaces (escaped or
not: a class, not an alternation, is the faster search) and a colon."""

_scanstring: Callable[[str, int], tuple[str, int]] = decoder.scanstring  # type: ignore[attr-defined]  # no stub
"""The JSON string starting after a quote at an index: its value and the index after its closing quote (C code)."""

Edit = tuple[int, int, str]
"""``(start, end, replacement)`` of a part of a text."""


def is_json_text(text: str) -> bool:
    """True when ``text``'s first non-space character opens a JSON object or array (no parse: a cheap look)."""
    head = text[:1]
    if head == "{" or head == "[":
        return True
    return head in _SPACES and _JSON_START.match(text) is not None


def redact_json_text(text: str, redact_key: KeyFilter) -> str:
    """``text`` with the value of every key ``redact_key`` names a secret replaced by ``"[REDACTED]"``, when it is
    JSON text (an object or array, at most :data:`MAX_JSON_TEXT` characters); ``text`` itself otherwise or when no
    key is a secret.

    Only the values are replaced, whatever their type (a string, a number, an object): valid JSON stays valid, with
    the same keys in the same places. Never raises: a failing ``redact_key`` redacts.

    Example::

        redact_json_text('{"user": "bob", "password": "hunter2"}', key_filter())
        # '{"user": "bob", "password": "[REDACTED]"}'
    """
    return _redacted(text, redact_key, 0)


def json_text_edits(text: str, redact_key: KeyFilter) -> list[Edit]:
    """The edits :func:`redact_json_text` makes to ``text``, sorted and apart (empty when it makes none).

    For text that arrives in pieces (a streamed tool call's arguments): each edit covers one secret value, or one
    string holding JSON text that has one.
    """
    if len(text) > MAX_JSON_TEXT or not is_json_text(text):
        return []
    try:
        return _edits(text, redact_key, 0)
    except Exception:  # never expected (the reading is bounded and guarded): the whole text then
        return [(0, len(text), _REPLACEMENT)]


def redact_embedded(doc: str, redact_key: KeyFilter) -> str:
    """JSON text ``doc`` (a payload's canonical JSON) with every string of it that is JSON text redacted by key.

    ``doc`` itself when none changed; a string changed is written back as orjson writes a string. Mapping keys are
    strings too, as the value scan reads them.
    """
    return _embedded(doc, redact_key, 0)


def _redacted(text: str, redact_key: KeyFilter, depth: int) -> str:
    if len(text) > MAX_JSON_TEXT or not is_json_text(text):
        return text
    try:
        edits = _edits(text, redact_key, depth)
    except Exception:  # never expected (the reading is bounded and guarded): the whole text then
        return _REPLACEMENT
    return splice(text, edits) if edits else text


def _edits(text: str, redact_key: KeyFilter, depth: int) -> list[Edit]:
    """What to replace in JSON text ``text``: the values of secret keys, the nested JSON texts that hold some."""
    if '"' not in text or ":" not in text:  # no key (an array of numbers, "[REDACTED]"), nor nested JSON text
        return []
    nested = depth < _MAX_NESTING and "\\" in text and _INNER_KEY.search(text) is not None
    if not nested and not _names_a_secret(text, redact_key):
        return []
    return _read(text, redact_key, depth, nested)


def _names_a_secret(text: str, redact_key: KeyFilter) -> bool:
    """True when a key of ``text`` may name a secret: the keys of the parsed JSON, or (text that is not JSON as a
    whole: cut short, several values) every key-like string followed by a colon.

    The second way never misses a key either: a match starting inside a string or at a closing quote cannot swallow
    a real key's opening quote, which follows no backslash.
    """
    safe: set[str] | None = getattr(redact_key, "safe", None)  # a key_filter's names known not secret
    try:
        tree = orjson.loads(text)
    except orjson.JSONDecodeError:
        names = _KEY_NAME.findall(text)
        if not names or (safe is not None and safe.issuperset(names)):
            return False
        return any(_secret(name, redact_key) for name in set(names) if safe is None or name not in safe)
    todo: list[Any] = [tree]
    while todo:
        node = todo.pop()
        if type(node) is dict:
            if safe is None or not safe.issuperset(node):
                for name in node:
                    if (safe is None or name not in safe) and _named_secret(name, redact_key):
                        return True
            node = node.values()
        elif type(node) is not list:
            continue
        for value in node:
            if type(value) is dict or type(value) is list:
                todo.append(value)
    return False


def _named_secret(name: str, redact_key: KeyFilter) -> bool:
    try:
        return bool(redact_key(name))
    except Exception:  # a failing predicate redacts
        return True


def _secret(raw: str, redact_key: KeyFilter) -> bool:
    """Whether a key, as JSON writes it between its quotes, names a secret (a failing predicate: yes)."""
    name = raw
    if "\\" in raw:
        try:
            name = orjson.loads(f'"{raw}"')
        except orjson.JSONDecodeError:
            name = raw
    return _named_secret(name, redact_key)


def _read(text: str, redact_key: KeyFilter, depth: int, nested: bool) -> list[Edit]:
    """Read ``text`` token by token: the edits for secret values and, with ``nested``, for nested JSON texts."""
    edits: list[Edit] = []
    stack: list[bool] = []  # the open containers: True for an object
    want_key = False  # inside an object, before a key
    key_secret = False  # the key just read names a secret
    secret = False  # the next value is a secret's
    skip_from = -1  # where the secret container being passed over starts
    skip_depth = 0
    for m in _TOKEN.finditer(text):
        token = m.group()
        c = token[0]
        if skip_from >= 0:  # inside a secret object or array: only its end matters
            if c == "{" or c == "[":
                stack.append(c == "{")
            elif c == "}" or c == "]":
                if stack:
                    stack.pop()
                if len(stack) <= skip_depth:
                    edits.append((skip_from, m.end(), _REPLACEMENT))
                    skip_from = -1
            continue
        if c == "{" or c == "[":
            if secret:
                skip_from, skip_depth = m.start(), len(stack)
                secret = False
            stack.append(c == "{")
            want_key = c == "{"
        elif c == "}" or c == "]":
            if stack:
                stack.pop()
            want_key = secret = False
        elif c == ",":
            want_key = bool(stack) and stack[-1]
            secret = False
        elif c == ":":
            secret, key_secret, want_key = key_secret, False, False
        elif c == '"' and want_key and stack and stack[-1]:
            whole = len(token) > 1 and token.endswith('"') and not _escaped_end(token)
            key_secret = whole and _secret(token[1:-1], redact_key)
            want_key = False
        elif secret:
            edits.append((m.start(), m.end(), _REPLACEMENT))
            secret = False
        elif nested and c == '"' and "\\" in token:
            edit = _nested(token, m.start(), redact_key, depth + 1)
            if edit is not None:
                edits.append(edit)
    if skip_from >= 0:  # the text ends inside a secret value
        edits.append((skip_from, len(text), _REPLACEMENT))
    return edits


def _escaped_end(token: str) -> bool:
    """True when the last quote of a string token is escaped (the token was cut: ``"ab\\"``)."""
    run = len(token) - 1 - len(token[:-1].rstrip("\\"))
    return run % 2 == 1


def _nested(token: str, start: int, redact_key: KeyFilter, depth: int) -> Edit | None:
    """The edit of a string token holding JSON text with a secret: the token written again, redacted."""
    try:
        value = orjson.loads(token)
    except orjson.JSONDecodeError:  # cut short, or a lone surrogate
        return None
    if type(value) is not str:
        return None
    redacted = _redacted(value, redact_key, depth)
    if redacted is value:
        return None
    return (start, start + len(token), _written(redacted))


def _written(text: str) -> str:
    """``text`` as a JSON string, as orjson writes it (a lone surrogate, which it refuses: the marker)."""
    try:
        return orjson.dumps(text).decode()
    except orjson.JSONEncodeError:
        return _REPLACEMENT


def _embedded(doc: str, redact_key: KeyFilter, depth: int) -> str:
    if "\\" not in doc:  # a memchr: no string with a quote in it
        return doc
    m = _INNER_KEY.search(doc)  # the key of JSON text in a string: from it, back to the string's start
    if m is None:
        return doc
    out: list[str] = []
    last = end = 0
    while m is not None:
        start = _string_start(doc, m.start())
        if start < end:  # not inside a string after the last one read: not JSON
            break
        try:
            value, end = _scanstring(doc, start + 1)
        except ValueError:
            break
        redacted = _redacted(value, redact_key, depth)
        if redacted is not value:
            out.append(doc[last:start])
            out.append(_written(redacted))
            last = end
        m = _INNER_KEY.search(doc, end)
    if not out:
        return doc
    out.append(doc[last:])
    return "".join(out)


def _string_start(doc: str, pos: int) -> int:
    """Where the JSON string holding position ``pos`` of JSON text ``doc`` starts: the last unescaped quote before it
    (-1 when there is none)."""
    quote = doc.rfind('"', 0, pos)
    while quote > 0:
        before = quote
        while before > 0 and doc[before - 1] == "\\":
            before -= 1
        if (quote - before) % 2 == 0:
            return quote
        quote = doc.rfind('"', 0, before)
    return quote


def splice(text: str, edits: list[Edit]) -> str:
    """``text`` with the sorted, non-overlapping ``edits`` made."""
    out = []
    last = 0
    for start, end, replacement in edits:
        out.append(text[last:start])
        out.append(replacement)
        last = end
    out.append(text[last:])
    return "".join(out)


def split_edits(pieces: list[str], edits: list[Edit]) -> list[str]:
    """``pieces`` (one text, cut) with the ``edits`` of their joined text made piece by piece.

    An edit's replacement goes to the piece where it starts; what it covers in the following pieces is removed. The
    pieces joined are then the joined text edited: no piece keeps a part of what an edit replaced.
    """
    out: list[str] = []
    lo = 0
    for piece in pieces:
        hi = lo + len(piece)
        inside = [
            (max(a, lo) - lo, min(b, hi) - lo, replacement if lo <= a < hi else "")
            for a, b, replacement in edits
            if a < hi and b > lo
        ]
        out.append(splice(piece, inside) if inside else piece)
        lo = hi
    return out


def with_json_keys(redactor_text: Callable[[str], str], redact_key: KeyFilter) -> Callable[[str], str]:
    """``redactor_text`` after :func:`redact_json_text` with ``redact_key``: a user's redactor's text rule."""

    def redact(text: str) -> str:
        return redactor_text(_redacted(text, redact_key, 0))

    return redact
