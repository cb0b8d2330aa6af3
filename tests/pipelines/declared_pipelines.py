"""The pipelines declared on kfstack's declarative layer, and their resolved views as they were
before it (``golden/``): what each run does must not change with the way it is declared.

``python -m tests.pipelines.declared_pipelines [NAME...]`` writes the golden views from the
pipelines as they are now; run it only for a change that means to change a run, and review the diff.
"""

from __future__ import annotations

import importlib
import json
import pathlib
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.pipelines.resolved_spec import compile_pipeline, resolved_tasks

GOLDEN = pathlib.Path(__file__).with_name("golden")
TEMPLATE_CASES = [
    ("pytorch", "binary"),
    ("pytorch", "multiclass"),
    ("tensorflow", "binary"),
    ("tensorflow", "multiclass"),
]


def _forget_the_project() -> None:
    """Each template case imports its own ``churn`` package: no earlier one may answer."""
    for name in [m for m in sys.modules if m == "churn" or m.startswith("churn.")]:
        del sys.modules[name]


@contextmanager
def template_pipeline(framework: str, task: str) -> Iterator[Any]:
    """The pipeline function of a project ``kfstack init`` makes (package ``churn``)."""
    from kfstack.app import project

    with tempfile.TemporaryDirectory() as work:
        made = project.plan(f"{work}/churn", None, framework, task, None)
        project.create(made)
        sys.path.insert(0, f"{work}/churn")
        try:
            _forget_the_project()
            module_name, _, function = importlib.import_module("churn").TRAINING.function.partition(":")
            yield getattr(importlib.import_module(module_name), function)
        finally:
            sys.path.remove(f"{work}/churn")
            _forget_the_project()


def resolved(pipeline: Any) -> dict[str, Any]:
    return json.loads(json.dumps(resolved_tasks(*compile_pipeline(pipeline)), sort_keys=True))


def golden_path(name: str) -> pathlib.Path:
    return GOLDEN / f"{name}.json"


@contextmanager
def _registered(name: str) -> Iterator[Any]:
    """The pipeline function registered as ``name``."""
    from kfstack.pipelines import load_pipeline

    yield load_pipeline(name)


def cases() -> Iterator[tuple[str, Any]]:
    """(golden name, a context giving the pipeline) of every declared pipeline."""
    from kfstack_examples.digits.pipeline import digits_training

    @contextmanager
    def digits() -> Iterator[Any]:
        yield digits_training

    yield "digits-training", digits
    for name in ("flights-training", "flights-retraining"):
        yield name, lambda name=name: _registered(name)
    for framework, task in TEMPLATE_CASES:
        yield f"template-{framework}-{task}", lambda f=framework, t=task: template_pipeline(f, t)


def write(names: list[str]) -> None:
    """Writes the golden views of ``names`` (all when empty)."""
    GOLDEN.mkdir(exist_ok=True)
    for name, pipeline in cases():
        if names and name not in names:
            continue
        with pipeline() as function:
            golden_path(name).write_text(json.dumps(resolved(function), indent=1, sort_keys=True) + "\n")
        print(f"wrote {golden_path(name)}")


if __name__ == "__main__":
    write(sys.argv[1:])
