"""Where the ``chronicle`` command reads traces: the store (``--store``, ``$CHRONICLE_HOME``, ``./.chronicle``) or a
trace file (``--file``), the payload stores behind them, and trace ids as typed (a unique prefix is enough)."""

from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path

from .._internal import trace_ids
from ..environment_variables import CHRONICLE_HOME, CHRONICLE_PAYLOADS
from ..errors import ChronicleError, TraceNotFoundError
from ..load import load_trace
from ..model import Trace
from ..store.payloads import PayloadSource, open_payload_store
from ..store.reader import StoreReader, default_store_path, is_store

LATEST = ("latest", "latest-failed", "latest-error")

PAYLOADS_HELP = (
    "payload store for payloads cut on spans: s3://bucket/prefix (endpoint and credentials from the AWS_* "
    "variables) or a store directory (default $CHRONICLE_PAYLOADS)"
)


def store_path(args: argparse.Namespace) -> Path:
    """The store ``--store`` names, else ``$CHRONICLE_HOME``, else ``./.chronicle``."""
    return Path(args.store) if getattr(args, "store", None) else default_store_path()


def store(args: argparse.Namespace, opened: contextlib.ExitStack) -> StoreReader:
    """The store ``--store`` names (default ``$CHRONICLE_HOME`` or ./.chronicle), closed with ``opened``.

    Raises:
        ChronicleError: ``--store`` names a directory that holds no store (never a silent fall back to the default).
    """
    check_named_store(args)
    reader = StoreReader(store_path(args))
    opened.callback(reader.close)
    return reader


def check_named_store(args: argparse.Namespace) -> None:
    """Raise unless ``--store``, when given, names a store: a store named is never ignored.

    Raises:
        ChronicleError: saying where it was looked for.
    """
    named = getattr(args, "store", None)
    if named and not is_store(named):
        raise ChronicleError(missing_store(Path(named), named=True))


def existing_store(args: argparse.Namespace, opened: contextlib.ExitStack) -> StoreReader:
    """:func:`store`, when there is a store there.

    Raises:
        ChronicleError: there is none; the message says where it was looked for and how one is made.
    """
    path = store_path(args)
    if not is_store(path):
        raise ChronicleError(missing_store(path, named=bool(getattr(args, "store", None))))
    return store(args, opened)


def missing_store(path: Path, *, named: bool) -> str:
    """Why there is no store at ``path``, and how to get one."""
    where = str(path.absolute())
    if named:
        return f"no chronicle store at {where} (--store): name the directory that holds chronicle-store.json"
    origin = f"$CHRONICLE_HOME={os.environ[CHRONICLE_HOME]}" if os.environ.get(CHRONICLE_HOME) else "./.chronicle"
    return (
        f"no chronicle store at {where} ({origin}): nothing was recorded here. An application records once it calls "
        "chronicle_otel.configure(), into $CHRONICLE_HOME or ./.chronicle of the directory it runs in: run chronicle "
        "there, or name the store with --store DIR or CHRONICLE_HOME=DIR"
    )


def empty_store(path: Path) -> str:
    """What an empty store means."""
    return (
        f"the store at {path.absolute()} has no traces yet: a recorded run is stored once its spans end and are "
        "flushed (at the latest when the process exits)"
    )


def resolve_id(reader: StoreReader, text: str) -> str:
    """The whole trace id ``text`` names in ``reader``: 32 hex digits, a unique prefix, or ``latest``/
    ``latest-failed``/``latest-error`` (returned as they are: loading picks the trace).

    Raises:
        ChronicleError: ``text`` is not a trace id; the store is empty.
        TraceNotFoundError: no trace has that id or prefix.
        TraceLoadError: the prefix is ambiguous (the candidates are listed).
    """
    wanted = text.strip().lower()
    if wanted in LATEST:
        if not reader.list_traces(limit=1, include_replays=True):
            raise ChronicleError(empty_store(reader.path))
        return wanted
    check_id(text)
    if trace_ids.is_full(wanted):
        return wanted
    found = reader.list_traces(id_prefix=wanted, include_replays=True, limit=11)
    if not found:
        if not reader.list_traces(limit=1, include_replays=True):
            raise ChronicleError(empty_store(reader.path))
        recent = [t.trace_id for t in reader.list_traces(limit=10)]
        raise TraceNotFoundError(text.strip(), source=reader.path, candidates=recent)
    return trace_ids.pick(wanted, [t.trace_id for t in found], source=reader.path, more=len(found) > 10)


def check_id(text: str, *, extra: tuple[str, ...] = ()) -> None:
    """Raise unless ``text`` is a trace id, a prefix of one, or one of :data:`LATEST` and ``extra``.

    Raises:
        ChronicleError: saying which forms are accepted.
    """
    wanted = text.strip().lower()
    if wanted in LATEST or wanted in extra or trace_ids.is_full(wanted) or trace_ids.is_prefix(wanted):
        return
    shown = text if len(text) <= 60 else text[:59] + "…"
    raise ChronicleError(f"{shown!r} is not a trace id: give {trace_ids.FORMS}")


def payloads(args: argparse.Namespace, opened: contextlib.ExitStack) -> list[str | StoreReader]:
    """The payload stores to ask, in order: ``--payloads`` (else ``$CHRONICLE_PAYLOADS``), then the local store."""
    chain: list[str | StoreReader] = []
    url = getattr(args, "payloads", None) or os.environ.get(CHRONICLE_PAYLOADS, "").strip()
    if url and url != "local":
        chain.append(url)
    local = store(args, opened)
    if is_store(local.path):
        chain.append(local)
    return chain


def open_payloads(spec: str, opened: contextlib.ExitStack) -> PayloadSource:
    """The payload store ``spec`` names, closed with ``opened``."""
    named = open_payload_store(spec)
    close = getattr(named, "close", None)
    if callable(close):
        opened.callback(close)
    return named


def load(args: argparse.Namespace, trace_id: str | None = None, file: str | None = None) -> Trace:
    """The trace ``trace_id`` (default ``args.trace_id``) from ``file`` (default ``--file``) or the store.

    Raises:
        ChronicleError: as :func:`resolve_id`, or from loading.
    """
    tid = args.trace_id if trace_id is None else trace_id
    source = file if file is not None else getattr(args, "file", None)
    with contextlib.ExitStack() as opened:
        if source:
            check_id(tid, extra=("-",))
            wanted = None if tid.strip().lower() in (*LATEST, "-") else tid
            return load_trace(source, wanted, store=payloads(args, opened))
        reader = existing_store(args, opened)
        resolved = resolve_id(reader, tid)
        return load_trace(reader, resolved, store=payloads(args, opened))


def replays_of(args: argparse.Namespace, trace_id: str) -> list[str]:
    """The ids of the replays of ``trace_id`` recorded into the store, newest first (none without a store)."""
    with contextlib.ExitStack() as opened:
        reader = store(args, opened)
        if not is_store(reader.path):
            return []
        return [t.trace_id for t in reader.list_traces(replay_of=trace_id, limit=10)]
