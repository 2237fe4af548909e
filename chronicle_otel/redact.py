r"""Redaction: secrets are replaced by ``[REDACTED]`` before anything leaves the process.

Usage::

    import chronicle_otel as chronicle

    chronicle.configure(
        redaction=chronicle.RedactionOptions(
            keys=[r"(?i)iban"],                   # more key names (whole-name regular expressions)
            values=[r"\bACME-[0-9]{8}\b"],          # more secret value formats
        )
    )

What is redacted, by default:

- **By key name.** The value of an argument, mapping key, dataclass or pydantic field whose name is a
  secret (:data:`DEFAULT_KEY_PATTERNS`: ``password``, ``api_key``, ``client_secret``/``clientSecret``,
  ``access_token``, ``Authorization``, ``private_key_pem``, ``connection_string``…) is replaced whole,
  whatever its type. The name matches as a whole or by its last ``_``/``-``/``.``/camelCase segment, so
  ``openai_api_key`` is redacted and ``max_tokens``, ``author`` or ``monkey`` are kept.
- **By value format.** Every string of a payload (input, output, error), of an exception's message and
  stack trace, and of a session variable is scanned for well-known secret formats
  (:data:`DEFAULT_VALUE_PATTERNS`): OpenAI and Anthropic keys, AWS access key ids, GitHub and Slack
  tokens, Stripe and Google API keys, JWTs, ``Bearer``/``Basic`` credentials, PEM private keys and the
  password of a URL (``postgres://app:[REDACTED]@db``). Only the secret is replaced.
- **Values repeated in an error.** A value redacted by key from a call's arguments is also removed from
  the exception the call raises (``raise ValueError(f"bad password {password}")``).

Configuration: :class:`~chronicle_otel.RedactionOptions` (``keys``, ``defaults``, ``values``,
``value_defaults``, ``redactor``) and the environment variables ``CHRONICLE_REDACT_KEYS`` and
``CHRONICLE_REDACT_VALUES`` (extra regular expressions, comma separated; ``false`` turns value formats
off). ``configure(redaction=False)`` redacts nothing.

Your own rules: any object with ``redact_key(name) -> bool`` and ``redact_text(text) -> str`` is a
:class:`Redactor`; pass it as ``RedactionOptions(redactor=...)`` and it runs after the built-in patterns.
Its exceptions are logged once and swallowed, and what it was asked about is then redacted whole:
instrumentation never breaks the call.

Cost: key names are looked up in a cache (one dict lookup per key). Value formats are found in each
payload's canonical JSON, once: a format's scan runs only when a character every match holds occurs
(a ``memchr``), as a literal-prefix regex search, and replaces in place. About 1 µs per KB of payload
(up to ~2.5 µs for JSON dense in ``_`` keys and UUIDs); see ``benchmarks/overhead.py`` (``nostore_novalues``).

API:
    :class:`Redactor`, :class:`PatternRedactor`, :data:`REDACTED`, :data:`DEFAULT_KEY_PATTERNS`,
    :data:`DEFAULT_SECRET_PATTERN`, :data:`DEFAULT_VALUE_PATTERNS`, :func:`key_filter`, and for cleaning the
    text of an exception as boundaries record it, :func:`scrub_text` and :func:`error_secrets`.
"""

from __future__ import annotations

import base64
import binascii
import contextvars
import json
import re
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Final, Protocol, runtime_checkable

import orjson

from ._internal.errors import handle_internal_errors

__all__ = [
    "DEFAULT_KEY_PATTERNS",
    "DEFAULT_SECRET_PATTERN",
    "DEFAULT_VALUE_PATTERNS",
    "REDACTED",
    "KeyFilter",
    "PatternRedactor",
    "Redactor",
    "collect_secrets",
    "error_secrets",
    "key_filter",
    "redact_assignments",
    "redact_encoded",
    "redact_stream",
    "redact_tree",
    "resolve",
    "scrub_text",
]

REDACTED: Final = "[REDACTED]"
"""What a redacted value, or the secret part of a string, is replaced by."""

KeyFilter = Callable[[str], bool]
"""Predicate on a mapping key or argument name: True when its value must be redacted."""


