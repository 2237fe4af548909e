"""The scanner: where the secret value formats occur in a text, plain or canonical JSON, and their replacement."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ._formats import _RUN, _Format
from ._protocol import REDACTED

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
