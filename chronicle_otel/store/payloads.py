"""The payload store protocol, and the store a setting names (``s3://bucket/prefix`` or a store directory).

Loading imports this module, not the writing side of the local store.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from .reader import StoreReader

__all__ = ["PayloadSource", "PayloadStore", "open_payload_store"]


@runtime_checkable
class PayloadSource(Protocol):
    """Where whole payloads are read from by their address ``sha256:<hex>`` (what loading a trace needs)."""

    def get_payload(self, digest: str) -> bytes | None:
        """The bytes stored under ``digest``, verified against it; None when there are none."""
        ...

    def has_payload(self, digest: str) -> bool:
        """True when ``digest`` is stored."""
        ...


@runtime_checkable
class PayloadStore(PayloadSource, Protocol):
    """Content-addressed storage of full payloads, keyed by ``sha256:<hex>``: put many, get, has.

    Implementations: :class:`LocalStore` (the embedded default) and :class:`ObjectPayloadStore` (S3 API).
    A store may also offer ``get_payloads(digests) -> dict`` to fetch many at once; loading uses it when present.
    """

    def put_payloads(self, payloads: Iterable[tuple[str, bytes]]) -> Any:
        """Store ``(digest, data)`` pairs; a digest already stored is not written again."""
        ...


def open_payload_store(spec: str | os.PathLike[str]) -> PayloadStore | PayloadSource:
    """The payload store a setting names: ``s3://bucket[/prefix]`` (object storage), else a store directory.

    A directory opens read-only (a :class:`StoreReader`; one that holds no store has no payloads); use
    :class:`LocalStore` to write.

    Raises:
        ConfigError: an ``s3://`` URL is malformed, or the ``s3`` extra is not installed.
    """
    text = os.fspath(spec)
    if isinstance(text, str) and "://" in text:
        from ._object import ObjectPayloadStore

        return ObjectPayloadStore(text)
    return StoreReader(text)
