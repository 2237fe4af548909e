"""The OTLP -> Jaeger/Zipkin translation undone: status and scope back out of the tags they were moved into."""

from __future__ import annotations

from typing import Any


def _tag_text(value: Any, default: str) -> str:
    if value is None:
        return default
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, float)) or (isinstance(value, int) and value.bit_length() <= 128):
        return str(value)
    return default


def pop_translated_fields(attrs: dict[str, Any]) -> tuple[str, str, str]:
    """Undo the OTLP -> Jaeger/Zipkin translation, which moves status and scope into tags.

    Removes ``otel.status_code``, ``otel.status_description``, ``error``, ``otel.scope.*`` and ``otel.library.*``
    from ``attrs`` and returns ``(status, status message, scope name)``.
    """
    status = _tag_text(attrs.pop("otel.status_code", None), "UNSET").upper()
    message = ""
    error = attrs.pop("error", None)
    if error is not None and error is not False:
        status = "ERROR"
        message = "" if error is True else _tag_text(error, "")  # Jaeger: a bool tag; Zipkin: the description
    message = _tag_text(attrs.pop("otel.status_description", None), message)
    library = _tag_text(attrs.pop("otel.library.name", None), "")
    scope = _tag_text(attrs.pop("otel.scope.name", None), library)
    attrs.pop("otel.scope.version", None)
    attrs.pop("otel.library.version", None)
    return (status if status in ("UNSET", "OK", "ERROR") else "UNSET"), message, scope
