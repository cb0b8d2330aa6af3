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
    """Scalar metrics, the confusion matrix and ROC curve for the KFP UI, and a Markdown report.

    A metric is ``None`` when this test split leaves it undefined (see :func:`evaluate_model`);
    ``undefined_reasons`` then says why, in the report's words.
    """

    metrics: dict[str, float | None]
    confusion_matrix: list[list[int]]
    roc_fpr: list[float]
    roc_tpr: list[float]
    roc_thresholds: list[float]
    threshold: float
    markdown: str
    undefined_reasons: dict[str, str] = dataclasses.field(default_factory=dict)
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

    ``auc``, ``precision`` and ``recall`` are ``None`` where this split leaves them undefined: AUC
    when the labels hold one class, precision when no row is predicted positive, recall when no
    row is positive. ``log_loss``, ``accuracy``, both rates and ``test_rows`` are always numbers.

    Raises:
        InvalidParameterError: ``threshold`` outside [0, 1] or an empty test split.
    """
    if not 0.0 <= threshold <= 1.0:
        raise InvalidParameterError(f"threshold={threshold} must be in [0, 1]")
    labels, probabilities = score(model_uri, features_uri)
    if len(labels) == 0:
        raise InvalidParameterError(f"the test split of {features_uri} has no rows")
    matrix = metrics.confusion_matrix(labels, probabilities, threshold)
    (tn, fp), (_fn, tp) = matrix
    precision, recall = metrics.precision_recall(matrix)
    values: dict[str, float | None] = {
        # roc_auc's one-class fallback (0.5) would read as a chance-level model.
        "auc": metrics.roc_auc(labels, probabilities) if metrics.has_both_classes(labels) else None,
        "log_loss": metrics.log_loss(labels, probabilities),
        "accuracy": (tn + tp) / len(labels),
        "precision": precision,
        "recall": recall,
        "positive_rate": float(np.mean(labels)),
        "predicted_positive_rate": (tp + fp) / len(labels),
        "test_rows": float(len(labels)),
    }
    reasons = {name: undefined_reason(name, matrix) for name, value in values.items() if value is None}
    fpr, tpr, thresholds = metrics.roc_curve(labels, probabilities)
    return EvaluationResult(
        metrics=values,
        confusion_matrix=matrix,
        roc_fpr=fpr,
        roc_tpr=tpr,
        roc_thresholds=thresholds,
        threshold=threshold,
        markdown=report_markdown(values, reasons, matrix, threshold, model_uri),
        undefined_reasons=reasons,
    )


def undefined_reason(metric: str, matrix: list[list[int]]) -> str:
    """Why ``metric`` (precision, recall or AUC) is undefined on the split ``matrix`` counts."""
    if metric == "precision":
        return "no flight predicted delayed"
    # Recall lacks delayed flights; AUC lacks whichever class is absent. Row 1 is the truly
    # delayed flights (FN + TP).
    missing = "delayed" if sum(matrix[1]) == 0 else "on-time"
    return f"no {missing} flight in the test split"


def shown(values: dict[str, float | None], reasons: dict[str, str], name: str, digits: int = 4) -> str:
    """A metric as the report prints it: the number, or "undefined (<reason>)"."""
    value = values[name]
    if value is None:
        return f"undefined ({reasons.get(name, 'not defined on this data')})"
    return f"{value:.{digits}f}"


def report_markdown(
    values: dict[str, float | None],
    reasons: dict[str, str],
    matrix: list[list[int]],
    threshold: float,
    model_uri: str,
) -> str:
    (tn, fp), (fn, tp) = matrix
    test_rows = tn + fp + fn + tp
    return "\n".join(
        [
            "# Flight delay model: test split",
            "",
            f"Model `{os.path.basename(model_uri.rstrip('/'))}/{MODEL_FILE}` scored with onnxruntime on "
            f"{test_rows:,} held-out flights; a flight is predicted *delayed* at "
            f"probability >= {threshold:g}.",
            "",
            "| metric | value |",
            "|---|---|",
            f"| AUC | {shown(values, reasons, 'auc')} |",
            f"| log loss | {shown(values, reasons, 'log_loss')} |",
            f"| accuracy | {shown(values, reasons, 'accuracy')} |",
            f"| precision | {shown(values, reasons, 'precision')} |",
            f"| recall | {shown(values, reasons, 'recall')} |",
            f"| delayed share (actual / predicted) | {shown(values, reasons, 'positive_rate', 3)} / "
            f"{shown(values, reasons, 'predicted_positive_rate', 3)} |",
            f"| test rows | {test_rows:,} |",
            "",
            "| | predicted on time | predicted delayed |",
            "|---|---|---|",
            f"| **on time** | {tn:,} | {fp:,} |",
            f"| **delayed** | {fn:,} | {tp:,} |",
            "",
        ]
    )
