"""pytest plugin: turn a recorded trace into a regression test.

Usage::

    @pytest.mark.chronicle_replay("tests/traces/incident-42.jsonl", stub={"kind:llm"})
    def test_guardrail_blocks_share_count_confusion(chronicle_replay):
        result = chronicle_replay.rerun()
        assert result.status == "blocked"

The marker takes the trace source (an OTLP/JSON file or a store directory) and the keyword arguments of
:func:`chronicle_otel.replay` (``stub``, ``live``, ``default``, ``on_input_mismatch``, ``on_missing``,
``strict``, ``ignore``, ``changed``, ``allow``, ``emit_spans``, ``block_network``, ``allow_hosts``, ``override``),
plus ``trace_id`` and ``check_report`` (default True: when the test body ends, a report with divergences, or with
drift that ``strict=`` makes fail, fails the test). The ``chronicle_replay`` fixture is the active
:class:`~chronicle_otel.replaying.ReplayRun`; it works in sync tests and in pytest-asyncio tests (use
``await chronicle_replay.arerun()`` for an async root). A failing test shows the replay report.

The network is blocked during the test (``block_network=True``): only this machine is reachable, and an attempt
to reach anything else fails the test, naming the boundary that made it. That holds in the test's own process only:
child processes it starts (``subprocess``, ``os.system``, ``multiprocessing`` by spawn or forkserver) are not
covered. ``--chronicle-allow-network`` turns the
guard off for the whole run (``block_network=`` on a marker still wins).

Drift is never silent, whether the test passes or fails: after the tests, a ``chronicle replay drift`` section lists
each replayed test whose report has divergences, drift or changes (by boundary, with why each input changed and the
first lines of each diff), and apart from them its declared intended changes; the JUnit XML has them as properties
(``chronicle_replay.drift``, the count, one ``chronicle_replay.<kind>`` per finding, ``chronicle_replay.intended``);
``--chronicle-report PATH`` writes every replayed test's report as JSON; and a passing test whose report has drift
issues a :class:`~chronicle_otel.ChronicleWarning`, shown in pytest's warnings summary.

The whole suite's defaults go in the ``[tool.chronicle]`` table of ``pyproject.toml`` (the one beside pytest's
configuration, else in the root directory): ``ignore``, ``strict``, ``on_input_mismatch``, ``on_missing``,
``block_network``, ``allow_hosts`` and ``allow``, as :func:`chronicle_otel.replay` takes them. A marker's options win;
its ``ignore`` paths add to the suite's, and its ``strict`` selectors to the suite's.

Configuration (command line, then ini, then environment):
    ``--chronicle-payloads`` / ``chronicle_payloads`` / ``$CHRONICLE_PAYLOADS``: the shared payload store
    (``s3://bucket/prefix``) for payloads cut on spans.
    ``--chronicle-store`` / ``chronicle_store`` / ``$CHRONICLE_HOME``: the local store, asked after it.
    ``--chronicle-traces`` / ``chronicle_traces``: directory where relative trace paths are looked up
    (after the test file's directory).
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
import warnings
from collections.abc import Generator, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import orjson
import pytest

from . import environment_variables as env
from .errors import ChronicleWarning, ConfigError
from .load import load_trace
from .model import format_key
from .replaying import Finding, ReplayOptions, ReplayReport, ReplayRun, replay
from .store.reader import is_store

__all__ = ["chronicle_replay"]

_RUN = pytest.StashKey[ReplayRun]()
_FAILED = pytest.StashKey[bool]()
_CHECK = pytest.StashKey[bool]()
_SOURCE = pytest.StashKey[str]()
_WARNED = pytest.StashKey[bool]()
_ENTRY = pytest.StashKey[dict[str, Any]]()

_SUITE = pytest.StashKey[dict[str, Any]]()
_SUITE_KEYS: Final = ("ignore", "strict", "on_input_mismatch", "on_missing", "block_network", "allow_hosts", "allow")
"""The options ``[tool.chronicle]`` may set for the whole suite."""

_DRIFT_SECTIONS: Final = ("divergences", "drift", "changes")
"""The report's lists counted as a test's drift (overrides are asked for, session variables are information)."""
_SHOWN_LINES: Final = 3
"""The lines of each finding's diff shown in the terminal summary."""
_REPORT_ATTRIBUTE: Final = "chronicle_replay"
"""The attribute of a test's teardown report holding its replay entry (carried to the xdist controller)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register the chronicle options."""
    group = parser.getgroup("chronicle", "chronicle_otel replay")
    group.addoption(
        "--chronicle-store", dest="chronicle_store", help="payload store directory (default $CHRONICLE_HOME)"
    )
    group.addoption(
        "--chronicle-payloads",
        dest="chronicle_payloads",
        help="payload store for payloads cut on spans: s3://bucket/prefix or a store directory "
        "(default $CHRONICLE_PAYLOADS)",
    )
    group.addoption("--chronicle-traces", dest="chronicle_traces", help="directory of trace files used by tests")
    group.addoption(
        "--chronicle-allow-network",
        dest="chronicle_allow_network",
        action="store_true",
        default=False,
        help="let chronicle_replay tests reach hosts other than this machine (the network guard is off)",
    )
    group.addoption(
        "--chronicle-report",
        dest="chronicle_report",
        metavar="PATH",
        help="write the replay report of every chronicle_replay test to PATH as a JSON list",
    )
    corpus = parser.getgroup("chronicle corpus", "chronicle_otel: replay a corpus of recorded traces, one test each")
    corpus.addoption(
        "--chronicle-corpus",
        dest="chronicle_corpus",
        metavar="SOURCE",
        help="replay every trace of SOURCE (a store directory, a trace file, a directory or a glob of them) as a test",
    )
    corpus.addoption(
        "--chronicle-corpus-only",
        dest="chronicle_corpus_only",
        action="store_true",
        default=False,
        help="collect the corpus's tests only (no test files)",
    )
    corpus.addoption("--chronicle-since", dest="chronicle_since", metavar="AGE|DATE", help="only traces since (24h)")
    corpus.addoption(
        "--chronicle-failed", dest="chronicle_failed", action="store_true", default=False, help="only failed runs"
    )
    corpus.addoption(
        "--chronicle-where",
        dest="chronicle_where",
        action="append",
        default=[],
        metavar="session.KEY=VALUE",
        help="only traces with this session variable (repeatable)",
    )
    corpus.addoption("--chronicle-root", dest="chronicle_root", metavar="GLOB", help="only traces with this root")
    corpus.addoption(
        "--chronicle-shard", dest="chronicle_shard", metavar="I/N", help="only the I-th of N shards (by trace id)"
    )
    corpus.addoption(
        "--chronicle-corpus-limit",
        dest="chronicle_corpus_limit",
        type=int,
        metavar="N",
        help="at most the N most recent traces",
    )
    corpus.addoption(
        "--chronicle-check",
        dest="chronicle_check",
        metavar="MODULE:FUNCTION",
        help="whether a recorded failure is fixed (default: a conftest's pytest_chronicle_corpus_check, else: it no "
        "longer raises)",
    )
    corpus.addoption(
        "--chronicle-import",
        dest="chronicle_import",
        action="append",
        default=[],
        metavar="MODULE",
        help="import this module (your agent) before the corpus is replayed (repeatable)",
    )
    parser.addini("chronicle_store", "payload store directory for chronicle_replay tests", default="")
    parser.addini("chronicle_payloads", "payload store (s3://bucket/prefix) for chronicle_replay tests", default="")
    parser.addini("chronicle_traces", "directory of trace files for chronicle_replay tests", default="")


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """The hooks a ``conftest.py`` may implement: ``pytest_chronicle_corpus_check``."""
    from .corpus.plugin import CorpusHooks

    pluginmanager.add_hookspecs(CorpusHooks)


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker."""
    config.addinivalue_line(  # pytest ends the marker's name at the first colon: none before the description
        "markers",
        "chronicle_replay(source, trace_id=None, stub=..., live=(), ...): replay a recorded trace around the test, "
        "the calls stub selects (default: every 'kind:llm' call) answered from it; the chronicle_replay fixture is "
        "the active run",
    )
    config.stash[_SUITE] = _suite_options(config)
    from .sampling import pytest_plugin as sampling  # the chronicle_sample marker and fixture

    sampling.install(config, _resolve, _option)
    if config.getoption("chronicle_corpus", default=None):
        from .corpus.plugin import CorpusPlugin

        options: dict[str, Any] = {"emit_spans": False}  # a corpus is judged by its reports: no replay spans to store
        if config.getoption("chronicle_allow_network", default=False):
            options["block_network"] = False
        config.pluginmanager.register(
            CorpusPlugin(config, _with_suite(options, config.stash[_SUITE]), _Entries(config)), "chronicle_corpus"
        )
    if not hasattr(config, "workerinput"):  # an xdist worker sends its reports to the controller, which sums them up
        config.pluginmanager.register(_DriftSummary(config), "chronicle_drift_summary")


def _pyproject(config: pytest.Config) -> Path | None:
    inipath = config.inipath
    if inipath is not None and inipath.name == "pyproject.toml":
        return Path(inipath)
    candidate = Path(config.rootpath) / "pyproject.toml"
    return candidate if candidate.is_file() else None


def _suite_options(config: pytest.Config) -> dict[str, Any]:
    """The ``[tool.chronicle]`` table of the suite's ``pyproject.toml``, checked (a bad one is a usage error)."""
    path = _pyproject(config)
    if path is None:
        return {}
    tomllib: Any = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")  # pytest needs tomli
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise pytest.UsageError(f"{path}: cannot read [tool.chronicle]: {exc}") from None
    table = data.get("tool", {}).get("chronicle", {})
    if not isinstance(table, dict):
        raise pytest.UsageError(f"{path}: [tool.chronicle] must be a table")
    unknown = sorted(set(table) - set(_SUITE_KEYS))
    if unknown:
        raise pytest.UsageError(
            f"{path}: [tool.chronicle] has no option {', '.join(map(repr, unknown))}; it takes {', '.join(_SUITE_KEYS)}"
        )
    try:
        ReplayOptions(**table)
    except ConfigError as exc:
        raise pytest.UsageError(f"{path}: [tool.chronicle]: {exc}") from None
    return table


