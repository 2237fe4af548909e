"""Write chronicle_otel/__init__.pyi from the one table of public names (``chronicle_otel._api.PUBLIC``).

The package loads its names on first use (``chronicle_otel.__getattr__``), which type checkers cannot follow: the
stub tells them where each public name is defined. It is never edited by hand: ``tests/unit/test_public_api.py``
fails when the committed stub imports other names or modules than the table says. The script formats what it writes
with ruff (from the same environment), as the rest of the code is formatted.

Usage::

    python scripts/gen_stubs.py          # rewrite chronicle_otel/__init__.pyi
    python scripts/gen_stubs.py --check  # exit 1 when the committed stub is out of date
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STUB = REPO / "chronicle_otel" / "__init__.pyi"


def _load_table() -> tuple[dict[str, str], tuple[str, ...]]:
    # chronicle_otel/_api.py imports nothing: load it alone, without the package (whose import this stub describes).
    spec = importlib.util.spec_from_file_location("_chronicle_api", REPO / "chronicle_otel" / "_api.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.PUBLIC), tuple(module.SUBMODULES)


def render() -> str:
    """The stub's text."""
    public, submodules = _load_table()
    by_module: dict[str, list[str]] = defaultdict(list)
    for name, home in public.items():
        by_module[home].append(name)
    lines = [
        '"""Type stub of chronicle_otel, written by scripts/gen_stubs.py from chronicle_otel/_api.py: do not edit."""',
        "",
    ]
    for home in sorted(by_module):
        relative = "." + home.removeprefix("chronicle_otel.")
        names = ", ".join(f"{n} as {n}" for n in sorted(by_module[home], key=str.lower))
        lines.append(f"from {relative} import {names}")
    lines.append("from .version import __version__ as __version__")
    lines.append("")
    lines.append(f"from . import {', '.join(f'{m} as {m}' for m in sorted(submodules))}")
    lines.append("")
    lines.append("__all__ = [")
    lines.extend(f'    "{name}",' for name in sorted(["__version__", *public]))
    lines.append("]")
    return "\n".join(lines) + "\n"


def imported(text: str) -> tuple[set[tuple[str, str]], list[str]]:
    """What a stub's text says: (module, name) of every import, and its ``__all__``."""
    names: set[tuple[str, str]] = set()
    exported: list[str] = []
    for node in ast.parse(text).body:
        if isinstance(node, ast.ImportFrom):
            names.update((f"{'.' * node.level}{node.module or ''}", alias.name) for alias in node.names)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            exported = list(ast.literal_eval(node.value))
    return names, exported


def main(argv: list[str]) -> int:
    """Write the stub, or with ``--check`` say whether the committed one is current (exit 1 when not)."""
    text = render()
    if "--check" in argv:
        if not STUB.exists() or imported(STUB.read_text()) != imported(text):
            print(f"{STUB.relative_to(REPO)} is out of date: run python scripts/gen_stubs.py", file=sys.stderr)
            return 1
        return 0
    STUB.write_text(text)
    ruff = [sys.executable, "-m", "ruff"]
    subprocess.run([*ruff, "check", "--fix", "-q", str(STUB)], check=False)
    subprocess.run([*ruff, "format", "-q", str(STUB)], check=True)
    print(f"wrote {STUB.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
