"""What a redactor is: the :class:`Redactor` protocol, the key predicate, and what a secret becomes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol, runtime_checkable

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
