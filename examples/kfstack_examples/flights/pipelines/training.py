"""flights-training: Spark features -> distributed PyTorch or TensorFlow training -> evaluation
-> deployment.

Predicts whether a NYC 2013 flight arrives more than 15 minutes late (or not at all) from what
is known before departure. Compile with ``kfstack compile``; run embedded with
``kfstack run --local`` (sets ``platform=local``). The steps are wired in
:mod:`kfstack_examples.flights.pipelines.steps` (shared with ``flights-retraining``); the parameters are
described in :mod:`kfstack_examples.flights.pipelines.parameters`.

The defaults of the parameters are the settings classes' own (one default per value).
"""

from kfp import dsl

from kfstack.kubernetes import inference_service
from kfstack.kubernetes.placement import Placement, ServingPlacement, TrainingPlacement, TuningPlacement
from kfstack.kubernetes.spark_application import SparkJobPlacement, SparkResources
from kfstack.serving import model_registry
from kfstack.serving.canary import CanaryThresholds
from kfstack.tuning.spec import TuningSettings
from kfstack_examples.flights.features_job.config import FeatureJobConfig
from kfstack_examples.flights.pipelines import steps
from kfstack_examples.flights.pipelines.parameters import documented
from kfstack_examples.flights.predictor import DEFAULT_MODEL_NAME
from kfstack_examples.flights.settings import (
    CanaryReplay,
)
from kfstack_examples.flights.training.settings import OBJECTIVE, SEARCH_SPACE, TrainingSettings

PIPELINE_NAME = "flights-training"


@dsl.pipeline(
    name=PIPELINE_NAME,
    description=(
        "Flight delay classifier on the NYC 2013 flights data: Spark feature job with "
        "quarantine of bad rows, optional Katib tuning, distributed PyTorch (DDP) or TensorFlow "
        "training, ONNX export, evaluation on a held-out test split, and deployment to KServe: the "
        "first model at 100%, later ones as a canary analysed, then promoted or rolled back."
    ),
)
@documented("Trains, evaluates and deploys the flight delay classifier.")
def flights_training(
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
    seed: int = TrainingSettings.seed,
    window_start: str = FeatureJobConfig.window_start,
    window_end: str = FeatureJobConfig.window_end,
    synthetic_drift: float = FeatureJobConfig.synthetic_drift,
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
    canary_max_psi: float = CanaryThresholds.max_psi,
    canary_max_auc_drop: float = CanaryThresholds.max_quality_drop,
    model_registry_url: str = "",
    model_registry_author: str = model_registry.DEFAULT_AUTHOR,
):
    # Every parameter, for the steps to take theirs by name (before any other name is bound here).
    parameters = dict(locals())
    with steps.guarded(PIPELINE_NAME, parameters) as checked:
        features = steps.features(parameters).after(checked)
        training, evaluation = steps.train_and_evaluate(parameters, features)
        # Deployment comes after the evaluation (a model that failed to evaluate is never served).
        deployment = steps.deploy(parameters, training, features).after(evaluation)
        steps.register(parameters, training, deployment)
