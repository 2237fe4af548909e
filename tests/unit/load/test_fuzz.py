"""Mutation fuzzing of every trace loader: whatever the bytes, loading and decoding raise only the package's errors.

Valid seed traces are recorded with the package itself (boundaries with typed payloads, an error, a stream, a payload
cut on the span and whole in the store) and written in every supported format. Each case mutates one seed: bytes
(flips, interesting bytes, insertions, deletions, truncation, splicing with another seed) or the JSON inside (any
value replaced by another type, deep nesting, huge numbers, ids swapped to make cycles, payloads rewritten with a
matching hash so the codec decodes them), loads it with ``load_trace`` and reads every boundary's input, output and
error. Anything but success or a :class:`~chronicle_otel.errors.ChronicleError` fails the test.

Environment:
    CHRONICLE_FUZZ_SEED: the seed (default: today's date, so the cases rotate daily).
    CHRONICLE_FUZZ_CASES: how many cases (default 5000).
    CHRONICLE_FUZZ_DIR: where reproducers are written (default: the test's tmp_path).
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import gzip
import json
import os
import random
import shutil
import sqlite3
import struct
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard
from google.protobuf.json_format import MessageToDict, ParseDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from opentelemetry.sdk.trace import ReadableSpan

import chronicle_otel as chronicle
from chronicle_otel.errors import ChronicleError
from chronicle_otel.store import payload_digest
from tests.conftest import make_recorder
from tests.unit.load.test_formats import jaeger_trace, zipkin_v2

SEED = int(os.environ.get("CHRONICLE_FUZZ_SEED") or dt.date.today().strftime("%Y%m%d"))
CASES = int(os.environ.get("CHRONICLE_FUZZ_CASES") or 5000)
_MAX_REPORTED = 12


# ------------------------------------------------------------------ seed traces, recorded by the package


@dataclass(frozen=True)
class Order:
    sku: str
    qty: int
    when: dt.datetime


@chronicle.boundary(kind="llm", name="fz.plan")
def plan(request: str) -> dict[str, Any]:
    return {"order": Order("MSFT", 3, dt.datetime(2024, 5, 1, 12, tzinfo=dt.timezone.utc)), "notes": "ü" * 600}


@chronicle.boundary(kind="tool", name="fz.price")
def price(sku: str, levels: tuple[int, ...]) -> dict[str, Any]:
    return {"sku": sku, "levels": set(levels), "raw": b"\x00\x01", "big": 2**70}


@chronicle.boundary(kind="tool", name="fz.order")
def place(order: Order) -> str:
    raise ValueError(f"rejected {order.sku}")


@chronicle.boundary(kind="retrieval", name="fz.stream")
def stream(n: int) -> Any:
    yield from range(n)


@chronicle.boundary(kind="agent", name="fz.run")
def run(request: str) -> str:
    p = plan(request)
    price(p["order"].sku, (1, 2, 3))
    list(stream(3))
    try:
        return place(p["order"])
    except ValueError:
        return "rejected"


def frame(message: bytes) -> bytes:
    return struct.pack(">I", len(message)) + message


def _phoenix(spans: list[ReadableSpan]) -> dict[str, Any]:
    def iso(ns: int) -> str:
        return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).isoformat()

    return {
        "data": [
            {
                "name": s.name,
                "context": {"trace_id": f"{s.context.trace_id:032x}", "span_id": f"{s.context.span_id:016x}"},
                "parent_id": f"{s.parent.span_id:016x}" if s.parent else None,
                "start_time": iso(s.start_time or 0),
                "end_time": iso(s.end_time or 0),
                "status_code": s.status.status_code.name,
                "status_message": s.status.description or "",
                "attributes": dict(s.attributes or {}),
                "events": [
                    {"name": e.name, "timestamp": iso(e.timestamp), "attributes": dict(e.attributes or {})}
                    for e in s.events
                ],
            }
            for s in spans
        ],
        "next_cursor": None,
    }


@dataclass
class Seeds:
    files: dict[str, bytes]
    store: Path
    trace_id: str


@pytest.fixture
def seeds(tmp_path: Path) -> Seeds:
    rec = make_recorder(tmp_path, capture=chronicle.CaptureOptions(max_attribute_length=512))
    run("Sell MSFT " * 40)
    rec.config.force_flush()
    spans = rec.spans()
    trace_id = f"{spans[0].context.trace_id:032x}"
    lines = b"\n".join(rec.store.iter_lines(trace_id)) + b"\n"
    otlp = MessageToDict(encode_spans(spans))
    traces_data = TracesData()
    traces_data.resource_spans.extend(encode_spans(spans).resource_spans)
    half = len(spans) // 2
    messages = [encode_spans(spans[:half]).SerializeToString(), encode_spans(spans[half:]).SerializeToString()]
    zstd = zstandard.ZstdCompressor()
    files = {
        "otlp-lines": lines,
        "otlp-document": json.dumps(otlp, indent=1).encode(),
        "otlp-list": orjson.dumps([MessageToDict(encode_spans([s])) for s in spans]),
        "otlp-gzip": gzip.compress(lines),
        "otlp-zstd": zstd.compress(lines),
        "collector-proto": b"".join(frame(m) for m in messages),
        "collector-proto-zstd": b"".join(frame(zstd.compress(m)) for m in messages),
        "collector-json-zstd": b"".join(
            frame(zstd.compress(orjson.dumps(MessageToDict(encode_spans([s]))))) for s in spans
        ),
        "jaeger-v1": orjson.dumps({"data": [jaeger_trace(spans)], "total": 0, "limit": 0, "errors": None}),
        "jaeger-v3": orjson.dumps({"result": otlp}),
        "tempo-v1": orjson.dumps({"batches": otlp["resourceSpans"]}),
        "tempo-v2": orjson.dumps({"trace": MessageToDict(traces_data), "status": "complete"}),
        "zipkin-v2": zipkin_v2(spans).encode(),
        "phoenix": orjson.dumps(_phoenix(spans)),
    }
    rec.store.close()
    store = tmp_path / "seed-store"
    shutil.copytree(rec.path, store)
    for name, data in files.items():  # every seed is valid to start with
        path = tmp_path / f"seed-{name}"
        path.write_bytes(data)
        trace = chronicle.load_trace(path, store=store)
        assert len(trace.boundaries) == 5, name
        assert trace.find("fz.plan")[0].output["order"].sku == "MSFT", name
    assert len(chronicle.load_trace(store, trace_id).boundaries) == 5
    return Seeds(files, store, trace_id)


# ------------------------------------------------------------------ mutations

_INTERESTING_BYTES = [b"\x00", b"\xff", b"{", b"}", b"[", b"]", b'"', b"\\", b"\n", b",", b":", b"-", b"0", b"9" * 40,
                      b"\x28\xb5\x2f\xfd", b"\x1f\x8b", b"\xc3", b"\xed\xa0\x80", b"\\ud800", b"1e999"]  # fmt: skip
_KEYS = ["traceId", "spanId", "parentSpanId", "attributes", "key", "value", "intValue", "stringValue", "arrayValue",
         "kvlistValue", "bytesValue", "doubleValue", "boolValue", "values", "events", "links", "status", "code", "kind",
         "startTimeUnixNano", "resourceSpans", "scopeSpans", "spans", "tags", "type", "references", "logs", "processes",
         "annotations", "timestamp", "duration", "context", "trace_id", "span_id", "parent_id", "$type", "class",
         "items", "data", "iso", "b64", "args", "message"]  # fmt: skip


def _evil(rnd: random.Random, holes: dict[str, str]) -> Any:
    choice = rnd.randrange(28)
    simple: list[Any] = [None, True, False, 0, -1, 2**63, 2**64, -(2**63) - 1, 1e308, -0.0, "", "x", "NaN", "Infinity",
                         [], {}, [1], {"a": 1}, "9" * 5000, "-" + "9" * 30, "٣", "\ud800", "\u0000"]  # fmt: skip
    if choice < len(simple):
        return simple[choice]
    depth = rnd.choice([60, 130, 300, 600, 1100, 5000])
    hole = f"@@hole{len(holes)}@@"
    opener, closer = rnd.choice([("[", "]"), ('{"a":', "}"), ('{"arrayValue":{"values":[', "]}}")])
    holes[hole] = opener * depth + ("1" if opener.startswith("{") else "") + closer * depth
    return hole


def _nodes(doc: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) position in a JSON document, found without recursion."""
    out: list[tuple[Any, Any]] = []
    stack = [doc]
    while stack:
        node = stack.pop()
        pairs = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
        for key, child in pairs:
            out.append((node, key))
            if isinstance(child, (dict, list)):
                stack.append(child)
    return out


