"""What the training step writes beside a team's model: the artifact's metadata (the versions it
was trained under) and the lineage record, with the dataset's own lineage when its data step
wrote one."""

from __future__ import annotations

import json

import pytest

from kfstack import contracts
from kfstack.components.training.distributed_training.stage import STAGE, model_metadata, record_lineage
from kfstack.lineage import Lineage
from kfstack.platforms import StageResult, publish
from kfstack.version import VERSION_ENV, __version__, pipeline_version
from tests.components.training.distributed_training.test_distributed_training import PLAIN_TEAM

TEAM = PLAIN_TEAM  # a module of ``team_code/``, declared as a pipeline would


class Artifact:
    def __init__(self, path) -> None:
        self.path, self.uri, self.metadata = str(path), str(path), {}

    def log_metric(self, name, value) -> None:
        self.metadata[name] = value


def settings(tmp_path, data: str, **overrides):
    arguments = {
        "platform": "kubernetes",
        "data": data,
        "model": str(tmp_path / "model"),
        "training_logs": str(tmp_path / "logs"),
        **TEAM,
        "framework": "tensorflow",
        "training_api": "v1",
        "run_id": "run-7",
        **overrides,
    }
    return STAGE.variants(STAGE.settings(arguments))[0].settings


def test_the_model_metadata_carries_the_compiled_pipeline_version(tmp_path, dataset, monkeypatch):
    monkeypatch.setenv(VERSION_ENV, "0.1.0+abc1234")
    metadata = model_metadata(settings(tmp_path, dataset))["model"]
    assert metadata == {
        "model_format": "sklearn",
        "training_code": "plain_team_module",
        "framework": "tensorflow",
        "training_api": "v1",
        "hyperparameters": {"depth": 7},
        "kfstack_version": __version__,
        "pipeline_version": "0.1.0+abc1234",
    }
    monkeypatch.delenv(VERSION_ENV)
    # Outside a compiled pipeline (a task run by hand): this source tree's version.
    assert model_metadata(settings(tmp_path, dataset))["model"]["pipeline_version"] == pipeline_version()


def test_the_lineage_record_joins_the_datasets_own_with_the_runs_parameters(tmp_path, dataset):
    contracts.write_data_lineage(
        dataset,
        data={"window": {"start": "2013-01-01", "end": "2013-02-01"}, "content_hash": "abc", "rows_read": 64},
        parameters={"sample_fraction": 0.5, "depth": 1},
    )
    step = settings(tmp_path, dataset, workers=3, pipeline="team-training")
    (tmp_path / "model").mkdir()
    record_lineage(step, step.model_uri, dataset, {"metrics": {"score": 0.57, "epoch": 4.0}})
    lineage = Lineage.load(step.model_uri)
    assert lineage.data == {
        "input_uri": dataset,
        "window": {"start": "2013-01-01", "end": "2013-02-01"},
        "content_hash": "abc",
        "rows_read": 64,
    }
    # The data step's parameters, then this run's hyperparameters (which win a shared name) and shape.
    assert lineage.parameters["sample_fraction"] == 0.5 and lineage.parameters["depth"] == 7
    assert (lineage.parameters["workers"], lineage.parameters["framework"]) == (3, "tensorflow")
    assert lineage.parameters["training_api"] == "v1"
    assert lineage.metrics == {"score": 0.57}  # the declared metrics only
    assert (lineage.model_version, lineage.run_id) == ("run-7", "run-7")
    # The pipeline the task belongs to: what `kfstack reproduce` runs again.
    assert lineage.pipeline == "team-training"


def test_a_dataset_without_lineage_records_its_uri_and_a_broken_one_is_named(tmp_path, dataset):
    step = settings(tmp_path, dataset)
    (tmp_path / "model").mkdir()
    assert record_lineage(step, step.model_uri, dataset, {"metrics": {"score": 0.5}}).data == {
        "input_uri": dataset
    }
    (tmp_path / "data" / contracts.DATA_LINEAGE_FILE).write_text('{"data": [1]}')
    with pytest.raises(contracts.ContractError, match="'data' and 'parameters' are objects"):
        record_lineage(step, step.model_uri, dataset, {"metrics": {"score": 0.5}})


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
