"""Every SQLite connection the store, the loader and the CLI open is closed when they are done with it.

Python 3.13 warns (``ResourceWarning: unclosed database``) when a connection is garbage-collected open; the
suite turns that into a failure, at whatever later test the collector happens to run in. These tests see the
connections themselves, so they hold on every version.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import sqlite3
import struct
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

import chronicle_otel as chronicle
from chronicle_otel.cli import main
from chronicle_otel.store import MANIFEST, LocalStore, StoreReader
from chronicle_otel.store.reader import INDEX, STORE_FORMAT
from tests.conftest import Recorder, make_recorder


@chronicle.boundary(kind="llm", name="closing.ask")
def ask(question: str) -> str:
    return question.upper()


@chronicle.boundary(kind="agent", name="closing.agent")
def agent(question: str) -> str:
    return ask(question)


def is_open(db: sqlite3.Connection) -> bool:
    try:
        db.total_changes  # noqa: B018 - raises on a closed connection
    except sqlite3.ProgrammingError:
        return False
    return True


class Connections:
    """Every connection opened through ``sqlite3.connect`` while the fixture is active."""

    def __init__(self) -> None:
        self.opened: list[sqlite3.Connection] = []

    def during(self, action: Callable[[], Any]) -> tuple[Any, list[sqlite3.Connection]]:
        """Run ``action``; its result, and the connections it opened and left open. Fails on a ResourceWarning."""
        gc.collect()  # what earlier tests left behind is not this action's
        first = len(self.opened)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            result = action()
            gc.collect()
        assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
        new = self.opened[first:]
        assert new, "the action opened no connection: the test checks nothing"
        return result, [db for db in new if is_open(db)]


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> Connections:
    seen = Connections()
    real = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        db = real(*args, **kwargs)
        seen.opened.append(db)
        return db

    monkeypatch.setattr(sqlite3, "connect", connect)
    return seen


@pytest.fixture
def recorded(recorder: Recorder, tmp_path: Path) -> Iterator[tuple[Recorder, Path]]:
    """A store holding one run whose payloads are cut on the spans, and the same spans as a collector file."""
    agent("a question long enough to be cut on the span " * 200)
    recorder.config.force_flush()
    message = encode_spans(recorder.spans()).SerializeToString()
    collector = tmp_path / "collector.pb"
    collector.write_bytes(struct.pack(">I", len(message)) + message)
    yield recorder, collector
    recorder.config.shutdown()


def test_loading_from_a_store_directory_closes_it(recorded: tuple[Recorder, Path], connections: Connections) -> None:
    recorder, _ = recorded
    trace, still_open = connections.during(lambda: chronicle.load_trace(recorder.path, "latest"))
    assert [b.name for b in trace.boundaries] == ["closing.agent", "closing.ask"]
    assert still_open == []


def test_a_reader_used_as_a_context_manager_is_closed_at_the_end(
    recorded: tuple[Recorder, Path], connections: Connections
) -> None:
    recorder, _ = recorded

    def listed() -> int:
        with StoreReader(recorder.path) as reader:
            return len(reader.list_traces())

    count, still_open = connections.during(listed)
    assert count == 1
    assert still_open == []


def test_loading_a_file_closes_the_payload_stores_it_opened(
    recorded: tuple[Recorder, Path], connections: Connections, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder, collector = recorded
    trace, still_open = connections.during(lambda: chronicle.load_trace(collector, store=str(recorder.path)))
    assert trace.root is not None and trace.root.raw_input is not None
    assert trace.root.raw_input.status == "rehydrated" and still_open == []
    monkeypatch.setenv("CHRONICLE_HOME", str(recorder.path))  # the default local store, asked last
    trace, still_open = connections.during(lambda: chronicle.load_trace(collector))
    assert trace.root is not None and trace.root.raw_input is not None
    assert trace.root.raw_input.status == "rehydrated" and still_open == []


def test_a_failed_load_closes_the_store(recorded: tuple[Recorder, Path], connections: Connections) -> None:
    recorder, _ = recorded

    def load() -> None:
        with pytest.raises(chronicle.TraceNotFoundError):
            chronicle.load_trace(recorder.path, "0" * 32)

    _, still_open = connections.during(load)
    assert still_open == []


def test_a_store_the_caller_opened_stays_the_callers(recorded: tuple[Recorder, Path], connections: Connections) -> None:
    recorder, _ = recorded
    with contextlib.closing(StoreReader(recorder.path)) as reader:
        _, still_open = connections.during(lambda: chronicle.load_trace(reader, "latest"))
        assert len(still_open) == 1  # the reader's own connection: closing it is the caller's call
        assert reader.list_traces()[0].root_boundary == "closing.agent"
    assert not is_open(still_open[0])


@pytest.mark.parametrize(
    "command",
    [
        ["list"],
        ["list", "--failed"],
        ["show", "latest"],
        ["show", "0" * 32],  # not found: an error, the store closed all the same
        ["gen-test", "latest", "--out", "{tmp}/regressions"],
        ["pull", "{trace}", "--from", "{collector}", "-o", "{tmp}/pulled.jsonl"],
    ],
    ids=["list", "list-failed", "show", "show-unknown", "gen-test", "pull"],
)
def test_cli_commands_close_the_stores_they_open(
    recorded: tuple[Recorder, Path],
    connections: Connections,
    tmp_path: Path,
    command: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    recorder, collector = recorded
    trace_id = recorder.store.list_traces()[0].trace_id
    argv = [a.format(tmp=tmp_path, trace=trace_id, collector=collector) for a in command]
    argv += ["--store", str(recorder.path)]
    code, still_open = connections.during(lambda: main(argv, out=io.StringIO()))
    assert code == (2 if "0" * 32 in argv else 0), capsys.readouterr().err
    assert still_open == []


def test_a_pipeline_shutdown_closes_the_store(tmp_path: Path, connections: Connections) -> None:
    def record_and_shut_down() -> None:
        recorder = make_recorder(tmp_path)
        agent("hello")
        recorder.config.force_flush()
        with contextlib.closing(LocalStore(recorder.path)) as store:
            assert [t.root_boundary for t in store.list_traces()] == ["closing.agent"]
        recorder.config.shutdown()

    _, still_open = connections.during(record_and_shut_down)
    assert still_open == []


def test_an_unreadable_index_is_closed_on_the_error_path(tmp_path: Path, connections: Connections) -> None:
    (tmp_path / MANIFEST).write_text(json.dumps({"format": STORE_FORMAT}))
    (tmp_path / INDEX).write_bytes(b"not a database" * 100)

    def read() -> None:
        with contextlib.closing(StoreReader(tmp_path)) as reader, pytest.raises(chronicle.StoreError):
            reader.list_traces()

    _, still_open = connections.during(read)
    assert still_open == []
