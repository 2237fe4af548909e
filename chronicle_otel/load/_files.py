"""Read trace data from bytes in any supported format: detect compression, framing and model.

Trace files are untrusted. Compressed data is inflated in bounded steps, and inflating stops at the first
bound of :class:`~chronicle_otel.load.LoadLimits` crossed (total size, or ratio once past 1 MiB), counted over
the whole file: whole-file compression and zstd-compressed messages alike. A plain file larger than the size
bound is refused before it is read.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import struct
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeAlias

import orjson

from ..errors import LoadLimitError, TraceLoadError
from ..model import SpanRecord
from ..otlp import is_otlp, spans_of_request
from . import _jaeger, _phoenix, _zipkin
from ._limits import ENV_VARS, MIB, LoadLimits

_GZIP = b"\x1f\x8b"
_ZSTD = b"\x28\xb5\x2f\xfd"
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # gzip header and trailer (CRC, length) checked by zlib
_READ_CHUNK = 64 * 1024
"""Compressed bytes read from a file at a time."""
_GZIP_STEP = MIB
"""Most bytes one inflate step may produce."""
_ZSTD_FEED = 1024
"""Compressed bytes given to zstd per step: a 4-byte block inflates to at most 128 KiB, so at most 32 MiB out."""
_RATIO_FLOOR = MIB
_NON_SPACE = re.compile(rb"\S")
_NOT_PARSED: Any = object()

Buffer: TypeAlias = "bytes | bytearray | memoryview"
"""Bytes of trace data: read, inflated or a view of one message."""

SUPPORTED_FORMATS = (
    "OTLP/JSON: one ExportTraceServiceRequest per line (Collector file exporter, format json) or one document",
    "OTLP protobuf: 4-byte big-endian length-prefixed ExportTraceServiceRequest/TracesData messages "
    "(Collector file exporter, format proto), each optionally zstd-compressed",
    "OTLP/JSON messages length-prefixed and zstd-compressed (Collector file exporter, format json + compression zstd)",
    "Jaeger v1 JSON (query API /api/traces/{id}, UI download)",
    "Jaeger v3 API JSON ({'result': OTLP})",
    "Grafana Tempo JSON (v1 /api/traces/{id} 'batches', v2 /api/v2/traces/{id} 'trace')",
    "Zipkin v2 JSON (/api/v2/trace/{id})",
    "Phoenix REST spans JSON (/v1/projects/{p}/spans)",
    "any of the above gzip- or zstd-compressed as a whole",
)


def _unsupported(source: object, why: str, line: int | None = None) -> TraceLoadError:
    listing = "; ".join(SUPPORTED_FORMATS)
    return TraceLoadError(f"unrecognised trace format ({why}); supported: {listing}", source=source, line=line)


class _Budget:
    """What reading one source may inflate: counts every decompressed byte against the limits."""

    __slots__ = ("compressed", "inflated", "limits", "source")

    def __init__(self, limits: LoadLimits, source: object) -> None:
        self.limits = limits
        self.source = source
        self.inflated = 0
        self.compressed = 0

    def whole(self, size: int) -> None:
        """Refuse plain data larger than the size bound before it is parsed."""
        bound = self.limits.max_decompressed_bytes
        if size > bound:
            raise LoadLimitError(
                f"the trace data is {size} bytes, more than max_decompressed_bytes",
                limit="max_decompressed_bytes",
                value=bound,
                env_var=ENV_VARS["max_decompressed_bytes"],
                source=self.source,
            )

    def add(self, produced: int, consumed: int) -> None:
        """Count one inflate step; raise as soon as a bound is crossed."""
        self.inflated += produced
        self.compressed += consumed
        bound = self.limits.max_decompressed_bytes
        if self.inflated > bound:
            raise LoadLimitError(
                f"compressed data inflates to more than {bound} bytes (stopped after {self.compressed} compressed "
                "bytes)",
                limit="max_decompressed_bytes",
                value=bound,
                env_var=ENV_VARS["max_decompressed_bytes"],
                source=self.source,
            )
        ratio = self.limits.max_compression_ratio
        if self.inflated > _RATIO_FLOOR and self.inflated > ratio * self.compressed:
            raise LoadLimitError(
                f"compressed data inflates more than {ratio:g} times ({self.inflated} bytes from "
                f"{self.compressed}); a decompression bomb?",
                limit="max_compression_ratio",
                value=ratio,
                env_var=ENV_VARS["max_compression_ratio"],
                source=self.source,
            )


def _gunzip(chunks: Iterable[Buffer], budget: _Budget) -> bytearray:
    """Inflate gzip data (one or more members, zero padding between them) in bounded steps."""
    out = bytearray()  # grows in place: no second copy of the inflated data
    member: Any = None
    try:
        for chunk in chunks:
            pending = bytes(chunk)
            while True:
                if member is None:
                    pending = pending.lstrip(b"\0")
                    if not pending:
                        break
                    member = zlib.decompressobj(_GZIP_WBITS)
                piece = member.decompress(pending, _GZIP_STEP)
                rest = member.unused_data if member.eof else member.unconsumed_tail
                budget.add(len(piece), len(pending) - len(rest))
                out += piece
                pending = rest
                if member.eof:
                    member = None
                elif not pending and len(piece) < _GZIP_STEP:
                    break
    except zlib.error as exc:
        raise TraceLoadError(f"corrupt gzip data ({exc})", source=budget.source) from None
    if member is not None:
        raise TraceLoadError("truncated gzip data: the file ends inside a member", source=budget.source)
    return out


def _zstandard(source: object) -> Any:
    try:
        import zstandard
    except ImportError:
        raise TraceLoadError(
            "zstd-compressed data needs the zstandard package: pip install 'chronicle-otel[zstd]'", source=source
        ) from None
    return zstandard


def _unzstd(chunks: Iterable[Buffer], budget: _Budget) -> bytearray:
    """Inflate zstd data (one or more frames) a little input at a time, so each step's output stays bounded."""
    zstandard = _zstandard(budget.source)
    context = zstandard.ZstdDecompressor()
    out = bytearray()
    frame: Any = None
    try:
        for chunk in chunks:
            view = memoryview(chunk)
            for start in range(0, len(view), _ZSTD_FEED):
                pending: Buffer = view[start : start + _ZSTD_FEED]
                while pending:
                    if frame is None:
                        frame = context.decompressobj()
                    piece = frame.decompress(pending)
                    rest = b""
                    if frame.eof:
                        rest = frame.unused_data
                        frame = None
                    budget.add(len(piece), len(memoryview(pending)) - len(rest))
                    out += piece
                    pending = rest
    except zstandard.ZstdError as exc:
        raise TraceLoadError(f"corrupt zstd data ({exc})", source=budget.source) from None
    if frame is not None:
        raise TraceLoadError("truncated zstd data: the file ends inside a frame", source=budget.source)
    return out


