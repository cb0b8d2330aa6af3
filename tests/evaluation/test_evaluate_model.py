"""Evaluation of an exported model on the test split, through onnxruntime."""

import numpy as np
import pytest

from kfstack.components.evaluation.evaluate_model.core import evaluate_model, score
from kfstack.components.training.train_model.stage import train_locally
from kfstack.errors import InvalidParameterError
from kfstack.training import metrics as metric_fns
from kfstack.training.settings import TrainingSettings


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from tests.training.conftest import make_feature_dir

    root = tmp_path_factory.mktemp("eval")
    features = make_feature_dir(root / "features", rows=3000, shards=1, seed=3)
    train_locally(
        TrainingSettings(epochs=2, workers=1, batch_size=128, learning_rate=0.01, max_restarts=0),
        features_uri=features,
        model_uri=str(root / "model"),
        logs_uri=str(root / "logs"),
        threads_per_worker=1,
    )
    return str(root / "model"), features


def test_metrics_agree_with_the_scored_test_split(trained):
    model, features = trained
    result = evaluate_model(model, features, threshold=0.5)
    labels, probabilities = score(model, features)
    assert result.metrics["test_rows"] == len(labels) == 750
    assert result.metrics["auc"] == pytest.approx(metric_fns.roc_auc(labels, probabilities))
    assert result.metrics["auc"] > 0.75
    assert sum(map(sum, result.confusion_matrix)) == 750
    (tn, _fp), (_fn, tp) = result.confusion_matrix
    assert result.metrics["accuracy"] == pytest.approx((tn + tp) / 750)
    assert result.metrics["positive_rate"] == pytest.approx(np.mean(labels))
    assert result.confusion_labels == ("on_time", "delayed")
    assert len(result.roc_fpr) == len(result.roc_tpr) == len(result.roc_thresholds)
    assert "AUC" in result.markdown and f"{result.metrics['auc']:.4f}" in result.markdown


def test_threshold_moves_the_confusion_matrix(trained):
    model, features = trained
    everything_delayed = evaluate_model(model, features, threshold=0.0)
    assert everything_delayed.confusion_matrix[0][0] == 0 and everything_delayed.confusion_matrix[1][0] == 0
    assert everything_delayed.metrics["recall"] == 1.0


@pytest.mark.parametrize("threshold", [-0.1, 1.5])
def test_threshold_outside_0_1_is_refused(trained, threshold):
    model, features = trained
    with pytest.raises(InvalidParameterError, match="threshold"):
        evaluate_model(model, features, threshold=threshold)
