"""Metrics by task, from labels and a model's predictions as any server returns them.

A server's predictions come in the shapes its runtime gives: a class per row (``predict``), a
probability per row (a binary model), a probability per class per row (``predict_proba``, a
softmax output), or a number per row (regression). :func:`evaluate` reads each shape as the task
needs it and computes:

- ``binary``: ``auc``, ``log_loss`` (probabilities only), ``accuracy``, ``precision``,
  ``recall``, ``positive_rate`` (the labels') and ``predicted_positive_rate`` at a threshold,
  the confusion matrix and the ROC curve;
- ``multiclass``: ``accuracy``, ``macro_f1`` (the mean of each class's F1, classes taken from
  the labels and predictions), ``log_loss`` when probabilities were served, the confusion matrix;
- ``regression``: ``rmse``, ``mae``, ``r2``.

A metric this data leaves undefined (AUC with one class, precision with nothing predicted
positive, R² of a constant label) is ``None`` with the reason, never a made-up number.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from kfstack.errors import InvalidParameterError
from kfstack.training import metrics as binary_metrics

BINARY, MULTICLASS, REGRESSION = "binary", "multiclass", "regression"
TASKS = (BINARY, MULTICLASS, REGRESSION)
# The metric each task's quality is judged by (the canary rule's and a gate's default).
QUALITY_METRIC = {BINARY: "auc", MULTICLASS: "accuracy", REGRESSION: "rmse"}
# Whether a larger value of a metric is better.
HIGHER_IS_BETTER = {
    "auc": True,
    "accuracy": True,
    "macro_f1": True,
    "precision": True,
    "recall": True,
    "r2": True,
    "log_loss": False,
    "rmse": False,
    "mae": False,
}


@dataclasses.dataclass
class TaskEvaluation:
    """What an evaluation found.

    Attributes:
        task: ``binary``, ``multiclass`` or ``regression``.
        metrics: Name -> value; ``None`` where undefined (see ``undefined``).
        undefined: Name -> why it is undefined on this data.
        categories: Classification: the class labels, in the confusion matrix's order.
        confusion: Classification: rows the true class, columns the predicted one.
        roc: Binary with probabilities: (fpr, tpr, thresholds).
        rows: Rows evaluated.
    """

    task: str
    metrics: dict[str, float | None]
    undefined: dict[str, str]
    categories: list[str]
    confusion: list[list[int]]
    roc: tuple[list[float], list[float], list[float]] | None
    rows: int

    def named(self, class_names: Sequence[str]) -> TaskEvaluation:
        """The evaluation with its classes called by name: ``class_names[i]`` names label ``i``.

        Raises:
            InvalidParameterError: Not a classification, or a class that is not a label index
                of ``class_names``.
        """
        if not class_names:
            return self
        if not self.confusion:
            raise InvalidParameterError(f"class_names: a {self.task} task has no classes")
        names = []
        for category in self.categories:
            index = int(category) if category.isdigit() else -1
            if not 0 <= index < len(class_names):
                raise InvalidParameterError(
                    f"class_names names labels 0-{len(class_names) - 1}; the data has the class {category!r}"
                )
            names.append(str(class_names[index]))
        return dataclasses.replace(self, categories=names)

    def markdown(self, title: str) -> str:
        """A short report: the figures, and the confusion matrix for a classification."""
        lines = [f"# {title}", "", f"Task: **{self.task}**, {self.rows} labelled rows.", ""]
        lines += ["| metric | value |", "|---|---|"]
        for name, value in self.metrics.items():
            shown = f"{value:.4f}" if value is not None else f"undefined ({self.undefined.get(name, '')})"
            lines.append(f"| {name} | {shown} |")
        if self.confusion:
            lines += ["", "Confusion matrix (rows: true class, columns: predicted):", ""]
            lines.append("| | " + " | ".join(self.categories) + " |")
            lines.append("|---" * (len(self.categories) + 1) + "|")
            for category, row in zip(self.categories, self.confusion, strict=True):
                lines.append(f"| **{category}** | " + " | ".join(str(n) for n in row) + " |")
        return "\n".join(lines) + "\n"


def check_task(task: str) -> str:
    """Raises unless ``task`` is one of :data:`TASKS`."""
    if task not in TASKS:
        raise InvalidParameterError(f"task={task!r} is not one of {', '.join(TASKS)}")
    return task


def _numbers(predictions: Any) -> np.ndarray:
    try:
        array = np.asarray(predictions, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise InvalidParameterError(f"the model's predictions are not numbers: {err}") from None
    if not np.isfinite(array).all():
        raise InvalidParameterError("the model's predictions hold non-finite values")
    return array


def _binary(labels: np.ndarray, predictions: Any, threshold: float) -> TaskEvaluation:
    y = np.asarray(labels)
    if not set(np.unique(y).tolist()) <= {0, 1}:
        raise InvalidParameterError("a binary task needs labels 0 and 1")
    p = _numbers(predictions)
    if p.ndim == 2 and p.shape[1] == 2:
        p = p[:, 1]  # predict_proba: the positive class's column
    elif p.ndim == 2 and p.shape[1] == 1:
        p = p[:, 0]
    if p.ndim != 1 or len(p) != len(y):
        raise InvalidParameterError(f"binary predictions of shape {list(p.shape)} for {len(y)} rows")
    probabilities = bool(((p > 0) & (p < 1)).any()) and bool(((p >= 0) & (p <= 1)).all())
    matrix = binary_metrics.confusion_matrix(y, p, threshold)
    (tn, fp), (_, tp) = matrix
    precision, recall = binary_metrics.precision_recall(matrix)
    values: dict[str, float | None] = {
        "auc": binary_metrics.roc_auc(y, p) if binary_metrics.has_both_classes(y) else None,
        "accuracy": (tn + tp) / len(y),
        "precision": precision,
        "recall": recall,
        "positive_rate": float(np.mean(y)),
        "predicted_positive_rate": (tp + fp) / len(y),
    }
    undefined = {}
    if values["auc"] is None:
        undefined["auc"] = "the labels hold one class"
    if precision is None:
        undefined["precision"] = "no row was predicted positive"
    if recall is None:
        undefined["recall"] = "no row is positive"
    if probabilities:
        values["log_loss"] = binary_metrics.log_loss(y, p)
    roc = binary_metrics.roc_curve(y, p) if probabilities else None
    return TaskEvaluation(BINARY, values, undefined, ["0", "1"], matrix, roc, len(y))


def _multiclass(labels: np.ndarray, predictions: Any) -> TaskEvaluation:
    y = np.asarray(labels)
    raw = np.asarray(predictions)
    probabilities = None
    if raw.ndim == 2:
        probabilities = _numbers(raw)
        if probabilities.shape[0] != len(y):
            raise InvalidParameterError(f"{probabilities.shape[0]} predictions for {len(y)} rows")
        predicted = probabilities.argmax(axis=1)  # a column per class, in class-index order
    else:
        predicted = raw
    if len(predicted) != len(y):
        raise InvalidParameterError(f"{len(predicted)} predictions for {len(y)} rows")
    classes = sorted({*y.tolist(), *predicted.tolist()}, key=lambda c: (str(type(c)), c))
    index = {c: i for i, c in enumerate(classes)}
    matrix = [[0] * len(classes) for _ in classes]
    for truth, guess in zip(y.tolist(), predicted.tolist(), strict=True):
        matrix[index[truth]][index[guess]] += 1
    f1s = []
    for i in range(len(classes)):
        tp = matrix[i][i]
        predicted_i = sum(row[i] for row in matrix)
        actual_i = sum(matrix[i])
        f1s.append(2 * tp / (predicted_i + actual_i) if predicted_i + actual_i else 0.0)
    values: dict[str, float | None] = {
        "accuracy": float(np.mean(predicted == y)),
        "macro_f1": float(np.mean(f1s)),
    }
    # Log loss where the columns are class probabilities of integer labels 0..k-1.
    if (
        probabilities is not None
        and np.issubdtype(y.dtype, np.integer)
        and y.min() >= 0
        and y.max() < probabilities.shape[1]
        and np.allclose(probabilities.sum(axis=1), 1.0, atol=1e-3)
    ):
        picked = np.clip(probabilities[np.arange(len(y)), y], binary_metrics.EPSILON, 1.0)
        values["log_loss"] = float(-np.mean(np.log(picked)))
    return TaskEvaluation(MULTICLASS, values, {}, [str(c) for c in classes], matrix, None, len(y))


def _regression(labels: np.ndarray, predictions: Any) -> TaskEvaluation:
    y = _numbers(labels)
    p = _numbers(predictions).reshape(-1)
    if len(p) != len(y):
        raise InvalidParameterError(f"{len(p)} predictions for {len(y)} rows")
    errors = p - y
    spread = float(np.sum((y - y.mean()) ** 2))
    values: dict[str, float | None] = {
        "rmse": math.sqrt(float(np.mean(errors**2))),
        "mae": float(np.mean(np.abs(errors))),
        "r2": 1.0 - float(np.sum(errors**2)) / spread if spread else None,
    }
    undefined = {"r2": "the labels are constant"} if values["r2"] is None else {}
    return TaskEvaluation(REGRESSION, values, undefined, [], [], None, len(y))


def evaluate(
    task: str, labels: Sequence[Any] | np.ndarray, predictions: Any, threshold: float = 0.5
) -> TaskEvaluation:
    """The task's metrics of ``predictions`` against ``labels``.

    Raises:
        InvalidParameterError: An unknown task, no rows, labels the task cannot have, or
            predictions that do not fit the rows.
    """
    check_task(task)
    labels = np.asarray(labels)
    if len(labels) == 0:
        raise InvalidParameterError("no labelled rows to evaluate")
    if task == BINARY:
        if not 0.0 <= threshold <= 1.0:
            raise InvalidParameterError(f"threshold={threshold} must be in [0, 1]")
        return _binary(labels, predictions, threshold)
    if task == MULTICLASS:
        return _multiclass(labels, predictions)
    return _regression(labels, predictions)
