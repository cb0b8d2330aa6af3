"""What a finished Katib ``Experiment`` (``kubeflow.org/v1beta1``) says about its trials: its
``Trial`` objects as :class:`~kfstack.tuning.trials.TrialRecord` objects, and the best trial,
whether the goal was reached and why it ended as a :class:`~kfstack.tuning.trials.TuningResult`.
The Experiment itself is built by :mod:`.katib_experiment`.
"""

from __future__ import annotations

import datetime

from kfstack.kubernetes.launcher import Cluster, ResourceLauncher
from kfstack.kubernetes.resources import EXPERIMENT_GOAL_REACHED, KATIB_EXPERIMENT_LABEL, TRIAL
from kfstack.tuning import spec
from kfstack.tuning.spec import TuningSettings
from kfstack.tuning.trials import (
    EARLY_STOPPED,
    FAILED,
    KILLED,
    METRICS_UNAVAILABLE,
    RUNNING,
    SUCCEEDED,
    TrialRecord,
    TuningResult,
)

# Katib's value for a metric never reported (consts.UnavailableMetricValue).
UNAVAILABLE = "unavailable"
# The Trial condition types, in the order Katib's experiment controller tests them.
_TRIAL_OUTCOMES = (KILLED, FAILED, SUCCEEDED, EARLY_STOPPED, METRICS_UNAVAILABLE, RUNNING)


def _strategies(experiment: dict, tuning: TuningSettings) -> dict[str, str]:
    """The Experiment's own metric strategies (Katib's defaulting may have filled them in)."""
    objective = (experiment.get("spec") or {}).get("objective") or {}
    stated = {s["name"]: s["value"] for s in objective.get("metricStrategies") or [] if s.get("name")}
    return {**tuning.metric_strategies, **stated}


def _metric_value(metric: dict, strategy: str) -> float | None:
    """One Katib observation metric (``min``/``max``/``latest`` strings) under ``strategy``; like
    Katib, ``latest`` where the extreme is unavailable; None when no number was reported."""
    raw = metric.get(strategy)
    if raw in (None, "", UNAVAILABLE):
        raw = metric.get("latest")
    try:
        return float(str(raw))
    except ValueError:
        return None  # unavailable, or not reported at all


def _metrics(observation: dict | None, strategies: dict[str, str]) -> dict[str, float]:
    values = {}
    for metric in (observation or {}).get("metrics") or []:
        value = _metric_value(metric, strategies.get(metric.get("name", ""), spec.LATEST))
        if value is not None:
            values[metric["name"]] = value
    return values


def _assignments(assignments: list[dict] | None) -> dict[str, str]:
    return {a["name"]: str(a.get("value", "")) for a in assignments or [] if a.get("name")}


_EPOCH = datetime.datetime.fromtimestamp(0, tz=datetime.UTC)


def _time(value: str | None) -> datetime.datetime | None:
    return datetime.datetime.fromisoformat(value) if value else None


def _true_condition(obj: dict, types: tuple[str, ...]) -> dict | None:
    """The first of ``types`` whose condition is True, as the condition."""
    true = {
        c.get("type"): c
        for c in (obj.get("status") or {}).get("conditions") or []
        if c.get("status") == "True"
    }
    return next((true[t] for t in types if t in true), None)


def trial_record(trial: dict, strategies: dict[str, str], objective: str) -> TrialRecord:
    """One Katib ``Trial`` object as a :class:`TrialRecord`.

    Args:
        trial: The Trial (``kubeflow.org/v1beta1``).
        strategies: Metric -> strategy (:attr:`TuningSettings.metric_strategies`).
        objective: The objective metric's name.
    """
    status = trial.get("status") or {}
    deciding = _true_condition(trial, _TRIAL_OUTCOMES)
    metrics = _metrics(status.get("observation"), strategies)
    started, completed = _time(status.get("startTime")), _time(status.get("completionTime"))
    return TrialRecord(
        name=trial["metadata"]["name"],
        parameters=_assignments((trial.get("spec") or {}).get("parameterAssignments")),
        # A Trial with no outcome yet is pending or running; the record knows only running.
        status=deciding["type"] if deciding else RUNNING,
        objective=metrics.get(objective),
        metrics=metrics,
        seconds=(completed - started).total_seconds() if started and completed else None,
        message=(deciding or {}).get("message", ""),
    )


def read_trials(
    source: Cluster | ResourceLauncher, experiment: dict, tuning: TuningSettings
) -> list[TrialRecord]:
    """The Experiment's trials, oldest first, as :class:`TrialRecord` objects.

    Lists the ``Trial`` objects labelled with the Experiment's name (Katib labels every Trial
    ``katib.kubeflow.org/experiment=<name>``) in the Experiment's namespace. A trial's
    ``history`` stays empty on Kubernetes: Katib keeps the per-epoch reports in its database
    (the DB manager), not in the Trial, which holds only each metric's min, max and latest.

    Args:
        source: The cluster, or any launcher on it (its client is used).
        experiment: The Experiment as the API returned it.
        tuning: Its tuning spec (the metric strategies Katib's defaults left unstated).
    """
    if isinstance(source, Cluster):
        api_client, namespace = source.api_client, source.namespace
    else:
        api_client, namespace = source.custom.api_client, source.namespace
    namespace = experiment["metadata"].get("namespace") or namespace
    launcher = ResourceLauncher(TRIAL, namespace, api_client)
    trials = launcher.list(f"{KATIB_EXPERIMENT_LABEL}={experiment['metadata']['name']}")
    trials.sort(
        key=lambda t: (_time(t["metadata"].get("creationTimestamp")) or _EPOCH, t["metadata"]["name"])
    )
    strategies = _strategies(experiment, tuning)
    return [trial_record(trial, strategies, tuning.objective) for trial in trials]


def tuning_result(experiment: dict, trials: list[TrialRecord], tuning: TuningSettings) -> TuningResult:
    """What the finished Experiment says: its best trial, whether the goal was reached, why it ended.

    Args:
        experiment: The final Experiment.
        trials: Its trials (:func:`read_trials`).
        tuning: Its tuning spec.
    """
    status = experiment.get("status") or {}
    optimal = status.get("currentOptimalTrial") or {}
    best = None
    if optimal.get("bestTrialName"):
        name = optimal["bestTrialName"]
        known = next((t for t in trials if t.name == name), None)
        metrics = _metrics(optimal.get("observation"), _strategies(experiment, tuning))
        outcome = EARLY_STOPPED if name in (status.get("earlyStoppedTrialList") or []) else SUCCEEDED
        best = TrialRecord(
            name=name,
            parameters=_assignments(optimal.get("parameterAssignments")),
            status=known.status if known else outcome,
            objective=metrics.get(tuning.objective),
            metrics=metrics,
            seconds=known.seconds if known else None,
            message=known.message if known else "",
        )
    succeeded = _true_condition(experiment, ("Succeeded",))
    deciding = _true_condition(experiment, ("Failed", "Succeeded", "Running", "Restarting", "Created"))
    return TuningResult(
        algorithm=tuning.algorithm,
        objective=tuning.objective,
        direction=tuning.direction,
        trials=list(trials),
        best=best,
        goal_reached=bool(succeeded and succeeded.get("reason") == EXPERIMENT_GOAL_REACHED),
        reason=(deciding or {}).get("reason", ""),
    )
