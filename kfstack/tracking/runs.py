"""What a pipeline run, a task and a trial record in MLflow (the layout: :mod:`kfstack.tracking`).

- The pipeline run (parent): parameters are the run's per-run values and effective settings;
  tags the pipeline and its version, the KFP run id or the embedded run directory, kfstack's
  version, what started the run and, once trained, the model's lineage hash.
- A task's run (nested): its outputs (:func:`log_outputs`): each ``Metrics`` output's values as
  ``<output>.<name>``, a parameter output's numbers likewise (the deployment's canary analysis
  and decision), its reports and plots as artifacts, a model directory as an artifact where it is
  at most :data:`MODEL_ARTIFACT_LIMIT` bytes and as a reference tag otherwise, a dataset always
  as a reference. A task the step cache answered is tagged with the run it came from.
- A trial's run (nested under the tuning task's): its assignments as parameters, its objective
  and metrics per epoch (the training entrypoint's metric lines).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from kfstack.tracking.client import PARENT_RUN_ENV, RUN_ID_ENV, Tracker, tag_filter
from kfstack.tracking.rest import Backend

# Tag names (MLflow's own ``mlflow.*`` tags name the run and its parent).
PIPELINE_TAG = "kfstack.pipeline"
PIPELINE_VERSION_TAG = "kfstack.pipeline_version"
KFSTACK_VERSION_TAG = "kfstack.version"
RUN_DIR_TAG = "kfstack.run_dir"
KFP_RUN_ID_TAG = "kfp.run_id"
TASK_TAG = "kfstack.task"
TRIAL_TAG = "kfstack.trial"
STARTED_BY_TAG = "kfstack.started_by"
CACHED_FROM_TAG = "kfstack.cached_from"
LINEAGE_HASH_TAG = "kfstack.lineage_hash"
REFERENCE_TAG_PREFIX = "kfstack.uri."
"""Followed by an output's name: where an output too large to copy (a dataset, a big model) is."""
PARENT_TAG = "mlflow.parentRunId"
TRIGGER_PARAMETER = "trigger"
"""The parameter a drift alert's run is started with (the alert receiver fills it in)."""
DEFAULT_EXPERIMENT = "kfstack"
"""A cluster run's experiment where its tasks cannot tell the pipeline's name (a pipeline not
compiled by ``kfstack compile``, which stamps it into every task)."""

MODEL_ARTIFACT_LIMIT = 200 * 1024 * 1024
"""A model directory up to this size is copied into the run's artifacts; a larger one is
referenced by its URI (the model stays where the pipeline wrote it, the registry's source)."""
FILE_ARTIFACT_LIMIT = 20 * 1024 * 1024
"""A report, plot or other file output larger than this is referenced, not copied."""

SETTINGS_PARTS_ENDING = "_overrides"
"""The first task's outputs that hand each step its part of the run's settings overrides: the
pipeline run's parameters hold them already, so a task's run leaves them out."""

_METRICS_SCHEMA = "system.Metrics"
_REFERENCE_ONLY = ("system.Dataset",)
_MODEL = "system.Model"
_LINEAGE_FILE = "lineage.json"


def started_by(trigger: str = "", schedule: str = "", person: str = "") -> str:
    """The pipeline run's :data:`STARTED_BY_TAG`: ``alert: <trigger>`` (a drift alert's run, whose
    ``trigger`` parameter the alert receiver fills in), else ``schedule: <time>`` (a recurring
    run, at the time it was scheduled for), else ``person: <name>``, or ``person`` where the
    platform does not say who (a task on a cluster cannot tell who created its run)."""
    if trigger:
        return f"alert: {trigger}"
    if schedule:
        return f"schedule: {schedule}"
    return f"person: {person}" if person else "person"


def start_pipeline_run(
    tracker: Tracker,
    experiment: str,
    name: str,
    tags: Mapping[str, Any],
    params: Mapping[str, Any],
) -> str | None:
    """The parent run of one pipeline run, with its parameters; its id, or None."""
    run_id = tracker.start_run(experiment, name, tags)
    if run_id:
        tracker.log_params(run_id, params, "the run's parameters")
    return run_id


def start_task_run(
    tracker: Tracker, experiment: str, parent: str, task: str, tags: Mapping[str, Any]
) -> str | None:
    """A task's run, nested under the pipeline run."""
    return tracker.start_run(experiment, task, {TASK_TAG: task, **tags}, parent=parent)


