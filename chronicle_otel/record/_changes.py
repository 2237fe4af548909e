"""Declared intended changes: the code says where it behaves otherwise on purpose.

Usage::

    import chronicle_otel as chronicle

    @chronicle.boundary(kind="guardrail")
    def check_order(order):
        chronicle.changed("guardrail-v2")   # this call behaves otherwise on purpose from here on
        ...

Like Temporal's ``patched()``, a named change marks a deliberate difference. Replaying a run recorded before it, the
report lists the call's changed output, and the drift it causes in the calls after it, as *intended* (apart from
unintended drift, never failing the replay). Recorded after it, the span carries the name (``chronicle.changes``)
and replays of that recording do not count it as a difference.
"""

from __future__ import annotations

from opentelemetry import trace

from .. import semconv
from .._api import publish
from .._internal import hooks
from ..errors import ConfigError

__all__ = ["changed"]


def changed(name: str) -> None:
    """Declare that the boundary call in progress behaves otherwise on purpose, under the change ``name``.

    In a replay, the differences of this call (its output) and of the calls under it and after it that only it
    explains are listed in :attr:`ReplayReport.intended <chronicle_otel.replaying.ReplayReport.intended>`, not as
    drift or changes, and never fail the replay. Outside every boundary call during a replay, the declaration covers
    the whole run. When recording, the call's span gets ``chronicle.changes`` (the names declared), so a replay of
    that recording treats the change as already there.

    Args:
        name: the change, e.g. ``"guardrail-v2"``.

    Raises:
        ConfigError: ``name`` is not a non-empty string.
    """
    if not isinstance(name, str) or not name:
        raise ConfigError("changed", name, "a change name such as 'guardrail-v2'")
    replay = hooks.REPLAY.get()
    if replay is not None:
        replay.declare(name)
    span = trace.get_current_span()
    if span.is_recording():
        attributes = getattr(span, "attributes", None) or {}
        names = tuple(attributes.get(semconv.CHANGES, ()))
        if name not in names:
            span.set_attribute(semconv.CHANGES, (*names, name))


publish(__name__, globals())
