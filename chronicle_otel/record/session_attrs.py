"""Session attributes: session variables as ``chronicle.session.*`` span attributes, and the active ones.

Shared by the configuration (process-wide variables) and :func:`chronicle_otel.session` (contextual ones), so that
neither imports the other. Not user API: the configuration's parameter table reads it, so it has no underscore.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from .. import semconv
from ..codec import encode
from ..redact import REDACTED, Redactor

__all__ = ["SESSION_ATTRIBUTES", "AttributeValue", "session_attributes"]

AttributeValue = str | bool | int | float
_EMPTY: Mapping[str, AttributeValue] = MappingProxyType({})

SESSION_ATTRIBUTES: contextvars.ContextVar[Mapping[str, AttributeValue]] = contextvars.ContextVar(
    "chronicle_session", default=_EMPTY
)
"""The ``chronicle.session.*`` attributes of the session active in this context, ready to copy onto a span."""


def session_attributes(values: Mapping[str, Any], redactor: Redactor | None = None) -> dict[str, AttributeValue]:
    """Turn session variables into ``chronicle.session.*`` span attributes.

    Strings, booleans, ints that fit in 64 bits and finite floats are kept as they are; anything
    else is stored as its canonical JSON text. With a ``redactor``, a variable whose name is secret
    becomes ``[REDACTED]`` and secrets inside strings are replaced.
    """
    out: dict[str, AttributeValue] = {}
    for key, value in values.items():
        if not isinstance(key, str) or not key or key.startswith(".") or key.endswith(".") or ".." in key:
            raise ValueError(f"session variable names must be non-empty dotted names, got {key!r}")
        if redactor is not None and redactor.redact_key(key):
            out[semconv.SESSION_PREFIX + key] = REDACTED
        else:
            out[semconv.SESSION_PREFIX + key] = _attribute_value(value, redactor)
    return out


def _attribute_value(value: Any, redactor: Redactor | None) -> AttributeValue:
    if isinstance(value, str):
        return redactor.redact_text(str(value)) if redactor is not None else value
    if isinstance(value, bool):
        return value
    if type(value) is int and -(2**63) <= value < 2**63:
        return value
    if type(value) is float and value == value and value not in (float("inf"), float("-inf")):
        return value
    return encode(value, redact=redactor).decode()
