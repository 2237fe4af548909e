"""``pytest --chronicle-corpus``: one test per recorded trace, judged, summed up in a table, JSON and JUnit XML."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from xml.etree import ElementTree

import pytest

import chronicle_otel as chronicle
from chronicle_otel.corpus import Corpus, CorpusEntry, CorpusFilter

AGENT = textwrap.dedent(
    """
    import chronicle_otel as chronicle

    MODE = {"limit": None, "break": False, "extra": False}

    @chronicle.boundary(kind="llm", name="cp.plan")
    def plan(request):
        return {"qty": int(request.split()[1])}

    @chronicle.boundary(kind="tool", name="cp.audit")
    def audit(plan):
        return "ok"

    @chronicle.boundary(kind="tool", name="cp.order")
    def order(plan):
        if MODE["limit"] is not None and plan["qty"] > MODE["limit"]:
            return "blocked"
        if plan["qty"] > 500:
            raise RuntimeError("broker rejected the order: too large")
        return f"filled {plan['qty']}"

    @chronicle.boundary(kind="agent", name="cp.run")
    def run(request):
        p = plan(request)
        if MODE["extra"] and p["qty"] == 3:
            audit(p)
        result = order(p)
        return result.upper() if MODE["break"] and p["qty"] == 7 else result
    """
)

ORPHAN = textwrap.dedent(
    """
    import chronicle_otel as chronicle

    @chronicle.boundary(kind="agent", name="cp.orphan")
    def orphan(x):
        return x
    """
)

_RECORD_ORPHAN = """
import sys
import chronicle_otel as chronicle
from opentelemetry.sdk.trace import TracerProvider
import corpusorphan
config = chronicle.configure(store=chronicle.StoreOptions(path=sys.argv[1], processor="simple"),
                             tracer_provider=TracerProvider())
