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
READ_SIDE = ("chronicle_otel.load", "chronicle_otel.replay", "chronicle_otel.cli", "chronicle_otel.pytest_plugin")


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


RECORD_MODULES = sorted(m for m in EDGES if m != ROOT and not _under(m, (*READ_SIDE, "chronicle_otel.model")))


@pytest.mark.parametrize("module", RECORD_MODULES)
def test_recording_never_imports_loading_or_replay(module: str) -> None:
    reached = sorted(m for m in closure(EDGES, module) if _under(m, ("chronicle_otel.load", "chronicle_otel.replay")))
    assert reached == [], f"{module} reaches {reached}"


LOAD_FORBIDDEN = (
    "chronicle_otel.replay",
    "chronicle_otel.export",
    "chronicle_otel.store._local",
    "chronicle_otel.config",
    "chronicle_otel.record._boundary",
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
        _under(m, ("chronicle_otel.load", "chronicle_otel.replay", "chronicle_otel.export")) for m in reached
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
    "module", ["chronicle_otel.record._boundary", "chronicle_otel.config", "chronicle_otel.export"]
)
def test_importing_the_recording_side_at_run_time_loads_no_read_side(module: str) -> None:
    loaded = _loaded_after(f"import {module}")
    assert module in loaded
    assert [m for m in loaded if _under(m, ("chronicle_otel.load", "chronicle_otel.replay"))] == []


def test_the_graph_sees_relative_and_lazy_imports() -> None:
    assert "chronicle_otel.load._assemble" in EDGES["chronicle_otel.load"]
    assert "chronicle_otel.store._local" in EDGES["chronicle_otel.store"]  # imported lazily, by name


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
