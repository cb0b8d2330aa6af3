"""Evaluates a model on a labelled dataset through its own server, and publishes what the KFP UI shows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kfstack.errors import InvalidParameterError
from kfstack.evaluation import scoring
from kfstack.evaluation.charts import charts_html
from kfstack.evaluation.task_metrics import BINARY, TaskEvaluation, check_task, evaluate
from kfstack.training.metrics import UNDEFINED


def evaluate_model_dir(
    *,
    model_dir: str,
    model_format: str,
    dataset_uri: str,
    task: str,
    label_column: str,
    feature_columns: Sequence[str] = (),
    request_format: str = scoring.TENSOR,
    custom_predictor: str = "",
    threshold: float = 0.5,
    class_names: Sequence[str] = (),
    batch_size: int = scoring.DEFAULT_BATCH,
) -> TaskEvaluation:
    """Scores ``dataset_uri`` through the model's server and computes the task's metrics.

    Raises:
        InvalidParameterError: A bad parameter or dataset, before the model is loaded where it
            can be told.
    """
    check_task(task)
    if batch_size < 1:
        raise InvalidParameterError(f"batch_size={batch_size} must be >= 1")
    labels, predictions = scoring.score_dataset(
        model_dir=model_dir,
        model_format=model_format,
        dataset_uri=dataset_uri,
        label_column=label_column,
        feature_columns=feature_columns,
        request_format=request_format,
        custom_predictor=custom_predictor,
        batch_size=batch_size,
    )
    return evaluate(task, labels, predictions, threshold).named(class_names)


def charts_page(result: TaskEvaluation, threshold: float) -> str:
    """The evaluation's charts as one HTML page: the ROC curve (binary, probabilities served)
    and the confusion matrix (classification)."""
    if result.task == BINARY:
        caption = f"predicted {result.categories[1]} at probability ≥ {threshold:g}"
    else:
        caption = "predicted: the class the model answered"
    roc = (result.roc[0], result.roc[1]) if result.roc is not None else None
    return charts_html(
        heading=f"Model evaluation: {result.task}, {result.rows:,} rows",
        matrix=result.confusion,
        labels=result.categories,
        caption=caption,
        roc=roc,
        auc=result.metrics.get("auc"),
        auc_undefined_reason=result.undefined.get("auc", ""),
    )


def publish(
    result: TaskEvaluation, *, threshold: float, metrics: Any, classification: Any, report: Any, charts: Any
) -> None:
    """Logs the figures (an undefined one as ``"undefined"``), the confusion matrix and the ROC
    curve on the UI's artifacts, and writes the report and the charts page."""
    for name, value in result.metrics.items():
        metrics.log_metric(name, value if value is not None else UNDEFINED)
    metrics.log_metric("rows", result.rows)
    if result.confusion:
        classification.log_confusion_matrix(result.categories, result.confusion)
    if result.task == BINARY and result.roc is not None:
        classification.log_roc_curve(*result.roc)
    with open(report.path, "w", encoding="utf-8") as f:
        f.write(result.markdown("Model evaluation"))
    with open(charts.path, "w", encoding="utf-8") as f:
        f.write(charts_page(result, threshold))
