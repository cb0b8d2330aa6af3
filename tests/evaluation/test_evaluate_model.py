"""Evaluation of an exported model on the test split, through onnxruntime."""

import numpy as np
import pytest

from kfstack.components.evaluation.evaluate_model.core import evaluate_model, score
from kfstack.errors import InvalidParameterError
from kfstack.training import metrics as metric_fns

ALWAYS_DEFINED = ("log_loss", "accuracy", "positive_rate", "predicted_positive_rate", "test_rows")


def test_metrics_agree_with_the_scored_test_split(trained):
    model, features = trained
    result = evaluate_model(model, features, threshold=0.5)
    labels, probabilities = score(model, features)
    assert result.metrics["test_rows"] == len(labels) == 750
    assert result.metrics["auc"] == pytest.approx(metric_fns.roc_auc(labels, probabilities))
    assert result.metrics["auc"] > 0.75
    assert sum(map(sum, result.confusion_matrix)) == 750
    (tn, fp), (fn, tp) = result.confusion_matrix
    assert result.metrics["accuracy"] == pytest.approx((tn + tp) / 750)
    assert result.metrics["precision"] == pytest.approx(tp / (tp + fp))
    assert result.metrics["recall"] == pytest.approx(tp / (tp + fn))
    assert result.metrics["positive_rate"] == pytest.approx(np.mean(labels))
    assert result.undefined_reasons == {}
    assert result.confusion_labels == ("on_time", "delayed")
    assert result.threshold == 0.5
    assert len(result.roc_fpr) == len(result.roc_tpr) == len(result.roc_thresholds)
    assert "AUC" in result.markdown and f"{result.metrics['auc']:.4f}" in result.markdown
    assert "undefined" not in result.markdown
    # A count stays a whole number in the report.
    assert "| test rows | 750 |" in result.markdown


def test_threshold_moves_the_confusion_matrix(trained):
    model, features = trained
    everything_delayed = evaluate_model(model, features, threshold=0.0)
    assert everything_delayed.confusion_matrix[0][0] == 0 and everything_delayed.confusion_matrix[1][0] == 0
    assert everything_delayed.metrics["recall"] == 1.0


def test_precision_is_undefined_when_no_flight_is_predicted_delayed(trained):
    # What a barely trained model does: every probability below the threshold.
    model, features = trained
    _labels, probabilities = score(model, features)
    above_every_probability = float(np.nextafter(probabilities.max(), np.float32(1.0)))
    result = evaluate_model(model, features, threshold=above_every_probability)
    assert result.metrics["predicted_positive_rate"] == 0.0
    assert result.metrics["precision"] is None
    # Delayed flights exist and none was found: that recall is a real 0.
    assert result.metrics["recall"] == 0.0
    assert result.metrics["auc"] is not None
    assert result.undefined_reasons == {"precision": "no flight predicted delayed"}
    assert "| precision | undefined (no flight predicted delayed) |" in result.markdown
    assert all(isinstance(result.metrics[name], float) for name in ALWAYS_DEFINED)


def test_recall_and_auc_are_undefined_without_a_delayed_flight(trained, on_time_only):
    model, _features = trained
    result = evaluate_model(model, on_time_only, threshold=0.5)
    assert result.metrics["positive_rate"] == 0.0
    assert result.metrics["recall"] is None
    assert result.metrics["auc"] is None
    # The model still predicts some flights delayed, all of them wrongly: a defined 0.
    assert result.confusion_matrix[0][1] > 0
    assert result.metrics["precision"] == 0.0
    assert result.undefined_reasons == {
        "auc": "no delayed flight in the test split",
        "recall": "no delayed flight in the test split",
    }
    assert "| AUC | undefined (no delayed flight in the test split) |" in result.markdown
    assert "| recall | undefined (no delayed flight in the test split) |" in result.markdown
    assert all(isinstance(result.metrics[name], float) for name in ALWAYS_DEFINED)


def test_auc_is_undefined_without_an_on_time_flight(trained, delayed_only):
    model, _features = trained
    result = evaluate_model(model, delayed_only, threshold=0.5)
    assert result.metrics["auc"] is None
    assert result.metrics["recall"] is not None and result.metrics["precision"] == 1.0
    assert result.undefined_reasons == {"auc": "no on-time flight in the test split"}


@pytest.mark.parametrize("threshold", [-0.1, 1.5])
def test_threshold_outside_0_1_is_refused(trained, threshold):
    model, features = trained
    with pytest.raises(InvalidParameterError, match="threshold"):
        evaluate_model(model, features, threshold=threshold)
