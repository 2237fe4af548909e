"""The batch span processor chronicle uses for its own exporters: bounded, counted, with a stated backpressure policy.

The OpenTelemetry SDK's ``BatchSpanProcessor`` drops the oldest span when its queue is full, says so once in a log
line and counts nothing; it waits 5 s between exports, so a ``kill -9`` loses up to 5 s of ended spans; and its
shutdown waits for the exporter as long as the exporter retries (30 s and more with a dead collector). This one:

* **queues** ended spans in memory, up to ``max_queue_size``;
* when the queue is full, **waits** (``on_full="block"``) up to ``block_timeout`` seconds for the exporter to make
  room — the application slows down to the exporter's pace instead of losing spans — then drops; or **drops** at
  once (``on_full="drop"``). Every dropped span is counted; the first drop is logged with the policy and how to
  read the counters, and the total is logged again at shutdown;
* **exports** a batch as soon as ``max_batch`` spans wait, and whatever waits at least every ``max_delay``
  seconds: an ended span stays in memory at most about ``max_delay`` plus one export (the loss on ``kill -9``);
* **packs** the spans that wait behind a full batch (``pack_after``; the OTLP path, whose collector may be down for
  minutes) into tuples of plain values the garbage collector does not walk, rebuilt just before export: 16,384
  waiting spans would otherwise lengthen every full collection (40 to 50 ms instead of 10 to 20 here), paid by
  whichever application call triggers it;
* **flushes** within the caller's timeout, and **shuts down** within ``shutdown_timeout``: what is not exported
  by then is counted as undelivered and logged with the count; the export thread is a daemon, so an exporter
  stuck on a dead endpoint never holds the process.

Counters (:class:`BatchStats`): accepted, exported, dropped (queue full), failed (the exporter said FAILURE or
raised; of a batch the local store kept in part, on a full volume, only the spans it had no room for), undelivered
(left at shutdown).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any, Final, Literal

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .._internal.compat import SpanPacker, shed_empty_containers
from .._internal.errors import handle_internal_errors, warn_once
from ._exporter import ChronicleExporter

_log = logging.getLogger("chronicle_otel")

OnFull = Literal["block", "drop"]
"""What a full queue does with the next ended span: wait for room (bounded), or drop it."""

DEFAULT_MAX_DELAY: Final = 0.5
"""Seconds an ended span may wait in memory before it is exported."""
DEFAULT_BLOCK_TIMEOUT: Final = 1.0
"""Seconds a span waits for room in a full queue under ``on_full="block"`` before it is dropped."""


@dataclasses.dataclass(frozen=True)
class BatchStats:
    """Counters of one batch processor since it started.

    Attributes:
        name: which export path (``store``, ``otlp``).
        accepted: ended spans queued for export.
        exported: spans the exporter took (SUCCESS).
        dropped: spans dropped because the queue was full.
        failed: spans of batches the exporter refused (FAILURE) or raised on; of a batch the local store kept in part (a
            full volume), the spans it had no room for.
        undelivered: spans still queued or in flight when shutdown ran out of time.
        queued: spans waiting now.
        blocked_seconds: time the application waited for room in the queue (``on_full="block"``).
    """

    name: str
    accepted: int
    exported: int
    dropped: int
    failed: int
    undelivered: int
    queued: int
    blocked_seconds: float

    @property
    def lost(self) -> int:
        """Spans that will never reach the exporter's destination: dropped, failed or undelivered."""
        return self.dropped + self.failed + self.undelivered


