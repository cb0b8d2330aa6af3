"""The generic drift step as the flights retraining pipeline runs it, on real model directories
(one small real flights run): against the production-model artifact, on the feature job's
profile of the window on the champion's edges -- nothing in production, the same data, a drifted
label rate, and a production model without a training profile."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from kfstack.components.monitoring.data_drift.core import DriftData, decide_retraining
from kfstack.errors import InvalidParameterError
from kfstack.monitoring.drift import DriftThresholds
from kfstack.serving.production import read_found
from kfstack_examples.flights.feature_spec import DRIFT_PROFILE_FILE, PROFILE_FILE
from tests.components.flights_retraining import NAME, fetch_production_model, promote_another_kind


def check_drift(features: str, champion: str, thresholds: DriftThresholds, force: bool):
    """The generic drift step as the flights retraining pipeline runs it: against the
    production-model artifact, on the feature job's profile of the window on its edges."""
    return decide_retraining(
        DriftData(champion, features, current_profile_file=DRIFT_PROFILE_FILE), thresholds, force
    )


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


def test_nothing_in_production_is_recorded_and_retrains(flights_registry, tmp_path, trained):
    found = fetch_production_model("local", NAME, str(tmp_path / "champion"))
    assert not found.found and found.profile_uri("anywhere") == ""
    assert os.listdir(tmp_path / "champion") == ["champion.json"]
    assert read_found(str(tmp_path / "champion")) == found
    decision = check_drift(trained["features"], str(tmp_path / "champion"), DriftThresholds(), force=False)
    assert decision.retrain and decision.report is None
    assert decision.summary()["decision"] == "retrain" and "nothing in production" in decision.reason


def test_the_same_data_does_not_drift_unless_forced(flights_registry, tmp_path, trained):
    flights_registry.promote(trained["model"], "run-1", "run-1")
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


def test_a_drifted_profile_retrains_naming_what_drifted(flights_registry, tmp_path, trained):
    flights_registry.promote(trained["model"], "run-1", "run-1")
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
    flights_registry, tmp_path, trained
):
    champion, found = promote_another_kind(flights_registry, trained["model"], tmp_path)
    assert found.found and not found.comparable and found.profile_uri(champion) == ""
    decision = check_drift(trained["features"], champion, DriftThresholds(), force=False)
    assert decision.retrain and "carries no training profile to compare with" in decision.reason
