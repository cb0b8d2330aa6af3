"""The NumPy metrics against hand-computed values."""

import math

import numpy as np

from kfstack.training import metrics


def test_auc_counts_correctly_ordered_pairs_with_ties_as_half():
    labels = np.array([0, 0, 1, 1])
    scores = np.array([0.1, 0.4, 0.35, 0.8])
    # pairs (pos, neg): (0.35,0.1) ok, (0.35,0.4) wrong, (0.8,0.1) ok, (0.8,0.4) ok -> 3/4
    assert metrics.roc_auc(labels, scores) == 0.75
    assert metrics.roc_auc(np.array([0, 1]), np.array([0.5, 0.5])) == 0.5
    assert metrics.roc_auc(np.array([1, 1]), np.array([0.2, 0.9])) == 0.5


def test_log_loss_and_accuracy():
    labels = np.array([1, 0])
    probs = np.array([0.8, 0.4])
    assert math.isclose(metrics.log_loss(labels, probs), -(math.log(0.8) + math.log(0.6)) / 2)
    assert metrics.accuracy(labels, probs) == 1.0
    assert metrics.accuracy(labels, probs, threshold=0.9) == 0.5


def test_confusion_matrix_rows_are_truth_columns_prediction():
    labels = np.array([0, 0, 1, 1, 1])
    probs = np.array([0.2, 0.7, 0.6, 0.1, 0.9])
    assert metrics.confusion_matrix(labels, probs, 0.5) == [[1, 1], [1, 2]]


def test_roc_curve_is_finite_monotone_and_bounded():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 5000)
    probs = np.clip(labels * 0.3 + rng.random(5000) * 0.7, 0, 1)
    fpr, tpr, thresholds = metrics.roc_curve(labels, probs, max_points=50)
    assert len(fpr) == len(tpr) == len(thresholds) <= 50
    assert all(math.isfinite(t) for t in thresholds)
    assert fpr[0] == tpr[0] == 0.0 and fpr[-1] == tpr[-1] == 1.0
    assert fpr == sorted(fpr) and tpr == sorted(tpr)


def test_roc_curve_points_by_hand():
    labels = np.array([0, 0, 1, 1])
    probs = np.array([0.1, 0.4, 0.35, 0.8])
    fpr, tpr, thresholds = metrics.roc_curve(labels, probs, max_points=10)
    # Thresholds are the distinct scores, high to low, after the "nothing positive" point.
    assert thresholds == [1.0, 0.8, 0.4, 0.35, 0.1]
    assert tpr == [0.0, 0.5, 0.5, 1.0, 1.0]
    assert fpr == [0.0, 0.0, 0.5, 0.5, 1.0]
    # Trapezoids under these points give the rank-based AUC (summed here: NumPy's own rule is
    # np.trapezoid from 2.0 and np.trapz before, and kfstack supports both lines).
    x, y = np.asarray(fpr), np.asarray(tpr)
    area = float(np.sum(np.diff(x) * (y[1:] + y[:-1]) / 2))
    assert area == metrics.roc_auc(labels, probs) == 0.75


def test_both_classes_are_needed_for_auc():
    assert metrics.has_both_classes(np.array([0, 1, 0]))
    assert not metrics.has_both_classes(np.array([1, 1]))
    assert not metrics.has_both_classes(np.array([0, 0, 0]))
    assert not metrics.has_both_classes(np.array([], dtype=np.int64))


def test_precision_and_recall_from_the_confusion_matrix():
    labels = np.array([0, 0, 1, 1, 1])
    probs = np.array([0.2, 0.7, 0.6, 0.1, 0.9])
    # [[1, 1], [1, 2]]: 2 of 3 predicted positives are right, 2 of 3 positives are found.
    assert metrics.precision_recall(metrics.confusion_matrix(labels, probs, 0.5)) == (2 / 3, 2 / 3)


def test_precision_is_undefined_when_nothing_is_predicted_positive():
    labels = np.array([0, 1, 1])
    probs = np.array([0.2, 0.7, 0.6])
    precision, recall = metrics.precision_recall(metrics.confusion_matrix(labels, probs, 0.95))
    assert precision is None
    assert recall == 0.0  # positives exist and none was found: a real 0


def test_recall_is_undefined_without_a_positive_label():
    labels = np.array([0, 0, 0])
    probs = np.array([0.2, 0.7, 0.6])
    precision, recall = metrics.precision_recall(metrics.confusion_matrix(labels, probs, 0.5))
    assert recall is None
    assert precision == 0.0  # two rows predicted positive, both wrong


def test_undefined_is_the_string_metrics_artifacts_record():
    assert metrics.UNDEFINED == "undefined"
