"""Configuration: where spans and payloads go, what is captured, what is redacted.

Usage::

    import chronicle_otel as chronicle

    chronicle.configure(
        service_name="stock-agent",
        session={"build_id": "2026.11.29+g3e1a7c4"},
        store=chronicle.StoreOptions(path="/var/lib/agent/.chronicle"),
        capture=chronicle.CaptureOptions(max_attribute_length=16_384),
        redaction=chronicle.RedactionOptions(keys=[r"(?i)account[_-]?number"], values=[r"ACME-[0-9]{8}"]),
    )

Every setting resolves in this order: the argument, then its ``CHRONICLE_*`` environment variable
(see :mod:`chronicle_otel.environment_variables`), then the default.

TracerProvider: ``configure`` adds chronicle's span processor to the provider you pass
(``tracer_provider=``), else to the global SDK provider you have already set, else it creates one
(with ``service.name``), sets it as the global provider and, when ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set, adds an OTLP exporter (protocol from
``OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL``, default ``http/protobuf``). It never replaces a provider
you have set. ``OTEL_SDK_DISABLED=true`` or ``CHRONICLE_ENABLED=false`` turn recording off:
boundaries then call straight through.

Spans are flushed at interpreter exit, so no span of a normal run is lost.
"""

from __future__ import annotations

import atexit
import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from opentelemetry import trace as trace_api
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter

from . import environment_variables as env
from ._internal.buffer import DEFAULT_MAX_BYTES, PayloadBuffer
from ._internal.errors import log_once
from ._session import AttributeValue, session_attributes
from .errors import ConfigError
from .export import ChronicleExporter
from .redact import DEFAULT_SECRET_PATTERN, DEFAULT_VALUE_PATTERNS, PatternRedactor, Redactor, _chain
from .store import LocalStore
from .version import __version__

if TYPE_CHECKING:
    from ._boundary import BoundaryDecorator, BoundaryKind

__all__ = ["CaptureOptions", "ChronicleConfig", "RedactionOptions", "StoreOptions", "configure", "get_config"]

_INSTRUMENTATION_NAME = "chronicle_otel"
_DEFAULT_MAX_ATTRIBUTE_LENGTH = 8192


@dataclass(frozen=True)
class StoreOptions:
    """Where and how the embedded local store records spans and payloads."""

    path: str | os.PathLike[str] | None = None
    """Store directory. Default: ``$CHRONICLE_HOME``, else ``./.chronicle``."""
    processor: Literal["batch", "simple"] = "batch"
    """``batch`` exports on a background thread (production); ``simple`` exports as each span ends (tests, scripts)."""
    durable: bool = True
    """fsync span segments before indexing them, so a committed batch survives power loss."""
    buffer_bytes: int = DEFAULT_MAX_BYTES
    """Capacity of the in-memory hand-off of truncated payloads to the exporter thread."""
    max_queue_size: int = 16_384
    """Spans the batch processor holds before it drops (the SDK default is 2048): bursts of calls are kept."""


@dataclass(frozen=True)
class CaptureOptions:
    """What boundary spans capture."""

    max_attribute_length: int | None = None
    """Cap, in characters, of ``chronicle.input``/``output``/``error`` attributes; longer payloads keep a
    prefix with ``*.truncated`` set, and the store keeps the whole. Default: ``$CHRONICLE_MAX_ATTRIBUTE_LENGTH``
    or 8192. A lower SDK attribute limit (``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``) wins, so the SDK never cuts a
    payload behind chronicle's back."""
    genai_attributes: bool = True
    """Write OTel GenAI attributes (``gen_ai.request.model``, token usage…) on ``llm`` boundaries."""
    openinference: bool | None = None
    """Also write the OpenInference attributes (``openinference.span.kind``, ``input.value``/``output.value`` and
    mime types) so Phoenix renders boundaries natively. Default: ``$CHRONICLE_OPENINFERENCE`` or False."""


