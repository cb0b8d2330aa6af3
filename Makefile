# Two commands for a fresh machine (README): `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test test-slow compile bench clean

# Re-installs when pyproject.toml or setup.py change.
$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

# The main job: the flights-training pipeline, embedded, on the full default data.
run: $(STAMP)
	$(BIN)/kfstack run --local flights-training --summary-json runs/summary.json

# The default test suite (CI runs this).
test: $(STAMP)
	$(BIN)/python -m pytest

# End-to-end checks on the full data (minutes).
test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow

compile: $(STAMP)
	$(BIN)/kfstack compile

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf dist runs local_outputs
