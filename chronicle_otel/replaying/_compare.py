"""Comparing a live call with its recording, redacted as the boundary's own configuration redacts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from .._internal.names import qualified_name
from ..codec import encode, same_encoding
from ..errors import ReplayError
from ..model import Boundary
from ..record.extension import encode_stream, item_snapshot
from ..redact import Redactor, error_secrets, scrub_text
from ._report import Finding, FindingKind, diff_lines


class Comparer:
    """Notes, for each live call, how its output or error differs from the recording.

    The recorded payloads were redacted when recorded; the live values are redacted the same way (the boundary's
    own redactor, and the values it redacted from this call's input) before they are compared.
    """

    def __init__(self) -> None:
        self._redaction: dict[str, tuple[Redactor | None, list[str]]] = {}

    def expect(self, rec: Boundary, redactor: Redactor | None, secrets: list[str]) -> None:
        """``rec`` runs live: remember how to redact its output."""
        self._redaction[rec.span_id] = (redactor, secrets)

    def snapshot(self, rec: Boundary) -> Callable[[Any], Any]:
        """What the stream driver of the live call ``rec`` keeps of each item: its encoding when it was yielded."""
        return item_snapshot(self._redaction.get(rec.span_id, (None, []))[0])

    def compare(self, rec: Boundary, value: Any, exc: BaseException | None) -> Finding | None:
        """A finding when the live ``value`` (or ``exc``) differs from the recording of ``rec``."""
        redactor, secrets = self._redaction.get(rec.span_id, (None, []))
        try:
            if exc is not None:
                return self._compare_error(rec, exc, redactor, secrets)
            streamed = rec.stream and type(value) is list  # the items read: encoded as the recording encoded them
            actual = (encode_stream(value, redactor) if streamed else encode(value, redact=redactor)).decode()
            if rec.failed and not rec.stream:
                return Finding(FindingKind.OUTPUT_CHANGED, rec.call_key, f"now returns; recorded {describe(rec)}")
            if rec.raw_output is None or not rec.raw_output.complete or not same_encoding(rec.raw_output.text, actual):
                recorded = rec.raw_output.text if rec.raw_output is not None else None
                return Finding(
                    FindingKind.OUTPUT_CHANGED, rec.call_key, "output differs", tuple(diff_lines(recorded, actual))
                )
        except ReplayError as err:
            return Finding(FindingKind.OUTPUT_CHANGED, rec.call_key, f"cannot compare: {err}")
        return None

    @staticmethod
    def _compare_error(
        rec: Boundary, exc: BaseException, redactor: Redactor | None, secrets: list[str]
    ) -> Finding | None:
        if isinstance(exc, ReplayError):  # the replay's own error: its message is already in the report
            return Finding(
                FindingKind.OUTPUT_CHANGED,
                rec.call_key,
                f"now raises {type(exc).__name__} (see above); recorded {describe(rec)}",
            )
        envelope: Any = {}
        if rec.raw_error is not None and rec.raw_error.complete:
            try:
                envelope = orjson.loads(rec.raw_error.text)
            except orjson.JSONDecodeError:
                envelope = {}
        message = str(exc) if redactor is None else scrub_text(redactor, str(exc), error_secrets(exc, secrets))
        recorded_type = envelope.get("type") if isinstance(envelope, dict) else None
        recorded_message = envelope.get("message") if isinstance(envelope, dict) else None
        if recorded_type == qualified_name(type(exc)) and recorded_message == message:
            return None
        return Finding(
            FindingKind.OUTPUT_CHANGED,
            rec.call_key,
            f"now raises {type(exc).__name__}: {message}; recorded {describe(rec)}",
        )


def describe(rec: Boundary) -> str:
    """``output {...}`` or ``error {...}`` of a recording, cut for a message."""
    if rec.failed and rec.raw_error is not None:
        return f"error {rec.raw_error.text[:200]}"
    return f"output {rec.raw_output.text[:200] if rec.raw_output else 'null'}"
