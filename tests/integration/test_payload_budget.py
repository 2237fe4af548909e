"""Reading payloads cut on a trace's spans from a real S3 server (SeaweedFS) stays within one budget per trace.

Whoever can write to the bucket controls what its objects hold: objects planted under the addresses a trace names,
each under the per-object limit, must not add up to gigabytes while a load reads them (and finds they do not hold
the payloads of their addresses). The budget, ``LoadLimits.max_payload_bytes`` (``CHRONICLE_MAX_PAYLOAD_BYTES``), is
lowered here so that a few tens of MB show it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel.errors import LoadLimitError
from chronicle_otel.load import LoadLimits
from chronicle_otel.store import ObjectPayloadStore
from chronicle_otel.store._object import object_key
from tests.integration.conftest import REPO
from tests.integration.seaweedfs import S3Bucket, S3Response, s3_request

pytestmark = pytest.mark.integration

TID = "5b8efff798038103d269b633813fc60c"
MIB = 1 << 20


def _attribute(key: str, value: object) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _trace_file(path: Path, digests: list[str]) -> Path:
    """A trace of one LLM boundary per digest, each output cut on its span (the store holds the whole)."""
    spans = []
    for i, digest in enumerate(digests):
        span: dict[str, Any] = {
            "traceId": TID,
            "spanId": f"{i + 1:016x}",
            "name": "complete",
            "kind": 1,
            "startTimeUnixNano": str(1_700_000_000_000_000_000 + i),
            "endTimeUnixNano": str(1_700_000_000_100_000_000 + i),
            "status": {},
            "attributes": [
                _attribute(sc.BOUNDARY_NAME, "complete"),
                _attribute(sc.BOUNDARY_KIND, "llm"),
                _attribute(sc.CALL_INDEX, i),
                _attribute(sc.CODEC, "chronicle-json/1"),
                _attribute(sc.OUTPUT, '"The deploy of the risk scorer at 14:05'),
                _attribute(sc.OUTPUT_HASH, digest),
                _attribute(sc.OUTPUT_TRUNCATED, True),
            ],
        }
        if i:
            span["parentSpanId"] = "0000000000000001"
        spans.append(span)
    path.write_text(json.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": spans}]}]}))
    return path


def _object(bucket: S3Bucket, digest: str, method: str, body: bytes = b"") -> S3Response:
    """A signed request on the object of ``digest`` (its key: ``object_key``), as anyone with access can make."""
    response = s3_request(bucket.server, method, f"/{bucket.bucket}/{bucket.prefix}/{object_key(digest)}", body=body)
    assert response.status == 200, response
    return response


def _answer(i: int, size: int) -> bytes:
    """A canonical JSON string of ``size`` bytes that zstd barely compresses (hex of a hash chain)."""
    seed = hashlib.sha256(f"answer {i}".encode()).digest()
    blocks = []
    for _ in range(size // 64 + 1):
        seed = hashlib.sha256(seed).digest()
        blocks.append(seed.hex())
    return b'"' + "".join(blocks).encode()[: size - 2] + b'"'


_PEAK = textwrap.dedent(
    """
    import sys
    import obstore.store  # the S3 client is loaded before the baseline: what is measured is the load's reading
    from chronicle_otel import load_trace
    from chronicle_otel.errors import LoadLimitError

    def kib(field):
        return int([line.split()[1] for line in open("/proc/self/status") if line.startswith(field)][0])

    base = kib("VmRSS:")
    try:
        trace = load_trace(sys.argv[1], store=sys.argv[2])
        print("loaded", " ".join(b.raw_output.status for b in trace.boundaries))
    except LoadLimitError as exc:
        print("refused", exc.limit, exc.env_var, str(exc).replace(chr(10), " "))
    print("growth_kib", kib("VmHWM:") - base)
    """
)


def test_objects_planted_under_a_traces_addresses_are_read_within_its_budget(
    s3_bucket: S3Bucket, tmp_path: Path
) -> None:
    # Eight objects of 24 MiB, each under the per-object limit, none holding the payload of its address: 192 MiB.
    planted = os.urandom(24 * MIB)
    digests = ["sha256:" + hashlib.sha256(_answer(i, 64)).hexdigest() for i in range(8)]
    for digest in digests:
        _object(s3_bucket, digest, "PUT", planted)  # whatever it holds
    del planted
    trace = _trace_file(tmp_path / "incident.json", digests)
    budget = 64 * MIB
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CHRONICLE_", "OTEL_"))}
    environ.update(s3_bucket.env, CHRONICLE_MAX_PAYLOAD_BYTES=str(budget), PYTHONPATH=str(REPO))
    command = [sys.executable, "-c", _PEAK, str(trace), s3_bucket.url]
    done = subprocess.run(command, env=environ, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    said = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert said.get("refused", "").startswith("max_payload_bytes CHRONICLE_MAX_PAYLOAD_BYTES"), done.stdout
    assert s3_bucket.url in said["refused"] and TID in said["refused"]
    growth = int(said["growth_kib"]) * 1024
    # Requests in flight count an object's size before its body is read: at most the budget is held (the 8 requests
    # read at once held all 192 MiB before any was found not to be its address, and a copy of each).
    assert growth < budget + 16 * MIB, f"reading the planted objects took {growth // MIB} MiB"


def test_cut_payloads_are_streamed_verified_and_counted_against_the_budget(s3_bucket: S3Bucket, tmp_path: Path) -> None:
    plain, packed = _answer(1, 12 * MIB), _answer(2, 12 * MIB)
    digests = []
    for data, level in ((plain, None), (packed, 3)):
        store = ObjectPayloadStore(s3_bucket.url, environ=s3_bucket.env, compression=level)
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        assert store.put_payload(digest, data)
        store.close()
        digests.append(digest)
    sizes = [int(_object(s3_bucket, digest, "HEAD").headers["content-length"]) for digest in digests]
    assert sizes[0] == len(plain) and sizes[1] < len(packed) * 2 // 3  # stored as it is; a zstd frame
    trace_file = _trace_file(tmp_path / "incident.json", digests)
    reader = ObjectPayloadStore(s3_bucket.url, environ=s3_bucket.env)
    try:
        trace = chronicle.load_trace(trace_file, store=reader, limits=LoadLimits(max_payload_bytes=64 * MIB))
        outputs = [b.raw_output for b in trace.boundaries]
        assert [p.status if p else None for p in outputs] == ["rehydrated", "rehydrated"]
        assert [p.text.encode() if p else None for p in outputs] == [plain, packed]
        # The plain object (12 MiB), the frame (about 7 MiB) and what it inflates to (12 MiB) pass 20 MiB.
        with pytest.raises(LoadLimitError) as refused:
            chronicle.load_trace(trace_file, store=reader, limits=LoadLimits(max_payload_bytes=20 * MIB))
    finally:
        reader.close()
    assert refused.value.limit == "max_payload_bytes" and refused.value.value == 20 * MIB
    assert "CHRONICLE_MAX_PAYLOAD_BYTES" in str(refused.value) and "LoadLimits(max_payload_bytes=" in str(refused.value)
