"""The one table of public names: what ``chronicle_otel`` offers at its top level, and the module defining each.

``chronicle_otel.__all__``, the package's first-use loading (``chronicle_otel.__getattr__``) and its type stub
(``chronicle_otel/__init__.pyi``, written by ``scripts/gen_stubs.py``) all come from :data:`PUBLIC`. Each defining
module calls :func:`publish` once, at its end: the names it defines then show ``chronicle_otel`` as their module
(in reprs, tracebacks, docs and pickles) from the moment they exist, whatever path imported them first. This module
imports nothing, so every module can use it, the neutral leaves included.
"""

from __future__ import annotations

import sys
from typing import Any, Final

PACKAGE: Final = "chronicle_otel"

_ERRORS: Final = "chronicle_otel.errors"
_OPTIONS: Final = "chronicle_otel.config._options"

PUBLIC: Final[dict[str, str]] = {
    "Assembled": "chronicle_otel._assembled",
    "Boundary": "chronicle_otel.model",
    "BoundaryKind": "chronicle_otel.record._spec",
    "CaptureOptions": _OPTIONS,
    "ChronicleConfig": "chronicle_otel.config._config",
    "ChronicleError": _ERRORS,
    "ChronicleExporter": "chronicle_otel.export._exporter",
    "ChronicleWarning": _ERRORS,
    "CodecError": _ERRORS,
    "ConfigError": _ERRORS,
    "LoadLimitError": _ERRORS,
    "LoadLimits": "chronicle_otel.load._limits",
    "LocalStore": "chronicle_otel.store._local",
    "NetworkBlockedError": _ERRORS,
    "PayloadOptions": _OPTIONS,
    "RedactionOptions": _OPTIONS,
    "ReplayDivergence": _ERRORS,
    "ReplayError": _ERRORS,
    "ReplayReport": "chronicle_otel.replaying._report",
    "ReplayRun": "chronicle_otel.replaying._run",
    "ReplayedError": "chronicle_otel.model",
    "SampleReport": "chronicle_otel.sampling._report",
    "StoreError": _ERRORS,
    "StoreOptions": _OPTIONS,
    "Trace": "chronicle_otel.model",
    "TraceLoadError": _ERRORS,
    "TraceNotFoundError": _ERRORS,
    "TraceSummary": "chronicle_otel.store.reader",
    "assemble": "chronicle_otel._assembled",
    "boundary": "chronicle_otel.record._boundary",
    "call": "chronicle_otel.record._call_block",
    "changed": "chronicle_otel.record._changes",
    "configure": "chronicle_otel.config._configure",
    "get_config": "chronicle_otel.config._config",
    "instrument": "chronicle_otel.record._instrument",
    "load_trace": "chronicle_otel.load",
    "register_type": "chronicle_otel.codec._registry",
    "replay": "chronicle_otel.replaying._run",
    "sample": "chronicle_otel.sampling._run",
    "session": "chronicle_otel.record._session",
    "uninstrument": "chronicle_otel.record._instrument",
    "write_trace": "chronicle_otel.load._write",
}
"""Public name -> the module that defines it."""

SUBMODULES: Final = (
    "cli",
    "corpus",
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
    "sampling",
    "semconv",
    "store",
    "testing",
    "version",
)
"""The public submodules, which ``chronicle_otel.<name>`` imports on first use."""

_BY_MODULE: Final[dict[str, tuple[str, ...]]] = {}
for _name, _home in PUBLIC.items():
    _BY_MODULE[_home] = (*_BY_MODULE.get(_home, ()), _name)
del _name, _home


def publish(module: str, namespace: dict[str, Any]) -> None:
    """Show the public names ``module`` defines (its ``namespace``) as ``chronicle_otel``'s.

    Called once by each defining module at its end, so that ``__module__`` never depends on which path imported a
    name first. The package still binds a name on first use (``chronicle_otel.__getattr__``), which may load more
    first (the decorator, before the configuration). Raises ``KeyError`` when the module no longer defines a name
    :data:`PUBLIC` says it does.
    """
    for name in _BY_MODULE.get(module, ()):
        value = namespace[name]
        if value.__module__ != module:
            raise RuntimeError(f"{module}.{name} is defined in {value.__module__}, not where PUBLIC says")
        value.__module__ = PACKAGE


def defining_namespace(name: str) -> dict[str, Any] | None:
    """The namespace of the loaded module that defines the public name ``name``, or None (never imports)."""
    home = PUBLIC.get(name)
    module = sys.modules.get(home) if home is not None else None
    return vars(module) if module is not None else None
