"""The pipelines kfstack compiles, uploads and runs, by name.

Entries name their pipeline function as ``"module:function"`` so that listing pipelines imports
nothing heavy and a broken pipeline module cannot stop the others from compiling.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import Any

from kfstack import errors
from kfstack.errors import UsageError

# A KFP task imports kfp in its runtime mode: the executor only, no compiler.
KFP_RUNTIME_ENV = "_KFP_RUNTIME"


@dataclasses.dataclass(frozen=True)
class PipelineEntry:
    """A registered pipeline.

    Attributes:
        function: ``"module:function"`` of the ``@dsl.pipeline`` function.
        check: ``"module:function"`` of the rules across its stages (each stage checks its own
            settings); called with every parameter's value before a run starts.
    """

    function: str
    check: str | None = None


PIPELINES: dict[str, PipelineEntry] = {
    "flights-training": PipelineEntry(
        function="kfstack.pipelines.flights_training:flights_training",
        check="kfstack.pipelines.steps:check_run",
    ),
    "flights-retraining": PipelineEntry(
        function="kfstack.pipelines.flights_retraining:flights_retraining",
        check="kfstack.pipelines.steps:check_retraining_run",
    ),
    "digits-training": PipelineEntry(function="kfstack.pipelines.digits_training:digits_training"),
}
DEFAULT_PIPELINE = "flights-training"


def _resolve(target: str) -> Any:
    module_name, attribute = target.split(":")
    return getattr(importlib.import_module(module_name), attribute)


def entry(name: str) -> PipelineEntry:
    """The registered pipeline ``name``.

    Raises:
        UsageError: No such pipeline (the message lists the known ones).
    """
    try:
        return PIPELINES[name]
    except KeyError:
        raise UsageError(f"unknown pipeline {name!r}; known: {', '.join(sorted(PIPELINES))}") from None


def load_pipeline(name: str) -> Any:
    """Returns the ``@dsl.pipeline`` function registered as ``name``."""
    return _resolve(entry(name).function)


def run_check(name: str) -> Callable[[Mapping[str, Any]], None]:
    """The pipeline's rules across stages (a no-op when it has none)."""
    check = entry(name).check
    return _resolve(check) if check else (lambda parameters: None)


def check_in_fresh_interpreter(pipeline: str, values: Mapping[str, Any], run_id: str) -> None:
    """The validate-parameters task's body: :func:`kfstack.pipelines.rendering.check_run_parameters`
    in a fresh interpreter with the full kfp SDK.

    A KFP task runs with ``_KFP_RUNTIME=true``, in which kfp loads only its executor and the
    pipeline cannot be compiled in-process; the check's own error is raised here as the same
    :mod:`kfstack.errors` class, so the task fails with it.
    """
    env = {k: v for k, v in os.environ.items() if k != KFP_RUNTIME_ENV}
    argv = [sys.executable, "-m", "kfstack.pipelines.rendering", pipeline, json.dumps(dict(values)), run_id]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    if proc.returncode == 0:
        return
    try:
        failure = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise RuntimeError(f"the parameter check crashed:\n{proc.stderr[-3000:]}") from None
    error_class = getattr(errors, failure["error"], errors.KfstackError)
    raise error_class(failure["message"])
