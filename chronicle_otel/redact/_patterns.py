"""The built-in :class:`Redactor`: secret key names and secret value formats, one scan of a payload's JSON."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from typing import Final

from ._formats import _FORMATS, DEFAULT_VALUE_PATTERNS
from ._json import _redact_json_strings
from ._json_text import JSON_HEADS, redact_embedded, redact_json_text
from ._keys import DEFAULT_SECRET_PATTERN, key_filter
from ._protocol import KeyFilter
from ._scanner import _inside_escape, _Scanner, _splice

_NAME_BEFORE = re.compile(r"(?P<key>[A-Za-z_][\w.\-]{0,63})[ \t]*$")
_NAME_START = re.compile(r"[A-Za-z_]")
_VALUE_AFTER = re.compile(r"""[ \t]*(?P<value>[^\s,;&)}\]>'"\\=][^\s,;&)}\]>'"\\]{0,4095})""")
"""The value after ``=``: up to a separator, a quote or a backslash (so, in JSON, within its string); never starting
with ``=`` (base64 padding: ``…Pwd==`` is no assignment)."""


def _merged(spans: list[tuple[int, int]], more: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Two lists of secret spans as one, sorted, overlaps merged."""
    if not more:
        return spans
    out: list[tuple[int, int]] = []
    for start, end in sorted([*spans, *more]):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


_BYTES_TAG: Final = '"$type":"bytes"'
_BYTES_VALUE = re.compile(r'"\$type":"bytes","b64":"(?P<b64>[A-Za-z0-9+/]*={0,2})"')
"""A bytes value as the codec writes it (canonical: sorted keys, no spaces)."""


class PatternRedactor:
    """The built-in :class:`Redactor`: secret key names and secret value formats.

    Args:
        keys: regular expressions a secret key or argument name fully matches. Default: the built-in names.
        values: extra regular expressions for secret values, searched in every string; a group named
            ``secret`` narrows the replacement to that group. Patterns are combined into one alternation:
            refer to groups by name, not number.
        formats: names of the built-in value formats to look for (keys of :data:`DEFAULT_VALUE_PATTERNS`).
            Default: all of them.

    Raises:
        ValueError: an unknown format name, an invalid regular expression, or a value pattern that matches
            the empty string.

    Example::

        r = PatternRedactor(values=[r"ACME-[0-9]{8}"])
        r.redact_key("db_password")                      # True
        r.redact_text("key sk-proj-4f9Qm2xT7vLp8RzK3nWb")  # 'key [REDACTED]'
    """

    __slots__ = ("_scanner", "formats", "key_predicate", "values")

    def __init__(
        self,
        *,
        keys: Iterable[str] = (DEFAULT_SECRET_PATTERN,),
        values: Iterable[str] = (),
        formats: Iterable[str] = tuple(DEFAULT_VALUE_PATTERNS),
    ) -> None:
        chosen = tuple(formats)
        known = {f.name: f for f in _FORMATS}
        unknown = [name for name in chosen if name not in known]
        if unknown:
            raise ValueError(f"unknown value formats {unknown}; valid: {', '.join(known)}")
        self.values = tuple(values)
        for p in self.values:
            try:
                compiled = re.compile(p)
            except re.error as exc:
                raise ValueError(f"invalid value pattern {p!r}: {exc}") from None
            if compiled.search("") is not None:
                raise ValueError(f"value pattern {p!r} matches the empty string")
        self.formats = chosen
        self.key_predicate: KeyFilter = key_filter(keys)
        """The cached key-name predicate (what :meth:`redact_key` asks)."""
        self._scanner = _Scanner([f for f in _FORMATS if f.name in chosen], self.values)

    def redact_key(self, name: str) -> bool:
        """True when ``name`` fully matches a key pattern."""
        return self.key_predicate(name)

    def redact_text(self, text: str) -> str:
        """``text`` with every secret value format replaced by :data:`REDACTED`.

        So is every value the text gives a secret name with ``=`` (``password=…``, ``?api_key=…``) and, when the text
        is JSON text (``'{"user": "bob", "password": "hunter2"}'``), the value of every secret-named key, which
        becomes ``"[REDACTED]"`` (the JSON stays valid).
        """
        return self._redact_text(text, self.key_predicate)

    def _redact_text(self, text: str, redact_key: KeyFilter) -> str:
        """:meth:`redact_text`, the keys of JSON text judged by ``redact_key``."""
        if text[:1] in JSON_HEADS:
            text = redact_json_text(text, redact_key)
        spans = self._text_spans(text)
        return _splice(text, spans) if spans else text

    def _text_spans(self, text: str) -> list[tuple[int, int]]:
        """Sorted, merged spans of the secrets in plain ``text``: value formats and values given a secret name."""
        spans = self._scanner.spans(text, False) or []
        return _merged(spans, self._given_by_name(text)) if "=" in text else spans

    def _given_by_name(self, text: str, json: bool = False) -> list[tuple[int, int]]:
        r"""Where ``text`` gives a secret name a value with ``=`` (a query, connection or command-line string).

        Each ``=`` is looked at (``memchr``), then the name before it: text without one costs a single search. With
        ``json``, ``text`` is JSON, whose escapes (``\n`` before a name) are no part of the name; in plain text a
        backslash is a character like another, as the JSON of that text reads it.
        """
        found: list[tuple[int, int]] = []
        redact_key = self.key_predicate
        at = text.find("=")
        while at >= 0 and len(found) < 1024:
            name = _NAME_BEFORE.search(text, max(0, at - 72), at)
            key = name.group("key") if name is not None else ""
            if json and key and name is not None and _inside_escape(text, name.start("key")):
                # the letter of an escape (``\npassword=`` in JSON) is no part of the name, nor what cannot start one
                # (``\néBearer=`` is ``Bearer``, as the text itself reads)
                start = _NAME_START.search(key, 1)
                key = key[start.start() :] if start is not None else ""
            if key and redact_key(key):
                value = _VALUE_AFTER.match(text, at + 1)
                if value is not None:
                    found.append(value.span("value"))
                    at = value.end() - 1
            at = text.find("=", at + 1)
        return found

    def redact_json(self, data: bytes) -> bytes:
        """Canonical JSON ``data`` with every secret in its strings replaced; ``data`` itself when there is none.

        The fast path the codec takes: one scan of the whole document, replacing in place. A string of it that is
        JSON text has the values of its secret-named keys replaced first (see :meth:`redact_text`).
        """
        return self._redact_json(data, self.key_predicate)

    def _redact_json(self, data: bytes, redact_key: KeyFilter) -> bytes:
        """:meth:`redact_json`, the keys of JSON text in its strings judged by ``redact_key``."""
        text = data.decode()
        keyed = redact_embedded(text, redact_key)
        changed = keyed is not text
        text = keyed
        if "$" in text and _BYTES_TAG in text:  # bytes values, which the text holds in base64
            scanned = _BYTES_VALUE.sub(self._redact_bytes, text)
            changed = changed or scanned != text
            text = scanned
        spans = self._scanner.spans(text, True)
        if spans is None:
            return _redact_json_strings(text.encode() if changed else data, self.redact_text)
        if "=" in text:  # its values stop at a quote or a backslash: a span stays inside its JSON string
            spans = _merged(spans, self._given_by_name(text, json=True))
        if spans:
            return _splice(text, spans).encode()
        return text.encode() if changed else data

    def _redact_bytes(self, m: re.Match[str]) -> str:
        """A bytes value's tag with the secrets in its bytes redacted.

        The bytes are read as Latin-1: one character per byte, and the ASCII of every secret format as it is.
        """
        try:
            raw = base64.b64decode(m.group("b64"), validate=True)
        except (binascii.Error, ValueError):
            return m.group(0)
        decoded = raw.decode("latin-1")
        spans = self._scanner.spans(decoded, False)
        if not spans:
            return m.group(0)
        redacted = base64.b64encode(_splice(decoded, spans).encode("latin-1")).decode("ascii")
        return f'{m.group(0)[: m.start("b64") - m.start()]}{redacted}"'
