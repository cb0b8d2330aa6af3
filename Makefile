# Two commands for a fresh machine (README): `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run run-digits test test-crds test-slow lint compile bench images clean

# Re-installs when pyproject.toml, setup.py or the examples' pyproject.toml change. kfstack and
# its examples (examples/, a package of their own, as a team's pipelines are) install together.
$(STAMP): pyproject.toml setup.py examples/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]" -e examples
	# The Spark driver's class archive: local sessions start faster with it, and run without
	# it should recording fail (the module says why), hence the leading '-'.
	-$(BIN)/python -m kfstack_examples.flights.features_job.class_archive
	touch $(STAMP)

setup: $(STAMP)

# The main job: the flights-training pipeline, embedded, on the full default data.
run: $(STAMP)
	$(BIN)/kfstack run --local flights-training --summary-json runs/summary.json

# The second example, whole and embedded: a team's Spark job, TensorFlow code tuned by Katib's
# rules, evaluation, and an ONNX model served as Triton would (a second run deploys a canary).
run-digits: $(STAMP)
	$(BIN)/kfstack run --local digits-training --summary-json runs/digits-summary.json

# The default test suite (CI runs this). It passes in a clone with nothing beside it; where the
# upstream CRDs are (../shared, or KFSTACK_SHARED_DIR), rendered objects are validated against them.
test: $(STAMP)
	$(BIN)/python -m pytest

# The default suite's checks against the upstream CRDs alone (they must be there: CI runs this
# after `make test` has run as a lone clone would).
test-crds: $(STAMP)
	KFSTACK_REQUIRE_CRDS=1 $(BIN)/python -m pytest -m "upstream_crds and not slow"

# The field's habits: lint and format (ruff), types of every line outside the tests (mypy), the
# layers (import-linter). setup.py maps components/, pipelines/ and spark_jobs/ onto kfstack.*;
# kfstack/ holds symbolic links of those names, so mypy and import-linter read the package as
# installed straight from the source tree.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# End-to-end checks on the full data (minutes).
test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow

compile: $(STAMP)
	$(BIN)/kfstack compile

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# kfstack's images, one per role (images/Dockerfile), then the examples' on top of them
# (examples/Dockerfile), tagged <REGISTRY>/kfstack-<role>:<version> and
# <REGISTRY>/examples/kfstack-<role>:<version>. Needs a Docker engine with BuildKit; where there
# is none it says so and builds nothing (docs/images.md).
REGISTRY ?= ghcr.io/kfstack
ROLES := launcher spark torch-trainer tf-trainer predictor
images:
	@if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then \
	  echo "make images: no Docker engine here (docker missing or not running): nothing built." >&2; \
	  echo "  The Dockerfiles' structure is checked by tests/images/ instead; build where Docker runs." >&2; \
	  exit 2; \
	fi
	@version=$$($(PYTHON) -c "import runpy; print(runpy.run_path('kfstack/version.py')['__version__'])"); \
	for role in $(ROLES); do \
	  docker build -f images/Dockerfile --target $$role -t $(REGISTRY)/kfstack-$$role:$$version . || exit 1; \
	done; \
	for role in $(ROLES); do \
	  docker build -f examples/Dockerfile --build-arg ROLE=$$role --build-arg KFSTACK_REGISTRY=$(REGISTRY) \
	    --build-arg KFSTACK_VERSION=$$version -t $(REGISTRY)/examples/kfstack-$$role:$$version . || exit 1; \
	done

# Old embedded runs go through `kfstack clean`: it removes run directories only, never what
# else lives under runs/ (kept on purpose by later stages).
clean:
	rm -rf dist build
	if [ -x $(BIN)/kfstack ]; then $(BIN)/kfstack clean; fi
