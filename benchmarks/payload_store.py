"""Payloads in object storage, measured against a real SeaweedFS on 127.0.0.1 in one run.

1. The call path with a large input (~50 KB of retrieved chunks, cut on the span): the local store vs object
   storage (the uploader thread), one process each, as a ratio; plus object storage while it is down (spool).
2. Upload throughput of ``ObjectPayloadStore.put_payloads``: objects/s and MB/s for new objects of 5 KB and 60 KB,
   and for objects that are already stored (one conditional PUT answered 412 each).
3. zstd on realistic LLM payloads (chat messages, system prompt, retrieved chunks of real English text): the bytes
   saved and the cost per payload at levels 1, 3 and 10.

Usage: python benchmarks/payload_store.py [--calls N] [--repeats R] [--objects N] [--json]
Needs the ``weed`` binary: ``$CHRONICLE_TEST_WEED``, ``.venv-seaweedfs/bin/weed`` or next to this Python.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CALL_VARIANTS = ["local_store", "object_store", "object_store_down"]


def corpus() -> list[str]:
    """Paragraphs of real English: the docstrings of standard-library modules and this project's README."""
    import importlib
    import inspect

    texts = [(REPO / "README.md").read_text(encoding="utf-8")]
    for name in (
        "argparse",
        "asyncio.events",
        "collections",
        "email.message",
        "http.client",
        "json",
        "logging",
        "pathlib",
        "subprocess",
        "threading",
        "typing",
        "unittest.case",
        "urllib.request",
        "zipfile",
    ):
        module = importlib.import_module(name)
        for _, obj in inspect.getmembers(module):
            doc = inspect.getdoc(obj)
            if doc and len(doc) > 200:
                texts.append(doc)
    paragraphs = [p.strip() for text in texts for p in text.split("\n\n") if len(p.strip()) > 120]
    return sorted(set(paragraphs))


def llm_payload(rng: random.Random, paragraphs: list[str], size: int) -> dict[str, Any]:
    """A chat request of about ``size`` bytes: system prompt, history, retrieved chunks, question."""
    chunks: list[dict[str, Any]] = []
    total = 0
    while total < size:
        text = rng.choice(paragraphs)
        chunks.append({"id": f"doc-{rng.randrange(10**6)}", "score": round(rng.random(), 4), "text": text})
        total += len(text) + 40
    return {
        "model": "gpt-4.1-mini",
        "temperature": 0.2,
        "messages": [
            {"role": "system", "content": "You are a careful trading assistant. Cite the documents you use."},
            {"role": "user", "content": "Sell $1,000 of MSFT at market."},
            {"role": "assistant", "content": "Checking the filings and your limits first."},
            {"role": "user", "content": json.dumps({"retrieved": chunks})},
        ],
    }


# ------------------------------------------------------------------------------------------------ call path


def run_calls(variant: str, calls: int, repeats: int, env: dict[str, str], url: str) -> dict[str, Any]:
    from opentelemetry.sdk.trace import TracerProvider

    import chronicle_otel as chronicle

    rng = random.Random(7)
    paragraphs = corpus()
    requests = [llm_payload(rng, paragraphs, 50_000) for _ in range(64)]
    os.environ.update(env)
    with tempfile.TemporaryDirectory() as tmp:
        payloads = None
        if variant != "local_store":
            payloads = chronicle.PayloadOptions(url=url, spool=Path(tmp) / "spool", max_backoff=5.0)
        config = chronicle.configure(
            tracer_provider=TracerProvider(), store=Path(tmp) / "store", payloads=payloads, local=True
        )

        @config.boundary(kind="llm", name="llm")
        def llm(request: dict[str, Any], i: int) -> dict[str, Any]:
            return {"text": f"Selling 5 shares of MSFT ({i}).", "usage": {"input_tokens": 12_000}}

        for i in range(200):
            llm(requests[i % 64], i)
        config.force_flush()
        per_call = []
        n = 0
        for _ in range(repeats):
            t0 = time.perf_counter_ns()
            for _ in range(calls):
                request = requests[n % 64]
                request["messages"][1]["content"] = f"Sell $1,000 of MSFT at market. #{n}"  # a new payload each call
                llm(request, n)
                n += 1
            per_call.append((time.perf_counter_ns() - t0) / calls / 1000)
            config.force_flush()
        stats = config.payload_stats()
        config.shutdown()
    return {
        "variant": variant,
        "median_us": statistics.median(per_call),
        "min_us": min(per_call),
        "calls": calls * repeats,
        "stats": None if stats is None else stats.__dict__,
    }


# ------------------------------------------------------------------------------------------------ throughput


