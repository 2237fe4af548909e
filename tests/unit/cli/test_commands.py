from __future__ import annotations

import ast
import dataclasses
import gzip
import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

import chronicle_otel as chronicle
from chronicle_otel.cli import _commands, _gen_test, main
from tests.conftest import Recorder
from tests.json_backend import JsonBackend

REPO = Path(__file__).resolve().parents[3]


@chronicle.boundary(kind="llm", name="cli.ask")
def ask(question: str) -> str:
    return question.upper()


@chronicle.boundary(kind="agent", name="cli.agent")
def cli_agent(question: str, fail: bool = False) -> str:
    answer = ask(question)
    if fail:
        raise RuntimeError("agent failed")
    return answer


def run(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(args), out=out)
    return code, out.getvalue()


def test_list_show_and_failed_filter(recorder: Recorder) -> None:
    cli_agent("hello")
    with pytest.raises(RuntimeError):
        cli_agent("boom", fail=True)
    recorder.config.force_flush()
    store = str(recorder.path)
    code, out = run("list", "--store", store)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("ID ") and len(lines) == 3
    assert "ERROR" in lines[1] and "cli.agent" in lines[1]
    code, out = run("list", "--store", store, "--failed")
    assert len(out.splitlines()) == 2
    code, out = run("show", "latest-failed", "--store", store)
    assert code == 0
    assert "agent     cli.agent[0]" in out and "llm       cli.ask[0]" in out
    assert "err: " in out and "agent failed" in out


@chronicle.boundary(kind="tool", name="cli.flaky")
def flaky(attempt: int) -> str:
    if attempt == 0:
        raise TimeoutError("first attempt timed out")
    return "done"


@chronicle.boundary(kind="agent", name="cli.retrying")
def retrying() -> str:
    try:
        return flaky(0)
    except TimeoutError:
        return flaky(1)  # the run recovers: its root succeeds


def test_failed_means_the_run_failed_and_errors_means_any_error(recorder: Recorder) -> None:
    cli_agent("hello")
    retrying()
    with pytest.raises(RuntimeError):
        cli_agent("boom", fail=True)
    recorder.config.force_flush()
    failed, recovered, ok = [t.trace_id for t in recorder.store.list_traces()]
    store = str(recorder.path)

    def listed(*options: str) -> list[str]:
        code, out = run("list", "--store", store, "--json", *options)
        assert code == 0
        return [json.loads(line)["trace_id"] for line in out.splitlines()]

    assert listed("--failed") == [failed]
    assert listed("--errors") == [failed, recovered]
    assert listed() == [failed, recovered, ok]
    for latest, expected in (("latest-failed", failed), ("latest-error", failed)):
        code, out = run("show", latest, "--store", store, "--json")
        assert code == 0 and json.loads(out)["trace_id"] == expected
    retrying()  # the newest run with an error did not fail
    recorder.config.force_flush()
    newest = recorder.store.list_traces(limit=1)[0].trace_id
    assert json.loads(run("show", "latest-error", "--store", store, "--json")[1])["trace_id"] == newest
    assert json.loads(run("show", "latest-failed", "--store", store, "--json")[1])["trace_id"] == failed


def test_unknown_trace_is_a_clear_error(recorder: Recorder, capsys: pytest.CaptureFixture[str]) -> None:
    cli_agent("x")
    recorder.config.force_flush()
    code, _ = run("show", "0" * 32, "--store", str(recorder.path))
    assert code == 2
    assert "not found" in capsys.readouterr().err


def test_gen_test_writes_a_test_that_runs_as_is(recorder: Recorder, tmp_path: Path) -> None:
    cli_agent("hello")
    recorder.config.force_flush()
    out_dir = tmp_path / "regressions"
    code, out = run("gen-test", "latest", "--store", str(recorder.path), "--out", str(out_dir), "--json")
    assert code == 0
    written = json.loads(out)
    test_file, trace_file = Path(written["test"]), Path(written["trace"])
    assert test_file.exists() and trace_file.exists()
    source = test_file.read_text()
    assert '@pytest.mark.chronicle_replay(TRACE, stub={"kind:llm"})' in source
    tree = ast.parse(source)
    assert {a.name for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names} == {
        "Path",
        "pytest",
    }  # nothing of the project is imported at module level: the import runs inside the replay
    (function,) = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    first, second = function.body[:2]
    assert isinstance(first, ast.Import) and [a.name for a in first.names] == ["tests.unit.cli.test_commands"]
    assert isinstance(second, ast.Assign) and "chronicle_replay.rerun()" in ast.unparse(second.value)
    assert "    # Imported here, inside the replay: a configure() the module runs on import is isolated" in source
    assert chronicle.load_trace(trace_file).root is not None  # portable: loads without the store
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHRONICLE_", "OTEL_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(test_file), "-q", "-p", "no:cacheprovider", f"--rootdir={REPO}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


