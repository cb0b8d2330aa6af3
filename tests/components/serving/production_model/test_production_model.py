"""The generic production-model step on the embedded platform: nothing in production, a model
copied with its record, and comparable only when it holds the files the run names.

(The Kubernetes side -- read from an InferenceService -- is tested with the rollouts, in
tests/serving/test_kserve_rollout.py; the flights pipelines' use in tests/serving/test_champion.py.)
"""

from __future__ import annotations

import os

import pytest

from kfstack.components.serving.production_model.core import fetch_production_model
from kfstack.errors import InvalidParameterError
from kfstack.serving.production import read_found
from kfstack.serving.registry import REGISTRY_DIR_ENV, LocalRegistry


@pytest.fixture
def registry(tmp_path, monkeypatch) -> LocalRegistry:
    monkeypatch.setenv(REGISTRY_DIR_ENV, str(tmp_path / "registry"))
    return LocalRegistry(str(tmp_path / "registry"), "team-model")


def test_nothing_in_production_is_recorded_as_such(registry, tmp_path):
    found = fetch_production_model("local", "team-model", str(tmp_path / "champion"), ["model.joblib"])
    assert not found.found and os.listdir(tmp_path / "champion") == ["champion.json"]
    assert read_found(str(tmp_path / "champion")) == found


def test_a_model_is_comparable_when_it_holds_the_named_files(registry, tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.joblib").write_bytes(b"a pickle")
    registry.promote(str(model), "run-1", "run-1")
    anything = fetch_production_model("local", "team-model", str(tmp_path / "a"))
    assert (anything.found, anything.version, anything.comparable) == (True, "run-1", True)
    assert (tmp_path / "a" / "model.joblib").read_bytes() == b"a pickle"
    assert not fetch_production_model("local", "team-model", str(tmp_path / "b"), ["profile.json"]).comparable
    assert fetch_production_model("local", "team-model", str(tmp_path / "c"), ["model.joblib"]).comparable


def test_outside_an_embedded_run_there_is_no_registry(tmp_path, monkeypatch):
    monkeypatch.delenv(REGISTRY_DIR_ENV, raising=False)
    with pytest.raises(InvalidParameterError, match=REGISTRY_DIR_ENV):
        fetch_production_model("local", "team-model", str(tmp_path / "x"))
