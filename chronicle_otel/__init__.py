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
"""

from __future__ import annotations

import contextlib as _contextlib

from ._boundary import BoundaryKind, boundary, call, instrument, uninstrument
from ._session import session
from .codec import register_type
from .config import CaptureOptions, ChronicleConfig, RedactionOptions, StoreOptions, configure, get_config
from .errors import (
    ChronicleError,
    ChronicleWarning,
    CodecError,
    ConfigError,
    LoadLimitError,
    ReplayDivergence,
    ReplayError,
    StoreError,
    TraceLoadError,
    TraceNotFoundError,
)
from .export import ChronicleExporter
from .load import LoadLimits, load_trace
from .replay import Boundary, ReplayedError, ReplayReport, ReplayRun, Trace, replay
from .store import LocalStore, TraceSummary
from .version import __version__

__all__ = [
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
]

for _name in __all__:
    _obj = globals()[_name]
    if hasattr(_obj, "__module__") and not isinstance(_obj, str):
        with _contextlib.suppress(AttributeError, TypeError):
            _obj.__module__ = __name__
del _name, _obj

import logging as _logging  # noqa: E402

_logging.getLogger(__name__).addHandler(_logging.NullHandler())