def test_gen_test_with_expectations_and_selectors(recorder: Recorder, tmp_path: Path) -> None:
    cli_agent("hello")
    recorder.config.force_flush()
    args = ["gen-test", "latest", "--store", str(recorder.path), "--out", str(tmp_path), "--name", "Greeting Bug"]
    args += [
        "--stub",
        "cli.ask",
        "--live",
        "cli.agent",
        "--expect",
        "result == 'HELLO'",
        "--expect",
        "len(result) == 5",
    ]
    code, _out = run(*args)
    assert code == 0
    source = (tmp_path / "test_greeting_bug.py").read_text()
    assert 'stub={"cli.ask"}, live={"cli.agent"}' in source
    assert "    assert result == 'HELLO'\n    assert len(result) == 5\n" in source
    compile(source, "test_greeting_bug.py", "exec")


def test_gen_test_from_a_file(recorder: Recorder, tmp_path: Path) -> None:
    cli_agent("hello")
    recorder.config.force_flush()
    saved = chronicle.write_trace(chronicle.load_trace(recorder.store, "latest"), tmp_path / "incident.jsonl")
    code, out = run("gen-test", "-", "--file", str(saved), "--out", str(tmp_path / "t"), "--json")
    assert code == 0 and Path(json.loads(out)["test"]).exists()


def test_pull_from_a_collector_file_then_replay(recorder: Recorder, tmp_path: Path) -> None:
    import struct

    cli_agent("a question long enough " * 500)  # the input is cut on the span
    recorder.config.force_flush()
    message = encode_spans(recorder.spans()).SerializeToString()
    (tmp_path / "collector.pb").write_bytes(struct.pack(">I", len(message)) + message)
    tid = recorder.store.list_traces()[0].trace_id
    code, out = run(
        "pull",
        tid,
        "--from",
        str(tmp_path / "collector.pb"),
        "-o",
        str(tmp_path / "t.jsonl"),
        "--store",
        str(recorder.path),
        "--json",
    )
    assert code == 0
    summary = json.loads(out)
    assert summary == {
        "trace": tid,
        "file": str(tmp_path / "t.jsonl"),
        "spans": 2,
        "boundaries": 2,
        "rehydrated": 4,  # input and output of both boundaries
        "missing_payloads": 0,
        "complete": True,
        "problems": [],
    }
    trace = chronicle.load_trace(tmp_path / "t.jsonl", store=tmp_path / "nowhere")
    with chronicle.replay(trace) as replay_run:
        assert replay_run.rerun() == ("a question long enough " * 500).upper()
    assert replay_run.report.ok


@chronicle.boundary(kind="tool", name="cli.lookup")
def lookup(key: str) -> str:
    return key[::-1]


@chronicle.boundary(kind="agent", name="cli.tool_agent")
def tool_agent(question: str) -> str:
    return lookup(ask(question)) + lookup(question)


def generate(recorder: Recorder, tmp_path: Path, *options: str) -> tuple[str, str]:
    """Generate a test of the latest trace; its source and what gen-test printed on stderr."""
    out, err = io.StringIO(), io.StringIO()
    old_err, sys.stderr = sys.stderr, err
    try:
        argv = ["gen-test", "latest", "--store", str(recorder.path), "--out", str(tmp_path), "--json", *options]
        code = main(argv, out=out)
    finally:
        sys.stderr = old_err
    assert code == 0, err.getvalue()
    return Path(json.loads(out.getvalue())["test"]).read_text(), err.getvalue()


def comment_block(source: str) -> list[str]:
    return [line for line in source.splitlines() if line.startswith("# ")]


