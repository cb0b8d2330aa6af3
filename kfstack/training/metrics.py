"""Binary-classification metrics in NumPy, shared by the trainers and the evaluation."""

from __future__ import annotations

import numpy as np

EPSILON = 1e-7


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney U with average ranks for ties); 0.5 if one class."""
    labels = np.asarray(labels).astype(bool)
    scores = np.asarray(scores, dtype=np.float64)
    positives = int(labels.sum())
    negatives = labels.size - positives
    if positives == 0 or negatives == 0:
        return 0.5
    order = np.argsort(scores, kind="mergesort")
    sorted_scores = scores[order]
    ranks = np.empty(scores.size, dtype=np.float64)
    # Average rank within each run of equal scores.
    boundaries = np.flatnonzero(np.diff(sorted_scores)) + 1
    starts = np.concatenate(([0], boundaries))
    ends = np.concatenate((boundaries, [scores.size]))
    for start, end in zip(starts, ends):
        ranks[order[start:end]] = (start + end + 1) / 2.0
    return float((ranks[labels].sum() - positives * (positives + 1) / 2.0) / (positives * negatives))


def log_loss(labels: np.ndarray, probabilities: np.ndarray) -> float:
    """Mean binary cross-entropy, probabilities clipped to [eps, 1 - eps]."""
    p = np.clip(np.asarray(probabilities, dtype=np.float64), EPSILON, 1 - EPSILON)
    y = np.asarray(labels, dtype=np.float64)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def confusion_matrix(labels: np.ndarray, probabilities: np.ndarray, threshold: float) -> list[list[int]]:
    """``[[TN, FP], [FN, TP]]``: rows are the true class (0, 1), columns the predicted one."""
    y = np.asarray(labels).astype(bool)
    predicted = np.asarray(probabilities) >= threshold
    return [
        [int((~y & ~predicted).sum()), int((~y & predicted).sum())],
        [int((y & ~predicted).sum()), int((y & predicted).sum())],
    ]


def accuracy(labels: np.ndarray, probabilities: np.ndarray, threshold: float = 0.5) -> float:
    (tn, _), (_, tp) = confusion_matrix(labels, probabilities, threshold)
    return (tn + tp) / len(labels) if len(labels) else 0.0


def roc_curve(
    labels: np.ndarray, probabilities: np.ndarray, max_points: int = 200
) -> tuple[list[float], list[float], list[float]]:
    """(fpr, tpr, thresholds), at most ``max_points`` points, all finite (KFP's UI needs that).

    Thresholds run from high to low; the first point is (0, 0) at threshold 1.0.
    """
    y = np.asarray(labels).astype(bool)
    p = np.asarray(probabilities, dtype=np.float64)
    thresholds = np.unique(np.quantile(p, np.linspace(1.0, 0.0, max_points - 1)))[::-1]
    thresholds = np.concatenate(([1.0 + EPSILON], thresholds))
    positives, negatives = max(int(y.sum()), 1), max(int((~y).sum()), 1)
    fpr, tpr = [], []
    for t in thresholds:
        predicted = p >= t
        tpr.append(float((predicted & y).sum() / positives))
        fpr.append(float((predicted & ~y).sum() / negatives))
    return fpr, tpr, [float(min(t, 1.0)) for t in thresholds]