def _strings(doc: Any) -> list[str]:
    return [c[k] for c, k in _nodes(doc) if isinstance(c[k], str)]


def _replace_string(doc: Any, old: str, new: str) -> None:
    for container, key in _nodes(doc):
        if container[key] == old:
            container[key] = new


def _dumps(doc: Any, holes: dict[str, str]) -> str:
    text = json.dumps(doc, ensure_ascii=False)
    for hole, raw in holes.items():
        text = text.replace(json.dumps(hole), raw)
    return text


def _mutate_tree(doc: Any, rnd: random.Random, holes: dict[str, str], rounds: int) -> Any:
    for _ in range(rounds):
        nodes = _nodes(doc) if isinstance(doc, (dict, list)) else []
        if not nodes:
            return _evil(rnd, holes)
        container, key = rnd.choice(nodes)
        current = container[key]
        op = rnd.randrange(10)
        if op < 4:
            container[key] = _evil(rnd, holes)
        elif op == 4:  # another node of the same document
            other, other_key = rnd.choice(nodes)
            container[key] = json.loads(json.dumps(other[other_key])) if other is not container else other[other_key]
        elif op == 5 and isinstance(container, dict):
            del container[key]
        elif op == 6 and isinstance(current, dict):
            current[rnd.choice(_KEYS)] = _evil(rnd, holes)
        elif op == 7 and isinstance(current, list) and current:
            how = rnd.randrange(3)
            if how == 0:
                current.pop()
            elif how == 1:
                current.append(current[0])
            else:
                rnd.shuffle(current)
        elif op == 8 and isinstance(current, str):
            ids = [s for s in _strings(doc) if len(s) in (16, 32, 12, 24) and s != current]
            if ids:  # another id: parents become cycles, children become roots
                container[key] = rnd.choice(ids)
            else:
                container[key] = current[: rnd.randrange(len(current) + 1)]
        elif op == 9 and isinstance(current, (int, float)) and not isinstance(current, bool):
            container[key] = rnd.choice([current + 1, -current, current * 10**20, str(current), float(current)])
        else:
            container[key] = _evil(rnd, holes)
    return doc