def test_gen_test_lists_what_runs_live(recorder: Recorder, tmp_path: Path) -> None:
    tool_agent("hello")
    recorder.config.force_flush()
    source, err = generate(recorder, tmp_path / "a")
    block = comment_block(source)
    assert block[0] == "# Boundaries that run LIVE (their current code runs; the others answer from the recording):"
    assert block[1].split()[:5] == ["#", '"agent"', '"cli.tool_agent"', "1", "call"] and "(the root" in block[1]
    assert block[2].split() == ["#", '"tool"', '"cli.lookup"', "2", "calls"]
    assert not any("cli.ask" in line for line in block)  # kind:llm is stubbed
    assert block[3:] == [
        "# Tools that run live call what they called when recorded:",
        "# re-generate with --stub kind:tool to answer them from the recording (--stub kind:llm --stub kind:tool).",
    ]
    assert [line.removeprefix("gen-test: ") for line in err.splitlines()] == [b[2:] for b in block]

    source, err = generate(recorder, tmp_path / "b", "--stub", "kind:llm", "--stub", "kind:tool")
    block = comment_block(source)
    assert len(block) == 2 and "cli.tool_agent" in block[1] and "re-generate" not in source

    source, _ = generate(recorder, tmp_path / "c", "--stub", "kind:tool", "--live", "cli.lookup")
    block = comment_block(source)  # --live wins over --stub: no hint that would not help; the llm now runs live
    assert [line.split()[2] for line in block[1:]] == ['"cli.tool_agent"', '"cli.ask"', '"cli.lookup"']
    assert "re-generate" not in source

    source, err = generate(recorder, tmp_path / "d", "--stub", "kind:agent")  # the root answers for everything
    assert comment_block(source) == ["# No boundary runs live: every call is answered from the recording."]
    assert "gen-test: No boundary runs live" in err


def test_gen_test_lists_recorded_names_as_literals_in_the_comment(recorder: Recorder, tmp_path: Path) -> None:
    from chronicle_otel.model import Trace

    tool_agent("hello")
    recorder.config.force_flush()
    trace = chronicle.load_trace(recorder.store, "latest")
    lookups = [b for b in trace.boundaries if b.name == "cli.lookup"]
    assert len(lookups) == 2
    hostile = 'x"\nimport\ros\u2028\x0c#y\x1b[2J'
    renamed = [
        dataclasses.replace(b, name=hostile) if b.name == "cli.lookup" else b for b in trace.boundaries
    ]  # the comment block is computed from the trace: a name cannot end the comment line
    fake = Trace(trace.trace_id, trace.spans, tuple(renamed), trace.root)
    lines = _gen_test._live_lines(fake, ["kind:llm"], [])
    block = _gen_test._live_comment(lines)
    assert block.count("\n") == len(lines) and all(line.startswith("# ") for line in block.splitlines())
    assert ast.literal_eval(block.splitlines()[2].split()[2]) == hostile
    assert ast.parse(block).body == []


# ------------------------------------------------------------------ pull: strict, --wait, rotated collector files


def run_err(*args: str) -> tuple[int, str, str]:
    """Run the command; its exit status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    old_err, sys.stderr = sys.stderr, err
    try:
        code = main(list(args), out=out)
    finally:
        sys.stderr = old_err
    return code, out.getvalue(), err.getvalue()


def otlp_lines(spans: list[ReadableSpan]) -> bytes:
    """Spans as the Collector file exporter writes them (format json): one request per span, one per line."""
    return b"".join(json.dumps(MessageToDict(encode_spans([s]))).encode() + b"\n" for s in spans)


@pytest.fixture
def no_local_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No store holds the payloads: $CHRONICLE_HOME names an empty directory."""
    monkeypatch.setenv("CHRONICLE_HOME", str(tmp_path / "no-store"))
    return tmp_path / "no-store"


