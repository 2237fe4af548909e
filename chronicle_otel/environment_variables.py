"""Environment variables read by chronicle_otel.

A setting resolves in this order: the argument to :func:`chronicle_otel.configure`, then the
``CHRONICLE_*`` variable, then the default. chronicle also honours OpenTelemetry's own
``OTEL_SDK_DISABLED``, ``OTEL_SERVICE_NAME`` and ``OTEL_EXPORTER_OTLP_*`` variables.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CHRONICLE_BUILD_ID",
    "CHRONICLE_ENABLED",
    "CHRONICLE_FLUSH_ON_SIGNALS",
    "CHRONICLE_GIT_SHA",
    "CHRONICLE_HOME",
    "CHRONICLE_HTTP_TIMEOUT",
    "CHRONICLE_HTTP_TOTAL_TIMEOUT",
    "CHRONICLE_MAX_ATTRIBUTE_LENGTH",
    "CHRONICLE_MAX_COMPRESSION_RATIO",
    "CHRONICLE_MAX_DECOMPRESSED_BYTES",
    "CHRONICLE_MAX_PAYLOAD_BYTES",
    "CHRONICLE_MAX_RESPONSE_BYTES",
    "CHRONICLE_MODEL_VERSION",
    "CHRONICLE_OPENINFERENCE",
    "CHRONICLE_OTLP",
    "CHRONICLE_PAYLOADS",
    "CHRONICLE_PAYLOADS_SPOOL",
    "CHRONICLE_PAYLOADS_SPOOL_BYTES",
    "CHRONICLE_PAYLOADS_UPLOAD",
    "CHRONICLE_PAYLOADS_ZSTD_LEVEL",
    "CHRONICLE_PROMPT_VERSION",
    "CHRONICLE_REDACT_KEYS",
    "CHRONICLE_REDACT_VALUES",
    "CHRONICLE_SESSION",
    "CHRONICLE_STORE_COMPRESS",
    "CHRONICLE_STORE_KEEP",
    "CHRONICLE_STORE_MAX_DELAY",
    "CHRONICLE_QUEUE_ON_FULL",
    "CHRONICLE_EXIT_TIMEOUT",
]

CHRONICLE_HOME: Final = "CHRONICLE_HOME"
"""
.. envvar:: CHRONICLE_HOME

Directory of the embedded local store. Default: ``./.chronicle``.
"""

CHRONICLE_ENABLED: Final = "CHRONICLE_ENABLED"
"""
.. envvar:: CHRONICLE_ENABLED

``false`` turns recording off: boundaries call straight through. Default: ``true``.
``OTEL_SDK_DISABLED=true`` has the same effect.
"""

CHRONICLE_MAX_ATTRIBUTE_LENGTH: Final = "CHRONICLE_MAX_ATTRIBUTE_LENGTH"
"""
.. envvar:: CHRONICLE_MAX_ATTRIBUTE_LENGTH

Cap, in characters, of the ``chronicle.input``/``output``/``error`` span attributes. Longer payloads
keep a prefix on the span and the whole in the payload store. Default: ``8192``.
"""

CHRONICLE_SESSION: Final = "CHRONICLE_SESSION"
"""
.. envvar:: CHRONICLE_SESSION

Process-wide session variables as ``key=value`` pairs separated by commas
(``region=eu,tier=gold``), stamped on every boundary span as ``chronicle.session.<key>``.
"""

CHRONICLE_BUILD_ID: Final = "CHRONICLE_BUILD_ID"
"""
.. envvar:: CHRONICLE_BUILD_ID

Session variable ``build_id``.
"""

CHRONICLE_GIT_SHA: Final = "CHRONICLE_GIT_SHA"
"""
.. envvar:: CHRONICLE_GIT_SHA

Session variable ``git_sha``.
"""

CHRONICLE_MODEL_VERSION: Final = "CHRONICLE_MODEL_VERSION"
"""
.. envvar:: CHRONICLE_MODEL_VERSION

Session variable ``model_version``.
"""

CHRONICLE_PROMPT_VERSION: Final = "CHRONICLE_PROMPT_VERSION"
"""
.. envvar:: CHRONICLE_PROMPT_VERSION

