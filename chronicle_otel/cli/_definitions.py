"""Where a recorded name is defined, read from the project's own source files: nothing is imported or run.

Importing a module runs it, and the names in a trace are untrusted. ``gen-test`` writes the import of a module only
when its source, parsed here, defines what the trace names: the root boundary (a function or method decorated with
chronicle's ``boundary`` under the recorded name), or a recorded class. A trace whose ``code.function.name`` is
``scripts.cleanup.main`` does not make the test import (run) ``scripts/cleanup.py``, unless that file defines the
root boundary itself.
"""

from __future__ import annotations

import ast
import keyword
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

PACKAGE: Final = "chronicle_otel"

MAX_SOURCE_BYTES: Final = 4 << 20
"""Largest source file read."""


def is_module_name(text: str) -> bool:
    """True for a dotted name of plain ASCII identifiers, none a keyword (``pkg.mod``)."""
    return all(part.isascii() and part.isidentifier() and not keyword.iskeyword(part) for part in text.split("."))


def module_of(function: str) -> str | None:
    """``pkg.mod`` of ``pkg.mod.Class.method``: the dotted prefix of ASCII identifiers, classes dropped."""
    names = []
    for part in function.split(".")[:-1]:
        if not is_module_name(part):
            break
        names.append(part)
    # Without importing, the module/class boundary is unknown: drop trailing capitalised names (classes).
    while len(names) > 1 and names[-1][:1].isupper():
        names.pop()
    return ".".join(names) or None


def project_module(module: str, project: Path) -> Path | None:
    """The source file of ``module`` inside ``project``, when it may be imported by a generated test.

    Every part a plain ASCII identifier, no ``__main__``, no standard-library name, each package level a regular
    folder with an ``__init__.py`` (so it cannot lose to an installed module of the same name, as a folder without one
    does), no symbolic link, and the file mentioning ``chronicle_otel``.
    """
    parts = module.split(".")
    if "__main__" in parts or parts[0] in sys.builtin_module_names or parts[0] in sys.stdlib_module_names:
        return None
    folder = project
    for part in parts[:-1]:
        folder = folder / part
        init = folder / "__init__.py"
        if folder.is_symlink() or not folder.is_dir() or init.is_symlink() or not init.is_file():
            return None
    leaf = folder / parts[-1]
    candidates = [leaf / "__init__.py", leaf.with_name(f"{parts[-1]}.py")]
    for source in candidates:
        if source.is_symlink() or not source.is_file() or (leaf.is_symlink()):
            continue
        try:
            if source.stat().st_size > MAX_SOURCE_BYTES or PACKAGE.encode() not in source.read_bytes():
                return None
        except OSError:
            return None
        return source
    return None


@dataclass(frozen=True)
class BoundaryDefinition:
    """A function or method decorated as a boundary, found in a module's source.

    Attributes:
        classes: the classes it is defined in, outermost first (empty for a function).
        plain_method: it is a method called on an instance (not a classmethod or staticmethod).
    """

    classes: tuple[str, ...]
    plain_method: bool


def find_boundary(source: Path, module: str, name: str) -> BoundaryDefinition | None:
    """The function or method of ``source`` (the file of ``module``) decorated with chronicle's ``boundary`` whose
    boundary name is ``name``, or None.

    The name is the decorator's ``name=`` string, or, without one, ``module.qualname`` (the decorator's default).
    The decorator counts as chronicle's when the module imports it from chronicle_otel (``from chronicle_otel import
    boundary``, ``as`` names too) or names it on the package (``chronicle.boundary`` after ``import chronicle_otel as
    chronicle``). Functions nested in functions are not looked at: the module does not define them on import.
    """
    tree = _parse(source)
    if tree is None:
        return None
    functions, packages = _boundary_names(tree)
    bodies: list[tuple[list[ast.stmt], tuple[str, ...]]] = [(tree.body, ())]
    while bodies:
        body, classes = bodies.pop()
        for node in body:
            if isinstance(node, ast.ClassDef):
                bodies.append((node.body, (*classes, node.name)))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                default = ".".join((module, *classes, node.name))
                if any(_boundary_name(d, functions, packages, default) == name for d in node.decorator_list):
                    kinds = {getattr(d, "id", getattr(d, "attr", None)) for d in node.decorator_list}
                    plain = bool(classes) and not kinds & {"classmethod", "staticmethod"}
                    return BoundaryDefinition(classes, plain)
    return None


def defines_class(source: Path, name: str) -> bool:
    """True when ``source`` defines a class ``name`` at its top level."""
    tree = _parse(source)
    return tree is not None and any(isinstance(n, ast.ClassDef) and n.name == name for n in tree.body)


def _parse(source: Path) -> ast.Module | None:
    try:
        if source.stat().st_size > MAX_SOURCE_BYTES:
            return None
        return ast.parse(source.read_bytes())
    except (SyntaxError, ValueError, OSError, RecursionError, MemoryError):
        return None


def _boundary_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The names the module binds to chronicle's ``boundary``, and those it binds to the chronicle_otel package."""
    functions: set[str] = set()
    packages: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            if node.module == PACKAGE or node.module.startswith(PACKAGE + "."):
                functions.update(a.asname or a.name for a in node.names if a.name == "boundary")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or (alias.asname is None and alias.name.startswith(PACKAGE + ".")):
                    packages.add(alias.asname or PACKAGE)
    return functions, packages


def _boundary_name(decorator: ast.expr, functions: set[str], packages: set[str], default: str) -> str | None:
    """The boundary name ``decorator`` gives, when it is chronicle's ``boundary`` and the name can be read."""
    call = decorator if isinstance(decorator, ast.Call) else None
    target = call.func if call is not None else decorator
    chronicles = (isinstance(target, ast.Name) and target.id in functions) or (
        isinstance(target, ast.Attribute)
        and target.attr == "boundary"
        and isinstance(target.value, ast.Name)
        and target.value.id in packages
    )
    if not chronicles:
        return None
    if call is None:
        return default
    if call.args or any(kw.arg is None for kw in call.keywords):  # boundary(function), boundary(**options)
        return None
    for kw in call.keywords:
        if kw.arg == "name":
            value = kw.value.value if isinstance(kw.value, ast.Constant) else ...
            if value is None:
                return default
            return value if isinstance(value, str) else None  # computed when it runs: cannot be told here
    return default
