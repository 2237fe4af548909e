"""``chronicle gen-test``: a regression test from a recorded run, that runs as written.

The test replays the trace (``@pytest.mark.chronicle_replay``) next to a self-contained copy of it. What it needs to
run from the project root with plain ``pytest`` is written too: the imports of the recorded types its assertions use,
and a ``conftest.py`` that puts the project root on ``sys.path`` (only when the directory has none). A run that failed
gives a test that expects the recorded exception (``pytest.raises``) unless ``--expect`` says otherwise.

Recorded names are untrusted: they enter the generated code only as string literals, or as imports of modules of the
project itself whose source defines what the trace names (see :mod:`._definitions`).
"""

from __future__ import annotations

import argparse
import ast
import builtins
import dataclasses
import datetime as dt
import keyword
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final, TextIO

import orjson

from .._internal.unreplayable import remedy
from ..codec import TAG
from ..errors import ChronicleError, ConfigError
from ..load import write_trace
from ..model import Boundary, Trace, format_key
from ..replaying import ReplayOptions, Selection, check_selectors, resolve_overrides
from ..semconv import GEN_AI_PROVIDER_NAME
from . import _source
from ._definitions import defines_class, find_boundary, is_module_name, module_of, project_module
from ._output import Output, clean
from ._show import add_arguments

NAME = "gen-test"


def add_parser(sub: Any) -> None:
    """The ``gen-test`` subcommand and its options."""
    p = sub.add_parser(
        NAME,
        help="write a regression test that replays a trace",
        description="Write tests/regressions/test_<name>.py and the trace it replays (payloads inlined). The test "
        "runs from the project root with plain pytest: a conftest.py putting the project root on sys.path is "
        "written beside it when the directory has none.",
    )
    p.add_argument("trace_id", help="32 hex digits, a unique prefix of them, or latest / latest-failed / latest-error")
    add_arguments(p)
    p.add_argument("--out", default="tests/regressions", help="directory of the test (default %(default)s)")
    p.add_argument("--name", help="test name (default: root boundary and trace id)")
    p.add_argument("--force", action="store_true", help="replace a test (and trace file) of the same name")
    p.add_argument("--stub", action="append", help="stub selector (repeatable; default kind:llm)")
    p.add_argument("--live", action="append", default=[], help="live selector (repeatable)")
    p.add_argument(
        "--expect",
        action="append",
        default=[],
        help="an assertion on `result` (repeatable); recorded types it names are imported (Decimal, Intent…)",
    )
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=PYTHON_EXPR",
        help="what-if: answer the recorded call KEY (plan[0]) with the expression's value, or, for a "
        "function, with what it returns given the recorded output (repeatable)",
    )
    p.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="STATEMENT",
        help='an import the test needs, e.g. "from decimal import Decimal" (repeatable)',
    )
    p.add_argument(
        "--root-module",
        metavar="MODULE",
        help="the module that defines the root boundary, imported by the test (default: the module the trace names, "
        "only when its source in this directory defines a function decorated as that boundary)",
    )
    p.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="PREFIX",
        help="rebuild recorded classes of these modules typed (repeatable, e.g. mylib. ; the integrations the "
        "trace uses add their own)",
    )
    p.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="PATH",
        help="a path of inputs whose differences are not drift, e.g. '$.stream_options' or '$..request_id' "
        "(repeatable; the suite's [tool.chronicle] ignore applies too)",
    )
    p.add_argument(
        "--strict",
        action="append",
        default=[],
        metavar="SELECTOR[=all]",
        help="fail the test when the input of these boundaries changed (=all: on any drift of them), e.g. kind:llm "
        "(repeatable)",
    )
    p.add_argument(
        "--allow-unreplayable",
        action="store_true",
        help="write the test even when a stubbed call's recording holds values recorded as unencodable placeholders",
    )
    p.add_argument("--json", action="store_true", help="say what was written as JSON")


def _slug(text: str) -> str:
    return re.sub(r"[^0-9a-zA-Z_]+", "_", text, flags=re.ASCII).strip("_").lower()[:80] or "trace"


def _literal(text: str) -> str:
    """``text`` as a Python string literal (double-quoted when possible): recorded data enters code only this way."""
    literal = repr(text)
    if literal[0] == "'" and "'" not in text and '"' not in text:
        literal = '"' + literal[1:-1] + '"'
    if ast.literal_eval(literal) != text:  # pragma: no cover - repr() is a literal by definition
        raise ChronicleError(f"cannot write {text!r} as a Python literal")
    return literal


@dataclasses.dataclass(frozen=True)
class _RootImport:
    """The module the test imports so that the replay finds the root boundary, and what else that takes."""

    module: str | None  # None: the test asks for the import in a comment
    owner: str | None = None  # the class of a root that is a plain method: the test builds the object
    note: str | None = None  # said on stderr


