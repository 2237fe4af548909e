"""Adapters for SDK methods: what of a call is recorded, and how a returned stream object is recorded and replayed.

This is the public path of :mod:`chronicle_otel.record.adapters`, which holds the code and the guide::

    from chronicle_otel.adapters import Arguments, StreamAdapter
"""

from __future__ import annotations

from .record.adapters import (
    Arguments,
    AsyncReplayedStream,
    RecordingAsyncStream,
    RecordingProxy,
    RecordingStream,
    ReplayedResponse,
    ReplayedStream,
    StreamAdapter,
    StreamEnd,
    StreamRecorder,
    StreamReplay,
    record_stream,
)

__all__ = [
    "Arguments",
    "AsyncReplayedStream",
    "RecordingAsyncStream",
    "RecordingProxy",
    "RecordingStream",
    "ReplayedResponse",
    "ReplayedStream",
    "StreamAdapter",
    "StreamEnd",
    "StreamRecorder",
    "StreamReplay",
    "record_stream",
]