Session variable ``prompt_version``.
"""

CHRONICLE_REDACT_KEYS: Final = "CHRONICLE_REDACT_KEYS"
"""
.. envvar:: CHRONICLE_REDACT_KEYS

Extra regular expressions (comma separated) matched against argument and mapping key names whose
values are redacted before they leave the process, added to the built-in list.
"""

CHRONICLE_OTLP: Final = "CHRONICLE_OTLP"
"""
.. envvar:: CHRONICLE_OTLP

``true``/``false``: force the OTLP exporter on or off when chronicle creates the TracerProvider.
By default it is added when ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set.
"""

CHRONICLE_OPENINFERENCE: Final = "CHRONICLE_OPENINFERENCE"
"""
.. envvar:: CHRONICLE_OPENINFERENCE

``true`` adds the OpenInference attributes (``openinference.span.kind``, ``input.value``, ``output.value`` with
their mime types) to boundary spans, so Phoenix shows kinds, inputs and outputs. Default: ``false``.
"""

CHRONICLE_MAX_DECOMPRESSED_BYTES: Final = "CHRONICLE_MAX_DECOMPRESSED_BYTES"
"""
.. envvar:: CHRONICLE_MAX_DECOMPRESSED_BYTES

Largest size, in bytes, that a compressed trace file (gzip, zstd, zstd-framed messages) may inflate to when
loaded; larger files are refused with :class:`~chronicle_otel.errors.LoadLimitError`. Default: 268435456 (256 MiB).
"""

CHRONICLE_MAX_COMPRESSION_RATIO: Final = "CHRONICLE_MAX_COMPRESSION_RATIO"
"""
.. envvar:: CHRONICLE_MAX_COMPRESSION_RATIO

Largest ratio of inflated to compressed size accepted once more than 1 MiB has been inflated (a decompression
bomb inflates by thousands). Default: 200.
"""

CHRONICLE_MAX_RESPONSE_BYTES: Final = "CHRONICLE_MAX_RESPONSE_BYTES"
"""
.. envvar:: CHRONICLE_MAX_RESPONSE_BYTES

Largest total, in bytes, of the bodies read from a trace backend for one trace (every page and project listing
included). Default: 268435456 (256 MiB).
"""

CHRONICLE_MAX_PAYLOAD_BYTES: Final = "CHRONICLE_MAX_PAYLOAD_BYTES"
"""
.. envvar:: CHRONICLE_MAX_PAYLOAD_BYTES

Largest total, in bytes, read from payload stores to rehydrate the payloads cut on one trace's spans: every object
read, as stored and as it inflates, all stores and requests together (a request counts the object's size before its
body is read, so this also bounds what requests in flight hold). More is refused with
:class:`~chronicle_otel.errors.LoadLimitError`. Default: 1073741824 (1 GiB).
"""

CHRONICLE_HTTP_TIMEOUT: Final = "CHRONICLE_HTTP_TIMEOUT"
"""
.. envvar:: CHRONICLE_HTTP_TIMEOUT

Total deadline, in seconds, of one HTTP request to a trace backend: connecting, waiting and reading the whole
body. Default: 60.
"""

CHRONICLE_HTTP_TOTAL_TIMEOUT: Final = "CHRONICLE_HTTP_TOTAL_TIMEOUT"
"""
.. envvar:: CHRONICLE_HTTP_TOTAL_TIMEOUT

Deadline, in seconds, of all the HTTP requests that pulling one trace from a backend makes (every page and project
listing). Default: 600.
"""

CHRONICLE_REDACT_VALUES: Final = "CHRONICLE_REDACT_VALUES"
"""
.. envvar:: CHRONICLE_REDACT_VALUES

Extra regular expressions (comma separated) for secret values found anywhere in a payload, an exception message or
a session variable, added to the built-in formats (API keys, tokens, private keys…). ``false`` turns value
patterns off.
"""

CHRONICLE_PAYLOADS: Final = "CHRONICLE_PAYLOADS"
"""
.. envvar:: CHRONICLE_PAYLOADS

