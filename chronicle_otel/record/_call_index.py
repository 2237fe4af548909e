"""Call indexes: the ordinal of a boundary name among the calls under the same parent.

Every boundary call opens a :class:`Frame` in the OpenTelemetry context it runs in; the calls made
under it count their names there. Top-level boundaries under a span that is not a boundary (an HTTP
request span, say) share one frame per trace, found through that span. A frame lives as long as a
parent span that uses it (weak references): no fixed-size table, so no running request ever has its
indexes reset, and a finished request leaves nothing behind.

Replay matches calls by the chain of ``(name, call index)`` from the root, so indexes must be
stable: concurrent siblings (threads, asyncio tasks) get distinct ones.
"""

from __future__ import annotations

import itertools
import weakref

from opentelemetry import context as context_api
from opentelemetry import trace as trace_api

FRAME_KEY = context_api.create_key("chronicle-boundary-frame")
"""The context key of the current boundary call's :class:`Frame`."""


class Frame:
    """Per boundary call: counts the calls of each boundary name made under it."""

    __slots__ = ("__weakref__", "counters")

    def __init__(self) -> None:
        self.counters: dict[str, itertools.count[int]] = {}

    def next_index(self, name: str) -> int:
        """The index of the next call of ``name`` under this frame."""
        counter = self.counters.get(name)
        if counter is None:
            counter = self.counters.setdefault(name, itertools.count())
        return next(counter)  # atomic under the GIL: concurrent siblings get distinct indexes


_frames_by_trace: weakref.WeakValueDictionary[int, Frame] = weakref.WeakValueDictionary()
_frames_by_span: weakref.WeakKeyDictionary[trace_api.Span, Frame] = weakref.WeakKeyDictionary()


def _root_frame(parent: trace_api.Span, trace_id: int) -> Frame:
    frame = _frames_by_span.get(parent)
    if frame is None:
        frame = _frames_by_trace.setdefault(trace_id, Frame())
        _frames_by_span[parent] = frame
    return frame


def next_call_index(parent_ctx: context_api.Context, name: str) -> int:
    """The call index of a call of ``name`` starting in ``parent_ctx``.

    Under a boundary call, counted in its frame; under another span, in the frame shared by the
    trace's top-level boundaries; with no span at all (each call starts its own trace), 0.
    """
    frame = parent_ctx.get(FRAME_KEY)
    if isinstance(frame, Frame):
        return frame.next_index(name)
    parent_span = trace_api.get_current_span(parent_ctx)
    parent_span_ctx = parent_span.get_span_context()
    if not parent_span_ctx.is_valid:
        return 0
    return _root_frame(parent_span, parent_span_ctx.trace_id).next_index(name)


def enter_frame(ctx: context_api.Context) -> context_api.Context:
    """``ctx`` with a fresh :class:`Frame` for the calls made under a new boundary call."""
    return context_api.set_value(FRAME_KEY, Frame(), ctx)
