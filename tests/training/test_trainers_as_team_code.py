"""The flights trainers are a team's training code: the generic distributed training step runs
the PyTorch trainer under the contract (its data, model directory and checkpoints from the
contract's environment, its hyperparameters as ``--name=value``, its metric lines watched, its
numbers as the step's report), two real DDP replicas over gloo, and rank 0's model directory
is the model artifact."""

from __future__ import annotations

import os

import pytest

from kfstack.components.training.distributed_training.stage import STAGE
from kfstack.errors import InvalidParameterError
from kfstack_examples.flights.feature_spec import FEATURE_SPEC_FILE
from kfstack_examples.flights.training.settings import (
    METRICS_FILE,
    MODEL_FILE,
    VALIDATION_METRICS,
    parse_trainer_args,
)

# The PyTorch trainer as a team would declare it to the generic step.
FLIGHTS_TRAINER = {
    "training_code": "kfstack_examples.flights.training.pytorch_trainer",
    "hyperparameter_types": {"epochs": "int", "batch_size": "int", "learning_rate": "float", "seed": "int"},
    "hyperparameters": {"epochs": 2, "batch_size": 128, "learning_rate": 0.01, "seed": 3},
    "metric_names": list(VALIDATION_METRICS),
    "model_format": "custom",
}


@pytest.mark.slow
def test_the_pytorch_trainer_runs_through_the_generic_step(tmp_path):
    from tests.training.conftest import make_feature_dir

    features = make_feature_dir(tmp_path / "features", rows=1200, shards=2, seed=3)
    arguments = {
        "platform": "local",
        "data": features,
        "model": str(tmp_path / "model"),
        "training_logs": str(tmp_path / "logs"),
        **FLIGHTS_TRAINER,
        "workers": 2,
        "max_restarts": 0,
        "training_api": "v1",
    }
    settings = STAGE.settings(arguments)
    STAGE.preflight(settings)
    result = STAGE.run_local(STAGE.variants(settings)[0].settings)
    metrics = result.metrics["training_metrics"]
    assert metrics["val_auc"] > 0.6 and metrics["world_size"] == 2
    # The trainer's own figures, as the step's report.
    assert metrics["report.epochs"] == 2 and metrics["report.seconds_per_epoch"] > 0
    assert metrics["report.world_size"] == 2
    # Rank 0's model directory is the model artifact: the exported graph and the feature spec
    # (the lookups too, from a feature job's output; these synthetic features have none).
    assert {MODEL_FILE, FEATURE_SPEC_FILE, METRICS_FILE} <= set(os.listdir(tmp_path / "model"))
    assert os.listdir(tmp_path / "logs" / "checkpoints")  # one per epoch, where the contract said


def test_its_locations_come_from_the_contracts_environment(monkeypatch):
    monkeypatch.setenv("KFSTACK_INPUT_URI", "/data/features")
    monkeypatch.setenv("KFSTACK_MODEL_DIR", "/tmp/model")
    monkeypatch.setenv("KFSTACK_CHECKPOINT_URI", "s3://bucket/ckpt")
    args = parse_trainer_args(["--batch_size=64", "--learning_rate=0.5"], prog="trainer")
    assert (args.features_uri, args.model_uri, args.checkpoint_uri) == (
        "/data/features",
        "/tmp/model",
        "s3://bucket/ckpt",
    )
    assert (args.batch_size, args.learning_rate) == (64, 0.5)
    monkeypatch.delenv("KFSTACK_MODEL_DIR")
    with pytest.raises(InvalidParameterError, match=r"--model-uri \(or \$KFSTACK_MODEL_DIR\)"):
        parse_trainer_args([], prog="trainer")
