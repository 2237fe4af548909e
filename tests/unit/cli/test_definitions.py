"""gen-test reads where a recorded name is defined from the source, without importing it: only chronicle's
``boundary`` under the recorded name counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from chronicle_otel.cli._definitions import BoundaryDefinition, defines_class, find_boundary

SOURCE = """
import chronicle_otel as chronicle
import chronicle_otel.record
from chronicle_otel import boundary as traced
from otherlib import boundary

NAME = "computed"


@chronicle.boundary(kind="agent", name="app.run")
def run(question): ...


@traced
def default_named(): ...


@chronicle_otel.boundary(name=None)
async def also_default(): ...


@boundary(name="other.package")
def not_chronicles(): ...


@chronicle.boundary(name=NAME)
def computed(): ...


@traced(**{"name": "app.options"})
def options(): ...


class Desk:
    class Drawer:
        @traced(name="app.open")
        def open(self): ...

    @traced(name="app.make")
    @classmethod
    def make(cls): ...


def outer():
    @traced(name="app.inner")
    def inner(): ...


class Order:
    pass
"""


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "app.py"
    path.write_text(SOURCE)
    return path


@pytest.mark.parametrize(
    ("name", "found"),
    [
        ("app.run", BoundaryDefinition((), False)),
        ("pkg.app.default_named", BoundaryDefinition((), False)),  # the decorator's default: module.qualname
        ("pkg.app.also_default", BoundaryDefinition((), False)),
        ("app.open", BoundaryDefinition(("Desk", "Drawer"), True)),
        ("app.make", BoundaryDefinition(("Desk",), False)),  # a classmethod: no object to build
        ("other.package", None),  # another package's decorator
        ("computed", None),  # a name computed when the module runs cannot be told
        ("app.options", None),
        ("app.inner", None),  # defined when outer() runs, not on import
        ("default_named", None),
        ("app.missing", None),
    ],
)
def test_a_boundary_is_found_under_its_recorded_name_only(
    source: Path, name: str, found: BoundaryDefinition | None
) -> None:
    assert find_boundary(source, "pkg.app", name) == found


def test_unreadable_sources_define_nothing(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import chronicle_otel\ndef (:\n")
    assert find_boundary(broken, "broken", "broken.x") is None
    assert find_boundary(tmp_path / "missing.py", "missing", "missing.x") is None
    assert not defines_class(broken, "X")


def test_a_class_is_defined_at_the_top_level_only(source: Path) -> None:
    assert defines_class(source, "Order") and defines_class(source, "Desk")
    assert not defines_class(source, "Drawer") and not defines_class(source, "run")
