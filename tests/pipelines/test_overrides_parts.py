"""Each step takes the part of the run's ``settings_overrides`` that it reads: the run's check
(validate_run) takes them all and hands each kfstack component's tasks that component's part, so
a step's inputs, its cache key on a cluster and embedded, change with its own settings alone
(kfstack/pipelines/validate_run.py, wiring.call). Checked on the compiled flights-training
version, and on a real run of a small pipeline under kfp.local.

(No ``from __future__ import annotations``: KFP reads the test pipelines' annotations as types.)
"""

import copy
import os
import pathlib

import pytest

from kfstack.pipelines import load_pipeline, run_form
from kfstack.pipelines.rendering import compiled_spec
from kfstack.pipelines.signatures import component_sources
from kfstack.pipelines.validate_run import PART_ENDING, part_components, settings_read, validate_run
from kfstack.serving.registry import REGISTRY_DIR_ENV
from kfstack.settings import SETTINGS_OVERRIDES, overrides_read
from tests.kfp_local import run_pipeline, task_outputs
from tests.pipelines import overrides_pipeline
from tests.pipelines.resolved_spec import resolved_tasks

CHECK = "validate-parameters"


def test_the_check_has_a_part_for_every_kfstack_component_that_takes_overrides():
    taking = {
        source.function: source.component
        for source in component_sources()
        if SETTINGS_OVERRIDES in (source.component.component_spec.inputs or {})
    }
    assert {output.removesuffix(PART_ENDING): c for output, c in part_components().items()} == taking
    assert set(validate_run.component_spec.outputs) == {f"{name}{PART_ENDING}" for name in taking}


@pytest.fixture(scope="module")
def flights_version() -> dict:
    """flights-training's version as ``kfstack compile`` writes it: its run form."""
    return compiled_spec(run_form.version_function(load_pipeline("flights-training")))


def run_with(spec: dict, overrides: dict) -> dict[str, dict]:
    """Display name -> the inputs each task of ``spec`` gets in a run with ``overrides``: the check's
    parts as the task computes them (overrides_read over its ``settings_read``)."""
    spec = copy.deepcopy(spec)
    spec["root"]["inputDefinitions"]["parameters"][SETTINGS_OVERRIDES]["defaultValue"] = overrides
    tasks = resolved_tasks(spec, {"platforms": {}})
    checked = tasks[CHECK]["inputs"]
    parts = {
        f"<{CHECK}.{output}>": overrides_read(checked[SETTINGS_OVERRIDES], names)
        for output, names in checked["settings_read"].items()
    }
    for task in tasks.values():
        given = task["inputs"].get(SETTINGS_OVERRIDES)
        if isinstance(given, str):  # a part of the check's: its value in this run (empty if none)
            assert given.removeprefix(f"<{CHECK}.").removesuffix(">") in validate_run.component_spec.outputs
            task["inputs"][SETTINGS_OVERRIDES] = parts.get(given, {})
    return {name: task["inputs"] for name, task in tasks.items()}


def test_one_tuning_override_changes_the_inputs_of_the_check_and_tuning_alone(flights_version):
    before = run_with(flights_version, {"tuning_max_trials": 4})
    after = run_with(flights_version, {"tuning_max_trials": 5})
    changed = {name for name in before if before[name] != after[name]}
    # The evaluation's inputs are given by hand (kfstack/pipelines/declared.py), its part too.
    assert changed == {CHECK, "tuning"}
    # The Spark step's inputs, its cache key, are the same: it is answered from the cache.
    assert before["spark-features"] == after["spark-features"]
    assert before["spark-features"][SETTINGS_OVERRIDES] == {}


def test_each_step_takes_the_overrides_of_its_own_settings(flights_version):
    overrides = {
        "tuning_max_trials": 4,
        "spark_executor_memory": "4g",
        "gpu_pool": "a100",
        "canary_traffic_percent": 20,
        "model_registry_author": "team",
    }
    inputs = run_with(flights_version, overrides)
    taking = {
        setting: {name for name, given in inputs.items() if setting in given.get(SETTINGS_OVERRIDES, {})}
        for setting in overrides
    }
    assert taking == {
        "tuning_max_trials": {CHECK, "tuning"},
        "spark_executor_memory": {CHECK, "spark-features"},
        "gpu_pool": {CHECK, "tuning", "training"},
        "canary_traffic_percent": {CHECK, "deployment"},
        "model_registry_author": {CHECK, "model-registry"},
    }
    # Each part is what the step's component applies: the settings among its own arguments.
    assert inputs["training"][SETTINGS_OVERRIDES] == {"gpu_pool": "a100"}


def test_the_parts_name_the_pipelines_settings_each_component_takes(flights_version):
    names = load_pipeline("flights-training").pipeline_func.parameters.names
    read = settings_read(names)
    assert "tuning_max_trials" in read[f"hyperparameter_tuning{PART_ENDING}"]
    assert "tuning_max_trials" not in read[f"spark_job{PART_ENDING}"]
    assert "spark_executor_memory" in read[f"spark_job{PART_ENDING}"]
    assert all(set(settings) <= set(names) for settings in read.values())


# kfp.local warns that the component's image is not plain Python; this process has its packages.
@pytest.mark.filterwarnings("ignore:You may be attemping to run a task:RuntimeWarning")
def test_a_run_applies_each_steps_part_under_kfp_local(tmp_path, monkeypatch):
    monkeypatch.setenv(REGISTRY_DIR_ENV, str(tmp_path / "registry"))  # nothing in production
    # The check's fresh interpreter imports the pipeline by its module's name, from here.
    repository = pathlib.Path(__file__).resolve().parents[2]
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(repository), os.environ.get("PYTHONPATH")]))
    )
    version = run_form.version_function(load_pipeline(overrides_pipeline.NAME), {"platform": "local"})
    run = run_pipeline(
        lambda: version(window_days=7, settings_overrides={"window_lag_days": 2, "serving_name": "churn.v2"}),
        tmp_path / "root",
    )
    parts = task_outputs(run, "validate-run")["parameterValues"]
    # The data window's part holds its own setting alone, and it applied it: seven days ending
    # the day before the run, less the overridden two days' lag.
    assert parts[f"data_window{PART_ENDING}"] == {"window_lag_days": 2}
    assert task_outputs(run, "data-window")["parameterValues"] == {"start": "2026-11-15", "end": "2026-11-21"}
    # The model in production's part is its own setting, as it was given.
    assert parts[f"production_model{PART_ENDING}"] == {"serving_name": "churn.v2"}
    assert task_outputs(run, "production-model")["parameterValues"]["found"] is False
    assert parts[f"spark_job{PART_ENDING}"] == {}
