"""Configuration: where spans and payloads go, what is captured, what is redacted.

Usage::

    import chronicle_otel as chronicle

    chronicle.configure(
        service_name="stock-agent",
        session={"build_id": "2026.11.29+g3e1a7c4"},
        store=chronicle.StoreOptions(path="/var/lib/agent/.chronicle"),
        capture=chronicle.CaptureOptions(max_attribute_length=16_384),
        redaction=chronicle.RedactionOptions(keys=[r"(?i)account[_-]?number"], values=[r"ACME-[0-9]{8}"]),
    )

Every setting resolves in this order: the argument, then its ``CHRONICLE_*`` environment variable
(see :mod:`chronicle_otel.environment_variables`), then the default. Redaction patterns and session
variables add up instead: the defaults, then the variables, then the arguments.

TracerProvider: ``configure`` adds chronicle's span processor to the provider you pass
(``tracer_provider=``), else to the global SDK provider you have already set, else it creates one
(with ``service.name``), sets it as the global provider and, when ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set, adds an OTLP exporter (protocol from
``OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL``, default ``http/protobuf``). It never replaces a provider
you have set. ``OTEL_SDK_DISABLED=true`` or ``CHRONICLE_ENABLED=false`` turn recording off:
boundaries then call straight through.

Spans are flushed at interpreter exit, so no span of a normal run is lost.

Before ``configure()``, :func:`get_config` resolves the same parameters with no arguments (boundary
spans then go to the global provider and nothing is stored locally). There an invalid environment
variable cannot raise into the first boundary call: it is logged once and recording stays off until
``configure()`` (which raises on it).

How it is built: the options are in ``chronicle_otel.config._options``; the parameter table and its resolver in
``chronicle_otel._internal.params`` (export and store read it too); the live
resources (provider, processors, exporter, store, payload buffer, tracer) in
``chronicle_otel.config._pipeline``; :meth:`ChronicleConfig.boundary` reaches the decorator through
``chronicle_otel._internal.boundary_factory``, which the decorator module fills when it is imported, so this
module never imports the decorator module (which imports this one).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

from .._internal import boundary_factory, hooks
from .._internal import params as p
from .._internal.buffer import PayloadBuffer
from .._internal.compat import attribute_blind
from .._internal.session_attrs import AttributeValue
from .._internal.unreplayable import UnreplayableCounter
from ..errors import ConfigError
from ..export import BatchStats, ChronicleExporter, PayloadUploader, UploadStats
from ..redact import Redactor
from ..store import LocalStore
from . import _metrics as metrics
from . import _signals as signals
from ._options import CaptureOptions, PayloadOptions, RedactionOptions, StoreOptions
from ._pipeline import Pipeline

__all__ = [
    "CaptureOptions",
    "ChronicleConfig",
    "PayloadOptions",
    "RedactionOptions",
    "StoreOptions",
    "configure",
    "get_config",
    "is_isolated",
    "isolated",
]


@dataclass(frozen=True)
class StoreStats:
    """What the local store's exporter left out, by cause (see :class:`~chronicle_otel.ChronicleExporter`).

    Attributes:
        filtered_traces: traces without a boundary, not stored (``keep="boundaries"``).
        filtered_spans: their spans.
        evicted_spans: spans dropped from the full holding area.
        expired_spans: spans that waited longer than the holding time for a boundary.
        lost_spans: spans dropped (evicted, expired, or filtered when the trace's local root ended first) of traces
            that turned out to have a boundary.
        held_spans: spans waiting now for a boundary of their trace.
        dropped_payloads: whole payloads of spans cut on the span that never reached the store: the hand-off
            buffer (``StoreOptions.buffer_bytes``) was full, or one payload was larger than it. Their spans keep the
            cut text and the hash; replaying such a call fails with an error naming the missing payload.
    """

    filtered_traces: int
    filtered_spans: int
    evicted_spans: int
    expired_spans: int
    lost_spans: int
    held_spans: int
    dropped_payloads: int = 0


@dataclass(frozen=True)
class ChronicleStats:
    """Counters of one configuration (:meth:`ChronicleConfig.stats`).

    Attributes:
        exports: by export path (``store``, ``otlp``), the batch processor's counters.
        store: the local store's filtering, or None without a store.
        payloads: the object-storage uploader's counters, or None.
        unreplayable: calls recorded with a value held as an ``unencodable`` placeholder (a replay cannot answer
            them from the recording), by boundary name; each class is also logged once, with the remedy.
    """

    exports: Mapping[str, BatchStats]
    store: StoreStats | None
    payloads: UploadStats | None
    unreplayable: Mapping[str, int] = field(default_factory=dict)

    @property
    def dropped(self) -> int:
        """Spans that will not reach a destination they were meant for, whole.

        Dropped, failed or undelivered by an export path, lost by the store's holding area, or stored without the
        whole payload the hand-off buffer dropped.
        """
        lost = sum(s.lost for s in self.exports.values())
        store = self.store
        return lost + (store.lost_spans + store.dropped_payloads if store is not None else 0)


class ChronicleConfig:
    """The resolved configuration :func:`configure` returns; boundaries read it at call time.

    Its settings are frozen; the live resources (provider, processors, exporter, store) belong to its
    pipeline and stop with :meth:`shutdown`.

    Attributes:
        enabled: False when recording is off (boundaries call straight through).
        service_name: ``service.name`` of spans when chronicle created the provider.
        session: process-wide session variables as ``chronicle.session.*`` attributes (read-only).
        tracer_provider: the provider boundary spans are created with.
        exporter: the :class:`ChronicleExporter`, or None when the store is off.
        store: the :class:`LocalStore`, or None.
        max_attribute_length: effective cap of payload attributes, in characters.
        genai_attributes: write GenAI attributes on ``llm`` boundaries.
        openinference: write the OpenInference attributes too.
        redact: the :class:`~chronicle_otel.redact.Redactor` that payloads, errors, session variables and replay
            comparisons go through; None when redaction is off (``redaction=False``).
    """

    # What every boundary call reads is copied into slots once: plain attribute reads on the hot path.
    __slots__ = (
        "_pipeline",
        "_settings",
        "enabled",
        "genai_attributes",
        "max_attribute_length",
        "openinference",
        "payload_buffer",
        "redact",
        "session",
        "start_blind",
        "tracer",
        "unreplayable",
        "upload_all",
    )

    _settings: p.Settings
    _pipeline: Pipeline
    enabled: bool
    session: Mapping[str, AttributeValue]
    max_attribute_length: int
    genai_attributes: bool
    openinference: bool
    redact: Redactor | None
    tracer: trace_api.Tracer
    start_blind: bool
    payload_buffer: PayloadBuffer | PayloadUploader | None
    upload_all: bool
    unreplayable: UnreplayableCounter

    def __init__(self, settings: p.Settings, pipeline: Pipeline) -> None:
        init = object.__setattr__
        init(self, "_settings", settings)
        init(self, "_pipeline", pipeline)
        init(self, "enabled", settings.enabled)
        init(self, "session", settings.session)
        init(self, "max_attribute_length", settings.max_attribute_length)
        init(self, "genai_attributes", settings.genai_attributes)
        init(self, "openinference", settings.openinference)
        init(self, "redact", settings.redact)
        init(self, "tracer", pipeline.tracer)
        init(self, "start_blind", attribute_blind(pipeline.tracer))
        init(self, "payload_buffer", pipeline.payload_sink)
        init(self, "upload_all", pipeline.upload_all)
        init(self, "unreplayable", pipeline.unreplayable)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ChronicleConfig is read-only; call configure() to change {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"ChronicleConfig is read-only; cannot delete {name!r}")

    def __repr__(self) -> str:
        s = self._settings
        return (
            f"ChronicleConfig(enabled={s.enabled!r}, service_name={s.service_name!r}, session={dict(s.session)!r}, "
            f"tracer_provider={self.tracer_provider!r}, store={self.store!r}, "
            f"max_attribute_length={s.max_attribute_length!r}, genai_attributes={s.genai_attributes!r}, "
            f"openinference={s.openinference!r})"
        )

    # ------------------------------------------------------------------------------------ settings

    @property
    def service_name(self) -> str | None:
        """``service.name`` of spans when chronicle created the provider."""
        return self._settings.service_name

    # ------------------------------------------------------------------------------------ live resources

    @property
    def tracer_provider(self) -> trace_api.TracerProvider | None:
        """The provider boundary spans are created with (None: the global one)."""
        return self._pipeline.tracer_provider

    @property
    def exporter(self) -> ChronicleExporter | None:
        """The :class:`ChronicleExporter`, or None when the store is off."""
        return self._pipeline.exporter

    @property
    def store(self) -> LocalStore | None:
        """The :class:`LocalStore`, or None."""
        return self._pipeline.store

    @property
    def payload_store(self) -> Any:
        """Where payloads cut on spans go: the object store (e.g. ``ObjectPayloadStore``), else the local store."""
        uploader = self._pipeline.uploader
        return uploader.store if uploader is not None else self._pipeline.store

    def stats(self) -> ChronicleStats:
        """Counters of everything this configuration exports and drops, since it started.

        ``exports`` has one entry per export path chronicle runs in batches (``store``, ``otlp``): spans accepted,
        exported, dropped because the queue was full, failed, left undelivered at shutdown. ``store`` has the
        local store's filtering (traces without a boundary) and what its holding area dropped; ``payloads``, the
        object-storage uploader's counters.
        """
        pipeline = self._pipeline
        exporter = pipeline.exporter
        store = (
            StoreStats(
                filtered_traces=exporter.filtered_traces,
                filtered_spans=exporter.filtered_spans,
                evicted_spans=exporter.evicted_spans,
                expired_spans=exporter.expired_spans,
                lost_spans=exporter.lost_spans,
                held_spans=exporter.held_spans,
                dropped_payloads=pipeline.payload_buffer.dropped if pipeline.payload_buffer is not None else 0,
            )
            if exporter is not None
            else None
        )
        return ChronicleStats(
            exports={s.name: s for s in pipeline.batch_stats()},
            store=store,
            payloads=self.payload_stats(),
            unreplayable=pipeline.unreplayable.counts(),
        )

    def payload_stats(self) -> UploadStats | None:
        """Counters of payloads uploaded, already stored, spooled, drained and dropped; None without object storage."""
        uploader = self._pipeline.uploader
        return uploader.stats() if uploader is not None else None

    @property
    def processors(self) -> tuple[SpanProcessor, ...]:
        """The span processors chronicle added to the provider."""
        return self._pipeline.processors

    @property
    def owns_provider(self) -> bool:
        """True when chronicle created the provider (and shuts it down)."""
        return self._pipeline.owns_provider

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export every finished span now.

        Args:
            timeout_millis: how long each processor may take.

        Returns:
            True when all processors flushed in time.
        """
        return self._pipeline.force_flush(timeout_millis)

    def shutdown(self, *, provider: bool = True) -> None:
        """Flush and stop chronicle's processors (and the provider, if chronicle created it). Idempotent.

        Args:
            provider: also shut down the TracerProvider when chronicle created it.
        """
        self._pipeline.shutdown(provider=provider)

    def boundary(
        self,
        *,
        name: str | None = None,
        kind: str = "custom",
        attributes: Mapping[str, AttributeValue] | None = None,
        enabled: bool | Callable[[], bool] = True,
        provider: str | None = None,
    ) -> boundary_factory.BoundaryDecorator:
        """Like :func:`chronicle_otel.boundary`, bound to this configuration (see ``configure(local=True)``).

        Args:
            name: stable boundary name. Default: ``module.qualname``.
            kind: a :class:`~chronicle_otel.BoundaryKind` or its value (``llm``, ``tool``…).
            attributes: static span attributes added to every call.
            enabled: ``False`` leaves the function unwrapped; a callable is asked on each call.
            provider: for ``llm`` boundaries, the GenAI provider name.

        Returns:
            A decorator that records calls with this configuration.

        Example::

            config = chronicle.configure(tracer_provider=provider, store=False, local=True)

            @config.boundary(kind="tool")
            def lookup(symbol: str) -> float: ...
        """
        make = boundary_factory.factory()
        return make(name=name, kind=kind, attributes=attributes, enabled=enabled, provider=provider, config=self)


# ------------------------------------------------------------------------------------------------ process-wide


class _Slot:
    """The process-wide configuration read by boundaries defined at module level."""

    def __init__(self) -> None:
        self._config: ChronicleConfig | None = None
        self.lock = threading.RLock()
        self.atexit_registered = False
        self.isolation: _Isolation | None = None

    @property
    def config(self) -> ChronicleConfig | None:
        return self._config

    @config.setter
    def config(self, config: ChronicleConfig | None) -> None:
        self._config = config
        # read by every boundary call: with recording off process-wide, a call goes straight through
        hooks.set_recording_off(config is not None and not config.enabled)


@dataclass
class _Isolation:
    """An active :func:`isolated` block: where spans go meanwhile, and what to put back after."""

    store: Path
    temporary: bool
    saved: ChronicleConfig | None
    depth: int = 1


_DEFAULT = _Slot()


def get_config() -> ChronicleConfig:
    """The active process-wide configuration; before :func:`configure`, the defaults without a store.

    Without ``configure()``, the settings resolve from the environment and the defaults (the same rules as
    ``configure()`` with no arguments); boundary spans go to the global TracerProvider (if the application
    set one) but nothing is written to the local store. An invalid environment variable is logged once
    and turns recording off instead of raising.

    Returns:
        The :class:`ChronicleConfig` boundaries use.
    """
    config = _DEFAULT.config
    if config is None:
        with _DEFAULT.lock:
            config = _DEFAULT.config
            if config is None:
                config = _DEFAULT.config = ChronicleConfig(p.resolve_settings(strict=False), Pipeline())
    return config


def _store_settings(
    store: StoreOptions | str | os.PathLike[str] | Literal[False] | None,
) -> p.StoreSettings | None:
    if store is False:
        return None
    if store is None:
        store = StoreOptions()
    elif isinstance(store, (str, os.PathLike)):
        store = StoreOptions(path=store)
    elif not isinstance(store, StoreOptions):
        raise ConfigError("store", store, "StoreOptions, a directory path, False or None")
    return p.resolve_store(store)


def _payload_settings(payloads: PayloadOptions | str | Any | None) -> tuple[Any, p.PayloadSettings]:
    """``(your own store or None, the resolved settings)``."""
    if payloads is None:
        payloads = PayloadOptions()
    elif isinstance(payloads, (str, os.PathLike)):
        payloads = PayloadOptions(url=os.fspath(payloads))
    elif not isinstance(payloads, PayloadOptions):
        payloads = PayloadOptions(store=payloads)
    custom = payloads.store
    if custom is not None:
        if not callable(getattr(custom, "put_payloads", None)):
            raise ConfigError("payloads", custom, "an s3:// URL, PayloadOptions, a payload store with put_payloads()")
        payloads = replace(payloads, url="local", store=None)
    settings = p.resolve_payloads(payloads)
    if custom is not None:
        settings = replace(settings, url=f"custom:{type(custom).__name__}")
    return custom, settings


def configure(
    *,
    service_name: str | None = None,
    session: Mapping[str, Any] | None = None,
    tracer_provider: TracerProvider | None = None,
    store: StoreOptions | str | os.PathLike[str] | Literal[False] | None = None,
    capture: CaptureOptions | None = None,
    redaction: RedactionOptions | Literal[False] | None = None,
    payloads: PayloadOptions | str | Any | None = None,
    otlp: bool | None = None,
    enabled: bool | None = None,
    local: bool = False,
    flush_on_signals: bool | None = None,
    exit_timeout: float | None = None,
) -> ChronicleConfig:
    """Configure chronicle_otel for this process (or, with ``local=True``, an isolated instance).

    Each setting resolves as: argument, then environment variable, then default.

    Args:
        service_name: ``service.name`` of the provider chronicle creates. Default: ``$OTEL_SERVICE_NAME``.
        session: process-wide session variables (``build_id``, ``git_sha``, ``model_version``…) stamped on every
            boundary span; merged over ``$CHRONICLE_SESSION`` and ``$CHRONICLE_BUILD_ID`` & co.
        tracer_provider: the SDK provider to add chronicle's processor to. Default: the global SDK provider
            if one is set, else a new one that becomes the global provider.
        store: :class:`StoreOptions`, a store directory, or ``False`` for no local store.
        capture: :class:`CaptureOptions`.
        redaction: :class:`RedactionOptions`, or ``False`` to redact nothing (neither key names nor value formats).
        payloads: where full payloads go: ``"s3://bucket/prefix"``, :class:`PayloadOptions`, your own payload store,
            or None for ``$CHRONICLE_PAYLOADS`` (default: the local store). Works with ``store=False`` too.
        otlp: add an OTLP exporter to a provider chronicle creates. Default: ``$CHRONICLE_OTLP``, else when
            ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set.
        enabled: False to turn recording off. Default: ``$CHRONICLE_ENABLED``, off when ``OTEL_SDK_DISABLED=true``.
        local: return an independent configuration (use ``config.boundary(...)``) instead of replacing the
            process-wide one; chronicle then never touches the global provider.
        flush_on_signals: flush on SIGTERM and SIGINT too (a container's stop signal skips ``atexit``), then let the
            signal take its course (the handler found is chained). Default: ``$CHRONICLE_FLUSH_ON_SIGNALS``, else
            True. Process-wide configurations only, installed from the main thread.
        exit_timeout: seconds the OTLP export chronicle adds may take to deliver what is queued at shutdown (a dead
            collector never holds the exit longer); the rest is counted and logged. The local store gets this long or
            60 s, whichever is more (a store whose index another process keeps locked). Default:
            ``$CHRONICLE_EXIT_TIMEOUT``, else 5.

    Returns:
        The resolved :class:`ChronicleConfig`.

    Raises:
        ConfigError: an argument or environment variable has an invalid value.
    """
    if capture is None:
        capture = CaptureOptions()
    elif not isinstance(capture, CaptureOptions):
        raise ConfigError("capture", capture, "CaptureOptions or None")
    if redaction is not None and redaction is not False and not isinstance(redaction, RedactionOptions):
        raise ConfigError("redaction", redaction, "RedactionOptions, False or None")
    tracer_provider = p.resolve(p.TRACER_PROVIDER, tracer_provider)
    settings = p.resolve_settings(
        service_name=service_name,
        session=session,
        enabled=enabled,
        max_attribute_length=capture.max_attribute_length,
        genai_attributes=capture.genai_attributes,
        openinference=capture.openinference,
        redaction=redaction,
    )
    store_settings = _store_settings(store)
    payload_settings = _payload_settings(payloads)
    want_otlp = p.resolve(p.OTLP, otlp)
    want_signals = p.resolve(p.FLUSH_ON_SIGNALS, flush_on_signals)
    exit_seconds = p.resolve(p.EXIT_TIMEOUT, exit_timeout)

    with _DEFAULT.lock:
        isolation = _DEFAULT.isolation
        if isolation is not None:  # a replay runs: nothing leaves the process, nothing reaches the real store
            want_otlp = want_signals = False
            if store_settings is not None:
                store_settings = replace(store_settings, path=isolation.store, processor="simple", compress=False)
            payload_settings = (None, replace(payload_settings[1], url="local"))
        previous = None if local else _DEFAULT.config
        # Reconfiguring keeps a provider chronicle created (it is the global one) unless you pass yours.
        reuse = previous._pipeline.reusable_provider() if previous and tracer_provider is None else None
        if not settings.enabled:
            pipeline = Pipeline(tracer_provider)
        else:
            pipeline = Pipeline.build(
                tracer_provider=tracer_provider,
                reuse=reuse,
                use_global=not local and isolation is None,
                service_name=settings.service_name,
                store=store_settings,
                payloads=payload_settings,
                otlp=want_otlp,
                exit_timeout=exit_seconds,
            )
            limit = pipeline.sdk_attribute_limit()
            if limit is not None and limit < settings.max_attribute_length:
                settings = replace(settings, max_attribute_length=limit)
        if previous is None:
            pipeline.start()
        else:
            # Reconfigured: the old processors stay on the provider (the SDK cannot remove them), stopped; the spans
            # they no longer take are the new configuration's, or not to be recorded (enabled=False): not a loss.
            previous._pipeline.supersede()
            if pipeline.tracer_provider is previous._pipeline.tracer_provider:
                pipeline.start()  # the new processors take spans before the old ones stop: none ends in between
                previous.shutdown(provider=False)
            else:
                previous.shutdown()
                pipeline.start()
        config = ChronicleConfig(settings, pipeline)
        if not local:
            _install(config)
            if want_signals and settings.enabled:
                signals.install(_flush_on_signal)
    return config


def _install(config: ChronicleConfig) -> None:
    """Make ``config`` the process-wide configuration (the caller holds the lock)."""
    _DEFAULT.config = config
    if _DEFAULT.isolation is not None:
        return  # a sandbox: never the global provider, never atexit of its own (the isolation shuts it down)
    if config._pipeline.created_provider and config.tracer_provider is not None:
        trace_api.set_tracer_provider(config.tracer_provider)
    metrics.register(_current_stats)  # once per process
    if not _DEFAULT.atexit_registered:
        atexit.register(_shutdown_at_exit)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_in_forked_child)
        _DEFAULT.atexit_registered = True


