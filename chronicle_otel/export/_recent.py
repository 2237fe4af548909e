"""A bounded memory of recently written keys whose resident size stays flat however long the process runs.

An ``OrderedDict`` bounded by evicting its oldest entry is the obvious structure, and at 100,000 entries it is not
flat: deletions leave dead slots, the table is rebuilt every so many insertions (a fresh multi-megabyte block while
the old one is still alive), and the C allocator keeps both blocks' memory. Over a million kept traces the process
grew by 14 MiB in steps, long after it had warmed up.

:class:`RecentMap` keeps two generations of plain dicts instead. Writes go to the newer one; when it holds half the
capacity's weight, the older one is dropped whole and the newer one takes its place. Every generation grows the same
way from empty, so the allocator reuses the blocks the previous one freed. A key written since the last two
rotations is remembered; one written earlier is forgotten: the bound is at least half, at most all of the capacity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["RecentMap"]

K = TypeVar("K")
V = TypeVar("V")


def _one(value: object) -> int:
    return 1


class RecentMap(Generic[K, V]):
    """The most recently written keys and their values, within ``capacity`` units of ``weight`` (1 per key by
    default). Reading a key does not refresh it; writing it (:meth:`put`, :meth:`update`) does."""

    __slots__ = ("_before", "_before_weight", "_half", "_now", "_now_weight", "_weight")

    def __init__(self, capacity: int, weight: Callable[[V], int] = _one) -> None:
        if capacity < 2:
            raise ValueError("capacity must be at least 2")
        self._half = capacity // 2
        self._weight = weight
        self._now: dict[K, V] = {}
        self._before: dict[K, V] = {}
        self._now_weight = 0
        self._before_weight = 0

    def __contains__(self, key: K) -> bool:
        return key in self._now or key in self._before

    def __len__(self) -> int:
        return len(self._now) + len(self._before)

    @property
    def weight(self) -> int:
        """The summed weight of the values held."""
        return self._now_weight + self._before_weight

    def get(self, key: K, default: V | None = None) -> V | None:
        """The value of ``key``, or ``default``."""
        value = self._now.get(key)
        if value is None:
            value = self._before.get(key)
        return default if value is None else value

    def pop(self, key: K, default: V | None = None) -> V | None:
        """Forget ``key``; its value, or ``default``."""
        value = self._now.pop(key, None)
        if value is not None:
            self._now_weight -= self._weight(value)
        other = self._before.pop(key, None)
        if other is not None:
            self._before_weight -= self._weight(other)
            if value is None:
                value = other
        return default if value is None else value

    def put(self, key: K, value: V) -> None:
        """Remember ``value`` for ``key`` (a newest write)."""
        old = self._before.pop(key, None)
        if old is not None:
            self._before_weight -= self._weight(old)
        old = self._now.get(key)
        if old is not None:
            self._now_weight -= self._weight(old)
        self._now[key] = value
        self._now_weight += self._weight(value)
        if self._now_weight >= self._half:
            self._before = self._now
            self._before_weight = self._now_weight
            self._now = {}
            self._now_weight = 0

    def update(self, key: K, change: Callable[[V | None], V]) -> None:
        """Write ``change(old value or None)`` for ``key``; ``change`` may modify the old value in place."""
        old = self._now.get(key)
        if old is None:
            old = self._before.get(key)
        before = 0 if old is None else self._weight(old)
        new = change(old)
        # the old value's weight is taken off where it was held; put() then counts the new one
        if key in self._now:
            self._now_weight -= before
            del self._now[key]
        elif key in self._before:
            self._before_weight -= before
            del self._before[key]
        self.put(key, new)
