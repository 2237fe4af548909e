"""Trace ids as people type them: 32 hex digits, or a unique prefix of at least :data:`MIN_PREFIX` of them."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from ..errors import TraceLoadError, TraceNotFoundError

MIN_PREFIX: Final = 4
"""Fewest hex digits a trace id prefix may have."""

FORMS: Final = (
    f"32 hex digits, a unique prefix of at least {MIN_PREFIX} of them (17b55ba4), 'latest', 'latest-failed' or "
    "'latest-error'"
)
"""The forms a trace id may be given in, for messages."""

_FULL = re.compile(r"[0-9a-fA-F]{32}\Z")
_PREFIX = re.compile(rf"[0-9a-fA-F]{{{MIN_PREFIX},31}}\Z")


def is_full(text: str) -> bool:
    """True when ``text`` is a whole trace id (32 hex digits, any case)."""
    return bool(_FULL.match(text.strip()))


def is_prefix(text: str) -> bool:
    """True when ``text`` is a prefix of a trace id (from :data:`MIN_PREFIX` to 31 hex digits, any case)."""
    return bool(_PREFIX.match(text.strip()))


def pick(prefix: str, matches: Iterable[str], *, source: object = None, more: bool = False) -> str:
    """The one trace id of ``matches`` that starts with ``prefix``.

    Args:
        prefix: the hex digits given.
        matches: the trace ids that start with it (a few are enough: two already make it ambiguous).
        source: where they were looked for, for messages.
        more: ``matches`` was cut short (the message then says "at least").

    Raises:
        TraceNotFoundError: no trace id starts with ``prefix``.
        TraceLoadError: several do; the message lists them.
    """
    wanted = prefix.strip().lower()
    found = sorted({m for m in matches if m.startswith(wanted)})
    if not found:
        raise TraceNotFoundError(prefix, source=source)
    if len(found) > 1:
        count = f"at least {len(found)}" if more else str(len(found))
        listing = ", ".join(found[:10]) + (", …" if len(found) > 10 or more else "")
        raise TraceLoadError(
            f"the trace id prefix {wanted} is ambiguous: {count} traces start with it ({listing}); give more digits",
            source=source,
        )
    return found[0]
