"""Exceptions and warnings raised by chronicle_otel.

The hierarchy::

    ChronicleError
    ├── ConfigError(ValueError)        bad argument to configure(), bad CHRONICLE_* value
    ├── CodecError(ValueError)         a payload cannot be decoded
    ├── StoreError(OSError)            the store cannot be read or has an unknown format
    ├── TraceLoadError(ValueError)     a trace source cannot be read
    │   ├── TraceNotFoundError(LookupError)
    │   └── LoadLimitError             a trace exceeds a load limit (size, ratio, time)
    └── ReplayError
        ├── ReplayDivergence           a replayed call does not match the recording
        └── NetworkBlockedError        a replay tried to reach a host outside its allow-list (not an OSError)

    ChronicleWarning(UserWarning)      misuse found when decorating; drift of a passing replayed test

Every error also inherits the builtin that callers already catch, so ``except ValueError`` keeps working.
Replay errors stand alone; :class:`NetworkBlockedError` in particular is no ``OSError``, so that network clients'
``except OSError`` does not catch it.
Errors carry their context as attributes and build their message from them.
"""

from __future__ import annotations

from typing import Any

from ._api import publish

__all__ = [
    "ChronicleError",
    "ChronicleWarning",
    "CodecError",
    "ConfigError",
    "LoadLimitError",
    "NetworkBlockedError",
    "ReplayDivergence",
    "ReplayError",
    "StoreError",
    "TraceLoadError",
    "TraceNotFoundError",
]


class ChronicleError(Exception):
    """Base class of every exception raised by chronicle_otel."""


class ChronicleWarning(UserWarning):
    """Misuse that chronicle_otel can work around, found when decorating or configuring.

    Also the drift of a passing ``chronicle_replay`` test: its stubbed calls answered although their inputs changed.
    """


class ConfigError(ChronicleError, ValueError):
    """A configuration value is invalid.

    Attributes:
        name: the parameter or environment variable at fault.
        value: the value that was given.
        expected: a description of the accepted values.
    """

    def __init__(self, name: str, value: object, expected: str) -> None:
        self.name = name
        self.value = value
        self.expected = expected
        super().__init__(f"invalid value for {name}: {value!r}; expected {expected}")


class CodecError(ChronicleError, ValueError):
    """An encoded payload cannot be decoded."""


class StoreError(ChronicleError, OSError):
    """A store cannot be opened or read.

    Attributes:
        path: the file or directory at fault.
    """

    def __init__(self, message: str, path: object = None) -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path is not None else message)


class TraceLoadError(ChronicleError, ValueError):
    """A trace source cannot be read.

    Attributes:
        source: the file, directory or URL being read.
        line: the 1-based line number, when the source is line oriented.
        expected: what was expected at that position.
    """

    def __init__(self, message: str, *, source: object = None, line: int | None = None, expected: str | None = None):
        self.source = source
        self.line = line
        self.expected = expected
        where = ""
        if source is not None:
            where = f"{source}:{line}: " if line is not None else f"{source}: "
        tail = f" (expected {expected})" if expected else ""
        super().__init__(f"{where}{message}{tail}")


class TraceNotFoundError(TraceLoadError, LookupError):
    """The requested trace is not in the source.

    Attributes:
        trace_id: the trace id that was asked for.
    """

    def __init__(self, trace_id: str, *, source: object = None, candidates: list[str] | None = None) -> None:
        self.trace_id = trace_id
        self.candidates = candidates or []
        hint = f"; available: {', '.join(self.candidates[:10])}" if self.candidates else ""
        super().__init__(f"trace {trace_id} not found{hint}", source=source)


class LoadLimitError(TraceLoadError):
    """Loading a trace would exceed one of the bounds of :class:`~chronicle_otel.load.LoadLimits`.

    Attributes:
        limit: the :class:`~chronicle_otel.load.LoadLimits` field that was exceeded.
        value: its value in force.
        env_var: the environment variable that raises it.
    """

    def __init__(self, message: str, *, limit: str, value: object, env_var: str, source: object = None) -> None:
        self.limit = limit
        self.value = value
        self.env_var = env_var
        super().__init__(
            f"{message}; the limit {limit}={value} protects against hostile input "
            f"(raise it with LoadLimits({limit}=...) or ${env_var} if this trace is trusted)",
            source=source,
        )


class ReplayError(ChronicleError):
    """A replay cannot proceed."""


class ReplayDivergence(ReplayError):
    """A call made during replay does not match the recording.

    Attributes:
        finding: the report's entry for it (a :class:`~chronicle_otel.replaying.Finding`: ``kind``, ``call_key``,
            ``message``, ``details``) when one call diverged; None for a divergence of the whole run.
    """

    def __init__(self, message: str, *, finding: Any = None) -> None:
        super().__init__(message)
        self.finding = finding


class NetworkBlockedError(ReplayError):
    """A replay tried to resolve or connect to a host outside its allow-list.

    The guard that raises it patches this interpreter's :mod:`socket` module, which a new process does not inherit:
    the message says that child processes are not covered.

    Deliberately not an :class:`OSError`: network clients treat ``OSError`` as a transient failure and retry it,
    fall back to another host or cache, or turn it into a value, so a refusal raised as one would be hidden or
    would surface as an unrelated timeout. Clients that wrap every exception (or retry regardless) may still hide
    it; replay also reports each refusal on its own for that reason.

    Attributes:
        host: the host name or address that was refused.
        port: the port or service asked for, or None.
        operation: ``"lookup"`` (a name or address resolution) or ``"connect"``.
        boundary: where the attempt happened (``"during boundary run_agent[0] > plan[0] (llm)"``), or ``""``.
        allowed: the allow-list in force.
    """

    def __init__(
        self,
        host: str,
        port: int | str | None = None,
        *,
        operation: str,
        boundary: str = "",
        allowed: tuple[str, ...] = (),
    ) -> None:
        self.host = host
        self.port = port
        self.operation = operation
        self.boundary = boundary
        self.allowed = allowed
        if operation == "connect":
            shown = f"[{host}]" if ":" in host else host
            what = f"the connection to {shown}:{port}" if port is not None else f"the connection to {shown}"
        else:
            what = f"the lookup of {host}"
        where = f" {boundary}" if boundary else ""
        hosts = ", ".join(allowed) if allowed else "none"
        super().__init__(
            f"replay blocked {what}{where}; allowed hosts: {hosts}. To allow it, pass "
            f"replay(..., allow_hosts=[..., {host!r}]) or replay(..., block_network=False), "
            "or run pytest with --chronicle-allow-network. The guard covers this process only: child processes "
            "(subprocess, os.system, multiprocessing's spawn and forkserver) reach the network unchecked"
        )


publish(__name__, globals())
