"""Trace ids as people type them: a unique prefix everywhere a trace id goes, the candidates of an ambiguous one, a
clear word for what is not a trace id, and for a store that is missing or empty."""

from __future__ import annotations

from pathlib import Path

import pytest

import chronicle_otel as chronicle
from chronicle_otel.errors import TraceLoadError, TraceNotFoundError
from tests.conftest import Recorder, make_recorder
from tests.unit.agents import record_support
from tests.unit.cli.command import run

TWINS = (0x17B55BA4 << 96 | 1, 0x17B55BA4 << 96 | 2, 0x2C000000 << 96 | 3)  # two ids share 8 digits


@pytest.fixture
def twins(recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Three recorded runs whose trace ids are chosen: the first two share the prefix 17b55ba4."""
    ids = iter(TWINS)
    monkeypatch.setattr(recorder.provider.id_generator, "generate_trace_id", lambda: next(ids))
    return [record_support(recorder, f"refund {i}") for i in range(3)]


def test_a_unique_prefix_names_its_trace_everywhere(recorder: Recorder, twins: list[str], tmp_path: Path) -> None:
    store = str(recorder.path)
    third = twins[2]
    assert third.startswith("2c000000")
    assert run("show", "2c00", "--store", store)[1].startswith(f"trace {third}  (")
    assert run("show", "2C00", "--store", store)[0] == 0  # any case
    code, out, _ = run("gen-test", "2c00", "--store", store, "--out", str(tmp_path / "t"), "--json")
    assert code == 0 and "2c000000" in out
    assert run("diff", "2c00", third, "--store", store)[0] == 0
    assert run("list", "2c00", "--store", store)[1].splitlines()[1].startswith("2c000000 ")
    assert chronicle.load_trace(recorder.path, "2c00").trace_id == third
    saved = chronicle.write_trace(chronicle.load_trace(recorder.path, third), tmp_path / "one.jsonl")
    assert chronicle.load_trace(saved, "2c000").trace_id == third


def test_an_ambiguous_prefix_lists_the_candidates(recorder: Recorder, twins: list[str], tmp_path: Path) -> None:
    code, out, err = run("show", "17b55ba4", "--store", str(recorder.path))
    assert code == 2 and out == ""
    assert "the trace id prefix 17b55ba4 is ambiguous: 2 traces start with it" in err
    assert twins[0] in err and twins[1] in err
    with pytest.raises(TraceLoadError, match="ambiguous"):
        chronicle.load_trace(recorder.path, "17b55ba4")
    _, out, _ = run("list", "--store", str(recorder.path))
    shown = [line.split()[0] for line in out.splitlines()[1:]]
    assert shown == ["2c000000", twins[1], twins[0]]  # long enough to name one trace each (here: all 32 digits)
    assert all(run("show", prefix, "--store", str(recorder.path))[0] == 0 for prefix in shown)


def test_what_is_not_a_trace_id_is_said_so(recorder: Recorder) -> None:
    record_support(recorder, "refund")
    for given in ("zz-not-hex", "abc", "latest-ok", "g" * 32, "a" * 33):
        code, _, err = run("show", given, "--store", str(recorder.path))
        assert code == 2, given
        assert "is not a trace id: give 32 hex digits, a unique prefix of at least 4" in err
        assert "'latest', 'latest-failed' or 'latest-error'" in err
    code, _, err = run("show", "0000", "--store", str(recorder.path))
    assert code == 2 and "trace 0000 not found" in err
    with pytest.raises(TraceNotFoundError):
        chronicle.load_trace(recorder.path, "0000")


def test_a_missing_store_is_not_an_empty_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for command in (["show", "latest"], ["gen-test", "latest"], ["diff", "abcd", "abce"], ["list"]):
        code, _, err = run(*command)
        assert code == 2
        assert f"no chronicle store at {tmp_path / '.chronicle'} (./.chronicle): nothing was recorded here" in err
        assert "chronicle_otel.configure()" in err and "CHRONICLE_HOME" in err
    monkeypatch.setenv("CHRONICLE_HOME", str(tmp_path / "home"))
    code, _, err = run("show", "latest")
    assert code == 2 and f"($CHRONICLE_HOME={tmp_path / 'home'})" in err
    recorder = make_recorder(tmp_path / "rec")
    recorder.store._connect(create=True)
    for command in (["show", "latest"], ["show", "latest-failed"], ["show", "abcd"]):
        code, _, err = run(*command, "--store", str(recorder.path))
        assert code == 2 and "has no traces yet" in err and "no chronicle store" not in err


def test_trace_ids_module_forms() -> None:
    from chronicle_otel._internal import trace_ids

    assert trace_ids.is_full("17B55BA4" * 4) and not trace_ids.is_full("17b55ba4")
    assert trace_ids.is_prefix("17b5") and not trace_ids.is_prefix("17b") and not trace_ids.is_prefix("a" * 32)
    assert trace_ids.pick("17b5", ["17b5" + "0" * 28]) == "17b5" + "0" * 28
    many = ["17b5" + format(i, "028x") for i in range(12)]
    with pytest.raises(TraceLoadError, match=r"12 traces start with it .*, …\)"):
        trace_ids.pick("17b5", many)
    with pytest.raises(TraceNotFoundError):
        trace_ids.pick("17b5", [])
