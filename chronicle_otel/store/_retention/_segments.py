"""Segment files: which there are, which a writer may still append to, and their compaction.

A segment that holds no indexed line is deleted; one that holds indexed lines and others is rewritten: the indexed
lines are copied to a new segment which is fsync-ed, the index rows are moved to it in one transaction, then the old
file is unlinked. At no point does an index row point at a missing or torn line.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from .._local import _SEGMENT_MAX_BYTES
from ..reader import INDEX, MANIFEST, MAX_LINE_BYTES
from ._run import Run

_SEGMENT_NAME = re.compile(r"([0-9]{6})-([0-9]{1,10})-[0-9a-f]+\.jsonl\Z")
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
_CHUNK_SEGMENTS: Final = 200  # empty segments deleted per transaction
_SEGMENT_ROWS: Final = "SELECT rowid, offset, length FROM span_lines WHERE segment = ? ORDER BY offset, rowid"


class _Changed(Exception):
    """The index rows of a segment changed between its copy and the move of its rows."""


def segment_files(path: Path) -> Iterator[tuple[str, Path, os.stat_result]]:
    """Every segment file of the store: ``spans/<dir>/<name>.jsonl``, regular files reached without links."""
    spans = path / "spans"
    if spans.is_symlink() or not spans.is_dir():
        return
    for day in sorted(os.listdir(spans)):
        folder = spans / day
        if folder.is_symlink() or not folder.is_dir():
            continue
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".jsonl"):
                continue
            full = folder / name
            try:
                info = os.lstat(full)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                yield f"spans/{day}/{name}", full, info


def segment_groups(db: sqlite3.Connection, where: str, params: tuple[Any, ...]) -> dict[str, tuple[int, int]]:
    """Indexed rows per segment, and the bytes they take with their newlines."""
    rows = db.execute(
        f"SELECT s.segment, COUNT(*), COALESCE(SUM(s.length), 0) + COUNT(*) FROM span_lines s {where} "
        "GROUP BY s.segment",
        params,
    )
    return {str(segment): (count, size) for segment, count, size in rows}


def busy(run: Run, full: Path, info: os.stat_result) -> bool:
    """True when a writer may still append to this segment (the rule is in the retention module's documentation)."""
    if info.st_mtime_ns > run.settled_ns:
        return True
    if info.st_size >= _SEGMENT_MAX_BYTES:
        return False  # the writer moved on to a new segment
    match = _SEGMENT_NAME.match(full.name)
    if match is None:
        return False  # not a writer's name: settled once quiet for the grace period
    return _held_open(int(match.group(2)), info)


def compact_segments(run: Run) -> None:
    """Delete the segments no index row points at and rewrite the others that hold unindexed lines, unless busy."""
    db = run.index()
    c = run.counts
    groups = segment_groups(db, "", ())
    empty: list[tuple[str, Path, os.stat_result]] = []
    for rel, full, info in segment_files(run.path):
        rows, kept = groups.get(rel, (0, 0))
        if rows and kept == info.st_size:
            continue
        if rows and kept > info.st_size:
            c.warnings.append(f"{rel}: the index lists more bytes than the file holds; left alone")
            continue
        if busy(run, full, info):
            c.segments_busy += 1
        elif rows == 0:
            empty.append((rel, full, info))
        else:
            _rewrite(run, rel, full, info)
    for start in range(0, len(empty), _CHUNK_SEGMENTS):
        _delete_segments(run, empty[start : start + _CHUNK_SEGMENTS])
    _remove_old_day_folders(run.path)


def _delete_segments(run: Run, segments: list[tuple[str, Path, os.stat_result]]) -> None:
    """Delete segments no index row points at; checked again under the write lock, so none can appear."""
    c = run.counts
    with run.write() as w:
        marks = ",".join("?" * len(segments))
        used = {
            segment
            for (segment,) in w.execute(
                f"SELECT DISTINCT segment FROM span_lines WHERE segment IN ({marks})",
                [rel for rel, _, _ in segments],
            )
        }
        for rel, full, info in segments:
            if rel in used:
                continue
            try:
                _unlink_segment(full)
            except OSError:
                c.segments_busy += 1  # Windows: a process holds it open
                continue
            c.segments_deleted += 1
            c.segment_bytes_freed += info.st_size
    _sync_folders({full.parent for _, full, _ in segments})


def _rewrite(run: Run, rel: str, full: Path, info: os.stat_result) -> None:
    """Copy the indexed lines of a segment to a new one, move their index rows to it, unlink the old file."""
    c = run.counts
    rows = run.index().execute(_SEGMENT_ROWS, (rel,)).fetchall()
    end = 0
    for _, offset, length in rows:
        if not (type(offset) is int and type(length) is int and offset >= end and 0 <= length <= MAX_LINE_BYTES):
            c.warnings.append(f"{rel}: index rows overlap or are malformed; left alone")
            return
        end = offset + length
    if not rows or end > info.st_size:
        if rows:
            c.warnings.append(f"{rel}: the index reads past the end of the file; left alone")
        return
    match = _SEGMENT_NAME.match(full.name)
    stamp = match.group(1) if match else time.strftime("%H%M%S", time.gmtime())
    new_rel = f"{rel.rsplit('/', 1)[0]}/{stamp}-{os.getpid()}-{os.urandom(4).hex()}.jsonl"
    new_full = run.path / new_rel
    try:
        moved, new_size = _write_segment(full, new_full, rows)
    except OSError as exc:
        with contextlib.suppress(OSError):
            new_full.unlink()
        c.warnings.append(f"{rel}: could not be rewritten ({exc}); left alone")
        return
    try:
        with run.write() as w:
            if w.execute(_SEGMENT_ROWS, (rel,)).fetchall() != rows:
                raise _Changed  # not expected of a settled segment: never move rows that changed
            _replace_rows(w, new_rel, moved)
    except _Changed:
        with contextlib.suppress(OSError):
            new_full.unlink()
        c.segments_busy += 1
        return
    c.segments_rewritten += 1
    try:
        _unlink_segment(full)
    except OSError:  # Windows: a process holds it open; its rows are moved, a later run deletes it
        c.segment_bytes_freed -= new_size
        return
    finally:
        _sync_folders({full.parent})
    c.segment_bytes_freed += info.st_size - new_size


def _remove_old_day_folders(path: Path) -> None:
    """Remove empty day folders older than yesterday (a writer only creates today's, on the UTC clock)."""
    spans = path / "spans"
    oldest = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 2 * 86400))
    with contextlib.suppress(OSError):
        for day in os.listdir(spans):
            folder = spans / day
            if _DAY.match(day) and day < oldest and not folder.is_symlink() and folder.is_dir():
                with contextlib.suppress(OSError):
                    folder.rmdir()  # fails unless empty


