"""What a launching task tracks on a cluster, and what it tells the pods it launches.

A task of kfstack's launching components (training, tuning, Spark) finds its MLflow run one of
two ways:

- **KFP's MLflow plugin is on** (KFP 2.17 ``plugins.mlflow`` with ``injectUserEnvVars``): KFP made
  the pipeline run's parent and this task's nested run, and set ``MLFLOW_TRACKING_URI``,
  ``MLFLOW_RUN_ID`` (and ``MLFLOW_EXPERIMENT_ID``, ``MLFLOW_TRACKING_AUTH``, ``MLFLOW_WORKSPACE``)
  in the task's container. kfstack makes neither run, and KFP ends them.
- **Otherwise**, where the environment names a tracking server (the ``tracking_uri`` setting), the
  task makes them: the parent, found by the KFP run's id (:data:`kfstack.tracking.runs.KFP_RUN_ID_TAG`)
  in the experiment named after the pipeline, or made by the first task that needs it; and its
  own nested run, found again when KFP retries the task. The task ends its own run; the parent
  stays ``RUNNING`` (no task sees the pipeline run end).

The pods the task launches are told the server and the run: a training job's replicas and a
Spark application log into the task's run (``MLFLOW_RUN_ID``); Katib's trials are each a run of
their own nested under the tuning task's (:data:`kfstack.tracking.client.PARENT_RUN_ENV`, from
which the trial's chief makes it: :func:`kfstack.tracking.runs.start_trial_run`). What the plugin
set besides passes on unchanged, and the credentials reach them as references to the tracking
Secret's keys (:data:`CREDENTIAL_KEYS`), never as values in the objects kfstack creates.

Each pod tracks on its own: pods share no notice file, so a server that never answers costs each
of them at most one request's timeout (:mod:`kfstack.tracking.client`).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Mapping
from typing import Any

from kfstack.tracking import runs
from kfstack.tracking.client import (
    PARENT_RUN_ENV,
    RUN_ID_ENV,
    TRACKING_URI_ENV,
    Tracker,
    reachable,
    request_bounds,
    switched_off,
)

CREDENTIAL_KEYS = ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")
"""MLflow's credential variables, each read from the tracking Secret's key of the same name: a
bearer token, or a user name and password (basic auth). Every reference is optional."""
DEFAULT_TRACKING_SECRET = "kfp-mlflow-credentials"
"""The Secret KFP's plugin reads its credentials from (its name is fixed there): where the plugin
is on and its keys are named as MLflow's variables, kfstack's pods use the same Secret."""
PLUGIN_VALUES = ("MLFLOW_EXPERIMENT_ID", "MLFLOW_TRACKING_AUTH", "MLFLOW_WORKSPACE")
"""What KFP's plugin sets in a task's container besides the server and the run, passed on to the
pods the task launches (``MLFLOW_TRACKING_AUTH=kubernetes``: each pod authenticates as its own
service account)."""


@dataclasses.dataclass(frozen=True)
class TaskTracking:
    """The MLflow run of one launching task on a cluster.

    Attributes:
        uri: The tracking server.
        run_id: The task's run.
        made_here: Whether the task made its run (then it ends it: :func:`finish`), or KFP's plugin
            did.
        passed_on: What the plugin set besides (:data:`PLUGIN_VALUES`).
        secret: The Secret the launched pods read the credentials from (:data:`CREDENTIAL_KEYS`).
    """

    uri: str
    run_id: str
    made_here: bool = False
    passed_on: Mapping[str, str] = dataclasses.field(default_factory=dict)
    secret: str = DEFAULT_TRACKING_SECRET
    tracker: Tracker | None = dataclasses.field(default=None, compare=False, repr=False)

    def client(self) -> Tracker:
        """The task's tracker (off from its first failure on), made here if none was given."""
        return self.tracker or Tracker(self.uri)

    def launched_env(self, trial: bool = False) -> dict[str, str]:
        """The plain variables of the pods the task launches (credentials go as Secret
        references: :data:`CREDENTIAL_KEYS`). ``trial``: Katib's trial template, whose trials
        each make their own run under the task's."""
        env = {TRACKING_URI_ENV: self.uri, **request_bounds(), **self.passed_on}
        env[PARENT_RUN_ENV if trial else RUN_ID_ENV] = self.run_id
        return env


