"""chronicle_otel: record AI-agent boundaries as OpenTelemetry spans, and replay them offline.

Usage::

    import chronicle_otel as chronicle

    chronicle.configure(service_name="stock-agent", session={"build_id": "2026.11.29+g3e1a7c4"})

    @chronicle.boundary(kind="llm", name="plan")
    def plan(request: str, *, model: str = "gpt-4.1-mini", temperature: float = 0.7) -> Order: ...

    with chronicle.session(user_id="u-17", prompt_version="v12"):
        run_agent("Sell $1,000 of MSFT")

Every boundary call is a span (inputs, outputs or error, hashes, session variables) that goes to
your OpenTelemetry pipeline and, whole, to the embedded store in ``./.chronicle/``.

Names are imported on first use: ``import chronicle_otel.load`` loads the loader and the trace model only, not
the recording pipeline (configuration, exporter, store writer) nor replay.
"""

from __future__ import annotations

import contextlib as _contextlib
import importlib as _importlib
from typing import TYPE_CHECKING, Any

from .version import __version__

if TYPE_CHECKING:
    from ._assembled import Assembled, assemble
    from .codec import register_type
    from .config import (
        CaptureOptions,
        ChronicleConfig,
        PayloadOptions,
        RedactionOptions,
        StoreOptions,
        configure,
        get_config,
    )
    from .errors import (
        ChronicleError,
        ChronicleWarning,
        CodecError,
        ConfigError,
        LoadLimitError,
        NetworkBlockedError,
        ReplayDivergence,
        ReplayError,
        StoreError,
        TraceLoadError,
        TraceNotFoundError,
    )
    from .export import ChronicleExporter
    from .load import LoadLimits, load_trace, write_trace
    from .model import Boundary, Trace
    from .record import BoundaryKind, boundary, call, instrument, session, uninstrument
    from .replaying import ReplayedError, ReplayReport, ReplayRun, replay
    from .store import LocalStore, TraceSummary

__all__ = [
    "Assembled",
    "Boundary",
    "BoundaryKind",
    "CaptureOptions",
    "ChronicleConfig",
    "ChronicleError",
    "ChronicleExporter",
    "ChronicleWarning",
    "CodecError",
    "ConfigError",
    "LoadLimitError",
    "LoadLimits",
    "LocalStore",
    "NetworkBlockedError",
    "PayloadOptions",
    "RedactionOptions",
    "ReplayDivergence",
    "ReplayError",
    "ReplayReport",
    "ReplayRun",
    "ReplayedError",
    "StoreError",
    "StoreOptions",
    "Trace",
    "TraceLoadError",
    "TraceNotFoundError",
    "TraceSummary",
    "__version__",
    "assemble",
    "boundary",
    "call",
    "configure",
    "get_config",
    "instrument",
    "load_trace",
    "register_type",
    "replay",
    "session",
    "uninstrument",
    "write_trace",
]

# Public name -> the module that defines it. Recording names load the boundary module first, so that
# configure(local=True).boundary(...) always finds the decorator.
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("BoundaryKind", "boundary", "call", "instrument", "session", "uninstrument"), ".record"),
    **dict.fromkeys(("Assembled", "assemble"), "._assembled"),
    "register_type": ".codec",
    **dict.fromkeys(
        (
            "CaptureOptions",
            "ChronicleConfig",
            "PayloadOptions",
            "RedactionOptions",
            "StoreOptions",
            "configure",
            "get_config",
        ),
        ".config",
    ),
    **dict.fromkeys(
        (
            "ChronicleError",
            "ChronicleWarning",
            "CodecError",
            "ConfigError",
            "LoadLimitError",
            "NetworkBlockedError",
            "ReplayDivergence",
            "ReplayError",
            "StoreError",
            "TraceLoadError",
            "TraceNotFoundError",
        ),
        ".errors",
    ),
    "ChronicleExporter": ".export",
    **dict.fromkeys(("LoadLimits", "load_trace", "write_trace"), ".load"),
    **dict.fromkeys(("Boundary", "Trace"), ".model"),
    **dict.fromkeys(("ReplayedError", "ReplayReport", "ReplayRun", "replay"), ".replaying"),
    **dict.fromkeys(("LocalStore", "TraceSummary"), ".store"),
}
_SUBMODULES = frozenset(
    (
        "cli",
        "codec",
        "config",
        "environment_variables",
        "errors",
        "export",
        "load",
        "model",
        "pytest_plugin",
        "record",
        "redact",
        "replaying",
        "semconv",
        "store",
        "testing",
        "version",
    )
)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is not None:
        if module == ".config":
            _importlib.import_module(".record._boundary", __name__)
        value = getattr(_importlib.import_module(module, __name__), name)
        if isinstance(value, type) or callable(value):
            with _contextlib.suppress(AttributeError, TypeError):
                value.__module__ = __name__  # tracebacks and docs show the public path
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return _importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | _SUBMODULES)


# No NullHandler on the "chronicle_otel" logger: a warning (spans dropped, a store that cannot be written, a
# collector that did not take what was queued at exit) reaches stderr through Python's last-resort handler when the
# application has not configured logging, as the OpenTelemetry SDK's own warnings do.