@runtime_checkable
class Redactor(Protocol):
    """Decides what is secret. Implement it to plug your own rules in (``RedactionOptions(redactor=...)``).

    Both methods are called on the user's call path: keep them fast. An exception they raise is logged once
    and the key or text concerned is redacted whole.
    """

    def redact_key(self, name: str) -> bool:
        """True when the value under this argument name or mapping key must be replaced whole."""
        ...

    def redact_text(self, text: str) -> str:
        """Return ``text`` with every secret it contains replaced (by :data:`REDACTED`, or as you like)."""
        ...


# ------------------------------------------------------------------------------------------------ key names

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


# ------------------------------------------------------------------------------------------------ value formats


def _hyphenated_words(secret: str) -> bool:
    body = secret[3:]
    for sub in ("proj-", "svcacct-", "admin-"):
        if body.startswith(sub):
            body = body[len(sub) :]
            break
    return all(part.isalpha() and part.islower() and len(part) <= 12 for part in re.split(r"[-_]", body))


def _opaque_token(secret: str) -> bool:
    if len(secret) < 8:
        return False
    if len(secret) >= 20 or any(c.isdigit() for c in secret):
        return True
    return any(c.isupper() for c in secret[1:]) and any(c.islower() for c in secret)


def _basic_credentials(secret: str) -> bool:
    try:
        core = secret.rstrip("=")
        raw = base64.b64decode(core + "=" * (-len(core) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in raw and all(32 <= b < 127 for b in raw)


class _Format:
    """One built-in secret format, written as ``before`` + ``after``.

    ``before`` has a fixed width and ends with ``anchor``, a literal the scanner searches for (a regex
    that starts with a literal prefix runs at string-search speed); what precedes the anchor is checked
    behind it. ``gate`` is a part of every match (a character: a ``memchr``): when a text lacks it, the scan is
    skipped. ``boundary`` is a character class that must not precede the secret. A group named ``secret``
    in ``after`` narrows what is replaced; ``check`` rejects look-alikes.

    The scanner runs ``scan``, ``after`` with its runs bounded (``{20,}`` made ``{20,256}``): a look-alike it
    rejects costs at most the bound, not the rest of the text, so a text of many anchors ("task-task-…") is
    scanned in linear time. A secret found is extended by ``tail``, the run the bound cut. With ``skip``, a match
    that starts inside a secret found never ends after it (a run of token characters, a PEM block), so the scan
    goes on from the secret's last characters (where the next anchor may begin).
    """

    __slots__ = ("after", "anchor", "before", "boundary", "check", "gate", "name", "scan", "skip", "tail")

    def __init__(
        self,
        name: str,
        before: str,
        after: str,
        *,
        anchor: str,
        gate: str,
        boundary: str | None = None,
        check: Callable[[str], bool] | None = None,
        scan: str | None = None,
        tail: str | None = None,
        skip: bool = False,
    ) -> None:
        self.name = name
        self.before = before
        self.after = after
        self.anchor = anchor
        self.gate = gate
        self.boundary = boundary
        self.check = check
        self.scan = scan or after
        self.tail = re.compile(tail) if tail else None
        self.skip = skip

    @property
    def pattern(self) -> str:
        """The stand-alone regular expression."""
        lead = f"(?<!{self.boundary})" if self.boundary else ""
        return lead + self.before + self.after

    @property
    def back(self) -> int:
        """Characters of the secret before its anchor."""
        return len(re.sub(r"\[[^\]]*\]", "x", self.before)) - len(self.anchor)


_TOKEN = "[A-Za-z0-9_-]"
_WORD = "[A-Za-z0-9_]"
_PEM_LABEL = r"[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"

_RUN: Final = 256
"""How far the scanner reads a token before deciding (a longer secret is then extended by its ``tail``)."""

_FORMATS: tuple[_Format, ...] = (
    _Format(
        "openai_key",
        "sk-",
        rf"(?!ant-){_TOKEN}{{20,}}",
        anchor="k-",
        gate="-",
        boundary=_TOKEN,
        check=lambda s: not _hyphenated_words(s),
        scan=rf"(?!ant-){_TOKEN}{{20,{_RUN}}}",
        tail=f"{_TOKEN}*",
        skip=True,
    ),
    _Format(
        "anthropic_key",
        "sk-",
        rf"ant-{_TOKEN}{{20,}}",
        anchor="k-",
        gate="-",
        boundary=_TOKEN,
        scan=rf"ant-{_TOKEN}{{20,{_RUN}}}",
        tail=f"{_TOKEN}*",
        skip=True,
    ),
    _Format(
        "stripe_key",
        "[rs]k_",
        r"(?:live|test)_[A-Za-z0-9]{16,}",
        anchor="_",
        gate="_",
        boundary=_TOKEN,
        scan=rf"(?:live|test)_[A-Za-z0-9]{{16,{_RUN}}}",
        tail="[A-Za-z0-9]*",
        skip=True,
    ),
    _Format(
        "aws_access_key_id", "A", r"[KS]IA[A-Z0-9]{16}(?![A-Za-z0-9])", anchor="A", gate="A", boundary="[A-Za-z0-9]"
    ),
    _Format(
        "google_api_key",
        "A",
        rf"Iza{_TOKEN}{{20,}}",
        anchor="A",
        gate="A",
        boundary=_TOKEN,
        scan=rf"Iza{_TOKEN}{{20,{_RUN}}}",
        tail=f"{_TOKEN}*",
        skip=True,
    ),
    _Format(
        "github_token",
        "gh[pousr]_",
        r"[A-Za-z0-9]{20,}",
        anchor="_",
        gate="_",
        boundary=_TOKEN,
        scan=rf"[A-Za-z0-9]{{20,{_RUN}}}",
        tail="[A-Za-z0-9]*",
        skip=True,
    ),
    _Format(
        "github_pat",
        "github_pat_",
        r"[A-Za-z0-9_]{22,}",
        anchor="_",
        gate="_",
        boundary=_TOKEN,
        scan=rf"[A-Za-z0-9_]{{22,{_RUN}}}",
        tail="[A-Za-z0-9_]*",
        skip=True,
    ),
    _Format(
        "slack_token",
        "xox",
        r"[abprse]-[A-Za-z0-9-]{10,}",
        anchor="xox",
        gate="x",
        boundary=_TOKEN,
        scan=rf"[abprse]-[A-Za-z0-9-]{{10,{_RUN}}}",
        tail="[A-Za-z0-9-]*",
        skip=True,
    ),
    _Format(
        "jwt",
        "eyJ",
        rf"{_TOKEN}+\.eyJ{_TOKEN}+\.{_TOKEN}*",
        anchor="eyJ",
        gate=".eyJ",
        boundary=_TOKEN,
        scan=rf"{_TOKEN}{{1,4096}}\.eyJ{_TOKEN}+\.{_TOKEN}{{0,{_RUN}}}",
        tail=f"{_TOKEN}*",
    ),
    _Format(
        "bearer_token",
        "B",
        r"(?:earer|EARER)(?:[ \t]|\\+t)+(?P<secret>[A-Za-z0-9._~+/-]+=*)",
        anchor="B",
        gate="B",
        boundary=_WORD,
        check=_opaque_token,
        scan=rf"(?:earer|EARER)(?:[ \t]|\\{{1,8}}t){{1,64}}(?P<secret>[A-Za-z0-9._~+/-]{{1,{_RUN}}}={{0,2}})",
        tail="[A-Za-z0-9._~+/-]*=*",
    ),
    _Format(
        "basic_auth",
        "B",
        r"(?:asic|ASIC)(?:[ \t]|\\+t)+(?P<secret>[A-Za-z0-9+/]{6,}={0,2})",
        anchor="B",
        gate="B",
        boundary=_WORD,
        check=_basic_credentials,
        scan=rf"(?:asic|ASIC)(?:[ \t]|\\{{1,8}}t){{1,64}}(?P<secret>[A-Za-z0-9+/]{{6,{_RUN}}}={{0,2}})",
        tail="[A-Za-z0-9+/]*={0,2}",
    ),
    _Format(  # no bound: a match is always taken, and the scan goes on after it
        "private_key",
        "-----BEGIN",
        rf" ?{_PEM_LABEL}(?:[^\"]*?-----END {_PEM_LABEL}|[^\"]*)",
        anchor="-----BEGIN",
        gate="N",
        skip=True,
    ),
    _Format("url_password", "://", r"[^\s:@/?#\"\\]*:(?P<secret>[^\s@/?#\"\\]+)@", anchor="://", gate="@"),
)

DEFAULT_VALUE_PATTERNS: Final[Mapping[str, str]] = MappingProxyType({f.name: f.pattern for f in _FORMATS})
"""The built-in secret value formats, by name, as stand-alone regular expressions (``re.search`` finds the
secret in a text). Where a pattern has a group named ``secret``, only that group is replaced: the
``Bearer``/``Basic`` scheme and a URL's scheme, user and host are kept.

``openai_key`` (``sk-…``, ``sk-proj-…``), ``anthropic_key`` (``sk-ant-…``), ``stripe_key`` (``sk_live_…``,
``rk_live_…``, ``sk_test_…``), ``aws_access_key_id`` (``AKIA…``, ``ASIA…``), ``google_api_key``
(``AIza…``), ``github_token`` (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``), ``github_pat``
(``github_pat_…``), ``slack_token`` (``xoxb-…``…), ``jwt`` (``eyJ….eyJ….sig``), ``bearer_token``
(``Bearer <token>``), ``basic_auth`` (``Basic <base64 of user:password>``), ``private_key`` (a PEM
``-----BEGIN … PRIVATE KEY-----`` block, to its END line or to the end of the string) and
``url_password`` (``scheme://user:password@host``).

Tuned against ordinary text: besides these patterns, the scanner rejects look-alikes (hyphenated words
after ``sk-``, ``Bearer``/``Basic`` followed by a word rather than a token or ``user:password`` in base64);
UUIDs, hex digests and base64 data are kept. Next to a backslash escape (``\\n`` before a key), the escape
counts as a separator."""


_Entry = tuple[_Format, str | None, re.Pattern[str] | None]


class _Scanner:
    """Finds secrets in a text: one regex per anchor, each run only when its gate character occurs."""

    __slots__ = ("extra", "extra_names", "groups")

    def __init__(self, formats: Iterable[_Format], extra: Iterable[str]) -> None:
        by_anchor: dict[str, list[tuple[int, _Format]]] = {}
        for i, fmt in enumerate(formats):
            by_anchor.setdefault(fmt.anchor, []).append((i, fmt))
        self.groups: list[tuple[str, re.Pattern[str], dict[str, _Entry]]] = []
        for anchor, members in by_anchor.items():
            alternatives = []
            table: dict[str, _Entry] = {}
            for i, fmt in members:
                alt = f"(?<={fmt.before})" if fmt.before != anchor else ""
                group = f"s{i}" if "(?P<secret>" in fmt.scan else None
                alt += fmt.scan.replace("(?P<secret>", f"(?P<{group}>") + f"(?P<f{i}>)"
                alternatives.append(alt)
                table[f"f{i}"] = (fmt, group, re.compile(fmt.boundary) if fmt.boundary else None)
            regex = re.compile(re.escape(anchor) + "(?:" + "|".join(alternatives) + ")")
            self.groups.append((members[0][1].gate, regex, table))
        patterns = list(extra)
        self.extra_names: dict[str, str | None] = {}
        self.extra: re.Pattern[str] | None = None
        if patterns:
            parts = []
            for i, p in enumerate(patterns):
                group = f"u{i}" if "(?P<secret>" in p else None
                body = p.replace("(?P<secret>", f"(?P<{group}>").replace("(?P=secret)", f"(?P={group})")
                parts.append(f"(?:{body})(?P<x{i}>)")
                self.extra_names[f"x{i}"] = group
            self.extra = re.compile("|".join(parts))

    def spans(self, text: str, json: bool) -> list[tuple[int, int]] | None:
        """Sorted, merged ``(start, end)`` of the secrets in ``text``.

        With ``json``, ``text`` is canonical JSON; None means a match could not be replaced in place
        (it crosses a string's end or an escape sequence) and the caller must redact string by string.
        """
        found: list[tuple[int, int]] = []
        for gate, regex, table in self.groups:
            if gate not in text:
                continue
            tail_run: tuple[Any, int, int] = (None, 0, 0)  # the latest tail read: pattern, from, to
            m = regex.search(text)
            while m is not None:
                resume = m.start() + 1
                entry = table.get(m.lastgroup or "")
                if entry is not None:
                    fmt, group, boundary = entry
                    lead = m.start() - fmt.back
                    # the boundary is checked here, not in the regex: the "n" of an escaped newline before a
                    # secret is no letter
                    if (
                        boundary is None
                        or lead == 0
                        or boundary.match(text, lead - 1) is None
                        or _after_escape(text, lead)
                    ):
                        start, end = m.span(group) if group is not None else (lead, m.end())
                        if fmt.tail is not None and end - start >= _RUN:  # the rest of a run the bound may have cut
                            pattern, tail_from, tail_to = tail_run
                            if pattern is fmt.tail and tail_from <= end <= tail_to:
                                end = tail_to  # inside the run read for a match before: read once
                            else:
                                tail_run = (fmt.tail, end, fmt.tail.match(text, end).end())  # type: ignore[union-attr]
                                end = tail_run[2]
                        if fmt.check is None or fmt.check(text[start:end]):
                            found.append((start, end))
                            if fmt.skip:  # an anchor may still begin in the secret's last characters
                                resume = max(resume, end - len(fmt.anchor) + 1)
                # a look-alike: on by one character, not past the match, which may swallow the start of the next
                # secret ("Bearer <token>/Bearer <token>"); overlapping spans are merged below
                m = regex.search(text, resume)
        if self.extra is not None:
            for m in self.extra.finditer(text):
                group = self.extra_names.get(m.lastgroup or "")
                start, end = m.span(group) if group is not None else m.span()
                if end > start:
                    found.append((start, end))
        if not found:
            return found
        found.sort()
        merged = [found[0]]
        for start, end in found[1:]:
            last_start, last_end = merged[-1]
            if start <= last_end:
                merged[-1] = (last_start, max(last_end, end))
            else:
                merged.append((start, end))
        if json:
            for start, end in merged:
                if '"' in text[start:end] or _inside_escape(text, start) or _inside_escape(text, end):
                    return None
        return merged


def _after_escape(text: str, pos: int) -> bool:
    r"""True when the characters before ``pos`` are a backslash escape (``\n``, ``\t``, ``\u00e9``).

    Such a letter is no part of a word before a secret, whether the escape is JSON's own or text that
    holds escaped text (a JSON document inside a string).
    """
    if pos >= 2 and text[pos - 2] == "\\":
        return True
    return pos >= 6 and text[pos - 6] == "\\" and _UNICODE_ESCAPE_TAIL.fullmatch(text, pos - 5, pos) is not None


_UNICODE_ESCAPE_TAIL = re.compile(r"u[0-9A-Fa-f]{4}")


def _inside_escape(text: str, pos: int) -> bool:
    r"""True when ``pos`` falls strictly inside a JSON escape sequence (``\n``, ``\u001e``…)."""
    j = text.rfind("\\", max(0, pos - 6), pos)
    if j < 0:
        return False
    k = j
    while k > 0 and text[k - 1] == "\\":
        k -= 1
    if (j - k) % 2:  # an even run of backslashes: j ends an escaped backslash
        return False
    return pos < j + (6 if text[j + 1 : j + 2] == "u" else 2)


def _splice(text: str, spans: list[tuple[int, int]]) -> str:
    out = []
    last = 0
    for start, end in spans:
        out.append(text[last:start])
        out.append(REDACTED)
        last = end
    out.append(text[last:])
    return "".join(out)


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

        So is every value the text gives a secret name with ``=`` (``password=…``, ``?api_key=…``).
        """
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

        The fast path the codec takes: one scan of the whole document, replacing in place.
        """
        text = data.decode()
        changed = False
        if "$" in text and _BYTES_TAG in text:  # bytes values, which the text holds in base64
            scanned = _BYTES_VALUE.sub(self._redact_bytes, text)
            changed = scanned != text
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


# ------------------------------------------------------------------------------------------------ composition


class _SafeRedactor:
    """A user's :class:`Redactor`: its exceptions are logged once and what it was asked about is redacted."""

    __slots__ = ("_key_guard", "_text_guard", "inner")

    def __init__(self, inner: Redactor) -> None:
        self.inner = inner
        name = type(inner).__qualname__
        self._key_guard = handle_internal_errors("redacting key names with %s", name, external=True)
        self._text_guard = handle_internal_errors("redacting text with %s", name, external=True)

    def redact_key(self, name: str) -> bool:
        try:
            return bool(self.inner.redact_key(name))
        except Exception as exc:
            self._key_guard.absorb(exc)
            return True

    def redact_text(self, text: str) -> str:
        try:
            out = self.inner.redact_text(text)
            if not isinstance(out, str):
                raise TypeError(f"redact_text() returned {type(out).__name__}, not str")
            return out
        except Exception as exc:
            self._text_guard.absorb(exc)
            return REDACTED


class _ChainedRedactor:
    """The built-in patterns, then a user's redactor."""

    __slots__ = ("first", "then")

    def __init__(self, first: PatternRedactor, then: Redactor) -> None:
        self.first = first
        self.then = _SafeRedactor(then)

    def redact_key(self, name: str) -> bool:
        return self.first.redact_key(name) or self.then.redact_key(name)

    def redact_text(self, text: str) -> str:
        return self.then.redact_text(self.first.redact_text(text))

    def redact_json(self, data: bytes) -> bytes:
        return _redact_json_strings(self.first.redact_json(data), self.then.redact_text)


def _chain(patterns: PatternRedactor, user: Redactor | None) -> Redactor:
    """The redactor a configuration uses: the built-in patterns, then the user's own (guarded)."""
    if user is None:
        return patterns
    return _ChainedRedactor(patterns, user)


def scrub_text(redactor: Redactor | None, text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` without the given secret strings, then without the secret value formats ``redactor`` finds.

    This is how the message and stack trace of a boundary's exception are cleaned before they are recorded:
    ``secrets`` are the values redacted by key name from the call's input (see :func:`error_secrets`), so
    ``raise ValueError(f"bad password {password}")`` records ``bad password [REDACTED]``.

    Args:
        redactor: the configuration's redactor, or None for no value formats.
        text: the text to clean.
        secrets: exact strings to replace by :data:`REDACTED`, wherever they occur. Longer ones go first, and all
            of them before ``redactor``: a redactor that rewrites only part of a secret must not hide it.

    Returns:
        ``text`` with every secret replaced.

    Example::

        scrub_text(PatternRedactor(), "login hunter22 failed", ["hunter22"])  # 'login [REDACTED] failed'
    """
    for secret in sorted(_escaped_forms(secrets), key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    if redactor is not None:
        # what the text gives a secret name (``password=…`` in a message, a dict's repr in args)
        text = redact_assignments(text, redactor.redact_key)
        text = redactor.redact_text(text)
    return text


def _escaped_forms(secrets: Iterable[str]) -> set[str]:
    """Each secret as written in error text: as is, inside ``repr()`` (``f"{value!r}"``) and inside JSON."""
    forms: set[str] = set()
    for secret in secrets:
        if not secret:
            continue
        forms.add(secret)
        forms.add(repr(secret)[1:-1])
        forms.add(json.dumps(secret)[1:-1])
        forms.add(json.dumps(secret, ensure_ascii=False)[1:-1])
    forms.discard("")
    return forms


# The strings scrubbed from recent errors, by exception: an exception leaving several boundaries (or wrapped by
# an outer one, ``raise ... from``) is scrubbed of what every boundary it passed through redacted from its input.
_ERROR_SECRETS: contextvars.ContextVar[tuple[tuple[int, type, tuple[str, ...]], ...]] = contextvars.ContextVar(
    "chronicle_error_secrets", default=()
)
_ERROR_SECRETS_MAX = 16


def error_secrets(exc: BaseException, own: Iterable[str]) -> list[str]:
    """The strings to scrub from ``exc``'s text: ``own`` plus those of the boundaries it already left.

    An exception raised in an inner boundary and leaving outer ones (or wrapped, ``raise ... from``) is
    scrubbed at every level of what each boundary redacted from its input. The result is remembered for
    ``exc`` (in a :mod:`contextvars` variable holding the last few exceptions), for the boundaries it
    leaves next. Costs nothing when no secret is known.

    Args:
        exc: the exception a boundary is recording.
        own: the values redacted by key name from this boundary's input (the ``secrets`` list
            :func:`chronicle_otel.codec.encode` fills).

    Returns:
        The strings to pass to :func:`scrub_text`.
    """
    secrets = list(own)
    recent = _ERROR_SECRETS.get()
    if recent:
        chain: set[tuple[int, type]] = set()
        link: BaseException | None = exc
        while link is not None and len(chain) < 8:
            chain.add((id(link), type(link)))
            link = link.__cause__ or link.__context__
        for ident, cls, known in recent:
            if (ident, cls) in chain:
                secrets.extend(known)
    if secrets:
        entry = (id(exc), type(exc), tuple(dict.fromkeys(secrets)))
        _ERROR_SECRETS.set((entry, *recent[: _ERROR_SECRETS_MAX - 1]))
    return secrets


_MIN_SECRET_LENGTH = 4
_MAX_SECRETS = 64


def _collect_secrets(value: Any, out: list[str], depth: int = 0) -> None:
    """Append the text forms of ``value`` (a value redacted by key) to ``out``, to scrub them from errors.

    Nested containers and objects are followed a few levels; strings shorter than four characters are
    not remembered (replacing them would shred any message). Never raises.
    """
    try:
        if len(out) >= _MAX_SECRETS:
            return
        t = type(value)
        if t is str:
            if len(value) >= _MIN_SECRET_LENGTH:
                out.append(value)
            return
        if t is bool or value is None:
            return
        if t is int or t is float:
            text = str(value)
            if len(text) >= _MIN_SECRET_LENGTH:
                out.append(text)
            return
        if t is bytes or t is bytearray:
            text = bytes(value).decode("utf-8", "replace")
            if len(text) >= _MIN_SECRET_LENGTH:
                out.append(text)
            return
        if isinstance(value, str):
            _collect_secrets(str.__str__(value), out, depth)
            return
        if depth >= 4:
            return
        if isinstance(value, Mapping):
            items: Iterable[Any] = list(value.values())[:_MAX_SECRETS]
        elif isinstance(value, (list, tuple, set, frozenset)):
            items = list(value)[:_MAX_SECRETS]
        else:
            fields = getattr(value, "__dict__", None)
            if not isinstance(fields, dict):
                return
            items = list(fields.values())[:_MAX_SECRETS]
        for item in items:
            _collect_secrets(item, out, depth + 1)
    except Exception:  # a hostile container: what was collected so far stays
        return


# ---------------------------------------------------------------------------------------------- for the codec


def resolve(redact: KeyFilter | Redactor) -> tuple[KeyFilter, Redactor | None]:
    """The key predicate and the value redactor (None: keys only) of a ``redact=`` argument of the codec.

    A user's own redactor or key predicate is wrapped so that its failures redact instead of raising: a failing
    rule is never a reason to record a secret, nor to break the call being recorded.
    """
    if isinstance(redact, (PatternRedactor, _SafeRedactor, _ChainedRedactor)):
        return redact.redact_key, redact
    if isinstance(redact, Redactor):
        safe = _SafeRedactor(redact)
        return safe.redact_key, safe
    return _guarded_key_filter(redact), None


def _guarded_key_filter(predicate: KeyFilter) -> KeyFilter:
    def redact_key(name: str) -> bool:
        try:
            return bool(predicate(name))
        except Exception:  # a failing predicate redacts
            return True

    return redact_key


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


def redact_tree(tree: Any, redactor: Redactor) -> Any:
    """JSON-native ``tree`` with every string (keys included) passed through ``redactor.redact_text``."""
    return _map_strings(tree, redactor.redact_text)


def redact_encoded(data: bytes, redactor: Redactor) -> bytes:
    """Canonical JSON ``data`` with the secret values ``redactor`` finds replaced, still canonical JSON."""
    fast = getattr(redactor, "redact_json", None)
    return fast(data) if fast is not None else _redact_json_strings(data, redactor.redact_text)


def collect_secrets(value: Any, out: list[str]) -> None:
    """Append to ``out`` the text forms of a value redacted by key name (bounded), for scrubbing error text."""
    _collect_secrets(value, out)