@contextlib.contextmanager
def isolated(store: str | os.PathLike[str] | None = None) -> Iterator[Path]:
    """Record in a sandbox while the block runs: no span leaves the process, nothing reaches the real store.

    The process-wide configuration is set aside for the block; boundaries record with the same settings
    (redaction, capture, session) into ``store`` (default: a temporary directory, deleted after the block)
    through a private TracerProvider with no exporter but the store's. A ``configure()`` called inside the block
    (a module imported by a replayed test configures at import) is sandboxed the same way: no OTLP exporter, the
    global provider untouched, the store redirected, payloads kept local, no signal handlers. After the block the
    configuration that was active before is back. Replays run isolated by default (``replay(..., isolate=False)``
    to record into the real pipeline). Nested blocks share the outer one's store.

    Spans your own code sends through a TracerProvider it set up itself are not chronicle's to stop.

    Yields:
        The store directory the block records into.
    """
    with _DEFAULT.lock:
        current = _DEFAULT.isolation
        if current is not None:
            current.depth += 1
        else:
            temporary = store is None
            path = Path(tempfile.mkdtemp(prefix="chronicle-replay-")) if store is None else Path(store)
            current = _DEFAULT.isolation = _Isolation(path, temporary, _DEFAULT.config)
            saved = current.saved
            settings = saved._settings if saved is not None else p.resolve_settings(strict=False)
            if settings.enabled:
                pipeline = Pipeline.build(
                    tracer_provider=None,
                    reuse=None,
                    use_global=False,
                    service_name=settings.service_name,
                    store=p.resolve_store(StoreOptions(path=path, processor="batch", durable=False, compress=False)),
                    otlp=False,
                )
                pipeline.start()
            else:
                pipeline = Pipeline()
            _DEFAULT.config = ChronicleConfig(settings, pipeline)
    try:
        yield current.store
    finally:
        with _DEFAULT.lock:
            current.depth -= 1
            done = current.depth == 0
            if done:
                sandbox, _DEFAULT.config = _DEFAULT.config, current.saved
                _DEFAULT.isolation = None
        if done:
            if sandbox is not None and sandbox is not current.saved:
                sandbox.shutdown()
            if current.temporary:
                shutil.rmtree(current.store, ignore_errors=True)


