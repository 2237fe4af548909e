"""The corpus as pytest tests: one item per trace, run like any test (pytest-xdist spreads them), summed up after.

Registered by :mod:`chronicle_otel.pytest_plugin` when ``--chronicle-corpus`` is given.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Protocol

import pytest

from .._internal import ages
from ..errors import ChronicleError
from ..replaying import ReplayReport
from ._outcome import Check, CorpusOutcome, CorpusResult, replay_for_corpus
from ._source import Corpus, CorpusEntry, CorpusFilter

__all__ = ["CorpusCollector", "CorpusFailure", "CorpusHooks", "CorpusItem", "CorpusPlugin", "Entries"]

_RESULT = pytest.StashKey[CorpusResult]()
_PROPERTY: Final = "chronicle_corpus"
"""The JUnit property (and teardown report attribute) holding a trace's outcome."""
_ORDER: Final = (
    CorpusOutcome.FIXED,
    CorpusOutcome.STILL_FAILING,
    CorpusOutcome.DIVERGED,
    CorpusOutcome.NEWLY_BROKEN,
    CorpusOutcome.UNREPLAYABLE,
    CorpusOutcome.PASSED,
)
_SHOWN_PER_OUTCOME: Final = 20


class Entries(Protocol):
    """How the pytest plugin takes a test's entry for its JSON report."""

    def record(self, item: pytest.Item, entry: dict[str, Any]) -> None:
        """Keep ``entry`` as ``item``'s."""

    def report_data(self, report: ReplayReport) -> dict[str, Any]:
        """``report`` as plain JSON values."""

    def payloads(self) -> list[str | Path]:
        """The payload stores the run names (``--chronicle-payloads``, ``--chronicle-store`` and their defaults)."""


class CorpusHooks:
    """The hooks a ``conftest.py`` may implement for a corpus run."""

    @pytest.hookspec(firstresult=True)
    def pytest_chronicle_corpus_check(self, trace: Any, run: Any, result: Any, error: Any) -> Any:
        """Whether a recorded failure is fixed now.

        True, False, or None to leave it to the default (fixed when the root no longer raises); an ``AssertionError``
        means still failing.
        """


class CorpusFailure(Exception):
    """A trace of the corpus that newly broke or diverged (shown by :meth:`CorpusItem.repr_failure`)."""


