"""A loaded trace written back out: a portable OTLP/JSON file with its whole payloads inlined."""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Any

import orjson

from .. import semconv
from .._api import publish
from .._internal.gc_pause import gc_paused
from ..model import Trace


def write_trace(trace: Trace, path: str | os.PathLike[str]) -> Path:
    """Write a portable, self-contained OTLP/JSON file of ``trace`` (payloads inlined).

    The file holds one ``ExportTraceServiceRequest`` per line, like the Collector's ``file`` exporter; truncated
    payload attributes are replaced by the whole payloads, so the file replays without a payload store. It is
    written beside its place and then renamed into it, so a reader never sees half a file; its folder is created if
    need be. Linear in the size of the trace.

    Example::

        from chronicle_otel import load_trace, write_trace

        trace = load_trace(".chronicle", "latest-failed")
        write_trace(trace, "tests/traces/incident-42.jsonl")  # commit it; replay it in a test

    Args:
        trace: the trace, as :func:`load_trace` returns it.
        path: the file to write; a ``.gz`` suffix writes gzip.

    Returns:
        The path written, as a :class:`~pathlib.Path`.

    Raises:
        OSError: the file cannot be written.
    """
    from ..otlp import spans_to_request  # the encoder imports the OpenTelemetry SDK: loading alone does not need it

    whole: dict[str, dict[str, Any]] = {}  # span id -> its attributes with the whole payloads back in
    with gc_paused():  # one object per attribute of every span, and no cycles
        for b in trace.boundaries:
            for keys, payload in zip(semconv.PAYLOAD_KEYS, (b.raw_input, b.raw_output, b.raw_error)):  # noqa: B905
                if payload is None or not payload.complete:
                    continue
                attrs = whole.get(b.span_id)
                current = attrs if attrs is not None else b.span.attributes
                if current.get(keys.text) == payload.text and keys.truncated not in current:
                    continue  # the span holds it whole already
                if attrs is None:
                    attrs = whole[b.span_id] = dict(b.span.attributes)
                attrs[keys.text] = payload.text
                attrs.pop(keys.truncated, None)
        data = orjson.dumps(spans_to_request(trace.spans, whole)) + b"\n"
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_bytes(gzip.compress(data, compresslevel=6) if target.suffix == ".gz" else data)
    os.replace(tmp, target)
    return target


publish(__name__, globals())