def test_pull_of_a_trace_with_missing_payloads_writes_it_and_exits_3(
    recorder: Recorder, tmp_path: Path, no_local_store: Path
) -> None:
    cli_agent("a question long enough " * 500)  # input and output cut on both spans
    recorder.config.force_flush()
    (tmp_path / "collector.jsonl").write_bytes(otlp_lines(recorder.spans()))
    tid = recorder.store.list_traces()[0].trace_id
    args = [
        "pull",
        tid,
        "--from",
        str(tmp_path / "collector.jsonl"),
        "-o",
        str(tmp_path / "t.jsonl"),
        "--quiet",
        "--json",
    ]
    code, out, err = run_err(*args)  # $CHRONICLE_HOME holds no store: no payload is found
    assert code == _commands.EXIT_INCOMPLETE == 3
    assert (tmp_path / "t.jsonl").exists()  # written all the same, to look at
    summary = json.loads(out)
    assert summary["complete"] is False and summary["missing_payloads"] == 4
    problems = {(p["boundary"], p["payload"]) for p in summary["problems"]}
    assert problems == {(n, f) for n in ("cli.agent", "cli.ask") for f in ("input", "output")}
    assert all(p["problem"] == "missing-payload" and p["digest"].startswith("sha256:") for p in summary["problems"])
    lines = [line for line in err.splitlines() if line.startswith("chronicle: incomplete trace: ")]
    assert len(lines) == 4
    ask_input = next(line for line in lines if "'cli.ask'" in line and "the input payload" in line)
    digest = next(p["digest"] for p in summary["problems"] if p["boundary"] == "cli.ask" and p["payload"] == "input")
    assert f"the input payload {digest[:19]}… is cut to" in ask_input and "cli.agent[0] > cli.ask[0]" in ask_input
    assert "--allow-incomplete" in err.splitlines()[-1] and "--wait" not in err.splitlines()[-1]  # a file
    assert "warning:" not in err  # the loader's warnings about these payloads are not repeated

    code, out, err = run_err(*args, "--allow-incomplete")
    assert code == 0 and json.loads(out)["complete"] is False
    assert sum(line.startswith("warning: incomplete trace: ") for line in err.splitlines()) == 4

    code, out, _ = run_err(*args, "--store", str(recorder.path))  # the store that has them: complete
    assert code == 0 and json.loads(out)["complete"] is True


def test_pull_of_a_trace_without_boundary_exits_3(recorder: Recorder, tmp_path: Path) -> None:
    with recorder.provider.get_tracer("svc").start_as_current_span("GET /orders") as span:
        tid = format(span.get_span_context().trace_id, "032x")
    (tmp_path / "collector.jsonl").write_bytes(otlp_lines(recorder.spans()))
    args = ["pull", tid, "--from", str(tmp_path / "collector.jsonl"), "-o", str(tmp_path / "t.jsonl"), "--json"]
    code, out, err = run_err(*args)
    assert code == 3 and (tmp_path / "t.jsonl").exists()
    summary = json.loads(out)
    assert summary["boundaries"] == 0 and summary["complete"] is False
    assert [p["problem"] for p in summary["problems"]] == ["no-boundary"]
    assert "chronicle: incomplete trace: 1 spans and no boundary" in err
    code, _, err = run_err(*args, "--allow-incomplete", "--wait", "30s")  # a file: --wait means one read
    assert code == 0 and "waiting" not in err


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30.0), ("2m", 120.0), ("500ms", 0.5), ("10", 10.0), ("1.5", 1.5), (" 2 s ", 2.0), ("1h", 3600.0)],
)
def test_wait_durations(text: str, seconds: float) -> None:
    assert _commands._duration(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "-1", "1d", "1e3", "s", "8h*30"])
def test_bad_wait_durations_are_usage_errors(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["pull", "a" * 32, "--from", "x.jsonl", "-o", "y.jsonl", "--wait", text])
    assert exc.value.code == 2
    assert "duration" in capsys.readouterr().err