class CorpusItem(pytest.Item):
    """One trace of the corpus, replayed against the code of this process."""

    def __init__(self, *, entry: CorpusEntry, corpus: Corpus, plugin: CorpusPlugin, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.entry = entry
        self.corpus = corpus
        self.plugin = plugin

    def runtest(self) -> None:
        """Replay the trace and judge it: still failing is an xfail, unreplayable a skip, broken a failure."""
        result = self._replay()
        self.stash[_RESULT] = result
        self.plugin.entries.record(self, corpus_entry(self, result, self.plugin.entries.report_data))
        self.user_properties.append((f"{_PROPERTY}.outcome", str(result.outcome)))
        self.user_properties.append((f"{_PROPERTY}.trace_id", self.entry.trace_id))
        self.user_properties.append((f"{_PROPERTY}.reason", result.reason))
        outcome = result.outcome
        if outcome is CorpusOutcome.STILL_FAILING:
            pytest.xfail(f"still failing: {result.reason}")
        if outcome is CorpusOutcome.UNREPLAYABLE:
            pytest.skip(f"unreplayable: {result.reason}")
        if outcome in (CorpusOutcome.NEWLY_BROKEN, CorpusOutcome.DIVERGED):
            raise CorpusFailure(result)

    def _replay(self) -> CorpusResult:
        try:
            trace = self.corpus.load(self.entry)
        except ChronicleError as exc:
            return CorpusResult(CorpusOutcome.UNREPLAYABLE, f"does not load: {exc}", recorded_failure=self.entry.failed)
        return replay_for_corpus(trace, self.plugin.check(), self.plugin.options())

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        """The outcome, why, and the replay's report."""
        if isinstance(excinfo.value, CorpusFailure):
            result: CorpusResult = excinfo.value.args[0]
            lines = [f"{result.outcome}: {result.reason}", *(f"    {line}" for line in result.details)]
            if result.report is not None:
                lines += ["", str(result.report)]
            return "\n".join(lines)
        return str(super().repr_failure(excinfo, style))

    def reportinfo(self) -> tuple[os.PathLike[str] | str, int | None, str]:
        """The corpus source and the trace id."""
        return self.corpus.source, None, f"{self.name} (trace {self.entry.trace_id})"


class CorpusCollector(pytest.Collector):
    """The corpus's tests: ``chronicle-corpus::test_corpus[<short id>-<root>]``, one per trace."""

    def __init__(self, *, corpus: Corpus, plugin: CorpusPlugin, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.corpus = corpus
        self.plugin = plugin

    def collect(self) -> list[CorpusItem]:
        """One item per trace of the corpus, in the corpus's order."""
        items = []
        seen: set[str] = set()
        for entry in self.corpus.entries():
            test_id = entry.test_id
            if test_id in seen:  # two traces whose ids start alike under one root: the whole id tells them apart
                test_id = f"{entry.trace_id}-{test_id.split('-', 1)[1]}"
            seen.add(test_id)
            items.append(
                CorpusItem.from_parent(
                    self, name=f"test_corpus[{test_id}]", entry=entry, corpus=self.corpus, plugin=self.plugin
                )
            )
        return items


class CorpusPlugin:
    """Collects the corpus's items, runs them, and writes the outcome table after the tests.

    Args:
        config: the pytest configuration (its ``--chronicle-*`` options name the corpus).
        options: the replay options of every trace (the suite's ``[tool.chronicle]`` table and the command line).
        entries: where each trace's entry of the JSON report goes.
    """

    def __init__(self, config: pytest.Config, options: dict[str, Any], entries: Entries) -> None:
        self.config = config
        self._options = options
        self.entries = entries
        self.corpus: Corpus | None = None
        """The corpus, once listed (closed when the session ends)."""
        self._check: Check | None = None
        self._check_loaded = False
        self.outcomes: list[tuple[str, str, str, str]] = []
        """``(test id, trace id, outcome, reason)`` of each trace run, gathered from the test reports."""

    # ------------------------------------------------------------------ collection

    def _corpus(self) -> Corpus:
        getoption = self.config.getoption
        where = []
        for option in getoption("chronicle_where") or []:
            key, sep, value = option.partition("=")
            if not sep or not key.startswith("session.") or len(key) == len("session."):
                raise pytest.UsageError(f"--chronicle-where {option!r}: expected session.KEY=VALUE")
            where.append((key[len("session.") :], value))
        since = getoption("chronicle_since")
        shard = getoption("chronicle_shard")
        try:
            filter = CorpusFilter(
                since_ns=_since(since) if since else None,
                failed=bool(getoption("chronicle_failed")),
                root=getoption("chronicle_root"),
                where=tuple(where),
                shard=_shard(shard) if shard else None,
                limit=getoption("chronicle_corpus_limit"),
            )
        except ChronicleError as exc:
            raise pytest.UsageError(f"--chronicle-shard/--chronicle-corpus-limit: {exc}") from None
        return Corpus(getoption("chronicle_corpus"), filter, store=self.entries.payloads() or None)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, items: list[pytest.Item]) -> None:
        """Import ``--chronicle-import`` modules, list the corpus, and add its items after the other tests."""
        for module in self.config.getoption("chronicle_import") or []:
            try:
                importlib.import_module(module)  # named by the user, never by a trace
            except Exception as exc:
                raise pytest.UsageError(f"--chronicle-import {module}: {type(exc).__name__}: {exc}") from None
        self.check()  # a --chronicle-check that cannot be loaded is a usage error before any test runs
        corpus = self.corpus = self._corpus()
        try:
            corpus.entries()  # a source that cannot be listed is a usage error here, not a collection error
        except ChronicleError as exc:
            raise pytest.UsageError(f"--chronicle-corpus {corpus.source}: {exc}") from None
        collector = CorpusCollector.from_parent(
            session, name="chronicle-corpus", nodeid="chronicle-corpus", corpus=corpus, plugin=self
        )
        collected: list[pytest.Item | pytest.Collector] = list(collector.collect())
        self.config.hook.pytest_collectreport(
            report=pytest.CollectReport(collector.nodeid, "passed", None, collected)
        )  # counted like any test file's tests ("collected N items")
        items.extend(item for item in collected if isinstance(item, pytest.Item))

    def pytest_unconfigure(self) -> None:
        """Close the store the corpus read."""
        if self.corpus is not None:
            self.corpus.close()

    def pytest_ignore_collect(self, collection_path: Path) -> bool | None:
        """With ``--chronicle-corpus-only``, no test file is collected."""
        return True if self.config.getoption("chronicle_corpus_only") else None

    # ------------------------------------------------------------------ running

    def options(self) -> dict[str, Any]:
        """The replay options of every trace."""
        return dict(self._options)

    def check(self) -> Check | None:
        """``--chronicle-check module:function``, else a conftest's ``pytest_chronicle_corpus_check``, else None."""
        if not self._check_loaded:
            self._check_loaded = True
            named = self.config.getoption("chronicle_check")
            if named:
                self._check = _load_check(named)
            elif self.config.hook.pytest_chronicle_corpus_check.get_hookimpls():
                hook = self.config.hook.pytest_chronicle_corpus_check

                def check(trace: Any, run: Any, result: Any, error: Any) -> Any:
                    return hook(trace=trace, run=run, result=result, error=error)

                self._check = check
        return self._check

    # ------------------------------------------------------------------ the summary

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Gather a trace's outcome from its report (made here or on an xdist worker)."""
        if report.when != "call" and not (report.when == "setup" and report.skipped):
            return
        props = dict(p for p in report.user_properties if p[0].startswith(_PROPERTY))
        outcome = props.get(f"{_PROPERTY}.outcome")
        if outcome is not None:
            name = report.nodeid
            self.outcomes.append(
                (
                    name,
                    str(props.get(f"{_PROPERTY}.trace_id", "")),
                    str(outcome),
                    str(props.get(f"{_PROPERTY}.reason", "")),
                )
            )

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """The outcome table: counts, then the traces of each outcome but passed."""
        write = terminalreporter.write_line
        terminalreporter.write_sep("=", "chronicle corpus", bold=True)
        counts = {outcome: 0 for outcome in _ORDER}
        for _, _, outcome, _ in self.outcomes:
            counts[CorpusOutcome(outcome)] += 1
        write(" | ".join(f"{outcome} {counts[outcome]}" for outcome in _ORDER) + f" | of {len(self.outcomes)} traces")
        for outcome in _ORDER[:-1]:
            rows = [row for row in self.outcomes if row[2] == outcome.value]
            if not rows:
                continue
            write(f"{outcome}:")
            for test, _, _, reason in sorted(rows)[:_SHOWN_PER_OUTCOME]:
                write(f"  {test}: {reason}")
            if len(rows) > _SHOWN_PER_OUTCOME:
                write(f"  … and {len(rows) - _SHOWN_PER_OUTCOME} more")


def corpus_entry(
    item: CorpusItem, result: CorpusResult, report_data: Callable[[ReplayReport], dict[str, Any]]
) -> dict[str, Any]:
    """What the JSON report (``--chronicle-report``) holds of a corpus trace.

    Its outcome, and its replay's report (``report_data`` gives its JSON form).
    """
    data = report_data(result.report) if result.report is not None else {}
    return {
        "test": item.nodeid,
        "trace": item.corpus.source,
        "trace_id": item.entry.trace_id,
        "root": item.entry.root,
        "corpus": {
            "outcome": str(result.outcome),
            "reason": result.reason,
            "details": list(result.details),
            "recorded_failure": item.entry.failed,
        },
        "ok": result.outcome in (CorpusOutcome.PASSED, CorpusOutcome.FIXED),
        "findings": [f for name in ("divergences", "drift", "changes") for f in data.get(name, [])],
        **data,
    }


def _load_check(named: str) -> Check:
    module, sep, function = named.partition(":")
    if not sep or not module or not function:
        raise pytest.UsageError(f"--chronicle-check {named!r}: expected module:function")
    try:
        found = getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError) as exc:
        raise pytest.UsageError(f"--chronicle-check {named}: {exc}") from None
    if not callable(found):
        raise pytest.UsageError(f"--chronicle-check {named}: not a function")
    return found  # type: ignore[no-any-return]


def _since(text: str) -> int:
    try:
        return ages.since(text)
    except ValueError as exc:
        raise pytest.UsageError(f"--chronicle-since: {exc}") from None


def _shard(text: str) -> tuple[int, int]:
    i, _, n = text.partition("/")
    try:
        return int(i), int(n)
    except ValueError:
        raise pytest.UsageError(f"--chronicle-shard {text!r}: expected I/N, e.g. 2/4") from None
