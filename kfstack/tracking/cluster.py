"""What a cluster run tracks in MLflow: the pipeline run's parent, each task's run, and what a
launching task tells the pods it launches.

A task of kfstack's components (the launching ones: training, tuning, Spark; the evaluation and
the deployment) finds its MLflow run one of two ways:

- **KFP's MLflow plugin is on** (KFP 2.17 ``plugins.mlflow`` with ``injectUserEnvVars``): KFP made
  the pipeline run's parent and this task's nested run, and set ``MLFLOW_TRACKING_URI``,
  ``MLFLOW_RUN_ID`` (and ``MLFLOW_EXPERIMENT_ID``, ``MLFLOW_TRACKING_AUTH``, ``MLFLOW_WORKSPACE``)
  in the task's container. kfstack makes neither run, and KFP ends them.
- **Otherwise**, where the environment names a tracking server (the ``tracking_uri`` setting), the
  tasks make them: the parent, found by the KFP run's id (:data:`kfstack.tracking.runs.KFP_RUN_ID_TAG`)
  in the experiment named after the pipeline (:func:`experiment_of`), made by the run's first
  task with the run's parameters (:func:`start_pipeline_run`) and ended by its exit handler with
  the run's outcome (:func:`end_pipeline_run`); and each task's own nested run, found again when
  KFP retries the task, which the task ends.

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

import contextlib
import dataclasses
import functools
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ParamSpec, TypeVar

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
from kfstack.version import PIPELINE_ENV, __version__

T = TypeVar("T")
P = ParamSpec("P")

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


def _never_failing(what: str) -> Callable[[Callable[P, T]], Callable[P, T | None]]:
    """A function of the run's frame (the first task's, the exit handler's) that never fails its
    task: :func:`_never_raising` around each call."""

    def wrap(function: Callable[P, T]) -> Callable[P, T | None]:
        @functools.wraps(function)
        def never_failing(*args: P.args, **kwargs: P.kwargs) -> T | None:
            return _never_raising(what, lambda: function(*args, **kwargs))

        return never_failing

    return wrap


def _never_raising(what: str, call: Callable[[], T]) -> T | None:
    """``call()``'s value; whatever it raises is said on stderr (None then), never the task's
    failure (the requests themselves never raise: :class:`~kfstack.tracking.client.Tracker`)."""
    try:
        return call()
    except Exception as err:
        print(
            f"kfstack: tracking: {what} not tracked ({type(err).__name__}: {err})",
            file=sys.stderr,
            flush=True,
        )
        return None


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
    passed_on = {name: env[name] for name in PLUGIN_VALUES if env.get(name)}
    if _plugin_is_on(env):
        uri, run = env[TRACKING_URI_ENV], env[RUN_ID_ENV]
        plugins = Tracker(uri, origin=task)
        return TaskTracking(uri, run, passed_on=passed_on, secret=tracking_secret, tracker=plugins)
    # Without the plugin the parent is found by the KFP run's id: a task not given it (a
    # component called outside kfstack's wiring) is not tracked.
    tracker = _own_tracker(env, tracking_uri, task) if run_id else None
    if tracker is None:
        return None
    experiment = pipeline or runs.DEFAULT_EXPERIMENT
    parent = _find_or_make_parent(tracker, experiment, run_id, {runs.PIPELINE_VERSION_TAG: version})
    if parent is None:
        return None
    task_tags = {runs.KFP_RUN_ID_TAG: run_id, runs.TASK_TAG: task}
    made = tracker.find_or_start_run(
        experiment, task, {runs.PIPELINE_TAG: experiment}, task_tags, parent=parent
    )
    if made is None:
        return None
    return TaskTracking(
        tracker.uri, made, made_here=True, passed_on=passed_on, secret=tracking_secret, tracker=tracker
    )


@_never_failing("the pipeline run")
def start_pipeline_run(
    env: Mapping[str, str],
    tracking_uri: str,
    run_id: str,
    version: str,
    parameters: Mapping[str, Any],
    started_by: str,
) -> str | None:
    """The pipeline run's parent, made (or found, by a retried first task) by the run's first
    task where no KFP plugin made it: tagged as an embedded run's parent is, with the run's
    effective parameters. Where the plugin made it, it gets kfstack's tags (the versions, what
    started the run) and nothing else: its parameters are KFP's to log. Its id; None where
    nothing names a server, tracking is off, or the server failed (said once, on stderr).

    Args:
        env: The task container's environment.
        tracking_uri: The environment's ``tracking_uri`` setting.
        run_id: The KFP run's id.
        version: The pipeline version the run runs.
        parameters: The run's per-run values and effective settings.
        started_by: What started the run (:func:`kfstack.tracking.runs.started_by`).
    """
    if switched_off(env):
        return None
    tags = {
        runs.PIPELINE_VERSION_TAG: version,
        runs.KFSTACK_VERSION_TAG: __version__,
        runs.STARTED_BY_TAG: started_by,
    }
    if _plugin_is_on(env):
        plugins = Tracker(env[TRACKING_URI_ENV], origin="the pipeline run")
        made_by_kfp = runs.parent_of(plugins, env[RUN_ID_ENV])
        if made_by_kfp:
            plugins.set_tags(made_by_kfp, tags, "the pipeline run's tags")
        return made_by_kfp
    tracker = _own_tracker(env, tracking_uri, "the pipeline run")
    if tracker is None:
        return None
    parent = _find_or_make_parent(tracker, experiment_of(env), run_id, tags)
    if parent is not None:
        # Made here or found (this task retried, or a task that raced ahead of it made it
        # without them): the tags, and the parameters, which MLflow takes again unchanged.
        tracker.set_tags(parent, tags, "the pipeline run's tags")
        tracker.log_params(parent, parameters, "the run's parameters")
    return parent


RUN_STATES = {
    # KFP's backend (its metadata store's states) says COMPLETE; kfp.local SUCCEEDED; a group
    # whose every task was cached or skipped, CACHED or SKIPPED.
    "COMPLETE": "FINISHED",
    "SUCCEEDED": "FINISHED",
    "CACHED": "FINISHED",
    "SKIPPED": "FINISHED",
    "FAILED": "FAILED",
    "CANCELED": "KILLED",
    "CANCELLED": "KILLED",
    "CANCELING": "KILLED",
}
"""KFP's final state of a run (``dsl.PipelineTaskFinalStatus.state``) -> the MLflow status its
parent ends with. A state not listed ends it ``FAILED``, and is said on stderr."""


@_never_failing("the pipeline run's end")
def end_pipeline_run(env: Mapping[str, str], tracking_uri: str, run_id: str, state: str) -> None:
    """Ends the pipeline run's parent with KFP's final ``state`` of the run (:data:`RUN_STATES`):
    the exit handler's part, where no KFP plugin made the parent (KFP ends its own). Nothing is
    made here: a run whose first task made no parent has none to end."""
    if switched_off(env) or _plugin_is_on(env):
        return
    tracker = _own_tracker(env, tracking_uri, "the pipeline run's end")
    if tracker is None:
        return
    parent = tracker.find_run(experiment_of(env), _parent_found_by(run_id))
    if parent is None:
        return
    status = RUN_STATES.get(state.upper())
    if status is None:
        status = "FAILED"
        print(
            f"kfstack: tracking: the run's final state {state!r} is not one KFP documents: its "
            "MLflow run ends FAILED",
            file=sys.stderr,
            flush=True,
        )
    tracker.end_run(parent, status)


def experiment_of(env: Mapping[str, str]) -> str:
    """The MLflow experiment of a cluster run: named after its pipeline, which ``kfstack
    compile`` stamps into every task (:data:`kfstack.version.PIPELINE_ENV`); else
    :data:`kfstack.tracking.runs.DEFAULT_EXPERIMENT`. Every task of a run, its first and its exit
    handler, reads it the same way, so all find the same parent."""
    return env.get(PIPELINE_ENV) or runs.DEFAULT_EXPERIMENT


def _plugin_is_on(env: Mapping[str, str]) -> bool:
    """Whether KFP's MLflow plugin made this task's run and set it in its container."""
    return bool(env.get(TRACKING_URI_ENV) and env.get(RUN_ID_ENV))


def _own_tracker(env: Mapping[str, str], tracking_uri: str, origin: str) -> Tracker | None:
    """A tracker for the runs kfstack makes on a cluster, at the ``tracking_uri`` setting; None
    where it is empty or names a server kfstack cannot reach. A ``MLFLOW_TRACKING_URI`` the
    container has without KFP's plugin's run is the team's, not a run kfstack makes."""
    if not tracking_uri or not reachable(tracking_uri):
        return None
    return Tracker(tracking_uri, origin=origin)


def _parent_found_by(run_id: str) -> dict[str, str]:
    return {runs.KFP_RUN_ID_TAG: run_id}


def _find_or_make_parent(
    tracker: Tracker, experiment: str, run_id: str, tags: Mapping[str, str]
) -> str | None:
    """The KFP run's parent in ``experiment``, named and found by the run's id; made with
    ``tags`` by the first task that asks."""
    made_with = {runs.PIPELINE_TAG: experiment, **tags}
    return tracker.find_or_start_run(experiment, run_id, made_with, _parent_found_by(run_id))


@contextlib.contextmanager
def tracked_work(tracking: TaskTracking | None) -> Iterator[dict[str, Any]]:
    """The task's work, tracked: what the work puts into the yielded dict (its outputs, as KFP
    hands them over) is logged into the task's run once the work is done (:func:`log_outputs`),
    and the run ends with the work's outcome (:func:`finish`). Nothing is tracked where
    ``tracking`` is None; nothing tracking raises reaches the work."""
    outputs: dict[str, Any] = {}
    succeeded = False
    try:
        yield outputs
        succeeded = True
        log_outputs(tracking, outputs)
    finally:
        finish(tracking, succeeded)


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
