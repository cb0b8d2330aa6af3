"""What an evaluation publishes for the KFP UI: the figures, the confusion matrix and ROC curve, the
report and the charts page (the evaluation itself is :func:`kfstack.serving.scoring.evaluate_dataset`)."""

from __future__ import annotations

from typing import Any

from kfstack.evaluation.charts import charts_html
from kfstack.evaluation.task_metrics import BINARY, TaskEvaluation
from kfstack.training.metrics import UNDEFINED


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