def _root_import(root: Boundary, project: Path, named: str | None) -> _RootImport:
    """What the test imports for the root boundary: ``named`` (``--root-module``), else the module of its recorded
    ``code.function.name``, only when that module's source in ``project`` defines a function or method decorated as
    the boundary of the recorded name (read with :mod:`ast`: nothing is imported here, and the trace is untrusted).
    """
    boundary = f"the root boundary {_literal(root.name)}"
    if named is not None:
        source = project_module(named, project)
        found = find_boundary(source, named, root.name) if source is not None else None
        if found is None:
            why = (
                f"its source defines no function decorated as {boundary} (read, not imported)"
                if source is not None
                else f"not a source file of this project that uses chronicle_otel, not checked to define {boundary}"
            )
            return _RootImport(named, note=f"--root-module {named}: {why}; the test imports it as asked")
        return _RootImport(named, ".".join(found.classes) if found.plain_method else None)
    module = module_of(root.function) if isinstance(root.function, str) else None
    if module is None:
        return _RootImport(None, note=f"the trace names no module for {boundary}: {_NAME_IT}")
    source = project_module(module, project)
    found = find_boundary(source, module, root.name) if source is not None else None
    if found is None:
        why = (
            "its source defines no function decorated as that boundary (read, not imported)"
            if source is not None
            else "it is not a source file of this project that uses chronicle_otel"
        )
        return _RootImport(
            None,
            note=f"the test does not import {module}, which the trace names for {boundary}: {why}; {_NAME_IT}",
        )
    return _RootImport(module, ".".join(found.classes) if found.plain_method else None)


_NAME_IT: Final = "name the module that defines it with --root-module MODULE"


