"""The payload uploader: payloads from the call path to a payload store on a background thread, with a bounded spool.

The counters of :class:`UploadStats`, as these tests read them:

- ``uploaded``: payloads the store wrote (its report's ``stored``), from the memory queue or from the spool;
- ``existing``: payloads the store already held (or that came twice in one batch);
- ``spooled``: payloads written to the spool because the store failed (or the uploader shut down with the store hung);
- ``drained``: spooled payloads (this uploader's or an earlier one's) that reached the store since;
- ``dropped``: payloads lost and counted: memory queue full, spool full or unwritable, no spool, put after shutdown.

Every payload handed over is counted once as uploaded, existing, spooled or dropped, and a drained payload is counted a
second time as uploaded (or existing) when it leaves the spool; so, with distinct digests, no foreign spool files and a
shutdown that did not time out, ``uploaded + existing + spooled + dropped == handed over + drained``.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import signal
import tempfile
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chronicle_otel._internal.digest import payload_digest
from chronicle_otel.errors import StoreError
from chronicle_otel.export._uploader import PayloadUploader, Spool, UploadStats
from chronicle_otel.store._object import PutReport

Payload = tuple[str, bytes]

FAST = {"interval": 0.01, "max_backoff": 0.05, "shutdown_timeout": 5.0}
"""Short waits: a test never sleeps for the production defaults."""

WAIT = 10.0
"""The longest a test polls for a condition before it fails (a bound, never a measurement)."""


def payload(i: int, tag: str = "p") -> Payload:
    data = f'{{"tag":"{tag}","n":{i},"text":"retrieved chunk {i} for the tool call"}}'.encode()
    return payload_digest(data), data


def payloads(n: int, tag: str = "p") -> list[Payload]:
    return [payload(i, tag) for i in range(n)]


def hex_of(digest: str) -> str:
    assert digest.startswith("sha256:")
    return digest[len("sha256:") :]


def spool_files(path: Path) -> dict[str, bytes]:
    """The payload files in a spool directory: 64-hex name → content (a file drained meanwhile is left out)."""
    if not path.is_dir():
        return {}
    found: dict[str, bytes] = {}
    for p in path.iterdir():
        if len(p.name) == 64 and all(c in "0123456789abcdef" for c in p.name) and p.is_file():
            with contextlib.suppress(FileNotFoundError):
                found[p.name] = p.read_bytes()
    return found


def wait_until(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within the polling bound: {what}")
        time.sleep(0.005)


def messages(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and text in r.getMessage()]


def balance(stats: UploadStats) -> int:
    """Payloads accounted for, each counted once (see the module docstring)."""
    return stats.uploaded + stats.existing + stats.spooled + stats.dropped - stats.drained


class FakeStore:
    """An in-memory payload store whose behaviour a test switches while the uploader runs.

    Modes: ``up`` (stores, reports stored/existing), ``raise`` (put_payloads raises ConnectionError), ``report``
    (returns a PutReport whose ``failed`` lists every payload), ``hang`` (blocks until :attr:`release` is set,
    then behaves as ``up``). Digests in :attr:`failing` fail one by one in any mode that stores.
    """

    def __init__(self, mode: str = "up") -> None:
        self.mode = mode
        self.objects: dict[str, bytes] = {}
        self.writes: Counter[str] = Counter()
        self.batches: list[list[str]] = []
        self.failing: set[str] = set()
        self.check_error: BaseException | None = None
        self.release = threading.Event()
        self.entered = threading.Event()
        self.closed = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FakeStore({self.mode!r})"

    def check(self) -> None:
        if self.check_error is not None:
            raise self.check_error

    def close(self) -> None:
        self.closed = True

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self.batches)

    def holds(self, items: Iterable[Payload]) -> bool:
        with self._lock:
            return all(self.objects.get(d) == data for d, data in items)

    def put_payloads(self, given: Iterable[Payload]) -> PutReport:
        batch = list(given)
        for digest, data in batch:
            if payload_digest(data) != digest:
                raise ValueError(f"payload digest mismatch: {digest}")
        with self._lock:
            self.batches.append([d for d, _ in batch])
            mode = self.mode
        if mode == "hang":
            self.entered.set()
            self.release.wait()
            mode = "up"
        if mode == "raise":
            raise ConnectionError("connection refused: could not connect to 127.0.0.1:9")
        items = dict(batch)
        report = PutReport(existing=len(batch) - len(items))
        with self._lock:
            for digest, data in items.items():
                if mode == "report" or digest in self.failing:
                    report.failed.append((digest, data, ConnectionError("connect timed out")))
                elif digest in self.objects:
                    report.existing += 1
                else:
                    self.objects[digest] = data
                    self.writes[digest] += 1
                    report.stored += 1
                    report.bytes_in += len(data)
                    report.bytes_out += len(data) // 2
        return report


@pytest.fixture
def make_uploader() -> Iterator[Callable[..., PayloadUploader]]:
    """Uploaders that are shut down (their stores released first) and whose threads are joined after the test."""
    made: list[tuple[PayloadUploader, FakeStore]] = []

    def make(store: FakeStore, **options: object) -> PayloadUploader:
        uploader = PayloadUploader(store, **{**FAST, **options})  # type: ignore[arg-type]
        made.append((uploader, store))
        return uploader

    yield make
    for _, store in made:
        store.release.set()
        if store.mode == "hang":
            store.mode = "up"
    for uploader, _ in made:
        uploader.shutdown(timeout=WAIT)
        if uploader._thread is not None:
            uploader._thread.join(WAIT)
            assert not uploader._thread.is_alive()


# ------------------------------------------------------------------------------------------------ healthy store


def test_every_payload_reaches_the_store_exactly_once_after_force_flush(
    tmp_path: Path, make_uploader: Callable[..., PayloadUploader]
) -> None:
    store = FakeStore()
    uploader = make_uploader(store, spool=tmp_path / "spool", batch_size=7)
    items = payloads(100)
    for span_id, start in enumerate(range(0, 100, 3)):
        uploader.put(span_id, items[start : start + 3])

    assert uploader.force_flush(int(WAIT * 1000))
    assert store.holds(items)
    assert set(store.objects) == {d for d, _ in items}
    assert set(store.writes.values()) == {1}
    assert all(len(batch) <= 7 for batch in store.batches)
    stats = uploader.stats()
    assert (stats.uploaded, stats.existing, stats.spooled, stats.dropped, stats.failures) == (100, 0, 0, 0, 0)
    assert stats.pending == 0
    assert stats.bytes_uploaded == sum(len(data) for _, data in items)
    assert stats.bytes_stored == sum(len(data) // 2 for _, data in items)
    assert spool_files(tmp_path / "spool") == {}


def test_a_payload_twice_in_one_batch_is_stored_once_and_counted_existing(
    make_uploader: Callable[..., PayloadUploader],
) -> None:
    store = FakeStore()
    uploader = make_uploader(store)
    item = payload(1)
    uploader.put(1, [item, item])
    uploader.put(2, [item])

    assert uploader.force_flush(int(WAIT * 1000))
    assert store.objects == {item[0]: item[1]}
    assert store.writes[item[0]] == 1
    stats = uploader.stats()
    assert (stats.uploaded, stats.existing) == (1, 2)
    assert balance(stats) == 3


def test_payloads_the_store_already_holds_count_as_existing(make_uploader: Callable[..., PayloadUploader]) -> None:
    store = FakeStore()
    old = payloads(3, "old")
    store.objects.update(old)
    uploader = make_uploader(store)
    uploader.put(1, [*old, *payloads(2, "new")])

    assert uploader.force_flush(int(WAIT * 1000))
    stats = uploader.stats()
    assert (stats.uploaded, stats.existing) == (2, 3)
    assert all(n == 1 for n in store.writes.values())


def test_a_store_returning_no_report_counts_the_batch_as_uploaded(
    make_uploader: Callable[..., PayloadUploader],
) -> None:
    class Silent:
        def __init__(self) -> None:
            self.got: list[Payload] = []

        def put_payloads(self, batch: Iterable[Payload]) -> None:
            self.got.extend(batch)

    store = Silent()
    uploader = PayloadUploader(store, **FAST)  # type: ignore[arg-type]
    try:
        uploader.put(1, payloads(4))
        assert uploader.force_flush(int(WAIT * 1000))
        assert store.got == payloads(4)
        assert uploader.stats().uploaded == 4
    finally:
        uploader.shutdown()


def test_a_clean_shutdown_writes_the_queue_closes_the_store_and_logs_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = FakeStore()
    # A long interval and a large batch: the payloads wait in memory until shutdown writes them.
    uploader = PayloadUploader(store, spool=tmp_path / "spool", interval=60, batch_size=1000, shutdown_timeout=WAIT)
    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        uploader.put(1, payloads(5))
        assert uploader.stats().pending == 5
        uploader.shutdown()
        uploader.shutdown()  # twice is harmless
    assert uploader._thread is not None and not uploader._thread.is_alive()
    assert store.holds(payloads(5))
    assert store.closed
    assert uploader.stats().uploaded == 5
    assert messages(caplog, "") == []


def test_batches_are_written_as_soon_as_a_batch_is_queued(make_uploader: Callable[..., PayloadUploader]) -> None:
    store = FakeStore()
    uploader = make_uploader(store, interval=60, batch_size=4)
    uploader.put(1, payloads(4))  # a full batch wakes the thread: no flush, no interval
    wait_until(lambda: store.holds(payloads(4)), "the full batch was written")


# ------------------------------------------------------------------------------------------------ the call path


@pytest.mark.parametrize("mode", ["raise", "report", "hang"])
def test_the_call_path_never_raises_nor_blocks_whatever_the_store_does(
    tmp_path: Path, make_uploader: Callable[..., PayloadUploader], mode: str
) -> None:
    store = FakeStore(mode)
    store.check_error = RuntimeError("check exploded")
    uploader = make_uploader(store, spool=tmp_path / "spool", batch_size=2, buffer_bytes=4096)
    errors: list[BaseException] = []

    def call_path() -> None:
        try:
            for i in range(200):
                uploader.put(i, [payload(i, "a"), payload(i, "b")])
                uploader.stats()
        except BaseException as exc:
            errors.append(exc)

    caller = threading.Thread(target=call_path)
    try:
        caller.start()
        caller.join(WAIT)
        assert not caller.is_alive(), "put() blocked"
        assert errors == []
        if mode == "hang":
            assert store.entered.wait(WAIT)
            stats = uploader.stats()
            assert stats.dropped > 0  # the memory queue filled up behind the hung store
            assert stats.dropped + stats.pending <= 400
    finally:
        store.release.set()


def test_a_store_raising_anything_is_a_failure_and_the_thread_keeps_running(
    tmp_path: Path, make_uploader: Callable[..., PayloadUploader]
) -> None:
    class Broken(FakeStore):
        def put_payloads(self, given: Iterable[Payload]) -> PutReport:
            if self.mode == "broken":
                raise KeyError("bug in the store")
            return super().put_payloads(given)

    store = Broken("broken")
    uploader = make_uploader(store, spool=tmp_path / "spool")
    uploader.put(1, payloads(3, "first"))
    assert uploader.force_flush(int(WAIT * 1000))
    assert uploader.stats().failures >= 1
    assert uploader._thread is not None and uploader._thread.is_alive()

    store.mode = "up"
    uploader.put(2, payloads(3, "second"))
    wait_until(lambda: store.holds(payloads(3, "first") + payloads(3, "second")), "both rounds reached the store")


# ------------------------------------------------------------------------------------------------ spool


@pytest.mark.parametrize("mode", ["raise", "report"])
def test_a_store_down_from_the_start_spools_then_drains_by_itself_when_back(
    tmp_path: Path, make_uploader: Callable[..., PayloadUploader], caplog: pytest.LogCaptureFixture, mode: str
) -> None:
    spool = tmp_path / "spool"
    store = FakeStore(mode)
    items = payloads(30)
    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        uploader = make_uploader(store, spool=spool, batch_size=8)
        for i in range(0, 30, 5):
            uploader.put(i, items[i : i + 5])
        assert uploader.force_flush(int(WAIT * 1000))

        stats = uploader.stats()
        assert (stats.uploaded, stats.spooled, stats.dropped, stats.drained) == (0, 30, 0, 0)
        assert stats.failures >= 1
        assert (stats.spool_files, stats.spool_bytes) == (30, sum(len(d) for _, d in items))
        assert spool_files(spool) == {hex_of(d): data for d, data in items}
        assert store.objects == {}
        assert len(messages(caplog, "payloads go to the spool")) == 1
        assert str(spool) in messages(caplog, "payloads go to the spool")[0]

        store.mode = "up"  # nothing else: the uploader retries after its backoff and drains
        wait_until(lambda: uploader.stats().drained == 30, "the spool drained")

    assert store.holds(items)
    assert set(store.writes.values()) == {1}
    assert spool_files(spool) == {}
    stats = uploader.stats()
    assert (stats.uploaded, stats.spooled, stats.drained, stats.spool_files, stats.spool_bytes) == (30, 30, 30, 0, 0)
    assert balance(stats) == 30
    assert len(messages(caplog, "is back; draining the spool")) >= 1


def test_a_store_that_does_not_answer_gets_its_payloads_spooled_within_max_delay(
    tmp_path: Path, make_uploader: Callable[..., PayloadUploader], caplog: pytest.LogCaptureFixture
) -> None:
    # A kill -9 loses what waits in memory: a write the store does not answer must not keep its payloads, or those
    # handed over meanwhile, there for the store's whole timeout.
    spool = tmp_path / "spool"
    store = FakeStore("hang")
    in_flight, later = payloads(3, "in-flight"), payloads(4, "later")
    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        uploader = make_uploader(store, spool=spool, max_delay=0.2)
        uploader.put(1, in_flight)
        assert store.entered.wait(WAIT)  # the write hangs from here on
        wait_until(lambda: set(spool_files(spool)) == {hex_of(d) for d, _ in in_flight}, "the batch in flight spooled")
        uploader.put(2, later)
        wait_until(lambda: len(spool_files(spool)) == 7, "what was handed over meanwhile spooled")
    assert store.objects == {} and not store.release.is_set()  # all of it while the write still hangs
    stats = uploader.stats()
    assert (stats.spooled, stats.pending, stats.dropped) == (7, 0, 0)
    [slow] = messages(caplog, "has not answered within")
    assert str(spool) in slow

    store.release.set()  # the write ends: its payloads leave the spool, the others drain
    wait_until(lambda: spool_files(spool) == {} and store.holds(in_flight + later), "the spool drained")
    assert uploader.force_flush(int(WAIT * 1000))
    stats = uploader.stats()
    assert (stats.spooled, stats.drained, stats.dropped, stats.spool_files) == (7, 7, 0, 0)
    assert balance(stats) == 7
    assert set(store.writes.values()) == {1}


def test_while_the_store_fails_payloads_reach_the_spool_as_they_are_handed_over(
    tmp_path: Path, make_uploader: Callable[..., PayloadUploader]
) -> None:
    spool = tmp_path / "spool"
    store = FakeStore("raise")
    uploader = make_uploader(store, spool=spool, interval=60, max_backoff=3600)  # no timed wake-up, no retry
    uploader.put(1, payloads(2, "first"))
    assert uploader.force_flush(int(WAIT * 1000))  # the first write fails: the store is known to be down from here on
    assert uploader._is_down() and len(spool_files(spool)) == 2
    for i in range(5):
        uploader.put(10 + i, payloads(1, f"later{i}"))
        wait_until(lambda n=i: len(spool_files(spool)) == 3 + n, f"payload {i} spooled at once")
    assert store.calls == 1
    assert uploader.stats().pending == 0


def test_while_backing_off_batches_go_to_the_spool_without_a_request(
    tmp_path: Path, make_uploader: Callable[..., PayloadUploader]
) -> None:
    spool = tmp_path / "spool"
    store = FakeStore()
    uploader = make_uploader(store, spool=spool, max_backoff=3600)
    # The state after a failure with a long backoff, set directly so that it does not depend on the clock.
    uploader._backoff = 3600
    uploader._down_until = time.monotonic() + 3600
    items = []
    for i in range(5):
        items += payloads(2, f"later{i}")
        uploader.put(i, items[-2:])
        assert uploader.force_flush(int(WAIT * 1000))
    assert store.calls == 0
    assert uploader.stats().spooled == 10
    assert len(spool_files(spool)) == 10

    uploader._down_until = time.monotonic()  # the retry is due
    wait_until(lambda: uploader.stats().drained == 10 and not uploader._is_down(), "the spool drained")
    assert store.holds(items)


def test_backoff_doubles_up_to_max_backoff(make_uploader: Callable[..., PayloadUploader]) -> None:
    uploader = make_uploader(FakeStore(), max_backoff=5.0)
    seen = []
    for _ in range(5):
        uploader._failed(ConnectionError("connect refused"))
        seen.append(uploader._backoff)
    assert seen == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert uploader.stats().failures == 5


def test_a_partially_failing_store_spools_exactly_the_failed_payloads(
    tmp_path: Path, make_uploader: Callable[..., PayloadUploader]
) -> None:
    spool = tmp_path / "spool"
    store = FakeStore()
    items = payloads(10)
    bad = items[::3]
    store.failing = {d for d, _ in bad}
    uploader = make_uploader(store, spool=spool)
    uploader.put(1, items)
    assert uploader.force_flush(int(WAIT * 1000))

    good = [item for item in items if item not in bad]
    assert store.holds(good)
    assert set(store.objects) == {d for d, _ in good}
    assert spool_files(spool) == {hex_of(d): data for d, data in bad}
    stats = uploader.stats()
    assert (stats.uploaded, stats.spooled) == (len(good), len(bad))
    assert stats.failures >= 1
    assert balance(stats) == 10

    store.failing = {bad[0][0]}  # the drain itself partially fails: the failed one stays
    wait_until(lambda: set(spool_files(spool)) == {hex_of(bad[0][0])}, "the others drained")
    store.failing = set()
    wait_until(lambda: spool_files(spool) == {}, "the last one drained")
    assert store.holds(items)
    assert set(store.writes.values()) == {1}
    uploader.shutdown()
    stats = uploader.stats()
    assert stats.drained == len(bad)
    assert balance(stats) == 10


def test_a_spool_left_by_an_earlier_uploader_is_drained_by_a_new_one(
    tmp_path: Path, make_uploader: Callable[..., PayloadUploader]
) -> None:
    spool = tmp_path / "spool"
    items = payloads(25)
    first = make_uploader(FakeStore("raise"), spool=spool)
    first.put(1, items)
    first.shutdown()
    assert first.stats().spooled == 25
    assert len(spool_files(spool)) == 25

    store = FakeStore()
    second = make_uploader(store, spool=spool, batch_size=4)
    wait_until(lambda: second.stats().drained == 25, "the earlier spool drained")
    assert store.holds(items)
    assert spool_files(spool) == {}
    stats = second.stats()
    assert (stats.uploaded, stats.spooled, stats.dropped, stats.spool_files) == (25, 0, 0, 0)


def test_two_uploaders_draining_one_spool_lose_nothing(
    tmp_path: Path, make_uploader: Callable[..., PayloadUploader]
) -> None:
    spool = Spool(tmp_path / "spool")
    items = payloads(60)
    for digest, data in items:
        assert spool.add(digest, data) is True
    store = FakeStore()
    a = make_uploader(store, spool=spool.path, batch_size=3)
    b = make_uploader(store, spool=spool.path, batch_size=3)
    wait_until(lambda: spool_files(spool.path) == {}, "the spool drained")
    a.shutdown()
    b.shutdown()
    assert store.holds(items)
    assert a.stats().drained + b.stats().drained >= 60
    assert a.stats().uploaded + b.stats().uploaded == 60


def test_new_payloads_and_the_spool_both_reach_the_store(
    tmp_path: Path, make_uploader: Callable[..., PayloadUploader]
) -> None:
    spool = Spool(tmp_path / "spool")
    old = payloads(40, "old")
    for digest, data in old:
        spool.add(digest, data)
    store = FakeStore()
    uploader = make_uploader(store, spool=spool.path, batch_size=5)
    new = payloads(40, "new")
    for i, item in enumerate(new):
        uploader.put(i, [item])
    wait_until(lambda: store.holds(old + new) and spool_files(spool.path) == {}, "everything in the store")
    assert set(store.writes.values()) == {1}


def test_a_full_spool_drops_counts_and_warns_once(
    tmp_path: Path, make_uploader: Callable[..., PayloadUploader], caplog: pytest.LogCaptureFixture
) -> None:
    spool = tmp_path / "spool"
    items = payloads(40)
    size = min(len(data) for _, data in items)
    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        uploader = make_uploader(FakeStore("raise"), spool=spool, spool_bytes=5 * size)
        for i, item in enumerate(items):
            uploader.put(i, [item])
        assert uploader.force_flush(int(WAIT * 1000))

    stats = uploader.stats()
    kept = spool_files(spool)
    assert 1 <= len(kept) <= 5
    assert stats.spool_bytes == sum(len(data) for data in kept.values()) <= 5 * size
    assert (stats.spooled, stats.dropped) == (len(kept), 40 - len(kept))
    assert balance(stats) == 40
    assert len(messages(caplog, "is full")) == 1


def test_a_full_memory_queue_drops_counts_and_warns_once(
    make_uploader: Callable[..., PayloadUploader], caplog: pytest.LogCaptureFixture
) -> None:
    store = FakeStore()
    items = payloads(10)
    size = max(len(data) for _, data in items)
    # A long interval and a large batch: nothing leaves the queue until the flush.
    uploader = make_uploader(store, buffer_bytes=3 * size, interval=60, batch_size=1000)
    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        for i, item in enumerate(items):
            uploader.put(i, [item])
    stats = uploader.stats()
    assert (stats.pending, stats.dropped) == (3, 7)
    assert len(messages(caplog, "upload queue is full")) == 1

    assert uploader.force_flush(int(WAIT * 1000))
    assert store.holds(items[:3])
    assert set(store.objects) == {d for d, _ in items[:3]}
    assert balance(uploader.stats()) == 10


def test_a_payload_larger_than_the_memory_queue_is_dropped(make_uploader: Callable[..., PayloadUploader]) -> None:
    uploader = make_uploader(FakeStore(), buffer_bytes=10)
    uploader.put(1, [payload(1)])
    assert uploader.stats().dropped == 1


@pytest.mark.parametrize("mode", ["raise", "report"])
def test_without_a_spool_a_failed_write_drops_and_counts(
    make_uploader: Callable[..., PayloadUploader], caplog: pytest.LogCaptureFixture, mode: str
) -> None:
    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        uploader = make_uploader(FakeStore(mode), spool=None)
        uploader.put(1, payloads(6))
        assert uploader.force_flush(int(WAIT * 1000))
    stats = uploader.stats()
    assert (stats.uploaded, stats.spooled, stats.dropped, stats.spool_files) == (0, 0, 6, 0)
    assert balance(stats) == 6
    assert "they are dropped" in messages(caplog, "payloads go to the spool")[0]


def test_a_damaged_spool_file_is_deleted_and_not_uploaded(
    tmp_path: Path, make_uploader: Callable[..., PayloadUploader], caplog: pytest.LogCaptureFixture
) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    good = payloads(3, "good")
    for digest, data in good:
        (spool / hex_of(digest)).write_bytes(data)
    forged = payload(1, "claimed")
    (spool / hex_of(forged[0])).write_bytes(b'{"tag":"forged"}')
    torn = payload(2, "claimed")
    (spool / hex_of(torn[0])).write_bytes(torn[1][:10])

    store = FakeStore()
    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        uploader = make_uploader(store, spool=spool)
        wait_until(lambda: spool_files(spool) == {}, "the spool emptied")
        uploader.shutdown()
    assert store.objects == dict(good)
    assert uploader.stats().drained == 3
    assert len(messages(caplog, "damaged file in the payload spool")) == 1


def test_stale_temporary_files_are_ignored_and_old_ones_removed(
    tmp_path: Path, make_uploader: Callable[..., PayloadUploader]
) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    fresh_item, old_item, real = payload(1, "fresh"), payload(2, "old"), payload(3, "real")
    fresh = spool / f".tmp-1-2-{hex_of(fresh_item[0])[:16]}"
    fresh.write_bytes(fresh_item[1])
    old = spool / f".tmp-3-4-{hex_of(old_item[0])[:16]}"
    old.write_bytes(old_item[1])
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))
    (spool / hex_of(real[0])).write_bytes(real[1])
    # Neither are these payloads: a name that is not 64 lower-case hex digits, or a directory.
    (spool / hex_of(real[0]).upper()).write_bytes(real[1])
    (spool / "README").write_bytes(b"x")
    (spool / hex_of(payload(4)[0])).mkdir()

    assert Spool(spool).stats() == (1, len(real[1]))
    store = FakeStore()
    uploader = make_uploader(store, spool=spool)
    wait_until(lambda: uploader.stats().drained == 1, "the real payload drained")
    uploader.shutdown()
    assert store.objects == {real[0]: real[1]}
    assert fresh.read_bytes() == fresh_item[1]
    assert not old.exists()
    assert (spool / "README").exists()


def test_an_unwritable_spool_drops_warns_once_and_the_uploader_keeps_working(
    tmp_path: Path, make_uploader: Callable[..., PayloadUploader], caplog: pytest.LogCaptureFixture
) -> None:
    spool = tmp_path / "not-a-directory"
    spool.write_bytes(b"a regular file")
    store = FakeStore("raise")
    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        uploader = make_uploader(store, spool=spool)
        for i in range(4):
            uploader.put(i, payloads(3, f"down{i}"))
            assert uploader.force_flush(int(WAIT * 1000))
        stats = uploader.stats()  # reading the counters does not fail either
        assert (stats.spooled, stats.dropped, stats.spool_files, stats.spool_bytes) == (0, 12, 0, 0)
        assert len(messages(caplog, "cannot write the payload spool")) == 1

        store.mode = "up"
        # What comes while the uploader backs off goes to the spool, so is dropped here; then a retry is due.
        wait_until(uploader._due, "the backoff ran out")
        later = payloads(5, "up")
        uploader.put(9, later)
        wait_until(lambda: store.holds(later), "payloads reached the store once it was back")
        uploader.shutdown()
    assert spool.read_bytes() == b"a regular file"
    assert balance(uploader.stats()) == 17
    summary = messages(caplog, "already stored")  # the shutdown summary
    assert len(summary) == 1
    assert "12 dropped" in summary[0]


def test_a_spool_write_failing_midway_keeps_what_was_written(tmp_path: Path) -> None:
    class FailingSpool(Spool):
        def add(self, digest: str, data: bytes) -> bool | None:
            if data.endswith(b'2 for the tool call"}'):
                raise OSError(28, "No space left on device")
            return super().add(digest, data)

    uploader = PayloadUploader(FakeStore("raise"), spool=tmp_path / "spool", **FAST)  # type: ignore[arg-type]
    try:
        uploader.spool = FailingSpool(tmp_path / "spool")
        uploader.put(1, payloads(5))
        assert uploader.force_flush(int(WAIT * 1000))
        stats = uploader.stats()
        assert (stats.spooled, stats.dropped) == (2, 3)
        assert len(spool_files(tmp_path / "spool")) == 2
    finally:
        uploader.shutdown()


# ------------------------------------------------------------------------------------------------ shutdown


def test_shutdown_with_a_hanging_store_is_bounded_and_spools_what_is_left(
    tmp_path: Path, make_uploader: Callable[..., PayloadUploader], caplog: pytest.LogCaptureFixture
) -> None:
    spool = tmp_path / "spool"
    store = FakeStore("hang")
    uploader = make_uploader(store, spool=spool, shutdown_timeout=0.2)
    first, rest = payloads(2, "in-flight"), payloads(6, "queued")
    try:
        uploader.put(1, first)
        assert store.entered.wait(WAIT)  # the thread is stuck in put_payloads
        uploader.put(2, rest)
        assert uploader.stats().pending == 8
        assert not uploader.force_flush(50)  # a flush gives up; it does not hang either

        with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
            closer = threading.Thread(target=uploader.shutdown)
            closer.start()
            closer.join(WAIT)
            assert not closer.is_alive(), "shutdown did not return"

        # the write is still stuck in the store, on a thread of its own
        assert any(t.name == "chronicle-payload-request" and t.is_alive() for t in threading.enumerate())
        assert spool_files(spool) == {hex_of(d): data for d, data in first + rest}
        stats = uploader.stats()
        assert (stats.spooled, stats.dropped) == (8, 0)
        assert not store.closed  # never closed under a thread that still uses it
        summary = messages(caplog, "already stored")
        assert len(summary) == 1
        assert "8 payloads wait in the spool" in summary[0]

        uploader.put(3, payloads(1, "late"))
        assert uploader.stats().dropped == 1
    finally:
        store.release.set()
    assert uploader._thread is not None
    uploader._thread.join(WAIT)
    assert not uploader._thread.is_alive()


def test_put_after_shutdown_is_dropped_counted_and_warned_once(
    make_uploader: Callable[..., PayloadUploader], caplog: pytest.LogCaptureFixture
) -> None:
    store = FakeStore()
    uploader = make_uploader(store)
    uploader.shutdown()
    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        for i in range(5):
            uploader.put(i, payloads(2, str(i)))
    assert uploader.stats().dropped == 10
    assert store.objects == {}
    assert len(messages(caplog, "after shutdown")) == 1
    assert uploader.force_flush(10)  # nothing is queued


def test_shutdown_with_the_store_down_spools_the_queue(
    tmp_path: Path, make_uploader: Callable[..., PayloadUploader]
) -> None:
    spool = tmp_path / "spool"
    items = payloads(9)
    uploader = make_uploader(FakeStore("raise"), spool=spool, interval=60, batch_size=1000)
    uploader.put(1, items)
    uploader.shutdown()
    assert spool_files(spool) == {hex_of(d): data for d, data in items}
    assert uploader.stats().spooled == 9


# ------------------------------------------------------------------------------------------------ check()


def test_a_failing_check_at_start_is_logged_and_payloads_still_arrive(
    tmp_path: Path, make_uploader: Callable[..., PayloadUploader], caplog: pytest.LogCaptureFixture
) -> None:
    store = FakeStore()
    store.check_error = StoreError("checking the payload store s3://b failed: connect timed out", "s3://b")
    items = payloads(12)
    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        uploader = make_uploader(store, spool=tmp_path / "spool")
        wait_until(lambda: uploader.stats().failures == 1, "the check failed")
        uploader.put(1, items)
        wait_until(lambda: store.holds(items) and spool_files(tmp_path / "spool") == {}, "the payloads arrived")
    logged = messages(caplog, "the payload store FakeStore failed")
    assert len(logged) == 1
    assert "unreachable" in logged[0]
    assert set(store.writes.values()) == {1}


def test_the_store_url_names_the_store_in_logs(make_uploader: Callable[..., PayloadUploader]) -> None:
    store = FakeStore()
    store.url = "s3://payloads/prod"  # type: ignore[attr-defined]
    uploader = make_uploader(store, spool=None)
    assert uploader._store_name() == "s3://payloads/prod"
    assert "spool=None" in repr(uploader)


# ------------------------------------------------------------------------------------------------ Spool


def test_spool_add_take_remove(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool", max_bytes=1000)
    assert spool.stats() == (0, 0)
    assert not spool.has_more()
    a, b = payload(1), payload(2)
    assert spool.add(*a) is True
    assert spool.add(*a) is None  # already waiting
    assert spool.add(*b) is True
    assert spool.stats() == (2, len(a[1]) + len(b[1]))
    assert spool.has_more()
    assert not any(p.name.startswith(".tmp-") for p in spool.path.iterdir())

    taken = spool.take(10)
    assert sorted(taken) == sorted([a, b])
    assert sorted(spool.take(10)) == sorted(taken)  # taken but not removed: listed again by the next scan
    spool.remove(taken)
    assert spool.stats() == (0, 0)
    assert not spool.has_more()
    spool.remove(taken)  # removing twice is harmless


def test_spool_is_bounded_in_bytes(tmp_path: Path) -> None:
    items = payloads(5)
    size = len(items[0][1])
    spool = Spool(tmp_path, max_bytes=2 * size + 1)
    assert [spool.add(*item) for item in items[:3]] == [True, True, False]
    assert spool.stats()[0] == 2


def test_spool_take_honours_its_limits(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    items = payloads(10)
    for item in items:
        spool.add(*item)
    first = spool.take(4)
    assert len(first) == 4
    assert len(spool.take(100, max_bytes=1)) == 1  # at least one payload, then the byte bound stops it
    rest = spool.take(100)
    assert len(rest) == 5
    assert len({d for d, _ in first} | {d for d, _ in rest}) == 9


def test_spool_add_raises_oserror_when_it_cannot_write(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    spool = Spool(blocker)
    assert spool.stats() == (0, 0)
    assert not spool.has_more()
    assert spool.take(10) == []
    with pytest.raises(OSError):
        spool.add(*payload(1))
    assert list(tmp_path.iterdir()) == [blocker]


def test_upload_stats_is_a_frozen_value() -> None:
    stats = UploadStats(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
    with pytest.raises(AttributeError):
        stats.uploaded = 0  # type: ignore[misc]


# ------------------------------------------------------------------------------------------------ fork


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_uploads_its_own_payloads_even_if_forked_while_locks_were_held(tmp_path: Path) -> None:
    store = FakeStore()
    # A long interval and a large batch: the parent's payload stays queued until its flush.
    uploader = PayloadUploader(store, spool=tmp_path / "spool", interval=60, batch_size=1000, shutdown_timeout=2)
    try:
        parent_item, child_item = payload(1, "parent"), payload(2, "child")
        uploader.put(1, [parent_item])
        assert uploader.spool is not None
        # The parent's thread may hold a lock at the moment of a fork; the child must not inherit it held.
        uploader._lock.acquire()
        uploader.spool._lock.acquire()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork() of a threaded process (Python >= 3.12)
            pid = os.fork()
        if pid == 0:  # the child: report through the exit status only
            code = 1
            try:
                uploader.put(2, [child_item])
                if not uploader.force_flush(5000):
                    code = 10
                elif store.objects != {child_item[0]: child_item[1]}:
                    code = 11  # the parent's queued payload is the parent's to upload
                else:
                    uploader.stats()
                    uploader.shutdown()
                    code = 0 if uploader._thread is not None and not uploader._thread.is_alive() else 12
            finally:
                os._exit(code)
        uploader.spool._lock.release()
        uploader._lock.release()

        deadline = time.monotonic() + 20
        status = None
        while status is None:
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(raw)
            elif time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise AssertionError("the forked child hung")
            else:
                time.sleep(0.01)
        assert status == 0

        assert uploader.force_flush(int(WAIT * 1000))
        assert store.objects == {parent_item[0]: parent_item[1]}
    finally:
        uploader.shutdown()


def test_a_shut_down_uploader_starts_no_thread_after_a_fork(make_uploader: Callable[..., PayloadUploader]) -> None:
    uploader = make_uploader(FakeStore())
    uploader.shutdown()
    thread = uploader._thread
    uploader._after_fork()
    assert uploader._thread is thread


# ------------------------------------------------------------------------------------------------ property


@settings(max_examples=30, deadline=None)
@given(
    ops=st.lists(
        st.one_of(
            st.tuples(st.just("put"), st.integers(1, 6)),
            st.tuples(st.just("store"), st.sampled_from(["up", "raise", "report"])),
            st.tuples(st.just("flush"), st.just(0)),
        ),
        max_size=25,
    ),
    spool_capacity=st.sampled_from([None, 300, 1_000_000]),
    batch_size=st.integers(1, 8),
)
def test_nothing_is_lost_whatever_the_store_does(
    ops: list[tuple[str, object]], spool_capacity: int | None, batch_size: int
) -> None:
    store = FakeStore()
    handed: list[Payload] = []
    with tempfile.TemporaryDirectory() as tmp:
        spool = Path(tmp) / "spool"
        uploader = PayloadUploader(
            store,
            spool=spool if spool_capacity is not None else None,
            spool_bytes=spool_capacity or 0,
            batch_size=batch_size,
            interval=0.005,
            max_backoff=0.02,
            shutdown_timeout=WAIT,
        )
        try:
            for op, arg in ops:
                if op == "put":
                    assert isinstance(arg, int)
                    items = [payload(len(handed) + i, "prop") for i in range(arg)]
                    handed.extend(items)
                    uploader.put(len(handed), items)
                elif op == "store":
                    store.mode = str(arg)
                else:
                    assert uploader.force_flush(int(WAIT * 1000))
            # The store comes back: everything that was not dropped ends in the store, with no further call.
            store.mode = "up"
            assert uploader.force_flush(int(WAIT * 1000))
            wait_until(lambda: spool_files(spool) == {}, "the spool drained")
        finally:
            uploader.shutdown()
        assert uploader._thread is not None and not uploader._thread.is_alive()

        stats = uploader.stats()
        missing = [d for d, data in handed if store.objects.get(d) != data]
        assert len(missing) == stats.dropped
        assert all(n == 1 for n in store.writes.values())
        assert balance(stats) == len(handed)
        assert stats.pending == 0
        if spool_capacity is None:
            assert stats.spooled == stats.drained == 0
        else:
            assert stats.drained == stats.spooled


def test_payload_digests_are_sha256_of_the_data() -> None:
    digest, data = payload(7)
    assert digest == "sha256:" + hashlib.sha256(data).hexdigest()
