"""``configure()``: the options resolved through the parameter table, the pipeline built, the previous one replaced.

Everything that can fail (a bad argument or environment variable, an OTLP protocol, a store path) fails before the
previous configuration is touched: the new :class:`~chronicle_otel.config._pipeline.Pipeline` is built first, then
the old one is superseded and the new one started. A process-wide configuration is then installed in
:data:`~chronicle_otel.config._config.DEFAULT`, with the exit, fork and signal flushes of
:mod:`~chronicle_otel.config._lifecycle`; inside an :func:`~chronicle_otel.config.isolated` block it is sandboxed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal

from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import TracerProvider

from .._api import publish
from ..errors import ConfigError
from . import _lifecycle as lifecycle
from . import _metrics as metrics
from . import params as p
from ._config import DEFAULT, ChronicleConfig, ChronicleStats
from ._options import CaptureOptions, PayloadOptions, RedactionOptions, StoreOptions
from ._pipeline import Pipeline


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
        absolute_paths=capture.absolute_paths,
    )
    store_settings = _store_settings(store)
    payload_settings = _payload_settings(payloads)
    want_otlp = p.resolve(p.OTLP, otlp)
    want_signals = p.resolve(p.FLUSH_ON_SIGNALS, flush_on_signals)
    exit_seconds = p.resolve(p.EXIT_TIMEOUT, exit_timeout)

    with DEFAULT.lock:
        isolation = DEFAULT.isolation
        if isolation is not None:  # a replay runs: nothing leaves the process, nothing reaches the real store
            want_otlp = want_signals = False
            if store_settings is not None:
                store_settings = replace(store_settings, path=isolation.store, processor="simple", compress=False)
            payload_settings = (None, replace(payload_settings[1], url="local"))
        previous = None if local else DEFAULT.config
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
                lifecycle.install_signal_handlers()
    return config


def _install(config: ChronicleConfig) -> None:
    """Make ``config`` the process-wide configuration (the caller holds the lock)."""
    DEFAULT.config = config
    if DEFAULT.isolation is not None:
        return  # a sandbox: never the global provider, never atexit of its own (the isolation shuts it down)
    if config._pipeline.created_provider and config.tracer_provider is not None:
        trace_api.set_tracer_provider(config.tracer_provider)
    metrics.register(_current_stats)  # once per process
    lifecycle.register_exit_flush()


def _current_stats() -> ChronicleStats | None:
    config = DEFAULT.config
    return config.stats() if config is not None else None


publish(__name__, globals())