def _with_suite(kwargs: dict[str, Any], suite: dict[str, Any]) -> dict[str, Any]:
    """A marker's options over the suite's: its ``ignore`` paths and ``strict`` selectors add to the suite's."""
    out = dict(kwargs)
    for key, value in suite.items():
        if key not in out:
            out[key] = value
        elif key == "ignore":
            out[key] = (*ReplayOptions(ignore=value).ignore, *ReplayOptions(ignore=out[key]).ignore)
        elif key == "strict" and isinstance(value, Mapping) and isinstance(out[key], Mapping):
            out[key] = {**value, **out[key]}
    return out


def _option(config: pytest.Config, name: str, env_var: str | None = None) -> str | None:
    value = (
        config.getoption(name, default=None) or config.getini(name) or (os.environ.get(env_var) if env_var else None)
    )
    return str(value) if value else None


def _payload_stores(config: pytest.Config) -> list[str | Path]:
    """Where cut payloads are rehydrated from: ``--chronicle-payloads`` (or its default), then the local store."""
    stores: list[str | Path] = []
    payloads = _option(config, "chronicle_payloads", env.CHRONICLE_PAYLOADS)
    if payloads and payloads != "local":
        stores.append(payloads)
    store = _option(config, "chronicle_store", env.CHRONICLE_HOME)
    if store and is_store(store):
        stores.append(Path(store))
    return stores


