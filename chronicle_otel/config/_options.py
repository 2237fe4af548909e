"""The options ``configure()`` takes, one frozen dataclass per area: store, payloads, capture, redaction.

Each field documents its ``CHRONICLE_*`` variable and default; the resolution (argument, then environment, then
default) is in :mod:`chronicle_otel.config.params`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .._api import publish
from .._internal.buffer import DEFAULT_MAX_BYTES
from ..redact import Redactor

__all__ = ["CaptureOptions", "PayloadOptions", "RedactionOptions", "StoreOptions"]


@dataclass(frozen=True)
class StoreOptions:
    """Where and how the embedded local store records spans and payloads."""

    path: str | os.PathLike[str] | None = None
    """Store directory. Default: ``$CHRONICLE_HOME``, else ``./.chronicle``."""
    processor: Literal["batch", "simple"] = "batch"
    """``batch`` exports on a background thread (production); ``simple`` exports as each span ends (tests, scripts)."""
    durable: bool = True
    """fsync span segments before indexing them, so a committed batch survives power loss."""
    buffer_bytes: int = DEFAULT_MAX_BYTES
    """Capacity of the in-memory hand-off of truncated payloads to the exporter thread."""
    max_queue_size: int = 16_384
    """Spans the batch processor holds before it drops (the SDK default is 2048): bursts of calls are kept."""
    keep: Literal["boundaries", "all"] | None = None
    """Which traces are recorded: ``boundaries``, only those with at least one boundary span (an application's
    health checks and other requests traced on the same provider are left out; spans that end before their trace's
    first boundary wait for it in memory), or ``all``. Default: ``$CHRONICLE_STORE_KEEP``, else ``boundaries``."""
    max_delay: float | None = None
    """Seconds an ended span may wait in memory before it is written (the batch processor): about what a
    ``kill -9`` can lose. Default: ``$CHRONICLE_STORE_MAX_DELAY``, else 0.5."""
    on_full: Literal["block", "drop"] | None = None
    """When ``max_queue_size`` spans wait: ``block`` (wait up to 1 s for room, then drop) or ``drop``; every drop is
    counted (:meth:`ChronicleConfig.stats`). The OTLP exporter chronicle adds always drops: a slow or dead collector
    never holds the application up. Default:
    ``$CHRONICLE_QUEUE_ON_FULL``, else ``block``."""
    compress: bool | None = None
    """Write span lines and payloads as zstd frames (span lines with a dictionary the store trains on its first
    lines), or as plain JSON lines (``False``: readable with ``grep``, no dictionary to train; a replay's temporary
    store is written so). A store holds both kinds alike. Default: ``$CHRONICLE_STORE_COMPRESS``, else ``True``."""


@dataclass(frozen=True)
class PayloadOptions:
    """Where full payloads go: the local store (one machine), or object storage shared by a fleet.

    Payloads that fit on their span (``max_attribute_length``) travel with it to the backend; the ones cut
    there are what a replay needs from the payload store. With ``url="s3://bucket/prefix"`` they are written,
    off the call path, as content-addressed objects (``prefix/sha256/ab/abcd…``, zstd-compressed) by a
    background uploader that batches, writes concurrently, skips objects already stored and, while the store
    is unreachable, keeps payloads in a bounded local spool that drains when it is back.

    Example::

        chronicle.configure(payloads="s3://agent-payloads/prod")           # the AWS_* variables say where/who
        chronicle.configure(payloads=chronicle.PayloadOptions(url="s3://agent-payloads/prod", upload="all"))
    """

    url: str | None = None
    """``s3://bucket[/prefix]``, or ``local``. Default: ``$CHRONICLE_PAYLOADS``, else ``local``."""
    upload: Literal["cut", "all"] | None = None
    """``cut`` (default, ``$CHRONICLE_PAYLOADS_UPLOAD``): only payloads cut on their span, which the backend does
    not hold whole; ``all``: every payload, so a replay never depends on the backend's attribute limits."""
    zstd_level: int | None = None
    """zstd level of objects, 1-22, or 0 for none. Default: ``$CHRONICLE_PAYLOADS_ZSTD_LEVEL`` or 3."""
    spool: str | os.PathLike[str] | None = None
    """Where payloads wait while the store is unreachable. Default: ``$CHRONICLE_PAYLOADS_SPOOL``, else
    ``payload-spool`` in the local store directory. Mount it on a volume that outlives the pod to keep them."""
    spool_bytes: int | None = None
    """Spool capacity. Default: ``$CHRONICLE_PAYLOADS_SPOOL_BYTES`` or 1 GiB."""
    buffer_bytes: int | None = None
    """Capacity of the in-memory queue between the call path and the uploader. Default: 256 MiB."""
    concurrency: int | None = None
    """Requests in flight at once. Default: 16."""
    max_backoff: float = 30.0
    """Longest wait, in seconds, between retries while the store fails."""
    max_delay: float = 2.0
    """Seconds a write to the store may go unanswered before the payloads it carries, and those handed over
    meanwhile, are written to the spool as well (while the store is known to fail, payloads go there as they are
    handed over): with the 0.5 s between writes, about what a ``kill -9`` can lose when the store stops answering."""
    store: Any = None
    """Your own payload store (an object with ``put_payloads``, see :class:`chronicle_otel.store.PayloadStore`),
    used instead of ``url``."""


