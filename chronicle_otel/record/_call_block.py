"""``call(...)``: a block of code recorded as one boundary call, for code that cannot be decorated.

Usage::

    with chronicle.call("crm.lookup", kind="tool", input={"customer": cid}) as c:
        row = legacy_client.lookup(cid)
        c.set_output(row)

The block is one span, nested and indexed like a decorated call; during a replay, the replay is told
when the block starts and ends (``enter_block``/``exit_block``) and compares its output.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import Token
from types import TracebackType
from typing import Any, TypeVar

from opentelemetry import context as context_api

from .._api import publish
from .._internal import hooks
from ..config import ChronicleConfig
from ._recording import Call, begin
from ._spec import BoundaryKind, Spec, parse_kind
from .session_attrs import AttributeValue

_T = TypeVar("_T")


class call:
    """Record a block of code as a boundary call, for code that cannot be decorated.

    Usage::

        with chronicle.call("crm.lookup", kind="tool", input={"customer": cid}) as c:
            row = legacy_client.lookup(cid)
            c.set_output(row)

    The block is one span, nested and indexed like a decorated call. An exception leaving the block
    is recorded and propagates unchanged. Works with ``async with`` too.

    Args:
        name: the boundary name.
        kind: the boundary kind.
        input: the inputs to record, as ``{name: value}``.
        attributes: static span attributes.
        config: record with this configuration instead of the process-wide one.
    """

    def __init__(
        self,
        name: str,
        *,
        kind: BoundaryKind | str = "custom",
        input: Mapping[str, Any] | None = None,
        attributes: Mapping[str, AttributeValue] | None = None,
        config: ChronicleConfig | None = None,
    ) -> None:
        self._spec = Spec(None, name, parse_kind(kind), attributes, config, None, None)
        self._input = dict(input or {})
        self._output: Any = None
        self._call: Call | None = None
        self._token: Token[context_api.Context] | None = None
        self._replay: hooks.ReplayHook | None = None
        self._replay_state: object = None

    def set_output(self, value: _T) -> _T:
        """Record ``value`` as the block's output, and return it."""
        self._output = value
        return value

    def __enter__(self) -> call:
        replay = hooks.current_replay()
        extra = None
        if replay is not None:
            self._replay_state = replay.enter_block(self._spec, self._input)
            self._replay = replay
            if not getattr(self._replay_state, "record", True):  # a replay that emits no spans of its own
                self._call = None
                return self
            extra = getattr(self._replay_state, "extra", None)
        c = begin(self._spec, None, None, (), {}, extra)
        if c is not None:
            c.record_input(self._input)
            self._token = c.attach()
        self._call = c
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        c, self._call = self._call, None
        token, self._token = self._token, None
        replay, self._replay = self._replay, None
        state, self._replay_state = self._replay_state, None
        try:
            if c is not None:
                if token is not None:
                    context_api.detach(token)
                if exc is not None:
                    c.fail(exc)
                else:
                    c.succeed(self._output)
        finally:
            if replay is not None:
                replay.exit_block(state, self._output, exc)

    async def __aenter__(self) -> call:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)


publish(__name__, globals())
