"""Classes and the names recorded for them, both ways, without importing anything.

The name a class is recorded as (``module.qualname``, a ``__main__`` module named as it runs), the class an already
imported module holds under a recorded name (:func:`find_loaded_class`), and the kinds of class a tag may rebuild.
"""

from __future__ import annotations

import builtins
import enum
import sys
from collections.abc import Mapping
from typing import Any, Final

from .._api import PACKAGE, defining_namespace
from .._internal.names import module_name


def _qualname(cls: type) -> str:
    return f"{module_name(cls.__module__)}.{cls.__qualname__}"


_VALIDATION_ERROR: Final = "pydantic_core._pydantic_core.ValidationError"


def find_loaded_class(name: str) -> type | None:
    """The class whose own ``__module__`` and ``__qualname__`` make ``name``, among modules already imported.

    Never imports and never runs code: the qualified name is followed through the ``__dict__`` of the module and of
    classes defined in it (no ``getattr``, so no module ``__getattr__`` hook and no descriptor runs), and the class
    found must name itself exactly ``name``: a class reached through another module's namespace
    (``myapp.tools.subprocess.Popen``) is not found. chronicle_otel's own public classes name themselves
    ``chronicle_otel.<Name>`` and are looked up in the module that defines them, when it is loaded.
    """
    parts = name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:i])
        module = sys.modules.get(module_name)
        if module is None:
            continue
        obj: Any = module
        for attr in parts[i:]:
            if obj is module and module_name == PACKAGE:
                namespace = defining_namespace(attr) or vars(module)
            else:
                namespace = getattr(obj, "__dict__", None) if obj is module else _class_dict(obj)
            if not isinstance(namespace, Mapping):
                return None
            obj = namespace.get(attr)
            if not isinstance(obj, type):
                return None
        cls: type = obj
        own_module = cls.__dict__.get("__module__")
        own_qualname = type.__dict__["__qualname__"].__get__(cls)
        if own_module == module_name and own_qualname == ".".join(parts[i:]):
            return cls
        return None
    return None


def _class_dict(obj: Any) -> Mapping[str, Any] | None:
    if not isinstance(obj, type):
        return None
    namespace = type.__dict__["__dict__"].__get__(obj)
    return namespace if isinstance(namespace, Mapping) else None


def _is_dataclass(cls: type) -> bool:
    return isinstance(cls, type) and "__dataclass_fields__" in _class_dict_chain(cls)


def _class_dict_chain(cls: type) -> set[str]:
    names: set[str] = set()
    for base in cls.__mro__:
        names.update(type.__dict__["__dict__"].__get__(base))
    return names


def _is_pydantic(cls: type) -> bool:
    pydantic = sys.modules.get("pydantic")
    base = getattr(pydantic, "BaseModel", None) if pydantic is not None else None
    return isinstance(base, type) and isinstance(cls, type) and issubclass(cls, base)


def _is_namedtuple(cls: type) -> bool:
    if not (isinstance(cls, type) and issubclass(cls, tuple)):
        return False
    fields = next((type.__dict__["__dict__"].__get__(b).get("_fields") for b in cls.__mro__ if b is not tuple), None)
    return isinstance(fields, tuple) and all(type(f) is str for f in fields)


def _is_enum(cls: type) -> bool:
    return isinstance(cls, type) and issubclass(cls, enum.Enum)


ENDS_ITERATION: Final = (StopIteration, StopAsyncIteration)
"""Exceptions that end the iteration they are raised in: raised into ``map()``, ``next()`` or a ``for`` loop they end
it silently instead of failing. Never rebuilt from a recording, as ``BaseException``-only classes are not."""


def _is_exception(cls: type) -> bool:
    return isinstance(cls, type) and issubclass(cls, Exception) and not issubclass(cls, ENDS_ITERATION)


def _is_any(cls: type) -> bool:
    return True


_BUILTIN_EXCEPTIONS: Final = {
    f"builtins.{name}": obj
    for name, obj in vars(builtins).items()
    if _is_exception(obj) and obj.__module__ == "builtins"
}
"""Builtin exceptions a recording may name: :class:`Exception` subclasses only (never ``KeyboardInterrupt``,
``SystemExit``, ``GeneratorExit`` or another ``BaseException``-only class), and never those of
:data:`ENDS_ITERATION`."""
