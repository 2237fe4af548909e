from __future__ import annotations

import ast
import re
import types
from pathlib import Path

import chronicle_otel

PACKAGE = Path(chronicle_otel.__file__).parent


def test_all_is_sorted_and_complete() -> None:
    assert chronicle_otel.__all__ == sorted(chronicle_otel.__all__)
    exported = {"__version__", *chronicle_otel._EXPORTS}
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
    assert out.strip() == "['chronicle_otel', 'chronicle_otel.version']"
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
