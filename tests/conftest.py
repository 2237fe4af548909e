from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, settings
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel._internal import errors as internal_errors
from chronicle_otel.config import _lifecycle as config_lifecycle

# chronicle's own plugin, loaded here rather than from its entry point (disabled in pyproject.toml): the entry point
# imports the package before pytest-cov starts measuring, and the module-level lines of everything it imports would
# count as missed.
pytest_plugins = ["pytester", "chronicle_otel.pytest_plugin"]

# pytest rewrites the asserts of every test module it imports, and caches the result beside it (in __pycache__,
# ignored by git) unless bytecode writing is off: with PYTHONDONTWRITEBYTECODE set, each run (and each xdist worker)
# would rewrite and compile the whole suite again, a third of the collection time. The test modules imported from
# here on are cached; subprocesses keep the environment as it is.
sys.dont_write_bytecode = False

# LiteLLM fetches its price list and Anthropic beta headers from the internet when first imported, and retries in a
# background thread: whichever test imports it first, it reads its bundled copies instead.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")


# Property tests run beside the rest of the suite on two workers (and in CI beside a collector and a backend):
# generating an example may then take longer than Hypothesis's health checks allow, which fails a test whose property
# holds. Those checks measure the machine, not the code; a failing example is still reported, with the blob that
# reproduces it (@reproduce_failure).
settings.register_profile(
    "chronicle",
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.load_profile("chronicle")


_PROXY_VARIABLES = frozenset({"http_proxy", "https_proxy", "all_proxy", "no_proxy"})
"""The SDKs' HTTP clients read them: a request for a loopback test server must never go to a proxy."""


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """No CHRONICLE_*, OTEL_* or AWS_* variable from the outside leaks into a test; an AWS credential lookup can
    never leave the machine (the instance metadata endpoint is a dead loopback port)."""
    for name in list(os.environ):
        if name.startswith(("CHRONICLE_", "OTEL_", "AWS_")) or name.lower() in _PROXY_VARIABLES:
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_METADATA_ENDPOINT", "http://127.0.0.1:9")


@pytest.fixture(autouse=True)
def raise_internal_errors(request: pytest.FixtureRequest) -> Iterator[None]:
    """chronicle's own bugs fail our tests; tests of the failure policy opt out with `swallow_internal_errors`."""
    swallow = "swallow_internal_errors" in request.fixturenames
    internal_errors.RAISE_INTERNAL_ERRORS = not swallow
    internal_errors.reset_seen()
    yield
    internal_errors.RAISE_INTERNAL_ERRORS = False
    config_lifecycle.reset_for_tests()


@pytest.fixture
def swallow_internal_errors() -> None:
    """Run with the production failure policy: internal errors are logged and swallowed."""


@dataclass
class Recorder:
    provider: TracerProvider
    memory: InMemorySpanExporter
    config: chronicle.ChronicleConfig
    path: Path

    @property
    def store(self) -> chronicle.LocalStore:
        assert self.config.store is not None
        return self.config.store

    def spans(self) -> list[ReadableSpan]:
        return list(self.memory.get_finished_spans())

    def span(self, name: str) -> ReadableSpan:
        found = [s for s in self.spans() if s.name == name]
        assert len(found) == 1, f"expected one span {name!r}, got {[s.name for s in self.spans()]}"
        return found[0]

    def attrs(self, name: str) -> dict[str, Any]:
        return dict(self.span(name).attributes or {})

    def io(self, name: str, key: str = sc.OUTPUT) -> Any:
        """The decoded JSON of a payload attribute of the one span called ``name``."""
        return orjson.loads(self.attrs(name)[key])


def make_recorder(tmp_path: Path, **options: Any) -> Recorder:
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    store = options.pop(
        "store", chronicle.StoreOptions(path=tmp_path / ".chronicle", processor="simple", durable=False)
    )
    config = chronicle.configure(tracer_provider=provider, store=store, **options)
    return Recorder(provider, memory, config, tmp_path / ".chronicle")


@pytest.fixture
def recorder(tmp_path: Path) -> Recorder:
    """A fresh TracerProvider + in-memory exporter + local store in tmp_path, configured process-wide."""
    return make_recorder(tmp_path)
