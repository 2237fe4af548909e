from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest

from chronicle_otel.cli import main
from chronicle_otel.store import LocalStore, RetentionPolicy
from tests.unit.store.test_retention import DAY, payload, put, snapshot, stored, tid, trace_ids


def run(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(args), out=out)
    return code, out.getvalue()


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store of two failed traces, two sampled successes and two unsampled ones (at rate 0.5), with payloads."""
    path = tmp_path / "store"
    writer = LocalStore(path, durable=False)
    start = time.time_ns() - DAY  # the runs started a day ago
    for n in range(2):
        put(writer, tid(n, sampled=False), start_ns=start, status="ERROR", errors=1)
        put(writer, tid(10 + n, sampled=True), start_ns=start, refs=(payload(10 + n),))
        put(writer, tid(20 + n, sampled=False), start_ns=start, refs=(payload(20 + n),))
    writer.put_payload(*payload(99))  # no trace refers to it
    writer.close()
    return path


def test_gc_prints_one_line_and_keeps_failures_and_the_sample(store: Path) -> None:
    code, out = run("gc", "--store", str(store), "--success-rate", "0.5", "--grace", "0")
    assert code == 0
    assert out.count("\n") == 1 and out.startswith("gc: kept 4 traces (2 with errors, 0 pending), removed 2 ")
    assert trace_ids(store) == {tid(0, False), tid(1, False), tid(10, True), tid(11, True)}
    reader = LocalStore(store)
    assert reader.has_payload(payload(10)[0]) and not reader.has_payload(payload(20)[0])
    assert not reader.has_payload(payload(99)[0])
    reader.close()


def test_gc_json_report(store: Path) -> None:
    code, out = run("gc", "--store", str(store), "--success-rate", "0", "--no-keep-failed", "--grace", "0", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["dry_run"] is False
    assert (report["traces_removed"], report["failed_removed"], report["traces_kept"]) == (6, 2, 0)
    assert report["payloads_removed"] == 5 and report["warnings"] == []
    assert trace_ids(store) == set()


def test_gc_dry_run_changes_nothing(store: Path) -> None:
    before = snapshot(store)
    code, out = run("gc", "--store", str(store), "--success-rate", "0", "--grace", "0", "--dry-run", "--json")
    assert code == 0
    assert json.loads(out)["traces_removed"] == 4 and json.loads(out)["dry_run"] is True
    assert snapshot(store) == before
    code, out = run("gc", "--store", str(store), "--success-rate", "0", "--grace", "0", "--dry-run")
    assert out.startswith("gc (dry run): would keep 2 traces")


def test_gc_keep_payloads_age_and_size(store: Path) -> None:
    code, out = run("gc", "--store", str(store), "--keep-payloads", "--max-age", "1h", "--grace", "0", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["removed_expired"] == 6 and report["payloads_removed"] == 0
    assert stored(store, payload(99)[0]) == payload(99)[1]


def test_gc_size_cap(store: Path) -> None:
    code, out = run("gc", "--store", str(store), "--max-size", "1kB", "--grace", "0", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["data_bytes_after"] <= 1000 and report["removed_for_size"] > 0


def test_gc_defaults_to_a_grace_period(store: Path) -> None:
    code, out = run("gc", "--store", str(store), "--success-rate", "0", "--json")
    assert code == 0 and json.loads(out)["traces_pending"] == 6
    assert len(trace_ids(store)) == 6


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--success-rate", "1.5"], "--success-rate"),
        (["--max-age", "3 fortnights"], "--max-age"),
        (["--max-size", "lots"], "--max-size"),
        (["--min-keep-errors-age", "never"], "--min-keep-errors-age"),
        (["--min-keep-failed-age", "never"], "--min-keep-errors-age"),  # its earlier name
        (["--grace", "soon"], "--grace"),
    ],
)
def test_gc_bad_values_exit_2_and_name_the_option(
    store: Path, args: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(store)
    code, out = run("gc", "--store", str(store), *args)
    assert code == 2 and out == ""
    assert f"invalid value for {flag}:" in capsys.readouterr().err
    assert snapshot(store) == before


def test_gc_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        run("gc", "--success-rate", "half")
    assert exc.value.code == 2
    assert "--success-rate" in capsys.readouterr().err


def test_gc_without_a_store_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run("gc", "--store", str(tmp_path))
    assert code == 2
    assert f"no chronicle store at {tmp_path} (--store)" in capsys.readouterr().err


def test_gc_defaults_to_the_chronicle_home(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHRONICLE_HOME", str(store))
    code, out = run("gc", "--success-rate", "0.5", "--grace", "0", "--json")
    assert code == 0 and json.loads(out)["traces_removed"] == 2
    assert RetentionPolicy(success_rate=0.5).sampled(tid(10, True))


@pytest.fixture(autouse=True)
def plain_store_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read, size or damage segment bytes by hand: the store writes them as plain JSON lines here
    (tests/unit/store/test_compression.py covers the compressed form)."""
    monkeypatch.setenv("CHRONICLE_STORE_COMPRESS", "false")


def test_gc_keeps_every_trace_with_errors_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "store"
    writer = LocalStore(path, durable=False)
    start = time.time_ns() - DAY
    put(writer, tid(0, sampled=False), start_ns=start, status="ERROR", errors=1)  # a failed run
    put(writer, tid(1, sampled=False), start_ns=start, status="OK", errors=1)  # a run that recovered from an error
    put(writer, tid(2, sampled=False), start_ns=start)
    writer.close()
    code, out = run("gc", "--store", str(path), "--success-rate", "0", "--grace", "0", "--no-keep-errors", "--dry-run")
    assert code == 0 and out.startswith("gc (dry run): would keep 0 traces (0 with errors, 0 pending)")
    code, out = run("gc", "--store", str(path), "--success-rate", "0", "--grace", "0")
    assert code == 0 and out.startswith("gc: kept 2 traces (2 with errors, 0 pending), removed 1 (0 with errors; ")
    assert trace_ids(path) == {tid(0, False), tid(1, False)}


def test_gc_help_says_it_keeps_traces_with_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run("gc", "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert "--keep-errors, --no-keep-errors" in text and "failure" not in text
    assert "keep every trace with an error (a failed run, or any span that ended with ERROR status" in text