Where full payloads go and are read from: ``s3://bucket[/prefix]`` for object storage over the S3 API
(endpoint from ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL``, region from ``AWS_REGION``, credentials
from the standard AWS chain), or ``local`` (the default) for the embedded local store. Read by
``configure()`` and by every loading side (``load_trace``, ``chronicle pull/show/gen-test``, the pytest plugin).
"""

CHRONICLE_PAYLOADS_UPLOAD: Final = "CHRONICLE_PAYLOADS_UPLOAD"
"""
.. envvar:: CHRONICLE_PAYLOADS_UPLOAD

Which payloads go to object storage: ``cut`` (default: those cut on their span) or ``all``.
"""

CHRONICLE_PAYLOADS_ZSTD_LEVEL: Final = "CHRONICLE_PAYLOADS_ZSTD_LEVEL"
"""
.. envvar:: CHRONICLE_PAYLOADS_ZSTD_LEVEL

zstd level of payload objects (1-22; ``0`` stores them uncompressed). Default: 3.
"""

CHRONICLE_PAYLOADS_SPOOL: Final = "CHRONICLE_PAYLOADS_SPOOL"
"""
.. envvar:: CHRONICLE_PAYLOADS_SPOOL

Directory where payloads wait while the object store is unreachable. Default: ``payload-spool`` in the
local store directory (``$CHRONICLE_HOME`` or ``./.chronicle``).
"""

CHRONICLE_PAYLOADS_SPOOL_BYTES: Final = "CHRONICLE_PAYLOADS_SPOOL_BYTES"
"""
.. envvar:: CHRONICLE_PAYLOADS_SPOOL_BYTES

Capacity of the payload spool in bytes; beyond it payloads are dropped (counted and logged). Default: 1 GiB.
"""

CHRONICLE_FLUSH_ON_SIGNALS: Final = "CHRONICLE_FLUSH_ON_SIGNALS"
"""
.. envvar:: CHRONICLE_FLUSH_ON_SIGNALS

``false`` leaves SIGTERM and SIGINT alone: spans are then flushed at exit only (a SIGTERM's default action skips
``atexit``). Default: true.
"""

CHRONICLE_STORE_COMPRESS: Final = "CHRONICLE_STORE_COMPRESS"
"""
.. envvar:: CHRONICLE_STORE_COMPRESS

Whether the local store writes span lines and payloads as zstd frames (span lines with a dictionary the store trains
on its first lines): ``true`` (the default) or ``false`` (plain JSON lines, readable with ``grep``). A store holds
both kinds alike; readers need ``zstandard`` installed for compressed data. ``StoreOptions(compress=...)`` takes
precedence.
"""

CHRONICLE_STORE_KEEP: Final = "CHRONICLE_STORE_KEEP"
"""
.. envvar:: CHRONICLE_STORE_KEEP

Which traces the local store records: ``boundaries`` (the default: only traces with at least one boundary span,
so health checks and other requests traced on the same provider are left out) or ``all`` (every span).
"""

CHRONICLE_STORE_MAX_DELAY: Final = "CHRONICLE_STORE_MAX_DELAY"
"""
.. envvar:: CHRONICLE_STORE_MAX_DELAY

Seconds an ended span may wait in memory before the local store writes it: about what a ``kill -9`` can lose.
Default: 0.5.
"""

CHRONICLE_QUEUE_ON_FULL: Final = "CHRONICLE_QUEUE_ON_FULL"
"""
.. envvar:: CHRONICLE_QUEUE_ON_FULL

What a full export queue does with the next ended span: ``block`` (the default: wait up to 1 s for the exporter
to make room, then drop) or ``drop`` (at once). Every dropped span is counted (``get_config().stats()``).
"""

CHRONICLE_EXIT_TIMEOUT: Final = "CHRONICLE_EXIT_TIMEOUT"
"""
.. envvar:: CHRONICLE_EXIT_TIMEOUT

Seconds the OTLP export chronicle set up may take to deliver what is queued when the process exits (or on
``shutdown()``); what is left is counted and logged. The local store gets this long or 60 s, whichever is more.
Default: 5.
"""