def disk_bytes(path: Path) -> int:
    """Bytes of the store's files on disk: manifest, index and its WAL, segments."""
    total = 0
    for name in (MANIFEST, INDEX, INDEX + "-wal"):  # not -shm: a shared-memory file of open connections
        with contextlib.suppress(OSError):
            info = os.lstat(path / name)
            if stat.S_ISREG(info.st_mode):
                total += info.st_size
    return total + sum(info.st_size for _, _, info in segment_files(path))


# ------------------------------------------------------------------------------------------------ file steps


def _write_segment(old: Path, new: Path, rows: list[tuple[int, int, int]]) -> tuple[list[tuple[int, int]], int]:
    """Copy the lines ``rows`` (rowid, offset, length) of ``old`` to the new file ``new``, fsync-ed.

    Returns:
        ``(rowid, new offset)`` of every line, and the new file's size.
    """
    moved: list[tuple[int, int]] = []
    position = 0
    fd = os.open(old, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0))
    with open(fd, "rb") as src, open(new, "xb") as dst:
        for rowid, offset, length in rows:
            src.seek(offset)
            line = src.read(length)
            if len(line) != length:
                raise OSError(f"{old}: truncated at byte {offset}")
            dst.write(line)
            dst.write(b"\n")
            moved.append((rowid, position))
            position += length + 1
        dst.flush()
        os.fsync(dst.fileno())
    _sync_folders({new.parent})
    return moved, position


def _replace_rows(db: sqlite3.Connection, segment: str, moved: list[tuple[int, int]]) -> None:
    """Point the moved rows at their place in the new segment (inside the caller's transaction)."""
    db.executemany(
        "UPDATE span_lines SET segment = ?, offset = ? WHERE rowid = ?",
        [(segment, offset, rowid) for rowid, offset in moved],
    )


def _unlink_segment(full: Path) -> None:
    os.unlink(full)


def _sync_folders(folders: set[Path]) -> None:
    """fsync directories so that file creations and removals in them are durable (POSIX only)."""
    if os.name == "nt":  # pragma: no cover - directories cannot be opened on Windows
        return
    for folder in folders:
        with contextlib.suppress(OSError):
            fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def _held_open(pid: int, info: os.stat_result) -> bool:
    """True when process ``pid`` may hold the file ``info`` describes open for appending."""
    if os.name == "nt":  # pragma: no cover - Windows refuses to delete a file held open; unlink fails instead
        return False
    fds = Path(f"/proc/{pid}/fd")
    try:
        entries = os.listdir(fds)
    except FileNotFoundError:
        if os.path.isdir("/proc/self/fd"):
            return False  # /proc works and there is no such process
        return _alive(pid)
    except OSError:
        return _alive(pid)  # another user's process: assume it holds the file
    for entry in entries:
        try:
            target = os.stat(fds / entry)
        except OSError:
            continue
        if target.st_ino == info.st_ino and target.st_dev == info.st_dev:
            return True
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
