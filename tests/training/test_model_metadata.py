"""The model artifact records the project and pipeline versions it was trained under."""

from __future__ import annotations

import json

from kfstack.components.training.train_model.stage import STAGE, TrainModelSettings, model_metadata
from kfstack.kubernetes.placement import TrainingPlacement
from kfstack.platforms import StageResult, publish
from kfstack.training.settings import TrainingSettings
from kfstack.version import VERSION_ENV, __version__, pipeline_version


class Artifact:
    def __init__(self, path) -> None:
        self.path, self.uri, self.metadata = str(path), str(path), {}

    def log_metric(self, name, value) -> None:
        self.metadata[name] = value


def settings(tmp_path) -> TrainModelSettings:
    return TrainModelSettings(
        training=TrainingSettings(framework="tensorflow"),
        features_uri=str(tmp_path / "features"),
        model_uri=str(tmp_path / "model"),
        logs_uri=str(tmp_path / "logs"),
        placement=TrainingPlacement(training_api="v1"),  # a chosen variant, as run_local and collect get
    )


def test_the_model_metadata_carries_the_compiled_pipeline_version(tmp_path, monkeypatch):
    monkeypatch.setenv(VERSION_ENV, "0.1.0+abc1234")
    metadata = model_metadata(settings(tmp_path))["model"]
    assert metadata == {
        "kfstack_version": __version__,
        "pipeline_version": "0.1.0+abc1234",
        "framework": "tensorflow",
        "training_api": "v1",
    }
    monkeypatch.delenv(VERSION_ENV)
    # Outside a compiled pipeline (a task run by hand): this source tree's version.
    assert model_metadata(settings(tmp_path))["model"]["pipeline_version"] == pipeline_version()


def test_publish_sets_the_artifacts_metadata_beside_metrics_and_reference(tmp_path):
    arguments = {name: Artifact(tmp_path / name) for name in ("model", "training_metrics", "training_job")}
    result = StageResult(
        metrics={"training_metrics": {"val_auc": 0.7}},
        reference={"kind": "LocalProcessGroup"},
        artifact_metadata={"model": {"pipeline_version": "0.1.0+abc1234"}},
    )
    publish(result, STAGE, arguments)
    assert arguments["model"].metadata == {"pipeline_version": "0.1.0+abc1234"}
    assert arguments["training_metrics"].metadata == {"val_auc": 0.7}
    assert json.loads((tmp_path / "training_job").read_text()) == {"kind": "LocalProcessGroup"}
