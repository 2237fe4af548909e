"""Paths into a recorded value, as the report writes them (``$.messages[0].content``), and the patterns of
``ignore=`` that match them.

A pattern is a path whose steps may also be ``*`` (any field), ``[*]`` (any item) or ``..name`` (``name`` at any
depth below). It matches a difference at its path or anywhere below: ``$.stream_options`` ignores every difference
inside ``stream_options``, ``$..id`` every field named ``id``, ``$.messages[*].id`` the ``id`` of each message.
"""

from __future__ import annotations

import re
from typing import Final

from ..errors import ConfigError

_ANY: Final = object()
"""The step ``*`` or ``[*]``."""
_DEEP: Final = object()
"""The step ``..``: any number of steps (none included)."""

_TOKEN = re.compile(
    r"""\.\.(?P<deep>[^.\[\]]+)        # ..name or ..*: at any depth
    |\.\.(?=\[)                    # ..[3], ..[*]
    |\.(?P<name>[^.\[\]]+)          # .name or .*
    |\[(?P<index>\d+)\]             # [3]
    |\[\*\]                         # [*]
    |\[(?P<quote>["'])(?P<key>.*?)(?P=quote)\]  # ["a.b"]
    """,
    re.VERBOSE,
)


class PathPattern:
    """One ``ignore=`` pattern (see the module's doc).

    Args:
        text: the pattern, starting with ``$``.

    Raises:
        ConfigError: a pattern that is not a path (naming the first step that cannot be read).
    """

    __slots__ = ("_steps", "text")

    def __init__(self, text: str) -> None:
        if not isinstance(text, str) or not text.startswith("$"):
            raise ConfigError("ignore", text, "a path starting with '$', such as '$.stream_options' or '$..id'")
        self.text = text
        steps: list[object] = []
        pos = 1
        while pos < len(text):
            match = _TOKEN.match(text, pos)
            if match is None:
                raise ConfigError(
                    "ignore",
                    text,
                    f"a path such as '$.metadata.request_id', '$.messages[*].id' or '$..id' "
                    f"(cannot read {text[pos:]!r})",
                )
            if match.group("deep") is not None:
                deep = match.group("deep")
                steps.extend((_DEEP, _ANY if deep == "*" else deep))
            elif match.group("name") is not None:
                name = match.group("name")
                steps.append(_ANY if name == "*" else name)
            elif match.group("index") is not None:
                steps.append(int(match.group("index")))
            elif match.group("quote") is not None:
                steps.append(match.group("key"))
            elif match.group(0) == "[*]":
                steps.append(_ANY)
            else:
                steps.append(_DEEP)
            pos = match.end()
        self._steps = tuple(steps)

    def __repr__(self) -> str:
        return f"PathPattern({self.text!r})"

    def matches(self, path: tuple[str | int, ...]) -> bool:
        """The difference at ``path`` (its segments) is at or below what this pattern names."""
        return _match(self._steps, 0, path, 0)


def _match(steps: tuple[object, ...], i: int, path: tuple[str | int, ...], j: int) -> bool:
    while i < len(steps):
        step = steps[i]
        if step is _DEEP:
            return any(_match(steps, i + 1, path, k) for k in range(j, len(path) + 1))
        if j >= len(path):
            return False
        seg = path[j]
        if step is not _ANY and not (
            step == seg if isinstance(step, int) else not isinstance(seg, int) and step == seg
        ):
            return False
        i, j = i + 1, j + 1
    return True  # every step matched: the path is the pattern's or below it
