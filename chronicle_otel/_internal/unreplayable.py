"""Values recorded as ``unencodable`` placeholders: found in an encoded payload, said once, counted.

A payload holds a placeholder where the codec met a value it cannot record typed (an SDK's response wrapper, a
socket, a stream past its budget). A replay cannot answer with it, so recording one is never silent: the span gets
the ``chronicle.unreplayable`` attribute (the classes), a warning is logged once per boundary name and class, with
the remedy, and :meth:`~chronicle_otel.ChronicleConfig.stats` counts the calls by boundary name.

The search is one substring scan of the encoded bytes: canonical JSON writes the tag as the first key of its object,
and a quote inside a string is always escaped, so the marker occurs only where the codec wrote a placeholder.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Final

from .errors import warn_once

MARK: Final = b'{"$type":"unencodable","class":"'
"""How every placeholder the codec writes begins (sorted keys, no whitespace)."""

MAX_CLASSES: Final = 8
"""Distinct classes named per payload, at most."""

_MAX_NAME: Final = 200


def classes_in(data: bytes) -> tuple[str, ...]:
    """The classes of the placeholders in encoded ``data``, in order of appearance, each once (at most
    :data:`MAX_CLASSES`); empty when it has none."""
    start = data.find(MARK)
    if start < 0:
        return ()
    found: dict[str, None] = {}
    while start >= 0 and len(found) < MAX_CLASSES:
        begin = start + len(MARK)
        end = data.find(b'"', begin, begin + _MAX_NAME)
        name = data[begin:end].decode("utf-8", "replace") if end >= 0 else "?"
        found[name] = None
        start = data.find(MARK, begin)
    return tuple(found)


def remedy(class_name: str) -> str:
    """What to do so that values of ``class_name`` are recorded typed."""
    if class_name == "stream item":
        return "the stream was longer than chronicle keeps of one stream; its later items cannot be replayed"
    top = class_name.split(".")[0]
    integrations = {
        "openai": "openai",
        "anthropic": "anthropic",
        "langchain_core": "langchain",
        "langchain_openai": "langchain",
        "langchain_anthropic": "langchain",
        "pydantic_ai": "pydantic_ai",
        "agents": "openai_agents",
        "litellm": "litellm",
        "llama_index": "llama_index",
    }
    integration = integrations.get(top)
    if integration is not None:
        return (
            f"switch on chronicle_otel.integrations.{integration}.instrument(), which records {top}'s objects typed "
            "(or return the parsed value from the boundary)"
        )
    return (
        "return a value chronicle records typed (a dataclass, a pydantic model, JSON data), or teach it the class "
        "with chronicle_otel.register_type(...)"
    )


class UnreplayableCounter:
    """Calls whose payloads hold placeholders, by boundary name (thread-safe)."""

    __slots__ = ("_counts", "_lock")

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def add(self, boundary: str, classes: tuple[str, ...]) -> None:
        """One call of ``boundary`` recorded ``classes`` as placeholders: counted, and said once per class."""
        with self._lock:
            self._counts[boundary] = self._counts.get(boundary, 0) + 1
        for name in classes:
            warn_once(
                f"unreplayable:{boundary}:{name}",
                "chronicle_otel: boundary %r recorded a %s as an unencodable placeholder: a replay cannot answer "
                "this call from the recording. To fix: %s",
                boundary,
                name,
                remedy(name),
            )

    def counts(self) -> Mapping[str, int]:
        """``{boundary name: calls}`` so far."""
        with self._lock:
            return dict(self._counts)
