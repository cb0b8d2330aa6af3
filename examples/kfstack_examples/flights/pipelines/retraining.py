"""flights-retraining: a new window of data -> drift check against the production model ->
(drifted) tune, train, evaluate -> champion/challenger gate -> (better) canary deployment.

Meant to run on a schedule (``kfstack schedule flights-retraining --cron ...``): each run reads
a new window of flights (``window_days`` back from its scheduled time, or an explicit
``window_start``/``window_end``), profiles it on the production model's histogram edges and
compares it with the data that model was trained on. Only when it drifted (or ``force``, or
nothing is in production) does it train; only a model that beats production on the new
window's holdout by ``gate_margin`` goes on to the canary, which is analysed and then promoted
or rolled back as in ``flights-training`` (the same steps: :mod:`kfstack_examples.flights.pipelines.steps`).
``synthetic_drift`` changes a share of the window on purpose, to see the retraining branch on
the bundled data.
"""

from kfp import dsl

from kfstack.components.data.data_window.component import data_window
from kfstack.components.monitoring.data_drift.component import data_drift
from kfstack.kubernetes import inference_service
from kfstack.kubernetes.placement import Placement, ServingPlacement, TrainingPlacement, TuningPlacement
from kfstack.kubernetes.spark_application import SparkJobPlacement, SparkResources
from kfstack.monitoring.drift import DriftThresholds
from kfstack.monitoring.gate import PASS, GateRule
from kfstack.serving import model_registry
from kfstack.serving.canary import CanaryThresholds
from kfstack.tuning.spec import TuningSettings
from kfstack_examples.flights.feature_spec import DRIFT_PROFILE_FILE
from kfstack_examples.flights.features import CALENDAR_FEATURES
from kfstack_examples.flights.features_job.config import FeatureJobConfig
from kfstack_examples.flights.pipelines import steps
from kfstack_examples.flights.pipelines.parameters import documented
from kfstack_examples.flights.predictor import DEFAULT_MODEL_NAME
from kfstack_examples.flights.settings import (
    CanaryReplay,
)
from kfstack_examples.flights.training.settings import OBJECTIVE, SEARCH_SPACE, TrainingSettings

PIPELINE_NAME = "flights-retraining"