@dataclass(frozen=True)
class CaptureOptions:
    """What boundary spans capture."""

    max_attribute_length: int | None = None
    """Cap, in characters, of ``chronicle.input``/``output``/``error`` attributes; longer payloads keep a
    prefix with ``*.truncated`` set, and the store keeps the whole. Default: ``$CHRONICLE_MAX_ATTRIBUTE_LENGTH``
    or 8192. A lower SDK attribute limit (``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``) wins, so the SDK never cuts a
    payload behind chronicle's back."""
    genai_attributes: bool = True
    """Write OTel GenAI attributes (``gen_ai.request.model``, token usage…) on ``llm`` boundaries."""
    absolute_paths: bool = False
    """Keep the machine's file paths in the stack traces of exception events. By default a path is written
    relative to where it lies: the working directory (``agent/tools.py``), an installed package
    (``<site-packages>/openai/_client.py``), the standard library (``<stdlib>/asyncio/tasks.py``) or the home
    directory (``~/...``), so a trace (and a regression test made from it) does not carry the recording machine's
    layout."""
    openinference: bool | None = None
    """Also write the OpenInference attributes (``openinference.span.kind``, ``input.value``/``output.value`` and
    mime types) so Phoenix renders boundaries natively. Default: ``$CHRONICLE_OPENINFERENCE`` or False."""


@dataclass(frozen=True)
class RedactionOptions:
    """What is replaced by ``[REDACTED]`` before it leaves the process (see :mod:`chronicle_otel.redact`).

    A value is redacted whole when its argument name or mapping key matches a key pattern (by default:
    passwords, secrets, API keys, tokens, authorization headers, cookies, private keys, connection
    strings, card numbers; :data:`chronicle_otel.redact.DEFAULT_KEY_PATTERNS`). Every string of a payload,
    an exception's text and a session variable is also searched for secret value formats (OpenAI,
    Anthropic, AWS, GitHub, Slack, Stripe and Google keys, JWTs, ``Bearer``/``Basic`` credentials, PEM
    private keys, URL passwords; :data:`chronicle_otel.redact.DEFAULT_VALUE_PATTERNS`), and only the secret
    is replaced.

    ``keys`` and ``values`` are kept as tuples, so options shared between configurations cannot change
    behind their back.

    Example::

        RedactionOptions(keys=[r"(?i)iban"], values=[r"ACME-[0-9]{8}"])
    """

    keys: Sequence[str] = ()
    """Extra regular expressions a secret key name fully matches, added to the defaults and
    ``$CHRONICLE_REDACT_KEYS``."""
    defaults: bool = True
    """Include the built-in key patterns."""
    values: Sequence[str] = ()
    """Extra regular expressions for secret values, searched in every string, added to the built-in formats and
    ``$CHRONICLE_REDACT_VALUES``. A match is replaced; where the pattern has a group named ``secret``, only that
    group is."""
    value_defaults: bool | None = None
    """Search for the built-in secret value formats. Default: True, unless ``$CHRONICLE_REDACT_VALUES`` is
    ``false`` (which also drops its own extra patterns)."""
    redactor: Redactor | None = None
    """Your own :class:`~chronicle_otel.redact.Redactor`, asked after the patterns; its exceptions are logged
    once and swallowed (what it was asked about is then redacted whole)."""

    def __post_init__(self) -> None:
        # A single string is left as it is: configure() rejects it (it is not a list of patterns).
        for name in ("keys", "values"):
            value = getattr(self, name)
            if not isinstance(value, (str, bytes, tuple)) and isinstance(value, Sequence):
                object.__setattr__(self, name, tuple(value))


publish(__name__, globals())
