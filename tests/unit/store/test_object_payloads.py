"""Object storage payloads without a server: keys, the object encoding, URL checks and the configuration."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider

import chronicle_otel as chronicle
from chronicle_otel import load_trace
from chronicle_otel._internal.digest import payload_digest
from chronicle_otel.errors import ConfigError, StoreError
from chronicle_otel.store import ObjectPayloadStore, open_payload_store
from chronicle_otel.store._object import (
    MIN_COMPRESS_BYTES,
    READ_CHUNK_BYTES,
    ZSTD_MAGIC,
    decode_object,
    describe_error,
    encode_object,
    object_key,
    read_object,
)


def _payload(n: int) -> bytes:
    chunk = b'{"role":"user","content":"Retrieved chunk: MSFT closed at 412.10 on volume 18.2M; '
    return (b'{"messages":[' + b",".join(chunk + str(i).encode() + b'"}' for i in range(n)) + b"]}")[: n * 90]


# ------------------------------------------------------------------------------------------------ keys


def test_object_key_is_the_content_address_sharded_by_its_first_byte() -> None:
    data = b'{"a":1}'
    hex_digest = hashlib.sha256(data).hexdigest()
    assert object_key(payload_digest(data)) == f"sha256/{hex_digest[:2]}/{hex_digest}"


@pytest.mark.parametrize(
    "digest",
    [
        "sha256:../../etc/passwd",
        "sha256:" + "A" * 64,  # upper case is not the canonical form
        "sha256:" + "0" * 63,
        "sha256:" + "0" * 65,
        "md5:" + "0" * 64,
        "sha256:" + "0" * 63 + "\n",
        "",
    ],
)
def test_anything_but_a_canonical_digest_has_no_key(digest: str) -> None:
    assert object_key(digest) is None


# ------------------------------------------------------------------------------------------------ encoding


def test_small_payloads_are_stored_as_they_are() -> None:
    data = b'{"q":"sell $1,000 of MSFT"}'
    assert len(data) < MIN_COMPRESS_BYTES
    assert encode_object(data) == data


def test_large_payloads_are_zstd_frames_that_decode_verified() -> None:
    data = _payload(600)
    blob = encode_object(data, 3)
    assert blob[:4] == ZSTD_MAGIC
    assert len(blob) < len(data) / 3
    assert decode_object(blob, payload_digest(data)) == data


def test_level_none_stores_the_canonical_bytes() -> None:
    data = _payload(600)
    assert encode_object(data, None) == data


def test_a_frame_that_does_not_pay_is_not_used() -> None:
    data = b'"' + bytes(range(35, 127)) * 20 + b'"'
    noise = hashlib.sha512(data).hexdigest().encode() * 1
    incompressible = b'"' + b"".join(hashlib.sha256(noise + bytes([i])).hexdigest().encode() for i in range(40)) + b'"'
    blob = encode_object(incompressible, 3)
    assert blob == incompressible or len(blob) < len(incompressible)


def test_an_object_whose_bytes_are_not_its_address_is_refused() -> None:
    data = _payload(100)
    other = _payload(101)
    assert decode_object(encode_object(other), payload_digest(data)) is None
    assert decode_object(other, payload_digest(data)) is None


@pytest.mark.parametrize("declared", [True, False])
def test_a_small_object_never_inflates_to_hundreds_of_mib(declared: bool) -> None:
    import resource

    source = b" " * (64 << 20)
    bomb = zstandard.ZstdCompressor(write_content_size=declared).compress(source)
    digest = payload_digest(source)
    del source
    assert len(bomb) < 4096
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert decode_object(bomb, digest) is None  # under its own address, even: refused, not inflated
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 32 << 10  # KiB: nothing near 64 MiB
    squeezable = b'{"text":"' + b"ab" * 400_000 + b'"}'  # under the first MiB: any ratio
    assert decode_object(encode_object(squeezable), payload_digest(squeezable)) == squeezable


def test_a_damaged_frame_is_refused_not_raised() -> None:
    data = _payload(600)
    blob = bytearray(encode_object(data))
    blob[len(blob) // 2] ^= 0xFF
    assert decode_object(bytes(blob), payload_digest(data)) is None
    assert decode_object(ZSTD_MAGIC + b"\x00\x01garbage", payload_digest(data)) is None


def test_a_decompression_bomb_inflates_only_to_the_bound() -> None:
    bomb_source = b" " * (8 * 1024 * 1024)
    bomb = zstandard.ZstdCompressor(level=19).compress(bomb_source)
    assert len(bomb) < 4096
    assert decode_object(bomb, payload_digest(bomb_source), max_bytes=1024 * 1024, max_ratio=10**6) is None
    assert decode_object(bomb, payload_digest(bomb_source), max_bytes=16 * 1024 * 1024, max_ratio=10**6) == bomb_source
    assert decode_object(bomb, payload_digest(bomb_source), max_bytes=16 * 1024 * 1024) is None  # 2,000 to 1


def test_a_frame_without_a_declared_size_is_still_bounded() -> None:
    source = b"[" + b"0," * 2_000_000 + b"0]"
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(source)
    assert decode_object(frame, payload_digest(source), max_bytes=1024) is None


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=4096).filter(lambda b: b[:4] != ZSTD_MAGIC), st.sampled_from([None, 1, 3, 10]))
def test_every_payload_round_trips_through_its_object(data: bytes, level: int | None) -> None:
    blob = encode_object(data, level)
    assert decode_object(blob, payload_digest(data)) == data


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2048))
def test_decoding_arbitrary_bytes_never_raises(blob: bytes) -> None:
    result = decode_object(blob, payload_digest(b"x"))
    assert result is None or payload_digest(result) == payload_digest(b"x")


def _chunked(blob: bytes, size: int) -> list[bytes]:
    return [blob[i : i + size] for i in range(0, len(blob), size)] or [b""]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=4096), st.sampled_from([None, 1, 3]), st.integers(1, 600), st.booleans())
def test_reading_an_object_chunk_by_chunk_gives_what_decoding_it_whole_gives(
    data: bytes, level: int | None, chunk: int, same_address: bool
) -> None:
    blob = encode_object(data, level)
    digest = payload_digest(data if same_address else data + b"!")
    assert read_object(_chunked(blob, chunk), len(blob), digest) == decode_object(blob, digest)
    if same_address and data[:4] != ZSTD_MAGIC:  # canonical JSON never starts with the magic number
        assert read_object(_chunked(blob, chunk), len(blob), digest) == data


def test_an_object_that_sends_more_or_less_than_its_size_is_dropped_at_that_byte() -> None:
    data = _payload(100)

    def longer() -> Iterator[bytes]:
        yield data
        yield b"and more"
        raise AssertionError("read on past the size the store gave")

    assert read_object(longer(), len(data), payload_digest(data)) is None
    assert read_object(_chunked(data[:-1], 64), len(data), payload_digest(data)) is None  # cut short
    assert read_object(_chunked(data, 64), len(data), payload_digest(data)) == data


def test_what_a_frame_inflates_to_is_reserved_chunk_by_chunk_and_a_refusal_ends_the_read() -> None:
    data = _payload(40_000)  # 3.6 MB that zstd packs about 100 to 1
    blob = encode_object(data)
    taken: list[int] = []
    assert read_object(_chunked(blob, 4096), len(blob), payload_digest(data), reserve=taken.append) == data
    assert sum(taken) == len(data) and max(taken) <= READ_CHUNK_BYTES and len(taken) > 1

    class Refused(Exception):
        pass

    def refuse_after_one(size: int) -> None:
        if taken:
            raise Refused(size)
        taken.append(size)

    taken.clear()
    with pytest.raises(Refused):
        read_object([blob], len(blob), payload_digest(data), reserve=refuse_after_one)
    assert taken == [READ_CHUNK_BYTES]


# ------------------------------------------------------------------------------------------------ URLs


@pytest.mark.parametrize(
    "url",
    [
        "http://bucket/prefix",
        "s3://",
        "s3://UPPER/x",
        "s3://a/x",
        "s3://bucket..name/x",
        "s3://bucket/../escape",
        "s3://bucket/a/./b",
        "s3://bucket/pre fix",
        "s3://bucket/x\x1b[2J",
        "s3://-bucket/x",
    ],
)
def test_a_malformed_url_is_a_config_error_naming_the_setting(url: str) -> None:
    with pytest.raises(ConfigError, match="payloads"):
        ObjectPayloadStore(url)


def test_the_url_gives_bucket_and_prefix_and_the_environment_the_endpoint() -> None:
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:10"}
    store = ObjectPayloadStore("s3://agent-payloads//prod/eu/", environ=env)
    assert (store.bucket, store.prefix, store.url) == ("agent-payloads", "prod/eu", "s3://agent-payloads/prod/eu")
    assert store.endpoint == "http://127.0.0.1:10"  # the S3-specific variable wins
    assert "agent-payloads" in repr(store)
    assert ObjectPayloadStore("s3://agent-payloads", environ={}).prefix == ""


def test_invalid_digests_are_neither_fetched_nor_found() -> None:
    store = ObjectPayloadStore("s3://agent-payloads", environ={"AWS_ENDPOINT_URL": "http://127.0.0.1:9"})
    assert store.get_payloads(["sha256:../x", "nope"]) == {}
    assert store.has_payload("sha256:../x") is False


def test_putting_a_payload_under_the_wrong_digest_is_refused_before_any_request() -> None:
    store = ObjectPayloadStore("s3://agent-payloads", environ={"AWS_ENDPOINT_URL": "http://127.0.0.1:9"})
    with pytest.raises(ValueError, match="digest mismatch"):
        store.put_payloads([(payload_digest(b"a"), b"b")])


def test_open_payload_store_picks_object_storage_for_urls_and_a_reader_for_paths(tmp_path: Path) -> None:
    assert isinstance(open_payload_store("s3://agent-payloads/p"), ObjectPayloadStore)
    reader = open_payload_store(tmp_path)
    assert reader.get_payload(payload_digest(b"x")) is None
    assert reader.has_payload(payload_digest(b"x")) is False


def test_errors_are_described_by_cause() -> None:
    assert describe_error(ConnectionError("error trying to connect: tcp connect error")).startswith("unreachable")
    assert describe_error(RuntimeError("<Code>NoSuchBucket</Code>")).startswith("no such bucket")
    assert describe_error(RuntimeError("<Code>AccessDenied</Code>")).startswith("credentials refused")
    late_code = "Generic S3 error: " + "x" * 400 + " <Code>SignatureDoesNotMatch</Code>"
    assert describe_error(RuntimeError(late_code)).startswith("credentials refused")  # found past the cut
    assert describe_error(RuntimeError("<Code>InvalidAccessKeyId</Code>")).startswith("credentials refused")
    retried = (
        "Generic S3 error: Error performing GET http://127.0.0.1:9/b/k in 1.2s, after 2 retries, max_retries: 2, "
        "retry_timeout: 10s - Server returned non-2xx status code: 503 Service Unavailable: "
    )
    assert describe_error(RuntimeError(retried)).startswith("the store answered 503")  # not "unreachable"
    assert describe_error(RuntimeError("retry_timeout: 10s - error trying to connect")).startswith("unreachable")
    long = describe_error(RuntimeError("x" * 5000))
    assert len(long) < 400


# ------------------------------------------------------------------------------------------------ configuration


class MemoryStore:
    """A payload store in memory (for unit tests of the wiring only)."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.lock = threading.Lock()

    def put_payloads(self, payloads: Iterable[tuple[str, bytes]]) -> None:
        with self.lock:
            self.objects.update(payloads)

    def get_payload(self, digest: str) -> bytes | None:
        return self.objects.get(digest)

    def has_payload(self, digest: str) -> bool:
        return digest in self.objects


