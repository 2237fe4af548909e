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

How it is built: the options are in ``_options``; the parameter table and its resolver in
:mod:`chronicle_otel.config.params` (export and store read it too); :class:`ChronicleConfig`, its counters and the
process-wide configuration :func:`get_config` returns in ``_config``; :func:`configure` in ``_configure``; the live
resources (provider, processors, exporter, store, payload buffer, tracer) in ``_pipeline``; the flushes at exit, at
fork and on stop signals in ``_lifecycle`` (with ``_signals``); :func:`isolated` in ``_isolation``; the counters as
OpenTelemetry metrics in ``_metrics``.

The public names are imported on first use: the stages that read the parameter table (export, store) import
``chronicle_otel.config.params`` without loading the pipeline that imports them.
"""

from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._config import ChronicleConfig, get_config
    from ._config import ChronicleStats as ChronicleStats  # not in __all__, as before: the types stats() returns
    from ._config import StoreStats as StoreStats
    from ._configure import configure
    from ._isolation import is_isolated, isolated
    from ._options import CaptureOptions, PayloadOptions, RedactionOptions, StoreOptions

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


def __getattr__(name: str) -> Any:
    if name in ("ChronicleConfig", "ChronicleStats", "StoreStats", "get_config"):
        module = _importlib.import_module("._config", __name__)
    elif name == "configure":
        module = _importlib.import_module("._configure", __name__)
    elif name in ("is_isolated", "isolated"):
        module = _importlib.import_module("._isolation", __name__)
    elif name in ("CaptureOptions", "PayloadOptions", "RedactionOptions", "StoreOptions"):
        module = _importlib.import_module("._options", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | {"ChronicleStats", "StoreStats"})
