"""The resolved configuration: :class:`ChronicleConfig`, its counters, and the process-wide one.

A :class:`ChronicleConfig` joins frozen settings (resolved through :mod:`chronicle_otel.config.params`) and the
live resources of its :class:`~chronicle_otel.config._pipeline.Pipeline`. The process-wide configuration sits in
:data:`DEFAULT`, which boundaries defined at module level read through :func:`get_config`; :func:`configure`
fills it, an :func:`isolated` block swaps it for a sandbox meanwhile.

:meth:`ChronicleConfig.boundary` reaches the decorator through ``chronicle_otel._internal.boundary_factory``, which
the decorator module fills when it is imported, so this module never imports the decorator module (which imports
this one).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import SpanProcessor

from .._api import publish
from .._internal import boundary_factory, hooks
from .._internal.buffer import PayloadBuffer
from .._internal.compat import attribute_blind
from .._internal.unreplayable import UnreplayableCounter
from ..export import BatchStats, ChronicleExporter, PayloadUploader, UploadStats
from ..record.session_attrs import AttributeValue
from ..redact import Redactor
from ..store import LocalStore
from . import params as p
from ._pipeline import Pipeline


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
        absolute_paths: keep machine paths in exception stack traces (default: made relative, see
            :attr:`CaptureOptions.absolute_paths`).
        redact: the :class:`~chronicle_otel.redact.Redactor` that payloads, errors, session variables and replay
            comparisons go through; None when redaction is off (``redaction=False``).
    """

    # What every boundary call reads is copied into slots once: plain attribute reads on the hot path.
    __slots__ = (
        "_pipeline",
        "_settings",
        "absolute_paths",
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
    absolute_paths: bool
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
        init(self, "absolute_paths", settings.absolute_paths)
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


class Slot:
    """The process-wide configuration read by boundaries defined at module level."""

    def __init__(self) -> None:
        self._config: ChronicleConfig | None = None
        self.lock = threading.RLock()
        self.atexit_registered = False
        self.isolation: Isolation | None = None

    @property
    def config(self) -> ChronicleConfig | None:
        return self._config

    @config.setter
    def config(self, config: ChronicleConfig | None) -> None:
        self._config = config
        # read by every boundary call: with recording off process-wide, a call goes straight through
        hooks.set_recording_off(config is not None and not config.enabled)


@dataclass
class Isolation:
    """An active :func:`isolated` block: where spans go meanwhile, and what to put back after."""

    store: Path
    temporary: bool
    saved: ChronicleConfig | None
    depth: int = 1


DEFAULT = Slot()
"""The process-wide configuration (``configure(local=True)`` returns one that is not kept here)."""


def get_config() -> ChronicleConfig:
    """The active process-wide configuration; before :func:`configure`, the defaults without a store.

    Without ``configure()``, the settings resolve from the environment and the defaults (the same rules as
    ``configure()`` with no arguments); boundary spans go to the global TracerProvider (if the application
    set one) but nothing is written to the local store. An invalid environment variable is logged once
    and turns recording off instead of raising.

    Returns:
        The :class:`ChronicleConfig` boundaries use.
    """
    config = DEFAULT.config
    if config is None:
        with DEFAULT.lock:
            config = DEFAULT.config
            if config is None:
                config = DEFAULT.config = ChronicleConfig(p.resolve_settings(strict=False), Pipeline())
    return config


publish(__name__, globals())
