# Two commands for a fresh machine (README): `make run` and `make test`.
#
# Python 3.11, 3.12 or 3.13: PYTHON names the interpreter (default python3), or its version
# (PYTHON=3.13: on PATH, else pyenv's). Each Python has its own venv and its own lock
# (constraints/py<X.Y>.txt: exact versions of everything installed, `make lock` writes them), so
# `make run`, `make test` and the images install the same packages every time. The ranges the
# library itself declares are proven by `make test-newest` and `make test-floors` (docs/testing.md
# "What runs where").
PYTHON ?= python3
# An interpreter of Python $(1) that runs: on PATH, else pyenv's, wherever pyenv is (pyenv installs
# versions it does not put on PATH; its shim on PATH fails for a version not selected, hence the
# trial run; a non-interactive shell may have no pyenv on PATH, hence its usual root too).
find_python = $(firstword $(shell for p in python$(1) $$(pyenv root 2>/dev/null)/versions/$(1).*/bin/python$(1) \
  $${PYENV_ROOT:-$$HOME/.pyenv}/versions/$(1).*/bin/python$(1); do "$$p" -c '' 2>/dev/null && echo "$$p"; done))
# PYTHON=3.13 (a bare version) names that Python wherever it is found.
override PYTHON := $(if $(filter 3.%,$(PYTHON)),$(call find_python,$(PYTHON)),$(PYTHON))
PY := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
VENV ?= $(if $(filter 3.11,$(PY)),.venv,.venv-py$(PY))
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LOCK := constraints/py$(PY).txt
# What the repository's own venv holds: both frameworks on Python 3.11, TensorFlow only on 3.12 and
# 3.13. PyPI's Linux torch wheels are CUDA builds (gigabytes of GPU libraries); a CPU build comes
# from PyTorch's own index, which CI cannot reach, and CI's machines carry one for CPython 3.11
# only (docs/testing.md "What runs where"). Every venv adds the CPU distributions of ONNX Runtime,
# TensorFlow and XGBoost, the Model Registry client (its step's tests run the real client) and MLflow
# (the embedded tracking store and its UI, tested against a real tracking server).
FRAMEWORKS := $(if $(filter 3.11,$(PY)),local,local-tf)
COMMON_EXTRAS := registry,tensorflow-cpu,onnxruntime,xgboost-cpu,mlflow
EXTRAS ?= dev,$(FRAMEWORKS),$(COMMON_EXTRAS)
# The frameworks whose tests must run, not skip, where a venv of $(1) (local or local-tf) installs
# them (tests/frameworks.py).
comma := ,
required_frameworks = $(if $(filter local,$(1)),torch$(comma))tensorflow
export KFSTACK_REQUIRE_FRAMEWORKS ?= $(call required_frameworks,$(FRAMEWORKS))
# The releases a venv's run was tested with, printed before its tests.
SHOW_RELEASES = $(1)/bin/pip list --format=freeze \
  | grep -i -E '^(kfp|kserve|pyspark|tensorflow([-_]cpu)?|torch|onnxruntime|optuna|scikit[-_]learn|xgboost([-_]cpu)?)=='


.PHONY: setup run run-digits test test-crds test-slow test-newest test-floors lock lock-one lint compile bench images clean

# Re-installs when the project's metadata or the lock change. kfstack and its examples
# (examples/, a package of their own, as a team's pipelines are) install together.
$(STAMP): pyproject.toml setup.py examples/pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c $(LOCK) -e ".[$(EXTRAS)]" -e examples
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

# The ranges, proven on a named subset of the default suite (COMPAT_TESTS; docs/testing.md):
# test-newest installs the newest releases the ranges admit (no lock) on the newest Python;
# test-floors every requirement at its floor (constraints/floors.py) on the oldest. Each in a
# venv of its own, made anew every time.
NEWEST_PYTHON ?= $(call find_python,3.13)
FLOORS_PYTHON ?= $(call find_python,3.11)
COMPAT_TESTS ?= tests/unit tests/kubernetes tests/pipelines/test_compile.py \
  tests/app/test_local_run.py tests/app/test_step_cache.py tests/serving/test_standard_formats.py \
  tests/spark_jobs tests/training tests/tracking
