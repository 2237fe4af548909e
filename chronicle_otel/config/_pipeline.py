"""The live resources of a configuration: where boundary spans go.

A :class:`Pipeline` owns what :func:`chronicle_otel.configure` creates: the TracerProvider it created (or a
reference to yours, which it never shuts down), its span processors, the :class:`ChronicleExporter`, the
:class:`LocalStore`, the payload hand-off buffer and the tracer boundaries start spans with. Settings live
elsewhere (:mod:`chronicle_otel.config.params`); a pipeline only knows how to be built, started,
flushed and shut down.

Building is separate from starting so that everything that can fail (an invalid OTLP protocol, a store
path) fails before the previous configuration is stopped; :meth:`Pipeline.start` only adds the processors
to the provider.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from opentelemetry import trace as trace_api
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

from .._internal.buffer import PayloadBuffer
from .._internal.errors import handle_internal_errors
from .._internal.unreplayable import UnreplayableCounter
from ..errors import ConfigError
from ..export import BatchProcessor, BatchStats, ChronicleExporter, PayloadUploader
from ..store import LocalStore
from ..version import __version__
from .params import OTLP_PROTOCOL, STORE_PATH, PayloadSettings, StoreSettings, resolve

_log = logging.getLogger("chronicle_otel")

INSTRUMENTATION_NAME = "chronicle_otel"

STORE_EXIT_TIMEOUT = 60.0
"""Seconds the store may take at shutdown to write what is queued (a healthy store writes thousands of spans a
second; one whose index another process keeps locked would otherwise hold the exit for as long): what is left then
is counted as undelivered and logged."""

_MAX_EXPORT_BATCH_SIZE = 2048
_OTLP_MAX_DELAY = 1.0
"""Seconds between OTLP exports when fewer than a batch of spans wait."""


class Pipeline:
    """Provider, processors, exporter, store, payload buffer and tracer of one configuration."""

    __slots__ = (
        "_closed",
        "_drain",
        "_lock",
        "created_provider",
        "exporter",
        "owns_provider",
        "payload_buffer",
        "processors",
        "store",
        "tracer",
        "tracer_provider",
        "unreplayable",
        "upload_all",
        "uploader",
    )

    def __init__(
        self,
        tracer_provider: trace_api.TracerProvider | None = None,
        *,
        owns_provider: bool = False,
        created_provider: bool = False,
        processors: tuple[SpanProcessor, ...] = (),
        exporter: ChronicleExporter | None = None,
        store: LocalStore | None = None,
        payload_buffer: PayloadBuffer | None = None,
        uploader: PayloadUploader | None = None,
        upload_all: bool = False,
        drain: bool = False,
    ) -> None:
        self.tracer_provider = tracer_provider
        """The provider boundary spans are created with; None means the global one, looked up lazily."""
        self.unreplayable = UnreplayableCounter()
        """Calls recorded with values a replay cannot answer with, by boundary name."""
        self.owns_provider = owns_provider
        """Chronicle created the provider (this or an earlier configuration): it shuts it down."""
        self.created_provider = created_provider
        """This pipeline created the provider (the process-wide configuration then makes it global)."""
        self.processors = processors
        self.exporter = exporter
        self.store = store
        self.payload_buffer = payload_buffer
        self.uploader = uploader
        """Writes payloads to object storage; None when they go to the local store."""
        self.upload_all = upload_all and uploader is not None
        """Every payload goes to the uploader, not only those cut on their span."""
        provider = tracer_provider or trace_api.get_tracer_provider()
        self.tracer = provider.get_tracer(INSTRUMENTATION_NAME, __version__)
        self._closed = False
        self._lock = threading.Lock()
        self._drain = _DrainOnStop(self) if drain else None

    @property
    def payload_sink(self) -> PayloadBuffer | PayloadUploader | None:
        """Where boundary calls hand payloads cut on their span: the uploader, else the exporter's buffer."""
        return self.uploader if self.uploader is not None else self.payload_buffer

    @classmethod
    def build(
        cls,
        *,
        tracer_provider: TracerProvider | None,
        reuse: TracerProvider | None,
        use_global: bool,
        service_name: str | None,
        store: StoreSettings | None,
        otlp: bool,
        payloads: tuple[Any, PayloadSettings] | None = None,
        environ: Mapping[str, str] | None = None,
        exit_timeout: float = 5.0,
    ) -> Pipeline:
        """Create the resources of a configuration that records; nothing is attached yet (see :meth:`start`).

        Args:
            tracer_provider: the provider the user passed.
            reuse: a provider chronicle created for the previous process-wide configuration, kept.
            use_global: look for a global SDK provider the user set (False for ``configure(local=True)``).
            service_name: ``service.name`` of a provider chronicle creates.
            store: the local store to record in, or None for none.
            payloads: ``(your own payload store or None, settings)``; object storage when the settings say so.
            otlp: add an OTLP exporter when chronicle owns the provider.
            environ: the environment the OTLP protocol is read from (default: ``os.environ``).
            exit_timeout: seconds the OTLP export may take at shutdown (the store: at least :data:`STORE_EXIT_TIMEOUT`).

        Raises:
            ConfigError: the OTLP protocol variable is invalid, or the object store cannot be set up.
        """
        created = False
        provider: TracerProvider
        if reuse is not None:
            provider, owns = reuse, True
        elif tracer_provider is not None:
            provider, owns = tracer_provider, False
        else:
            current = trace_api.get_tracer_provider() if use_global else None
            if isinstance(current, TracerProvider):
                provider, owns = current, False
            else:
                resource = Resource.create({SERVICE_NAME: service_name} if service_name else {})
                provider, owns, created = _provider(resource), True, True
        otlp_exporter = _otlp_exporter(environ) if owns and otlp else None  # may raise: before the store
        uploader = _uploader(payloads, store, environ)  # may raise too (a bad URL, no s3 extra)
        processors: list[SpanProcessor] = []
        exporter = local_store = buffer = None
        if store is not None:
            local_store = LocalStore(store.path, durable=store.durable, compress=store.compress)
            buffer = PayloadBuffer(store.buffer_bytes)
            exporter = ChronicleExporter(local_store, payload_buffer=buffer, keep=store.keep)
            processors.append(
                SimpleSpanProcessor(exporter)
                if store.processor == "simple"
                else BatchProcessor(
                    exporter,
                    name="store",
                    max_queue_size=store.max_queue_size,
                    max_batch=_MAX_EXPORT_BATCH_SIZE,
                    max_delay=store.max_delay,
                    on_full=store.on_full,
                    shutdown_timeout=max(STORE_EXIT_TIMEOUT, exit_timeout),
                )
            )
        if otlp_exporter is not None:
            processors.append(
                BatchProcessor(
                    otlp_exporter,
                    name="otlp",
                    max_queue_size=store.max_queue_size if store is not None else 16_384,
                    max_batch=512,
                    max_delay=_OTLP_MAX_DELAY,
                    on_full="drop",  # a slow or dead collector never holds the application up
                    pack_after=512,  # what waits behind a batch (a collector down) is not walked by the GC
                    shutdown_timeout=exit_timeout,
                )
            )
        return cls(
            provider,
            owns_provider=owns,
            created_provider=created,
            processors=tuple(processors),
            exporter=exporter,
            store=local_store,
            payload_buffer=buffer,
            uploader=uploader,
            upload_all=payloads is not None and payloads[1].upload_all,
            drain=True,
        )

    def start(self) -> None:
        """Add the processors to the provider."""
        if isinstance(self.tracer_provider, TracerProvider):
            for processor in self.processors:
                self.tracer_provider.add_span_processor(processor)
            if self._drain is not None:  # last: a span has reached every exporter's queue when it runs
                self.tracer_provider.add_span_processor(self._drain)

    def batch_stats(self) -> list[BatchStats]:
        """The counters of the batch processors among this pipeline's processors."""
        return [p.stats() for p in self.processors if isinstance(p, BatchProcessor)]

    def supersede(self) -> None:
        """A newer pipeline's processors are on the same provider: this one's stop loses nothing."""
        for processor in self.processors:
            if isinstance(processor, BatchProcessor):
                processor.supersede()

    @property
    def closed(self) -> bool:
        """True once :meth:`shutdown` ran."""
        return self._closed

    def sdk_attribute_limit(self) -> int | None:
        """The provider's ``max_span_attribute_length`` (``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``), if any."""
        limits = getattr(self.tracer_provider, "_span_limits", None)
        value = getattr(limits, "max_span_attribute_length", None)
        return value if isinstance(value, int) and value > 0 else None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export every finished span now (every processor of a provider chronicle created, else chronicle's own) and
        every queued payload; True when all flushed in time."""
        ok = True
        processors: tuple[SpanProcessor | TracerProvider, ...] = self.processors
        if self.owns_provider and isinstance(self.tracer_provider, TracerProvider):
            processors = (self.tracer_provider,)  # its processors include ones the application added
        for processor in processors:
            flushed = False
            with handle_internal_errors("flushing spans", external=True):
                flushed = bool(processor.force_flush(timeout_millis))
            ok = flushed and ok
        if self.uploader is not None:
            with handle_internal_errors("flushing payloads", external=True):
                ok = self.uploader.force_flush(timeout_millis) and ok
        return ok

    def flush_for_exit(self, timeout_millis: int, *, final: bool, drain_seconds: float = 0.0) -> bool:
        """Flush within ``timeout_millis`` for a stop signal; True when everything was exported in time.

        ``final``: the process ends next, skipping ``atexit``: the exporters of the provider chronicle attached
        to (zero-code instrumentation's OTLP exporter) are flushed too, and the payload uploader stops (it spools
        what it could not write). ``drain_seconds``: a server handles the signal and shuts down gracefully, and
        may end the process by the signal's default action, skipping ``atexit``: the attached provider is
        flushed now, and for that long each trace is exported as its local root span ends.
        """
        ok = self.force_flush(timeout_millis)
        if (final or drain_seconds > 0) and not self.owns_provider and isinstance(self.tracer_provider, TracerProvider):
            flushed = False
            with handle_internal_errors("flushing the tracer provider", external=True):
                flushed = bool(self.tracer_provider.force_flush(timeout_millis))
            ok = flushed and ok
        if final and self.uploader is not None:
            with handle_internal_errors("stopping the payload uploader", external=True):
                self.uploader.shutdown(timeout=timeout_millis / 1000)
        if drain_seconds > 0 and ok and self._drain is not None and not self._closed:
            self._drain.start(drain_seconds, timeout_millis)
        return ok

    def shutdown(self, *, provider: bool = True) -> None:
        """Flush and stop the processors (and the provider, if chronicle created it). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._drain is not None:
            self._drain.stop()
        for processor in self.processors:
            with handle_internal_errors("shutting down a span processor", external=True):
                processor.shutdown()
        if self.uploader is not None:
            with handle_internal_errors("shutting down the payload uploader", external=True):
                self.uploader.shutdown()
        if self.payload_buffer is not None and self.payload_buffer.dropped:
            _log.warning(
                "chronicle_otel: %d whole payloads were dropped from the full payload buffer (%d bytes): their spans "
                "keep the cut text only",
                self.payload_buffer.dropped,
                self.payload_buffer.max_bytes,
            )
        if provider and self.owns_provider and isinstance(self.tracer_provider, TracerProvider):
            with handle_internal_errors("shutting down the tracer provider", external=True):
                self.tracer_provider.shutdown()

    def reusable_provider(self) -> TracerProvider | None:
        """The provider chronicle created for this pipeline, which a later configuration keeps using."""
        if self.owns_provider and isinstance(self.tracer_provider, TracerProvider):
            return self.tracer_provider
        return None


_SDK_VALUE_ERROR = re.compile(r"(?P<name>OTEL_[A-Z0-9_]+) must be (?P<expected>.+?) but got (?P<value>.*)")


def _provider(resource: Resource) -> TracerProvider:
    """A new TracerProvider; an ``OTEL_*`` limit the SDK refuses (``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT=abc``) is a
    :class:`ConfigError` naming the variable, as chronicle's own variables are."""
    try:
        return TracerProvider(resource=resource)
    except ValueError as exc:
        m = _SDK_VALUE_ERROR.fullmatch(str(exc))
        if m is not None:
            raise ConfigError(m["name"], m["value"], m["expected"]) from None
        for name, value in sorted(os.environ.items()):  # older SDKs fail to format their own message
            if name.startswith("OTEL_") and name.endswith("_LIMIT") and not value.strip().isdigit():
                raise ConfigError(name, value, "a non-negative integer") from None
        raise


class _DrainOnStop(SpanProcessor):
    """While a server drains its requests after a stop signal, export each trace as its local root span ends.

    The last processor of the provider; idle (one attribute read per span) until :meth:`start`. A flush that
    does not finish in time (a dead collector) ends the draining: requests are not held up by an export that
    cannot succeed.
    """

    __slots__ = ("_local", "_pipeline", "_timeout_millis", "until")

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline
        self._local = threading.local()
        self._timeout_millis = 0
        self.until = 0.0
        """``time.monotonic()`` deadline of the draining; 0 when idle."""

    def start(self, seconds: float, timeout_millis: int) -> None:
        self._timeout_millis = timeout_millis
        self.until = time.monotonic() + seconds

    def stop(self) -> None:
        self.until = 0.0

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        if not self.until:
            return
        if time.monotonic() > self.until:
            self.until = 0.0
            return
        parent = span.parent
        if (parent is not None and not parent.is_remote) or getattr(self._local, "busy", False):
            return
        self._local.busy = True  # an export that ends a span of its own does not flush again
        try:
            pipeline = self._pipeline
            ok = pipeline.force_flush(self._timeout_millis)
            if not pipeline.owns_provider and isinstance(pipeline.tracer_provider, TracerProvider):
                flushed = False
                with handle_internal_errors("flushing the tracer provider", external=True):
                    flushed = bool(pipeline.tracer_provider.force_flush(self._timeout_millis))
                ok = flushed and ok
            if not ok:
                self.until = 0.0
        finally:
            self._local.busy = False

    def shutdown(self) -> None:
        self.until = 0.0

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def _uploader(
    payloads: tuple[Any, PayloadSettings] | None, store: StoreSettings | None, environ: Mapping[str, str] | None
) -> PayloadUploader | None:
    """The uploader to object storage (or your own store) that the settings ask for; None for the local store."""
    if payloads is None:
        return None
    custom, settings = payloads
    if custom is None and not settings.remote:
        return None
    if custom is None:
        from ..store import ObjectPayloadStore

        custom = ObjectPayloadStore(
            settings.url,
            compression=settings.zstd_level or None,
            concurrency=settings.concurrency,
            environ=environ,
        )
    spool = settings.spool
    if spool is None:
        spool = Path(store.path if store is not None else resolve(STORE_PATH, environ=environ)) / "payload-spool"
    return PayloadUploader(
        custom,
        spool=spool,
        spool_bytes=settings.spool_bytes,
        buffer_bytes=settings.buffer_bytes,
        max_backoff=settings.max_backoff,
        max_delay=settings.max_delay,
    )


def _otlp_exporter(environ: Mapping[str, str] | None) -> SpanExporter:
    protocol = resolve(OTLP_PROTOCOL, environ=environ)
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    return HttpExporter()
