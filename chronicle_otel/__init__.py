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

import importlib as _importlib
from typing import Any

from ._api import PUBLIC as _PUBLIC
from ._api import SUBMODULES as _SUBMODULES
from .version import __version__ as __version__

# The names, their modules and the type stub (__init__.pyi) come from the one table in _api.py.
__all__ = sorted(["__version__", *_PUBLIC])


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is not None:
        if module.startswith(f"{__name__}.config."):
            # configure(local=True).boundary(...) always finds the decorator.
            _importlib.import_module(".record._boundary", __name__)
        value = getattr(_importlib.import_module(module), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return _importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(_SUBMODULES))


# No NullHandler on the "chronicle_otel" logger: a warning (spans dropped, a store that cannot be written, a
# collector that did not take what was queued at exit) reaches stderr through Python's last-resort handler when the
# application has not configured logging, as the OpenTelemetry SDK's own warnings do.