@dataclass(frozen=True)
class RedactionOptions:
    """What is replaced by ``[REDACTED]`` before it leaves the process (see :mod:`chronicle_otel.redact`).

    A value is redacted whole when its argument name or mapping key matches a key pattern (by default:
    passwords, secrets, API keys, tokens, authorization headers, cookies, private keys, connection
    strings, card numbers; :data:`chronicle_otel.redact.DEFAULT_KEY_PATTERNS`). Every string of a payload,
    an exception's text and a session variable is also searched for secret value formats (OpenAI,
    Anthropic, AWS, GitHub, Slack, Stripe and Google keys, JWTs, ``Bearer``/``Basic`` credentials, PEM
    private keys, URL passwords; :data:`chronicle_otel.redact.DEFAULT_VALUE_PATTERNS`), and only the secret
    is replaced.

    Example::

        RedactionOptions(keys=[r"(?i)iban"], values=[r"ACME-[0-9]{8}"])
    """

    keys: Sequence[str] = ()
    """Extra regular expressions a secret key name fully matches, added to the defaults and
    ``$CHRONICLE_REDACT_KEYS``."""
    defaults: bool = True
    """Include the built-in key patterns."""
    values: Sequence[str] = ()
    """Extra regular expressions for secret values, searched in every string, added to the built-in formats and
    ``$CHRONICLE_REDACT_VALUES``. A match is replaced; where the pattern has a group named ``secret``, only that
    group is."""
    value_defaults: bool | None = None
    """Search for the built-in secret value formats. Default: True, unless ``$CHRONICLE_REDACT_VALUES`` is
    ``false`` (which also drops its own extra patterns)."""
    redactor: Redactor | None = None
    """Your own :class:`~chronicle_otel.redact.Redactor`, asked after the patterns; its exceptions are logged
    once and swallowed (what it was asked about is then redacted whole)."""


def _env_bool(name: str) -> bool | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigError(name, raw, "one of true, false, 1, 0, yes, no, on, off")


def _env_int(name: str) -> int | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(name, raw, "an integer") from None


def _env_session() -> dict[str, str]:
    values: dict[str, str] = {}
    raw = os.environ.get(env.CHRONICLE_SESSION, "")
    for part in raw.split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ConfigError(env.CHRONICLE_SESSION, raw, "comma-separated key=value pairs")
        values[key.strip()] = value.strip()
    for var, key in (
        (env.CHRONICLE_BUILD_ID, "build_id"),
        (env.CHRONICLE_GIT_SHA, "git_sha"),
        (env.CHRONICLE_MODEL_VERSION, "model_version"),
        (env.CHRONICLE_PROMPT_VERSION, "prompt_version"),
    ):
        if os.environ.get(var):
            values[key] = os.environ[var]
    return values


def _sdk_attribute_limit(provider: Any) -> int | None:
    limits = getattr(provider, "_span_limits", None)
    value = getattr(limits, "max_span_attribute_length", None)
    return value if isinstance(value, int) and value > 0 else None


