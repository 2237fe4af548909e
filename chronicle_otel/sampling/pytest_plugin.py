"""pytest: the ``chronicle_sample`` marker and fixture, installed by :mod:`chronicle_otel.pytest_plugin`.

Usage::

    @pytest.mark.chronicle_sample("traces/incident.jsonl", live="plan", n=20, min_pass_rate=0.95)
    def test_the_model_rarely_oversells(chronicle_sample):
        report = chronicle_sample(no_oversell)     # check(result, error) for each sample
        assert report.live_calls <= 40

    @pytest.mark.chronicle_sample("traces/incident.jsonl", live="plan", n=20, check=no_oversell, min_pass_rate=0.95)
    def test_the_same_with_the_check_in_the_marker(chronicle_sample):
        pass                                       # sampled when the body has passed

The marker takes the trace source (an OTLP/JSON file or a store directory) and a trace id, then the keyword arguments
of :func:`chronicle_otel.sample` (``live``, ``n``, ``check``, ``after``, ``concurrency``, ``max_calls``, ``stub``,
``store``, ``allow``, ``block_network``, ``allow_hosts``, ``instance``, ``arguments``) and ``min_pass_rate``. The
fixture samples when called (its check wins over the marker's) and returns the
:class:`~chronicle_otel.SampleReport`; a test that never calls it is sampled once its body has passed. The test fails
when the check's pass rate is below ``min_pass_rate``, with the table of outcomes; a passing test has the table in its
report section ``chronicle sample`` (``pytest -rP`` shows it). Trace sources, payload stores and
``--chronicle-allow-network`` are read as for ``chronicle_replay``.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pytest

from .. import environment_variables as env
from ..load import load_trace
from ..model import Trace
from ..store.reader import is_store
from ._report import SampleReport
from ._run import Check, sample

__all__ = ["chronicle_sample", "install"]

MARKER: Final = "chronicle_sample"

Resolve = Callable[[Any, pytest.FixtureRequest], Path]
"""Where a marker's trace source is: ``resolve(source, request)``."""
Option = Callable[[pytest.Config, str, "str | None"], "str | None"]
"""A chronicle option, from the command line, then the ini file, then the environment: ``option(config, name, env)``."""

_SAMPLING = pytest.StashKey["_Sampling"]()
_FINDERS = pytest.StashKey[tuple[Resolve, Option]]()
_SAMPLE_OPTIONS: Final = frozenset(inspect.signature(sample).parameters) - {"trace"}
"""The keyword arguments of :func:`sample` the marker passes on."""


def install(config: pytest.Config, resolve: Resolve, option: Option) -> None:
    """Register the marker, the fixture and their hooks with ``config``.

    Trace sources are found with ``resolve`` and the chronicle options read with ``option``, as for
    ``chronicle_replay``.
    """
    config.stash[_FINDERS] = (resolve, option)
    config.pluginmanager.register(sys.modules[__name__], "chronicle_sample")


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker."""
    config.addinivalue_line(  # pytest ends the marker's name at the first colon: none before the description
        "markers",
        f"{MARKER}(source, trace_id=None, live=..., n=20, check=None, min_pass_rate=None, ...): run the live call "
        "n times, everything recorded before it frozen; the test fails when the check's pass rate is below "
        "min_pass_rate (the chronicle_sample fixture samples with a check of its own)",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give the fixture to every test with the marker: the marker alone samples too."""
    for item in items:
        if item.get_closest_marker(MARKER) is not None:
            names = getattr(item, "fixturenames", None)
            if isinstance(names, list) and MARKER not in names:
                names.append(MARKER)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """When the test body has passed: sample, unless the body did, and fail below ``min_pass_rate``."""
    result = yield
    sampling = item.stash.get(_SAMPLING, None)
    if sampling is None:
        return result
    report = sampling.report if sampling.report is not None else sampling()
    floor = sampling.min_pass_rate
    if floor is None:
        return result
    if not report.checked:
        pytest.fail(f"@pytest.mark.{MARKER}: min_pass_rate needs a check (check= on the marker or the fixture)", False)
    rate = report.pass_rate
    if rate is None or rate < floor:
        shown = "n/a" if rate is None else f"{rate:.0%}"
        pytest.fail(f"chronicle sample: pass rate {shown} is below min_pass_rate {floor:.0%}\n{report}", False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    """The table of outcomes in the test's report (shown for a passing test by ``pytest -rP``)."""
    report = yield
    sampling = item.stash.get(_SAMPLING, None)
    if sampling is not None and sampling.report is not None and report.when == "call" and report.passed:
        report.sections.append(("chronicle sample", str(sampling.report)))
    return report


class _Sampling:
    """The fixture's value: call it (with a check) to sample; :attr:`report` is the latest report."""

    def __init__(self, trace: Trace, options: dict[str, Any], min_pass_rate: float | None) -> None:
        self.trace = trace
        self.options = options
        self.min_pass_rate = min_pass_rate
        self.report: SampleReport | None = None

    def __call__(self, check: Check | None = None) -> SampleReport:
        options = dict(self.options)
        if check is not None:
            options["check"] = check
        self.report = sample(self.trace, **options)
        return self.report


@pytest.fixture
def chronicle_sample(request: pytest.FixtureRequest) -> Callable[..., SampleReport]:
    """Sample the trace the test's ``chronicle_sample`` marker names: ``chronicle_sample(check)`` samples.

    Returns:
        A callable taking an optional check, which samples and returns the :class:`~chronicle_otel.SampleReport`.
    """
    marker = request.node.get_closest_marker(MARKER)
    if marker is None:
        pytest.fail(f'the {MARKER} fixture needs @pytest.mark.{MARKER}("trace.jsonl", live=...)', False)
    if (not marker.args and "source" not in marker.kwargs) or len(marker.args) > 2:
        pytest.fail(
            f"@pytest.mark.{MARKER} takes the trace source and a trace id as positional arguments; give the options "
            "by name (live=..., n=...)",
            False,
        )
    kwargs = dict(marker.kwargs)
    source = marker.args[0] if marker.args else kwargs.pop("source")
    trace_id = marker.args[1] if len(marker.args) > 1 else kwargs.pop("trace_id", None)
    floor = kwargs.pop("min_pass_rate", None)
    if floor is not None and (isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0 <= floor <= 1):
        pytest.fail(f"@pytest.mark.{MARKER}: min_pass_rate must be a rate from 0 to 1, not {floor!r}", False)
    unknown = sorted(set(kwargs) - _SAMPLE_OPTIONS)
    if unknown:
        pytest.fail(f"unknown {MARKER} options: {', '.join(unknown)}", False)
    if "live" not in kwargs:
        pytest.fail(f"@pytest.mark.{MARKER} needs live=: the recorded call to sample ('plan[0]', 'plan')", False)
    if request.config.getoption("chronicle_allow_network", default=False):
        kwargs.setdefault("block_network", False)
    resolve, option = request.config.stash[_FINDERS]
    stores: list[Any] = []
    payloads = option(request.config, "chronicle_payloads", env.CHRONICLE_PAYLOADS)
    if payloads and payloads != "local":
        stores.append(payloads)
    store = option(request.config, "chronicle_store", env.CHRONICLE_HOME)
    if store and is_store(store):
        stores.append(store)
    trace = load_trace(resolve(source, request), trace_id, store=stores)
    sampling = _Sampling(trace, kwargs, floor)
    request.node.stash[_SAMPLING] = sampling
    return sampling
