from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from tests.conftest import make_recorder


@pytest.fixture
def fresh_global_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Let a test set the global TracerProvider once, then restore the previous one."""
    monkeypatch.setattr(trace, "_TRACER_PROVIDER_SET_ONCE", Once())
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    yield


def simple_store(tmp_path: Path) -> chronicle.StoreOptions:
    return chronicle.StoreOptions(path=tmp_path / "store", processor="simple", durable=False)


def test_session_from_env_and_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHRONICLE_SESSION", "region=eu, tier=gold")
    monkeypatch.setenv("CHRONICLE_BUILD_ID", "env-build")
    monkeypatch.setenv("CHRONICLE_GIT_SHA", "3e1a7c4")
    rec = make_recorder(tmp_path, session={"build_id": "2026.11.29+g3e1a7c4", "model_version": "gpt-4.1-2025-04-14"})

    @chronicle.boundary(name="b")
    def b() -> None:
        pass

    b()
    attrs = rec.attrs("b")
    assert attrs[sc.SESSION_PREFIX + "region"] == "eu"
    assert attrs[sc.SESSION_PREFIX + "tier"] == "gold"
    assert attrs[sc.SESSION_PREFIX + "git_sha"] == "3e1a7c4"
    assert attrs[sc.SESSION_PREFIX + "build_id"] == "2026.11.29+g3e1a7c4"  # argument beats env
    assert attrs[sc.SESSION_PREFIX + "model_version"] == "gpt-4.1-2025-04-14"


@pytest.mark.parametrize(
    ("var", "value", "match"),
    [
        ("CHRONICLE_SESSION", "novalue", "CHRONICLE_SESSION"),
        ("CHRONICLE_ENABLED", "maybe", "CHRONICLE_ENABLED.*true, false"),
        ("CHRONICLE_MAX_ATTRIBUTE_LENGTH", "big", "CHRONICLE_MAX_ATTRIBUTE_LENGTH.*integer"),
        ("OTEL_SDK_DISABLED", "perhaps", "OTEL_SDK_DISABLED"),
    ],
)
def test_bad_env_values_name_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, var: str, value: str, match: str
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(chronicle.ConfigError, match=match):
        chronicle.configure(tracer_provider=TracerProvider(), store=tmp_path)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"store": 123}, "store"),
        ({"store": chronicle.StoreOptions(processor="eager")}, "processor"),  # type: ignore[arg-type]
        ({"capture": chronicle.CaptureOptions(max_attribute_length=10)}, "max_attribute_length"),
        ({"capture": {"max_attribute_length": 10}}, "capture"),
        ({"redaction": ["password"]}, "redaction"),
        ({"session": {"": 1}}, "session"),
        ({"session": {"a..b": 1}}, "session"),
        ({"tracer_provider": object()}, "tracer_provider"),
    ],
)
def test_bad_arguments_raise_at_once(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(chronicle.ConfigError, match=match):
        chronicle.configure(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("var", "value"), [("OTEL_SDK_DISABLED", "true"), ("CHRONICLE_ENABLED", "false")])
def test_disabled_boundaries_call_straight_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, var: str, value: str
) -> None:
    monkeypatch.setenv(var, value)
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    config = chronicle.configure(tracer_provider=provider, store=simple_store(tmp_path))
    assert config.enabled is False and config.store is None

    @chronicle.boundary(name="off")
    def off(x: int) -> int:
        return x * 2

    assert off(4) == 8
    assert memory.get_finished_spans() == ()
    assert not (tmp_path / "store").exists()


def test_enabled_argument_beats_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHRONICLE_ENABLED", "false")
    config = chronicle.configure(tracer_provider=TracerProvider(), store=simple_store(tmp_path), enabled=True)
    assert config.enabled is True


def test_uses_the_global_sdk_provider_the_user_set(tmp_path: Path, fresh_global_provider: None) -> None:
    user_provider = TracerProvider()
    memory = InMemorySpanExporter()
    user_provider.add_span_processor(SimpleSpanProcessor(memory))
    trace.set_tracer_provider(user_provider)
    config = chronicle.configure(store=simple_store(tmp_path))
    assert config.tracer_provider is user_provider and not config.owns_provider
    assert trace.get_tracer_provider() is user_provider

    @chronicle.boundary(name="x")
    def x() -> None:
        pass

    x()
    assert [s.name for s in memory.get_finished_spans()] == ["x"]
    assert config.store is not None and len(config.store.list_traces()) == 1


def test_creates_and_sets_a_provider_with_service_name(tmp_path: Path, fresh_global_provider: None) -> None:
    config = chronicle.configure(service_name="stock-agent", store=simple_store(tmp_path))
    provider = trace.get_tracer_provider()
    assert provider is config.tracer_provider and config.owns_provider
    assert isinstance(provider, TracerProvider)
    assert provider.resource.attributes["service.name"] == "stock-agent"
    assert len(config.processors) == 1  # no OTLP endpoint configured: store only


def test_service_name_from_otel_env(
    tmp_path: Path, fresh_global_provider: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    config = chronicle.configure(store=simple_store(tmp_path))
    assert isinstance(config.tracer_provider, TracerProvider)
    assert config.tracer_provider.resource.attributes["service.name"] == "from-env"


def otlp_exporter(protocol: str) -> type:
    """The OTLP span exporter class of a protocol, imported when a test asks (not when the module is collected)."""
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    return HttpExporter


@pytest.mark.parametrize(
    ("env", "protocol"),
    [
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}, "http"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"}, "http"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "grpc"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"},
            "grpc",
        ),
    ],
)
def test_adds_otlp_when_the_env_asks(
    tmp_path: Path,
    fresh_global_provider: None,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    protocol: str,
) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    config = chronicle.configure(store=simple_store(tmp_path))
    exporters = [getattr(p, "span_exporter", None) or p.exporter for p in config.processors[1:]]  # type: ignore[attr-defined]
    assert [type(e) for e in exporters] == [otlp_exporter(protocol)]


def test_bad_otlp_protocol(tmp_path: Path, fresh_global_provider: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    with pytest.raises(chronicle.ConfigError, match="grpc or http/protobuf"):
        chronicle.configure(store=simple_store(tmp_path))


def test_no_otlp_added_to_a_provider_the_user_owns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    config = chronicle.configure(tracer_provider=TracerProvider(), store=simple_store(tmp_path))
    assert len(config.processors) == 1


def test_store_false_records_spans_without_a_store(tmp_path: Path) -> None:
    rec = make_recorder(tmp_path, store=False)
    assert rec.config.store is None and rec.config.processors == ()

    @chronicle.boundary(name="nostore")
    def nostore() -> int:
        return 1

    nostore()
    assert [s.name for s in rec.spans()] == ["nostore"]


def test_redaction_false_and_extra_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHRONICLE_REDACT_KEYS", "(?i)iban")
    rec = make_recorder(tmp_path, redaction=chronicle.RedactionOptions(keys=[r"account_no"]))

    @chronicle.boundary(name="pay")
    def pay(account_no: str, iban: str, password: str) -> None:
        pass

    pay("123", "DE00", "pw")
    assert rec.io("pay", sc.INPUT) == {"account_no": "[REDACTED]", "iban": "[REDACTED]", "password": "[REDACTED]"}

    rec2 = make_recorder(tmp_path / "2", redaction=False)
    pay("123", "DE00", "pw")
    assert rec2.io("pay", sc.INPUT) == {"account_no": "123", "iban": "DE00", "password": "pw"}


def test_local_configuration_is_isolated(tmp_path: Path) -> None:
    global_rec = make_recorder(tmp_path / "global")
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    local = chronicle.configure(tracer_provider=provider, store=simple_store(tmp_path / "local"), local=True)
    assert chronicle.get_config() is global_rec.config

    @local.boundary(name="mine", kind="tool")
    def mine() -> None:
        pass

    mine()
    assert [s.name for s in memory.get_finished_spans()] == ["mine"]
    assert global_rec.spans() == []
    local.shutdown()


def test_reconfigure_replaces_the_previous_configuration(tmp_path: Path) -> None:
    first = make_recorder(tmp_path / "one")
    second = make_recorder(tmp_path / "two")

    @chronicle.boundary(name="r")
    def r() -> None:
        pass

    r()
    assert first.spans() == [] and [s.name for s in second.spans()] == ["r"]
    assert first.config.exporter is not None and first.config.exporter._shutdown


def test_reconfigure_keeps_the_provider_chronicle_created(tmp_path: Path, fresh_global_provider: None) -> None:
    one = chronicle.configure(store=simple_store(tmp_path / "a"))
    two = chronicle.configure(store=simple_store(tmp_path / "b"))
    assert two.tracer_provider is one.tracer_provider is trace.get_tracer_provider()

    @chronicle.boundary(name="still")
    def still() -> None:
        pass

    still()
    assert two.store is not None and len(two.store.list_traces()) == 1


def test_import_touches_neither_env_nor_global_provider() -> None:
    code = "import chronicle_otel, opentelemetry.trace as t;p = t.get_tracer_provider();print(type(p).__name__)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"CHRONICLE_SESSION": "broken"}
    )
    assert out.stdout.strip() == "ProxyTracerProvider"


def test_spans_of_a_normal_run_are_flushed_at_exit(tmp_path: Path) -> None:
    code = (
        "import chronicle_otel as c\n"
        f"c.configure(store={str(tmp_path / 'exit')!r}, otlp=False)\n"
        "@c.boundary(name='last')\n"
        "def last(): return 1\n"
        "for _ in range(7): last()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[3])
    with contextlib.closing(chronicle.LocalStore(tmp_path / "exit")) as store:
        assert len(store.list_traces()) == 7


@pytest.mark.parametrize("variable", ["OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT"])
def test_an_sdk_limit_variable_the_sdk_refuses_is_a_config_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, "abc")
    with pytest.raises(chronicle.ConfigError, match=f"invalid value for {variable}: 'abc'") as info:
        chronicle.configure(store=False, local=True)
    assert info.value.name == variable


def test_configure_again_on_the_same_provider_counts_no_span_as_dropped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The old processors stay on the provider, stopped: the spans the new configuration takes, or that it does not
    record (enabled=False), are no loss of the old one."""
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    first = chronicle.configure(tracer_provider=provider, store=chronicle.StoreOptions(path=tmp_path / "s"))
    second = chronicle.configure(tracer_provider=provider, store=chronicle.StoreOptions(path=tmp_path / "s"))
    third = chronicle.configure(tracer_provider=provider, enabled=False)
    with caplog.at_level("WARNING", logger="chronicle_otel"):
        for i in range(3):
            provider.get_tracer("app").start_span(f"request-{i}").end()
    assert first.stats().dropped == 0 and second.stats().dropped == 0
    assert not [r for r in caplog.records if "after the store export was shut down" in r.getMessage()]
    third.shutdown()
