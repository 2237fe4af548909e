"""The classes decoding may rebuild: the types registered with :func:`register_type`, and allow-lists.

Registration is the allow-list of a type that needs its own encoder and decoder; an allow-list (``allow=["myapp."]``)
names the modules whose classes of a known kind may be rebuilt.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from .._api import publish
from ._classes import _qualname


@dataclasses.dataclass(frozen=True)
class _Registered:
    cls: type
    name: str
    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]


_registry_by_class: dict[type, _Registered] = {}
_registry_by_name: dict[str, _Registered] = {}
_on_register: list[Callable[[], None]] = []
"""Called when a type is registered: what was decided per class before it is forgotten (the encoder chosen)."""


def register_type(
    cls: type,
    *,
    encode: Callable[[Any], Any],
    decode: Callable[[Any], Any],
    name: str | None = None,
) -> None:
    """Teach the codec a type: how to turn it into encodable data and back.

    Registered types are always rebuilt by the decoder (registration is the allow-list).

    Args:
        cls: the type; subclasses use the same functions unless registered themselves.
        encode: turns an instance into a value the codec can encode (JSON natives or other known types).
        decode: turns that decoded value back into an instance.
        name: the stable name recorded in traces; default ``module.qualname`` of ``cls``.

    Example::

        register_type(Money, encode=lambda m: [str(m.amount), m.currency], decode=lambda d: Money(*d))
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_type() needs a class, got {cls!r}")
    entry = _Registered(cls, name or _qualname(cls), encode, decode)
    _registry_by_class[cls] = entry
    _registry_by_name[entry.name] = entry
    for forget in _on_register:
        forget()


AllowList = Iterable[str]


def _allowed(name: str, allow: tuple[str, ...]) -> bool:
    for prefix in allow:
        if not isinstance(prefix, str) or not prefix:
            continue
        if prefix.endswith("."):
            if name.startswith(prefix):
                return True
        elif name == prefix or name.startswith(prefix + "."):
            return True
    return False


publish(__name__, globals())
