"""The steps the flights pipelines share, wired once, and the rules across their stages.

``flights-training`` and ``flights-retraining`` run the same feature job, training, evaluation
and deployment; each pipeline says what it adds around them. The wiring itself -- the run's
frame, a task's inputs from the parameters of the same name, a cluster task's pod settings -- is
every pipeline's (:mod:`kfstack.pipelines.wiring`), used here under the names the flights
pipelines call (``steps.guarded``, ``steps.call``...).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kfp import dsl

from kfstack.api import InvalidParameterError
from kfstack.api.pipeline import (
    AUTO,
    BINARY,
    JSON_PARAMETERS,
    NAMESPACE_FIELD,
    RUN_ID,
    TASK_NAME,
    DriftThresholds,
    GateRule,
    RegistryEndpoint,
    TuningSettings,
    call,
    distributed_training,
    feature_names,
    gate_model,
    guarded,
    hyperparameter_tuning,
    joins_mesh,
    model_deployment,
    model_evaluation,
    on_cluster,
    production_model,
    register_model,
    resolve_window,
    run_overrides,
    settings_from_arguments,
    spark_job,
    uncached,
)
from kfstack.api.pipeline import train_locally as train_code_locally
from kfstack.api.training import JobTopology
from kfstack_examples.flights import predictor
from kfstack_examples.flights.feature_spec import HOLDOUT_FILE, LABEL_COLUMN, PROFILE_FILE, TEST_REQUESTS_FILE
from kfstack_examples.flights.features import CATEGORICAL_FEATURES, CLASS_NAMES, NUMERIC_FEATURES
from kfstack_examples.flights.features_job.config import (
    PIPELINE_NAMES,
    SPARK_CONF,
    FeatureJobConfig,
    pipeline_arguments,
)
from kfstack_examples.flights.scoring import MODEL_DIR_FILES
from kfstack_examples.flights.settings import REPLAY_PARAMETERS, CanaryReplay
from kfstack_examples.flights.training.settings import TRAINER_CODE, TrainingSettings

__all__ = [
    "JSON_PARAMETERS",
    "NAMESPACE_FIELD",
    "RUN_ID",
    "TASK_NAME",
    "call",
    "check_retraining_run",
    "check_run",
    "deploy",
    "features",
    "gate",
    "guarded",
    "on_cluster",
    "production",
    "register",
    "train_and_evaluate",
    "train_locally",
    "uncached",
]


# The flights feature job: a team's Spark application, run as spark-submit runs it.
FEATURE_JOB = "kfstack_examples.flights.features_job"
# The flights trainers as the generic training and tuning steps run a team's code: declared as
# data (TRAINER_CODE), their hyperparameters the pipeline's parameters of the same name.
TRAINING_CODE = {
    "training_code": TRAINER_CODE.entry,
    "hyperparameter_types": dict(TRAINER_CODE.hyperparameters),
    "metric_names": list(TRAINER_CODE.metrics),
    "model_format": "custom",
}
# How the generic steps score and serve a flights model: through the flights predictor (a
# custom kserve.Model), sent raw flight records with their delay label.
PREDICTOR = {
    "model_format": "custom",
    "custom_predictor": predictor.MODEL_CLASS,
    "request_format": "records",
    "task": BINARY,
    "label_column": LABEL_COLUMN,
}


def features(parameters: Mapping[str, Any], **given: Any) -> dsl.PipelineTask:
    """The Spark feature job through the generic ``spark_job``: its options from the parameters
    of the same name, or from ``given`` (a retraining run's window and reference profile, which
    are upstream outputs); its input the ``data_uri`` parameter (empty: the bundled tables)."""
    task = call(
        spark_job,
        parameters,
        spark_application=FEATURE_JOB,
        spark_arguments=pipeline_arguments({"reference_profile_uri": "", **parameters, **given}),
        spark_conf=SPARK_CONF,
        input_uri=parameters["data_uri"],
        run_id=RUN_ID,
        task_name=TASK_NAME,
    )
    return on_cluster(task, parameters, "spark-features")


# The pipeline a flights model's lineage names for `kfstack reproduce`: the retraining pipeline
# trains with the training pipeline's own steps, and a reproduction needs no drift check.
REPRODUCED_BY = "flights-training"


def train_and_evaluate(
    parameters: Mapping[str, Any], features_task: dsl.PipelineTask
) -> tuple[dsl.PipelineTask, dsl.PipelineTask]:
    """Tuning (which hands the run's own values on when ``tune`` is false), training and
    evaluation; returns the training and evaluation tasks."""
    # The flights trainers through the generic steps, on the feature job's output; the
    # hyperparameters are the pipeline's parameters of the same name.
    job = {
        **TRAINING_CODE,
        "data": features_task.outputs["output"],
        "hyperparameters": {name: parameters[name] for name in TRAINER_CODE.hyperparameters},
        "run_id": RUN_ID,
        "task_name": TASK_NAME,
    }
    tuning = on_cluster(call(hyperparameter_tuning, parameters, **job), parameters, "tuning")
    # One training step: the framework is its parameter, so every later stage appears once in
    # the graph. Training reads its hyperparameters from the tuning step either way.
    training = call(
        distributed_training,
        parameters,
        **{**job, "hyperparameters": tuning.outputs["best_hyperparameters"]},
        pipeline=REPRODUCED_BY,
    )
    on_cluster(training, parameters, "training")
    # The generic evaluation, scoring every test-split flight as a request through the flights
    # predictor: the figures are those of the model as it serves.
    # Given by hand, not called with the parameters: the trainer's batch_size is not the
    # evaluation's (rows per request).
    evaluation = model_evaluation(
        model=training.outputs["model"],
        dataset=features_task.outputs["output"],
        dataset_split=TEST_REQUESTS_FILE,
        **PREDICTOR,
        class_names=list(CLASS_NAMES),
        decision_threshold=parameters["decision_threshold"],
        **run_overrides(parameters),
    )
    return training, on_cluster(evaluation, parameters, "evaluation")


def train_locally(
    training: TrainingSettings,
    *,
    features_uri: str,
    model_uri: str,
    logs_uri: str,
    training_api: str = AUTO,
    threads_per_worker: int | None = None,
    on_group_started: Callable[..., None] | None = None,
) -> tuple[dict[str, float], dict]:
    """The flights training step as these pipelines run it embedded -- the generic step with the
    flights trainers -- for callers outside a pipeline (benchmarks, tests); returns the step's
    metrics and reference."""
    return train_code_locally(
        TRAINER_CODE,
        {name: getattr(training, name) for name in TRAINER_CODE.hyperparameters},
        data_uri=features_uri,
        model_uri=model_uri,
        logs_uri=logs_uri,
        topology=JobTopology.from_arguments(training.arguments()),
        training_api=training_api,
        threads_per_worker=threads_per_worker,
        on_group_started=on_group_started,
    )


def deploy(
    parameters: Mapping[str, Any], training: dsl.PipelineTask, features_task: dsl.PipelineTask
) -> dsl.PipelineTask:
    """The rollout of the trained model: first at 100%, later as an analysed canary.

    The generic deployment with the flights predictor as its custom predictor, replaying the
    feature job's labelled holdout as raw flight records and judging the canary by its AUC."""
    task = call(
        model_deployment,
        parameters,
        model=training.outputs["model"],
        holdout=features_task.outputs["output"],
        holdout_split=HOLDOUT_FILE,
        **PREDICTOR,
        serving_runtime=predictor.RUNTIME,
        serving_model_format=predictor.MODEL_FORMAT,
        run_id=RUN_ID,
        task_name=TASK_NAME,
    )
    return joins_mesh(on_cluster(uncached(task), parameters, "deployment"))


def production(parameters: Mapping[str, Any]) -> dsl.PipelineTask:
    """The model in production, comparable when it is a flights model directory with the
    profile of its training data (the drift check's reference, the gate's champion)."""
    task = call(production_model, parameters, comparable_files=[*MODEL_DIR_FILES, PROFILE_FILE])
    return on_cluster(uncached(task), parameters, "production-model")


def gate(
    parameters: Mapping[str, Any],
    training: dsl.PipelineTask,
    champion: dsl.PipelineTask,
    features_task: dsl.PipelineTask,
) -> dsl.PipelineTask:
    """The generic champion/challenger gate on the new window's holdout, both models scored
    through the flights predictor."""
    task = call(
        gate_model,
        parameters,
        challenger=training.outputs["model"],
        champion=champion.outputs["model"],
        dataset=features_task.outputs["output"],
        dataset_split=HOLDOUT_FILE,
        **PREDICTOR,
    )
    return on_cluster(task, parameters, "champion-challenger")


def register(
    parameters: Mapping[str, Any], training: dsl.PipelineTask, deployment: dsl.PipelineTask
) -> dsl.PipelineTask:
    """The model that went into production (``first`` or ``promote``), registered in Kubeflow
    Model Registry with its lineage; nothing without ``model_registry_url``."""
    task = call(
        register_model,
        parameters,
        model=training.outputs["model"],
        decision=deployment.outputs["decision"],
        model_format="onnx",  # the flights predictor serves an ONNX graph (its opset is read from it)
    )
    return on_cluster(uncached(task), parameters, "model-registry")


def check_run(parameters: Mapping[str, Any]) -> None:
    """The rules of a flights training run beyond each stage's own: the feature job's options
    (a Spark application's argv, which the generic Spark step cannot read), the trainers'
    hyperparameters (their own rules, which the generic step cannot know), and every training
    rank reads a shard.

    Raises:
        InvalidParameterError: A bad feature job option or hyperparameter, or ``num_shards`` <
            ``workers``.
    """
    # The feature job's options (it runs as a Spark application, which checks them again): the
    # same config its driver parses, with stand-ins for the locations the step gives it.
    FeatureJobConfig.from_arguments(
        parameters, PIPELINE_NAMES, output_uri="(the step's output)", quarantine_uri="(its quarantine)"
    )
    # The canary's batches are requests to the flights predictor, which takes at most
    # DEFAULT_MAX_BATCH records: a larger batch fails here, not as a canary of errors.
    CanaryReplay.from_arguments(parameters, REPLAY_PARAMETERS)
    # The trainers' hyperparameters and job shape (batch_size >= workers: the global batch is
    # split over the replicas), which the generic step checks only for type and shell safety.
    TrainingSettings.from_arguments(parameters)
    if "tuning_search_space" in parameters and "tuning_objective" in parameters:
        # The tuning spec against the trainers' declaration with their metrics' ranges (an AUC
        # goal above 1 is refused), which the generic step's declaration does not carry.
        tuning = settings_from_arguments(TuningSettings, parameters, code=TRAINER_CODE)
        if parameters.get("tune", True) and any(p.name == "framework" for p in tuning.parameters):
            raise InvalidParameterError(
                "tuning_search_space: framework is not tuned: it decides the job (a PyTorchJob or a "
                "TFJob), so a trial would run one framework's trainer in the other's job"
            )
    num_shards, workers = parameters.get("num_shards"), parameters.get("workers")
    url = parameters.get("model_registry_url")
    if isinstance(url, str) and url.strip():
        RegistryEndpoint.parse(url)  # a bad URL fails before training, not after the rollout
    if not (isinstance(num_shards, int) and isinstance(workers, int)):
        return  # missing or templated (a Placeholder): each stage checks its own
    if num_shards < workers:
        raise InvalidParameterError(
            f"num_shards={num_shards} < workers={workers}: every rank must read at least one "
            f"shard; use num_shards >= workers (a multiple of workers balances best)"
        )


def _known_features(names: tuple[str, ...]) -> None:
    unknown = sorted(set(names) - {*CATEGORICAL_FEATURES, *NUMERIC_FEATURES})
    if unknown:
        raise InvalidParameterError(f"drift_ignore_features: no feature named {', '.join(unknown)}")


def check_retraining_run(parameters: Mapping[str, Any]) -> None:
    """The rules of a flights retraining run: those of a training run, a window that resolves,
    and valid drift thresholds and gate rule.

    Raises:
        InvalidParameterError: Naming every parameter at fault.
    """
    check_run(parameters)
    checks = (
        lambda: resolve_window(
            parameters["window_start"],
            parameters["window_end"],
            parameters["window_days"],
            parameters["window_lag_days"],
        ),
        lambda: settings_from_arguments(DriftThresholds, parameters, ignored_features=()),
        lambda: _known_features(feature_names(parameters["drift_ignore_features"])),
        lambda: settings_from_arguments(GateRule, parameters),
    )
    problems = []
    for check in checks:
        try:
            check()
        except InvalidParameterError as err:
            problems.append(str(err))
    if problems:
        raise InvalidParameterError("; ".join(problems))
