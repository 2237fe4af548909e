"""Read trace data from bytes in any supported format: detect compression, framing and model."""

from __future__ import annotations

import gzip
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ..errors import TraceLoadError
from ..replay import SpanRecord
from . import _jaeger, _phoenix, _zipkin
from ._otlp import is_otlp, spans_of_request

_GZIP = b"\x1f\x8b"
_ZSTD = b"\x28\xb5\x2f\xfd"

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


def _zstd(data: bytes, source: object) -> bytes:
    try:
        import zstandard
    except ImportError:
        raise TraceLoadError(
            "zstd-compressed data needs the zstandard package: pip install 'chronicle-otel[zstd]'", source=source
        ) from None
    try:
        return zstandard.ZstdDecompressor().decompressobj().decompress(data) if data else b""
    except zstandard.ZstdError as exc:
        raise TraceLoadError(f"corrupt or truncated zstd data ({exc})", source=source) from None


def read_path(path: Path) -> Iterator[SpanRecord]:
    """Every span in a trace file of any supported format."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceLoadError(f"cannot read ({exc.strerror})", source=path) from None
    yield from read_bytes(data, path)


def read_bytes(data: bytes, source: object) -> Iterator[SpanRecord]:
    """Every span in ``data``: compression, framing and model are detected."""
    if data[:2] == _GZIP:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise TraceLoadError(f"corrupt or truncated gzip ({exc})", source=source) from None
    elif data[:4] == _ZSTD:
        data = _zstd(data, source)
    if not data.strip():
        raise TraceLoadError("empty file", source=source, expected="trace data")
    if data.lstrip()[:1] in (b"{", b"["):
        yield from _json(data, source)
        return
    yield from _framed(data, source)


def spans_of_document(doc: Any, source: object, line: int | None = None) -> Iterator[SpanRecord]:
    """The spans of one parsed JSON document, whatever model it follows."""
    if isinstance(doc, dict):
        if "result" in doc and isinstance(doc["result"], dict):  # Jaeger v3 API
            doc = doc["result"]
        elif "trace" in doc and isinstance(doc["trace"], dict):  # Tempo v2
            doc = doc["trace"]
    if _phoenix.is_phoenix(doc):
        yield from _phoenix.spans(doc, source=f"{source}:{line}" if line else source)
    elif _jaeger.is_jaeger(doc):
        yield from _jaeger.spans(doc, source=f"{source}:{line}" if line else source)
    elif _zipkin.is_zipkin(doc):
        yield from _zipkin.spans(doc, source=f"{source}:{line}" if line else source)
    elif isinstance(doc, list) and all(is_otlp(item) for item in doc):
        for item in doc:
            yield from spans_of_request(item, source=source, line=line)
    elif is_otlp(doc):
        yield from spans_of_request(doc, source=source, line=line)
    else:
        keys = ", ".join(sorted(map(str, doc))[:8]) if isinstance(doc, dict) else type(doc).__name__
        raise _unsupported(source, f"a JSON document with {keys or 'nothing'}", line)


def _json(data: bytes, source: object) -> Iterator[SpanRecord]:
    try:
        whole = orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    else:
        yield from spans_of_document(whole, source, 1)
        return
    lines = data.split(b"\n")
    last = max(i for i, line in enumerate(lines) if line.strip())
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            if number - 1 == last and not data.endswith(b"\n"):
                raise TraceLoadError(
                    f"the last line ends mid-record ({exc}); the file is truncated",
                    source=source,
                    line=number,
                    expected="one complete JSON document per line",
                ) from None
            raise TraceLoadError(
                f"not JSON ({exc})", source=source, line=number, expected="one OTLP/JSON request per line"
            ) from None
        yield from spans_of_document(doc, source, number)


def _framed(data: bytes, source: object) -> Iterator[SpanRecord]:
    """The Collector file exporter's framing: a 4-byte big-endian size, then the (maybe zstd) message."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

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
            body = _zstd(body, source)
        where = f"{source} (message {number})"
        if body.lstrip()[:1] == b"{":
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