def _resolve(source: Any, request: pytest.FixtureRequest) -> Path:
    path = Path(source)
    if path.is_absolute():
        return path
    candidates = [Path(request.node.path).parent / path, path]
    traces = _option(request.config, "chronicle_traces")
    if traces:
        candidates.append(Path(traces) / path)
        candidates.append(Path(request.config.rootpath) / traces / path)
    for candidate in candidates:
        if candidate.exists():
            return candidate
    return path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give the fixture to every test with the marker: the marker alone never leaves a test unreplayed."""
    for item in items:
        if item.get_closest_marker("chronicle_replay") is not None:
            names = getattr(item, "fixturenames", None)
            if isinstance(names, list) and "chronicle_replay" not in names:
                names.append("chronicle_replay")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """When the test body has passed, complete the replay report: a failing one fails the test, not its teardown.

    Drift in a passing one is warned here, within the test: under filterwarnings ``error`` the test itself fails.
    """
    yield
    run = item.stash.get(_RUN, None)
    if run is None:
        return
    if item.stash.get(_CHECK, False):
        report = run.finish()
        if not report.ok:
            item.stash[_FAILED] = True
            pytest.fail(f"the replay diverged from the recording:\n{report}", False)
    _warn_drift(item, run.report)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[Any]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Show the replay report when a test using it fails."""
    report = yield
    run = item.stash.get(_RUN, None)
    if run is not None and report.when == "call" and report.failed:
        if not item.stash.get(_FAILED, False):  # the plugin's own failure already shows the report
            report.sections.append(("chronicle replay", str(run.report)))
        item.stash[_FAILED] = True
    entry = item.stash.get(_ENTRY, None)
    if entry is not None and report.when == "teardown":
        setattr(report, _REPORT_ATTRIBUTE, entry)
    return report


