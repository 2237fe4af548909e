"""The one-way link from a configuration to the ``@boundary`` decorator.

``ChronicleConfig.boundary(...)`` (``configure(local=True).boundary(kind="tool")``) returns a decorator bound
to that configuration, but the decorator module imports the configuration (boundaries read ``get_config()``
at call time), so the configuration must not import it back. Instead the decorator module hands its factory
to :func:`provide` when it is imported, and the configuration asks :func:`factory` at call time. Imports
then point one way only::

    _boundary ──► config ──► _internal.boundary_factory ◄── _boundary

``import chronicle_otel`` imports the decorator module first, so the factory is always there before anyone
can hold a configuration.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class BoundaryDecorator(Protocol):
    """The decorator returned by ``boundary(...)``: keeps the decorated function's type."""

    def __call__(self, func: F, /) -> F:
        """Wrap ``func``."""
        ...


class BoundaryFactory(Protocol):
    """``boundary(*, name, kind, attributes, enabled, provider, config)`` as the decorator module defines it."""

    def __call__(
        self,
        *,
        name: str | None,
        kind: Any,
        attributes: Mapping[str, str | bool | int | float] | None,
        enabled: bool | Callable[[], bool],
        provider: str | None,
        config: Any,
    ) -> BoundaryDecorator: ...


_factory: BoundaryFactory | None = None


def provide(boundary: BoundaryFactory) -> None:
    """Register the ``boundary(...)`` factory (called once, when the decorator module is imported)."""
    global _factory
    _factory = boundary


def factory() -> BoundaryFactory:
    """The registered ``boundary(...)`` factory.

    Raises:
        RuntimeError: the decorator module was never imported (``import chronicle_otel`` imports it).
    """
    if _factory is None:
        raise RuntimeError("chronicle_otel's boundary decorator is not loaded; import chronicle_otel first")
    return _factory
