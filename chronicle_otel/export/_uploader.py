"""Payloads to a shared payload store (object storage), off the call path, with a bounded local spool.

A boundary call hands the payloads cut on its span to :meth:`PayloadUploader.put`: an append to an
in-memory queue, no I/O. One background thread takes them in batches (at least every ``interval``) and writes
each batch with the store's concurrent ``put_payloads`` (objects already stored are not sent again). When the
store fails (down, unreachable, credentials refused), the failed payloads go to a bounded spool directory on
local disk, the uploader backs off (doubling up to ``max_backoff``) and every later payload goes to the spool
as soon as it is handed over; a retry drains the spool, and once one succeeds the spool drains whole. A spool
left by an earlier process drains too.

What a ``kill -9`` can lose is bounded like the spans' window: a payload waits in memory at most ``interval``
before it is written, and a write the store has not answered within ``max_delay`` (a store that hangs, or is
down and not yet known to be) is written to the spool as well, with every payload handed over meanwhile, while
the write goes on (each request runs on a thread of its own). ``max_delay`` (2 s) leaves room for a batch of
256 objects to a distant store (16 at a time, ~50 ms each); a store that is slower than that every time gets
every payload written to the spool too. Payloads that reach both are stored once: they are content addressed,
and the spool's copy is removed once the write succeeds.

Nothing is lost silently: every payload is counted as uploaded, already stored, spooled or dropped
(memory queue full, spool full, uploader shut down), each cause is logged once, and shutdown logs what
is left. Shutdown is bounded: what has not been written by then goes to the spool.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .._internal.digest import PREFIX, payload_digest
from .._internal.errors import warn_once

_log = logging.getLogger("chronicle_otel")

Payload = tuple[str, bytes]

DEFAULT_SPOOL_BYTES = 1024 * 1024 * 1024
DEFAULT_BATCH_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_DELAY = 2.0
"""Seconds a write to the payload store may go unanswered before its payloads are written to the spool too."""
_HEX = frozenset("0123456789abcdef")


class WritablePayloadStore(Protocol):
    """What the uploader needs of a payload store: a many-payload write."""

    def put_payloads(self, payloads: Iterable[Payload]) -> Any:
        """Write ``payloads``; may return a report with a ``failed`` list of ``(digest, data, error)``."""
        ...


@dataclass(frozen=True)
class UploadStats:
    """Counters of a :class:`PayloadUploader` since it started."""

    uploaded: int
    """Payloads written to the store by this process."""
    existing: int
    """Payloads the store already held (not sent again)."""
    spooled: int
    """Payloads written to the local spool because the store failed."""
    drained: int
    """Spooled payloads (this process's or an earlier one's) written to the store since."""
    dropped: int
    """Payloads lost: the memory queue or the spool was full, or the uploader was shut down."""
    failures: int
    """Failed attempts to write a batch."""
    bytes_uploaded: int
    """Payload bytes written to the store (before compression)."""
    bytes_stored: int
    """Object bytes written to the store (after compression)."""
    pending: int
    """Payloads waiting in memory."""
    spool_files: int
    """Payloads waiting in the spool."""
    spool_bytes: int
    """Bytes of the spool."""


class Spool:
    """A directory of payloads waiting for the store: one file per payload, named by its sha256, bounded in bytes.

    Files are written whole (temporary name, fsync, rename) so a crash never leaves a torn payload under a
    real name; reading verifies the hash and deletes what does not match. Several processes may share a
    spool: a payload is content addressed, so uploading it twice is harmless.
    """

    def __init__(self, path: str | os.PathLike[str], max_bytes: int = DEFAULT_SPOOL_BYTES) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._bytes: int | None = None
        self._files = 0
        self._pending: list[str] = []

    def _scan(self) -> list[tuple[str, int]]:
        found: list[tuple[str, int]] = []
        try:
            entries = list(os.scandir(self.path))
        except OSError:  # none yet, or not a directory: nothing waits (writing it reports the error)
            return found
        now = time.time()
        for entry in entries:
            name = entry.name
            try:
                stat = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if name.startswith(".tmp-"):
                if now - stat.st_mtime > 3600:  # a write torn by a crash
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
                continue
            if len(name) == 64 and set(name) <= _HEX and entry.is_file(follow_symlinks=False):
                found.append((name, stat.st_size))
        return found

    def _sizes(self) -> None:
        if self._bytes is None:
            files = self._scan()
            self._bytes = sum(size for _, size in files)
            self._files = len(files)

    def stats(self) -> tuple[int, int]:
        """``(files, bytes)`` waiting."""
        with self._lock:
            self._sizes()
            assert self._bytes is not None
            return self._files, self._bytes

    def add(self, digest: str, data: bytes) -> bool | None:
        """Keep one payload: True when added, None when it was already spooled, False when the spool is full.

        Raises:
            OSError: the spool cannot be written (disk full, read-only…).
        """
        name = digest[len(PREFIX) :]
        with self._lock:
            self._sizes()
            assert self._bytes is not None
            target = self.path / name
            if target.exists():
                return None
            if self._bytes + len(data) > self.max_bytes:
                return False
            self.path.mkdir(parents=True, exist_ok=True)
            tmp = self.path / f".tmp-{os.getpid()}-{threading.get_ident()}-{name[:16]}"
            try:
                with open(tmp, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, target)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
            self._bytes += len(data)
            self._files += 1
            return True

    def take(self, limit: int, max_bytes: int = DEFAULT_BATCH_BYTES) -> list[Payload]:
        """Up to ``limit`` spooled payloads (verified; a damaged file is deleted and logged)."""
        batch: list[Payload] = []
        with self._lock:
            if not self._pending:
                self._pending = [name for name, _ in self._scan()]
                self._bytes = None
            size = 0
            while self._pending and len(batch) < limit and size < max_bytes:
                name = self._pending.pop()
                try:
                    data = (self.path / name).read_bytes()
                except FileNotFoundError:  # another process drained it
                    continue
                except OSError as exc:
                    warn_once("spool-read", "chronicle_otel: cannot read the payload spool %s: %s", self.path, exc)
                    continue
                digest = PREFIX + name
                if payload_digest(data) != digest:
                    warn_once(
                        "spool-damaged", "chronicle_otel: a damaged file in the payload spool %s was removed", self.path
                    )
                    self._unlink(name, len(data))
                    continue
                batch.append((digest, data))
                size += len(data)
        return batch

    def remove(self, payloads: Iterable[Payload]) -> None:
        """Delete payloads that reached the store."""
        with self._lock:
            for digest, data in payloads:
                self._unlink(digest[len(PREFIX) :], len(data))

    def _unlink(self, name: str, size: int) -> None:
        try:
            os.unlink(self.path / name)
        except FileNotFoundError:
            return
        except OSError as exc:
            warn_once("spool-unlink", "chronicle_otel: cannot delete from the payload spool %s: %s", self.path, exc)
            return
        if self._bytes is not None:
            self._bytes = max(0, self._bytes - size)
            self._files = max(0, self._files - 1)

    def has_more(self) -> bool:
        """True when files may be waiting (a cheap check: the last listing, or one directory entry)."""
        with self._lock:
            if self._pending:
                return True
            try:
                with os.scandir(self.path) as it:
                    return any(len(e.name) == 64 for e in it)
            except OSError:
                return False


class PayloadUploader:
    """Writes payloads handed over by boundary calls to a payload store, on one background thread.

    Args:
        store: the payload store (e.g. :class:`~chronicle_otel.store.ObjectPayloadStore`).
        spool: the spool directory for payloads the store could not take; None to drop them (counted).
        spool_bytes: the spool's capacity.
        buffer_bytes: the capacity of the in-memory queue.
        batch_size: payloads per write.
        interval: seconds between writes when the queue is not full enough for a batch.
        max_backoff: the longest wait, in seconds, between retries while the store fails.
        shutdown_timeout: seconds :meth:`shutdown` waits for the queue to reach the store before spooling it.
        max_delay: seconds a write may go unanswered before its payloads, and those queued meanwhile, are written
            to the spool as well.
    """

    def __init__(
        self,
        store: WritablePayloadStore,
        *,
        spool: str | os.PathLike[str] | None = None,
        spool_bytes: int = DEFAULT_SPOOL_BYTES,
        buffer_bytes: int = 256 * 1024 * 1024,
        batch_size: int = 256,
        interval: float = 0.5,
        max_backoff: float = 30.0,
        shutdown_timeout: float = 10.0,
        max_delay: float = DEFAULT_MAX_DELAY,
    ) -> None:
        self.store = store
        self.spool = Spool(spool, spool_bytes) if spool is not None else None
        self.buffer_bytes = buffer_bytes
        self.batch_size = max(1, batch_size)
        self.interval = interval
        self.max_backoff = max_backoff
        self.shutdown_timeout = shutdown_timeout
        self.max_delay = max(0.001, max_delay)
        self._overdue = False  # a write has gone unanswered for max_delay: what is handed over goes to the spool
        self._request: _Request | None = None  # the call to the store running now
        self._spool_lock = threading.Lock()  # one writer of the spool: the thread, or shutdown once it gives up
        self._abandoned = False  # shutdown gave up on the thread and spooled what was left
        self._spool_by: float | None = None  # at shutdown: when an unanswered write goes to the spool at the latest
        self._queue: deque[Payload] = deque()
        self._queued_bytes = 0
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._in_flight: list[Payload] = []
        self._closed = False
        self._stopping = False
        self._down_until = 0.0
        self._backoff = 0.0
        self._last_error = ""
        self._counts = dict.fromkeys(
            ("uploaded", "existing", "spooled", "drained", "dropped", "failures", "bytes_uploaded", "bytes_stored"), 0
        )
        self._thread: threading.Thread | None = None
        self._start_thread()
        ref = weakref.ref(self)

        def after_fork() -> None:
            uploader = ref()
            if uploader is not None:
                uploader._after_fork()

        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=after_fork)

    def __repr__(self) -> str:
        return f"PayloadUploader({self.store!r}, spool={self.spool.path if self.spool else None!r})"

    def _start_thread(self) -> None:
        self._thread = threading.Thread(target=self._run, name="chronicle-payload-uploader", daemon=True)
        self._thread.start()

    def _after_fork(self) -> None:
        # The child has the parent's queue but not its thread: start one (the parent uploads its own copy).
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._wake = threading.Event()
        if self.spool is not None:  # the parent's thread may have held it (writing the spool) at the fork
            self.spool._lock = threading.Lock()
        self._queue.clear()
        self._queued_bytes = 0
        self._in_flight = []
        self._overdue = False  # the parent's request is not the child's
        self._request = None
        self._spool_lock = threading.Lock()
        if not self._closed:
            self._start_thread()

    # ------------------------------------------------------------------------------------ call path

    def put(self, span_id: int, payloads: list[Payload]) -> None:
        """Queue the payloads of one span (called on the user's thread: O(1), no I/O)."""
        with self._lock:
            if self._closed:
                self._counts["dropped"] += len(payloads)
                warn_once("uploader-closed", "chronicle_otel: payloads handed over after shutdown were dropped")
                return
            for digest, data in payloads:
                if self._queued_bytes + len(data) > self.buffer_bytes:
                    self._counts["dropped"] += 1
                    warn_once(
                        "uploader-full",
                        "chronicle_otel: the payload upload queue is full (%d bytes); payloads are dropped "
                        "(their spans keep the truncated attribute and the hash). Raise PayloadOptions.buffer_bytes.",
                        self.buffer_bytes,
                    )
                    continue
                self._queue.append((digest, data))
                self._queued_bytes += len(data)
            if len(self._queue) >= self.batch_size or self._overdue or (self._down_until and self.spool is not None):
                self._wake.set()  # a full batch; or the store fails: to the spool now

    # ------------------------------------------------------------------------------------ worker

    def _take(self) -> list[Payload]:
        with self._lock:
            batch: list[Payload] = []
            size = 0
            queue = self._queue
            while queue and len(batch) < self.batch_size and size < DEFAULT_BATCH_BYTES:
                item = queue.popleft()
                batch.append(item)
                size += len(item[1])
            self._queued_bytes -= size
            self._in_flight = batch
            return batch

    def _run(self) -> None:
        check = getattr(self.store, "check", None)
        if callable(check):  # the bucket and the credentials, once: a misconfiguration is reported at start
            request = self._request = _Request(check, self._wake)
            self._await(request, in_flight=False)
            if request.error is not None:
                self._failed(request.error)
        while True:
            stopping = self._stopping
            if not stopping:
                self._wake.wait(self.interval)
                self._wake.clear()
            try:
                self._cycle(final=stopping)
            except Exception as exc:  # never let the thread die
                warn_once("uploader-internal", "chronicle_otel: the payload uploader failed: %r", exc)
            with self._lock:
                self._in_flight = []
                idle = not self._queue
                self._changed.notify_all()
            if stopping and idle:
                return

    def _cycle(self, *, final: bool) -> None:
        while True:
            batch = self._take()
            if not batch:
                break
            if self._is_down() and (not self._due() or (self.spool is not None and self.spool.has_more())):
                # No request while backing off (the exit stays fast when the store is down); with a spool, a retry
                # drains it, so what waits is on local disk before the retry is made.
                self._spool(batch)
            else:
                self._write(batch, drained=False)
            with self._lock:
                self._in_flight = []
                self._changed.notify_all()
        if final or self.spool is None or (self._is_down() and not self._due()):
            return
        while not self._stopping and self.spool.has_more():
            if len(self._queue) >= self.batch_size:
                break  # new payloads first; the spool drains on the next round
            batch = self.spool.take(self.batch_size)
            if not batch or not self._write(batch, drained=True):
                break

    def _is_down(self) -> bool:
        return self._down_until > 0.0

    def _due(self) -> bool:
        return time.monotonic() >= self._down_until

    def _await(self, request: _Request, *, in_flight: bool) -> bool:
        """Wait for ``request``. Once it has gone unanswered for :attr:`max_delay` (or half the shutdown timeout at
        exit), write the batch in flight (with ``in_flight``) to the spool; from then on, and all along while the
        store is known to fail, write every payload handed over to the spool as it comes, until the request ends
        (it may take the store's whole timeout). Returns when it ends, or at exit once that is done. True when the
        batch in flight was spooled."""
        started = time.monotonic()
        deadline = started + self.max_delay
        spooled = False
        while not request.done.is_set() and not self._abandoned:
            now = time.monotonic()
            due = deadline if self._spool_by is None else min(deadline, self._spool_by)
            if self.spool is not None:  # without a spool the request's own timeouts bound the wait
                if now >= due and not self._overdue:
                    self._overdue = True
                    warn_once(
                        "payload-store-slow",
                        "chronicle_otel: the payload store %s has not answered within %.1fs; the payloads written to "
                        "it go to the spool %s as well until it answers",
                        self._store_name(),
                        now - started,
                        self.spool.path,
                    )
                if now >= due and in_flight and not spooled:
                    self._spool(self._in_flight, in_flight=True)
                    spooled = True
                if self._overdue or self._is_down():
                    self._spool(None)  # what was handed over meanwhile
                if self._stopping and now >= due:
                    # Exit: what the request carries is on local disk; what is left goes there too, without a request.
                    self._down_until = self._down_until or time.monotonic() + self.max_backoff
                    break
            self._wake.wait(due - now if now < due else self.max_delay)
            self._wake.clear()  # the request's end sets it too: seen by the loop's test
        self._overdue = False
        self._wake.clear()  # the request's end: a full batch or a failing store sets it again
        with self._lock:
            if len(self._queue) >= self.batch_size or (self._down_until and self.spool is not None):
                self._wake.set()
        return spooled

    def _write(self, batch: list[Payload], *, drained: bool) -> bool:
        """Write ``batch``; what fails is spooled (or stays spooled). True when everything was written.

        ``drained``: the batch comes from the spool (or went there while the store did not answer): what is
        written leaves it, what fails stays.
        """
        request = self._request = _Request(lambda: self.store.put_payloads(batch), self._wake)
        if self._await(request, in_flight=not drained):
            drained = True
        if not request.done.is_set():
            return False  # shutting down; the batch waits in the spool
        failed: list[Payload] = []
        error = request.error
        report = request.result
        if error is not None:
            failed = batch
        if error is None:
            failures = getattr(report, "failed", None) or []
            failed = [(digest, data) for digest, data, _ in failures]
            if failures:
                error = failures[0][2]
            written = len(batch) - len(failed)
            stored = getattr(report, "stored", written)
            existing = getattr(report, "existing", 0)
            self._count(uploaded=stored, existing=existing)
            self._count(bytes_uploaded=getattr(report, "bytes_in", 0), bytes_stored=getattr(report, "bytes_out", 0))
            if drained and self.spool is not None:
                done = {d for d, _ in failed}
                ok = [(d, data) for d, data in batch if d not in done]
                self.spool.remove(ok)
                self._count(drained=len(ok))
        if error is None:
            if self._is_down():
                _log.warning("chronicle_otel: the payload store %s is back; draining the spool", self._store_name())
            self._down_until = 0.0
            self._backoff = 0.0
            return True
        self._failed(error)
        if not drained:
            self._spool(failed)
        return False

    def _failed(self, error: BaseException) -> None:
        from ..store import describe_error

        self._count(failures=1)
        reason = describe_error(error)
        self._last_error = reason
        was_up = not self._is_down()
        self._backoff = min(self.max_backoff, self._backoff * 2 if self._backoff else min(1.0, self.max_backoff))
        self._down_until = time.monotonic() + self._backoff
        if was_up:  # once per outage (retries while it lasts are counted, not logged)
            _log.warning(
                "chronicle_otel: the payload store %s failed (%s); payloads go to the spool %s and upload when it is "
                "back",
                self._store_name(),
                reason,
                self.spool.path if self.spool else "(none: they are dropped)",
            )

    def _spool(self, batch: list[Payload] | None, *, in_flight: bool = False) -> None:
        """Write ``batch`` (None: everything queued now) to the spool, unless shutdown did (it gave up on this
        thread). ``in_flight``: ``batch`` is the batch in flight, which is no longer waiting in memory after this."""
        with self._spool_lock:
            if self._abandoned:
                return
            if batch is None:
                with self._lock:
                    batch = list(self._queue)
                    self._queue.clear()
                    self._queued_bytes = 0
            self._spool_now(batch)
            if in_flight:
                with self._lock:
                    self._in_flight = []

    def _spool_now(self, batch: list[Payload]) -> None:
        if not batch:
            return
        if self.spool is None:
            self._count(dropped=len(batch))
            return
        kept = 0
        for i, (digest, data) in enumerate(batch):
            try:
                ok = self.spool.add(digest, data)
            except OSError as exc:
                warn_once(
                    f"spool-write:{exc.errno}",
                    "chronicle_otel: cannot write the payload spool %s (%s); payloads are dropped",
                    self.spool.path,
                    os.strerror(exc.errno) if exc.errno else exc,
                )
                self._count(spooled=kept, dropped=len(batch) - i)
                return
            if ok or ok is None:  # None: already waiting there
                kept += 1
            else:
                self._count(dropped=1)
                warn_once(
                    "spool-full",
                    "chronicle_otel: the payload spool %s is full (%d bytes); payloads are dropped",
                    self.spool.path,
                    self.spool.max_bytes,
                )
        self._count(spooled=kept)

    def _count(self, **deltas: int) -> None:
        with self._lock:
            for name, delta in deltas.items():
                self._counts[name] += delta

    def _store_name(self) -> str:
        return str(getattr(self.store, "url", None) or type(self.store).__name__)

    # ------------------------------------------------------------------------------------ control

    def stats(self) -> UploadStats:
        """The counters so far."""
        files, size = self.spool.stats() if self.spool is not None else (0, 0)
        with self._lock:
            c = dict(self._counts)
            pending = len(self._queue) + len(self._in_flight)
        return UploadStats(pending=pending, spool_files=files, spool_bytes=size, **c)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Wait until every queued payload is in the store or the spool; False when ``timeout_millis`` ran out."""
        deadline = time.monotonic() + timeout_millis / 1000
        self._wake.set()
        with self._lock:
            while self._queue or self._in_flight:
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None or not self._thread.is_alive():
                    return False
                self._wake.set()
                self._changed.wait(min(left, 0.1))
        return True

    def shutdown(self, timeout: float | None = None) -> None:
        """Write what is queued (to the spool once ``timeout`` passes), stop the thread and log a summary."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        timeout = self.shutdown_timeout if timeout is None else timeout
        self._spool_by = time.monotonic() + timeout / 2  # a write unanswered by then: to the spool, in time
        self._stopping = True
        self._wake.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        if thread is not None and thread.is_alive():
            # The store (or the spool) hangs: keep what is queued or in flight on local disk (uploading it twice is
            # harmless); the thread, should it go on, leaves the spool alone.
            with self._spool_lock:
                self._abandoned = True
                with self._lock:
                    left = list(self._in_flight) + list(self._queue)
                    self._queue.clear()
                    self._queued_bytes = 0
                self._spool_now(left)
        request = self._request
        closer = getattr(self.store, "close", None)
        if (
            callable(closer)
            and (thread is None or not thread.is_alive())
            and (request is None or request.done.is_set())  # never under a request that still uses it
        ):
            with contextlib.suppress(Exception):
                closer()
        stats = self.stats()
        if stats.spooled or stats.dropped or stats.spool_files:
            waiting = (
                f"{stats.spool_files} payloads wait in the spool {self.spool.path if self.spool else '-'} (they upload "
                "when a process using it runs again)"
                if stats.spool_files
                else "the spool is empty"
            )
            _log.warning(
                "chronicle_otel: payload store %s: %d uploaded, %d already stored, %d spooled, %d drained, "
                "%d dropped; %s",
                self._store_name(),
                stats.uploaded,
                stats.existing,
                stats.spooled,
                stats.drained,
                stats.dropped,
                waiting,
            )


class _Request:
    """One call to the payload store on a thread of its own, so that the uploader can spool what waits meanwhile.

    A request that never ends (a store that hangs past its own timeouts) leaves only a daemon thread behind.
    """

    __slots__ = ("done", "error", "result")

    def __init__(self, call: Callable[[], Any], wake: threading.Event) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()

        def run() -> None:
            try:
                self.result = call()
            except Exception as exc:
                self.error = exc
            finally:
                self.done.set()
                wake.set()

        threading.Thread(target=run, name="chronicle-payload-request", daemon=True).start()
