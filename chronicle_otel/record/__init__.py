"""Recording: a boundary call becomes one span with its payloads.

The decorator (``_boundary``, ``_spec``), ``call(...)`` blocks (``_call_block``), the call lifecycle
(``_recording``) with its payload attributes (``_payloads``, ``_genai``, ``_call_index``), argument binding
(``_binding``), ``instrument()`` (``_instrument``), sessions (``_session``, their span attributes in
:mod:`.session_attrs`), the SDK adapters (:mod:`.adapters`) and what the integrations build on (:mod:`.extension`).

The public names are the top-level ones (``chronicle_otel.boundary``...); they are imported here on first use, so
importing one module of this package (an integration's GenAI attributes, say) does not load the whole recording
pipeline.
"""

from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._boundary import BoundaryKind, boundary, call, instrument, uninstrument
    from ._changes import changed
    from ._session import session

__all__ = ["BoundaryKind", "boundary", "call", "changed", "instrument", "session", "uninstrument"]

_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("BoundaryKind", "boundary", "call", "instrument", "uninstrument"), "._boundary"),
    "session": "._session",
    "changed": "._changes",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
