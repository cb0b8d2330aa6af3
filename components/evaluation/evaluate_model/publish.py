"""Writes an evaluation into the KFP artifacts the UI renders."""

from __future__ import annotations

from typing import Any

from kfstack.components.evaluation.evaluate_model.charts import charts_html
from kfstack.components.evaluation.evaluate_model.core import EvaluationResult, evaluate_model
from kfstack.training.metrics import UNDEFINED


def evaluate_and_publish(
    *,
    model_uri: str,
    features_uri: str,
    threshold: float,
    metrics: Any,
    classification: Any,
    report: Any,
    charts: Any,
) -> dict[str, float | None]:
    """Evaluates the model and fills the four output artifacts.

    Args:
        model_uri: Directory with ``model.onnx`` and ``feature_spec.json``.
        features_uri: Feature job output; its ``test`` split is scored.
        threshold: Decision threshold in [0, 1].
        metrics: A ``kfp.dsl.Metrics`` output (``log_metric`` and ``metadata``).
        classification: A ``kfp.dsl.ClassificationMetrics`` output.
        report: A ``kfp.dsl.Markdown`` output (its ``path`` receives the report).
        charts: A ``kfp.dsl.HTML`` output (its ``path`` receives the ROC and confusion page).

    Returns:
        The scalar metrics, ``None`` for those undefined on this test split.
    """
    result = evaluate_model(model_uri, features_uri, threshold=threshold)
    publish(result, metrics=metrics, classification=classification, report=report, charts=charts)
    return dict(result.metrics)


def publish(result: EvaluationResult, *, metrics: Any, classification: Any, report: Any, charts: Any) -> None:
    """Fills the output artifacts from an evaluation (arguments as in :func:`evaluate_and_publish`)."""
    for name, value in result.metrics.items():
        if value is None:
            # log_metric takes numbers only; the metadata dict goes to the executor output as
            # it is, and the KFP UI lists a string value in its scalar table.
            metrics.metadata[name] = UNDEFINED
        else:
            metrics.log_metric(name, value)
    classification.log_confusion_matrix(list(result.confusion_labels), result.confusion_matrix)
    classification.log_roc_curve(result.roc_fpr, result.roc_tpr, result.roc_thresholds)
    with open(report.path, "w", encoding="utf-8") as f:
        f.write(result.markdown)
    page = charts_html(
        fpr=result.roc_fpr,
        tpr=result.roc_tpr,
        auc=result.metrics["auc"],
        auc_undefined_reason=result.undefined_reasons.get("auc", ""),
        matrix=result.confusion_matrix,
        labels=result.confusion_labels,
        threshold=result.threshold,
    )
    with open(charts.path, "w", encoding="utf-8") as f:
        f.write(page)