test-newest:
	@test -n "$(NEWEST_PYTHON)" || { echo "make test-newest: no Python 3.13 on PATH or under pyenv; set NEWEST_PYTHON" >&2; exit 1; }
	rm -rf .venv-newest && $(NEWEST_PYTHON) -m venv .venv-newest
	.venv-newest/bin/pip install --quiet --upgrade pip
	.venv-newest/bin/pip install --quiet --upgrade --upgrade-strategy eager \
	  -e ".[test,local-tf,$(COMMON_EXTRAS)]" -e examples
	$(call SHOW_RELEASES,.venv-newest)
	KFSTACK_REQUIRE_FRAMEWORKS=$(call required_frameworks,local-tf) .venv-newest/bin/python -m pytest $(COMPAT_TESTS)
test-floors:
	@test -n "$(FLOORS_PYTHON)" || { echo "make test-floors: no Python 3.11 on PATH or under pyenv; set FLOORS_PYTHON" >&2; exit 1; }
	rm -rf .venv-floors && $(FLOORS_PYTHON) -m venv .venv-floors
	.venv-floors/bin/pip install --quiet --upgrade pip
	$(FLOORS_PYTHON) constraints/floors.py local,$(COMMON_EXTRAS) > .venv-floors/floors.txt
	.venv-floors/bin/pip install --quiet -c .venv-floors/floors.txt \
	  -e ".[test,local,$(COMMON_EXTRAS)]" -e examples
	$(call SHOW_RELEASES,.venv-floors)
	KFSTACK_REQUIRE_FRAMEWORKS=$(call required_frameworks,local) .venv-floors/bin/python -m pytest $(COMPAT_TESTS)

# The locks: for each Python found, a fresh venv with the newest releases the ranges admit, frozen
# (package versions only: no paths, no URLs). Run it to take newer releases, review the diff of
# constraints/, commit it. LOCK_PYTHONS names the interpreters (default: 3.11, 3.12 and 3.13).
# Where the lock takes torch, it takes the CPU build of 2.13.0 first (CI's machines carry it, where
# pip finds it; elsewhere add --extra-index-url https://download.pytorch.org/whl/cpu): the range
# admits newer releases, and PyPI serves only CUDA builds of them.
LOCK_PYTHONS ?= $(foreach v,3.11 3.12 3.13,$(call find_python,$(v)))
TORCH_CPU ?= torch==2.13.0
lock:
	for python in $(LOCK_PYTHONS); do $(MAKE) --no-print-directory lock-one PYTHON=$$python || exit 1; done
lock-one:
	rm -rf .venv-lock && $(PYTHON) -m venv .venv-lock
	.venv-lock/bin/pip install --quiet --upgrade pip
	$(if $(filter local,$(FRAMEWORKS)),.venv-lock/bin/pip install --quiet $(TORCH_CPU))
	.venv-lock/bin/pip install --quiet -e ".[$(EXTRAS)]" -e examples
	# Versions without a local label (torch's +cpu): an image takes the build its index serves.
	# The tf-trainer image installs TensorFlow's GPU distribution at the tested release.
	{ echo "# The lock for Python $(PY): kfstack[$(EXTRAS)] and its examples (make lock; docs/installing.md)."; \
	  .venv-lock/bin/pip freeze --exclude-editable | grep -v -i -E '^kfstack' | sed -E 's/\+[A-Za-z0-9.]+$$//'; \
	  echo "# The GPU distribution of the same TensorFlow release, for the tf-trainer image (images/Dockerfile)."; \
	  .venv-lock/bin/pip freeze | sed -n -E 's/^tensorflow[-_]cpu==/tensorflow==/p'; } > $(LOCK).new
	mv $(LOCK).new $(LOCK) && rm -rf .venv-lock
	@! grep -n -E ' @ |file:' $(LOCK) || { echo "make lock: $(LOCK) names a location, not a version" >&2; exit 1; }

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
	rm -rf dist build .venv-newest .venv-floors
	if [ -x $(BIN)/kfstack ]; then $(BIN)/kfstack clean; fi
