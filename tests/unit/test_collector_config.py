"""The collector configs users start from: every pipeline names components that are defined."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CONFIGS = sorted((REPO / "collector-config").glob("*.yaml"))


def test_configs_exist() -> None:
    assert {p.name for p in CONFIGS} == {"otelcol.yaml", "otelcol-tail-sampling.yaml"}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_pipelines_name_defined_components(path: Path) -> None:
    config: dict[str, Any] = yaml.safe_load(path.read_text())
    pipelines = config["service"]["pipelines"]
    assert "traces" in pipelines
    for name, pipeline in pipelines.items():
        for section in ("receivers", "processors", "exporters"):
            for component in pipeline.get(section, []):
                assert component in (config.get(section) or {}), (
                    f"{path.name}: {name}.{section} uses undefined {component}"
                )
    for extension in config["service"].get("extensions", []):
        assert extension in config["extensions"]
    traces = pipelines["traces"]
    assert traces["processors"][0] == "memory_limiter" and traces["processors"][-1] == "batch"
    assert "file/traces" in traces["exporters"]
    file_exporter = config["exporters"]["file/traces"]
    assert file_exporter["format"] == "json"  # the shape chronicle pull reads line by line
    assert config["receivers"]["otlp"]["protocols"]["grpc"]["max_recv_msg_size_mib"] >= 16


def test_tail_sampling_keeps_every_trace_with_an_error() -> None:
    config = yaml.safe_load((REPO / "collector-config" / "otelcol-tail-sampling.yaml").read_text())
    policies = config["processors"]["tail_sampling"]["policies"]
    by_type = {p["type"]: p for p in policies}
    assert by_type["status_code"]["status_code"]["status_codes"] == ["ERROR"]
    assert any("chronicle.error.hash" in cond for cond in by_type["ottl_condition"]["ottl_condition"]["span"])


def test_compose_mounts_the_config_and_the_file_exporter_output() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"otel-collector", "jaeger", "phoenix"} <= set(services)
    collector = services["otel-collector"]
    mounts = {m.split(":")[1]: m.split(":")[0] for m in collector["volumes"]}
    config_file = mounts["/etc/otelcol/otelcol.yaml"]
    assert (REPO / config_file).exists()
    config = yaml.safe_load((REPO / config_file).read_text())
    out_dir = str(Path(config["exporters"]["file/traces"]["path"]).parent)
    assert out_dir in mounts
    for exporter in ("otlp/jaeger", "otlphttp/phoenix"):
        host = config["exporters"][exporter]["endpoint"].split("//")[-1].split(":")[0]
        assert host in services, f"{exporter} points at {host}, which compose does not run"


def test_rotel_settings_are_env_assignments() -> None:
    lines = [
        line
        for line in (REPO / "collector-config" / "rotel.env").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert lines and all(line.startswith("ROTEL_") and "=" in line for line in lines)
    assert "ROTEL_OTLP_GRPC_MAX_RECV_MSG_SIZE_MIB=64" in lines


def test_compose_gives_apps_a_payload_bucket_they_can_write() -> None:
    import json

    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    app = compose["x-chronicle-app-environment"]
    endpoint_host = app["AWS_ENDPOINT_URL_S3"].split("//")[-1].split(":")[0]
    assert endpoint_host in services
    s3 = services[endpoint_host]
    mounts = {m.split(":")[1]: m.split(":")[0] for m in s3["volumes"] if m.count(":") >= 1}
    identities = json.loads((REPO / mounts["/etc/seaweedfs/s3.json"]).read_text())["identities"]
    keys = {(c["accessKey"], c["secretKey"]) for ident in identities for c in ident["credentials"]}
    assert (app["AWS_ACCESS_KEY_ID"], app["AWS_SECRET_ACCESS_KEY"]) in keys
    bucket = app["CHRONICLE_PAYLOADS"].removeprefix("s3://").split("/")[0]
    assert f"s3://{bucket}" in " ".join(services["payload-bucket"]["command"])


def test_compose_matches_the_tested_phoenix_and_keeps_its_data() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    makefile = (REPO / "Makefile").read_text()
    tested = next(line.split(":=")[1].strip() for line in makefile.splitlines() if line.startswith("PHOENIX_VERSION"))
    phoenix = compose["services"]["phoenix"]
    assert phoenix["image"].endswith(f"version-{tested}")
    workdir = phoenix["environment"]["PHOENIX_WORKING_DIR"]
    assert any(m.split(":")[1] == workdir and m.split(":")[0] in compose["volumes"] for m in phoenix["volumes"])


def test_compose_makes_the_file_exporter_directory_writable_for_the_collector_user() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    collector = services["otel-collector"]
    out_host = next(m.split(":")[0] for m in collector["volumes"] if m.split(":")[1] == "/var/lib/otelcol")
    init = services["collector-out"]
    assert any(m.split(":")[0] == out_host for m in init["volumes"])
    assert "chown 10001:10001" in " ".join(init["command"])
    assert collector["depends_on"]["collector-out"]["condition"] == "service_completed_successfully"


def test_compose_app_environment_exports_otlp_http_to_the_http_port() -> None:
    # The port 4318 takes OTLP/HTTP; an app under opentelemetry-instrument would otherwise send gRPC there.
    app = yaml.safe_load((REPO / "docker-compose.yml").read_text())["x-chronicle-app-environment"]
    assert app["OTEL_EXPORTER_OTLP_ENDPOINT"].endswith(":4318")
    assert app["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