@pytest.fixture
def chronicle_replay(request: pytest.FixtureRequest) -> Iterator[ReplayRun]:
    """The active replay of the trace named by the test's ``chronicle_replay`` marker."""
    marker = request.node.get_closest_marker("chronicle_replay")
    if marker is None:
        pytest.fail('the chronicle_replay fixture needs @pytest.mark.chronicle_replay("trace.jsonl", ...)', False)
    kwargs = dict(marker.kwargs)
    if len(marker.args) > 2:
        pytest.fail(
            "@pytest.mark.chronicle_replay takes the trace source and a trace id as positional arguments; "
            "give the options by name (stub=..., live=...)",
            False,
        )
    for i, name in enumerate(("source", "trace_id")):
        if len(marker.args) > i and name in kwargs:
            pytest.fail(f"@pytest.mark.chronicle_replay: {name} given both by position and by name", False)
    source = marker.args[0] if marker.args else kwargs.pop("source", None)
    if source is None:
        pytest.fail("@pytest.mark.chronicle_replay needs the trace source as its first argument", False)
    trace_id = marker.args[1] if len(marker.args) > 1 else kwargs.pop("trace_id", None)
    check_report = kwargs.pop("check_report", True)
    unknown = set(kwargs) - {f.name for f in dataclasses.fields(ReplayOptions)}
    if unknown:
        pytest.fail(f"unknown chronicle_replay options: {', '.join(sorted(unknown))}", False)
    stores = _payload_stores(request.config)
    if request.config.getoption("chronicle_allow_network", default=False):
        kwargs.setdefault("block_network", False)
    kwargs = _with_suite(kwargs, request.config.stash.get(_SUITE, {}))
    trace = load_trace(_resolve(source, request), trace_id, store=stores)
    run = replay(trace, **kwargs)
    request.node.stash[_RUN] = run
    request.node.stash[_CHECK] = bool(check_report)
    request.node.stash[_SOURCE] = str(source)
    with run:
        yield run
    _conclude(request.node, run)
    if check_report and not run.report.ok and not request.node.stash.get(_FAILED, False):
        pytest.fail(f"the replay diverged from the recording:\n{run.report}", False)


def _drift(report: ReplayReport) -> list[Finding]:
    return [finding for name in _DRIFT_SECTIONS for finding in getattr(report, name)]


def _warn_drift(item: pytest.Item, report: ReplayReport) -> None:
    """A :class:`ChronicleWarning` naming the drift of a passing test's replay, once, pointing at the test."""
    if item.stash.get(_WARNED, False) or item.stash.get(_FAILED, False) or not report.drift:
        return
    item.stash[_WARNED] = True
    kinds = sorted({f"{f.kind} ({f.cause})" if f.cause is not None else str(f.kind) for f in report.drift})
    first = report.drift[0]
    more = f" (and {len(report.drift) - 1} more)" if len(report.drift) > 1 else ""
    message = (
        f"chronicle replay drift in {item.name}: {len(report.drift)} {', '.join(kinds)}: "
        f"{format_key(first.call_key)}: {first.message}{more}; the test passed on recorded answers"
    )
    path, line, _ = item.location
    warnings.warn_explicit(message, ChronicleWarning, str(Path(item.config.rootpath) / path), (line or 0) + 1)


def _conclude(item: pytest.Item, run: ReplayRun) -> None:
    """Conclude a test's replay once it has ended.

    Its entry for the summary and the JSON report, its JUnit XML properties, and the drift warning when the call
    phase has not issued it.
    """
    report = run.report
    findings = _drift(report)
    data = report_data(report)
    item.stash[_ENTRY] = {
        "test": item.nodeid,
        "trace": item.stash.get(_SOURCE, ""),
        "trace_id": run.trace.trace_id,
        "ok": report.ok,
        "findings": findings_of(data),
        **data,
    }
    item.user_properties.append(("chronicle_replay.drift", str(len(findings))))
    for finding in findings:
        item.user_properties.append((f"chronicle_replay.{finding.kind}", _property(finding)))
    if report.intended:
        item.user_properties.append(("chronicle_replay.intended", str(len(report.intended))))
        for finding in report.intended:
            item.user_properties.append((f"chronicle_replay.intended.{finding.kind}", _property(finding)))
    _warn_drift(item, report)


