"""Bounds on what loading one trace may cost: trace data is untrusted input."""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
from collections.abc import Callable
from typing import Final

from .. import environment_variables as env
from .._api import publish
from ..errors import ConfigError, LoadLimitError

MIB: Final = 1 << 20


@dataclasses.dataclass(frozen=True)
class LoadLimits:
    """Bounds on the memory and time that loading one trace may take.

    Trace files and backend answers are untrusted: a compressed file may inflate a thousandfold, a server may trickle
    bytes forever. Each bound is an argument, else its environment variable, else the default
    (:meth:`from_env`). Exceeding one raises :class:`~chronicle_otel.errors.LoadLimitError`, whose message names the
    limit and how to raise it.

    Example::

        load_trace("huge-but-trusted.jsonl.gz", limits=LoadLimits(max_decompressed_bytes=2 << 30))
    """

    max_decompressed_bytes: int = 256 * MIB
    """Largest size a compressed file may inflate to (``CHRONICLE_MAX_DECOMPRESSED_BYTES``)."""

    max_compression_ratio: float = 200.0
    """Largest inflated/compressed ratio, checked once more than 1 MiB has been inflated
    (``CHRONICLE_MAX_COMPRESSION_RATIO``)."""

    max_response_bytes: int = 256 * MIB
    """Largest total of the bodies read from a backend for one trace, every page and listing included
    (``CHRONICLE_MAX_RESPONSE_BYTES``)."""

    max_payload_bytes: int = 1024 * MIB
    """Largest total read from payload stores to rehydrate the payloads cut on one trace's spans: every object read,
    as stored and as it inflates, all stores and requests together; a request counts an object's size before its
    body is read, so requests in flight hold no more (``CHRONICLE_MAX_PAYLOAD_BYTES``)."""

    http_timeout: float = 60.0
    """Total deadline in seconds of one HTTP request: connect, wait and read the whole body
    (``CHRONICLE_HTTP_TIMEOUT``)."""

    http_total_timeout: float = 600.0
    """Deadline in seconds of all the HTTP requests that pulling one trace makes, every page and listing included
    (``CHRONICLE_HTTP_TOTAL_TIMEOUT``)."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ConfigError(field.name, value, "a positive number")

    @classmethod
    def from_env(cls) -> LoadLimits:
        """The limits from the ``CHRONICLE_*`` environment variables, defaults for those unset.

        Raises:
            ConfigError: a variable is not a positive number.
        """
        values: dict[str, float] = {}
        for name, var, kind in _ENV:
            raw = os.environ.get(var, "").strip()
            if not raw:
                continue
            try:
                number = kind(raw)
            except ValueError:
                raise ConfigError(var, raw, "a positive number") from None
            if not number > 0:
                raise ConfigError(var, raw, "a positive number")
            values[name] = number
        return cls(**values)  # type: ignore[arg-type]


_ENV: Final = (
    ("max_decompressed_bytes", env.CHRONICLE_MAX_DECOMPRESSED_BYTES, int),
    ("max_compression_ratio", env.CHRONICLE_MAX_COMPRESSION_RATIO, float),
    ("max_response_bytes", env.CHRONICLE_MAX_RESPONSE_BYTES, int),
    ("max_payload_bytes", env.CHRONICLE_MAX_PAYLOAD_BYTES, int),
    ("http_timeout", env.CHRONICLE_HTTP_TIMEOUT, float),
    ("http_total_timeout", env.CHRONICLE_HTTP_TOTAL_TIMEOUT, float),
)

ENV_VARS: Final = {name: var for name, var, _ in _ENV}
"""The environment variable of each limit, for error messages."""


class PayloadBudget:
    """What rehydrating the payloads cut on one trace's spans may still read: :attr:`LoadLimits.max_payload_bytes`,
    shared by every payload store asked and every request in flight (thread safe). Once spent, every later
    :meth:`take` is refused too, so the requests still in flight stop at their next one."""

    def __init__(self, limit: int, trace_id: str) -> None:
        self.limit = limit
        self.trace_id = trace_id
        self.used = 0
        self._spent = False
        self._lock = threading.Lock()

    def take(self, size: int, store: object = None) -> None:
        """Count ``size`` more bytes read from ``store`` (named in the error).

        Raises:
            LoadLimitError: the bytes read for this trace would pass the limit.
        """
        with self._lock:
            if not self._spent and self.used + size <= self.limit:
                self.used += size
                return
            self._spent = True
        raise LoadLimitError(
            f"rehydrating the payloads cut on the spans of trace {self.trace_id} reads more than {self.limit} bytes "
            f"from the payload stores ({self.used} read, {size} more asked for)",
            limit="max_payload_bytes",
            value=self.limit,
            env_var=env.CHRONICLE_MAX_PAYLOAD_BYTES,
            source=store,
        )

    def taker(self, store: object) -> Callable[[int], None]:
        """:meth:`take` for the reads of one store (what a store's ``get_payloads(..., reserve=...)`` calls)."""
        return functools.partial(self.take, store=store)


publish(__name__, globals())