class BatchProcessor(SpanProcessor):
    """Exports ended spans in batches on a daemon thread (see the module documentation).

    Args:
        exporter: where batches go.
        name: the export path, in counters and messages (``store``, ``otlp``).
        max_queue_size: spans held at most.
        max_batch: spans per export at most.
        max_delay: seconds between exports when fewer than ``max_batch`` spans wait.
        on_full: ``block`` (wait up to ``block_timeout`` for room, then drop) or ``drop``.
        block_timeout: seconds a span may wait for room.
        shutdown_timeout: seconds :meth:`shutdown` may take in all; None waits for the exporter.
        pack_after: with this many spans waiting, the next ones wait packed (see :class:`SpanPacker`); None never
            packs.
    """

    def __init__(
        self,
        exporter: SpanExporter,
        *,
        name: str,
        max_queue_size: int = 16_384,
        max_batch: int = 2_048,
        max_delay: float = DEFAULT_MAX_DELAY,
        on_full: OnFull = "block",
        block_timeout: float = DEFAULT_BLOCK_TIMEOUT,
        shutdown_timeout: float | None = None,
        pack_after: int | None = None,
    ) -> None:
        self.exporter = exporter
        self.name = name
        self.max_queue_size = max(1, max_queue_size)
        self.max_batch = max(1, min(max_batch, self.max_queue_size))
        self.max_delay = max(0.001, max_delay)
        self.on_full = on_full
        self.block_timeout = max(0.0, block_timeout)
        self.shutdown_timeout = shutdown_timeout
        self.pack_after = pack_after
        self._packer = SpanPacker()
        self._queue: collections.deque[ReadableSpan | tuple[Any, ...]] = collections.deque()
        self._exported = self._dropped = self._failed = self._undelivered = 0
        self._drop_lock = threading.Lock()
        self._blocked = 0.0
        self._in_flight = 0
        self._stopping = False
        self._closed = False
        self._abandoned = False
        self._superseded = False
        self._init_thread()
        _register_fork(self)

    def _init_thread(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._room = threading.Condition(threading.Lock())
        self._flushes: list[threading.Event] = []
        self._worker = threading.Thread(target=self._run, name=f"chronicle-export-{self.name}", daemon=True)
        self._worker.start()

    def _after_fork_in_child(self) -> None:
        self._queue.clear()  # the parent exports what it ended
        self._in_flight = 0
        if not self._closed:
            self._init_thread()

    # ------------------------------------------------------------------------------------ the call path

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing to do when a span starts."""

    def on_end(self, span: ReadableSpan) -> None:
        """Queue an ended (sampled) span; wait for room or drop it when the queue is full."""
        context = span.context
        if context is None or not context.trace_flags.sampled:
            return
        if self._stopping:
            if not self._superseded:  # ended after shutdown (a thread still recording at exit): counted
                self._drop_after_shutdown()
            return
        queue = self._queue
        if len(queue) >= self.max_queue_size and not self._make_room():
            with self._drop_lock:
                self._dropped += 1
            warn_once(
                f"queue-full-{self.name}",
                "chronicle_otel: the %s export queue is full (%d spans): spans are dropped (on_full=%r, waited up to "
                "%.1fs); the total is in get_config().stats() and is logged at exit",
                self.name,
                self.max_queue_size,
                self.on_full,
                self.block_timeout if self.on_full == "block" else 0.0,
            )
            return
        if type(span) is ReadableSpan:
            shed_empty_containers(span)
            if self.pack_after is not None and len(queue) >= self.pack_after:
                packed = self._packer.pack(span)
                if packed is not None:
                    queue.append(packed)
                    if len(queue) >= self.max_batch:
                        with self._cond:
                            self._cond.notify()
                    return
        queue.append(span)
        if len(queue) >= self.max_batch:
            with self._cond:
                self._cond.notify()

    def _drop_after_shutdown(self) -> None:
        with self._drop_lock:
            self._dropped += 1
        warn_once(
            f"after-shutdown-{self.name}",
            "chronicle_otel: spans that end after the %s export was shut down are dropped (a thread still recording "
            "at exit?); the total is in get_config().stats()",
            self.name,
        )

    def supersede(self) -> None:
        """A newer processor of the same provider takes every span from now on: spans this one no longer accepts
        once it stops are not lost (``configure()`` called again)."""
        self._superseded = True

    def _make_room(self) -> bool:
        """Under ``on_full="block"``, wait (bounded) until the exporter has taken spans; True when there is room."""
        if self.on_full != "block" or self.block_timeout <= 0 or threading.current_thread() is self._worker:
            return False
        started = time.monotonic()
        deadline = started + self.block_timeout
        with self._cond:
            self._cond.notify()  # a full batch waits: export now
        with self._room:
            while len(self._queue) >= self.max_queue_size and not self._stopping:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._room.wait(left)
        self._blocked += time.monotonic() - started
        return len(self._queue) < self.max_queue_size

    # ------------------------------------------------------------------------------------ the export thread

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._stopping and not self._flushes and len(self._queue) < self.max_batch:
                    self._cond.wait(self.max_delay)
                stopping = self._stopping
                flushes, self._flushes = self._flushes, []
            self._drain()
            for event in flushes:
                event.set()
            if stopping and not self._queue:
                return

    def _drain(self) -> None:
        queue = self._queue
        while queue:
            batch = [queue.popleft() for _ in range(min(self.max_batch, len(queue)))]
            self._in_flight = len(batch)
            with self._room:
                self._room.notify_all()
            self._export(batch)
            self._in_flight = 0

    def _export(self, waiting: Sequence[ReadableSpan | tuple[Any, ...]]) -> None:
        if self._abandoned:  # shutdown gave up on this exporter: these spans are counted as undelivered
            return
        failed = len(waiting)
        exporter = self.exporter
        with handle_internal_errors(f"exporting spans to the {self.name}", external=True):
            unpack = self._packer.unpack  # spans that waited packed: rebuilt for the exporter
            batch = [unpack(span) if isinstance(span, tuple) else span for span in waiting]
            if isinstance(exporter, ChronicleExporter):  # a batch stored in part (a full volume): what was not stored
                failed = min(len(batch), max(0, exporter._export_counted(batch)))
            elif exporter.export(batch) is SpanExportResult.SUCCESS:
                failed = 0
        if self._abandoned:
            return
        self._exported += len(waiting) - failed
        self._failed += failed

    # ------------------------------------------------------------------------------------ flush and shutdown

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export every span queued now; True when done within ``timeout_millis``."""
        if self._closed or not self._worker.is_alive():
            return not self._queue
        event = threading.Event()
        with self._cond:
            self._flushes.append(event)
            self._cond.notify()
        return event.wait(max(0, timeout_millis) / 1000)

    def shutdown(self) -> None:
        """Export what is queued within ``shutdown_timeout``, then shut the exporter down; count what is left."""
        if self._closed:
            return
        self._closed = True
        deadline = None if self.shutdown_timeout is None else time.monotonic() + self.shutdown_timeout
        with self._cond:
            self._stopping = True
            self._cond.notify()
        with self._room:
            self._room.notify_all()
        if self._worker.is_alive() and threading.current_thread() is not self._worker:
            self._worker.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if self._worker.is_alive():  # the exporter is stuck (a dead endpoint): leave it to the daemon thread
            self._undelivered = len(self._queue) + self._in_flight
            self._abandoned = True
            _log.warning(
                "chronicle_otel: %s export did not finish within %.1fs at shutdown: %d spans not delivered",
                self.name,
                self.shutdown_timeout or 0.0,
                self._undelivered,
            )
        else:
            with handle_internal_errors(f"shutting down the {self.name} exporter", external=True):
                self.exporter.shutdown()
        if self._dropped or self._failed:
            _log.warning(
                "chronicle_otel: %s export: %d spans accepted, %d exported, %d dropped (queue full, or ended after "
                "shutdown), %d failed",
                self.name,
                self.stats().accepted,
                self._exported,
                self._dropped,
                self._failed,
            )

    def stats(self) -> BatchStats:
        """The counters now."""
        queued = 0 if self._abandoned else len(self._queue) + self._in_flight
        return BatchStats(
            name=self.name,
            accepted=self._exported + self._failed + queued + self._undelivered,
            exported=self._exported,
            dropped=self._dropped,
            failed=self._failed,
            undelivered=self._undelivered,
            queued=queued,
            blocked_seconds=self._blocked,
        )


_live: weakref.WeakSet[BatchProcessor] = weakref.WeakSet()
_fork_hook_installed = False
_fork_lock = threading.Lock()


def _register_fork(processor: BatchProcessor) -> None:
    """After ``fork()`` the child gets fresh locks and its own export thread (the parent's is not copied)."""
    global _fork_hook_installed
    _live.add(processor)
    with _fork_lock:
        if not _fork_hook_installed and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_reinit_all)
            _fork_hook_installed = True


def _reinit_all() -> None:
    for processor in list(_live):
        processor._after_fork_in_child()