@dsl.pipeline(
    name=PIPELINE_NAME,
    description=(
        "Drift-gated retraining of the flight delay classifier: a new window of flights, a drift "
        "check (PSI per feature, label rate) against the production model's training data, and "
        "only when it drifted: tuning, training, evaluation, a champion/challenger gate on the new "
        "window, and a KServe canary analysed, then promoted or rolled back."
    ),
)
@documented("Retrains the flight delay classifier when the new window drifted; promotes only a better model.")
def flights_retraining(
    platform: str = "kubernetes",
    data_uri: str = "",
    sample_fraction: float = FeatureJobConfig.sample_fraction,
    max_quarantine_fraction: float = FeatureJobConfig.max_quarantine_fraction,
    num_shards: int = FeatureJobConfig.num_shards,
    framework: str = TrainingSettings.framework,
    workers: int = TrainingSettings.workers,
    epochs: int = TrainingSettings.epochs,
    batch_size: int = TrainingSettings.batch_size,
    learning_rate: float = TrainingSettings.learning_rate,
    max_restarts: int = TrainingSettings.max_restarts,
    decision_threshold: float = 0.5,
    gate_metric: str = GateRule.metric,
    gate_margin: float = GateRule.margin,
    seed: int = TrainingSettings.seed,
    window_start: str = FeatureJobConfig.window_start,
    window_end: str = FeatureJobConfig.window_end,
    window_days: int = 0,
    window_lag_days: int = 0,
    synthetic_drift: float = FeatureJobConfig.synthetic_drift,
    drift_max_psi: float = DriftThresholds.max_psi,
    drift_max_label_rate_shift: float = DriftThresholds.max_label_rate_shift,
    drift_ignore_features: str = ",".join(CALENDAR_FEATURES),
    force: bool = False,
    gpu_pool: str = TrainingPlacement.node_pool,
    tf_topology: str = TrainingSettings.tf_topology,
    tf_parameter_servers: int = TrainingSettings.tf_parameter_servers,
    elastic_min_workers: int = TrainingSettings.elastic_min_workers,
    elastic_max_workers: int = TrainingSettings.elastic_max_workers,
    spark_executors: int = SparkResources.executor_instances,
    spark_executor_cores: int = SparkResources.executor_cores,
    spark_executor_memory: str = SparkResources.executor_memory,
    spark_driver_memory: str = SparkResources.driver_memory,
    spark_service_account: str = SparkJobPlacement.service_account,
    object_store_secret: str = Placement.object_store_secret,
    image_pull_secret: str = Placement.image_pull_secret,
    spark_timeout_seconds: int = SparkJobPlacement.timeout_seconds,
    training_timeout_seconds: int = TrainingPlacement.timeout_seconds,
    training_api: str = TrainingPlacement.training_api,
    trainer_runtime: str = TrainingPlacement.trainer_runtime,
    tune: bool = TuningSettings.enabled,
    tuning_algorithm: str = TuningSettings.algorithm,
    tuning_algorithm_settings: str = TuningSettings.algorithm_settings,
    tuning_search_space: str = SEARCH_SPACE,
    tuning_objective: str = OBJECTIVE,
    tuning_direction: str = TuningSettings.direction,
    tuning_goal: float = TuningSettings.goal,
    tuning_require_goal: bool = TuningSettings.require_goal,
    tuning_metric_strategy: str = TuningSettings.metric_strategy,
    tuning_early_stopping: str = TuningSettings.early_stopping,
    tuning_min_trials_required: int = TuningSettings.min_trials_required,
    tuning_start_step: int = TuningSettings.start_step,
    tuning_trial_epochs: int = TuningSettings.trial_epochs,
    tuning_parallel_trials: int = TuningSettings.parallel_trials,
    tuning_max_trials: int = TuningSettings.max_trials,
    tuning_max_failed_trials: int = TuningSettings.max_failed_trials,
    tuning_resume_policy: str = TuningSettings.resume_policy,
    tuning_timeout_seconds: int = TuningPlacement.timeout_seconds,
    deploy: bool = True,
    serving_name: str = DEFAULT_MODEL_NAME,
    serving_mode: str = inference_service.SERVERLESS,
    serving_pool: str = ServingPlacement.node_pool,
    serving_service_account: str = ServingPlacement.service_account,
    serving_min_replicas: int = inference_service.ServingRequest.min_replicas,
    serving_max_replicas: int = inference_service.ServingRequest.max_replicas,
    serving_scale_metric: str = inference_service.ServingRequest.scale_metric,
    serving_scale_target: int = inference_service.ServingRequest.scale_target,
    serving_timeout_seconds: int = ServingPlacement.timeout_seconds,
    canary_traffic_percent: int = inference_service.ServingRequest.canary_traffic_percent,
    canary_records: int = CanaryReplay.records,
    canary_batch_size: int = CanaryReplay.batch_size,
    canary_max_error_rate: float = CanaryThresholds.max_error_rate,
    canary_max_latency_ratio: float = CanaryThresholds.max_latency_ratio,
    canary_latency_slack_ms: float = CanaryThresholds.latency_slack_ms,
    # Not checked: see the parameter's description (the gate compared the models already).
    canary_max_psi: float = 0.0,
    canary_max_auc_drop: float = CanaryThresholds.max_quality_drop,
    model_registry_url: str = "",
    model_registry_author: str = model_registry.DEFAULT_AUTHOR,
):
    # Every parameter, for the steps to take theirs by name (before any other name is bound here).
    parameters = dict(locals())
    with steps.guarded(PIPELINE_NAME, parameters) as checked:
        window = steps.call(
            data_window,
            parameters,
            scheduled_time=dsl.PIPELINE_JOB_SCHEDULE_TIME_UTC_PLACEHOLDER,
            created_time=dsl.PIPELINE_JOB_CREATE_TIME_UTC_PLACEHOLDER,
        ).after(checked)
        steps.on_cluster(steps.uncached(window), parameters, "data-window")
        champion = steps.production(parameters).after(checked)
        # The new window, profiled on the champion's histogram edges: like is compared with like.
        # Never cached: a window relative to the run's time is new data under the same arguments.
        features = steps.features(
            parameters,
            window_start=window.outputs["start"],
            window_end=window.outputs["end"],
            reference_profile_uri=champion.outputs["profile_uri"],
        )
        steps.uncached(features)
        # The generic drift check against the production model, on the profile the feature job
        # computed over the whole window on the champion's edges.
        drift = steps.call(
            data_drift,
            parameters,
            reference=champion.outputs["model"],
            current=features.outputs["output"],
            current_profile_file=DRIFT_PROFILE_FILE,
        )
        steps.on_cluster(drift, parameters, "drift-check")
        with dsl.If(drift.outputs["Output"] == True, name="drifted"):  # noqa: E712 (a KFP condition)
            training, evaluation = steps.train_and_evaluate(parameters, features)
            gate = steps.gate(parameters, training, champion, features).after(evaluation)
            with dsl.If(gate.outputs["Output"] == PASS, name="beats-production"):
                deployment = steps.deploy(parameters, training, features)
                steps.register(parameters, training, deployment)