class _Entries:
    """The JSON report's entries of tests the plugin does not run itself (the corpus's), and the payload stores."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def payloads(self) -> list[str | Path]:
        return _payload_stores(self.config)

    def record(self, item: pytest.Item, entry: dict[str, Any]) -> None:
        item.stash[_ENTRY] = entry

    def report_data(self, report: ReplayReport) -> dict[str, Any]:
        return report_data(report)


def report_data(report: ReplayReport) -> dict[str, Any]:
    """A report as plain JSON values (xdist sends them on; ``--chronicle-report`` writes them)."""
    data: dict[str, Any] = orjson.loads(orjson.dumps(dataclasses.asdict(report)))
    return data


def findings_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The counted findings of a report's JSON: divergences, drift and changes."""
    return [finding for name in _DRIFT_SECTIONS for finding in data.get(name, [])]


def _property(finding: Finding) -> str:
    text = f"{format_key(finding.call_key)}: {finding.message}"
    return text + (f" ({finding.details[0]})" if finding.details else "")


class _DriftSummary:
    """The replayed tests' entries, gathered from their teardown reports (made here or on xdist workers).

    It writes the terminal summary of the tests that drifted, and the JSON report of ``--chronicle-report``.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.entries: list[dict[str, Any]] = []
        self.error: str | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = getattr(report, _REPORT_ATTRIBUTE, None)
        if report.when == "teardown" and isinstance(entry, dict):
            self.entries.append(entry)

    def pytest_sessionfinish(self) -> None:
        path = self.config.getoption("chronicle_report", default=None)
        if path:
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                Path(path).write_bytes(orjson.dumps(self.entries, option=orjson.OPT_INDENT_2))
            except OSError as exc:  # said in the summary (which comes after): the run's outcome stands
                self.error = f"--chronicle-report {path}: not written: {exc.strerror or exc}"

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.error:
            terminalreporter.write_line(self.error, red=True)
        corpus = [entry for entry in self.entries if "corpus" in entry]
        shown = [
            entry for entry in self.entries if "corpus" not in entry and (entry["findings"] or entry.get("intended"))
        ]
        drifting = sum(1 for entry in corpus if entry["findings"] or entry.get("intended"))
        if drifting:  # the corpus table lists their outcomes; their findings are in --chronicle-report
            terminalreporter.write_sep("=", "chronicle replay drift", yellow=True)
            terminalreporter.write_line(
                f"{drifting} of {len(corpus)} corpus traces have divergences, drift or changes"
                + (
                    ""
                    if self.config.getoption("chronicle_report", default=None)
                    else ": --chronicle-report PATH lists them"
                )
            )
        if not shown:
            return
        write = terminalreporter.write_line
        if not drifting:
            terminalreporter.write_sep("=", "chronicle replay drift", yellow=True)
        drifted = intended = 0
        for entry in shown:
            findings, declared = entry["findings"], entry.get("intended") or []
            drifted += bool(findings)
            intended += bool(declared)
            parts = [f"{len(findings)} {'finding' if len(findings) == 1 else 'findings'}"] if findings else []
            parts += [f"{len(declared)} intended"] if declared else []
            write(f"{entry['test']}: {', '.join(parts)}")
            _write_findings(write, findings, "  ")
            if declared:
                write("  intended (declared changes):")
                _write_findings(write, declared, "    ", details=1)
        tail = f"; {intended} with declared intended changes" if intended else ""
        write(f"{drifted} of {len(self.entries) - len(corpus)} replayed tests drifted{tail}")


def _write_findings(write: Any, findings: list[dict[str, Any]], indent: str, details: int = _SHOWN_LINES) -> None:
    """The findings of one test by boundary: their kinds, then each with why and the first lines of its diff."""
    by_boundary: dict[str, list[dict[str, Any]]] = {}
    for finding in findings:
        by_boundary.setdefault(format_key([tuple(part) for part in finding["call_key"]]), []).append(finding)
    for boundary, items in by_boundary.items():
        kinds: dict[str, int] = {}
        for finding in items:
            kinds[finding["kind"]] = kinds.get(finding["kind"], 0) + 1
        write(f"{indent}{boundary}: " + ", ".join(f"{n} {kind}" for kind, n in kinds.items()))
        for finding in items:
            cause = finding.get("cause")
            tag = f"{finding['kind']}, {cause}" if cause and not finding.get("change") else finding["kind"]
            strict = " (strict: fails the test)" if finding.get("strict") else ""
            write(f"{indent}  [{tag}] {finding['message']}{strict}")
            lines = finding["details"]
            for line in lines[:details]:
                write(f"{indent}    {line}")
            if len(lines) > details:
                write(f"{indent}    … {len(lines) - details} more lines")