def is_isolated() -> bool:
    """True while an :func:`isolated` block (a replay) runs."""
    return _DEFAULT.isolation is not None


SIGNAL_FLUSH_MILLIS = 5_000
"""How long a flush on SIGTERM/SIGINT may take (a container's grace period is usually 30 s)."""

DRAIN_SECONDS = 30.0
"""How long after a stop signal a server's drained requests are exported as they end (the usual grace period)."""


def _flush_on_signal(how: signals.Ending) -> None:
    """Export what is finished, bounded, when a stop signal arrives.

    When the process ends next, waiting payloads also go to the spool; when a server shuts down gracefully, each
    trace is exported as it ends, for the rest of the shutdown.
    """
    config = _DEFAULT.config
    if config is not None:
        config._pipeline.flush_for_exit(
            SIGNAL_FLUSH_MILLIS, final=how == "exit", drain_seconds=DRAIN_SECONDS if how == "server" else 0.0
        )


def _current_stats() -> ChronicleStats | None:
    config = _DEFAULT.config
    return config.stats() if config is not None else None


def _shutdown_at_exit() -> None:
    config = _DEFAULT.config
    if config is not None:
        config.shutdown()


def _in_forked_child() -> None:
    """Export the spans of a ``multiprocessing`` child started by fork when it exits.

    Such a child ends with ``os._exit``, skipping ``atexit``; its own exit handlers
    (``multiprocessing.util.Finalize``, registered once the child has set itself up) still run.
    """
    if "multiprocessing" in sys.modules and _DEFAULT.config is not None:
        with contextlib.suppress(Exception):
            import multiprocessing.util

            multiprocessing.util.register_after_fork(_DEFAULT, _finalize_in_child)


def _finalize_in_child(slot: _Slot) -> None:
    import multiprocessing.util

    multiprocessing.util.Finalize(None, _shutdown_at_exit, exitpriority=0)


def _reset_for_tests() -> None:
    """Shut down and forget the process-wide configuration (and put back the signal handlers it chained)."""
    signals.uninstall()
    with _DEFAULT.lock:
        config = _DEFAULT.config
        _DEFAULT.config = None
    if config is not None:
        config.shutdown()
