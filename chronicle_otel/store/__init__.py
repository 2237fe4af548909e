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
    :class:`LocalStore` — the embedded default store (OTLP/JSON span lines + SQLite index).
    :class:`PayloadStore` — the protocol any payload store implements.
    :class:`TraceSummary` — one row of :meth:`LocalStore.list_traces`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ._local import STORE_FORMAT, LocalStore, TraceSummary, default_store_path, payload_digest

__all__ = ["STORE_FORMAT", "LocalStore", "PayloadStore", "TraceSummary", "default_store_path", "payload_digest"]


@runtime_checkable
class PayloadStore(Protocol):
    """Content-addressed storage of full payloads, keyed by ``sha256:<hex>``."""

    def put_payload(self, digest: str, data: bytes) -> None:
        """Store ``data`` under ``digest``; storing the same digest twice is a no-op."""

    def get_payload(self, digest: str) -> bytes | None:
        """Return the bytes stored under ``digest``, or None."""