class GrowingBackend:
    """A Jaeger query service (API v3) on 127.0.0.1 that answers the n-th request for the trace with
    ``stages[n]`` (the last stage repeats; None: 404), as a backend still ingesting does."""

    def __init__(self, trace_id: str, stages: list[list[ReadableSpan] | None]) -> None:
        self.requests = 0
        self.stages = stages
        self.lock = threading.Lock()
        backend = self

        def route(path: str) -> tuple[int, Any]:
            if path.split("?")[0] != f"/api/v3/traces/{trace_id}":
                return 404, {"error": {"message": "no such route"}}
            with backend.lock:
                stage = backend.stages[min(backend.requests, len(backend.stages) - 1)]
                backend.requests += 1
            if stage is None:
                return 404, {"error": {"httpCode": 404, "message": "trace not found"}}
            return 200, {"result": MessageToDict(encode_spans(stage))}

        self.server = JsonBackend(route)
        self.url = f"jaeger-v3+http://{self.server.host}"

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def growing(recorder: Recorder) -> Iterator[Callable[..., GrowingBackend]]:
    backends: list[GrowingBackend] = []

    def start(trace_id: str, stages: list[list[ReadableSpan] | None]) -> GrowingBackend:
        backends.append(GrowingBackend(trace_id, stages))
        return backends[-1]

    yield start
    for backend in backends:
        backend.close()


def served_trace(recorder: Recorder) -> tuple[str, dict[str, ReadableSpan]]:
    with recorder.provider.get_tracer("svc").start_as_current_span("POST /ask") as span:
        cli_agent("hello")
    recorder.config.force_flush()
    by_name = {s.name: s for s in recorder.spans()}
    assert set(by_name) == {"POST /ask", "cli.agent", "cli.ask"}
    return format(span.get_span_context().trace_id, "032x"), by_name


def test_pull_wait_fetches_until_the_trace_is_whole_and_stable(
    recorder: Recorder, tmp_path: Path, growing: Callable[..., GrowingBackend]
) -> None:
    tid, s = served_trace(recorder)
    http, agent, llm = s["POST /ask"], s["cli.agent"], s["cli.ask"]
    backend = growing(tid, [None, [http], [http, llm], [http, llm, agent]])
    out_file = str(tmp_path / "t.jsonl")
    code, out, err = run_err(
        "pull", tid, "--from", backend.url, "-o", out_file, "--wait", "30s", "--poll-interval", "0", "--json"
    )
    assert code == 0, err
    summary = json.loads(out)
    assert summary["spans"] == 3 and summary["boundaries"] == 2 and summary["complete"] is True
    assert backend.requests == 5  # not found, 1, 2, 3, 3 spans: the same count twice
    waits = [line for line in err.splitlines() if line.startswith("waiting: ")]
    assert waits[0].startswith("waiting: the backend does not have the trace yet")
    assert len(waits) == 4
    assert chronicle.load_trace(out_file).root is not None

    backend = growing(tid, [[http, llm, agent]])
    code, out, err = run_err("pull", tid, "--from", backend.url, "-o", out_file, "--quiet")
    assert code == 0 and backend.requests == 1 and err == ""  # without --wait: one fetch

    backend = growing(tid, [[http]])  # stable, but never a boundary: polls until the time is up
    code, out, err = run_err(
        "pull", tid, "--from", backend.url, "-o", out_file, "--wait", "50ms", "--poll-interval", "0.01", "--json"
    )
    assert code == 3 and backend.requests >= 1 and json.loads(out)["boundaries"] == 0
    assert "wait for the backend (--wait 30s)" in err.splitlines()[-1]
    backend = growing(tid, [[http]])
    args = ("pull", tid, "--from", backend.url, "-o", out_file, "--wait", "30s", "--poll-interval", "0")
    code, out, err = run_err(*args, "--allow-incomplete")
    assert code == 0 and backend.requests == 2  # stable is enough when incomplete is accepted


def test_pull_wait_for_a_trace_never_ingested_is_not_found(
    recorder: Recorder, tmp_path: Path, growing: Callable[..., GrowingBackend]
) -> None:
    backend = growing("ab" * 16, [None])
    args = ("pull", "ab" * 16, "--from", backend.url, "-o", str(tmp_path / "t.jsonl"))
    code, _, err = run_err(*args, "--wait", "50ms", "--poll-interval", "0.01")
    assert code == 2 and "not found" in err and not (tmp_path / "t.jsonl").exists()
    assert backend.requests >= 1


