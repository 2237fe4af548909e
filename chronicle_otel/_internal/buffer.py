"""The bounded hand-off of full payloads from the call path to the exporter thread.

A boundary call that truncated a payload on its span puts the whole bytes here, keyed by the span
id, just before the span ends; the exporter takes them when it exports that span. The buffer holds
at most ``max_bytes``: when full, the oldest entries are dropped (their spans keep the truncated
prefix and the hash, and the drop is logged once). Nothing here does I/O.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from .errors import warn_once

Payload = tuple[str, bytes]
"""A payload: ``(sha256:<hex>, canonical bytes)``."""

DEFAULT_MAX_BYTES = 256 * 1024 * 1024


class PayloadBuffer:
    """Thread-safe, size-bounded map of span id -> payloads waiting for export."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[int, list[Payload]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self.dropped = 0

    def put(self, span_id: int, payloads: list[Payload]) -> None:
        """Hand over the payloads of one span (called on the user's thread; O(1), no I/O)."""
        size = sum(len(data) for _, data in payloads)
        with self._lock:
            self._entries[span_id] = payloads
            self._size += size
            while self._size > self.max_bytes and self._entries:
                _, old = self._entries.popitem(last=False)
                self._size -= sum(len(data) for _, data in old)
                self.dropped += 1
                warn_once(
                    "payload-buffer-full",
                    "chronicle_otel: the payload buffer is full (%d bytes); the oldest pending payloads were "
                    "dropped and their spans keep only the truncated attribute. "
                    "Raise StoreOptions.buffer_bytes or export faster.",
                    self.max_bytes,
                )

    def take(self, span_id: int) -> list[Payload]:
        """Remove and return the payloads of ``span_id`` (empty when there are none)."""
        with self._lock:
            payloads = self._entries.pop(span_id, None)
            if payloads is None:
                return []
            self._size -= sum(len(data) for _, data in payloads)
            return payloads

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size(self) -> int:
        """Bytes currently held."""
        return self._size
