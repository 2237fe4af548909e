"""Full payloads in object storage over the S3 API: AWS S3, MinIO, SeaweedFS, Ceph, Cloudflare R2, GCS.

Objects are content addressed and immutable: the payload whose address is ``sha256:<hex>`` is the object
``<prefix>/sha256/<hex[:2]>/<hex>`` of the bucket. It is written with one conditional PUT
(``If-None-Match: *``), so an object that is already there is neither sent twice nor overwritten (a store
that ignores the condition rewrites the same bytes). An object holds the canonical bytes, or their zstd
frame when that is smaller; a reader tells them apart by the zstd magic number (canonical JSON never
starts with it), decompresses within a bound, and returns the bytes only when their sha256 is the address.

Where the store is, and who may write to it, is configuration of the process: the ``s3://bucket/prefix``
URL (``configure(payloads=…)``, ``$CHRONICLE_PAYLOADS``, ``--payloads``), the endpoint from
``$AWS_ENDPOINT_URL_S3`` or ``$AWS_ENDPOINT_URL``, the region from ``$AWS_REGION``, the credentials from the
standard AWS chain (variables, web identity, container and instance credentials). Nothing of it ever comes
from span data. The client is `obstore <https://developmentseed.org/obstore/>`_ (``pip install
'chronicle-otel[s3]'``).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from .._internal.digest import PREFIX as _PREFIX
from .._internal.digest import payload_digest
from .._internal.errors import warn_once
from ..codec import MAX_DECODE_BYTES
from ..errors import ConfigError, StoreError

if TYPE_CHECKING:
    from obstore.store import S3Store

__all__ = ["ObjectPayloadStore", "PutReport", "decode_object", "encode_object", "object_key", "read_object"]

ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
"""The first bytes of a zstd frame; canonical JSON never starts with them."""
MIN_COMPRESS_BYTES: Final = 512
"""Payloads smaller than this are stored as they are: a zstd frame would not pay for itself."""
DEFAULT_ZSTD_LEVEL: Final = 3
DEFAULT_CONCURRENCY: Final = 16

_HEX_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")
# S3 bucket names (the strict rules AWS applies to new buckets; other stores accept a subset of these too).
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]")
_PREFIX_SEGMENT = re.compile(r"[A-Za-z0-9!\-_.*'()=+,@]+")


def object_key(digest: str) -> str | None:
    """The object key (below the store's prefix) of ``sha256:<hex>``; None when ``digest`` is not one.

    Example::

        object_key("sha256:ab12…")  # "sha256/ab/ab12…"
    """
    match = _HEX_DIGEST.fullmatch(digest) if isinstance(digest, str) else None
    if match is None:
        return None
    hex_digest = match.group(1)
    return f"sha256/{hex_digest[:2]}/{hex_digest}"


def _zstandard() -> Any:
    try:
        import zstandard
    except ImportError:
        return None
    return zstandard


def encode_object(data: bytes, level: int | None = DEFAULT_ZSTD_LEVEL) -> bytes:
    """The object bytes of a payload: its zstd frame at ``level`` when that is smaller, else ``data`` itself.

    ``level=None`` (or no ``zstandard`` package) stores ``data`` as it is.
    """
    if level is None or len(data) < MIN_COMPRESS_BYTES:
        return data
    zstandard = _zstandard()
    if zstandard is None:
        return data
    frame: bytes = zstandard.ZstdCompressor(level=level, write_content_size=True).compress(data)
    return frame if len(frame) < len(data) else data


MAX_INFLATION: Final = 200
"""Most bytes a compressed payload object may inflate to per byte stored, past its first MiB (as
:class:`~chronicle_otel.load.LoadLimits` bounds trace files): a small object never inflates to hundreds of MiB."""


def decode_object(
    blob: bytes, digest: str, *, max_bytes: int = MAX_DECODE_BYTES, max_ratio: int = MAX_INFLATION
) -> bytes | None:
    """The payload an object holds, verified: its bytes when their address is ``digest``, else None.

    A zstd frame is inflated to at most ``max_bytes``, and to at most ``max_ratio`` times its own size past the
    first MiB; a frame that would exceed either, is damaged, or cannot be read (no ``zstandard`` package) yields
    None, as does a payload whose sha256 differs.
    """
    return read_object((blob,), len(blob), digest, max_bytes=max_bytes, max_ratio=max_ratio)


READ_CHUNK_BYTES: Final = 1 << 20
"""Bytes an object is read (and a compressed one inflated) in at a time: what a read holds beyond what it keeps."""


def read_object(
    chunks: Iterable[bytes],
    size: int,
    digest: str,
    *,
    max_bytes: int = MAX_DECODE_BYTES,
    max_ratio: int = MAX_INFLATION,
    reserve: Callable[[int], None] | None = None,
) -> bytes | None:
    """The payload an object holds, verified, read from its ``chunks`` as they arrive: what :func:`decode_object`
    returns for the whole object, without holding more than it keeps.

    A plain object is hashed chunk by chunk; a zstd frame is gathered (``size`` bytes at most) and inflated
    :data:`READ_CHUNK_BYTES` at a time, within the same bounds as :func:`decode_object`, each inflated chunk counted
    with ``reserve`` before it is kept. Nothing is joined unless the sha256 is ``digest``. More bytes than ``size``
    (the object's size as the store said) yield None at once, as does anything :func:`decode_object` refuses.
    """
    parts: list[bytes] = []
    received = 0
    hasher = hashlib.sha256()
    plain: bool | None = None  # known once the first four bytes are in
    for chunk in chunks:
        received += len(chunk)
        if received > size:
            return None
        parts.append(chunk)
        if plain is None:
            head = b"".join(parts)[: len(ZSTD_MAGIC)]  # the first chunk itself, unless it is shorter than that
            if len(head) < len(ZSTD_MAGIC) and received < size:
                continue
            plain = head != ZSTD_MAGIC
            chunk = b"".join(parts) if plain else b""
        if plain:
            hasher.update(chunk)
    if received != size:
        return None
    if plain is False:
        return _inflate_verified(b"".join(parts), digest, min(max_bytes, max(size * max_ratio, 1 << 20)), reserve)
    return b"".join(parts) if _PREFIX + hasher.hexdigest() == digest else None


def _inflate_verified(blob: bytes, digest: str, max_bytes: int, reserve: Callable[[int], None] | None) -> bytes | None:
    """The payload a zstd frame holds, inflated a chunk at a time to at most ``max_bytes``, when its sha256 is
    ``digest``; else None."""
    zstandard = _zstandard()
    if zstandard is None:
        warn_once(
            "object-zstd-missing",
            "chronicle_otel: a payload object is zstd-compressed and the zstandard package is not installed; "
            "pip install 'chronicle-otel[s3]'",
        )
        return None
    hasher = hashlib.sha256()
    parts: list[bytes] = []
    inflated = 0
    try:
        with zstandard.ZstdDecompressor().stream_reader(blob) as reader:
            while chunk := reader.read(READ_CHUNK_BYTES):
                inflated += len(chunk)
                if inflated > max_bytes:
                    return None
                if reserve is not None:
                    reserve(len(chunk))
                hasher.update(chunk)
                parts.append(chunk)
    except zstandard.ZstdError:
        return None
    return b"".join(parts) if _PREFIX + hasher.hexdigest() == digest else None


class _StreamError(Exception):
    """The object store failed while an object's body was read (``cause``)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _stream(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """``chunks`` with the store's errors wrapped: told apart from what the reader's ``reserve`` raises."""
    iterator = iter(chunks)
    while True:
        try:
            chunk = next(iterator)
        except StopIteration:
            return
        except Exception as exc:
            raise _StreamError(exc) from exc
        yield bytes(chunk)


@dataclass
class PutReport:
    """What one :meth:`ObjectPayloadStore.put_payloads` call did, payload by payload."""

    stored: int = 0
    """Objects written."""
    existing: int = 0
    """Objects that were already there (nothing sent but the conditional request)."""
    bytes_in: int = 0
    """Payload bytes of the objects written."""
    bytes_out: int = 0
    """Object bytes written (after compression)."""
    failed: list[tuple[str, bytes, BaseException]] = field(default_factory=list)
    """``(digest, data, error)`` of each payload that could not be written."""


def _parse_url(url: str) -> tuple[str, str]:
    """``(bucket, prefix)`` of ``s3://bucket[/prefix]``."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("s3", "s3a"):
        raise ConfigError("payloads", url, "s3://bucket[/prefix]")
    bucket, _, prefix = rest.partition("/")
    if not _BUCKET.fullmatch(bucket) or ".." in bucket:
        raise ConfigError("payloads", url, "s3://bucket[/prefix] with a valid bucket name (3-63 of a-z 0-9 . -)")
    segments = [s for s in prefix.split("/") if s]
    if any(s in (".", "..") or not _PREFIX_SEGMENT.fullmatch(s) for s in segments):
        raise ConfigError("payloads", url, "s3://bucket[/prefix] whose prefix is plain path segments")
    return bucket, "/".join(segments)


_FROM_ENVIRON: Final = (
    ("AWS_ACCESS_KEY_ID", "access_key_id"),
    ("AWS_SECRET_ACCESS_KEY", "secret_access_key"),
    ("AWS_SESSION_TOKEN", "session_token"),
    ("AWS_METADATA_ENDPOINT", "metadata_endpoint"),
)


def _endpoint(environ: Mapping[str, str]) -> str | None:
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        value = environ.get(name, "").strip()
        if value:
            return value
    return None


class ObjectPayloadStore:
    """Payloads as immutable, content-addressed objects in an S3-compatible bucket.

    Args:
        url: ``s3://bucket`` or ``s3://bucket/prefix``.
        compression: zstd level of objects (``None``: store payloads as they are). Readers accept both.
        concurrency: requests in flight at once in :meth:`put_payloads` and :meth:`get_payloads`.
        environ: where the endpoint, region, keys (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
            ``AWS_SESSION_TOKEN``) and metadata endpoint are read from (default ``os.environ``); without keys, the
            rest of the standard AWS chain applies (web identity, container and instance credentials).
        client_options: obstore client options (timeouts, proxy, certificates) merged over the defaults.
        max_object_bytes: the largest payload a read accepts, compressed or inflated.

    Raises:
        ConfigError: the URL is not ``s3://bucket[/prefix]``, or obstore is not installed.

    Example::

        store = ObjectPayloadStore("s3://agent-payloads/prod")   # endpoint and keys from AWS_* variables
        report = store.put_payloads([(digest, data)])
        store.get_payload(digest) == data
    """

    def __init__(
        self,
        url: str,
        *,
        compression: int | None = DEFAULT_ZSTD_LEVEL,
        concurrency: int = DEFAULT_CONCURRENCY,
        environ: Mapping[str, str] | None = None,
        client_options: Mapping[str, Any] | None = None,
        max_object_bytes: int = MAX_DECODE_BYTES,
    ) -> None:
        self.bucket, self.prefix = _parse_url(url)
        self.url = f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        environ = os.environ if environ is None else environ
        self.endpoint = _endpoint(environ)
        self.compression = compression if compression is not None and _zstandard() is not None else None
        if compression is not None and self.compression is None:
            warn_once(
                "object-no-zstd",
                "chronicle_otel: payload objects are stored uncompressed: the zstandard package is not installed "
                "(pip install 'chronicle-otel[s3]')",
            )
        self.concurrency = max(1, concurrency)
        self.max_object_bytes = max_object_bytes
        self._client = self._make_client(environ, dict(client_options or {}))
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def _make_client(self, environ: Mapping[str, str], options: dict[str, Any]) -> S3Store:
        try:
            from obstore.store import S3Store
        except ImportError:
            raise ConfigError(
                "payloads", self.url, "an object store client: pip install 'chronicle-otel[s3]' (obstore)"
            ) from None
        from datetime import timedelta

        config: dict[str, Any] = {}
        if self.endpoint is not None:
            config["endpoint"] = self.endpoint
            if self.endpoint.lower().startswith("http://"):
                options.setdefault("allow_http", True)
        region = environ.get("AWS_REGION", "").strip() or environ.get("AWS_DEFAULT_REGION", "").strip()
        if region:
            config["region"] = region
        # Credentials and the metadata endpoint are read from ``environ`` too, so a store given its own environment
        # never falls back to the process's (the rest of the AWS chain: web identity, containers, instances).
        for variable, key in _FROM_ENVIRON:
            value = environ.get(variable, "").strip()
            if value:
                config[key] = value
        options.setdefault("connect_timeout", timedelta(seconds=5))
        options.setdefault("timeout", timedelta(seconds=60))
        # Few quick retries: the uploader spools what fails and retries later with its own backoff.
        retry = {
            "max_retries": 2,
            "retry_timeout": timedelta(seconds=10),
            "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=1), "base": 2},
        }
        try:
            return S3Store(
                self.bucket,
                prefix=self.prefix or None,
                config=config,  # type: ignore[arg-type]
                client_options=options,  # type: ignore[arg-type]
                retry_config=retry,  # type: ignore[arg-type]
            )
        except Exception as exc:  # obstore's configuration errors
            raise ConfigError("payloads", self.url, f"a usable S3 configuration ({exc})") from None

    def __repr__(self) -> str:
        return f"ObjectPayloadStore({self.url!r}, endpoint={self.endpoint!r})"

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="chronicle-s3")
            return self._pool

    def close(self) -> None:
        """Stop the request threads (the store can still be used: they start again on demand)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    # ------------------------------------------------------------------------------------ writes

    def put_payload(self, digest: str, data: bytes) -> bool:
        """Store one payload; True when it was written, False when it was already there.

        Raises:
            ValueError: ``digest`` is not the sha256 of ``data``.
            StoreError: the object store refused or could not be reached.
        """
        report = self.put_payloads([(digest, data)])
        if report.failed:
            raise _store_error(self.url, "writing", report.failed[0][2])
        return report.stored == 1

    def put_payloads(self, payloads: Iterable[tuple[str, bytes]]) -> PutReport:
        """Store payloads concurrently; the ones already there are not sent again.

        A failure is reported per payload in :attr:`PutReport.failed` (nothing raises for it), so a caller
        can retry or spool exactly those.

        Raises:
            ValueError: a digest is not the sha256 of its data.
        """
        given = list(payloads)
        items = list(dict(given).items())
        for digest, data in items:
            if object_key(digest) is None or payload_digest(data) != digest:
                raise ValueError(f"payload digest mismatch: {digest[:80]} is not the sha256 of the data given")
        report = PutReport(existing=len(given) - len(items))  # the same payload twice in one batch is sent once
        if not items:
            return report
        outcomes = [self._put_one(items[0])] if len(items) == 1 else list(self._executor().map(self._put_one, items))
        for (digest, data), outcome in zip(items, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                report.failed.append((digest, data, outcome))
            elif outcome < 0:
                report.existing += 1
            else:
                report.stored += 1
                report.bytes_in += len(data)
                report.bytes_out += outcome
        return report

    def _put_one(self, item: tuple[str, bytes]) -> int | BaseException:
        """Bytes written, -1 when the object was already there, or the error."""
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        digest, data = item
        key = object_key(digest)
        assert key is not None
        blob = encode_object(data, self.compression)
        try:
            obstore.put(self._client, key, blob, mode="create", use_multipart=False)
        except (AlreadyExistsError, PreconditionError):
            return -1
        except Exception as exc:
            return exc
        return len(blob)

    # ------------------------------------------------------------------------------------ reads

    def get_payload(self, digest: str) -> bytes | None:
        """The payload stored under ``digest``, verified; None when there is none or it fails verification.

        Raises:
            StoreError: the object store refused or could not be reached.
        """
        return self.get_payloads([digest]).get(digest)

    def get_payloads(self, digests: Sequence[str], *, reserve: Callable[[int], None] | None = None) -> dict[str, bytes]:
        """The verified payloads of ``digests`` that the store holds, fetched concurrently.

        Each object is streamed and hashed as it arrives, and kept only once its sha256 is its address; an object
        that sends more than its size, or that inflates past :attr:`max_object_bytes`, is dropped at that byte.

        Args:
            digests: the ``sha256:<hex>`` addresses wanted.
            reserve: called with the bytes a read is about to hold: an object's size once the store has told it and
                before its body is read, then what a compressed object inflates to, chunk by chunk. It raises to
                refuse (loading gives the trace's :attr:`~chronicle_otel.load.LoadLimits.max_payload_bytes` budget);
                its error ends the call, as it is.

        Raises:
            StoreError: the object store refused or could not be reached.
        """
        wanted = [d for d in dict.fromkeys(digests) if object_key(d) is not None]
        if not wanted:
            return {}
        fetch: Callable[[str], bytes | BaseException | None] = functools.partial(self._get_one, reserve=reserve)
        results = [fetch(wanted[0])] if len(wanted) == 1 else list(self._executor().map(fetch, wanted))
        found: dict[str, bytes] = {}
        for digest, result in zip(wanted, results, strict=True):
            if isinstance(result, BaseException):
                raise _store_error(self.url, "reading", result)
            if result is not None:
                found[digest] = result
        return found

    def _get_one(self, digest: str, reserve: Callable[[int], None] | None = None) -> bytes | BaseException | None:
        """The verified payload, None (absent, too large, not its address), or the store's error; what ``reserve``
        raises is raised."""
        import obstore
        from obstore.exceptions import NotFoundError

        key = object_key(digest)
        assert key is not None
        try:
            result = obstore.get(self._client, key)
            size = result.meta.get("size", 0)
        except (NotFoundError, FileNotFoundError):
            return None
        except Exception as exc:
            return exc
        if type(size) is not int or not 0 <= size <= self.max_object_bytes:
            warn_once(
                f"object-too-large:{self.url}",
                "chronicle_otel: payload object %s in %s is %s bytes, over the %d-byte limit; not read",
                key,
                self.url,
                size,
                self.max_object_bytes,
            )
            return None
        if reserve is not None:
            reserve(size)  # before any byte of the body is read
        try:
            data = read_object(
                _stream(result.stream(min_chunk_size=READ_CHUNK_BYTES)),
                size,
                digest,
                max_bytes=self.max_object_bytes,
                reserve=reserve,
            )
        except _StreamError as failed:
            return None if isinstance(failed.cause, (NotFoundError, FileNotFoundError)) else failed.cause
        if data is None:
            warn_once(
                f"object-mismatch:{self.url}",
                "chronicle_otel: payload object %s in %s does not hold the payload of its address; ignored",
                key,
                self.url,
            )
        return data

    def has_payload(self, digest: str) -> bool:
        """True when an object for ``digest`` exists (its content is verified only when read).

        Raises:
            StoreError: the object store refused or could not be reached.
        """
        import obstore
        from obstore.exceptions import NotFoundError

        key = object_key(digest)
        if key is None:
            return False
        try:
            obstore.head(self._client, key)
        except (NotFoundError, FileNotFoundError):
            return False
        except Exception as exc:
            raise _store_error(self.url, "reading", exc) from None
        return True

    def check(self) -> None:
        """Make one request that needs the bucket and the credentials: listing at most one key.

        Raises:
            StoreError: the bucket does not exist, the credentials are refused, or the store is unreachable.
        """
        import obstore

        try:
            stream = obstore.list(self._client, prefix="sha256/", chunk_size=1)
            next(iter(stream), None)
        except Exception as exc:
            raise _store_error(self.url, "checking", exc) from exc


def _store_error(url: str, doing: str, exc: BaseException) -> StoreError:
    return StoreError(f"{doing} the payload store {url} failed: {describe_error(exc)}", url)


_SERVER_STATUS = re.compile(r"status(?: code)?:? (5\d\d)\b")


def describe_error(exc: BaseException) -> str:
    """A one-line reason for an object store failure (credentials, bucket, network…)."""
    if isinstance(exc, StoreError) and exc.__cause__ is not None:
        exc = exc.__cause__
    name = type(exc).__name__
    text = " ".join(str(exc).split())
    lowered = text.lower()  # the whole text: the S3 error code may come after the part kept for the message
    if len(text) > 300:
        text = text[:300] + "…"
    if name in ("PermissionDeniedError", "UnauthenticatedError") or any(
        code in lowered for code in ("accessdenied", "signaturedoesnotmatch", "invalidaccesskeyid", "403 forbidden")
    ):
        cause = "credentials refused"
    elif "nosuchbucket" in lowered or ("bucket" in lowered and "not found" in lowered):
        cause = "no such bucket"
    elif status := _SERVER_STATUS.search(lowered):  # before the words: every retry report says "retry_timeout"
        cause = f"the store answered {status.group(1)}"
    elif any(word in lowered.replace("retry_timeout", "") for word in ("connect", "timed out", "timeout", "dns")):
        cause = "unreachable"
    else:
        cause = name
    return f"{cause} ({text})" if text else cause