def _mutate_payload(doc: Any, rnd: random.Random, holes: dict[str, str]) -> bool:
    """Rewrite one recorded payload and its digest everywhere, so the loader trusts it and the codec decodes it."""
    strings = _strings(doc)
    known = set(strings)
    payloads = []
    for text in strings:
        if text[:1] in ("{", "[", '"') and len(text) > 2:
            digest = payload_digest(text.encode("utf-8", "surrogatepass"))
            if digest in known:
                payloads.append((text, digest))
    if not payloads:
        return False
    text, digest = rnd.choice(payloads)
    try:
        inner = json.loads(text)
    except ValueError:
        return False
    inner_holes: dict[str, str] = {}
    new_text = _dumps(_mutate_tree(inner, rnd, inner_holes, rnd.randint(1, 3)), inner_holes)
    _replace_string(doc, text, new_text)
    _replace_string(doc, digest, payload_digest(new_text.encode("utf-8", "surrogatepass")))
    return True


def mutate_json(data: bytes, rnd: random.Random) -> bytes:
    """A JSON-aware mutation of one document or of one line of JSON lines."""
    lines = data.split(b"\n")
    candidates = [i for i, line in enumerate(lines) if line.strip()]
    whole = len(candidates) != len(lines) - 1 or len(candidates) == 1
    index = -1 if whole else rnd.choice(candidates)
    try:
        doc = json.loads(data if whole else lines[index])
    except ValueError:
        return mutate_bytes(data, rnd, [])
    holes: dict[str, str] = {}
    if rnd.random() < 0.35 and _mutate_payload(doc, rnd, holes):
        pass
    else:
        doc = _mutate_tree(doc, rnd, holes, rnd.randint(1, 4))
    text = _dumps(doc, holes).encode("utf-8", "surrogatepass")
    if whole:
        return text
    lines[index] = text
    return b"\n".join(lines)


