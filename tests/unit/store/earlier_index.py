"""Stores indexed the way earlier versions wrote them, made from a store of this version (for upgrade tests)."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from pathlib import Path

from chronicle_otel.store import MANIFEST


def copy_with_index(source: Path, target: Path, schema: str, trace_columns: str, manifest: str | None = None) -> None:
    """``target``: the traces of the store ``source`` with an index of ``schema``.

    ``trace_columns`` are the traces columns both indexes have; ``manifest`` is the format the copy's manifest names
    (default: the source's manifest).
    """
    target.mkdir()
    if manifest is None:
        shutil.copy(source / MANIFEST, target / MANIFEST)
    else:
        (target / MANIFEST).write_text(json.dumps({"format": manifest}) + "\n")
    shutil.copytree(source / "spans", target / "spans")
    with contextlib.closing(sqlite3.connect(target / "index.sqlite3")) as db:
        db.executescript(schema)
        db.execute("ATTACH DATABASE ? AS src", (str(source / "index.sqlite3"),))
        with db:
            db.execute(f"INSERT INTO traces({trace_columns}) SELECT {trace_columns} FROM src.traces ORDER BY ref")
            db.execute("INSERT INTO span_lines SELECT trace_id, segment, offset, length FROM src.span_lines")
            db.execute("INSERT INTO payloads SELECT hash, size, data FROM src.payloads")
        db.execute("DETACH DATABASE src")
