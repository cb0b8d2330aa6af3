"""The generic production-model step on the embedded platform: nothing in production, a model
copied with its record, comparable only when it holds the files the run names, and a model the
task cannot read refused; the component under kfp.local.

(The Kubernetes side -- read from an InferenceService -- is tested with the rollouts, in
tests/serving/test_kserve_rollout.py; the flights pipelines' use, on a real model directory, in
test_production_model_flights.py.)
"""

from __future__ import annotations

import os

import pytest

from kfstack.components.serving.production_model.core import fetch_production_model
from kfstack.errors import InvalidParameterError
from kfstack.serving.production import ProductionModel, copy_model, read_found
from kfstack.serving.registry import REGISTRY_DIR_ENV, LocalRegistry
from tests.kfp_local import run_pipeline, task_outputs


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


def test_a_model_that_cannot_be_read_from_the_task_is_refused(tmp_path):
    with pytest.raises(InvalidParameterError, match=r"pvc:// is read by KServe.s storage initializer only"):
        copy_model(ProductionModel("run-1", "pvc://models/flights"), str(tmp_path / "x"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidParameterError, match="holds no files"):
        copy_model(ProductionModel("run-1", str(tmp_path / "empty")), str(tmp_path / "y"))


# kfp.local warns that the component's image is not plain Python; this process has its packages.
@pytest.mark.filterwarnings("ignore:You may be attemping to run a task:RuntimeWarning")
def test_the_component_runs_under_kfp_local(registry, tmp_path):
    from kfp import dsl

    from kfstack.components.serving.production_model.component import production_model

    model = tmp_path / "model"
    model.mkdir()
    (model / "model.joblib").write_bytes(b"a pickle")
    (model / "profile.json").write_text("{}")
    registry.promote(str(model), "run-1", "run-1")

    @dsl.pipeline(name="team-production")
    def team_production():
        production_model(platform="local", serving_name="team-model", comparable_files=["model.joblib"])

    run = run_pipeline(team_production, tmp_path / "root")
    step = run / "production-model"
    outputs = task_outputs(run, "production-model")
    artifact = step / "model"
    # Where the model's training profile is: the copy in this step's artifact.
    assert outputs["parameterValues"] == {
        "found": True,
        "version": "run-1",
        "profile_uri": str(artifact / "profile.json"),
    }
    assert sorted(os.listdir(artifact)) == ["champion.json", "model.joblib", "profile.json"]
    assert read_found(str(artifact)).comparable
    metadata = outputs["artifacts"]["model"]["artifacts"][0]["metadata"]
    assert (metadata["found"], metadata["version"], metadata["comparable"]) == (True, "run-1", True)