def _import_line(root: Boundary, module: str | None, more: bool = False) -> str:
    """The first statements of the test function: the import of the module that defines the root boundary (see
    :func:`_root_import`), so that it runs inside the replay; or a comment asking for it. ``more``: other imports
    follow it."""
    if module is not None:
        return (
            "    # Imported here, inside the replay: a configure() the module runs on import is isolated (nothing\n"
            "    # exported, nothing written to the real store).\n"
            f"    import {module}  # noqa: F401 - defines the boundaries replayed here\n{'' if more else chr(10)}"
        )
    return (
        f"    # import the module that defines the boundary {_literal(root.name)} here, so replay can find it\n"
        "    # (inside the replay: a configure() the module runs on import is then isolated), or write the test\n"
        "    # again with gen-test --root-module MODULE\n"
    )


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``chronicle gen-test``."""
    return generate(_source.load(args), args, out)


@dataclasses.dataclass
class _Imports:
    """What the generated test imports besides ``Path`` and ``pytest``."""

    module_level: list[str] = dataclasses.field(default_factory=list)  # statements at the top of the module
    in_test: list[str] = dataclasses.field(default_factory=list)  # statements inside the test, inside the replay
    notes: list[str] = dataclasses.field(default_factory=list)  # names left undefined, said on stderr


def generate(trace: Trace, args: argparse.Namespace, out: TextIO) -> int:
    """Write the test of ``trace`` as ``args`` say; print what was written."""
    root = trace.root
    if root is None:
        raise ChronicleError(f"trace {trace.trace_id} has no boundary to replay")
    slug = _slug(args.name or f"{root.name}_{trace.trace_id[:8]}")
    directory = Path(args.out)
    trace_file = directory / "traces" / f"{slug}.jsonl"
    test_file = directory / f"test_{slug}.py"
    project = Path.cwd()
    stub = args.stub or ["kind:llm"]
    check_selectors("--stub", stub, trace)
    check_selectors("--live", args.live, trace)
    options = ["stub={" + ", ".join(_literal(s) for s in dict.fromkeys(stub)) + "}"]
    if args.live:
        options.append("live={" + ", ".join(_literal(s) for s in dict.fromkeys(args.live)) + "}")
    allow = [_allow_prefix(prefix) for prefix in dict.fromkeys(getattr(args, "allow", None) or [])]
    if allow:
        options.append("allow=[" + ", ".join(_literal(a) for a in allow) + "]")
    options.extend(_policy(args))
    overrides = _overrides(args.override, trace)
    unreplayable = _unreplayable(trace, stub, args.live, overrides)
    if unreplayable and not getattr(args, "allow_unreplayable", False):
        raise ChronicleError(
            "the replay would answer "
            + "; ".join(f"{format_key(b.call_key)} with {', '.join(classes)}" for b, classes in unreplayable[:5])
            + (f" (and {len(unreplayable) - 5} more)" if len(unreplayable) > 5 else "")
            + " recorded as unencodable placeholders: the generated test could not pass. Select those calls live "
            "(--live NAME), override them (--override), or re-record with the integration that records them typed "
            f"({remedy(unreplayable[0][1][0])}); --allow-unreplayable writes the test anyway"
        )
    if overrides:
        options.append("override=OVERRIDES")
    explicit = [_import_statement(statement) for statement in dict.fromkeys(args.imports)]
    for expr in args.expect:
        _check_expression(expr)
    imports = _auto_imports(trace, args.expect, list(overrides.values()), explicit, project)
    root_import = _root_import(root, project, _root_module(args))
    owner = root_import.owner
    rerun_args = "instance=instance" if owner is not None else ""
    instance_line = (
        f"    # {_literal(root.name)} is a method of {owner}: the object it runs on (self is never recorded).\n"
        f"    # Build it as your code does.\n    instance = {root_import.module}.{owner}()\n\n"
        if owner is not None
        else ""
    )
    expected_error = (
        _expected_error(root, project, rerun_args) if root.raw_error is not None and not args.expect else None
    )
    if expected_error is not None:
        imports.in_test += expected_error.imports
    keys = _placeholder_keys(trace)
    stdlib = sorted(
        {
            "from pathlib import Path",
            *(["import os"] if keys else []),
            *(s for s in imports.module_level if s not in explicit),
        },
        key=lambda statement: (statement.startswith("from "), statement),
    )
    module_imports = [*explicit, *stdlib]
    started = dt.datetime.fromtimestamp(root.start_ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    live_lines = _live_lines(trace, stub, args.live, overrides)
    in_test = "".join(f"    {statement}\n" for statement in dict.fromkeys(imports.in_test))
    source = (
        f'"""Regression test for trace {trace.trace_id}, recorded {started}.\n\n'
        f"Generated by `chronicle gen-test`. The trace file next to it is self-contained (payloads inlined).\n"
        f'"""\n\n'
        f"{''.join(statement + chr(10) for statement in stdlib)}\n"
        f"import pytest\n\n"
        f"{''.join(statement + chr(10) for statement in explicit) + chr(10) if explicit else ''}"
        f"{_integration_lines(trace)}"
        f"ROOT_BOUNDARY = {_literal(root.name)}\n"
        f"TRACE = Path(__file__).parent / {_literal('traces')} / {_literal(trace_file.name)}\n"
        f"{expected_error.constant if expected_error is not None else ''}"
        f"{_overrides_block(overrides)}\n"
        f"{_live_comment(live_lines)}\n\n"
        f"@pytest.mark.chronicle_replay(TRACE, {', '.join(options)})\n"
        f"def test_{slug}(chronicle_replay{', monkeypatch' if keys else ''}):\n"
        f"{_placeholder_block(keys)}"
        f"{_import_line(root, root_import.module, bool(in_test))}"
        f"{in_test + chr(10) if in_test else ''}"
        f"{instance_line}"
        f"{expected_error.block if expected_error is not None else _result_block(args.expect, root.stream, rerun_args)}"
    )
    _check_module(source, test_file, _imported_names(module_imports), len(imports.in_test))
    conftest, conftest_note = _conftest(directory, project)
    if test_file.exists() and not args.force:
        raise ChronicleError(f"{test_file} exists (a test you may have edited): give --name, or --force to replace it")
    for line in live_lines:
        print(f"gen-test: {clean(line)}", file=sys.stderr)
    for note in [*imports.notes, *([root_import.note] if root_import.note else [])]:
        print(f"gen-test: {clean(note)}", file=sys.stderr)
    if owner is not None:
        print(
            f"gen-test: the root is a method of {clean(owner)}: the test builds the object with "
            f"{clean(owner)}(); change that line if it takes arguments",
            file=sys.stderr,
        )
    in_main = sorted({b.name for b in trace.boundaries if b.name.startswith("__main__.")})
    if in_main:
        print(
            f"gen-test: warning: {clean(', '.join(in_main[:3]))}{' …' if len(in_main) > 3 else ''} "
            "were recorded from a script run by path (__main__), a name no test can import: the test will not find "
            "them. Record from a module (python -m yourapp), or give the boundaries names (name=...)",
            file=sys.stderr,
        )
    write_trace(trace, trace_file)
    test_file.parent.mkdir(parents=True, exist_ok=True)
    test_file.write_text(source, encoding="utf-8")
    if conftest is not None:
        conftest.write_text(conftest_note, encoding="utf-8")
    output = Output(out)
    if args.json:
        output.json(
            {
                "test": str(test_file),
                "trace": str(trace_file),
                "conftest": str(conftest) if conftest is not None else None,
                "imports": [
                    *(s for s in module_imports if s != "from pathlib import Path"),
                    *dict.fromkeys(imports.in_test),
                ],
                "root_module": root_import.module,
                "expects_error": expected_error.type_name if expected_error is not None else None,
                "live": [dataclasses.asdict(c) for c in _live_calls(trace, stub, args.live, overrides)],
            }
        )
        return 0
    output.line(("wrote ", "green"), (str(test_file), "bold"))
    output.line("      ", str(trace_file), ("  (the trace it replays, payloads inlined)", "dim"))
    if conftest is not None:
        output.line(
            "      ", str(conftest), ("  (puts the project root on sys.path, so plain `pytest` imports it)", "dim")
        )
    elif conftest_note:
        output.line(("note: ", "yellow"), conftest_note)
    for statement in dict.fromkeys([*module_imports, *imports.in_test]):
        if statement == "from pathlib import Path":
            continue
        output.line(("imports ", "dim"), clean(statement))
    if expected_error is not None:
        output.line(
            ("expects ", "dim"),
            f"{clean(expected_error.type_name)} raised, as recorded (pytest.raises); "
            "add --expect to assert the fixed behaviour instead",
        )
    output.line(("run it: ", "dim"), f"pytest {test_file}")
    return 0