def mutate_bytes(data: bytes, rnd: random.Random, others: list[bytes]) -> bytes:
    out = bytearray(data)
    for _ in range(rnd.randint(1, 4)):
        op = rnd.randrange(7)
        at = rnd.randrange(len(out) + 1)
        if op == 0 and out:
            out[min(at, len(out) - 1)] ^= 1 << rnd.randrange(8)
        elif op == 1:
            token = rnd.choice(_INTERESTING_BYTES)
            out[at : at + len(token)] = token
        elif op == 2:
            out[at:at] = rnd.choice(_INTERESTING_BYTES) if rnd.random() < 0.5 else rnd.randbytes(rnd.randint(1, 8))
        elif op == 3:
            del out[at : at + rnd.randint(1, 64)]
        elif op == 4:
            del out[at:]
        elif op == 5 and out:
            start = rnd.randrange(len(out))
            out[at:at] = out[start : start + rnd.randint(1, 128)]
        elif op == 6 and others:
            other = rnd.choice(others)
            start = rnd.randrange(len(other) + 1)
            out[at:] = other[start:]
    return bytes(out)


def _messages(data: bytes) -> list[bytes]:
    out, offset = [], 0
    while offset + 4 <= len(data):
        (size,) = struct.unpack(">I", data[offset : offset + 4])
        out.append(data[offset + 4 : offset + 4 + size])
        offset += 4 + size
    return out


def _json_message(message: bytes) -> Any:
    request = ExportTraceServiceRequest()
    request.ParseFromString(message)
    return MessageToDict(request)


def mutate_framed(data: bytes, rnd: random.Random, compressed: bool) -> bytes:
    """Mutate one message of the Collector framing as data (protobuf or JSON), keeping the framing valid."""
    zstd = zstandard.ZstdCompressor()
    messages = _messages(data)
    index = rnd.randrange(len(messages))
    body = messages[index]
    if body[:4] == b"\x28\xb5\x2f\xfd":
        body = zstandard.ZstdDecompressor().decompressobj().decompress(body)
    is_json = body[:1] == b"{"
    doc = orjson.loads(body) if is_json else _json_message(body)
    mutated = mutate_json(orjson.dumps(doc), rnd)
    if not is_json and rnd.random() < 0.7:
        with contextlib.suppress(Exception):  # types the mutation broke cannot be protobuf: send it as JSON
            mutated = ParseDict(json.loads(mutated), ExportTraceServiceRequest()).SerializeToString()
    messages[index] = zstd.compress(mutated) if compressed or is_json else mutated
    return b"".join(frame(m) for m in messages)


def mutate_file(name: str, data: bytes, rnd: random.Random, others: list[bytes]) -> bytes:
    roll = rnd.random()
    if name in ("otlp-gzip", "otlp-zstd") and roll < 0.6:  # the content inside the compression
        inner = (
            gzip.decompress(data)
            if name == "otlp-gzip"
            else zstandard.ZstdDecompressor().decompressobj().decompress(data)
        )
        inner = mutate_json(inner, rnd) if rnd.random() < 0.7 else mutate_bytes(inner, rnd, others)
        return gzip.compress(inner) if name == "otlp-gzip" else zstandard.ZstdCompressor().compress(inner)
    if name.startswith("collector-") and roll < 0.6:
        return mutate_framed(data, rnd, compressed=name != "collector-proto")
    if name.startswith(("collector-", "otlp-gzip", "otlp-zstd")) or roll < 0.3:
        return mutate_bytes(data, rnd, others)
    return mutate_json(data, rnd)


def mutate_store(store: Path, trace_id: str, rnd: random.Random, others: list[bytes]) -> None:
    """Tamper with a copy of a local store: a segment's bytes, one stored line as JSON, or the index rows."""
    with contextlib.closing(sqlite3.connect(store / "index.sqlite3")) as db, db:
        rows = db.execute(
            "SELECT rowid, segment, offset, length FROM span_lines WHERE trace_id=?", (trace_id,)
        ).fetchall()
        rowid, segment, offset, length = rnd.choice(rows)
        path = store / segment
        roll = rnd.random()
        if roll < 0.35:
            data = path.read_bytes()
            path.write_bytes(mutate_bytes(data, rnd, others))
        elif roll < 0.9:  # rewrite one line, appended, and point the index at it
            line = path.read_bytes()[offset : offset + length]
            new = mutate_json(line, rnd)
            with open(path, "ab") as handle:
                start = handle.seek(0, os.SEEK_END)
                handle.write(new + b"\n")
            db.execute("UPDATE span_lines SET offset=?, length=? WHERE rowid=?", (start, len(new), rowid))
        else:
            column, bad = rnd.choice(
                [("offset", -1), ("length", 10**9), ("offset", 10**12), ("segment", "../x"), ("length", "x"),
                 ("segment", "/etc/hostname"), ("segment", 5), ("segment", "spans/none.jsonl")]
            )  # fmt: skip
            db.execute(f"UPDATE span_lines SET {column}=? WHERE rowid=?", (bad, rowid))


