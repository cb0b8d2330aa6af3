"""The generic champion/challenger gate as the flights retraining pipeline runs it, on real model
directories (one small real flights run): both models through the flights predictor (their own
transforms) on the feature job's holdout requests -- the same model, a worse one, nothing in
production, and a production model the run cannot score."""

from __future__ import annotations

import os

import pytest

from kfstack.components.evaluation.gate_model import core as gate_core
from kfstack.monitoring.gate import KEEP, PASS, GateRule
from kfstack_examples.flights import predictor
from kfstack_examples.flights.feature_spec import HOLDOUT_FILE, LABEL_COLUMN
from kfstack_examples.flights.pipelines.steps import train_locally
from kfstack_examples.flights.training.settings import TrainingSettings
from tests.components.flights_retraining import NAME, fetch_production_model, promote_another_kind


def gate_models(challenger: str, champion: str, features: str, rule: GateRule, threshold: float):
    """The generic gate as the flights retraining pipeline runs it: both models through the
    flights predictor, on the feature job's holdout requests."""
    return gate_core.gate_models(
        challenger_dir=challenger,
        champion_dir=champion,
        dataset_uri=os.path.join(features, HOLDOUT_FILE),
        task="binary",
        label_column=LABEL_COLUMN,
        rule=rule,
        model_format="custom",
        custom_predictor=predictor.MODEL_CLASS,
        request_format="records",
        threshold=threshold,
    )


@pytest.fixture(scope="module")
def weak_model(trained, tmp_path_factory) -> str:
    """A challenger worse than the trained model by construction: one epoch at a learning rate
    too small to learn anything."""
    root = tmp_path_factory.mktemp("weak")
    train_locally(
        TrainingSettings(epochs=1, workers=1, batch_size=256, learning_rate=1e-7, max_restarts=0),
        features_uri=trained["features"],
        model_uri=str(root / "model"),
        logs_uri=str(root / "logs"),
    )
    return str(root / "model")


def test_a_production_model_of_another_kind_is_not_scored_and_the_challenger_passes(
    flights_registry, tmp_path, trained
):
    champion, found = promote_another_kind(flights_registry, trained["model"], tmp_path)
    assert found.found and not found.comparable
    gate = gate_models(trained["model"], champion, trained["features"], GateRule(), 0.5)
    assert gate.decision == PASS and gate.champion is None and "cannot be scored here" in gate.reason


@pytest.mark.slow
def test_the_gate_scores_both_models_on_the_same_holdout(flights_registry, tmp_path, trained, weak_model):
    flights_registry.promote(trained["model"], "run-1", "run-1")
    champion = str(tmp_path / "champion")
    fetch_production_model("local", NAME, champion)
    # The same model as production: as good, so it passes at margin 0 and not above.
    same = gate_models(trained["model"], champion, trained["features"], GateRule(margin=0.0), 0.5)
    assert same.challenger == same.champion and same.decision == PASS
    assert (
        gate_models(trained["model"], champion, trained["features"], GateRule(margin=0.01), 0.5).decision
        == KEEP
    )
    # A challenger worse than production is never passed, whatever the metric.
    for metric in ("auc", "log_loss"):
        worse = gate_models(weak_model, champion, trained["features"], GateRule(metric=metric), 0.5)
        assert worse.decision == KEEP, worse.markdown()
    assert worse.summary()["champion_version"] == "run-1"


def test_with_nothing_in_production_the_challenger_passes(flights_registry, tmp_path, trained):
    champion = str(tmp_path / "champion")
    fetch_production_model("local", NAME, champion)
    report = gate_models(trained["model"], champion, trained["features"], GateRule(margin=0.5), 0.5)
    assert report.decision == PASS and report.champion is None