def _result_block(expectations: list[str], stream: bool = False, rerun_args: str = "") -> str:
    if stream:  # a generator root: the items it yields now, as `chronicle show` lists the recorded ones
        lines = f"    result = chronicle_replay.rerun_items({rerun_args})  # the items it yields now (sync or async)\n"
    else:
        lines = f"    result = chronicle_replay.rerun({rerun_args})  # an async root runs in its own event loop\n"
    return lines + (
        "".join(f"    assert {expr}\n" for expr in expectations)
        or (
            "    # The replay must reproduce the recording: no divergence (checked after the test).\n"
            "    # Add assertions on `result` for the behaviour you expect now.\n"
        )
    )


_STDLIB_TYPES: Final = {
    "Decimal": "from decimal import Decimal",
    "UUID": "from uuid import UUID",
    "datetime": "from datetime import datetime",
    "date": "from datetime import date",
    "timedelta": "from datetime import timedelta",
    "timezone": "from datetime import timezone",
    "PurePath": "from pathlib import PurePath",
}
"""Standard library types the codec records, imported when an expression names them (fixed text only)."""

_DEFINED: Final = frozenset({"result", "chronicle_replay", "Path", "pytest", "TRACE", "ROOT_BOUNDARY", "OVERRIDES"})
_CLASS_TAGS: Final = frozenset({"dataclass", "pydantic", "enum", "namedtuple", "exception", "custom"})
_MAX_WALK: Final = 1_000_000  # JSON nodes looked at for recorded class names


def _auto_imports(
    trace: Trace, expectations: list[str], override_exprs: list[str], explicit: list[str], project: Path
) -> _Imports:
    """The imports of the names ``--expect`` and ``--override`` expressions use and nothing defines: the standard
    library types the codec records (module level), and recorded classes of the project's own modules (inside the
    test, for ``--expect`` only: importing them runs the module, which must happen inside the replay)."""
    imports = _Imports()
    defined = _DEFINED | _bound_names(explicit) | set(dir(builtins))
    recorded: dict[str, set[str]] | None = None
    for option, exprs in (("--expect", expectations), ("--override", override_exprs)):
        for name in dict.fromkeys(n for expr in exprs for n in _free_names(expr)):
            if name in defined:
                continue
            if recorded is None:
                recorded = _recorded_classes(trace)
            classes = sorted(recorded.get(name, ()))
            statement = _class_import(name, classes[0], project) if len(classes) == 1 else None
            if statement is not None and option == "--expect":
                imports.in_test.append(statement)
            elif name in _STDLIB_TYPES:
                imports.module_level.append(_STDLIB_TYPES[name])
            elif len(classes) > 1:
                imports.notes.append(
                    f"{option} uses {name}, recorded as several classes ({', '.join(classes[:5])}): "
                    f"add --import for the one meant"
                )
            elif classes and (module_of(classes[0]) or "").split(".")[0] == "__main__":
                imports.notes.append(
                    f"{option} uses {name}, recorded as {classes[0]}: a script run by path records its names under "
                    "__main__, which a test cannot import; record from a module (python -m yourapp) instead"
                )
            elif classes:
                module = module_of(classes[0]) or "?"
                where = "defined in the project" if statement is not None else "not a module of this project"
                imports.notes.append(
                    f"{option} uses {name}, recorded as {classes[0]}, which gen-test does not import "
                    f"({where}; an --override runs outside the replay): add --import 'from {module} import {name}'"
                )
            else:
                imports.notes.append(f"{option} uses {name}, which nothing defines: add --import")
            defined = defined | {name}
    return imports


def _free_names(expr: str) -> list[str]:
    """The names ``expr`` reads that it does not bind itself (comprehension variables, lambda parameters)."""
    tree = ast.parse(expr.strip(), mode="eval")
    bound: set[str] = set()
    used: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (used.append(node.id) if isinstance(node.ctx, ast.Load) else bound.add(node.id))
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return [name for name in dict.fromkeys(used) if name not in bound]