corpusorphan.orphan(1)
config.shutdown()
"""
REPO = Path(__file__).resolve().parents[3]

FIX = textwrap.dedent(
    """
    import corpusagent

    corpusagent.MODE.update(limit=800, extra=True)  # the fix: orders above 800 are blocked; a new audit call
    """
)

EXPECTED = {  # request -> outcome, with FIX (and "break" for the success that the change breaks)
    "sell 5": "passed",
    "sell 7": "newly broken",
    "sell 3": "diverged",
    "sell 900": "fixed",
    "sell 1000": "fixed",
    "sell 600": "still failing",
}


@pytest.fixture
def corpus_project(pytester: pytest.Pytester, tmp_path: Path) -> pytest.Pytester:
    """A project whose store holds one run of each request of ``EXPECTED`` and one of a root it never imports."""
    pytester.makepyfile(corpusagent=AGENT, corpusorphan=ORPHAN)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    recorded = subprocess.run(  # a root this process never defines: recorded by another one
        [sys.executable, "-c", _RECORD_ORPHAN, str(pytester.path / "store")],
        cwd=pytester.path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(pytester.path), str(REPO)])},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert recorded.returncode == 0, recorded.stderr
    pytester.syspathinsert()
    sys.modules.pop("corpusagent", None)
    import corpusagent  # type: ignore[import-not-found]
    from opentelemetry.sdk.trace import TracerProvider

    chronicle.configure(
        store=chronicle.StoreOptions(path=pytester.path / "store", processor="simple"), tracer_provider=TracerProvider()
    )
    for request in EXPECTED:
        with contextlib.suppress(RuntimeError):
            corpusagent.run(request)
    return pytester


def _outcomes(path: Path) -> dict[str, str]:
    entries = json.loads(path.read_text())
    return {e["root"] + ":" + e["trace_id"]: e["corpus"]["outcome"] for e in entries}


def test_a_corpus_replays_into_the_right_table(corpus_project: pytest.Pytester) -> None:
    corpus_project.makeconftest(FIX + "corpusagent.MODE['break'] = True\n")
    result = corpus_project.runpytest(
        "-p", "no:cacheprovider", "--chronicle-corpus", "store", "--chronicle-corpus-only",
        "--chronicle-root", "cp.run", "--chronicle-report", "report.json", "--junitxml", "junit.xml",
    )  # fmt: skip
    result.assert_outcomes(passed=3, failed=2, xfailed=1)
    result.stdout.fnmatch_lines(
        [
            "*= chronicle corpus =*",
            "fixed 2 | still failing 1 | diverged 1 | newly broken 1 | unreplayable 0 | passed 1 | of 6 traces",
            "fixed:",
            "  chronicle-corpus::test_corpus[[]*-cp.run[]]: recorded a failure; the root returns now",
            "still failing:",
            "  chronicle-corpus::test_corpus[[]*-cp.run[]]: still raises RuntimeError: *broker rejected*",
            "diverged:",
            "  chronicle-corpus::test_corpus[[]*-cp.run[]]: 1 divergences; first: [[]unexpected-call[]] *cp.audit*",
            "newly broken:",
            "  chronicle-corpus::test_corpus[[]*-cp.run[]]: recorded a success; now output differs",
        ]
    )
    entries = json.loads((corpus_project.path / "report.json").read_text())
    by_request = {}
    store = chronicle.load_trace  # the request of each trace, read from its recording
    for entry in entries:
        trace = store(corpus_project.path / "store", entry["trace_id"])
        assert trace.root is not None
        by_request[trace.root.input["request"]] = entry["corpus"]["outcome"]
    assert by_request == EXPECTED
    suite = ElementTree.parse(corpus_project.path / "junit.xml").getroot()
    outcomes = [
        p.get("value") for case in suite.iter("testcase") for p in case.iter("property")
        if p.get("name") == "chronicle_corpus.outcome"
    ]  # fmt: skip
    assert sorted(outcomes) == sorted(EXPECTED.values())


def test_an_undefined_root_is_unreplayable_and_skipped(corpus_project: pytest.Pytester) -> None:
    corpus_project.makeconftest(FIX)
    result = corpus_project.runpytest(
        "-p", "no:cacheprovider", "--chronicle-corpus", "store", "--chronicle-corpus-only",
        "--chronicle-root", "cp.orph*",
    )  # fmt: skip
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        [
            "unreplayable:",
            "  chronicle-corpus::test_corpus[[]*-cp.orphan[]]: no boundary named 'cp.orphan' is defined in*",
        ]
    )


def test_the_check_decides_what_fixed_means(corpus_project: pytest.Pytester) -> None:
    corpus_project.makeconftest(
        FIX
        + textwrap.dedent(
            """
            def pytest_chronicle_corpus_check(trace, result, error):
                assert result == "blocked", f"got {result!r}"
            """
        )
    )
    corpus_project.makepyfile(checks="def strict(result):\n    return result == 'nothing'\n")
    result = corpus_project.runpytest(
        "-p", "no:cacheprovider", "--chronicle-corpus", "store", "--chronicle-corpus-only", "--chronicle-failed"
    )  # fmt: skip
    result.assert_outcomes(passed=2, xfailed=1)  # 900 and 1000 blocked; 600 raises: the check's assertion fails
    result.stdout.fnmatch_lines(["  chronicle-corpus::test_corpus[[]*-cp.run[]]: the check fails: got None"])
    result = corpus_project.runpytest(
        "-p", "no:cacheprovider", "--chronicle-corpus", "store", "--chronicle-corpus-only", "--chronicle-failed",
        "--chronicle-check", "checks:strict",
    )  # fmt: skip
    result.assert_outcomes(xfailed=3)  # the named check wins over the hook
    result.stdout.fnmatch_lines(["*the check says still failing"])


def test_shards_split_the_corpus_and_filters_select(corpus_project: pytest.Pytester) -> None:
    source = corpus_project.path / "store"

    def listed(chosen: CorpusFilter | None = None) -> list[CorpusEntry]:
        with Corpus(source, chosen) as corpus:
            return corpus.entries()

    everything = {e.trace_id for e in listed()}
    assert len(everything) == len(EXPECTED) + 1
    shards = [{e.trace_id for e in listed(CorpusFilter(shard=(i, 3)))} for i in (1, 2, 3)]
    assert set().union(*shards) == everything and sum(map(len, shards)) == len(everything)
    assert len(listed(CorpusFilter(failed=True))) == 3
    assert [e.root for e in listed(CorpusFilter(root="cp.orph*"))] == ["cp.orphan"]
    assert len(listed(CorpusFilter(where=(("user", "alice"),)))) == 0  # no run has that session variable
    assert len(listed(CorpusFilter(limit=2))) == 2
    ids = [e.test_id for e in listed()]
    assert ids == [e.test_id for e in listed()] and len(set(ids)) == len(ids)  # stable and unique


def test_trace_files_are_a_corpus_too(corpus_project: pytest.Pytester) -> None:
    out = corpus_project.path / "traces"
    out.mkdir()
    with Corpus(corpus_project.path / "store") as stored:
        from_store = [(e.trace_id, e.root, e.failed) for e in stored]
    for trace_id, _, _ in from_store:
        chronicle.write_trace(chronicle.load_trace(corpus_project.path / "store", trace_id), out / f"{trace_id}.jsonl")
    assert [(e.trace_id, e.root, e.failed) for e in Corpus(out)] == from_store
    assert [(e.trace_id, e.root, e.failed) for e in Corpus(str(out / "*.jsonl"))] == from_store
    corpus_project.makeconftest(FIX)
    result = corpus_project.runpytest(
        "-p", "no:cacheprovider", "--chronicle-corpus", "traces", "--chronicle-corpus-only",
        "--chronicle-root", "cp.run",
    )  # fmt: skip
    result.assert_outcomes(passed=4, failed=1, xfailed=1)


def test_bad_corpus_options_are_usage_errors(corpus_project: pytest.Pytester) -> None:
    for args, says in [
        (["--chronicle-shard", "4/3"], "I/N with 1 <= I <= N"),
        (["--chronicle-shard", "x"], "expected I/N"),
        (["--chronicle-where", "user=1"], "expected session.KEY=VALUE"),
        (["--chronicle-check", "nomodule"], "expected module:function"),
        (["--chronicle-import", "no_such_module_here"], "ModuleNotFoundError"),
    ]:
        result = corpus_project.runpytest("-p", "no:cacheprovider", "--chronicle-corpus", "store", *args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, args
        assert says in result.stderr.str(), (args, result.stderr.str())
    result = corpus_project.runpytest("-p", "no:cacheprovider", "--chronicle-corpus", "nowhere")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--chronicle-corpus nowhere" in result.stderr.str()


def test_five_hundred_traces_under_xdist_fall_into_the_right_table(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(corpusagent=AGENT)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.syspathinsert()
    sys.modules.pop("corpusagent", None)
    import corpusagent
    from opentelemetry.sdk.trace import TracerProvider

    config = chronicle.configure(
        store=chronicle.StoreOptions(path=pytester.path / "store"), tracer_provider=TracerProvider()
    )
    mix = ["sell 900"] * 120 + ["sell 600"] * 80 + ["sell 5"] * 299 + ["sell 7"]
    for request in mix:
        with contextlib.suppress(RuntimeError):
            corpusagent.run(request)
    config.force_flush()
    pytester.makeconftest(FIX + "corpusagent.MODE['break'] = True\n")
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--chronicle-corpus", "store", "--chronicle-corpus-only",
        "--chronicle-report", "report.json",
    )  # fmt: skip
    result.assert_outcomes(passed=419, failed=1, xfailed=80)
    result.stdout.fnmatch_lines(
        ["fixed 120 | still failing 80 | diverged 0 | newly broken 1 | unreplayable 0 | passed 299 | of 500 traces"]
    )
    entries = json.loads((pytester.path / "report.json").read_text())
    assert len(entries) == 500 and len({e["trace_id"] for e in entries}) == 500


def test_replay_all_runs_the_corpus_from_the_command_line(corpus_project: pytest.Pytester) -> None:
    (corpus_project.path / "fixes.py").write_text(FIX)
    proc = subprocess.run(
        [
            sys.executable, "-m", "chronicle_otel.cli", "replay-all", "store", "--root", "cp.run",
            "--import", "corpusagent", "--import", "fixes", "--report", "out/report.json", "--pytest-args=-q",
        ],
        cwd=corpus_project.path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(corpus_project.path), str(REPO)])},
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the diverged trace fails the run
    assert (
        "fixed 2 | still failing 1 | diverged 1 | newly broken 0 | unreplayable 0 | passed 2 | of 6 traces"
        in proc.stdout
    ), proc.stdout
    entries = json.loads((corpus_project.path / "out" / "report.json").read_text())
    assert sorted(e["corpus"]["outcome"] for e in entries) == sorted(
        ["passed", "passed", "diverged", "fixed", "fixed", "still failing"]
    )
    proc = subprocess.run(
        [sys.executable, "-m", "chronicle_otel.cli", "replay-all", "store", "-n", "x"],
        cwd=corpus_project.path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode != 0


def test_pull_since_writes_a_window_one_file_per_trace(corpus_project: pytest.Pytester) -> None:
    import io

    from chronicle_otel.cli import main as cli

    store, out = corpus_project.path / "store", corpus_project.path / "window"
    text = io.StringIO()
    assert cli(["pull", "--since", "1h", "--failed", "--from", str(store), "-o", str(out), "--json"], out=text) == 0
    summary = json.loads(text.getvalue())
    assert len(summary["traces"]) == 3 and all(t["failed"] for t in summary["traces"])
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{t['trace']}.jsonl" for t in summary["traces"])
    assert {e.trace_id for e in Corpus(out)} == {t["trace"] for t in summary["traces"]}
    err = io.StringIO()
    for argv in (["pull", "0" * 32, "--since", "1h"], ["pull", "0" * 32, "--failed"], ["pull"]):
        with contextlib.redirect_stderr(err):
            assert cli([*argv, "--from", str(store), "-o", str(out / "x")], out=io.StringIO()) == 2
    assert "not both" in err.getvalue() and "give --since" in err.getvalue() and "needs a trace id" in err.getvalue()
