"""Writes an evaluation into the KFP artifacts the UI renders."""

from __future__ import annotations

from typing import Any

from kfstack.components.evaluation.evaluate_model.core import evaluate_model


def evaluate_and_publish(
    *,
    model_uri: str,
    features_uri: str,
    threshold: float,
    metrics: Any,
    classification: Any,
    report: Any,
) -> dict[str, float]:
    """Evaluates the model and fills the three output artifacts.

    Args:
        model_uri: Directory with ``model.onnx`` and ``feature_spec.json``.
        features_uri: Feature job output; its ``test`` split is scored.
        threshold: Decision threshold in [0, 1].
        metrics: A ``kfp.dsl.Metrics`` output (``log_metric``).
        classification: A ``kfp.dsl.ClassificationMetrics`` output.
        report: A ``kfp.dsl.Markdown`` output (its ``path`` receives the report).

    Returns:
        The scalar metrics that were logged.
    """
    result = evaluate_model(model_uri, features_uri, threshold=threshold)
    for name, value in result.metrics.items():
        metrics.log_metric(name, value)
    classification.log_confusion_matrix(list(result.confusion_labels), result.confusion_matrix)
    classification.log_roc_curve(result.roc_fpr, result.roc_tpr, result.roc_thresholds)
    with open(report.path, "w", encoding="utf-8") as f:
        f.write(result.markdown)
    return dict(result.metrics)