def throughput(url: str, env: dict[str, str], objects: int, size: int) -> dict[str, float]:
    import orjson

    from chronicle_otel._internal.digest import payload_digest
    from chronicle_otel.store import ObjectPayloadStore

    rng = random.Random(size)
    paragraphs = corpus()
    payloads = []
    for i in range(objects):
        data = orjson.dumps(llm_payload(rng, paragraphs, size) | {"n": i}, option=orjson.OPT_SORT_KEYS)
        payloads.append((payload_digest(data), data))
    store = ObjectPayloadStore(url, environ=env)
    megabytes = sum(len(d) for _, d in payloads) / 1e6
    t0 = time.perf_counter()
    report = store.put_payloads(payloads)
    new = time.perf_counter() - t0
    assert not report.failed and report.stored == objects, report
    t0 = time.perf_counter()
    again = store.put_payloads(payloads)
    existing = time.perf_counter() - t0
    assert again.existing == objects
    t0 = time.perf_counter()
    got = store.get_payloads([d for d, _ in payloads])
    read = time.perf_counter() - t0
    assert len(got) == objects
    store.close()
    return {
        "size": size,
        "objects": objects,
        "put_objects_per_s": objects / new,
        "put_mb_per_s": megabytes / new,
        "existing_objects_per_s": objects / existing,
        "get_objects_per_s": objects / read,
        "stored_ratio": report.bytes_out / report.bytes_in,
    }


# ------------------------------------------------------------------------------------------------ zstd


def compression(samples: int = 200) -> list[dict[str, float]]:
    import orjson
    import zstandard

    rng = random.Random(3)
    paragraphs = corpus()
    data = [
        orjson.dumps(llm_payload(rng, paragraphs, rng.choice([4_000, 12_000, 50_000])), option=orjson.OPT_SORT_KEYS)
        for _ in range(samples)
    ]
    raw = sum(len(d) for d in data)
    rows = []
    for level in (1, 3, 10):
        compressor = zstandard.ZstdCompressor(level=level)
        t0 = time.perf_counter()
        out = sum(len(compressor.compress(d)) for d in data)
        cost = (time.perf_counter() - t0) / samples * 1e6
        rows.append({"level": level, "saved": 1 - out / raw, "us_per_payload": cost, "mean_kb": raw / samples / 1e3})
    return rows


# ------------------------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--variant", choices=CALL_VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--env", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.variant:
        print(json.dumps(run_calls(args.variant, args.calls, args.repeats, json.loads(args.env), args.url)))
        return 0

    from tests.integration.seaweedfs import find_weed, new_bucket, start_seaweedfs, stop_seaweedfs

    binary = find_weed()
    if binary is None:
        print("payload_store benchmark skipped: no weed binary (make install-services)", file=sys.stderr)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        server = start_seaweedfs(Path(tmp) / "weed", binary=binary)
        try:
            bucket = new_bucket(server, "bench")
            calls: dict[str, Any] = {}
            for variant in CALL_VARIANTS:
                env = dict(bucket.env)
                if variant == "object_store_down":
                    env["AWS_ENDPOINT_URL_S3"] = env["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9"
                out = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--variant",
                        variant,
                        "--calls",
                        str(args.calls),
                        "--repeats",
                        str(args.repeats),
                        "--env",
                        json.dumps(env),
                        "--url",
                        bucket.url,
                    ],
                    check=True,
                    capture_output=True,
                    text=True,
                    cwd=REPO,
                    env={**os.environ, "PYTHONPATH": str(REPO)},
                )
                calls[variant] = json.loads(out.stdout.strip().splitlines()[-1])
            rates = [throughput(new_bucket(server, "tp").url, bucket.env, args.objects, s) for s in (5_000, 60_000)]
        finally:
            stop_seaweedfs(server)
    zstd = compression()
    if args.json:
        print(json.dumps({"calls": calls, "throughput": rates, "zstd": zstd}, indent=2))
        return 0
    base = calls["local_store"]["min_us"]
    print(f"call path, ~50 KB input cut on the span, {args.repeats} x {args.calls} calls, one process per variant")
    print(f"{'variant':20s} {'median us':>10s} {'min us':>8s} {'/ local':>8s}  payloads")
    for variant in CALL_VARIANTS:
        r = calls[variant]
        s = r["stats"]
        note = "-" if s is None else f"uploaded {s['uploaded']}, spooled {s['spooled']}, dropped {s['dropped']}"
        print(f"{variant:20s} {r['median_us']:10.1f} {r['min_us']:8.1f} {r['min_us'] / base:8.2f}  {note}")
    print("\nupload to SeaweedFS on 127.0.0.1 (ObjectPayloadStore.put_payloads, 16 in flight)")
    print(
        f"{'size':>7s} {'objects':>8s} {'put obj/s':>10s} {'put MB/s':>9s} {'412 obj/s':>10s} {'get obj/s':>10s} "
        f"{'stored/raw':>10s}"
    )
    for r in rates:
        print(
            f"{r['size']:7d} {r['objects']:8d} {r['put_objects_per_s']:10.0f} {r['put_mb_per_s']:9.1f} "
            f"{r['existing_objects_per_s']:10.0f} {r['get_objects_per_s']:10.0f} {r['stored_ratio']:10.2f}"
        )
    print("\nzstd on realistic LLM payloads (chat messages with retrieved chunks of English text)")
    for z in zstd:
        print(
            f"level {z['level']:2d}: {z['saved']:.1%} saved, {z['us_per_payload']:.0f} us per payload "
            f"(mean {z['mean_kb']:.0f} KB)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