def start_trial_run(
    tracker: Tracker, trial: str, assignments: Mapping[str, Any], env: Mapping[str, str]
) -> str | None:
    """A tuning trial's run, nested under the tuning task's (:data:`PARENT_RUN_ENV` in a trial
    template, else the process's ``MLFLOW_RUN_ID`` when a tuner started it as a child), in that
    run's experiment; the same run again for a trial that restarts. None where there is no
    parent to nest under."""
    parent = env.get(PARENT_RUN_ENV) or env.get(RUN_ID_ENV)
    if not parent:
        return None

    found = tracker.run_of(parent, f"trial {trial}")
    if found is None:
        return None
    experiment_id, parent_tags = found
    # The pipeline's tags (run directory, pipeline) carry over: `kfstack clean` finds trials too.
    tags = {
        key: parent_tags[key] for key in (RUN_DIR_TAG, KFP_RUN_ID_TAG, PIPELINE_TAG) if key in parent_tags
    }
    tags.update({PARENT_TAG: parent, TRIAL_TAG: trial})
    query = tag_filter({PARENT_TAG: parent, TRIAL_TAG: trial})

    def find_or_create(client: Backend) -> str:
        return client.find_run(experiment_id, query) or client.create_run(experiment_id, trial, tags)

    run_id = tracker.call(f"trial {trial}", find_or_create)
    if run_id:
        tracker.log_params(run_id, assignments, f"trial {trial}'s assignments")
    return run_id


def log_outputs(
    tracker: Tracker, run_id: str, outputs: Mapping[str, Any], include_metrics: bool = True
) -> None:
    """A task's outputs, as KFP hands them (artifacts with ``path``, ``metadata`` and
    ``schema_title``; parameter values), into its run (module docstring). ``include_metrics``
    False: its ``Metrics`` outputs' values are left out (KFP's plugin logs them itself)."""
    metrics: dict[str, float] = {}
    tags: dict[str, str] = {}
    for name, value in outputs.items():
        path = getattr(value, "path", None)
        if path is None:
            if not name.endswith(SETTINGS_PARTS_ENDING):
                _parameter_output(name, value, metrics, tags)
            continue
        schema = getattr(value, "schema_title", "")
        if schema == _METRICS_SCHEMA:
            if include_metrics:
                metrics.update(
                    {f"{name}.{key}": n for key, n in (getattr(value, "metadata", None) or {}).items()}
                )
            continue
        try:
            size = _size(path) if os.path.exists(path) else None
        except OSError:  # a file that went away while it was measured: left out
            size = None
        if size is None:
            continue
        limit = MODEL_ARTIFACT_LIMIT if schema == _MODEL else FILE_ARTIFACT_LIMIT
        if schema == _MODEL:
            lineage = _lineage_hash(path)
            if lineage:
                tags[LINEAGE_HASH_TAG] = lineage
        if schema in _REFERENCE_ONLY or size > limit:
            tags[REFERENCE_TAG_PREFIX + name] = getattr(value, "uri", "") or path
        else:
            tracker.log_artifact(run_id, path, name, what=f"the output {name}")
    tracker.log_metrics(run_id, metrics, what="the task's metrics")
    tracker.set_tags(run_id, tags, what="the task's references")
    if LINEAGE_HASH_TAG in tags:  # the run's model: the pipeline run says which it made
        parent = parent_of(tracker, run_id)
        if parent:
            tracker.set_tags(
                parent, {LINEAGE_HASH_TAG: tags[LINEAGE_HASH_TAG]}, what="the model's lineage hash"
            )


def parent_of(tracker: Tracker, run_id: str) -> str | None:
    """The run ``run_id`` is nested under, or None."""

    found = tracker.run_of(run_id, "the pipeline run's id")
    return found[1].get(PARENT_TAG) if found else None


def _parameter_output(name: str, value: Any, metrics: dict[str, float], tags: dict[str, str]) -> None:
    """A parameter output: a number is a metric; a JSON object's numbers are metrics and its
    short strings tags (``<output>.<key>``, one level of nesting flattened)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return
    if isinstance(value, bool):
        tags[f"{name}"] = str(value).lower()
    elif isinstance(value, int | float):
        metrics[name] = value
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict):
                for inner, leaf in item.items():
                    _leaf(f"{name}.{key}.{inner}", leaf, metrics, tags)
            else:
                _leaf(f"{name}.{key}", item, metrics, tags)


def _leaf(key: str, value: Any, metrics: dict[str, float], tags: dict[str, str]) -> None:
    if isinstance(value, bool) or (isinstance(value, str) and len(value) <= 250):
        tags[key] = str(value).lower() if isinstance(value, bool) else value
    elif isinstance(value, int | float):
        metrics[key] = value


def _size(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(base, f)) for base, _, files in os.walk(path) for f in files)


def _lineage_hash(path: str) -> str:
    """The hash of the model's lineage record (``lineage.json`` in its directory), or ``""``."""
    from kfstack.lineage import document_hash

    lineage = os.path.join(path, _LINEAGE_FILE)
    if not os.path.isfile(lineage):
        return ""
    try:
        with open(lineage, encoding="utf-8") as f:
            return document_hash(json.load(f))
    except (OSError, ValueError):
        return ""
