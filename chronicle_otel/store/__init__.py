"""Stores for spans and full payloads.

Usage::

    from chronicle_otel.store import LocalStore

    store = LocalStore()                     # $CHRONICLE_HOME or ./.chronicle
    latest = store.list_traces(limit=1)[0]
    print(latest.trace_id, latest.root_boundary, latest.status, latest.duration_ns / 1e6, "ms")
    for span in store.read_spans(latest.trace_id):
        print(span["name"], span["spanId"])
    store.get_payload("sha256:…")            # the whole payload a span attribute was cut from

    from chronicle_otel.store import ObjectPayloadStore

    shared = ObjectPayloadStore("s3://agent-payloads/prod")   # endpoint and credentials: the AWS_* variables
    shared.get_payload("sha256:…")

API:
    :class:`LocalStore` — the embedded default store (OTLP/JSON span lines + SQLite index), reads and writes.
    :class:`StoreReader` — read-only access to a store (what loading uses); :func:`is_store` recognises one.
    :class:`PayloadStore` — the protocol any payload store implements (put many, get, has).
    :class:`PayloadSource` — its reading half, all that loading a trace needs.
    :class:`ObjectPayloadStore` — payloads in object storage over the S3 API (``pip install 'chronicle-otel[s3]'``);
    :func:`describe_error` says in one line why a payload store failed (credentials, bucket, network…).
    :func:`open_payload_store` — the payload store a setting names (``s3://bucket/prefix`` or a store directory).
    :class:`TraceSummary` — one row of :meth:`LocalStore.list_traces`.
    :func:`apply_retention` — keep every failure, sample the successes, cap age and size (:class:`RetentionPolicy`,
    :class:`RetentionReport`; ``chronicle gc``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .._internal.digest import payload_digest
from .payloads import PayloadSource, PayloadStore, open_payload_store
from .reader import MANIFEST, STORE_FORMAT, StoreReader, TraceSummary, default_store_path, is_store

if TYPE_CHECKING:
    from ._local import LocalStore, TraceRecord
    from ._object import ObjectPayloadStore, PutReport, describe_error
    from ._retention import RetentionPolicy, RetentionReport, apply_retention

__all__ = [
    "MANIFEST",
    "STORE_FORMAT",
    "LocalStore",
    "ObjectPayloadStore",
    "PayloadSource",
    "PayloadStore",
    "PutReport",
    "RetentionPolicy",
    "RetentionReport",
    "StoreReader",
    "TraceRecord",
    "TraceSummary",
    "apply_retention",
    "default_store_path",
    "describe_error",
    "is_store",
    "open_payload_store",
    "payload_digest",
]


def __getattr__(name: str) -> Any:
    # The writing side loads on first use: reading a store (loading a trace) never imports it.
    module = None
    if name in ("LocalStore", "TraceRecord"):
        module = importlib.import_module("._local", __name__)
    elif name in ("ObjectPayloadStore", "PutReport", "describe_error"):
        module = importlib.import_module("._object", __name__)
    elif name in ("RetentionPolicy", "RetentionReport", "apply_retention"):
        module = importlib.import_module("._retention", __name__)
    if module is not None:
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