def _bound_names(statements: list[str]) -> set[str]:
    """The names import statements bind (``import a.b`` binds ``a``)."""
    names: set[str] = set()
    for statement in statements:
        for node in ast.parse(statement).body:
            if isinstance(node, ast.Import):
                names.update(a.asname or a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                names.update(a.asname or a.name for a in node.names)
    return names


def _recorded_classes(trace: Trace) -> dict[str, set[str]]:
    """``{importable name: {recorded class names}}`` of the typed values and exceptions of the trace's payloads
    (``Intent`` for ``supportbot.agent.Intent``, ``Outer`` for ``supportbot.agent.Outer.Inner``)."""
    found: dict[str, set[str]] = {}
    seen = 0

    def add(class_name: Any) -> None:
        if not isinstance(class_name, str):
            return
        module = module_of(class_name)
        if module is None:
            return
        name = class_name[len(module) + 1 :].split(".")[0]
        if name.isascii() and name.isidentifier() and not keyword.iskeyword(name):
            found.setdefault(name, set()).add(class_name)

    for b in trace.boundaries:
        for payload in (b.raw_input, b.raw_output, b.raw_error):
            if payload is None or not payload.complete:
                continue
            try:
                value = orjson.loads(payload.text)
            except orjson.JSONDecodeError:
                continue
            if payload is b.raw_error and isinstance(value, dict):
                add(value.get("type"))
            stack = [value]
            while stack and seen < _MAX_WALK:
                node = stack.pop()
                seen += 1
                if isinstance(node, dict):
                    if node.get(TAG) in _CLASS_TAGS:
                        add(node.get("class"))
                    stack.extend(node.values())
                elif isinstance(node, list):
                    stack.extend(node)
    return found


def _class_import(name: str, class_name: str, project: Path) -> str | None:
    """``from pkg.mod import Name`` when ``class_name`` is ``Name`` (or a class in it) of a module of the project
    (see :func:`~._definitions.project_module`) whose source defines the class ``Name``; else None."""
    module = module_of(class_name)
    if module is None or class_name[len(module) + 1 :].split(".")[0] != name:
        return None
    source = project_module(module, project)
    if source is None or not defines_class(source, name):
        return None
    return f"from {module} import {name}"


@dataclasses.dataclass(frozen=True)
class _ExpectedError:
    """How the test of a failed run expects its recorded exception."""

    type_name: str
    constant: str  # module-level lines
    block: str  # the test's statements after its imports
    imports: list[str]  # in the test, before the block


def _expected_error(root: Boundary, project: Path, rerun_args: str = "") -> _ExpectedError | None:
    """``pytest.raises`` of the exception the recorded run raised: a builtin by name, a class of the project's own
    modules imported inside the test, any other class compared by its qualified name (a class the replay may not
    rebuild comes back as a ``ReplayedError`` that keeps it in ``type_name``)."""
    payload = root.raw_error
    if payload is None or not payload.complete:
        return None
    try:
        envelope = orjson.loads(payload.text)
    except orjson.JSONDecodeError:
        return None
    type_name = envelope.get("type") if isinstance(envelope, dict) else None
    if not isinstance(type_name, str) or not type_name:
        return None
    comment = (
        f"    # The recorded run failed with {_literal(type_name)}: this test expects the replay to raise it\n"
        "    # too. Once the bug is fixed, assert the behaviour you expect instead (gen-test --expect ...).\n"
    )
    rerun = f"        chronicle_replay.rerun({rerun_args})  # an async root runs in its own event loop\n"
    short = type_name.removeprefix("builtins.")
    builtin = getattr(builtins, short, None) if "." not in short and short.isidentifier() else None
    if isinstance(builtin, type) and issubclass(builtin, BaseException):
        return _ExpectedError(type_name, "", f"{comment}    with pytest.raises({short}):\n{rerun}", [])
    module = module_of(type_name)
    statement = _class_import(type_name[len(module) + 1 :].split(".")[0], type_name, project) if module else None
    if module is not None and statement is not None:
        qualname = type_name[len(module) + 1 :]
        if all(part.isascii() and part.isidentifier() and not keyword.iskeyword(part) for part in qualname.split(".")):
            return _ExpectedError(type_name, "", f"{comment}    with pytest.raises({qualname}):\n{rerun}", [statement])
    block = (
        f"{comment}"
        "    with pytest.raises(BaseException) as raised:\n"
        f"{rerun}"
        "    error = raised.value\n"
        '    assert getattr(error, "type_name", f"{type(error).__module__}.{type(error).__qualname__}")'
        " == RECORDED_ERROR\n"
    )
    return _ExpectedError(type_name, f"RECORDED_ERROR = {_literal(type_name)}\n", block, [])


_CONFTEST_MARK: Final = "Written by `chronicle gen-test`"


def _conftest(directory: Path, project: Path) -> tuple[Path | None, str]:
    """The ``conftest.py`` to write in ``directory`` and its text, or None and why none is written.

    Plain ``pytest`` puts a test's own folder on ``sys.path``, not the project root (``python -m pytest`` adds the
    working directory): the conftest adds the root, found from its own place, so the project's modules import.
    """
    conftest = directory / "conftest.py"
    if conftest.exists() or conftest.is_symlink():
        return None, ""
    try:
        depth = len(directory.resolve().relative_to(project.resolve()).parts)
    except (ValueError, OSError):
        return None, (
            f"{directory} is outside the project ({project}): run the test from the project root with "
            "`python -m pytest`, or set pythonpath in the pytest configuration"
        )
    text = (
        f'"""{_CONFTEST_MARK}: the tests here import the project\'s modules. Plain `pytest` puts this\n'
        "folder on sys.path, not the project root (`python -m pytest` adds the working directory): add the root.\n"
        '"""\n\n'
        "import sys\n"
        "from pathlib import Path\n\n"
        f"PROJECT_ROOT = str(Path(__file__).resolve().parents[{depth}])\n"
        "if PROJECT_ROOT not in sys.path:\n"
        "    sys.path.insert(0, PROJECT_ROOT)\n"
    )
    return conftest, text


@dataclasses.dataclass(frozen=True)
class _LiveCalls:
    """The boundaries of one name and kind that run their current code in the replay of the generated test."""

    kind: str
    name: str
    calls: int
    root: bool


_MAX_LIVE_LISTED = 50


def _modes(
    trace: Trace, stub: list[str], live: list[str], overridden: Iterable[str] = ()
) -> list[tuple[Boundary, str]]:
    """The recorded calls ``rerun()`` makes under the selectors, each with how it is answered (``stub``, ``live`` or
    ``override``), in call order.

    The decision is the replay's own (:class:`~chronicle_otel.replaying.Selection`). ``rerun()`` calls the root; a call
    below it runs only when no boundary above it is stubbed (a stub answers for its whole subtree), and runs live
    when it is not stubbed itself.
    """
    options = ReplayOptions(stub=tuple(dict.fromkeys(stub)), live=tuple(dict.fromkeys(live)))
    selection = Selection(trace, options)
    answered = set(resolve_overrides(dict.fromkeys(overridden), trace))  # an overridden call is stubbed
    mode = {
        b.span_id: "override" if b.span_id in answered else selection.mode(b.name, b.kind) for b in trace.boundaries
    }
    runs: dict[str, bool] = {}

    def called(b: Boundary) -> bool:
        chain: list[Boundary] = []
        current: Boundary | None = b
        while current is not None and current.span_id not in runs:
            chain.append(current)
            current = current.parent
        if current is None:
            known = chain[-1] is trace.root  # another top-level boundary: rerun() does not call it
        else:
            known = runs[current.span_id] and mode[current.span_id] == "live"
        for node in reversed(chain):
            runs[node.span_id] = known
            known = known and mode[node.span_id] == "live"
        return runs[b.span_id]

    return [(b, mode[b.span_id]) for b in trace.boundaries if called(b)]


def _unreplayable(
    trace: Trace, stub: list[str], live: list[str], overridden: Iterable[str] = ()
) -> list[tuple[Boundary, tuple[str, ...]]]:
    """The calls the replay answers from a recording that holds placeholders, with their classes."""
    out = []
    for b, mode in _modes(trace, stub, live, overridden):
        classes = b.unreplayable if mode == "stub" else ()
        if classes:
            out.append((b, classes))
    return out


def _root_module(args: argparse.Namespace) -> str | None:
    """``--root-module``, checked to be a module name (it is written into the test), or None."""
    named = getattr(args, "root_module", None)
    if named is None:
        return None
    text = str(named).strip()
    if not (text and is_module_name(text)) or "__main__" in text.split("."):
        raise ChronicleError(f"--root-module {named!r}: expected a module name such as 'myapp.agent'")
    return text


def _allow_prefix(prefix: str) -> str:
    """A module prefix for ``allow=`` (``mylib.`` or ``mylib.models``): dotted identifiers only."""
    text = prefix.strip()
    parts = text.removesuffix(".").split(".")
    if not text or not all(p.isascii() and p.isidentifier() for p in parts):
        raise ChronicleError(f"--allow {prefix!r}: expected a module prefix such as 'mylib.' or 'mylib.models'")
    return text


def _live_calls(trace: Trace, stub: list[str], live: list[str], overridden: Iterable[str] = ()) -> list[_LiveCalls]:
    """The recorded calls that will run live under the selectors, by kind and name in call order."""
    groups: dict[tuple[str, str], _LiveCalls] = {}
    for b, mode in _modes(trace, stub, live, overridden):
        if mode != "live":
            continue
        seen = groups.get((b.kind, b.name))
        calls = 1 if seen is None else seen.calls + 1
        is_root = b is trace.root or (seen is not None and seen.root)
        groups[(b.kind, b.name)] = _LiveCalls(b.kind, b.name, calls, is_root)
    return list(groups.values())


def _tool_calls(live_calls: list[_LiveCalls]) -> int:
    return sum(c.calls for c in live_calls if c.kind == "tool" and not c.root)


def _live_lines(trace: Trace, stub: list[str], live: list[str], overridden: Iterable[str] = ()) -> list[str]:
    """The live calls of the generated test, one line each (recorded names as Python literals), and for tools that
    run live, the ``--stub`` options that answer them from the recording."""
    live_calls = _live_calls(trace, stub, live, overridden)
    if not live_calls:
        return ["No boundary runs live: every call is answered from the recording."]
    lines = ["Boundaries that run LIVE (their current code runs; the others answer from the recording):"]
    shown = live_calls[:_MAX_LIVE_LISTED]
    kind_width = max(len(_literal(c.kind)) for c in shown)
    name_width = max(len(_literal(c.name)) for c in shown)
    for c in shown:
        count = f"{c.calls} call{'s' if c.calls != 1 else ''}"
        tail = "  (the root: the code under test)" if c.root else ""
        lines.append(f"  {_literal(c.kind):{kind_width}}  {_literal(c.name):{name_width}}  {count}{tail}")
    if len(live_calls) > len(shown):
        lines.append(f"  … and {len(live_calls) - len(shown)} more")
    tools = _tool_calls(live_calls)
    with_tools = [*dict.fromkeys([*stub, "kind:tool"])]
    if tools and _tool_calls(_live_calls(trace, with_tools, live, overridden)) < tools:
        options = " ".join(f"--stub {selector}" for selector in with_tools)
        lines.append("Tools that run live call what they called when recorded:")
        lines.append(f"re-generate with --stub kind:tool to answer them from the recording ({options}).")
    return lines


def _live_comment(lines: list[str]) -> str:
    """``lines`` as a comment block of the generated module: control characters escaped, so no line break can
    leave the comment."""
    return "".join(f"# {clean(line)}\n" for line in lines)


_INTEGRATIONS: Final = {
    "openai": "chronicle_openai",
    "anthropic": "chronicle_anthropic",
    "langchain": "chronicle_langchain",
    "pydantic_ai": "chronicle_pydantic_ai",
    "openai_agents": "chronicle_openai_agents",
    "litellm": "chronicle_litellm",
    "llama_index": "chronicle_llama_index",
}
"""Integrations a generated test switches on when the trace has their boundaries (fixed text only): each names its
boundaries ``<integration>.…``."""


_PROVIDER_KEYS: Final = (
    ("openai", ("OPENAI_API_KEY",)),
    ("anthropic", ("ANTHROPIC_API_KEY",)),
    ("gemini", ("GEMINI_API_KEY", "GOOGLE_API_KEY")),
    ("google", ("GEMINI_API_KEY", "GOOGLE_API_KEY")),
    ("mistral", ("MISTRAL_API_KEY",)),
    ("groq", ("GROQ_API_KEY",)),
    ("cohere", ("CO_API_KEY", "COHERE_API_KEY")),
)
"""Providers (a substring of the recorded ``gen_ai.provider.name``) and the variables their SDK clients read their
API key from (fixed text only)."""

_INTEGRATION_PROVIDER: Final = {"openai": "openai", "anthropic": "anthropic", "openai_agents": "openai"}
"""The provider of every boundary of an integration that talks to one provider only."""

PLACEHOLDER_KEY: Final = "chronicle-replay-placeholder"
"""The value a generated test gives an API key variable the environment lacks."""


def _placeholder_keys(trace: Trace) -> list[str]:
    """The API key variables of the providers whose SDK or framework calls the trace holds: their clients refuse to
    be built without one, even when every call is replayed."""
    providers: set[str] = set()
    for b in trace.boundaries:
        integration = b.name.partition(".")[0]
        if integration not in _INTEGRATIONS:
            continue
        if integration in _INTEGRATION_PROVIDER:
            providers.add(_INTEGRATION_PROVIDER[integration])
        recorded = b.span.attributes.get(GEN_AI_PROVIDER_NAME)
        if isinstance(recorded, str):
            providers.add(recorded.lower())
    keys: dict[str, None] = {}
    for fragment, names in _PROVIDER_KEYS:
        if any(fragment in provider for provider in providers):
            keys.update(dict.fromkeys(names))
    return list(keys)


def _placeholder_block(keys: list[str]) -> str:
    """The test's first lines: a placeholder for each API key variable the environment lacks (none is ever sent)."""
    if not keys:
        return ""
    names = ", ".join(_literal(k) for k in keys) + ("," if len(keys) == 1 else "")
    return (
        "    # SDK clients refuse to be built without an API key, even when every call is replayed: a placeholder\n"
        "    # where the environment has none (nothing is sent: the replay answers the calls and blocks the network).\n"
        f"    for name in ({names}):\n"
        "        if not os.environ.get(name):\n"
        f"            monkeypatch.setenv(name, {_literal(PLACEHOLDER_KEY)})\n"
    )


def _integration_lines(trace: Trace) -> str:
    """Imports and ``instrument()`` calls of the integrations whose boundaries the trace holds: without them the
    SDK and framework calls would not be stubbed (the replay would call the model) and the recorded types of their
    packages would not be rebuilt (each integration adds its packages to the allow-list)."""
    lines = ""
    for integration, alias in _INTEGRATIONS.items():
        if any(b.name.startswith(f"{integration}.") for b in trace.boundaries):
            lines += f"from chronicle_otel.integrations import {integration} as {alias}\n\n{alias}.instrument()\n\n"
    return lines


def _check_expression(expr: str, option: str = "--expect") -> None:
    try:
        ast.parse(expr, mode="eval")
    except SyntaxError as exc:
        raise ChronicleError(f"{option} {expr!r} is not a Python expression: {exc.msg}") from None


def _import_statement(statement: str) -> str:
    """``statement`` when it is one import statement (``import x`` / ``from x import y``)."""
    try:
        tree = ast.parse(statement.strip())
    except SyntaxError as exc:
        raise ChronicleError(f"--import {statement!r} is not an import statement: {exc.msg}") from None
    if len(tree.body) != 1 or not isinstance(tree.body[0], (ast.Import, ast.ImportFrom)):
        raise ChronicleError(f"--import {statement!r} is not one import statement ('from decimal import Decimal')")
    node = tree.body[0]
    if isinstance(node, ast.ImportFrom) and node.module == "__future__":
        raise ChronicleError(f"--import {statement!r}: a __future__ import cannot follow the test's own imports")
    for alias in node.names:
        bound = (alias.asname or alias.name).split(".")[0]
        if alias.name == "*":
            raise ChronicleError(f"--import {statement!r}: name what to import (no *)")
        if bound in _RESERVED_NAMES:
            raise ChronicleError(f"--import {statement!r} would replace {bound!r}, which the generated test uses")
    return ast.unparse(node)


_RESERVED_NAMES: Final = frozenset(
    {"Path", "pytest", "ROOT_BOUNDARY", "TRACE", "OVERRIDES", "chronicle_replay", "result"}
)


def _policy(args: argparse.Namespace) -> list[str]:
    """The marker's ``ignore=`` and ``strict=`` of ``--ignore`` and ``--strict``, checked as a replay checks them."""
    ignore = list(dict.fromkeys(getattr(args, "ignore", None) or []))
    strict: dict[str, str] = {}
    for option in getattr(args, "strict", None) or []:
        selector, _, level = option.partition("=")
        strict[selector.strip()] = level.strip() or "input"
    try:
        ReplayOptions(ignore=ignore, strict=strict)  # type: ignore[arg-type]  # checked by ReplayOptions
    except ConfigError as exc:
        raise ChronicleError(f"--{exc.name}: {exc}") from None
    out = []
    if ignore:
        out.append("ignore=[" + ", ".join(_literal(p) for p in ignore) + "]")
    if strict:
        out.append("strict={" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in strict.items()) + "}")
    return out


