"""The configuration parameter table and its resolver.

Every setting of :func:`chronicle_otel.configure` is one :class:`Param` in :data:`PARAMS`: the name users
write (``enabled``, ``CaptureOptions.max_attribute_length``…), the environment variables that set it, how
their text is parsed, the default and the validation. :func:`resolve` applies the one rule:

* a plain parameter takes the argument when it is given (not None), else the first environment variable
  that is set and not blank, else the default;
* a cumulative parameter (``combine`` set: redaction patterns, session variables) starts from the default,
  adds each environment variable that is set, then the argument.

A bad environment value raises :class:`~chronicle_otel.errors.ConfigError` naming the variable, the text
and the accepted values; a bad argument names the parameter. The structured results are frozen:
:class:`Settings` (what boundaries read at call time) and :class:`StoreSettings` (how the pipeline builds
the local store). ``configure()`` and the configuration of a process that never called it both come from
:func:`resolve_settings`; the latter passes ``strict=False`` (see there).

This module reads no option class: ``config`` hands it the fields of its ``*Options`` objects, described by
the :class:`RedactionFields` and :class:`StoreFields` protocols, so the dependency points one way.

Not user API (the settings are :func:`~chronicle_otel.configure`'s arguments and the ``*Options`` fields): the
stages read their rows here, ``LocalStore`` its ``compress`` and ``ChronicleExporter`` its ``keep`` default, and the
environment variable reference is generated from :data:`PARAMS`. It imports nothing else of ``config``, so reading
it never loads the pipeline, which imports the exporter and the store.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Generic, Literal, Protocol, TypeVar

from opentelemetry.sdk.trace import TracerProvider

from .. import environment_variables as env
from .._internal.buffer import DEFAULT_MAX_BYTES
from .._internal.errors import warn_once
from ..errors import ConfigError
from ..record.session_attrs import AttributeValue, session_attributes
from ..redact import DEFAULT_SECRET_PATTERN, DEFAULT_VALUE_PATTERNS, PatternRedactor, Redactor, chain

__all__ = [
    "ABSOLUTE_PATHS",
    "Derived",
    "ENABLED",
    "EXIT_TIMEOUT",
    "FLUSH_ON_SIGNALS",
    "GENAI_ATTRIBUTES",
    "Invalid",
    "MAX_ATTRIBUTE_LENGTH",
    "OPENINFERENCE",
    "OTLP",
    "OTLP_ENDPOINT",
    "OTLP_PROTOCOL",
    "PARAMS",
    "PAYLOADS_BUFFER_BYTES",
    "PAYLOADS_CONCURRENCY",
    "PAYLOADS_SPOOL",
    "PAYLOADS_SPOOL_BYTES",
    "PAYLOADS_UPLOAD",
    "PAYLOADS_URL",
    "PAYLOADS_ZSTD_LEVEL",
    "Param",
    "PayloadSettings",
    "QUEUE_ON_FULL",
    "REDACTOR",
    "REDACT_KEYS",
    "REDACT_KEY_DEFAULTS",
    "REDACT_VALUES",
    "REDACT_VALUE_FORMATS",
    "SDK_DISABLED",
    "SERVICE_NAME",
    "SESSION",
    "STORE_BUFFER_BYTES",
    "STORE_COMPRESS",
    "STORE_DURABLE",
    "STORE_KEEP",
    "STORE_MAX_DELAY",
    "STORE_MAX_QUEUE_SIZE",
    "STORE_PATH",
    "STORE_PROCESSOR",
    "Settings",
    "StoreSettings",
    "TRACER_PROVIDER",
    "build_redactor",
    "resolve",
    "resolve_payloads",
    "resolve_settings",
    "resolve_store",
]

T = TypeVar("T")

OTEL_SDK_DISABLED: Final = "OTEL_SDK_DISABLED"
OTEL_SERVICE_NAME: Final = "OTEL_SERVICE_NAME"
OTEL_EXPORTER_OTLP_ENDPOINT: Final = "OTEL_EXPORTER_OTLP_ENDPOINT"
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: Final = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
OTEL_EXPORTER_OTLP_PROTOCOL: Final = "OTEL_EXPORTER_OTLP_PROTOCOL"
OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: Final = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"


class Invalid(Exception):
    """Raised by a parser or a check: ``value`` is not one of ``expected``."""

    def __init__(self, value: object, expected: str) -> None:
        super().__init__(value, expected)
        self.value = value
        self.expected = expected


@dataclass(frozen=True)
class Derived(Generic[T]):
    """A default computed from the environment when nothing else set the parameter."""

    compute: Callable[[Mapping[str, str]], T]


@dataclass(frozen=True)
class Param(Generic[T]):
    """One configuration parameter."""

    name: str
    """How users set it: a ``configure()`` argument or an ``*Options`` field (named in errors)."""
    env: tuple[str, ...]
    """Environment variables that set it, in order of precedence (OTel's own names included)."""
    default: T | Derived[T]
    """The value when neither the argument nor an environment variable sets it."""
    parse: Callable[[str, str], T | None] | None = None
    """``parse(variable, text)``: the value of a set variable; None when the text means "not set"."""
    check: Callable[[T], None] | None = None
    """Raises :class:`Invalid` for a value out of range (arguments and parsed variables alike)."""
    combine: Callable[[T, T], T] | None = None
    """Set for cumulative parameters: folds default, variables and argument together, in that order."""


# ------------------------------------------------------------------------------------------------ parsers

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
BOOLEAN_WORDS: Final = "one of true, false, 1, 0, yes, no, on, off"


def parse_bool(var: str, text: str) -> bool:
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise Invalid(text, BOOLEAN_WORDS)


def parse_int(var: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise Invalid(text, "an integer") from None


def parse_float(var: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise Invalid(text, "a number") from None


def parse_text(var: str, text: str) -> str:
    return text.strip()


def parse_path(var: str, text: str) -> Path:
    return Path(text)


def split_patterns(text: str) -> tuple[str, ...]:
    """Comma-separated regular expressions; a comma inside ``{m,n}`` belongs to its pattern."""
    return tuple(p.strip() for p in re.split(r",(?![^{}]*\})", text) if p.strip())


def parse_patterns(var: str, text: str) -> tuple[str, ...]:
    return split_patterns(text)


def parse_value_patterns(var: str, text: str) -> tuple[str, ...] | None:
    """``CHRONICLE_REDACT_VALUES``: extra value patterns, or nothing when it turns value patterns off."""
    return None if text.strip().lower() in _FALSE else split_patterns(text)


def parse_value_formats(var: str, text: str) -> bool | None:
    """``CHRONICLE_REDACT_VALUES`` as a switch: ``false`` turns the built-in formats off; else no opinion."""
    return False if text.strip().lower() in _FALSE else None


_SESSION_VARIABLES: Final = {
    env.CHRONICLE_BUILD_ID: "build_id",
    env.CHRONICLE_GIT_SHA: "git_sha",
    env.CHRONICLE_MODEL_VERSION: "model_version",
    env.CHRONICLE_PROMPT_VERSION: "prompt_version",
}


def parse_session(var: str, text: str) -> Mapping[str, Any]:
    """``CHRONICLE_SESSION`` (``k=v,k=v``) or one of the named session variables (``CHRONICLE_BUILD_ID``…)."""
    if var in _SESSION_VARIABLES:
        return {_SESSION_VARIABLES[var]: text}
    values: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise Invalid(text, "comma-separated key=value pairs")
        values[key.strip()] = value.strip()
    return values


def parse_choice(*choices: str) -> Callable[[str, str], str]:
    def parse(var: str, text: str) -> str:
        value = text.strip()
        if value not in choices:
            raise Invalid(text, " or ".join(choices))
        return value

    return parse


# ------------------------------------------------------------------------------------------------ checks


def check_bool(value: object) -> None:
    if not isinstance(value, bool):
        raise Invalid(value, "True or False")


def check_text(value: object) -> None:
    if not isinstance(value, str):
        raise Invalid(value, "a string")


def check_path(value: object) -> None:
    if not isinstance(value, (str, os.PathLike)):
        raise Invalid(value, "a directory path")


def at_least(minimum: int) -> Callable[[int], None]:
    def check(value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise Invalid(value, f"an integer >= {minimum}")

    return check


def positive_seconds(value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 86_400:
        raise Invalid(value, "a number of seconds > 0 (at most 86400)")


def one_of(*choices: str) -> Callable[[str], None]:
    def check(value: str) -> None:
        if value not in choices:
            raise Invalid(value, " or ".join(repr(c) for c in choices))

    return check


def between(low: int, high: int) -> Callable[[int], None]:
    def check(value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise Invalid(value, f"an integer from {low} to {high}")

    return check


def check_payloads(value: object) -> None:
    """``local`` or an ``s3://bucket[/prefix]`` URL (checked in full when the store is opened)."""
    if not isinstance(value, str) or not (value == "local" or value.lower().startswith(("s3://", "s3a://"))):
        raise Invalid(value, "'local' or s3://bucket[/prefix]")


def check_provider(value: object) -> None:
    if not isinstance(value, TracerProvider):
        raise Invalid(value, "an opentelemetry.sdk.trace.TracerProvider")


def _pattern_list(value: object) -> Sequence[str]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise Invalid(value, "a list of regular expressions (not a single string)")
    return value


def check_key_patterns(value: Sequence[str]) -> None:
    for pattern in _pattern_list(value):
        try:
            re.compile(pattern)
        except (re.error, TypeError) as exc:
            raise Invalid(pattern, f"a regular expression ({exc})") from None


def check_value_patterns(value: Sequence[str]) -> None:
    for pattern in _pattern_list(value):
        try:
            PatternRedactor(keys=(), values=[pattern], formats=())
        except (ValueError, TypeError) as exc:
            raise Invalid(pattern, f"a regular expression for secret values ({exc})") from None


def check_redactor(value: object) -> None:
    if value is not None and not isinstance(value, Redactor):
        raise Invalid(value, "an object with redact_key() and redact_text()")


def check_session(value: Mapping[str, Any]) -> None:
    if not isinstance(value, Mapping):
        raise Invalid(value, "a mapping of session variable names to values")
    try:
        session_attributes(value)
    except ValueError as exc:
        raise Invalid(value, str(exc)) from None


def _merged(base: Mapping[str, Any], more: Mapping[str, Any]) -> Mapping[str, Any]:
    return {**base, **more}


def _concatenated(base: Sequence[str], more: Sequence[str]) -> Sequence[str]:
    return (*base, *more)


def _otlp_by_endpoint(environ: Mapping[str, str]) -> bool:
    return resolve(OTLP_ENDPOINT, environ=environ) is not None


# ------------------------------------------------------------------------------------------------ the table

ENABLED: Final = Param[bool]("enabled", (env.CHRONICLE_ENABLED,), True, parse_bool, check_bool)
SDK_DISABLED: Final = Param[bool](OTEL_SDK_DISABLED, (OTEL_SDK_DISABLED,), False, parse_bool)
SERVICE_NAME: Final = Param[str | None]("service_name", (OTEL_SERVICE_NAME,), None, parse_text, check_text)
SESSION: Final = Param[Mapping[str, Any]](
    "session",
    (env.CHRONICLE_SESSION, *_SESSION_VARIABLES),
    MappingProxyType({}),
    parse_session,
    check_session,
    combine=_merged,
)
TRACER_PROVIDER: Final = Param[TracerProvider | None]("tracer_provider", (), None, check=check_provider)
OTLP: Final = Param[bool]("otlp", (env.CHRONICLE_OTLP,), Derived(_otlp_by_endpoint), parse_bool, check_bool)
OTLP_ENDPOINT: Final = Param[str | None](
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
    (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT),
    None,
    parse_text,
)
OTLP_PROTOCOL: Final = Param[str](
    OTEL_EXPORTER_OTLP_PROTOCOL,
    (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL),
    "http/protobuf",
    parse_choice("grpc", "http/protobuf"),
)

STORE_PATH: Final = Param[str | os.PathLike[str]](
    "StoreOptions.path", (env.CHRONICLE_HOME,), Path(".chronicle"), parse_path, check_path
)
STORE_PROCESSOR: Final = Param[str]("StoreOptions.processor", (), "batch", check=one_of("batch", "simple"))
STORE_DURABLE: Final = Param[bool]("StoreOptions.durable", (), True, check=check_bool)
STORE_BUFFER_BYTES: Final = Param[int]("StoreOptions.buffer_bytes", (), DEFAULT_MAX_BYTES, check=at_least(0))
STORE_MAX_QUEUE_SIZE: Final = Param[int]("StoreOptions.max_queue_size", (), 16_384, check=at_least(1))
STORE_KEEP: Final = Param[str](
    "StoreOptions.keep",
    (env.CHRONICLE_STORE_KEEP,),
    "boundaries",
    parse_choice("boundaries", "all"),
    one_of("boundaries", "all"),
)

STORE_COMPRESS: Final = Param[bool](
    "StoreOptions.compress", (env.CHRONICLE_STORE_COMPRESS,), True, parse_bool, check_bool
)

STORE_MAX_DELAY: Final = Param[float](
    "StoreOptions.max_delay", (env.CHRONICLE_STORE_MAX_DELAY,), 0.5, parse_float, positive_seconds
)
QUEUE_ON_FULL: Final = Param[str](
    "StoreOptions.on_full",
    (env.CHRONICLE_QUEUE_ON_FULL,),
    "block",
    parse_choice("block", "drop"),
    one_of("block", "drop"),
)
EXIT_TIMEOUT: Final = Param[float]("exit_timeout", (env.CHRONICLE_EXIT_TIMEOUT,), 5.0, parse_float, positive_seconds)

FLUSH_ON_SIGNALS: Final = Param[bool](
    "flush_on_signals", (env.CHRONICLE_FLUSH_ON_SIGNALS,), True, parse_bool, check_bool
)
PAYLOADS_URL: Final = Param[str]("PayloadOptions.url", (env.CHRONICLE_PAYLOADS,), "local", parse_text, check_payloads)
PAYLOADS_UPLOAD: Final = Param[str](
    "PayloadOptions.upload", (env.CHRONICLE_PAYLOADS_UPLOAD,), "cut", parse_choice("cut", "all"), one_of("cut", "all")
)
PAYLOADS_ZSTD_LEVEL: Final = Param[int](
    "PayloadOptions.zstd_level", (env.CHRONICLE_PAYLOADS_ZSTD_LEVEL,), 3, parse_int, between(0, 22)
)
PAYLOADS_SPOOL: Final = Param[str | os.PathLike[str] | None](
    "PayloadOptions.spool", (env.CHRONICLE_PAYLOADS_SPOOL,), None, parse_path, check_path
)
PAYLOADS_SPOOL_BYTES: Final = Param[int](
    "PayloadOptions.spool_bytes", (env.CHRONICLE_PAYLOADS_SPOOL_BYTES,), 1024**3, parse_int, at_least(0)
)
PAYLOADS_BUFFER_BYTES: Final = Param[int]("PayloadOptions.buffer_bytes", (), DEFAULT_MAX_BYTES, check=at_least(0))
PAYLOADS_CONCURRENCY: Final = Param[int]("PayloadOptions.concurrency", (), 16, check=at_least(1))

MAX_ATTRIBUTE_LENGTH: Final = Param[int](
    "CaptureOptions.max_attribute_length", (env.CHRONICLE_MAX_ATTRIBUTE_LENGTH,), 8192, parse_int, at_least(64)
)
GENAI_ATTRIBUTES: Final = Param[bool]("CaptureOptions.genai_attributes", (), True, check=check_bool)
ABSOLUTE_PATHS: Final = Param[bool]("CaptureOptions.absolute_paths", (), False, check=check_bool)
OPENINFERENCE: Final = Param[bool](
    "CaptureOptions.openinference", (env.CHRONICLE_OPENINFERENCE,), False, parse_bool, check_bool
)

REDACT_KEY_DEFAULTS: Final = Param[bool]("RedactionOptions.defaults", (), True, check=check_bool)
REDACT_KEYS: Final = Param[Sequence[str]](
    "RedactionOptions.keys",
    (env.CHRONICLE_REDACT_KEYS,),
    (),
    parse_patterns,
    check_key_patterns,
    combine=_concatenated,
)
REDACT_VALUES: Final = Param[Sequence[str]](
    "RedactionOptions.values",
    (env.CHRONICLE_REDACT_VALUES,),
    (),
    parse_value_patterns,
    check_value_patterns,
    combine=_concatenated,
)
REDACT_VALUE_FORMATS: Final = Param[bool](
    "RedactionOptions.value_defaults", (env.CHRONICLE_REDACT_VALUES,), True, parse_value_formats, check_bool
)
REDACTOR: Final = Param[Redactor | None]("RedactionOptions.redactor", (), None, check=check_redactor)

PARAMS: Final[tuple[Param[Any], ...]] = (
    ENABLED,
    SDK_DISABLED,
    SERVICE_NAME,
    SESSION,
    TRACER_PROVIDER,
    OTLP,
    OTLP_ENDPOINT,
    OTLP_PROTOCOL,
    STORE_PATH,
    STORE_PROCESSOR,
    STORE_DURABLE,
    STORE_BUFFER_BYTES,
    STORE_MAX_QUEUE_SIZE,
    STORE_KEEP,
    STORE_COMPRESS,
    STORE_MAX_DELAY,
    QUEUE_ON_FULL,
    EXIT_TIMEOUT,
    FLUSH_ON_SIGNALS,
    PAYLOADS_URL,
    PAYLOADS_UPLOAD,
    PAYLOADS_ZSTD_LEVEL,
    PAYLOADS_SPOOL,
    PAYLOADS_SPOOL_BYTES,
    PAYLOADS_BUFFER_BYTES,
    PAYLOADS_CONCURRENCY,
    MAX_ATTRIBUTE_LENGTH,
    GENAI_ATTRIBUTES,
    ABSOLUTE_PATHS,
    OPENINFERENCE,
    REDACT_KEY_DEFAULTS,
    REDACT_KEYS,
    REDACT_VALUES,
    REDACT_VALUE_FORMATS,
    REDACTOR,
)
"""Every parameter, in the order of the ``configure()`` documentation."""


# ------------------------------------------------------------------------------------------------ resolution


def _checked(param: Param[T], source: str, value: T) -> T:
    if param.check is not None:
        try:
            param.check(value)
        except Invalid as exc:
            raise ConfigError(source, exc.value, exc.expected) from None
    return value


def _from_env(param: Param[T], environ: Mapping[str, str]) -> Iterator[T]:
    """The values of the parameter's variables that are set, in order, parsed and checked."""
    if param.parse is None:
        return
    for var in param.env:
        text = environ.get(var)
        if text is None or not text.strip():
            continue
        try:
            value = param.parse(var, text)
        except Invalid as exc:
            raise ConfigError(var, exc.value, exc.expected) from None
        if value is not None:
            yield _checked(param, var, value)


def _default(param: Param[T], environ: Mapping[str, str]) -> T:
    default = param.default
    if isinstance(default, Derived):
        computed: T = default.compute(environ)
        return computed
    return default


def resolve(param: Param[T], arg: T | None = None, *, environ: Mapping[str, str] | None = None) -> T:
    """The value of ``param``: the argument, then its environment variables, then its default.

    Args:
        param: a parameter of :data:`PARAMS`.
        arg: the value passed by the caller; None means "not given".
        environ: the environment to read (default: ``os.environ``).

    Raises:
        ConfigError: the argument or a set variable is invalid (a variable's error names the variable).
    """
    environ = os.environ if environ is None else environ
    if param.combine is None:
        if arg is not None:
            return _checked(param, param.name, arg)
        for value in _from_env(param, environ):
            return value
        return _default(param, environ)
    total = _default(param, environ)
    for value in _from_env(param, environ):
        total = param.combine(total, value)
    if arg is not None:
        total = param.combine(total, _checked(param, param.name, arg))
    return total


# ------------------------------------------------------------------------------------------------ results


class RedactionFields(Protocol):
    """What :func:`build_redactor` reads of a ``RedactionOptions``."""

    @property
    def keys(self) -> Sequence[str]: ...
    @property
    def defaults(self) -> bool: ...
    @property
    def values(self) -> Sequence[str]: ...
    @property
    def value_defaults(self) -> bool | None: ...
    @property
    def redactor(self) -> Redactor | None: ...


class StoreFields(Protocol):
    """What :func:`resolve_store` reads of a ``StoreOptions``."""

    @property
    def path(self) -> str | os.PathLike[str] | None: ...
    @property
    def processor(self) -> str: ...
    @property
    def durable(self) -> bool: ...
    @property
    def buffer_bytes(self) -> int: ...
    @property
    def max_queue_size(self) -> int: ...
    @property
    def keep(self) -> str | None: ...
    @property
    def max_delay(self) -> float | None: ...
    @property
    def on_full(self) -> str | None: ...
    @property
    def compress(self) -> bool | None: ...


@dataclass(frozen=True)
class Settings:
    """The resolved settings boundaries read at call time."""

    enabled: bool
    service_name: str | None
    session: Mapping[str, AttributeValue]
    max_attribute_length: int
    genai_attributes: bool
    openinference: bool
    redact: Redactor | None
    absolute_paths: bool = False


@dataclass(frozen=True)
class StoreSettings:
    """The resolved local-store settings the pipeline builds the store from."""

    path: str | os.PathLike[str]
    processor: Literal["batch", "simple"]
    durable: bool
    buffer_bytes: int
    max_queue_size: int
    keep: Literal["boundaries", "all"] = "boundaries"
    max_delay: float = 0.5
    on_full: Literal["block", "drop"] = "block"
    compress: bool = True


class PayloadFields(Protocol):
    """What :func:`resolve_payloads` reads of a ``PayloadOptions``."""

    @property
    def url(self) -> str | None: ...
    @property
    def upload(self) -> str | None: ...
    @property
    def zstd_level(self) -> int | None: ...
    @property
    def spool(self) -> str | os.PathLike[str] | None: ...
    @property
    def spool_bytes(self) -> int | None: ...
    @property
    def buffer_bytes(self) -> int | None: ...
    @property
    def concurrency(self) -> int | None: ...
    @property
    def max_backoff(self) -> float: ...
    @property
    def max_delay(self) -> float: ...


@dataclass(frozen=True)
class PayloadSettings:
    """The resolved payload-store settings: ``url`` is ``local`` or an ``s3://`` URL."""

    url: str
    upload_all: bool
    zstd_level: int
    spool: str | os.PathLike[str] | None
    spool_bytes: int
    buffer_bytes: int
    concurrency: int
    max_backoff: float
    max_delay: float = 2.0

    @property
    def remote(self) -> bool:
        """True when payloads go to object storage rather than the local store."""
        return self.url != "local"


def resolve_payloads(options: PayloadFields, *, environ: Mapping[str, str] | None = None) -> PayloadSettings:
    """Resolve the payload-store settings of ``options`` through :data:`PARAMS`."""
    backoff, delay = options.max_backoff, options.max_delay
    for name, value in (("PayloadOptions.max_backoff", backoff), ("PayloadOptions.max_delay", delay)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ConfigError(name, value, "a number of seconds > 0")
    return PayloadSettings(
        url=resolve(PAYLOADS_URL, options.url, environ=environ),
        upload_all=resolve(PAYLOADS_UPLOAD, options.upload, environ=environ) == "all",
        zstd_level=resolve(PAYLOADS_ZSTD_LEVEL, options.zstd_level, environ=environ),
        spool=resolve(PAYLOADS_SPOOL, options.spool, environ=environ),
        spool_bytes=resolve(PAYLOADS_SPOOL_BYTES, options.spool_bytes, environ=environ),
        buffer_bytes=resolve(PAYLOADS_BUFFER_BYTES, options.buffer_bytes, environ=environ),
        concurrency=resolve(PAYLOADS_CONCURRENCY, options.concurrency, environ=environ),
        max_backoff=float(backoff),
        max_delay=float(delay),
    )


def build_redactor(options: RedactionFields | None, *, environ: Mapping[str, str] | None = None) -> Redactor:
    """The redactor of a configuration: key patterns, value patterns, then the user's own redactor."""
    extra_keys = resolve(REDACT_KEYS, options.keys if options else None, environ=environ)
    keys = list(extra_keys)
    if resolve(REDACT_KEY_DEFAULTS, options.defaults if options else None, environ=environ):
        keys.insert(0, DEFAULT_SECRET_PATTERN)
    values = resolve(REDACT_VALUES, options.values if options else None, environ=environ)
    formats = resolve(REDACT_VALUE_FORMATS, options.value_defaults if options else None, environ=environ)
    user = resolve(REDACTOR, options.redactor if options else None, environ=environ)
    patterns = PatternRedactor(keys=keys, values=values, formats=tuple(DEFAULT_VALUE_PATTERNS) if formats else ())
    return chain(patterns, user)


def resolve_settings(
    *,
    service_name: str | None = None,
    session: Mapping[str, Any] | None = None,
    enabled: bool | None = None,
    max_attribute_length: int | None = None,
    genai_attributes: bool | None = None,
    openinference: bool | None = None,
    redaction: RedactionFields | Literal[False] | None = None,
    absolute_paths: bool | None = None,
    strict: bool = True,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Resolve the call-time settings through :data:`PARAMS`.

    Args:
        service_name: ``configure(service_name=)``.
        session: ``configure(session=)``.
        enabled: ``configure(enabled=)``; recording is also off when ``OTEL_SDK_DISABLED`` is true.
        max_attribute_length: ``CaptureOptions.max_attribute_length``.
        genai_attributes: ``CaptureOptions.genai_attributes``.
        openinference: ``CaptureOptions.openinference``.
        redaction: ``RedactionOptions`` (None: the defaults), or False for no redaction.
        absolute_paths: ``CaptureOptions.absolute_paths``.
        strict: raise on an invalid value. With False (a process that never called ``configure()``, where
            the first boundary call resolves the settings and must not fail), an invalid environment
            variable is logged once and recording stays off; redaction then keeps its built-in defaults.
        environ: the environment to read (default: ``os.environ``).

    Raises:
        ConfigError: with ``strict``, an argument or environment variable is invalid.
    """
    try:
        redact = None if redaction is False else build_redactor(redaction, environ=environ)
        values = resolve(SESSION, session, environ=environ)
        return Settings(
            enabled=resolve(ENABLED, enabled, environ=environ) and not resolve(SDK_DISABLED, environ=environ),
            service_name=resolve(SERVICE_NAME, service_name, environ=environ) or None,
            session=MappingProxyType(session_attributes(values, redact)),
            max_attribute_length=resolve(MAX_ATTRIBUTE_LENGTH, max_attribute_length, environ=environ),
            genai_attributes=resolve(GENAI_ATTRIBUTES, genai_attributes, environ=environ),
            openinference=resolve(OPENINFERENCE, openinference, environ=environ),
            redact=redact,
            absolute_paths=resolve(ABSOLUTE_PATHS, absolute_paths, environ=environ),
        )
    except ConfigError as exc:
        if strict:
            raise
        warn_once(
            f"config:{exc.name}",
            "chronicle_otel: %s; recording is off until configure() is called with a valid configuration",
            exc,
        )
        defaults = resolve_settings(environ={})
        return Settings(
            enabled=False,
            service_name=None,
            session=defaults.session,
            max_attribute_length=defaults.max_attribute_length,
            genai_attributes=defaults.genai_attributes,
            openinference=defaults.openinference,
            redact=defaults.redact,
        )


def resolve_store(options: StoreFields, *, environ: Mapping[str, str] | None = None) -> StoreSettings:
    """Resolve the local-store settings of ``options`` through :data:`PARAMS`."""
    processor = resolve(STORE_PROCESSOR, options.processor, environ=environ)
    return StoreSettings(
        path=resolve(STORE_PATH, options.path, environ=environ),
        processor="simple" if processor == "simple" else "batch",
        durable=resolve(STORE_DURABLE, options.durable, environ=environ),
        buffer_bytes=resolve(STORE_BUFFER_BYTES, options.buffer_bytes, environ=environ),
        max_queue_size=resolve(STORE_MAX_QUEUE_SIZE, options.max_queue_size, environ=environ),
        keep="all" if resolve(STORE_KEEP, options.keep, environ=environ) == "all" else "boundaries",
        max_delay=resolve(STORE_MAX_DELAY, options.max_delay, environ=environ),
        on_full="drop" if resolve(QUEUE_ON_FULL, options.on_full, environ=environ) == "drop" else "block",
        compress=resolve(STORE_COMPRESS, options.compress, environ=environ),
    )