@dataclass
class ChronicleConfig:
    """The resolved configuration :func:`configure` returns; boundaries read it at call time.

    Attributes:
        enabled: False when recording is off (boundaries call straight through).
        service_name: ``service.name`` of spans when chronicle created the provider.
        session: process-wide session variables as ``chronicle.session.*`` attributes.
        tracer_provider: the provider boundary spans are created with.
        exporter: the :class:`ChronicleExporter`, or None when the store is off.
        store: the :class:`LocalStore`, or None.
        max_attribute_length: effective cap of payload attributes, in characters.
        genai_attributes: write GenAI attributes on ``llm`` boundaries.
        openinference: write the OpenInference attributes too.
        redact: the :class:`~chronicle_otel.redact.Redactor` that payloads, errors, session variables and replay
            comparisons go through; None when redaction is off (``redaction=False``).
    """

    enabled: bool
    service_name: str | None
    session: Mapping[str, AttributeValue]
    tracer_provider: trace_api.TracerProvider | None
    exporter: ChronicleExporter | None
    store: LocalStore | None
    max_attribute_length: int
    genai_attributes: bool
    openinference: bool = False
    redact: Redactor | None = field(repr=False, default=None)
    payload_buffer: PayloadBuffer | None = field(repr=False, default=None)
    processors: list[SpanProcessor] = field(repr=False, default_factory=list)
    owns_provider: bool = field(repr=False, default=False)
    tracer: trace_api.Tracer = field(init=False, repr=False)
    _closed: bool = field(init=False, repr=False, default=False)

    def __post_init__(self) -> None:
        provider = self.tracer_provider or trace_api.get_tracer_provider()
        self.tracer = provider.get_tracer(_INSTRUMENTATION_NAME, __version__)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export every finished span now; True when all processors flushed in time."""
        ok = True
        for processor in self.processors:
            try:
                ok = bool(processor.force_flush(timeout_millis)) and ok
            except Exception as exc:
                log_once("flushing spans", exc)
                ok = False
        return ok

    def shutdown(self, *, provider: bool = True) -> None:
        """Flush and stop chronicle's processors (and the provider, if chronicle created it). Idempotent.

        Args:
            provider: also shut down the TracerProvider when chronicle created it.
        """
        if self._closed:
            return
        self._closed = True
        for processor in self.processors:
            try:
                processor.shutdown()
            except Exception as exc:
                log_once("shutting down a span processor", exc)
        if provider and self.owns_provider and isinstance(self.tracer_provider, TracerProvider):
            try:
                self.tracer_provider.shutdown()
            except Exception as exc:
                log_once("shutting down the tracer provider", exc)

    def boundary(
        self,
        *,
        name: str | None = None,
        kind: BoundaryKind | str = "custom",
        attributes: Mapping[str, AttributeValue] | None = None,
        enabled: bool | Any = True,
        provider: str | None = None,
    ) -> BoundaryDecorator:
        """Like :func:`chronicle_otel.boundary`, bound to this configuration (see ``configure(local=True)``)."""
        from ._boundary import boundary

        return boundary(name=name, kind=kind, attributes=attributes, enabled=enabled, provider=provider, config=self)


class _Slot:
    """The process-wide configuration read by boundaries defined at module level."""

    def __init__(self) -> None:
        self.config: ChronicleConfig | None = None
        self.lock = threading.Lock()
        self.atexit_registered = False


_DEFAULT = _Slot()


def get_config() -> ChronicleConfig:
    """The active process-wide configuration; before :func:`configure`, a store-less default.

    Without ``configure()``, boundary spans go to the global TracerProvider (if the application set
    one) but nothing is written to the local store.
    """
    config = _DEFAULT.config
    if config is None:
        with _DEFAULT.lock:
            config = _DEFAULT.config
            if config is None:
                config = _DEFAULT.config = _unconfigured()
    return config


def _unconfigured() -> ChronicleConfig:
    disabled = bool(_env_bool("OTEL_SDK_DISABLED")) or _env_bool(env.CHRONICLE_ENABLED) is False
    redact = _redactor(RedactionOptions())
    return ChronicleConfig(
        enabled=not disabled,
        service_name=None,
        session=session_attributes(_env_session(), redact),
        tracer_provider=None,
        exporter=None,
        store=None,
        max_attribute_length=_env_int(env.CHRONICLE_MAX_ATTRIBUTE_LENGTH) or _DEFAULT_MAX_ATTRIBUTE_LENGTH,
        genai_attributes=True,
        openinference=bool(_env_bool(env.CHRONICLE_OPENINFERENCE)),
        redact=redact,
    )


def _env_patterns(name: str) -> list[str]:
    """Comma-separated regular expressions; a comma inside ``{m,n}`` belongs to its pattern."""
    raw = os.environ.get(name, "")
    return [p.strip() for p in re.split(r",(?![^{}]*\})", raw) if p.strip()]


def _check_keys(source: str, patterns: Sequence[str]) -> None:
    for pattern in patterns:
        try:
            re.compile(pattern)
        except (re.error, TypeError) as exc:
            raise ConfigError(source, pattern, f"a regular expression ({exc})") from None


def _check_values(source: str, patterns: Sequence[str]) -> None:
    for pattern in patterns:
        try:
            PatternRedactor(keys=(), values=[pattern], formats=())
        except (ValueError, TypeError) as exc:
            raise ConfigError(source, pattern, f"a regular expression for secret values ({exc})") from None


def _redactor(options: RedactionOptions) -> Redactor:
    """The redactor of a configuration: key patterns, value patterns, then the user's own."""
    env_keys = _env_patterns(env.CHRONICLE_REDACT_KEYS)
    _check_keys("RedactionOptions.keys", options.keys)
    _check_keys(env.CHRONICLE_REDACT_KEYS, env_keys)
    keys = [DEFAULT_SECRET_PATTERN] if options.defaults else []
    keys.extend(options.keys)
    keys.extend(env_keys)
    env_off = os.environ.get(env.CHRONICLE_REDACT_VALUES, "").strip().lower() in ("false", "0", "no", "off")
    env_values = [] if env_off else _env_patterns(env.CHRONICLE_REDACT_VALUES)
    _check_values("RedactionOptions.values", options.values)
    _check_values(env.CHRONICLE_REDACT_VALUES, env_values)
    formats = options.value_defaults if options.value_defaults is not None else not env_off
    if options.redactor is not None and not isinstance(options.redactor, Redactor):
        raise ConfigError(
            "RedactionOptions.redactor", options.redactor, "an object with redact_key() and redact_text()"
        )
    patterns = PatternRedactor(
        keys=keys,
        values=[*options.values, *env_values],
        formats=tuple(DEFAULT_VALUE_PATTERNS) if formats else (),
    )
    return _chain(patterns, options.redactor)


