"""Reading untrusted trace documents: where a value is, the checks that read it, and the errors that say so.

Every reader of trace data (OTLP/JSON, Jaeger, Zipkin, Phoenix) takes its fields through :class:`Where`, so a
field of the wrong type or range raises :class:`~chronicle_otel.errors.TraceLoadError` naming the source, the line
and the field's path, and never any other exception.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from ..errors import TraceLoadError

INT64_MIN: Final = -(2**63)
UINT64_MAX: Final = 2**64 - 1
MAX_VALUE_DEPTH: Final = 128
"""Deepest nesting of array/kvlist attribute values accepted (recorded payloads nest far less)."""

_INT_TEXT = re.compile(r"[+-]?[0-9]{1,24}")
_MAX_FLOAT_TEXT = 64


def describe(value: Any) -> str:
    """A short description of an untrusted value for an error message (never its whole text)."""
    if isinstance(value, str):
        if len(value) <= 60:
            return repr(value)
        return f"{value[:60]!r}… ({len(value)} characters)"
    if value is None or isinstance(value, (bool, float)):
        return repr(value)
    if isinstance(value, int):
        return repr(value) if value.bit_length() <= 128 else f"an integer of {value.bit_length()} bits"
    if isinstance(value, (bytes, bytearray)):
        return f"{len(value)} bytes"
    if isinstance(value, Mapping):
        return f"an object with {len(value)} keys"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)} items"
    return f"a {type(value).__name__}"


class Where:
    """The position of a value in an untrusted document, and the checks that read it.

    Args:
        source: the file or URL.
        line: the 1-based line, when the source is line oriented.
        path: the path to the object being read, e.g. ``resourceSpans[0].scopeSpans[1].spans[3].``.
    """

    __slots__ = ("line", "path", "source")

    def __init__(self, source: object, line: int | None = None, path: str = "") -> None:
        self.source = source
        self.line = line
        self.path = path

    def at(self, suffix: str) -> Where:
        """The position ``suffix`` below this one."""
        return Where(self.source, self.line, self.path + suffix)

    def error(self, field: str, value: Any, expected: str) -> TraceLoadError:
        """The error for a field whose value is not what was ``expected``."""
        return TraceLoadError(
            f"{self.path}{field} is {describe(value)}", source=self.source, line=self.line, expected=expected
        )

    def fail(self, message: str) -> TraceLoadError:
        """An error about the object at this position."""
        where = self.path.rstrip(".")
        return TraceLoadError(f"{where}: {message}" if where else message, source=self.source, line=self.line)

    def mapping(self, value: Any, field: str) -> Mapping[str, Any]:
        """``value`` when it is an object; None counts as an empty one."""
        if isinstance(value, Mapping):
            return value
        if value is None:
            return {}
        raise self.error(field, value, "an object")

    def items(self, value: Any, field: str) -> list[Any] | tuple[Any, ...]:
        """``value`` when it is a list; None counts as an empty one."""
        if isinstance(value, (list, tuple)):
            return value
        if value is None:
            return []
        raise self.error(field, value, "a list")

    def mappings(self, value: Any, field: str) -> Iterator[tuple[int, Mapping[str, Any]]]:
        """The objects of a list of objects, with their indexes."""
        for i, item in enumerate(self.items(value, field)):
            if not isinstance(item, Mapping):
                raise self.error(f"{field}[{i}]", item, "an object")
            yield i, item

    def text(self, value: Any, field: str, default: str = "") -> str:
        """``value`` when it is a string; None gives ``default``."""
        if isinstance(value, str):
            return value
        if value is None:
            return default
        raise self.error(field, value, "a string")

    def scalar_text(self, value: Any, field: str, default: str = "") -> str:
        """A string, or a number or boolean written as one (tags that some backends keep as strings)."""
        if isinstance(value, str):
            return value
        if value is None:
            return default
        if isinstance(value, (bool, float)) or (isinstance(value, int) and value.bit_length() <= 128):
            return str(value)
        raise self.error(field, value, "a string")

    def integer(self, value: Any, field: str, *, low: int = INT64_MIN, high: int = UINT64_MAX, default: int = 0) -> int:
        """An integer given as a JSON number or a string of at most 24 digits, within ``[low, high]``.

        The digit bound comes first: ``int()`` of a long digit string is slow or refused.
        """
        if value is None or value == "":
            return default
        number: int | None = None
        if isinstance(value, bool):
            number = None
        elif isinstance(value, int):
            number = value
        elif isinstance(value, float):
            if math.isfinite(value) and value.is_integer():
                number = int(value)
        elif isinstance(value, str):
            text = value.strip()
            if _INT_TEXT.fullmatch(text):
                number = int(text)
        if number is None or not low <= number <= high:
            raise self.error(field, value, f"an integer from {low} to {high} (a number or a string of digits)")
        return number

    def real(self, value: Any, field: str) -> float:
        """A float given as a JSON number or a string (``"NaN"``, ``"Infinity"``, ``"1.5"``)."""
        if isinstance(value, float):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            if value.bit_length() < 1024:
                return float(value)
        elif isinstance(value, str) and len(value) <= _MAX_FLOAT_TEXT:
            try:
                return float(value.replace("Infinity", "inf"))
            except ValueError:
                pass
        raise self.error(field, value, "a number")

    def base64(self, value: Any, field: str) -> bytes:
        """Bytes written as standard base64 text."""
        if isinstance(value, str):
            try:
                return base64.b64decode(value, validate=True)
            except ValueError:
                pass
        raise self.error(field, value, "base64 text")


def check_depth(value: Any, where: Where, field: str, limit: int = MAX_VALUE_DEPTH) -> Any:
    """``value`` (JSON-like data) when it nests no deeper than ``limit``; checked without recursion."""
    if not isinstance(value, (list, tuple, Mapping)):
        return value
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            raise where.fail(f"{field} nests deeper than {limit} levels")
        children = item.values() if isinstance(item, Mapping) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, (list, tuple, Mapping)))
    return value
