"""What other stages build on: recording's parts for SDK and framework seams, and for reading what it recorded.

Not user API: these names are not in ``chronicle_otel.__all__`` and may change in any release. An integration
(:mod:`chronicle_otel.integrations`) wraps an SDK's method as a boundary with :func:`wrap` (the wrapper type is
:class:`Wrapper`), or patches it in place with :func:`instrument` (the patch is an :class:`Instrumented`), and
reads the GenAI attributes of a response with the helpers of ``_genai``. Replay compares a live stream with its
recording in recording's own encoding (:func:`encode_stream`, :func:`item_snapshot`) and stamps replayed calls with
the session variables active (:func:`current_session`).
"""

from __future__ import annotations

from ._genai import (
    attribute_scalar,
    field_of,
    finish_reasons,
    outcome_attributes,
    response_attributes,
    usage_attributes,
)
from ._instrument import Instrumented, instrument, uninstrument
from ._payloads import encode_stream, item_snapshot
from ._session import current_session
from ._spec import BoundaryKind, Wrapper, wrap

__all__ = [
    "BoundaryKind",
    "Instrumented",
    "Wrapper",
    "attribute_scalar",
    "current_session",
    "encode_stream",
    "field_of",
    "finish_reasons",
    "instrument",
    "item_snapshot",
    "outcome_attributes",
    "response_attributes",
    "uninstrument",
    "usage_attributes",
    "wrap",
]
