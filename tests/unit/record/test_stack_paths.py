"""Stack traces of exception events carry no machine paths by default: relative to where each file lies."""

from __future__ import annotations

import json
import os
import sysconfig
from pathlib import Path

import pytest

import chronicle_otel as chronicle
from chronicle_otel.record._payloads import portable_paths
from tests.conftest import Recorder, make_recorder


def _stacktrace(rec: Recorder, name: str) -> str:
    (event,) = rec.span(name).events
    assert event.attributes is not None
    return str(event.attributes["exception.stacktrace"])


def _raise_in_a_module_of(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Call a boundary whose code lies in ``project/shop/orders.py``, from ``project`` as working directory."""
    package = project / "shop"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "orders.py").write_text(
        "import json\n\n"
        "import chronicle_otel as chronicle\n\n\n"
        "@chronicle.boundary(kind='tool', name='place_order')\n"
        "def place_order(text: str) -> object:\n"
        "    return json.loads(text)  # raises in the standard library\n"
    )
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    monkeypatch.delitem(__import__("sys").modules, "shop", raising=False)
    monkeypatch.delitem(__import__("sys").modules, "shop.orders", raising=False)
    from shop.orders import place_order  # type: ignore[import-not-found]

    with pytest.raises(json.JSONDecodeError):
        place_order("{not json")


def test_paths_are_relative_to_the_project_and_the_standard_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = make_recorder(tmp_path)
    project = tmp_path / "project"
    _raise_in_a_module_of(project, monkeypatch)
    stacktrace = _stacktrace(rec, "place_order")
    assert 'File "shop/orders.py", line 8, in place_order' in stacktrace
    assert 'File "<stdlib>/json/__init__.py"' in stacktrace
    assert str(project) not in stacktrace and str(tmp_path) not in stacktrace
    assert sysconfig.get_paths()["stdlib"] not in stacktrace
    # The whole trace, as loaded back, holds no machine path either.
    rec.config.shutdown()
    trace = chronicle.load_trace(rec.path, "latest")
    assert str(project) not in json.dumps([dict(s.events[0]["attributes"]) for s in trace.spans if s.events])


def test_absolute_paths_keeps_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rec = make_recorder(tmp_path, capture=chronicle.CaptureOptions(absolute_paths=True))
    assert rec.config.absolute_paths
    project = tmp_path / "project"
    _raise_in_a_module_of(project, monkeypatch)
    assert f'File "{project / "shop" / "orders.py"}", line 8' in _stacktrace(rec, "place_order")


def test_the_deepest_root_wins_and_other_paths_stay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site_packages = sysconfig.get_paths()["purelib"]
    monkeypatch.chdir(tmp_path)
    home = os.path.expanduser("~")
    text = (
        "Traceback (most recent call last):\n"
        f'  File "{tmp_path}/app/main.py", line 3, in <module>\n'
        f'  File "{site_packages}/openai/_client.py", line 10, in create\n'
        f'  File "{home}/notes/x.py", line 1, in f\n'
        '  File "/opt/elsewhere/y.py", line 2, in g\n'
        '  File "<string>", line 1, in <module>\n'
        'ValueError: File "/secret/path" is mentioned in the message, not a frame\n'
    )
    out = portable_paths(text)
    assert '  File "app/main.py", line 3' in out
    assert '  File "<site-packages>/openai/_client.py", line 10' in out
    assert '  File "/opt/elsewhere/y.py", line 2' in out
    assert '  File "<string>", line 1' in out
    assert 'ValueError: File "/secret/path"' in out
    if not str(tmp_path).startswith(home + os.sep):
        assert '  File "~/notes/x.py", line 1' in out


def test_a_virtualenv_inside_the_project_is_site_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    site_packages = sysconfig.get_paths()["purelib"]
    project = str(Path(site_packages).parents[3])  # e.g. the repository that holds .venv
    monkeypatch.chdir(project)
    out = portable_paths(f'  File "{site_packages}/wrapt/wrappers.py", line 1, in f\n')
    assert out == '  File "<site-packages>/wrapt/wrappers.py", line 1, in f\n'
