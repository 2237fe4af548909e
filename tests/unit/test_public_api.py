from __future__ import annotations

import ast
import re
import types
from pathlib import Path

import chronicle_otel
from chronicle_otel._api import PUBLIC

PACKAGE = Path(chronicle_otel.__file__).parent


def test_all_is_sorted_and_complete() -> None:
    assert chronicle_otel.__all__ == sorted(chronicle_otel.__all__)
    exported = {"__version__", *PUBLIC}
    assert set(chronicle_otel.__all__) == exported
    for name in chronicle_otel.__all__:  # every name resolves, to an object, not a module
        assert not isinstance(getattr(chronicle_otel, name), types.ModuleType), name
    helpers = {"TYPE_CHECKING", "Any", "annotations"}
    names = {n for n in vars(chronicle_otel) if n.isidentifier() and not n.startswith("_")}
    stray = {n for n in names - exported - helpers if not isinstance(getattr(chronicle_otel, n), types.ModuleType)}
    assert stray == set()


def test_write_trace_replaces_trace_save() -> None:
    from chronicle_otel import load

    assert chronicle_otel.write_trace is load.write_trace
    assert "write_trace" in load.__all__
    assert not hasattr(chronicle_otel.Trace, "save")


def test_the_package_imports_lazily() -> None:
    import subprocess
    import sys

    code = "import sys, chronicle_otel; print(sorted(m for m in sys.modules if m.startswith('chronicle_otel')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['chronicle_otel', 'chronicle_otel._api', 'chronicle_otel.version']"
    assert "replay" in dir(chronicle_otel) and callable(chronicle_otel.replay)


def test_replay_is_the_function_before_and_after_the_replaying_package_is_imported() -> None:
    import subprocess
    import sys

    code = (
        "import types, chronicle_otel\n"
        "before = chronicle_otel.replay\n"
        "import chronicle_otel.replaying, chronicle_otel.replaying._run\n"
        "from chronicle_otel import replay\n"
        "assert before is chronicle_otel.replay is replay is chronicle_otel.replaying.replay\n"
        "assert callable(replay) and not isinstance(replay, types.ModuleType)\n"
        "assert isinstance(chronicle_otel.replaying, types.ModuleType)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    import chronicle_otel.replaying

    assert callable(chronicle_otel.replay) and chronicle_otel.replay is chronicle_otel.replaying.replay


def test_reexports_show_the_public_module() -> None:
    for name in chronicle_otel.__all__:
        obj = getattr(chronicle_otel, name)
        if isinstance(obj, type) or callable(obj):
            assert obj.__module__ == "chronicle_otel", name


def test_the_table_names_the_defining_modules() -> None:
    """Each public name is defined (a class or a def at module level) in the module the table gives."""
    for name, home in PUBLIC.items():
        parts = home.split(".")[1:]
        path = PACKAGE.joinpath(*parts).with_suffix(".py")
        if not path.exists():
            path = PACKAGE.joinpath(*parts, "__init__.py")
        defined = {
            node.name
            for node in ast.parse(path.read_text()).body
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        }
        assert name in defined, f"{name} is not defined in {home}"


def test_module_is_set_when_the_name_is_defined_whatever_imports_it_first() -> None:
    """Imported through its defining module, before the package is asked for it: it already shows the package's
    path, pickles by that path, and a recorded class name finds it (without running the package's __getattr__)."""
    import subprocess
    import sys

    code = (
        "import importlib, pickle, chronicle_otel\n"
        "from chronicle_otel._api import PUBLIC\n"
        "from chronicle_otel.codec import find_loaded_class\n"
        "for name, home in sorted(PUBLIC.items(), key=lambda item: item[1]):\n"
        "    value = getattr(importlib.import_module(home), name)\n"
        "    assert value.__module__ == 'chronicle_otel', (name, value.__module__)\n"
        "    assert name not in vars(chronicle_otel), name  # bound on first use only\n"
        "    if isinstance(value, type):\n"
        "        assert find_loaded_class(f'chronicle_otel.{name}') is value, name\n"
        "    assert pickle.loads(pickle.dumps(value)) is value, name\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_type_stub_is_current() -> None:
    """chronicle_otel/__init__.pyi imports every public name from its defining module, as the table says."""
    import subprocess
    import sys

    script = PACKAGE.parent / "scripts" / "gen_stubs.py"
    result = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_public_names_are_the_recorded_ones() -> None:
    """Every public module's __all__, as recorded in public_names.txt: a change to the public surface is deliberate
    (update the file with the change, and say it in CHANGELOG.md)."""
    assert public_names() == (Path(__file__).parent / "public_names.txt").read_text().splitlines()


def public_names() -> list[str]:
    """``module: name`` for the package's __all__ and every public module's."""
    import importlib

    lines = [f"chronicle_otel: {name}" for name in chronicle_otel.__all__]
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if any(part.startswith("_") and part != "__init__.py" for part in rel.parts) or rel.parts == ("__init__.py",):
            continue
        if rel.parts[0] in ("integrations", "cli"):  # optional dependencies; the CLI's surface is its commands
            continue
        module = ".".join(("chronicle_otel", *rel.with_suffix("").parts)).removesuffix(".__init__")
        lines.extend(f"{module}: {name}" for name in sorted(importlib.import_module(module).__all__))
    return lines


def test_public_modules_define_all() -> None:
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if any(part.startswith("_") and part != "__init__.py" for part in rel.parts):
            continue
        tree = ast.parse(path.read_text())
        names = {
            t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)
        }
        assert "__all__" in names, f"{rel} is public and must define __all__"


def test_span_attribute_keys_only_in_semconv() -> None:
    pattern = re.compile(r"""["']chronicle\.[a-z]""")
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "semconv.py":
            continue
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{path.relative_to(PACKAGE)}:{lineno}: {line.strip()}")
    assert offenders == []


def test_py_typed_is_shipped() -> None:
    assert (PACKAGE / "py.typed").exists()
