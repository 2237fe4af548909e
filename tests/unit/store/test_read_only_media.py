"""A store on read-only media (an archive, a CI artifact, a read-only volume) reads like any other: ``list_traces``,
``load_trace``, ``chronicle list`` and ``chronicle show``, from a process that may not write a byte of it."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import chronicle_otel as chronicle
from chronicle_otel.store import StoreReader
from tests.conftest import make_recorder
from tests.unit.store.test_store_faults import DROP_DAC

REPO = Path(__file__).parents[3]

pytestmark = pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX file modes")

# Reads the store as a user who may not write it: root without the capabilities that ignore file modes.
READ = (
    "import json\n"
    + DROP_DAC
    + textwrap.dedent(
        """
        import contextlib, io, sys
        import chronicle_otel as chronicle
        from chronicle_otel.cli import main
        from chronicle_otel.store import StoreReader

        path = sys.argv[1]
        out = {"may_write": os.access(path, os.W_OK)}
        try:
            reader = StoreReader(path)
            out["listed"] = [t.trace_id for t in reader.list_traces()]
            reader.close()
            trace = chronicle.load_trace(path, out["listed"][0])
            out["loaded"] = [[b.name, b.input, b.output] for b in trace.boundaries]
        except Exception as exc:
            out["error"] = f"{type(exc).__name__}: {exc}"
        for command in (["list"], ["show", "latest"]):
            text, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stderr(err):
                code = main([*command, "--store", path], out=text)
            out[command[0]] = [code, text.getvalue(), err.getvalue()]
        out["files"] = sorted(os.listdir(path))
        print(json.dumps(out))
        """
    )
)


@chronicle.boundary(kind="tool", name="ro.lookup")
def lookup(order: str) -> dict[str, Any]:
    return {"order": order, "status": "shipped"}


@chronicle.boundary(kind="agent", name="ro.agent")
def agent(question: str) -> str:
    return f"your order is {lookup(question)['status']}"


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """Every file of ``path`` read-only, every folder read and search only, within the block."""
    entries = [path, *path.rglob("*")]
    for entry in entries:
        entry.chmod(0o555 if entry.is_dir() else 0o444)
    try:
        yield
    finally:
        for entry in entries:
            entry.chmod(0o755 if entry.is_dir() else 0o644)


@pytest.fixture
def archived(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A store recorded, shut down cleanly, then made read-only; and its one trace id."""
    recorder = make_recorder(tmp_path)
    assert agent("A-17") == "your order is shipped"
    recorder.config.shutdown()
    store = recorder.path
    reader = StoreReader(store)
    [trace_id] = [t.trace_id for t in reader.list_traces()]
    reader.close()
    assert not list(store.glob("index.sqlite3-*"))  # the last connection closed the index: no write-ahead log
    with read_only(store):
        yield store, trace_id


def read_as_another_user(store: Path) -> dict[str, Any]:
    """What :data:`READ` found in ``store``, read by a process that may not write it (skips when none can be made)."""
    proc = subprocess.run(
        [sys.executable, "-c", READ, str(store)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    if "skip" in result:
        pytest.skip(f"running as root and {result['skip']}: file modes cannot make the store read-only")
    assert result["may_write"] is False
    assert "error" not in result, result["error"]
    return result


def test_a_store_on_read_only_media_lists_loads_and_shows(archived: tuple[Path, str]) -> None:
    store, trace_id = archived
    result = read_as_another_user(store)
    assert result["listed"] == [trace_id]
    assert result["loaded"] == [
        ["ro.agent", {"question": "A-17"}, "your order is shipped"],
        ["ro.lookup", {"order": "A-17"}, {"order": "A-17", "status": "shipped"}],
    ]
    code, text, err = result["list"]
    assert (code, err) == (0, "") and trace_id[:8] in text and "ro.agent" in text
    code, text, err = result["show"]
    assert (code, err) == (0, "") and trace_id in text and "ro.lookup[0]" in text and "shipped" in text
    assert result["files"] == ["chronicle-store.json", "index.sqlite3", "spans"]  # nothing written beside it


CRASH = textwrap.dedent(
    """
    import os, sys
    import chronicle_otel as chronicle
    chronicle.configure(store=chronicle.StoreOptions(path=sys.argv[1], processor="simple", durable=False), otlp=False)

    @chronicle.boundary(kind="agent", name="ro.crashed")
    def crashed(question):
        return question.upper()

    crashed("a-18")
    os._exit(0)  # no shutdown: the index's write-ahead log stays beside it, holding the trace
    """
)


def test_a_read_only_store_whose_writer_died_is_read_with_its_write_ahead_log(tmp_path: Path) -> None:
    store = tmp_path / "store"
    proc = subprocess.run([sys.executable, "-c", CRASH, str(store)], cwd=REPO, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (store / "index.sqlite3-wal").stat().st_size > 0
    with read_only(store):
        result = read_as_another_user(store)
    assert len(result["listed"]) == 1
    assert result["loaded"] == [["ro.crashed", {"question": "a-18"}, "A-18"]]
