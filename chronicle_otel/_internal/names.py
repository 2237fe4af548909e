"""The module name recorded for code defined in ``__main__``.

A program started with ``python -m package.module`` runs that module as ``__main__``; recording
``__main__.plan`` would name nothing a replay can import. The module's import name is in
``__main__.__spec__.name``; a script run by path has no spec and stays ``__main__``.
"""

from __future__ import annotations

import sys
from typing import Any


def module_name(module: str) -> str:
    """``module``, with ``__main__`` replaced by the name the program was started under (``python -m``)."""
    if module != "__main__":
        return module
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = getattr(spec, "name", None)
    return name if isinstance(name, str) and name and name != "__main__" else module


def qualified_name(obj: Any) -> str:
    """``module.qualname`` of a class or function, its module named as :func:`module_name` names it."""
    return f"{module_name(str(getattr(obj, '__module__', '?')))}.{getattr(obj, '__qualname__', '?')}"
