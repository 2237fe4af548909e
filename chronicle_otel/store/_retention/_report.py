"""What a retention run did: the counts it keeps as it goes, and the :class:`RetentionReport` made of them."""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass, field
from typing import Any

from ._policy import EXPIRED, PENDING, REMOVED, UNSAMPLED


@dataclass(frozen=True)
class RetentionReport:
    """What :func:`apply_retention` did (or, with ``dry_run``, would do). Byte counts are exact unless noted.

    ``traces_kept`` and ``traces_removed`` split into failed and successful; ``traces_removed`` also splits by reason
    (``removed_expired + removed_unsampled + removed_for_size``). Kept traces include the pending ones.
    """

    dry_run: bool
    """Nothing was changed; the numbers say what a run would do now."""
    traces_kept: int
    """Traces left in the store (pending ones included)."""
    traces_removed: int
    """Traces removed from the index."""
    failed_kept: int
    """Failed traces kept."""
    failed_removed: int
    """Failed traces removed (older than ``max_age``, not sampled without ``keep_failed``, or for size)."""
    successful_kept: int
    """Successful traces kept."""
    successful_removed: int
    """Successful traces removed."""
    removed_expired: int
    """Traces removed for being older than ``max_age``."""
    removed_unsampled: int
    """Traces removed for being outside the ``success_rate`` sample."""
    removed_for_size: int
    """Traces removed to bring the data under ``max_bytes``."""
    traces_pending: int
    """Traces left alone because they were written to recently (they may still grow); a later run decides them."""
    span_bytes_removed: int
    """Bytes of span lines of the removed traces (no longer indexed)."""
    payloads_removed: int
    """Payloads that no remaining trace refers to, deleted."""
    payload_bytes_removed: int
    """Their bytes."""
    segments_deleted: int
    """Segment files deleted (none of their lines was still indexed)."""
    segments_rewritten: int
    """Segment files rewritten with only their indexed lines."""
    segments_busy: int
    """Segments with unindexed lines left as they are because a writer may still append to them."""
    segment_bytes_freed: int
    """Bytes of segment files given back to the file system."""
    data_bytes_before: int
    """Indexed span-line bytes plus stored payload bytes before the run (what ``max_bytes`` measures)."""
    data_bytes_after: int
    """The same after the run, as of the snapshot (spans written during the run are not counted)."""
    store_bytes_before: int
    """Bytes of the store's files on disk before the run (manifest, index and its WAL, segments)."""
    store_bytes_after: int
    """The same after the run (for a dry run, an estimate: minus the segment bytes it would free)."""
    warnings: tuple[str, ...] = field(default=())
    """What the run could not do, and why (a damaged segment, the size cap out of reach…)."""

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON-ready data."""
        data = asdict(self)
        data["warnings"] = list(self.warnings)
        return data

    def summary(self) -> str:
        """One line for a human: what was kept, removed and freed."""
        head, keep, remove, free = ("gc (dry run)", "would keep", "would remove", "would free")
        if not self.dry_run:
            head, keep, remove, free = ("gc", "kept", "removed", "freed")
        reasons = (
            f"{self.removed_expired:,} expired, {self.removed_unsampled:,} unsampled, "
            f"{self.removed_for_size:,} for size"
        )
        return (
            f"{head}: {keep} {self.traces_kept:,} traces ({self.failed_kept:,} with errors, "
            f"{self.traces_pending:,} pending), {remove} {self.traces_removed:,} "
            f"({self.failed_removed:,} with errors; {reasons}); {free} {human(self.segment_bytes_freed)} of "
            f"segments ({self.segments_deleted:,} deleted, {self.segments_rewritten:,} rewritten, "
            f"{self.segments_busy:,} busy) and {self.payloads_removed:,} payloads "
            f"({human(self.payload_bytes_removed)}); data {human(self.data_bytes_before)} -> "
            f"{human(self.data_bytes_after)}, store {human(self.store_bytes_before)} -> "
            f"{human(self.store_bytes_after)}" + (f"; {len(self.warnings)} warning(s)" if self.warnings else "")
        )


def human(size: int) -> str:
    """``size`` bytes for a person: ``512 B``, ``1.5 MB``."""
    value = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if abs(value) < 1000 or unit == "GB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("not reached")  # pragma: no cover


@dataclass
class Counts:
    """What one run has counted so far (mutable: each step adds to it)."""

    kept_failed: int = 0
    kept_ok: int = 0
    removed_failed: int = 0
    removed_ok: int = 0
    expired: int = 0
    unsampled: int = 0
    for_size: int = 0
    pending: int = 0
    span_bytes_removed: int = 0
    payloads_removed: int = 0
    payload_bytes_removed: int = 0
    segments_deleted: int = 0
    segments_rewritten: int = 0
    segments_busy: int = 0
    segment_bytes_freed: int = 0
    lines_before: int = 0
    payload_bytes_before: int = 0
    warnings: list[str] = field(default_factory=list)


def tally(db: sqlite3.Connection, c: Counts) -> None:
    """Count the plan's verdicts into ``c``: traces kept and removed, failed or not, and why."""
    for verdict, failed, count, size in db.execute(
        "SELECT verdict, failed, COUNT(*), COALESCE(SUM(bytes), 0) FROM temp.plan GROUP BY verdict, failed"
    ):
        if verdict >= REMOVED:
            c.span_bytes_removed += size
            if failed:
                c.removed_failed += count
            else:
                c.removed_ok += count
            if verdict == EXPIRED:
                c.expired += count
            elif verdict == UNSAMPLED:
                c.unsampled += count
            else:
                c.for_size += count
        else:
            if verdict == PENDING:
                c.pending += count
            if failed:
                c.kept_failed += count
            else:
                c.kept_ok += count


def report_of(c: Counts, *, dry_run: bool, store_before: int, store_after: int) -> RetentionReport:
    """The report of a run that counted ``c``; the store's bytes on disk before and after it."""
    data_before = c.lines_before + c.payload_bytes_before
    data_after = data_before - c.span_bytes_removed - c.payload_bytes_removed
    return RetentionReport(
        dry_run=dry_run,
        traces_kept=c.kept_failed + c.kept_ok,
        traces_removed=c.removed_failed + c.removed_ok,
        failed_kept=c.kept_failed,
        failed_removed=c.removed_failed,
        successful_kept=c.kept_ok,
        successful_removed=c.removed_ok,
        removed_expired=c.expired,
        removed_unsampled=c.unsampled,
        removed_for_size=c.for_size,
        traces_pending=c.pending,
        span_bytes_removed=c.span_bytes_removed,
        payloads_removed=c.payloads_removed,
        payload_bytes_removed=c.payload_bytes_removed,
        segments_deleted=c.segments_deleted,
        segments_rewritten=c.segments_rewritten,
        segments_busy=c.segments_busy,
        segment_bytes_freed=c.segment_bytes_freed,
        data_bytes_before=data_before,
        data_bytes_after=data_after,
        store_bytes_before=store_before,
        store_bytes_after=store_after,
        warnings=tuple(c.warnings),
    )
