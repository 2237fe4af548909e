"""The configuration parameter table, its resolver, the pipeline, and the direction of config's imports."""

from __future__ import annotations

import ast
import atexit
import dataclasses
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

import chronicle_otel as chronicle
from chronicle_otel import environment_variables as env
from chronicle_otel._internal import boundary_factory
from chronicle_otel.config import _config, _lifecycle
from chronicle_otel.config import params as p
from chronicle_otel.config._pipeline import Pipeline
from tests.conftest import make_recorder

PACKAGE = Path(chronicle.__file__).parent


def imported_modules(path: Path) -> set[str]:
    """Every module named by an import anywhere in ``path`` (functions and TYPE_CHECKING blocks included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            found.add(base)
            found.update(f"{base}.{alias.name}".replace("..", ".") if base else alias.name for alias in node.names)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("import_module", "__import__"):
            found.update(a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
    return found


@pytest.mark.parametrize(
    "module",
    [*sorted(str(f.relative_to(PACKAGE)) for f in (PACKAGE / "config").glob("*.py")), "_internal/boundary_factory.py"],
)
def test_configuration_never_imports_the_decorator_module(module: str) -> None:
    names = imported_modules(PACKAGE / module)
    assert names, module
    assert [n for n in names if "_boundary" in n.split(".")] == []


@pytest.mark.parametrize("module", ["config/_pipeline.py", "_internal/boundary_factory.py"])
def test_configuration_internals_never_import_config(module: str) -> None:
    names = imported_modules(PACKAGE / module)
    assert [n for n in names if n in ("..config", "chronicle_otel.config") or n.startswith("..config.")] == []


def test_the_parameter_table_imports_nothing_else_of_config() -> None:
    """export and store read the table: it never loads the pipeline, which imports them."""
    tree = ast.parse((PACKAGE / "config" / "params.py").read_text())
    relative = [(node.level, node.module or "") for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert [(level, module) for level, module in relative if level == 1 or module.startswith("config")] == []
    assert [n for n in imported_modules(PACKAGE / "config" / "params.py") if n.startswith("chronicle_otel")] == []


def test_the_decorator_module_fills_the_registry() -> None:
    from chronicle_otel.record import _boundary

    assert boundary_factory.factory() is _boundary.boundary


def test_config_boundary_without_the_decorator_module_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(boundary_factory, "_factory", None)
    local = chronicle.configure(tracer_provider=TracerProvider(), store=False, local=True)
    with pytest.raises(RuntimeError, match="import chronicle_otel"):
        local.boundary(kind="tool")


# ------------------------------------------------------------------------------------------------ the table


def test_every_parameter_has_a_unique_name_and_documented_variables() -> None:
    names = [param.name for param in p.PARAMS]
    assert len(names) == len(set(names))
    chronicle_vars = {var for param in p.PARAMS for var in param.env if var.startswith("CHRONICLE_")}
    assert chronicle_vars <= set(env.__all__)
    assert chronicle_vars == {
        env.CHRONICLE_BUILD_ID,
        env.CHRONICLE_ENABLED,
        env.CHRONICLE_EXIT_TIMEOUT,
        env.CHRONICLE_FLUSH_ON_SIGNALS,
        env.CHRONICLE_GIT_SHA,
        env.CHRONICLE_HOME,
        env.CHRONICLE_MAX_ATTRIBUTE_LENGTH,
        env.CHRONICLE_MODEL_VERSION,
        env.CHRONICLE_QUEUE_ON_FULL,
        env.CHRONICLE_STORE_MAX_DELAY,
        env.CHRONICLE_OPENINFERENCE,
        env.CHRONICLE_OTLP,
        env.CHRONICLE_PAYLOADS,
        env.CHRONICLE_PAYLOADS_SPOOL,
        env.CHRONICLE_PAYLOADS_SPOOL_BYTES,
        env.CHRONICLE_PAYLOADS_UPLOAD,
        env.CHRONICLE_PAYLOADS_ZSTD_LEVEL,
        env.CHRONICLE_PROMPT_VERSION,
        env.CHRONICLE_REDACT_KEYS,
        env.CHRONICLE_REDACT_VALUES,
        env.CHRONICLE_SESSION,
        env.CHRONICLE_STORE_KEEP,
        env.CHRONICLE_STORE_COMPRESS,
    }
    for param in p.PARAMS:
        assert (param.parse is None) == (param.env == ()), param.name


def test_every_option_field_is_a_parameter() -> None:
    names = {param.name for param in p.PARAMS}
    for options in (chronicle.StoreOptions, chronicle.CaptureOptions, chronicle.RedactionOptions):
        for f in dataclasses.fields(options):
            assert f"{options.__name__}.{f.name}" in names


@pytest.mark.parametrize(
    ("param", "arg", "environ", "expected"),
    [
        (p.ENABLED, None, {}, True),
        (p.ENABLED, None, {"CHRONICLE_ENABLED": "off"}, False),
        (p.ENABLED, True, {"CHRONICLE_ENABLED": "off"}, True),
        (p.ENABLED, None, {"CHRONICLE_ENABLED": "  "}, True),  # blank is unset
        (p.MAX_ATTRIBUTE_LENGTH, None, {}, 8192),
        (p.MAX_ATTRIBUTE_LENGTH, None, {"CHRONICLE_MAX_ATTRIBUTE_LENGTH": "1000"}, 1000),
        (p.MAX_ATTRIBUTE_LENGTH, 500, {"CHRONICLE_MAX_ATTRIBUTE_LENGTH": "1000"}, 500),
        (p.SERVICE_NAME, None, {"OTEL_SERVICE_NAME": "svc"}, "svc"),
        (p.SERVICE_NAME, "mine", {"OTEL_SERVICE_NAME": "svc"}, "mine"),
        (p.STORE_PATH, None, {}, Path(".chronicle")),
        (p.STORE_PATH, None, {"CHRONICLE_HOME": "/srv/c"}, Path("/srv/c")),
        (p.OTLP_PROTOCOL, None, {}, "http/protobuf"),
        (
            p.OTLP_PROTOCOL,
            None,
            {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
            "grpc",
        ),
        (p.OTLP, None, {}, False),
        (p.OTLP, None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}, True),
        (p.OTLP, None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "CHRONICLE_OTLP": "false"}, False),
        (p.OTLP, True, {"CHRONICLE_OTLP": "false"}, True),
        (p.REDACT_VALUE_FORMATS, None, {"CHRONICLE_REDACT_VALUES": "false"}, False),
        (p.REDACT_VALUE_FORMATS, None, {"CHRONICLE_REDACT_VALUES": "ACME-[0-9]+"}, True),
        (p.REDACT_VALUE_FORMATS, True, {"CHRONICLE_REDACT_VALUES": "false"}, True),
    ],
)
def test_argument_then_environment_then_default(
    param: p.Param[Any], arg: Any, environ: dict[str, str], expected: Any
) -> None:
    assert p.resolve(param, arg, environ=environ) == expected


def test_cumulative_parameters_add_default_variables_then_argument() -> None:
    environ = {"CHRONICLE_REDACT_KEYS": "(?i)iban, x{1,3}", "CHRONICLE_REDACT_VALUES": "false"}
    assert p.resolve(p.REDACT_KEYS, ["account_no"], environ=environ) == ("(?i)iban", "x{1,3}", "account_no")
    assert p.resolve(p.REDACT_VALUES, ["ACME-[0-9]+"], environ=environ) == ("ACME-[0-9]+",)
    environ = {"CHRONICLE_SESSION": "region=eu,build_id=a", "CHRONICLE_BUILD_ID": "b", "CHRONICLE_GIT_SHA": "3e1a"}
    session = p.resolve(p.SESSION, {"region": "us"}, environ=environ)
    assert dict(session) == {
        "region": "us",
        "build_id": "b",
        "git_sha": "3e1a",
    }


@pytest.mark.parametrize(
    ("param", "environ", "match"),
    [
        (p.ENABLED, {"CHRONICLE_ENABLED": "maybe"}, r"CHRONICLE_ENABLED: 'maybe'; expected one of true, false"),
        (p.MAX_ATTRIBUTE_LENGTH, {"CHRONICLE_MAX_ATTRIBUTE_LENGTH": "big"}, "CHRONICLE_MAX_ATTRIBUTE_LENGTH.*integer"),
        (p.MAX_ATTRIBUTE_LENGTH, {"CHRONICLE_MAX_ATTRIBUTE_LENGTH": "10"}, "CHRONICLE_MAX_ATTRIBUTE_LENGTH.*>= 64"),
        (p.SESSION, {"CHRONICLE_SESSION": "novalue"}, "CHRONICLE_SESSION.*key=value"),
        (p.SESSION, {"CHRONICLE_SESSION": "a..b=1"}, "CHRONICLE_SESSION.*dotted names"),
        (p.REDACT_KEYS, {"CHRONICLE_REDACT_KEYS": "(unclosed"}, r"CHRONICLE_REDACT_KEYS: '\(unclosed'.*regular"),
        (p.REDACT_VALUES, {"CHRONICLE_REDACT_VALUES": "x*"}, "CHRONICLE_REDACT_VALUES.*secret values"),
        (p.OTLP_PROTOCOL, {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, "TRACES_PROTOCOL.*grpc or http"),
    ],
)
def test_a_bad_variable_names_itself_and_the_accepted_values(
    param: p.Param[Any], environ: dict[str, str], match: str
) -> None:
    with pytest.raises(chronicle.ConfigError, match=match) as info:
        p.resolve(param, environ=environ)
    assert info.value.name in environ


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"enabled": "false"}, "enabled.*True or False"),
        ({"service_name": 3}, "service_name.*string"),
        ({"session": ["a"]}, "session.*mapping"),
        ({"otlp": "yes"}, "otlp"),
        ({"store": chronicle.StoreOptions(max_queue_size=0)}, "StoreOptions.max_queue_size.*>= 1"),
        ({"capture": chronicle.CaptureOptions(openinference=1)}, "CaptureOptions.openinference"),  # type: ignore[arg-type]
        ({"redaction": chronicle.RedactionOptions(keys="password")}, "RedactionOptions.keys.*not a single string"),
        ({"redaction": chronicle.RedactionOptions(keys=["(x"])}, r"RedactionOptions.keys: '\(x'"),
        ({"redaction": chronicle.RedactionOptions(redactor=object())}, "RedactionOptions.redactor"),  # type: ignore[arg-type]
    ],
)
def test_a_bad_argument_names_its_parameter(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(chronicle.ConfigError, match=match):
        chronicle.configure(tracer_provider=TracerProvider(), local=True, **kwargs)


# ------------------------------------------------------------------------------------------------ unconfigured


def test_unconfigured_defaults_resolve_through_the_same_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHRONICLE_MAX_ATTRIBUTE_LENGTH", "1000")
    monkeypatch.setenv("CHRONICLE_OPENINFERENCE", "true")
    monkeypatch.setenv("CHRONICLE_SESSION", "region=eu")
    monkeypatch.setenv("CHRONICLE_REDACT_KEYS", "(?i)iban")
    config = chronicle.get_config()
    assert config.enabled and config.max_attribute_length == 1000 and config.openinference
    assert dict(config.session) == {"chronicle.session.region": "eu"}
    assert config.redact is not None and config.redact.redact_key("iban") and config.redact.redact_key("password")
    assert config.store is None and config.exporter is None and config.processors == ()


def test_unconfigured_with_a_bad_variable_logs_once_and_records_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("CHRONICLE_SESSION", "broken")
    monkeypatch.setenv("CHRONICLE_REDACT_KEYS", "(?i)iban")
    with caplog.at_level(logging.WARNING, logger="chronicle_otel"):
        config = chronicle.get_config()

        @chronicle.boundary(name="quiet")
        def quiet(x: int) -> int:
            return x + 1

        assert quiet(1) == 2  # the call never sees the error
    assert config.enabled is False
    assert config.redact is not None and config.redact.redact_key("password")  # built-in redaction stays
    messages = [r.getMessage() for r in caplog.records if "CHRONICLE_SESSION" in r.getMessage()]
    assert len(messages) == 1 and "comma-separated key=value pairs" in messages[0]
    with pytest.raises(chronicle.ConfigError, match="CHRONICLE_SESSION"):
        chronicle.configure(tracer_provider=TracerProvider(), store=False)


# ------------------------------------------------------------------------------------------------ frozen


def test_options_and_settings_are_frozen(tmp_path: Path) -> None:
    keys = ["account_no"]
    options = chronicle.RedactionOptions(keys=keys, values=["ACME-[0-9]+"])
    keys.append("(?i)iban")
    assert options.keys == ("account_no",) and options.values == ("ACME-[0-9]+",)
    rec = make_recorder(tmp_path, session={"region": "eu"}, redaction=options)
    with pytest.raises(AttributeError):
        rec.config.enabled = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        rec.config.session["chronicle.session.region"] = "us"  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.defaults = False  # type: ignore[misc]
    assert rec.config.redact is not None and not rec.config.redact.redact_key("iban")


def test_config_delegates_live_resources_to_its_pipeline(tmp_path: Path) -> None:
    rec = make_recorder(tmp_path)
    pipeline = rec.config._pipeline
    assert rec.config.store is pipeline.store is not None
    assert rec.config.exporter is pipeline.exporter is not None
    assert rec.config.payload_buffer is pipeline.payload_buffer is pipeline.exporter.payload_buffer
    assert rec.config.tracer_provider is rec.provider and rec.config.tracer is pipeline.tracer
    assert rec.config.processors == pipeline.processors and len(pipeline.processors) == 1
    assert "ChronicleConfig(enabled=True" in repr(rec.config)


def test_pipeline_shutdown_is_idempotent_and_keeps_a_provider_it_does_not_own(tmp_path: Path) -> None:
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    store = p.StoreSettings(path=tmp_path / "s", processor="simple", durable=False, buffer_bytes=1024, max_queue_size=8)
    pipeline = Pipeline.build(
        tracer_provider=provider, reuse=None, use_global=False, service_name=None, store=store, otlp=True
    )
    assert not pipeline.owns_provider and len(pipeline.processors) == 1  # no OTLP on a provider it does not own
    pipeline.start()
    with pipeline.tracer.start_as_current_span("x"):
        pass
    assert pipeline.force_flush()
    pipeline.shutdown()
    pipeline.shutdown()
    assert pipeline.closed and pipeline.exporter is not None and pipeline.exporter._shutdown
    with provider.get_tracer("t").start_as_current_span("after"):
        pass
    assert [s.name for s in memory.get_finished_spans()] == ["x", "after"]  # the user's provider still works
    provider.shutdown()


# ------------------------------------------------------------------------------------------------ reconfiguring


@pytest.fixture
def fresh_global_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(trace, "_TRACER_PROVIDER_SET_ONCE", Once())
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    yield


def test_a_failed_reconfiguration_leaves_the_previous_one_running(
    tmp_path: Path, fresh_global_provider: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = chronicle.StoreOptions(path=tmp_path / "a", processor="simple", durable=False)
    first = chronicle.configure(store=store)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    with pytest.raises(chronicle.ConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL"):
        chronicle.configure(store=tmp_path / "b")
    assert chronicle.get_config() is first and not first._pipeline.closed

    @chronicle.boundary(name="kept")
    def kept() -> None:
        pass

    kept()
    assert first.store is not None and len(first.store.list_traces()) == 1


def test_an_otel_protocol_chronicle_does_not_use_is_not_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    config = chronicle.configure(tracer_provider=TracerProvider(), store=False, local=True)
    assert config.processors == ()


def test_atexit_flush_is_registered_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registered: list[object] = []
    monkeypatch.setattr(atexit, "register", registered.append)
    monkeypatch.setattr(_config.DEFAULT, "atexit_registered", False)
    make_recorder(tmp_path / "1")
    make_recorder(tmp_path / "2")
    chronicle.configure(tracer_provider=TracerProvider(), store=False, local=True)
    assert [f for f in registered if f is _lifecycle.shutdown_at_exit] == [_lifecycle.shutdown_at_exit]
