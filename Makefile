# The two commands of the quick start: `make demo` and `make test`. Both set up .venv first:
# `make demo` with the base package only (all the demo needs), `make test` with everything (dbt,
# Prefect, Metaflow, psycopg and the tools), at the versions pinned in requirements-dev.txt. The
# tests start their own PostgreSQL server (tests/postgres.py): the system's where it has one, else
# the one the pgserver package ships.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BASE_STAMP := $(VENV)/.installed-base
# Test-only: Mermaid's own parser (npm's mermaid, pinned by tests/mermaid/package-lock.json), which
# tests/test_render.py runs under Node to check `olbridge lineage --format mermaid`.
MERMAID := tests/mermaid
MERMAID_STAMP := $(MERMAID)/node_modules/.installed
# Test-only: axe-core (npm, pinned by tests/axe/package-lock.json), the accessibility checker that
# tests/test_ui_browser.py injects into each page of `olbridge ui`, which it drives in Debian's
# Chromium (the chromium package, installed here where it is missing; never a downloaded browser).
AXE := tests/axe
AXE_STAMP := $(AXE)/node_modules/.installed
CHROMIUM ?= /usr/bin/chromium

.PHONY: demo test lint typecheck unit bench mutants clean chromium

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "Error: $(PYTHON) not found (set PYTHON=...)" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)

# the base package, its dependencies at the pinned versions (a constraint: nothing else is installed)
$(BASE_STAMP): pyproject.toml requirements-dev.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -c requirements-dev.txt -e .
	touch $(BASE_STAMP)

# everything the tests need; it holds the base package too
$(STAMP): pyproject.toml requirements-dev.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt -e '.[dev,postgres,dbt,metaflow,prefect]'
	touch $(STAMP) $(BASE_STAMP)

$(MERMAID_STAMP): $(MERMAID)/package.json $(MERMAID)/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "Error: npm not found: the Mermaid tests need Node 20 or later with npm" >&2; exit 1; }
	npm ci --prefix $(MERMAID) --no-audit --no-fund --loglevel=error >/dev/null
	touch $(MERMAID_STAMP)

$(AXE_STAMP): $(AXE)/package.json $(AXE)/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "Error: npm not found: the UI's accessibility tests need Node 20 or later with npm" >&2; exit 1; }
	npm ci --prefix $(AXE) --no-audit --no-fund --loglevel=error >/dev/null
	touch $(AXE_STAMP)

# Debian's Chromium for the UI's browser tests: installed with apt-get where it is missing
chromium:
	@test -x $(CHROMIUM) || command -v apt-get >/dev/null 2>&1 || { echo "Error: $(CHROMIUM) not found and no apt-get: install Chromium (Debian: apt-get install chromium) for the UI's browser tests" >&2; exit 1; }
	@test -x $(CHROMIUM) || { apt-get install -y -q chromium >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; } || { echo "Error: could not install chromium with apt-get (as root?): the UI's browser tests need it at $(CHROMIUM)" >&2; exit 1; }

demo: $(BASE_STAMP)
	$(BIN)/olbridge demo --dir olbridge-demo
	@echo
	@echo "olbridge is installed in $(VENV), not on your PATH. Run it as $(BIN)/olbridge, e.g."
	@echo "  $(BIN)/olbridge --catalog olbridge-demo/olbridge.db assets list"
	@echo "or activate the environment first:"
	@echo "  . $(BIN)/activate && olbridge --help"

lint: $(STAMP)
	$(BIN)/ruff check bridge tests benchmarks
	$(BIN)/ruff format --check bridge tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP) $(MERMAID_STAMP) $(AXE_STAMP) chromium
	$(BIN)/pytest

test: lint typecheck unit

# mutation testing of the modules that keep the promises, each with its tests only (docs/testing.md);
# long: one module at a time with e.g. `make mutants MODULES=bridge/config.py`
mutants: $(STAMP)
	$(BIN)/python -m tests.mutation $(MODULES)

bench: $(STAMP)
	$(BIN)/python benchmarks/conversion.py
	$(BIN)/python benchmarks/export.py
	$(BIN)/python benchmarks/record.py
	$(BIN)/python benchmarks/metaflow_helper.py
	$(BIN)/python benchmarks/prefect_import.py
	@if command -v wrk >/dev/null 2>&1; then $(BIN)/python benchmarks/ingest.py; \
	else echo "benchmarks/ingest.py needs wrk, the load generator (Debian: apt-get install wrk)" >&2; fi
	@if command -v wrk >/dev/null 2>&1; then $(BIN)/python benchmarks/scale.py --repeat 3; \
	else echo "benchmarks/scale.py needs wrk, the load generator (Debian: apt-get install wrk)" >&2; fi
	$(BIN)/python benchmarks/delivery.py
	$(BIN)/python benchmarks/ingest_parts.py
	@if command -v valgrind >/dev/null 2>&1; then $(BIN)/python benchmarks/instructions.py; \
	else echo "benchmarks/instructions.py needs valgrind (Debian: apt-get install valgrind)" >&2; fi
	$(BIN)/python benchmarks/column_lineage.py
	$(BIN)/python benchmarks/engine_overhead.py

clean:
	rm -rf $(VENV) olbridge-demo .pytest_cache .mypy_cache .ruff_cache .mutants $(MERMAID)/node_modules $(AXE)/node_modules