def task_tracking(
    env: Mapping[str, str],
    tracking_uri: str,
    tracking_secret: str,
    run_id: str,
    pipeline: str,
    task: str,
    version: str = "",
) -> TaskTracking | None:
    """The run of the task whose container has ``env`` (module docstring); None where nothing
    names a tracking server, ``KFSTACK_TRACKING=off`` turns tracking off, or the server failed
    (said once, on stderr).

    Args:
        env: The task container's environment (KFP's plugin, where on, set the run there).
        tracking_uri: The environment's ``tracking_uri`` setting; empty: the plugin's, if any.
        tracking_secret: The environment's ``tracking_secret`` setting (:attr:`TaskTracking.secret`).
        run_id: The KFP run's id (the parent's tag).
        pipeline: The pipeline's name: the experiment's and the parent's tag.
        task: The task's name in the run.
        version: The pipeline version, tagged on a parent made here.
    """
    if switched_off(env):
        return None
    plugin_uri, plugin_run = env.get(TRACKING_URI_ENV, ""), env.get(RUN_ID_ENV, "")
    passed_on = {name: env[name] for name in PLUGIN_VALUES if env.get(name)}
    if plugin_uri and plugin_run:
        tracker = Tracker(plugin_uri, origin=task)
        return TaskTracking(
            plugin_uri, plugin_run, passed_on=passed_on, secret=tracking_secret, tracker=tracker
        )
    uri = tracking_uri or plugin_uri
    if not uri or not reachable(uri):
        return None
    tracker = Tracker(uri, origin=task)
    experiment = pipeline or runs.DEFAULT_EXPERIMENT
    parent_tags = {runs.KFP_RUN_ID_TAG: run_id, runs.PIPELINE_TAG: experiment}
    parent = tracker.find_or_start_run(experiment, run_id, {runs.PIPELINE_VERSION_TAG: version}, parent_tags)
    if parent is None:
        return None
    task_tags = {runs.KFP_RUN_ID_TAG: run_id, runs.TASK_TAG: task}
    made = tracker.find_or_start_run(
        experiment, task, {runs.PIPELINE_TAG: experiment}, task_tags, parent=parent
    )
    if made is None:
        return None
    return TaskTracking(
        uri, made, made_here=True, passed_on=passed_on, secret=tracking_secret, tracker=tracker
    )


def log_outputs(tracking: TaskTracking | None, outputs: Mapping[str, Any]) -> None:
    """The task's outputs (as KFP hands them over) into its run, as an embedded run logs a
    task's (:func:`kfstack.tracking.runs.log_outputs`): its metrics (where KFP's plugin, which
    logs them itself, did not make the run), reports and plots, its model where the task pod holds
    it (a training job's replicas write it to the object store: then nothing is copied)."""
    if tracking is not None:
        _never_raising(
            "the task's outputs",
            lambda: runs.log_outputs(
                tracking.client(), tracking.run_id, outputs, include_metrics=tracking.made_here
            ),
        )


def finish(tracking: TaskTracking | None, succeeded: bool) -> None:
    """Ends the task's run where the task made it (KFP's plugin ends its own)."""
    if tracking is not None and tracking.made_here:
        _never_raising(
            "the task's end",
            lambda: tracking.client().end_run(tracking.run_id, "FINISHED" if succeeded else "FAILED"),
        )


def _never_raising(what: str, call: Callable[[], None]) -> None:
    """``call()``; whatever it raises is said on stderr, never the task's failure (the requests
    themselves never raise: :class:`~kfstack.tracking.client.Tracker`)."""
    try:
        call()
    except Exception as err:
        print(
            f"kfstack: tracking: {what} not tracked ({type(err).__name__}: {err})",
            file=sys.stderr,
            flush=True,
        )
