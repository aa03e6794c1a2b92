# The two commands of the quick start: `make demo` and `make test`. Both set up .venv first.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench clean

$(STAMP): pyproject.toml requirements-dev.txt
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "Error: $(PYTHON) not found (set PYTHON=...)" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt -e '.[dev,dbt,metaflow,prefect]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/olbridge demo --dir olbridge-demo

lint: $(STAMP)
	$(BIN)/ruff check bridge tests benchmarks
	$(BIN)/ruff format --check bridge tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python benchmarks/conversion.py
	$(BIN)/python benchmarks/record.py
	$(BIN)/python benchmarks/metaflow_helper.py
	$(BIN)/python benchmarks/prefect_import.py
	@if command -v wrk >/dev/null 2>&1; then $(BIN)/python benchmarks/ingest.py; \
	else echo "benchmarks/ingest.py needs wrk, the load generator (Debian: apt-get install wrk)" >&2; fi
	$(BIN)/python benchmarks/delivery.py
	$(BIN)/python benchmarks/ingest_parts.py
	$(BIN)/python benchmarks/column_lineage.py

clean:
	rm -rf $(VENV) olbridge-demo .pytest_cache .mypy_cache .ruff_cache
