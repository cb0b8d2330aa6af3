"""Binary-classification metrics in NumPy, shared by the trainers and the evaluation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from kfstack import contracts

EPSILON = 1e-7

UNDEFINED = "undefined"
"""The value a KFP ``Metrics`` artifact records for a metric that is undefined on this data
(precision when nothing is predicted positive, recall without a positive label, AUC with one
class). A number there would read as a measurement; readers of Metrics artifacts (the run
summary) turn this string into null."""


def has_both_classes(labels: np.ndarray) -> bool:
    """Whether ``labels`` hold at least one positive and one negative: AUC needs both."""
    labels = np.asarray(labels).astype(bool)
    return bool(labels.any()) and not bool(labels.all())


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney U with average ranks for ties).

    0.5 (chance) when ``labels`` hold one class: the trainers' Katib metric lines need a number
    every epoch. Where "undefined" must be told apart, check :func:`has_both_classes` first.
    """
    labels = np.asarray(labels).astype(bool)
    scores = np.asarray(scores, dtype=np.float64)
    if not has_both_classes(labels):
        return 0.5
    positives = int(labels.sum())
    negatives = labels.size - positives
    # Average rank (1-based) of each distinct score: ties count as half-correct pairs.
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    average_rank = ends - (counts - 1) / 2.0
    ranks = average_rank[inverse]
    return float((ranks[labels].sum() - positives * (positives + 1) / 2.0) / (positives * negatives))


def log_loss(labels: np.ndarray, probabilities: np.ndarray) -> float:
    """Mean binary cross-entropy, probabilities clipped to [eps, 1 - eps]."""
    p = np.clip(np.asarray(probabilities, dtype=np.float64), EPSILON, 1 - EPSILON)
    y = np.asarray(labels, dtype=np.float64)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def confusion_matrix(labels: np.ndarray, probabilities: np.ndarray, threshold: float) -> list[list[int]]:
    """``[[TN, FP], [FN, TP]]``: rows are the true class (0, 1), columns the predicted one.

    A row is predicted positive when its probability is ``>= threshold``.
    """
    y = np.asarray(labels).astype(bool)
    predicted = np.asarray(probabilities) >= threshold
    return [
        [int((~y & ~predicted).sum()), int((~y & predicted).sum())],
        [int((y & ~predicted).sum()), int((y & predicted).sum())],
    ]


def precision_recall(confusion: list[list[int]]) -> tuple[float | None, float | None]:
    """(precision, recall) of a :func:`confusion_matrix`, ``None`` where undefined.

    Precision is undefined when no row is predicted positive, recall when no row is positive:
    reporting 0 there would claim the model got every such row wrong.
    """
    (_, fp), (fn, tp) = confusion
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    return precision, recall


def accuracy(labels: np.ndarray, probabilities: np.ndarray, threshold: float = 0.5) -> float:
    """Share of rows whose prediction (``probability >= threshold``) equals the label."""
    (tn, _), (_, tp) = confusion_matrix(labels, probabilities, threshold)
    return (tn + tp) / len(labels) if len(labels) else 0.0


def roc_curve(
    labels: np.ndarray, probabilities: np.ndarray, max_points: int = 200
) -> tuple[list[float], list[float], list[float]]:
    """(fpr, tpr, thresholds), at most ``max_points`` points, all finite (KFP's UI needs that).

    Thresholds are observed scores (quantiles of them when there are many), from high to low;
    the first point is (0, 0) at threshold 1.0 (nothing predicted positive), the last predicts
    every row positive (1, 1).

    Args:
        labels: 0/1 per row.
        probabilities: Scores in [0, 1].
        max_points: Upper bound on the points returned (the KFP UI renders every one).

    Returns:
        ``(fpr, tpr, thresholds)`` as lists of Python floats of equal length.
    """
    y = np.asarray(labels).astype(bool)
    p = np.asarray(probabilities, dtype=np.float64)
    if p.size == 0:
        return [0.0], [0.0], [1.0]
    # Observed scores only (every point is reachable by some decision threshold): all of them
    # when few, else evenly spaced quantiles of them.
    distinct = np.unique(p)
    if distinct.size > max_points - 1:
        distinct = np.unique(np.quantile(p, np.linspace(0.0, 1.0, max_points - 1), method="lower"))
    thresholds = distinct[::-1]
    thresholds = np.concatenate(([1.0 + EPSILON], thresholds))
    positives, negatives = max(int(y.sum()), 1), max(int((~y).sum()), 1)
    # Rows scored >= t, per class, by binary search over each class's sorted scores.
    positive_scores, negative_scores = np.sort(p[y]), np.sort(p[~y])
    tp = positive_scores.size - np.searchsorted(positive_scores, thresholds, side="left")
    fp = negative_scores.size - np.searchsorted(negative_scores, thresholds, side="left")
    return (
        (fp / negatives).tolist(),
        (tp / positives).tolist(),
        np.minimum(thresholds, 1.0).tolist(),
    )


def katib_line(epoch: int, values: Mapping[str, float]) -> str:
    """One line in the Katib StdOut collector's format: ``name=value`` pairs (Katib v0.19's
    regex), the epoch first, then ``values`` in their order, e.g. ``epoch=3 val_auc=0.7120
    seconds_per_epoch=1.2000`` (Katib's metric names allow letters, digits, ``_`` and ``-``)."""
    return " ".join([f"epoch={epoch}", *(f"{name}={value:.4f}" for name, value in values.items())])


def numeric_report(result: Mapping[str, Any]) -> dict[str, float]:
    """The finite numbers of a trainer's result (not its history, device or undefined figures):
    what a step's report may hold (what ``write_report`` writes)."""
    return {name: float(value) for name, value in result.items() if contracts.is_finite_number(value)}