def _otlp_exporter() -> SpanExporter:
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or ""
    ).strip() or "http/protobuf"
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter()
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        return HttpExporter()
    raise ConfigError("OTEL_EXPORTER_OTLP_PROTOCOL", protocol, "grpc or http/protobuf")


def configure(
    *,
    service_name: str | None = None,
    session: Mapping[str, Any] | None = None,
    tracer_provider: TracerProvider | None = None,
    store: StoreOptions | str | os.PathLike[str] | Literal[False] | None = None,
    capture: CaptureOptions | None = None,
    redaction: RedactionOptions | Literal[False] | None = None,
    otlp: bool | None = None,
    enabled: bool | None = None,
    local: bool = False,
) -> ChronicleConfig:
    """Configure chronicle_otel for this process (or, with ``local=True``, an isolated instance).

    Each setting resolves as: argument, then environment variable, then default.

    Args:
        service_name: ``service.name`` of the provider chronicle creates. Default: ``$OTEL_SERVICE_NAME``.
        session: process-wide session variables (``build_id``, ``git_sha``, ``model_version``…) stamped on every
            boundary span; merged over ``$CHRONICLE_SESSION`` and ``$CHRONICLE_BUILD_ID`` & co.
        tracer_provider: the SDK provider to add chronicle's processor to. Default: the global SDK provider
            if one is set, else a new one that becomes the global provider.
        store: :class:`StoreOptions`, a store directory, or ``False`` for no local store.
        capture: :class:`CaptureOptions`.
        redaction: :class:`RedactionOptions`, or ``False`` to redact nothing (neither key names nor value formats).
        otlp: add an OTLP exporter to a provider chronicle creates. Default: ``$CHRONICLE_OTLP``, else when
            ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set.
        enabled: False to turn recording off. Default: ``$CHRONICLE_ENABLED``, off when ``OTEL_SDK_DISABLED=true``.
        local: return an independent configuration (use ``config.boundary(...)``) instead of replacing the
            process-wide one; chronicle then never touches the global provider.

    Returns:
        The resolved :class:`ChronicleConfig`.

    Raises:
        ConfigError: an argument or environment variable has an invalid value.
    """
    if store is not None and store is not False and not isinstance(store, (StoreOptions, str, os.PathLike)):
        raise ConfigError("store", store, "StoreOptions, a directory path, False or None")
    if capture is not None and not isinstance(capture, CaptureOptions):
        raise ConfigError("capture", capture, "CaptureOptions or None")
    if redaction is not None and redaction is not False and not isinstance(redaction, RedactionOptions):
        raise ConfigError("redaction", redaction, "RedactionOptions, False or None")
    if tracer_provider is not None and not isinstance(tracer_provider, TracerProvider):
        raise ConfigError("tracer_provider", tracer_provider, "an opentelemetry.sdk.trace.TracerProvider")

    store_opts = StoreOptions(path=store) if isinstance(store, (str, os.PathLike)) else store
    if isinstance(store_opts, StoreOptions) and store_opts.processor not in ("batch", "simple"):
        raise ConfigError("StoreOptions.processor", store_opts.processor, "'batch' or 'simple'")
    capture = capture or CaptureOptions()
    max_len = capture.max_attribute_length
    if max_len is None:
        max_len = _env_int(env.CHRONICLE_MAX_ATTRIBUTE_LENGTH) or _DEFAULT_MAX_ATTRIBUTE_LENGTH
    if max_len < 64:
        raise ConfigError("max_attribute_length", max_len, "an integer >= 64")
    openinference = capture.openinference
    if openinference is None:
        openinference = bool(_env_bool(env.CHRONICLE_OPENINFERENCE))

    sdk_disabled = bool(_env_bool("OTEL_SDK_DISABLED"))
    if enabled is None:
        enabled = _env_bool(env.CHRONICLE_ENABLED)
        enabled = True if enabled is None else enabled
    enabled = enabled and not sdk_disabled

    redact = None if redaction is False else _redactor(redaction or RedactionOptions())
    values = _env_session()
    values.update(session or {})
    try:
        session_attrs = session_attributes(values, redact)
    except ValueError as exc:
        raise ConfigError("session", session, str(exc)) from None

    service_name = service_name or os.environ.get("OTEL_SERVICE_NAME") or None

    reuse: TracerProvider | None = None
    if not local:
        previous = _DEFAULT.config
        if previous is not None:
            # Reconfiguring: stop the old processors; keep a provider chronicle created (it is the global one).
            if (
                previous.owns_provider
                and tracer_provider is None
                and isinstance(previous.tracer_provider, TracerProvider)
            ):
                reuse = previous.tracer_provider
            previous.shutdown(provider=reuse is None)

    provider: TracerProvider | None = tracer_provider
    owns = created = False
    processors: list[SpanProcessor] = []
    exporter = None
    local_store = None
    buffer = None
    if enabled:
        if reuse is not None:
            provider, owns = reuse, True
        else:
            provider, owns = _resolve_provider(tracer_provider, service_name, local)
            created = owns
        sdk_limit = _sdk_attribute_limit(provider)
        if sdk_limit is not None:
            max_len = min(max_len, sdk_limit)
        if store_opts is not False:
            opts = store_opts or StoreOptions()
            local_store = LocalStore(opts.path, durable=opts.durable)
            buffer = PayloadBuffer(opts.buffer_bytes)
            exporter = ChronicleExporter(local_store, payload_buffer=buffer)
            processors.append(
                SimpleSpanProcessor(exporter)
                if opts.processor == "simple"
                else BatchSpanProcessor(exporter, max_queue_size=opts.max_queue_size, max_export_batch_size=2048)
            )
        if owns and _want_otlp(otlp):
            processors.append(BatchSpanProcessor(_otlp_exporter()))
        for processor in processors:
            provider.add_span_processor(processor)

    config = ChronicleConfig(
        enabled=enabled,
        service_name=service_name,
        session=session_attrs,
        tracer_provider=provider,
        exporter=exporter,
        store=local_store,
        max_attribute_length=max_len,
        genai_attributes=capture.genai_attributes,
        openinference=openinference,
        redact=redact,
        payload_buffer=buffer,
        processors=processors,
        owns_provider=owns,
    )
    if not local:
        _DEFAULT.config = config
        if created and provider is not None:
            trace_api.set_tracer_provider(provider)
        with _DEFAULT.lock:
            if not _DEFAULT.atexit_registered:
                atexit.register(_shutdown_at_exit)
                _DEFAULT.atexit_registered = True
    return config


def _want_otlp(otlp: bool | None) -> bool:
    want = otlp if otlp is not None else _env_bool(env.CHRONICLE_OTLP)
    if want is None:
        want = bool(
            os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        )
    return want


def _resolve_provider(
    given: TracerProvider | None, service_name: str | None, local: bool
) -> tuple[TracerProvider, bool]:
    if given is not None:
        return given, False
    if not local:
        current = trace_api.get_tracer_provider()
        if isinstance(current, TracerProvider):
            return current, False
    resource = Resource.create({SERVICE_NAME: service_name} if service_name else {})
    return TracerProvider(resource=resource), True


def _shutdown_at_exit() -> None:
    config = _DEFAULT.config
    if config is not None:
        config.shutdown()


def _reset_for_tests() -> None:
    """Shut down and forget the process-wide configuration."""
    config = _DEFAULT.config
    _DEFAULT.config = None
    if config is not None:
        config.shutdown()
