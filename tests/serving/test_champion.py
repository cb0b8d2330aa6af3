"""A retraining run's comparison with production, on real model directories: the production
model found in the local registry and copied, the drift check's decision, and the
champion/challenger gate scoring both models through their own transforms.

(The Kubernetes side -- the production model read from an InferenceService -- is tested with
the rollouts, in test_kserve_rollout.py.)
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from kfstack.components.evaluation.gate_model import core as gate_core
from kfstack.components.monitoring.data_drift.core import DriftData, decide_retraining
from kfstack.components.serving.production_model import core as production_core
from kfstack.errors import InvalidParameterError
from kfstack.monitoring.drift import DriftThresholds
from kfstack.monitoring.gate import KEEP, PASS, GateRule
from kfstack.serving.production import ProductionModel, copy_model, read_found
from kfstack.serving.registry import REGISTRY_DIR_ENV, LocalRegistry
from kfstack_examples.flights import predictor
from kfstack_examples.flights.feature_spec import DRIFT_PROFILE_FILE, HOLDOUT_FILE, LABEL_COLUMN, PROFILE_FILE
from kfstack_examples.flights.pipelines.steps import train_locally
from kfstack_examples.flights.scoring import MODEL_DIR_FILES
from kfstack_examples.flights.training.settings import TrainingSettings

NAME = "flights-delay"
# What the flights pipelines compare a production model by: what its predictor loads, and the
# profile of its training data.
COMPARABLE = (*MODEL_DIR_FILES, PROFILE_FILE)


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


def check_drift(features: str, champion: str, thresholds: DriftThresholds, force: bool):
    """The generic drift step as the flights retraining pipeline runs it: against the
    production-model artifact, on the feature job's profile of the window on its edges."""
    return decide_retraining(
        DriftData(champion, features, current_profile_file=DRIFT_PROFILE_FILE), thresholds, force
    )


def fetch_production_model(platform: str, name: str, target: str):
    return production_core.fetch_production_model(platform, name, target, COMPARABLE)


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


def window(features: str, target, label_rate_shift: float = 0.0) -> str:
    """The same features as a new window profiled against a champion trained on them: its drift
    profile is its own profile (the champion's edges are its own), the label rate moved by
    ``label_rate_shift``."""
    shutil.copytree(features, target)
    with open(os.path.join(target, PROFILE_FILE)) as f:
        profile = json.load(f)
    profile["splits"]["train"]["label_rate"] += label_rate_shift
    with open(os.path.join(target, DRIFT_PROFILE_FILE), "w") as f:
        json.dump(profile, f)
    return str(target)


@pytest.fixture
def registry(tmp_path, monkeypatch) -> LocalRegistry:
    monkeypatch.setenv(REGISTRY_DIR_ENV, str(tmp_path / "registry"))
    return LocalRegistry(str(tmp_path / "registry"), NAME)


def test_nothing_in_production_is_recorded_and_retrains(registry, tmp_path, trained):
    found = fetch_production_model("local", NAME, str(tmp_path / "champion"))
    assert not found.found and found.profile_uri("anywhere") == ""
    assert os.listdir(tmp_path / "champion") == ["champion.json"]
    assert read_found(str(tmp_path / "champion")) == found
    decision = check_drift(trained["features"], str(tmp_path / "champion"), DriftThresholds(), force=False)
    assert decision.retrain and decision.report is None
    assert decision.summary()["decision"] == "retrain" and "nothing in production" in decision.reason


def test_the_production_model_is_copied_with_its_training_profile(registry, tmp_path, trained):
    registry.promote(trained["model"], "run-1", "run-1")
    target = str(tmp_path / "champion")
    found = fetch_production_model("local", NAME, target)
    assert (found.found, found.version, found.comparable) == (True, "run-1", True)
    assert sorted(os.listdir(target)) == sorted([*os.listdir(trained["model"]), "champion.json"])
    assert found.profile_uri(target) == os.path.join(target, PROFILE_FILE)
    assert found.metadata()["source"].endswith(os.path.join("models", "run-1"))


def test_a_model_that_cannot_be_read_from_the_task_is_refused(tmp_path):
    with pytest.raises(InvalidParameterError, match=r"pvc:// is read by KServe.s storage initializer only"):
        copy_model(ProductionModel("run-1", "pvc://models/flights"), str(tmp_path / "x"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidParameterError, match="holds no files"):
        copy_model(ProductionModel("run-1", str(tmp_path / "empty")), str(tmp_path / "y"))


def test_the_same_data_does_not_drift_unless_forced(registry, tmp_path, trained):
    registry.promote(trained["model"], "run-1", "run-1")
    champion = str(tmp_path / "champion")
    fetch_production_model("local", NAME, champion)
    new = window(trained["features"], tmp_path / "window")
    kept = check_drift(new, champion, DriftThresholds(), force=False)
    assert not kept.retrain and kept.report is not None and not kept.report.drifted
    assert kept.metrics()["retrain"] == 0.0 and kept.metrics()["max_psi"] == 0.0
    assert "run-1 stays in production" in kept.markdown()
    assert kept.summary()["champion_version"] == "run-1"
    forced = check_drift(new, champion, DriftThresholds(), force=True)
    assert forced.retrain and forced.summary()["forced"] is True


def test_a_drifted_profile_retrains_naming_what_drifted(registry, tmp_path, trained):
    registry.promote(trained["model"], "run-1", "run-1")
    champion = str(tmp_path / "champion")
    fetch_production_model("local", NAME, champion)
    drifted = window(trained["features"], tmp_path / "drifted", label_rate_shift=0.2)
    decision = check_drift(drifted, champion, DriftThresholds(), force=False)
    assert decision.retrain and "the label rate" in decision.reason
    assert decision.summary()["label_drifted"] is True
    # A window the feature job did not profile against this champion cannot be compared.
    with pytest.raises(InvalidParameterError, match=r"has no drift_profile\.json"):
        check_drift(trained["features"], champion, DriftThresholds(), force=False)


def test_a_production_model_of_another_kind_is_not_compared_and_the_challenger_trains(
    registry, tmp_path, trained
):
    other = tmp_path / "other"
    shutil.copytree(trained["model"], other)
    os.remove(other / PROFILE_FILE)
    registry.promote(str(other), "handmade", "run-0")
    champion = str(tmp_path / "champion")
    found = fetch_production_model("local", NAME, champion)
    assert found.found and not found.comparable and found.profile_uri(champion) == ""
    decision = check_drift(trained["features"], champion, DriftThresholds(), force=False)
    assert decision.retrain and "carries no training profile to compare with" in decision.reason
    gate = gate_models(trained["model"], champion, trained["features"], GateRule(), 0.5)
    assert gate.decision == PASS and gate.champion is None and "cannot be scored here" in gate.reason


def test_the_gate_scores_both_models_on_the_same_holdout(registry, tmp_path, trained, weak_model):
    registry.promote(trained["model"], "run-1", "run-1")
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


def test_with_nothing_in_production_the_challenger_passes(registry, tmp_path, trained):
    champion = str(tmp_path / "champion")
    fetch_production_model("local", NAME, champion)
    report = gate_models(trained["model"], champion, trained["features"], GateRule(margin=0.5), 0.5)
    assert report.decision == PASS and report.champion is None
