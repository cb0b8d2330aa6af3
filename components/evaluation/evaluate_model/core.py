"""Scores an exported model on the test split, exactly as it will be served (onnxruntime)."""

from __future__ import annotations

import dataclasses
import os

import fsspec
import numpy as np

from kfstack.errors import InvalidParameterError
from kfstack.features import FeatureSpec
from kfstack.training import metrics, shards
from kfstack.training.settings import MODEL_FILE

CONFUSION_LABELS = ("on_time", "delayed")
SCORING_BATCH = 65536


@dataclasses.dataclass
class EvaluationResult:
    """Scalar metrics, the confusion matrix and ROC curve for the KFP UI, and a Markdown report."""

    metrics: dict[str, float]
    confusion_matrix: list[list[int]]
    roc_fpr: list[float]
    roc_tpr: list[float]
    roc_thresholds: list[float]
    markdown: str
    confusion_labels: tuple[str, ...] = CONFUSION_LABELS


def score(model_uri: str, features_uri: str, split: str = "test") -> tuple[np.ndarray, np.ndarray]:
    """(labels, probabilities) of every row of ``split``, scored by ``model.onnx``."""
    import onnxruntime  # deferred: the component module must import without it

    spec = FeatureSpec.load(features_uri)
    with fsspec.open(f"{model_uri.rstrip('/')}/{MODEL_FILE}", "rb") as f:
        session = onnxruntime.InferenceSession(f.read(), providers=["CPUExecutionProvider"])
    categorical, numeric, labels = shards.read_split(spec, f"{features_uri.rstrip('/')}/{split}")
    labels = labels.astype(np.int64)
    probabilities = [
        session.run(
            None,
            {"categorical": categorical[i : i + SCORING_BATCH], "numeric": numeric[i : i + SCORING_BATCH]},
        )[0]
        for i in range(0, len(labels), SCORING_BATCH)
    ]
    return labels, np.concatenate(probabilities) if probabilities else np.empty(0, np.float32)


def evaluate_model(model_uri: str, features_uri: str, threshold: float = 0.5) -> EvaluationResult:
    """Evaluates ``model.onnx`` in ``model_uri`` on the ``test`` split of ``features_uri``.

    Raises:
        InvalidParameterError: ``threshold`` outside [0, 1] or an empty test split.
    """
    if not 0.0 <= threshold <= 1.0:
        raise InvalidParameterError(f"threshold={threshold} must be in [0, 1]")
    labels, probabilities = score(model_uri, features_uri)
    if len(labels) == 0:
        raise InvalidParameterError(f"the test split of {features_uri} has no rows")
    matrix = metrics.confusion_matrix(labels, probabilities, threshold)
    (tn, fp), (fn, tp) = matrix
    values = {
        "auc": metrics.roc_auc(labels, probabilities),
        "log_loss": metrics.log_loss(labels, probabilities),
        "accuracy": (tn + tp) / len(labels),
        "precision": tp / (tp + fp) if tp + fp else 0.0,
        "recall": tp / (tp + fn) if tp + fn else 0.0,
        "positive_rate": float(np.mean(labels)),
        "predicted_positive_rate": (tp + fp) / len(labels),
        "test_rows": float(len(labels)),
    }
    fpr, tpr, thresholds = metrics.roc_curve(labels, probabilities)
    return EvaluationResult(
        metrics=values,
        confusion_matrix=matrix,
        roc_fpr=fpr,
        roc_tpr=tpr,
        roc_thresholds=thresholds,
        markdown=report_markdown(values, matrix, threshold, model_uri),
    )


def report_markdown(
    values: dict[str, float], matrix: list[list[int]], threshold: float, model_uri: str
) -> str:
    (tn, fp), (fn, tp) = matrix
    return "\n".join(
        [
            "# Flight delay model: test split",
            "",
            f"Model `{os.path.basename(model_uri.rstrip('/'))}/{MODEL_FILE}` scored with onnxruntime on "
            f"{int(values['test_rows']):,} held-out flights; a flight is predicted *delayed* at "
            f"probability >= {threshold:g}.",
            "",
            "| metric | value |",
            "|---|---|",
            f"| AUC | {values['auc']:.4f} |",
            f"| log loss | {values['log_loss']:.4f} |",
            f"| accuracy | {values['accuracy']:.4f} |",
            f"| precision | {values['precision']:.4f} |",
            f"| recall | {values['recall']:.4f} |",
            f"| delayed share (actual / predicted) | {values['positive_rate']:.3f} / "
            f"{values['predicted_positive_rate']:.3f} |",
            "",
            "| | predicted on time | predicted delayed |",
            "|---|---|---|",
            f"| **on time** | {tn:,} | {fp:,} |",
            f"| **delayed** | {fn:,} | {tp:,} |",
            "",
        ]
    )