def _record(config: chronicle.ChronicleConfig, size: int) -> Any:
    @config.boundary(kind="llm", name="llm")
    def llm(prompt: str) -> dict[str, Any]:
        return {"text": "ok", "prompt_chars": len(prompt)}

    return llm("context " * size)


@pytest.mark.parametrize(("upload", "expected"), [("cut", 1), ("all", 2)])
def test_cut_payloads_or_all_of_them_go_to_the_payload_store(tmp_path: Path, upload: str, expected: int) -> None:
    memory = MemoryStore()
    config = chronicle.configure(
        tracer_provider=TracerProvider(),
        store=tmp_path / "store",
        payloads=chronicle.PayloadOptions(store=memory, upload=upload),  # type: ignore[arg-type]
        capture=chronicle.CaptureOptions(max_attribute_length=256),
        local=True,
    )
    try:
        assert _record(config, 500) == {"text": "ok", "prompt_chars": 4000}
        assert config.force_flush()
        assert len(memory.objects) == expected
        stats = config.payload_stats()
        assert stats is not None and stats.uploaded == expected and stats.dropped == 0
        assert config.payload_store is memory
        trace = load_trace(tmp_path / "store", "latest", store=memory)
        assert trace.boundaries[0].raw_input is not None
        assert trace.boundaries[0].raw_input.status == "rehydrated"
        assert trace.boundaries[0].input == {"prompt": "context " * 500}
    finally:
        config.shutdown()
    # the local store kept the spans, not the payloads
    assert load_trace(tmp_path / "store", "latest").boundaries[0].raw_input.status == "missing"  # type: ignore[union-attr]