# ------------------------------------------------------------------ the run


def touch(trace: chronicle.Trace, decoding: collections.Counter[str]) -> None:
    """Decode every payload, as a replay would, counting how each decode ended."""
    for b in trace.boundaries:
        for field in ("input", "output", "error"):
            try:
                getattr(b, field)
            except ChronicleError as exc:
                decoding[type(exc).__name__] += 1
            else:
                decoding["decoded"] += 1


def _one_case(case: int, seeds: Seeds, work: Path) -> tuple[str, Path, Callable[[], Any]]:
    rnd = random.Random(f"{SEED}:{case}")
    names = [*sorted(seeds.files), "store"]
    name = names[case % len(names)]
    others = list(seeds.files.values())
    if name == "store":
        target = work / "store"
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(seeds.store, target)
        mutate_store(target, seeds.trace_id, rnd, others)
        return name, target, lambda: chronicle.load_trace(target, seeds.trace_id)
    path = work / f"case-{name}"
    path.write_bytes(mutate_file(name, seeds.files[name], rnd, others))
    return name, path, lambda: chronicle.load_trace(path, store=seeds.store)


def test_fuzz_every_loader(seeds: Seeds, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    keep = Path(os.environ.get("CHRONICLE_FUZZ_DIR") or tmp_path / "reproducers")
    failures: list[str] = []
    seen: set[str] = set()
    loaded = refused = 0
    outcomes: collections.Counter[tuple[str, str]] = collections.Counter()
    decoding: collections.Counter[str] = collections.Counter()
    slowest = (0.0, -1, "")
    for case in range(CASES):
        name, path, load = _one_case(case, seeds, work)
        started = time.perf_counter()
        try:
            trace = load()
            touch(trace, decoding)
            loaded += 1
            outcomes[name, "loaded"] += 1
        except ChronicleError as exc:
            refused += 1
            outcomes[name, type(exc).__name__] += 1
        except Exception as exc:
            where = traceback.extract_tb(exc.__traceback__)[-1]
            signature = f"{type(exc).__name__} at {Path(where.filename).name}:{where.lineno}"
            if signature in seen:
                continue
            seen.add(signature)
            keep.mkdir(parents=True, exist_ok=True)
            reproducer = keep / f"seed-{SEED}-case-{case}-{name}"
            if path.is_dir():
                shutil.copytree(path, reproducer, dirs_exist_ok=True)
            else:
                shutil.copyfile(path, reproducer)
            tail = "".join(traceback.format_exception(exc)[-3:])
            failures.append(f"case {case} ({name}): {signature}; reproducer {reproducer}\n{tail}")
            if len(failures) >= _MAX_REPORTED:
                break
        finally:
            slowest = max(slowest, (time.perf_counter() - started, case, name))
    print(f"fuzz seed {SEED}: {CASES} cases, {loaded} loaded, {refused} refused")  # shown with -s
    for (name, outcome), count in sorted(outcomes.items()):
        print(f"  {name:22} {outcome:20} {count}")
    print(f"  payload decoding: {dict(decoding)}")
    print(f"  slowest case: {slowest[1]} ({slowest[2]}), {slowest[0]:.3f} s")  # reported, never asserted
    assert not failures, (
        f"CHRONICLE_FUZZ_SEED={SEED} CHRONICLE_FUZZ_CASES={CASES}: {len(failures)} distinct crashes "
        f"(load_trace(reproducer) raises them):\n" + "\n".join(failures)
    )
    assert loaded + refused == CASES
    assert refused > 0 and loaded > 0  # the mutations reach both outcomes


def test_the_mutators_keep_seeds_recognisable(seeds: Seeds) -> None:
    """A JSON-aware mutation of a payload keeps its digest consistent, so the codec really decodes mutated data."""
    rnd = random.Random(SEED)
    doc = orjson.loads(seeds.files["otlp-lines"].split(b"\n")[0])
    holes: dict[str, str] = {}
    before = set(_strings(doc))
    assert _mutate_payload(doc, rnd, holes)
    after = _dumps(doc, holes)
    changed = [s for s in _strings(json.loads(after)) if s not in before]
    assert any(s.startswith("sha256:") for s in changed)
