"""Which calls a replay answers from the recording and which run live: ``stub=``, ``live=``, ``default=`` and
``live_from=``."""

from __future__ import annotations

from collections.abc import Callable

from .._internal import hooks
from ..model import Boundary, CallKey, Trace
from ._matching import check_selectors, first_call, matches
from ._options import ReplayOptions


def _asked(name: str, kind: str) -> bool:
    return True


class Selection:
    """The stub or live decision of a replay's options, once per boundary name and kind (per recorded call for the
    calls ``live_from=`` decides).

    Args:
        trace: the recorded run the selectors are checked against.
        options: the replay's options.

    Raises:
        ConfigError: a selector that can select nothing (see :func:`check_selectors`), or a ``live_from=`` that names
            no recorded call.
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
        self.live_from: Boundary | None = None
        """The recorded call ``live_from=`` names (None without it)."""
        self._frozen: frozenset[str] = frozenset()
        self._forced: frozenset[str] = frozenset()
        if options.live_from is not None:
            self._prefix(trace, first_call("live_from", options.live_from, trace))

    def _prefix(self, trace: Trace, chosen: Boundary) -> None:
        """The span ids of the frozen prefix (recorded before ``chosen``, not enclosing it) and of the calls forced
        live (``chosen``, the calls enclosing it and the calls under it)."""
        self.live_from = chosen
        enclosing = set()
        parent = chosen.parent
        while parent is not None:
            enclosing.add(parent.span_id)
            parent = parent.parent
        frozen = set()
        for b in trace.boundaries:
            if b.span_id == chosen.span_id:
                break
            if b.span_id not in enclosing:
                frozen.add(b.span_id)
        under = {b.span_id for b in trace.boundaries if self._under(b.call_key)}
        self._frozen = frozenset(frozen - under)
        self._forced = frozenset({chosen.span_id, *enclosing, *under})

    def _under(self, key: CallKey) -> bool:
        """``key`` is the call ``live_from=`` names or a call under it."""
        chosen = self.live_from
        return chosen is not None and key[: len(chosen.call_key)] == chosen.call_key

    def _selects(self, selector: str, name: str, kind: str) -> bool:
        if selector in self._literal:
            return selector == name
        return matches(selector, name, kind)

    def explicit_live(self, name: str, kind: str) -> bool:
        """``live=`` selects the boundary ``name`` of ``kind``."""
        return any(self._selects(s, name, kind) for s in self._live)

    def live_check(self, rec: Boundary | None, key: CallKey) -> Callable[[str, str], bool]:
        """What says whether a call that runs live was asked to (an LLM one that was not is a divergence): the calls
        ``live_from=`` makes run live were; the others when ``live=`` selects them."""
        if (rec is not None and rec.span_id in self._forced) or (rec is None and self._under(key)):
            return _asked
        return self.explicit_live

    def stubbed(self, rec: Boundary, kind: str) -> bool:
        """The recorded call is answered from its recording: it is in the frozen prefix of ``live_from=``, or its
        recorded kind is stubbed, or the kind the code declares now (a trace that relabels an ``llm`` call as a
        ``tool`` does not make it run live); never a call ``live_from=`` makes run live."""
        if self._forced or self._frozen:
            if rec.span_id in self._forced:
                return False
            if rec.span_id in self._frozen:
                return True
        if self.mode(rec.name, rec.kind) == "stub":
            return True
        return kind != rec.kind and self.mode(rec.name, kind) == "stub"

    def mode(self, name: str, kind: str) -> str:
        """``"stub"`` or ``"live"``: what a call of the boundary ``name`` of ``kind`` does (``override=`` and
        ``live_from=`` aside)."""
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
