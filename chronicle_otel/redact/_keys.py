"""Secrets by key name: the default names, the cached key predicate, and the values text gives a secret name."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from ._protocol import REDACTED, KeyFilter

DEFAULT_KEY_PATTERNS: Final[tuple[str, ...]] = (
    r"pass(?:word|wd|phrase)?s?",
    r"pwd",
    r"secrets?(?:[_-]?key)?",
    r"secret[_-]?access[_-]?key",
    r"api[_-]?keys?",
    r"(?:access|refresh|id|auth|bearer|session|csrf|xsrf|api)?[_-]?token",
    r"bearer",
    r"auth(?:orization)?",
    r"credentials?",
    r"(?:private|signing|encryption|master|stripe|secret)[_-]?key(?:[_-]?(?:pem|der|b64|base64|hex|bytes|data))?",
    r"(?:auth|access|account|subscription|client|app|shared)[_-]?key",
    r"(?:set[_-]?)?cookie",
    r"session[_-]?id",
    r"jwt",
    r"ssn",
    r"(?:credit[_-]?)?card[_-]?number",
    r"cvv2?",
    r"cvc",
    r"conn(?:ection)?[_-]?str(?:ing)?",
    r"dsn",
)
"""Secret names, matched case-insensitively against a whole key or argument name or its last segment
(after ``_``, ``-``, ``.``, a space, or a camelCase boundary, an acronym's end included): ``password``,
``db_password``, ``DBPassword``, ``apiKey``, ``OpenAIApiKey``, ``X-Api-Key``, ``X-Auth-Key``, ``client_secret``,
``clientSecret``, ``JWTSecret``, ``aws_secret_access_key``, ``access_token``, ``Authorization``, ``bearer``,
``private_key_pem``, ``signing_key``, ``stripe_key``, ``AccountKey``, ``Ocp-Apim-Subscription-Key``, ``Cookie``,
``connection_string``… but not ``max_tokens``, ``input_tokens``, ``token_count``, ``author``,
``keyboard``, ``monkey`` or ``passage``."""

_LAST_SEGMENT = r"(?:.*[_.\-\s]|.*(?-i:[a-z0-9](?=[A-Z]))|.*(?-i:[A-Z](?=[A-Z][a-z])))?"

DEFAULT_SECRET_PATTERN: Final = r"(?i)" + _LAST_SEGMENT + r"(?:" + "|".join(DEFAULT_KEY_PATTERNS) + r")"
""":data:`DEFAULT_KEY_PATTERNS` as one regular expression for :func:`key_filter` (a full match is a secret)."""


def key_filter(patterns: Iterable[str] = (DEFAULT_SECRET_PATTERN,)) -> KeyFilter:
    """Build a cached predicate that is True for key names fully matching any of ``patterns``.

    Raises:
        re.error: a pattern is not a valid regular expression.
    """
    regexes = [re.compile(p) for p in patterns]
    cache: dict[str, bool] = {}
    safe: set[str] = set()

    def matches(key: str) -> bool:
        hit = cache.get(key)
        if hit is None:
            hit = any(r.fullmatch(key) is not None for r in regexes)
            if len(cache) < 10_000:
                cache[key] = hit
                if not hit and type(key) is str:
                    safe.add(key)
        return hit

    matches.known = cache  # type: ignore[attr-defined]  # the answers so far: the codec reads them inline
    matches.safe = safe  # type: ignore[attr-defined]  # the keys found not secret, as a set (checked in one step)
    return matches


_NAME_GIVEN = re.compile(r"""(?P<q>['"]?)(?P<key>[A-Za-z_][\w.\-]{0,63})(?P=q)[ \t]*[:=][ \t]*""")
_GIVEN_VALUE = re.compile(r"""'(?:[^'\\\n]|\\.){0,4096}'|"(?:[^"\\\n]|\\.){0,4096}"|[^\s,;&)}\]>'"]{1,4096}""")
_MAX_ASSIGNMENT_TEXT: Final = 1 << 16


def redact_assignments(text: str, redact_key: KeyFilter) -> str:
    """``text`` with every value it gives a secret name (``redact_key``) replaced by :data:`REDACTED`.

    The forms: ``password='…'`` (a repr), ``'api_key': '…'`` (a dict's repr), ``token=…`` (a query or connection
    string), ``X-Auth-Key: …`` (a header).

    For text that stands for structured data the encoder could not walk (a ``repr``, an exception's message):
    there, key names are the only hint left. Text longer than 64 KiB is left to the value formats. Never raises:
    a failing predicate redacts.

    Example::

        redact_assignments("Namespace(db_password='hunter22', user='ann')", key_filter())
        # "Namespace(db_password=[REDACTED], user='ann')"
    """
    if len(text) > _MAX_ASSIGNMENT_TEXT or ("=" not in text and ":" not in text):
        return text
    try:
        out: list[str] = []
        last = pos = 0
        while True:
            m = _NAME_GIVEN.search(text, pos)
            if m is None:
                break
            pos = m.end()
            try:
                secret = bool(redact_key(m.group("key")))
            except Exception:
                secret = True
            if not secret:
                continue
            value = _GIVEN_VALUE.match(text, pos)
            if value is None:
                continue
            out.append(text[last:pos])
            out.append(REDACTED)
            last = pos = value.end()
        if not out:
            return text
        out.append(text[last:])
        return "".join(out)
    except Exception:  # a hostile str subclass
        return text
