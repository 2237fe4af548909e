"""Which calls a replay answers from the recording and which run live: ``stub=``, ``live=`` and ``default=``."""

from __future__ import annotations

from .._internal import hooks
from ..model import Boundary, Trace
from ._matching import check_selectors, matches
from ._options import ReplayOptions


class Selection:
    """The stub or live decision of a replay's options, once per boundary name and kind.

    Args:
        trace: the recorded run the selectors are checked against.
        options: the replay's options.

    Raises:
        ConfigError: a selector that can select nothing (see :func:`check_selectors`).
    """

    def __init__(self, trace: Trace, options: ReplayOptions) -> None:
        check_selectors("stub", options.stub, trace)
        check_selectors("live", options.live, trace, defined=hooks.boundaries)
        names = {b.name for b in trace.boundaries}
        self._literal = {s for s in (*options.stub, *options.live) if s in names or hooks.boundaries(s)}
        """Selectors that are a boundary's exact name: never read as globs (``"search[v2]"``)."""
        self._stub = options.stub
        self._live = options.live
        self._default = options.default
        self._modes: dict[tuple[str, str], str] = {}

    def _selects(self, selector: str, name: str, kind: str) -> bool:
        if selector in self._literal:
            return selector == name
        return matches(selector, name, kind)

    def explicit_live(self, name: str, kind: str) -> bool:
        """``live=`` selects the boundary ``name`` of ``kind``."""
        return any(self._selects(s, name, kind) for s in self._live)

    def stubbed(self, rec: Boundary, kind: str) -> bool:
        """The recorded call is answered from its recording: its recorded kind is stubbed, or the kind the code
        declares now (a trace that relabels an ``llm`` call as a ``tool`` does not make it run live)."""
        if self.mode(rec.name, rec.kind) == "stub":
            return True
        return kind != rec.kind and self.mode(rec.name, kind) == "stub"

    def mode(self, name: str, kind: str) -> str:
        """``"stub"`` or ``"live"``: what a call of the boundary ``name`` of ``kind`` does (``override=`` aside)."""
        known = self._modes.get((name, kind))  # the options are fixed: once per boundary name and kind
        if known is not None:
            return known
        if self.explicit_live(name, kind):
            mode = "live"
        elif any(self._selects(s, name, kind) for s in self._stub):
            mode = "stub"
        else:
            mode = self._default
        self._modes[(name, kind)] = mode
        return mode