def _overrides(options: list[str], trace: Trace) -> dict[str, str]:
    """``--override KEY=EXPR`` options: each key checked against the trace, each expression parsed (never run)."""
    overrides: dict[str, str] = {}
    for option in options:
        key, sep, expr = option.partition("=")
        if not sep or not key.strip() or not expr.strip():
            raise ChronicleError(f"--override {option!r}: expected KEY=PYTHON_EXPR, e.g. 'plan[0]=...'")
        _check_expression(expr.strip(), "--override")
        overrides[key.strip()] = expr.strip()
    resolve_overrides(dict.fromkeys(overrides), trace)  # every key names recorded calls
    return overrides


def _overrides_block(overrides: dict[str, str]) -> str:
    if not overrides:
        return ""
    lines = "".join(f"    {_literal(key)}: (\n        {expr}\n    ),\n" for key, expr in overrides.items())
    return f"# What-if answers given instead of the recording (see report.overrides).\nOVERRIDES = {{\n{lines}}}\n"


def _imported_names(statements: list[str]) -> set[str]:
    names: set[str] = set()
    for statement in statements:
        for node in ast.parse(statement.strip()).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update(a.name for a in node.names)
    return names


def _check_module(
    source: str, path: Path, extra_imports: frozenset[str] | set[str] = frozenset(), in_test_imports: int = 0
) -> None:
    """The generated module parses, its only top-level statements are the expected kinds (importing only ``Path``,
    ``pytest`` and ``extra_imports``), and the test function's imports come first: the module of the root boundary
    and ``in_test_imports`` recorded classes, at most (after the API key placeholders, when any)."""
    try:
        tree = ast.parse(source, filename=str(path))
        compile(tree, str(path), "exec", dont_inherit=True)  # what parses but cannot compile: `await` outside async
    except SyntaxError as exc:  # an --expect or --override expression that cannot stand where it is written
        raise ChronicleError(f"the generated test would not compile ({exc.msg}); nothing written") from None
    allowed = (ast.Expr, ast.ImportFrom, ast.Import, ast.Assign, ast.FunctionDef)
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    imported = {a.name for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names}
    body = functions[0].body if len(functions) == 1 else []
    if body and isinstance(body[0], ast.For):  # the API key placeholders, before the imports they are for
        body = body[1:]
    imports_in_body = [i for i, node in enumerate(body) if isinstance(node, (ast.Import, ast.ImportFrom))]
    if (
        len(functions) != 1
        or not all(isinstance(node, allowed) for node in tree.body)
        or not {"Path", "pytest"} <= imported <= {"Path", "pytest", *_INTEGRATIONS, *extra_imports}
        or imports_in_body != list(range(len(imports_in_body)))
        or len(imports_in_body) > 1 + in_test_imports
    ):  # pragma: no cover - the template has this shape
        raise ChronicleError("the generated test has an unexpected shape; nothing written")