def _file_chunks(handle: Any, head: bytes) -> Iterator[Buffer]:
    if head:
        yield head
    while chunk := handle.read(_READ_CHUNK):
        yield chunk


def _slices(data: Buffer) -> Iterator[Buffer]:
    view = memoryview(data)
    for start in range(0, len(view), _READ_CHUNK):
        yield view[start : start + _READ_CHUNK]


_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


def _open(path: Path) -> io.BufferedReader:
    """``path`` opened for reading. Opened without blocking, then read blocking: opening a named pipe nobody writes
    to would otherwise wait forever (reading it then finds its end), while a pipe with a writer (``<(zcat …)``)
    is read as usual."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        if _OPEN_FLAGS & getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read_file(path: Path, budget: _Budget) -> bytes | bytearray:
    try:
        with _open(path) as handle:
            head = handle.read(4)
            if head[:2] == _GZIP:
                return _gunzip(_file_chunks(handle, head), budget)
            if head == _ZSTD:
                return _unzstd(_file_chunks(handle, head), budget)
            bound = budget.limits.max_decompressed_bytes
            budget.whole(_size(handle))
            if handle.seekable():
                handle.seek(0)
                data = handle.read(bound + 1)  # the file may grow after the size check
            else:
                data = head + handle.read(bound + 1 - len(head))
            budget.whole(len(data))
            return data
    except OSError as exc:
        raise TraceLoadError(f"cannot read ({exc.strerror or exc})", source=path) from None


def _size(handle: Any) -> int:
    return os.fstat(handle.fileno()).st_size


def read_path(path: Path, *, limits: LoadLimits | None = None) -> Iterator[SpanRecord]:
    """Every span in a trace file of any supported format.

    Args:
        path: the file.
        limits: bounds on what reading it may inflate; by default :meth:`LoadLimits.from_env`.

    Raises:
        LoadLimitError: the file is larger, or inflates to more, than ``limits`` allow.
        TraceLoadError: the file cannot be read or is not trace data.
    """
    budget = _Budget(limits or LoadLimits.from_env(), path)
    data = _read_file(path, budget)
    yield from _parse(data, path, budget)


def read_bytes(data: bytes, source: object, *, limits: LoadLimits | None = None) -> Iterator[SpanRecord]:
    """Every span in ``data``: compression, framing and model are detected.

    Raises:
        LoadLimitError: ``data`` is larger, or inflates to more, than ``limits`` allow.
        TraceLoadError: ``data`` is not trace data.
    """
    budget = _Budget(limits or LoadLimits.from_env(), source)
    inflated: bytes | bytearray = data
    if data[:2] == _GZIP:
        inflated = _gunzip(_slices(data), budget)
    elif data[:4] == _ZSTD:
        inflated = _unzstd(_slices(data), budget)
    else:
        budget.whole(len(data))
    yield from _parse(inflated, source, budget)


def _parse(data: bytes | bytearray, source: object, budget: _Budget) -> Iterator[SpanRecord]:
    first = _NON_SPACE.search(data)
    if first is None:
        raise TraceLoadError("empty file", source=source, expected="trace data")
    if data[first.start() : first.start() + 1] in (b"{", b"["):
        yield from _json(data, source)
        return
    yield from _framed(data, source, budget)


def spans_of_document(doc: Any, source: object, line: int | None = None) -> Iterator[SpanRecord]:
    """The spans of one parsed JSON document, whatever model it follows.

    Raises:
        TraceLoadError: the document follows no supported model, or a field has the wrong type or range.
    """
    if isinstance(doc, dict):
        if "result" in doc and isinstance(doc["result"], dict):  # Jaeger v3 API
            doc = doc["result"]
        elif "trace" in doc and isinstance(doc["trace"], dict):  # Tempo v2
            doc = doc["trace"]
    if _phoenix.is_phoenix(doc):
        yield from _phoenix.spans(doc, source=source, line=line)
    elif _jaeger.is_jaeger(doc):
        yield from _jaeger.spans(doc, source=source, line=line)
    elif _zipkin.is_zipkin(doc):
        yield from _zipkin.spans(doc, source=source, line=line)
    elif isinstance(doc, list) and all(is_otlp(item) for item in doc):
        for item in doc:
            yield from spans_of_request(item, source=source, line=line)
    elif is_otlp(doc):
        yield from spans_of_request(doc, source=source, line=line)
    else:
        keys = ", ".join(sorted(str(k)[:40] for k in doc)[:8]) if isinstance(doc, dict) else type(doc).__name__
        raise _unsupported(source, f"a JSON document with {keys or 'nothing'}", line)


def _json(data: bytes | bytearray, source: object) -> Iterator[SpanRecord]:
    first: Any = _NOT_PARSED
    end = data.find(b"\n")
    if end >= 0 and _NON_SPACE.search(data, end):
        # Several lines: one document per line, unless the first line alone is no document (indented JSON). Parsing
        # the first line alone, not the whole file, is what tells them apart without reading a large file twice.
        with contextlib.suppress(orjson.JSONDecodeError):
            first = orjson.loads(memoryview(data)[:end])
    if first is _NOT_PARSED:
        try:
            whole = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
        else:
            yield from spans_of_document(whole, source, 1)
            return
    # One document per line. Lines are views of ``data``: a file of a few large lines is not copied line by line.
    view = memoryview(data)
    size = len(data)
    start, number = 0, 0
    while True:
        stop = data.find(b"\n", start)
        if stop < 0:
            stop = size
        number += 1
        if _NON_SPACE.search(data, start, stop) is not None:  # blank lines are skipped
            if first is not _NOT_PARSED:
                doc, first = first, _NOT_PARSED
            else:
                try:
                    doc = orjson.loads(view[start:stop])
                except orjson.JSONDecodeError as exc:
                    raise _not_a_line(data, start, stop, number, exc, source) from None
            yield from spans_of_document(doc, source, number)
        if stop == size:
            return
        start = stop + 1


def _not_a_line(
    data: bytes | bytearray, start: int, stop: int, number: int, exc: orjson.JSONDecodeError, source: object
) -> TraceLoadError:
    """The error for line ``number`` (``data[start:stop]``), which is not JSON: the last line of a file cut short
    while it was written says so."""
    last = _NON_SPACE.search(data, stop) is None  # nothing but blanks after it
    if last and not data.endswith(b"\n") and exc.pos >= len(bytes(data[start:stop]).rstrip()):
        return TraceLoadError(
            f"the last line ends mid-record ({exc}); the file is truncated",
            source=source,
            line=number,
            expected="one complete JSON document per line",
        )
    return TraceLoadError(f"not JSON ({exc})", source=source, line=number, expected="one OTLP/JSON request per line")


def _framed(data: Buffer, source: object, budget: _Budget) -> Iterator[SpanRecord]:
    """The Collector file exporter's framing: a 4-byte big-endian size, then the (maybe zstd) message."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    data = memoryview(data)  # messages are views: no copy of the file per message
    offset, number = 0, 0
    while offset < len(data):
        number += 1
        if offset + 4 > len(data):
            raise TraceLoadError(
                f"{len(data) - offset} stray bytes after message {number - 1}; the file is truncated", source=source
            )
        (size,) = struct.unpack(">I", data[offset : offset + 4])
        body = data[offset + 4 : offset + 4 + size]
        if len(body) != size:
            if number == 1:
                raise _unsupported(source, "neither JSON nor length-prefixed messages")
            raise TraceLoadError(
                f"message {number} at byte {offset} announces {size} bytes but only {len(body)} remain; "
                "the file is truncated",
                source=source,
            )
        offset += 4 + size
        if body[:4] == _ZSTD:
            body = memoryview(_unzstd([body], budget))
        where = f"{source} (message {number})"
        first = _NON_SPACE.search(body)
        if first is not None and bytes(body[first.start() : first.start() + 1]) == b"{":
            try:
                doc = orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                raise TraceLoadError(f"message {number} is not JSON ({exc})", source=source) from None
            yield from spans_of_request(doc, source=where)
            continue
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except DecodeError as exc:
            if number == 1:
                raise _unsupported(source, f"not protobuf either: {exc}") from None
            raise TraceLoadError(f"message {number} is not an OTLP protobuf message ({exc})", source=source) from None
        yield from spans_of_request(_proto_to_dict(request), source=where)


def _proto_to_dict(message: Any) -> dict[str, Any]:
    from google.protobuf.json_format import MessageToDict

    out: dict[str, Any] = MessageToDict(message)  # camelCase, base64 ids, int64 strings, enum names: all parsed
    return out
