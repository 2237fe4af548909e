"""The architecture as an import graph: recording never reaches loading or replay; loading stays light."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import chronicle_otel

PACKAGE = Path(chronicle_otel.__file__).parent
ROOT = "chronicle_otel"


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """Every package module ``path`` imports, at any depth of its code (type-checking-only imports excepted)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - child.level + 1]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                submodules = {f"{target}.{alias.name}" for alias in child.names} & modules
                if len(submodules) < len(child.names):  # names defined in the module itself
                    found.add(target)
                found.update(submodules)
            elif isinstance(child, ast.Call) and getattr(child.func, "attr", "") == "import_module" and child.args:
                arg = child.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("."):
                    found.add(f"{package}{arg.value}")
            visit(child)

    visit(ast.parse(path.read_text()))
    return {m for m in found if m in modules}


def graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {name: imports_of(path, modules) for name, path in paths.items()}


def closure(edges: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    stack = [start]
    while stack:
        current = stack.pop()
        for nxt in edges.get(current, ()):
            if nxt not in seen and nxt != ROOT:  # the root package only re-exports, lazily
                seen.add(nxt)
                stack.append(nxt)
    return seen


EDGES = graph()
# The test helpers record and then load what they recorded: like the pytest plugin, they belong to both sides.
READ_SIDE = (
    "chronicle_otel.load",
    "chronicle_otel.replaying",
    "chronicle_otel.sampling",
    "chronicle_otel.cli",
    "chronicle_otel.corpus",
    "chronicle_otel.pytest_plugin",
    "chronicle_otel.testing",
)


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


RECORD_MODULES = sorted(m for m in EDGES if m != ROOT and not _under(m, (*READ_SIDE, "chronicle_otel.model")))


@pytest.mark.parametrize("module", RECORD_MODULES)
def test_recording_never_imports_loading_or_replay(module: str) -> None:
    reached = sorted(
        m for m in closure(EDGES, module) if _under(m, ("chronicle_otel.load", "chronicle_otel.replaying"))
    )
    assert reached == [], f"{module} reaches {reached}"


LOAD_FORBIDDEN = (
    "chronicle_otel.replaying",
    "chronicle_otel.export",
    "chronicle_otel.store._local",
    "chronicle_otel.config",
    "chronicle_otel.record",
)


@pytest.mark.parametrize(
    "module", sorted(m for m in EDGES if _under(m, ("chronicle_otel.load", "chronicle_otel.model")))
)
def test_loading_imports_no_replay_export_store_writing_or_config(module: str) -> None:
    reached = sorted(m for m in closure(EDGES, module) if _under(m, LOAD_FORBIDDEN))
    assert reached == [], f"{module} reaches {reached}"


def test_model_imports_neither_loading_nor_replay() -> None:
    reached = closure(EDGES, "chronicle_otel.model")
    assert not any(
        _under(m, ("chronicle_otel.load", "chronicle_otel.replaying", "chronicle_otel.export")) for m in reached
    )


def _loaded_after(statement: str) -> list[str]:
    code = f"import sys, json; {statement}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return [m for m in json.loads(out) if m.startswith(ROOT)]


def test_importing_the_loader_at_run_time_loads_no_recording_pipeline() -> None:
    loaded = _loaded_after("import chronicle_otel.load")
    assert "chronicle_otel.load" in loaded
    assert [m for m in loaded if _under(m, LOAD_FORBIDDEN)] == []


@pytest.mark.parametrize(
    "module", ["chronicle_otel.record._boundary", "chronicle_otel.config._configure", "chronicle_otel.export"]
)
def test_importing_the_recording_side_at_run_time_loads_no_read_side(module: str) -> None:
    loaded = _loaded_after(f"import {module}")
    assert module in loaded
    assert [m for m in loaded if _under(m, ("chronicle_otel.load", "chronicle_otel.replaying"))] == []


@pytest.mark.parametrize(
    "statement",
    [
        "from chronicle_otel.config.params import PARAMS",
        "from chronicle_otel.store import LocalStore",
        "from chronicle_otel.export import ChronicleExporter",
    ],
)
def test_the_stages_that_read_the_parameter_table_import_first_in_any_order(statement: str) -> None:
    """store and export read config's parameter table, and config's pipeline imports them: the table loads alone."""
    loaded = _loaded_after(statement)  # an import cycle would raise
    assert "chronicle_otel.config.params" in loaded
    assert "chronicle_otel.config._pipeline" not in loaded


OTLP = "chronicle_otel.otlp"
# What the OTLP/JSON reader and writer may import: the floor, the neutral leaves and the trace model they read into.
OTLP_MAY_IMPORT = (
    OTLP,
    "chronicle_otel._internal",
    "chronicle_otel.errors",
    "chronicle_otel.semconv",
    "chronicle_otel.model",
)
# Every stage above it: the read side, and the recording pipeline with its integrations.
OTLP_FORBIDDEN = (*READ_SIDE, *LOAD_FORBIDDEN, "chronicle_otel.store", "chronicle_otel.integrations")


@pytest.mark.parametrize("module", sorted(m for m in EDGES if _under(m, (OTLP,))))
def test_otlp_sits_below_every_stage(module: str) -> None:
    """Exporting (the writer) and loading (the reader) both build on otlp/: it imports neither, nor any other stage."""
    direct = sorted(m for m in EDGES[module] if not _under(m, OTLP_MAY_IMPORT))
    assert direct == [], f"{module} imports {direct}"
    reached = sorted(m for m in closure(EDGES, module) if _under(m, OTLP_FORBIDDEN))
    assert reached == [], f"{module} reaches {reached}"


def test_the_exporter_loads_no_otlp_reader_and_loading_no_otlp_writer() -> None:
    """Each side of otlp/ loads on first use: the reader's model stays out of the exporter, the SDK out of loading."""
    assert "chronicle_otel.otlp._reader" not in _loaded_after("import chronicle_otel.export")
    assert "chronicle_otel.otlp._writer" not in _loaded_after("import chronicle_otel.load")


def test_the_graph_sees_relative_and_lazy_imports() -> None:
    assert "chronicle_otel.load._assemble" in EDGES["chronicle_otel.load"]
    assert "chronicle_otel.store._local" in EDGES["chronicle_otel.store"]  # imported lazily, by name
    assert "chronicle_otel.config._configure" in EDGES["chronicle_otel.config"]
    assert "chronicle_otel.otlp._writer" in EDGES["chronicle_otel.otlp"]


def test_the_import_graph_has_no_cycles() -> None:
    """No two modules import each other, not even through a function-level import."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(EDGES.get(node, ())):
            if nxt == ROOT:
                continue
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for module in sorted(EDGES):
        if module not in state:
            visit(module, [module])
    assert cycles == []


# ------------------------------------------------------------------------------------ _internal is the ground floor

INTERNAL = "chronicle_otel._internal"
# Top-level modules that import nothing of the package: as low as _internal, which may use them.
NEUTRAL_LEAVES = (
    "chronicle_otel._api",
    "chronicle_otel.environment_variables",
    "chronicle_otel.errors",
    "chronicle_otel.semconv",
    "chronicle_otel.version",
)


def test_the_neutral_leaves_import_nothing_of_the_package() -> None:
    """Nothing but the table of public names, whose publish() each defining module calls (errors.py among them)."""
    assert {
        m: sorted(EDGES[m] - {"chronicle_otel._api"}) for m in NEUTRAL_LEAVES if EDGES[m] - {"chronicle_otel._api"}
    } == {}
    assert EDGES["chronicle_otel._api"] == set()


def test_internal_imports_nothing_above_it() -> None:
    upward = {
        (module, target)
        for module, targets in EDGES.items()
        if _under(module, (INTERNAL,))
        for target in targets
        if not _under(target, (INTERNAL, *NEUTRAL_LEAVES))
    }
    assert sorted(upward) == []


# ------------------------------------------------------------- no module takes another subpackage's private names

MODULES = set(EDGES)
PACKAGES = {module_name(p) for p in PACKAGE.rglob("__init__.py")}


def _private_owner(target: str) -> str | None:
    """The package ``target`` is private to (``chronicle_otel.record`` for ``chronicle_otel.record._spec``), or None.

    ``_internal`` is the floor every stage shares, and the root package's own private modules belong to everyone.
    """
    parts = target.split(".")
    for i in range(1, len(parts)):
        if parts[i].startswith("_") and not parts[i].startswith("__") and parts[i] != "_internal":
            return ".".join(parts[:i])
    return None


def private_imports(path: Path) -> set[str]:
    """The private modules (``a._b``) and private names (``a:_b``) of other subpackages ``path`` imports, anywhere
    in its code, type-checking-only imports included."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    return private_imports_in(path.read_text(), name, package)


def private_imports_in(source: str, name: str, package: str) -> set[str]:
    """:func:`private_imports` of the code ``source`` of module ``name``, in ``package``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                if full in MODULES:
                    found.add(full)
                elif alias.name.startswith("_"):
                    found.add(f"{target}:{alias.name}")
                else:
                    found.add(target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    crossing: set[str] = set()
    for item in found:
        module, _, attr = item.partition(":")
        if not _under(module, (ROOT,)):
            continue
        owner = _private_owner(module)
        if owner is None and attr:
            owner = module if module in PACKAGES else module.rpartition(".")[0]
        if owner is not None and not _under(name, (owner,)):
            crossing.add(item)
    return crossing


# Today's imports of another subpackage's private modules, and why they remain (issue 27 removes them).
PRIVATE_IMPORT_EXCEPTIONS: set[tuple[str, str]] = set()


def test_no_module_imports_another_subpackages_private_names() -> None:
    found = {(module_name(p), item) for p in PACKAGE.rglob("*.py") for item in private_imports(p)}
    assert sorted(found - PRIVATE_IMPORT_EXCEPTIONS) == []
    assert sorted(PRIVATE_IMPORT_EXCEPTIONS - found) == [], "an exception no longer needed: remove it from the list"


def test_the_private_import_check_sees_private_modules_and_names() -> None:
    source = """
from .._internal import hooks
from .._internal.errors import warn_once
from ..record import _instrument
from ..record._spec import wrap
from ..record.adapters import Arguments
from ..record.extension import Instrumented, _Hidden
from ._common import require
"""
    found = private_imports_in(source, "chronicle_otel.integrations.example", "chronicle_otel.integrations")
    assert found == {
        "chronicle_otel.record._instrument",  # a private module, imported by name
        "chronicle_otel.record._spec",  # a private module, names imported from it
        "chronicle_otel.record.extension:_Hidden",  # a private name of a public module
    }  # not the public modules, the shared floor, nor the package's own private modules
