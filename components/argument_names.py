"""The components' argument names of the generic library's settings fields: the edge where a
field (``TrainingPlacement.node_pool``) becomes what a user sets (``gpu_pool``).

The library names its values by field and knows no component or pipeline; the components'
arguments carry the names a pipeline's parameters have (the catalog's, in
:mod:`kfstack.pipelines.parameters`). Stages build their settings through
:func:`from_arguments`, so a refused value is named as the user set it; the parameter catalog
names its parameters by the same table. A field not listed is its own argument's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from kfstack.kubernetes.inference_service import ServingRequest
from kfstack.kubernetes.placement import ServingPlacement, TrainingPlacement, TuningPlacement
from kfstack.kubernetes.spark_application import SparkJobPlacement, SparkResources
from kfstack.monitoring.drift import DriftThresholds
from kfstack.monitoring.gate import GateRule
from kfstack.serving.canary import CanaryThresholds
from kfstack.settings import Settings
from kfstack.tuning.spec import TuningSettings

S = TypeVar("S", bound=Settings)

_TUNED = (
    "search_space",
    "objective",
    "algorithm",
    "algorithm_settings",
    "direction",
    "goal",
    "require_goal",
    "metric_strategy",
    "early_stopping",
    "min_trials_required",
    "start_step",
    "trial_epochs",
    "parallel_trials",
    "max_trials",
    "max_failed_trials",
    "resume_policy",
)
_CANARY = ("max_error_rate", "max_latency_ratio", "latency_slack_ms", "max_psi", "max_quality_drop")
_TRAINING_PLACEMENT = {"node_pool": "gpu_pool", "timeout_seconds": "training_timeout_seconds"}

# Settings class -> field -> the argument it is read from, where the two differ.
NAMES: dict[type[Settings], dict[str, str]] = {
    TrainingPlacement: _TRAINING_PLACEMENT,
    # Trials run on the training pool; the wait is the whole Experiment's.
    TuningPlacement: {**_TRAINING_PLACEMENT, "timeout_seconds": "tuning_timeout_seconds"},
    ServingPlacement: {
        "node_pool": "serving_pool",
        "service_account": "serving_service_account",
        "timeout_seconds": "serving_timeout_seconds",
    },
    SparkJobPlacement: {
        "node_pool": "spark_node_pool",
        "service_account": "spark_service_account",
        "timeout_seconds": "spark_timeout_seconds",
    },
    SparkResources: {
        "driver_cores": "spark_driver_cores",
        "driver_memory": "spark_driver_memory",
        "executor_instances": "spark_executors",
        "executor_cores": "spark_executor_cores",
        "executor_memory": "spark_executor_memory",
    },
    TuningSettings: {"enabled": "tune", **{field: f"tuning_{field}" for field in _TUNED}},
    ServingRequest: {
        "name": "serving_name",
        "mode": "serving_mode",
        "service_account": "serving_service_account",
        "min_replicas": "serving_min_replicas",
        "max_replicas": "serving_max_replicas",
        "scale_metric": "serving_scale_metric",
        "scale_target": "serving_scale_target",
        "autoscaler": "serving_autoscaler",
        "prometheus_address": "serving_prometheus_address",
        "keda_authentication": "serving_keda_authentication",
        "keda_auth_modes": "serving_keda_auth_modes",
        "queue_metric": "serving_queue_metric",
        "gpu_metric": "serving_gpu_metric",
        "gpu_pod_label": "serving_gpu_pod_label",
        "gpu_namespace_label": "serving_gpu_namespace_label",
    },
    CanaryThresholds: {field: f"canary_{field}" for field in _CANARY},
    DriftThresholds: {
        "max_psi": "drift_max_psi",
        "max_label_rate_shift": "drift_max_label_rate_shift",
        "ignored_features": "drift_ignore_features",
    },
    GateRule: {"metric": "gate_metric", "margin": "gate_margin"},
}


def names_of(settings: type[Settings]) -> Mapping[str, str]:
    """Field -> argument name of ``settings``: its own entry, or its nearest listed base's; none
    (every field its argument's name) when neither is listed."""
    for cls in settings.__mro__:
        if cls in NAMES:
            return NAMES[cls]
    return {}


def argument(settings: type[Settings], field: str) -> str:
    """The argument ``settings.field`` is read from."""
    return names_of(settings).get(field, field)


def from_arguments(settings: type[S], arguments: Mapping[str, Any], **overrides: Any) -> S:
    """``settings`` built from a component's ``arguments`` under their names
    (each value checked as its settings class checks it, named as the argument).

    Raises:
        InvalidParameterError: A value is missing, mistyped or out of range, named as the
            argument.
    """
    return settings.from_arguments(arguments, names_of(settings), **overrides)