def test_a_plain_store_keeps_payloads_locally_and_has_no_upload_stats(tmp_path: Path) -> None:
    config = chronicle.configure(tracer_provider=TracerProvider(), store=tmp_path / "s", local=True)
    try:
        assert config.payload_stats() is None
        assert config.payload_store is config.store
    finally:
        config.shutdown()


def test_object_storage_works_without_a_local_store(tmp_path: Path) -> None:
    memory = MemoryStore()
    config = chronicle.configure(
        tracer_provider=TracerProvider(),
        store=False,
        payloads=chronicle.PayloadOptions(store=memory, spool=tmp_path / "spool"),
        capture=chronicle.CaptureOptions(max_attribute_length=128),
        local=True,
    )
    try:
        _record(config, 100)
        assert config.force_flush()
        assert len(memory.objects) == 1
    finally:
        config.shutdown()


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("CHRONICLE_PAYLOADS", "ftp://bucket", "CHRONICLE_PAYLOADS"),
        ("CHRONICLE_PAYLOADS_UPLOAD", "some", "CHRONICLE_PAYLOADS_UPLOAD"),
        ("CHRONICLE_PAYLOADS_ZSTD_LEVEL", "99", "CHRONICLE_PAYLOADS_ZSTD_LEVEL"),
        ("CHRONICLE_PAYLOADS_SPOOL_BYTES", "lots", "CHRONICLE_PAYLOADS_SPOOL_BYTES"),
    ],
)
def test_a_bad_payload_variable_is_a_config_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variable: str, value: str, message: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=message):
        chronicle.configure(tracer_provider=TracerProvider(), store=tmp_path, local=True)


