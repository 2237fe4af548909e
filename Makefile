# One command set for developers, pre-commit and CI. Each target creates what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ROTEL_VENV := .venv-rotel
ROTEL_VERSION := 0.0.1a15

.PHONY: install install-services demo test test-unit test-oldest lint format typecheck bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e . --group dev
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

install-services: $(ROTEL_VENV)/.installed $(PHOENIX_VENV)/.installed

ROTEL_BIN = $(shell $(ROTEL_VENV)/bin/python -c 'import os, rotel; print(os.path.join(os.path.dirname(rotel.__file__), "rotel-agent"))' 2>/dev/null)

demo: install
	$(BIN)/python -m examples.stock_agent.demo

# The whole suite, real services included, under branch coverage (gated in pyproject.toml).
test: install install-services
	CHRONICLE_TEST_ROTEL=$(ROTEL_BIN) CHRONICLE_TEST_PHOENIX=$(PHOENIX_VENV)/bin/phoenix $(BIN)/python -m coverage run -m pytest
	$(BIN)/python -m coverage report

test-unit: install
	$(BIN)/python -m pytest tests/unit

# The unit suite against the oldest supported wrapt (1.x) and OpenTelemetry SDK, in its own virtualenv.
OLDEST := .venv-oldest
$(OLDEST)/.installed: pyproject.toml tests/constraints-oldest.txt
	$(PYTHON) -m venv $(OLDEST)
	$(OLDEST)/bin/python -m pip install -q --upgrade pip
	$(OLDEST)/bin/python -m pip install -q -c tests/constraints-oldest.txt -e . --group dev
	touch $@

test-oldest: $(OLDEST)/.installed
	$(OLDEST)/bin/python -m pytest tests/unit

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

typecheck: install
	$(BIN)/mypy

bench: install
	$(BIN)/python benchmarks/overhead.py

clean:
	rm -rf $(VENV) $(ROTEL_VENV) $(PHOENIX_VENV) $(OLDEST) .pytest_cache .mypy_cache .ruff_cache .hypothesis .benchmarks
