"""The built-in secret value formats (API keys, tokens, credentials, private keys, URL passwords).

Each format is written for the scanner (a literal anchor, a gate character, bounded runs) and checks that reject
look-alikes; :data:`DEFAULT_VALUE_PATTERNS` gives them as stand-alone regular expressions.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Final


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