@pytest.mark.parametrize(
    ("payloads", "message"),
    [
        (42, "payloads"),
        ("s3://UPPER", "payloads"),
        (chronicle.PayloadOptions(max_backoff=0), "max_backoff"),
        (chronicle.PayloadOptions(max_delay=-1), "max_delay"),
        (chronicle.PayloadOptions(url="s3://bucket", zstd_level=-1), "zstd_level"),
        (chronicle.PayloadOptions(url="s3://bucket", concurrency=0), "concurrency"),
    ],
)
def test_a_bad_payloads_argument_is_a_config_error(tmp_path: Path, payloads: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        chronicle.configure(tracer_provider=TracerProvider(), store=tmp_path, payloads=payloads, local=True)


def test_the_variable_selects_object_storage_on_both_sides(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CHRONICLE_PAYLOADS", "s3://agent-payloads/prod")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    config = chronicle.configure(
        tracer_provider=TracerProvider(),
        store=tmp_path / "store",
        payloads=chronicle.PayloadOptions(max_backoff=0.05, spool=tmp_path / "spool"),
        capture=chronicle.CaptureOptions(max_attribute_length=128),
        local=True,
    )
    try:
        store = config.payload_store
        assert isinstance(store, ObjectPayloadStore)
        assert (store.url, store.endpoint) == ("s3://agent-payloads/prod", "http://127.0.0.1:9")
        assert _record(config, 200)["text"] == "ok"  # nothing listens on the endpoint: the call is unaffected
        assert config.force_flush()
    finally:
        config.shutdown()
    spooled = sorted(p.name for p in (tmp_path / "spool").iterdir())
    assert len(spooled) == 1 and len(spooled[0]) == 64
    # the loading side reads the same variable: an unreachable store is an error that names it
    with pytest.raises(StoreError, match="s3://agent-payloads/prod"):
        load_trace(tmp_path / "store", "latest")
