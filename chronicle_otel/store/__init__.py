"""Stores for spans and full payloads.

Usage::

    from chronicle_otel.store import LocalStore

    store = LocalStore()                     # $CHRONICLE_HOME or ./.chronicle
    latest = store.list_traces(limit=1)[0]
    print(latest.trace_id, latest.root_boundary, latest.status, latest.duration_ns / 1e6, "ms")
    for span in store.read_spans(latest.trace_id):
        print(span["name"], span["spanId"])
    store.get_payload("sha256:…")            # the whole payload a span attribute was cut from

API:
    :class:`LocalStore` — the embedded default store (OTLP/JSON span lines + SQLite index), reads and writes.
    :class:`StoreReader` — read-only access to a store (what loading uses); :func:`is_store` recognises one.
    :class:`PayloadStore` — the protocol any payload store implements.
    :class:`TraceSummary` — one row of :meth:`LocalStore.list_traces`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._internal.digest import payload_digest
from .reader import MANIFEST, STORE_FORMAT, StoreReader, TraceSummary, default_store_path, is_store

if TYPE_CHECKING:
    from ._local import LocalStore, TraceRecord

__all__ = [
    "MANIFEST",
    "STORE_FORMAT",
    "LocalStore",
    "PayloadStore",
    "StoreReader",
    "TraceRecord",
    "TraceSummary",
    "default_store_path",
    "is_store",
    "payload_digest",
]


@runtime_checkable
class PayloadStore(Protocol):
    """Content-addressed storage of full payloads, keyed by ``sha256:<hex>``."""

    def put_payload(self, digest: str, data: bytes) -> None:
        """Store ``data`` under ``digest``; storing the same digest twice is a no-op."""

    def get_payload(self, digest: str) -> bytes | None:
        """Return the bytes stored under ``digest``, or None."""


def __getattr__(name: str) -> Any:
    # The writing side loads on first use: reading a store (loading a trace) never imports it.
    if name in ("LocalStore", "TraceRecord"):
        value = getattr(importlib.import_module("._local", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
