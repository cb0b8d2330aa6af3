"""Runs a small pipeline of components under kfp.local, as the embedded platform does, and hands
back its run's folder: the tests' one way of running a component for real."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable
from typing import Any


def run_pipeline(pipeline: Callable[[], Any], root: pathlib.Path) -> pathlib.Path:
    """Runs ``pipeline`` (a ``@dsl.pipeline`` without parameters) with the SubprocessRunner in
    this interpreter's environment; the run's folder under ``root`` (one per task inside). kfp's
    own configuration is restored afterwards, whatever happens."""
    from kfp import local
    from kfp.local import config

    previous = config.LocalExecutionConfig.instance
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(root))
    try:
        pipeline()
    finally:
        config.LocalExecutionConfig.instance = previous
    [run] = [path for path in root.iterdir() if path.is_dir()]
    return run


def task_outputs(run: pathlib.Path, task: str) -> dict[str, Any]:
    """A task's executor output: its artifacts (with their metadata) and parameter values."""
    return json.loads((run / task / "executor_output.json").read_text())


def logged(run: pathlib.Path, task: str, output: str) -> dict[str, Any]:
    """The metadata of a task's output artifact (a Metrics artifact's logged values)."""
    return task_outputs(run, task)["artifacts"][output]["artifacts"][0]["metadata"]
