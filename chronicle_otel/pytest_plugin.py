"""pytest plugin: turn a recorded trace into a regression test.

Usage::

    @pytest.mark.chronicle_replay("tests/traces/incident-42.jsonl", stub={"kind:llm"})
    def test_guardrail_blocks_share_count_confusion(chronicle_replay):
        result = chronicle_replay.rerun()
        assert result.status == "blocked"

The marker takes the trace source (an OTLP/JSON file or a store directory) and the keyword arguments of
:func:`chronicle_otel.replay` (``stub``, ``live``, ``default``, ``on_input_mismatch``, ``on_missing``,
``strict``, ``allow``, ``emit_spans``, ``block_network``, ``allow_hosts``, ``override``), plus ``trace_id`` and
``check_report`` (default True: when the test body ends, a report with divergences, or with drift under
``strict=True``, fails the test). The ``chronicle_replay`` fixture is the active
:class:`~chronicle_otel.replaying.ReplayRun`; it works in sync tests and in pytest-asyncio tests (use
``await chronicle_replay.arerun()`` for an async root). A failing test shows the replay report.

The network is blocked during the test (``block_network=True``): only this machine is reachable, and an attempt
to reach anything else fails the test, naming the boundary that made it. ``--chronicle-allow-network`` turns the
guard off for the whole run (``block_network=`` on a marker still wins).

Configuration (command line, then ini, then environment):
    ``--chronicle-payloads`` / ``chronicle_payloads`` / ``$CHRONICLE_PAYLOADS``: the shared payload store
    (``s3://bucket/prefix``) for payloads cut on spans.
    ``--chronicle-store`` / ``chronicle_store`` / ``$CHRONICLE_HOME``: the local store, asked after it.
    ``--chronicle-traces`` / ``chronicle_traces``: directory where relative trace paths are looked up
    (after the test file's directory).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from . import environment_variables as env
from .load import load_trace
from .replaying import ReplayOptions, ReplayRun, replay
from .store.reader import is_store

__all__ = ["chronicle_replay"]

_RUN = pytest.StashKey[ReplayRun]()
_FAILED = pytest.StashKey[bool]()
_CHECK = pytest.StashKey[bool]()


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
    parser.addini("chronicle_store", "payload store directory for chronicle_replay tests", default="")
    parser.addini("chronicle_payloads", "payload store (s3://bucket/prefix) for chronicle_replay tests", default="")
    parser.addini("chronicle_traces", "directory of trace files for chronicle_replay tests", default="")


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker."""
    config.addinivalue_line(  # pytest ends the marker's name at the first colon: none before the description
        "markers",
        "chronicle_replay(source, trace_id=None, stub=..., live=(), ...): replay a recorded trace around the test, "
        "the calls stub selects (default: every 'kind:llm' call) answered from it; the chronicle_replay fixture is "
        "the active run",
    )


def _option(config: pytest.Config, name: str, env_var: str | None = None) -> str | None:
    value = (
        config.getoption(name, default=None) or config.getini(name) or (os.environ.get(env_var) if env_var else None)
    )
    return str(value) if value else None


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
    """When the test body has passed, complete the replay report: a failing one fails the test, not its teardown."""
    yield
    run = item.stash.get(_RUN, None)
    if run is not None and item.stash.get(_CHECK, False):
        report = run.finish()
        if not report.ok:
            item.stash[_FAILED] = True
            pytest.fail(f"the replay diverged from the recording:\n{report}", False)


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
    stores: list[str | Path] = []
    payloads = _option(request.config, "chronicle_payloads", env.CHRONICLE_PAYLOADS)
    if payloads and payloads != "local":
        stores.append(payloads)
    store = _option(request.config, "chronicle_store", env.CHRONICLE_HOME)
    if store and is_store(store):
        stores.append(Path(store))
    if request.config.getoption("chronicle_allow_network", default=False):
        kwargs.setdefault("block_network", False)
    trace = load_trace(_resolve(source, request), trace_id, store=stores)
    run = replay(trace, **kwargs)
    request.node.stash[_RUN] = run
    request.node.stash[_CHECK] = bool(check_report)
    with run:
        yield run
    if check_report and not run.report.ok and not request.node.stash.get(_FAILED, False):
        pytest.fail(f"the replay diverged from the recording:\n{run.report}", False)
