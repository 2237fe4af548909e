"""The SeaweedFS launcher against a real server: credentials enforced, S3 semantics, loopback only, stop and restart."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import obstore
import pytest
from obstore.store import S3Store

from tests.integration.conftest import WEED_BINARY, _service_missing
from tests.integration.seaweedfs import (
    DEAD_LOOPBACK,
    S3Bucket,
    SeaweedFS,
    env,
    list_keys,
    new_bucket,
    restart_seaweedfs,
    s3_request,
    start_seaweedfs,
    stop_seaweedfs,
)

pytestmark = pytest.mark.integration


def store_for(bucket: S3Bucket) -> S3Store:
    """An obstore client of the bucket's prefix, configured explicitly from the bucket's variables."""
    variables = bucket.env
    return S3Store(
        bucket.bucket,
        prefix=bucket.prefix,
        endpoint=variables["AWS_ENDPOINT_URL_S3"],
        access_key_id=variables["AWS_ACCESS_KEY_ID"],
        secret_access_key=variables["AWS_SECRET_ACCESS_KEY"],
        region=variables["AWS_REGION"],
        client_options={"allow_http": True},
    )


def listening_sockets(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket process ``pid`` listens on, read from /proc (IPv4 and IPv6)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            columns = line.split()
            local, state, inode = columns[1], columns[3], columns[9]
            if state != "0A" or inode not in inodes:  # 0A: LISTEN
                continue
            address, port = local.split(":")
            if width == 8:
                host = socket.inet_ntoa(bytes.fromhex(address)[::-1])
            else:
                host = socket.inet_ntop(
                    socket.AF_INET6, b"".join(bytes.fromhex(address[i : i + 8])[::-1] for i in range(0, 32, 8))
                )
            found.add((host, int(port, 16)))
    return found


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise
    return True


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[SeaweedFS]:
    """A server of the test's own (for stopping and restarting), stopped by PID at the end."""
    if WEED_BINARY is None or not WEED_BINARY.is_file():
        _service_missing("SeaweedFS binary `weed` not found")
    assert WEED_BINARY is not None
    server = start_seaweedfs(tmp_path / "weed", binary=WEED_BINARY)
    try:
        yield server
    finally:
        stop_seaweedfs(server)


# ------------------------------------------------------------------------------ the session server


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_listens_on_its_chosen_ports_on_loopback_only(seaweedfs: SeaweedFS) -> None:
    assert listening_sockets(seaweedfs.pid) == {("127.0.0.1", port) for port in seaweedfs.ports.all()}
    assert seaweedfs.endpoint == f"http://127.0.0.1:{seaweedfs.ports.s3}"


def test_unsigned_write_is_refused(s3_bucket: S3Bucket) -> None:
    response = s3_request(s3_bucket.server, "PUT", f"/{s3_bucket.bucket}/chronicle/k", body=b"x", signed=False)
    assert response.status == 403
    assert b"<Code>AccessDenied</Code>" in response.body
    assert s3_bucket.keys() == []


@pytest.mark.parametrize(("wrong", "code"), [("secret", b"SignatureDoesNotMatch"), ("key", b"InvalidAccessKeyId")])
def test_write_with_wrong_credentials_is_refused(s3_bucket: S3Bucket, wrong: str, code: bytes) -> None:
    server = s3_bucket.server
    if wrong == "secret":
        credentials = (server.access_key, "not the secret")
    else:
        credentials = ("CHRUNKNOWNKEY0000", server.secret_key)
    response = s3_request(server, "PUT", f"/{s3_bucket.bucket}/chronicle/k", body=b"x", credentials=credentials)
    assert response.status == 403
    assert b"<Code>" + code + b"</Code>" in response.body
    assert s3_bucket.keys() == []


def test_write_to_a_bucket_never_created_is_refused(seaweedfs: SeaweedFS) -> None:
    response = s3_request(seaweedfs, "PUT", "/chronicle-never-created/k", body=b"x")
    assert response.status == 404
    assert b"<Code>NoSuchBucket</Code>" in response.body
    assert s3_request(seaweedfs, "HEAD", "/chronicle-never-created").status == 404


def test_object_put_with_obstore_is_listed(s3_bucket: S3Bucket) -> None:
    store = store_for(s3_bucket)
    for key in ("b", "a/1", "dir with space/ü+c=d&e.json"):
        obstore.put(store, key, b"payload")
    assert s3_bucket.keys() == ["chronicle/a/1", "chronicle/b", "chronicle/dir with space/ü+c=d&e.json"]
    assert s3_bucket.url == f"s3://{s3_bucket.bucket}/chronicle"
    head = s3_request(s3_bucket.server, "HEAD", f"/{s3_bucket.bucket}/chronicle/dir with space/ü+c=d&e.json")
    assert head.status == 200
    assert s3_request(s3_bucket.server, "HEAD", f"/{s3_bucket.bucket}/chronicle/missing").status == 404


