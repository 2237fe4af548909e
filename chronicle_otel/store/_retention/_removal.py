"""The removal steps of a retention run: the planned traces' index rows, then the payloads no trace refers to.

Each chunk is one short ``BEGIN IMMEDIATE`` transaction that first reads the span lines written since the last look
(:meth:`~._run.Run.read_new_lines`): a trace written to since the snapshot is kept, and so is every payload a new line
names.
"""

from __future__ import annotations

from typing import Final

from ..reader import lines_of_trace
from ._policy import PENDING, REMOVED
from ._run import Run

_CHUNK_TRACES: Final = 2_000  # traces removed per transaction
_CHUNK_PAYLOADS: Final = 500  # payloads removed per transaction


def remove_traces(run: Run) -> None:
    """Delete the index rows of removed traces, a chunk per transaction; a trace written to since is kept."""
    db = run.index()
    last = ""
    while True:
        chunk = db.execute(
            "SELECT trace_id, updated_ns FROM temp.plan WHERE verdict >= ? AND trace_id > ? ORDER BY trace_id LIMIT ?",
            (REMOVED, last, _CHUNK_TRACES),
        ).fetchall()
        if not chunk:
            return
        last = chunk[-1][0]
        with run.write() as w:
            run.read_new_lines(w)
            gone: list[tuple[str]] = []
            of_trace = lines_of_trace(w)
            for trace_id, updated_ns in chunk:
                row = w.execute("SELECT updated_ns FROM traces WHERE trace_id = ?", (trace_id,)).fetchone()
                if row is not None and row[0] == updated_ns:
                    gone.append((trace_id,))
                    continue
                w.execute("UPDATE temp.plan SET verdict = ? WHERE trace_id = ?", (PENDING, trace_id))
                if run.sweep:  # its earlier lines were not read as a kept trace's
                    lines = w.execute(
                        f"SELECT trace_id, segment, offset, length FROM span_lines WHERE {of_trace} "
                        "ORDER BY segment, offset",
                        {"trace_id": trace_id},
                    )
                    run.keep_references(w, lines)
            # the lines first: with chronicle-store/2 they are found through the traces row
            w.executemany(f"DELETE FROM span_lines WHERE {of_trace}", [{"trace_id": t} for (t,) in gone])
            w.executemany("DELETE FROM traces WHERE trace_id = ?", gone)
            run.mark = w.execute("SELECT COALESCE(MAX(rowid), 0) FROM span_lines").fetchone()[0]


def remove_payloads(run: Run) -> None:
    """Delete the doomed payloads still unreferenced, a chunk per transaction."""
    db = run.index()
    c = run.counts
    last = ""
    while run.sweep:
        chunk = db.execute(
            "SELECT hash FROM temp.doomed WHERE hash > ? ORDER BY hash LIMIT ?", (last, _CHUNK_PAYLOADS)
        ).fetchall()
        if not chunk:
            return
        last = chunk[-1][0]
        with run.write() as w:
            run.read_new_lines(w)
            if not run.sweep:
                return
            marks = ",".join("?" * len(chunk))
            hashes = [h for (h,) in chunk]
            found = w.execute(
                f"SELECT hash, size FROM payloads WHERE hash IN ({marks}) AND hash NOT IN temp.keep", hashes
            ).fetchall()
            w.executemany("DELETE FROM payloads WHERE hash = ?", [(h,) for h, _ in found])
            c.payloads_removed += len(found)
            c.payload_bytes_removed += sum(size for _, size in found)