def test_pull_wait_reports_a_trace_still_growing_when_time_is_up(
    recorder: Recorder, tmp_path: Path, growing: Callable[..., GrowingBackend], monkeypatch: pytest.MonkeyPatch
) -> None:
    tid, s = served_trace(recorder)
    whole = [s["POST /ask"], s["cli.ask"], s["cli.agent"]]
    backend = growing(tid, [whole[:2], whole, whole[:2], whole, whole[:2], whole])  # never the same twice in a row
    ticks = iter(range(1000))
    monkeypatch.setattr(_commands, "_clock", lambda: float(next(ticks)))  # each look at the clock: one second later
    args = (
        "pull",
        tid,
        "--from",
        backend.url,
        "-o",
        str(tmp_path / "t.jsonl"),
        "--store",
        str(recorder.path),
        "--json",
    )
    code, out, err = run_err(*args, "--wait", "4s", "--poll-interval", "0")
    assert code == 3
    summary = json.loads(out)
    assert [p["problem"] for p in summary["problems"]] == ["still-growing"]
    assert summary["problems"][0]["message"] == "the trace was still growing when --wait ran out (3 then 2 spans)"
    assert "chronicle: incomplete trace: the trace was still growing" in err


def rotated_collector_output(recorder: Recorder, directory: Path) -> str:
    """The Collector file exporter's rotation: a gzip backup with the first spans, the active file with the rest."""
    tool_agent("hello")
    recorder.config.force_flush()
    spans = recorder.spans()
    directory.mkdir()
    backup = directory / "traces-2026-11-30T10-00-00.000.jsonl.gz"
    backup.write_bytes(gzip.compress(otlp_lines(spans[:2])))
    (directory / "traces.jsonl").write_bytes(otlp_lines(spans[2:]))
    (directory / "README.txt").write_text("not trace data\n")
    (directory / ".traces.jsonl.swp").write_bytes(b"\x00garbage")
    return format(spans[0].context.trace_id, "032x")


def test_pull_from_a_directory_or_glob_of_rotated_files(recorder: Recorder, tmp_path: Path) -> None:
    tid = rotated_collector_output(recorder, tmp_path / "collector-out")
    for source in (tmp_path / "collector-out", tmp_path / "collector-out" / "traces*.jsonl*"):
        out_file = str(tmp_path / "t.jsonl")
        code, out, err = run_err(
            "pull", tid, "--from", str(source), "-o", out_file, "--store", str(recorder.path), "--json"
        )
        assert code == 0, err
        summary = json.loads(out)
        assert summary["spans"] == 4 and summary["boundaries"] == 4 and summary["complete"] is True
    code, out, _ = run_err("show", tid, "--file", str(tmp_path / "collector-out" / "*.jsonl"))
    assert code == 0 and "(2 boundaries, 2 spans)" in out  # the active file alone: the second half of the trace
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("x")
    code, _, err = run_err("pull", tid, "--from", str(tmp_path / "empty"), "-o", str(tmp_path / "u.jsonl"))
    assert code == 2 and "a directory that is not a chronicle store" in err


@pytest.mark.parametrize(
    "command",
    [
        ["list"],
        ["show", "latest"],
        ["show", "latest", "--file", "{file}"],
        ["show", "latest", "--file", "{file}", "--json"],
        ["diff", "{file}", "{file}"],
        ["gen-test", "latest", "--file", "{file}", "--out", "{tmp}/t"],
        ["view", "latest", "--file", "{file}", "--out", "{tmp}/v.html"],
        ["pull", "-", "--from", "{file}", "-o", "{tmp}/pulled.jsonl"],
        ["gc"],
    ],
    ids=lambda c: " ".join(c[:2]) + (" --file" if "--file" in c else ""),
)
def test_a_store_named_that_does_not_exist_is_an_error_in_every_command(
    recorder: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    cli_agent("hello")
    recorder.config.force_flush()
    trace = chronicle.load_trace(recorder.store, "latest")
    saved = chronicle.write_trace(trace, tmp_path / "incident.jsonl")
    monkeypatch.setenv("CHRONICLE_HOME", str(recorder.path))  # a store the command must not fall back to
    missing = tmp_path / "nonexistent"
    args = [a.format(file=saved, tmp=tmp_path) for a in command]
    if args[0] == "pull":
        args[1] = trace.trace_id
    code, out, err = run_err(*args, "--store", str(missing))
    assert code == 2, (out, err)
    assert f"no chronicle store at {missing}" in err and "--store" in err
    assert not (tmp_path / "t").exists() and not (tmp_path / "v.html").exists()
    assert not (tmp_path / "pulled.jsonl").exists()