def test_list_keys_reads_every_page(s3_bucket: S3Bucket) -> None:
    store = store_for(s3_bucket)

    async def put_all() -> None:
        await asyncio.gather(*(obstore.put_async(store, f"k{i:02}", b"v") for i in range(25)))

    asyncio.run(put_all())
    expected = [f"chronicle/k{i:02}" for i in range(25)]
    assert list_keys(s3_bucket.server, s3_bucket.bucket, "chronicle/", page_size=10) == expected
    assert list_keys(s3_bucket.server, s3_bucket.bucket, "chronicle/k1", page_size=4) == expected[10:20]
    assert list_keys(s3_bucket.server, s3_bucket.bucket, "other/") == []


def test_create_only_put_of_an_existing_key_raises_already_exists(s3_bucket: S3Bucket) -> None:
    store = store_for(s3_bucket)
    obstore.put(store, "once", b"first", mode="create")
    with pytest.raises(obstore.exceptions.AlreadyExistsError):
        obstore.put(store, "once", b"second", mode="create")
    assert bytes(obstore.get(store, "once").bytes()) == b"first"
    assert s3_bucket.keys() == ["chronicle/once"]


def test_env_is_all_a_client_needs(s3_bucket: S3Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    for name, value in s3_bucket.env.items():
        monkeypatch.setenv(name, value)
    store = S3Store.from_url(s3_bucket.url)
    obstore.put(store, "from-env", b"v")
    assert s3_bucket.keys() == ["chronicle/from-env"]


def test_env_keeps_every_lookup_on_this_machine(seaweedfs: SeaweedFS) -> None:
    variables = env(seaweedfs, "some-bucket")
    assert variables["AWS_ENDPOINT_URL_S3"] == variables["AWS_ENDPOINT_URL"] == seaweedfs.endpoint
    assert variables["AWS_METADATA_ENDPOINT"] == DEAD_LOOPBACK
    assert variables["AWS_EC2_METADATA_DISABLED"] == "true"
    assert variables["AWS_CONFIG_FILE"] == variables["AWS_SHARED_CREDENTIALS_FILE"] == os.devnull
    assert (variables["AWS_REGION"], variables["AWS_ALLOW_HTTP"]) == ("us-east-1", "true")
    urls = [value for value in variables.values() if "://" in value]
    assert urls
    assert all(url.startswith("http://127.0.0.1:") for url in urls)


# ------------------------------------------------------------------------------ servers of their own


def test_stop_by_pid_ends_the_process_and_frees_every_port(own_server: SeaweedFS) -> None:
    stop_seaweedfs(own_server)
    with pytest.raises(ProcessLookupError):
        os.kill(own_server.pid, 0)
    assert [port for port in own_server.ports.all() if not port_is_free(port)] == []
    with pytest.raises(ConnectionRefusedError):
        s3_request(own_server, "GET", "/")
    stop_seaweedfs(own_server)  # a second stop is a no-op


def test_restart_keeps_objects_buckets_ports_and_credentials(own_server: SeaweedFS) -> None:
    bucket = new_bucket(own_server)
    store = store_for(bucket)  # configured before the restart, used after it
    for i in range(20):
        obstore.put(store, f"k{i:02}", f"value {i}".encode(), mode="create")
    first_pid, ports = own_server.pid, own_server.ports

    restart_seaweedfs(own_server)

    assert own_server.pid != first_pid
    assert own_server.ports == ports
    assert bucket.keys() == [f"chronicle/k{i:02}" for i in range(20)]
    assert bytes(obstore.get(store, "k19").bytes()) == b"value 19"
    with pytest.raises(obstore.exceptions.AlreadyExistsError):
        obstore.put(store, "k00", b"again", mode="create")
    obstore.put(store, "after", b"v", mode="create")
    assert bucket.keys() == ["chronicle/after", *(f"chronicle/k{i:02}" for i in range(20))]


def test_a_server_that_exits_is_reported_with_its_log(tmp_path: Path) -> None:
    fake = tmp_path / "weed"
    fake.write_text("#!/bin/sh\necho 'cannot start: disk on fire'\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(RuntimeError, match=r"(?s)exited with 3.*disk on fire"):
        start_seaweedfs(tmp_path / "work", binary=fake, timeout=10)


def test_a_missing_binary_is_reported(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="weed"):
        start_seaweedfs(tmp_path / "work", binary=tmp_path / "no-such-weed")
