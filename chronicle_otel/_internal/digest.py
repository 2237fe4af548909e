"""The one content address of a payload: ``sha256:<hex>`` of its canonical bytes."""

from __future__ import annotations

import hashlib
from typing import Final

PREFIX: Final = "sha256:"


def payload_digest(data: bytes) -> str:
    """The store address of ``data``: ``sha256:<hex>``."""
    return PREFIX + hashlib.sha256(data).hexdigest()


def text_digest(text: str) -> str:
    """The address of a payload held as text (lone surrogates from a hostile trace are hashed, not refused)."""
    return payload_digest(text.encode("utf-8", "surrogatepass"))
