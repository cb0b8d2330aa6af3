"""The generic production-model step as the flights pipelines run it, on a real model directory
(one small real flights run): the production model copied with the profile of its training
data, comparable by what the flights predictor loads and that profile."""

from __future__ import annotations

import os

from kfstack_examples.flights.feature_spec import PROFILE_FILE
from tests.components.flights_retraining import NAME, fetch_production_model


def test_the_production_model_is_copied_with_its_training_profile(flights_registry, tmp_path, trained):
    flights_registry.promote(trained["model"], "run-1", "run-1")
    target = str(tmp_path / "champion")
    found = fetch_production_model("local", NAME, target)
    assert (found.found, found.version, found.comparable) == (True, "run-1", True)
    assert sorted(os.listdir(target)) == sorted([*os.listdir(trained["model"]), "champion.json"])
    assert found.profile_uri(target) == os.path.join(target, PROFILE_FILE)
    assert found.metadata()["source"].endswith(os.path.join("models", "run-1"))
