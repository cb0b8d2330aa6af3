"""The steps the flights pipelines share, wired once.

``flights-training`` and ``flights-retraining`` run the same feature job, training, evaluation
and deployment; each pipeline says what it adds around them. The wiring itself -- the run's
frame, a task's inputs from the parameters of the same name, a cluster task's pod settings -- is
every pipeline's (:mod:`kfstack.pipelines.wiring`), used here under the names the flights
pipelines call (``steps.guarded``, ``steps.call``...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kfp import dsl

from kfstack.components.data.flights_features.component import flights_features
from kfstack.components.evaluation.model_evaluation.component import model_evaluation
from kfstack.components.serving import predictor
from kfstack.components.serving.model_deployment.component import model_deployment
from kfstack.components.serving.register_model.component import register_model
from kfstack.components.training.train_model.component import train_model
from kfstack.components.tuning.tune_model.component import tune_model
from kfstack.evaluation.task_metrics import BINARY
from kfstack.features import HOLDOUT_FILE, LABEL_COLUMN, TEST_REQUESTS_FILE
from kfstack.flights.features import CLASS_NAMES
from kfstack.pipelines.wiring import (
    JSON_PARAMETERS,
    NAMESPACE_FIELD,
    RUN_ID,
    TASK_NAME,
    call,
    guarded,
    on_cluster,
    uncached,
)

__all__ = [
    "JSON_PARAMETERS",
    "NAMESPACE_FIELD",
    "RUN_ID",
    "TASK_NAME",
    "call",
    "deploy",
    "features",
    "guarded",
    "on_cluster",
    "register",
    "train_and_evaluate",
    "uncached",
]


def features(parameters: Mapping[str, Any], **given: Any) -> dsl.PipelineTask:
    """The Spark feature job."""
    task = call(flights_features, parameters, run_id=RUN_ID, task_name=TASK_NAME, **given)
    return on_cluster(task, parameters, "spark-features")


def train_and_evaluate(
    parameters: Mapping[str, Any], features_task: dsl.PipelineTask
) -> tuple[dsl.PipelineTask, dsl.PipelineTask]:
    """Tuning (which hands the given values on when ``tune`` is false), training and evaluation;
    returns the training and evaluation tasks."""
    # The training job as the tuning trials and the final training both run it.
    job = {"features": features_task.outputs["features"], "run_id": RUN_ID, "task_name": TASK_NAME}
    tuning = on_cluster(call(tune_model, parameters, **job), parameters, "tuning")
    # One training step: the framework is its parameter, so every later stage appears once in
    # the graph. Training reads its hyperparameters from the tuning step either way.
    training = call(
        train_model,
        parameters,
        **job,
        batch_size=tuning.outputs["batch_size"],
        learning_rate=tuning.outputs["learning_rate"],
    )
    on_cluster(training, parameters, "training")
    # The generic evaluation, scoring every test-split flight as a request through the flights
    # predictor: the figures are those of the model as it serves.
    evaluation = model_evaluation(
        model=training.outputs["model"],
        dataset=features_task.outputs["features"],
        dataset_split=TEST_REQUESTS_FILE,
        task=BINARY,
        label_column=LABEL_COLUMN,
        model_format="custom",
        request_format="records",
        custom_predictor=predictor.MODEL_CLASS,
        threshold=parameters["decision_threshold"],
        class_names=list(CLASS_NAMES),
    )
    return training, on_cluster(evaluation, parameters, "evaluation")


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
        holdout=features_task.outputs["features"],
        holdout_split=HOLDOUT_FILE,
        model_format="custom",
        custom_predictor=predictor.MODEL_CLASS,
        serving_runtime=predictor.RUNTIME,
        serving_model_format=predictor.MODEL_FORMAT,
        task=BINARY,
        label_column=LABEL_COLUMN,
        request_format="records",
        canary_max_quality_drop=parameters["canary_max_auc_drop"],
        run_id=RUN_ID,
        task_name=TASK_NAME,
    )
    return on_cluster(uncached(task), parameters, "deployment")


def register(
    parameters: Mapping[str, Any], training: dsl.PipelineTask, deployment: dsl.PipelineTask
) -> dsl.PipelineTask:
    """The model that went into production (``first`` or ``promote``), registered in Kubeflow
    Model Registry with its lineage; nothing without ``model_registry_url``."""
    task = call(
        register_model, parameters, model=training.outputs["model"], decision=deployment.outputs["decision"]
    )
    return on_cluster(uncached(task), parameters, "model-registry")
