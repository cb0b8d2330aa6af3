"""The trainer as PyTorchJob pods run it: real processes, gloo DDP, real ONNX export."""

# The skip that names torch where it is missing comes before the imports that need it.
# ruff: noqa: E402
from tests.frameworks import require

require("torch")

import io
import json
import os
import subprocess
import sys

import numpy as np
import onnxruntime
import pytest
import torch

from kfstack.components.training.distributed_training.stage import STAGE
from kfstack.errors import InvalidParameterError
from kfstack.kubernetes import node_pools
from kfstack.kubernetes.training_apis import TRAINER_V2
from kfstack.lineage import Lineage
from kfstack.training import checkpoints
from kfstack.training.env_contract import trainjob_env
from kfstack.training.shards import list_shards, read_shards
from kfstack.version import __version__, pipeline_version
from kfstack_examples.flights.feature_spec import FeatureSpec
from kfstack_examples.flights.pipelines.steps import TRAINING_CODE, train_locally
from kfstack_examples.flights.training.pytorch_model import (
    DelayClassifier,
    DelayProbability,
    ModelConfig,
)
from kfstack_examples.flights.training.settings import TrainingSettings
from tests.training.conftest import katib_metrics

# An epoch of two_rank_run: each rank runs 2000 // 64 steps of 64 rows (global batch 128).
EPOCH_SAMPLES = (2000 // 64) * 128


@pytest.fixture(scope="module")
def two_rank_run(tmp_path_factory, feature_dir):
    root = tmp_path_factory.mktemp("ddp")
    metrics, _ = train_locally(
        TrainingSettings(epochs=3, workers=2, batch_size=128, learning_rate=0.01, max_restarts=0),
        features_uri=feature_dir,
        model_uri=str(root / "model"),
        logs_uri=str(root / "logs"),
        threads_per_worker=1,
    )
    return root, metrics


def test_two_ranks_train_with_ddp_and_learn(two_rank_run):
    root, metrics = two_rank_run
    assert metrics["world_size"] == 2 and metrics["restarts"] == 0
    assert metrics["val_auc"] > 0.75  # the synthetic label is learnable
    assert metrics["report.samples_per_second"] > 0
    assert metrics["report.samples_per_second_per_replica"] == pytest.approx(
        metrics["report.samples_per_second"] / 2
    )
    assert metrics["report.seconds_per_epoch"] == pytest.approx(
        EPOCH_SAMPLES / metrics["report.samples_per_second"]
    )
    master_log = (root / "logs" / "attempt-1" / "rank-0.log").read_text()
    worker_log = (root / "logs" / "attempt-1" / "rank-1.log").read_text()
    assert "rank 0 of 2" in master_log and "rank 1 of 2" in worker_log
    # Each rank read one of the two 2000-row train shards.
    assert "2000 train rows" in master_log and "2000 train rows" in worker_log


def test_a_local_run_costs_one_cpu_node_whatever_its_replicas(two_rank_run):
    _, metrics = two_rank_run
    price = node_pools.get_profile(node_pools.CPU_POOL).price_per_node_hour
    assert price  # the shipped profile file prices the cpu pool (a nominal figure)
    # Both replicas share this machine: one node's price, not one per replica.
    assert metrics["price_per_hour"] == price
    assert metrics["cost_per_epoch"] == pytest.approx(metrics["report.seconds_per_epoch"] * price / 3600)


def test_rank0_prints_one_katib_line_per_epoch(two_rank_run):
    root, metrics = two_rank_run
    master = katib_metrics((root / "logs" / "attempt-1" / "rank-0.log").read_text())
    assert [m["epoch"] for m in master] == [1, 2, 3]
    assert set(master[-1]) == {
        "epoch",
        "val_auc",
        "val_log_loss",
        "val_accuracy",
        "seconds_per_epoch",
        "samples_per_second",
        "samples_per_second_per_replica",
    }
    assert abs(master[-1]["val_auc"] - metrics["val_auc"]) < 1e-4
    # Each line has its epoch's figures (printed to 4 decimals); together they make the run's.
    for line in master:
        samples_per_second = line["samples_per_second"]
        assert line["seconds_per_epoch"] == pytest.approx(EPOCH_SAMPLES / samples_per_second, abs=1e-4)
        assert line["samples_per_second_per_replica"] == pytest.approx(samples_per_second / 2, abs=1e-4)
    mean_seconds = sum(line["seconds_per_epoch"] for line in master) / 3
    assert mean_seconds == pytest.approx(metrics["report.seconds_per_epoch"], abs=1e-4)
    assert katib_metrics((root / "logs" / "attempt-1" / "rank-1.log").read_text()) == []


def test_export_matches_the_checkpointed_torch_model(two_rank_run, feature_dir):
    root, _ = two_rank_run
    spec = FeatureSpec.load(str(root / "model"))
    assert spec == FeatureSpec.load(feature_dir)
    epoch, payload = checkpoints.latest_checkpoint(str(root / "logs" / "checkpoints"))
    assert epoch == 3
    state = torch.load(io.BytesIO(payload), weights_only=False)
    classifier = DelayClassifier(ModelConfig(tuple(spec.cardinalities), len(spec.numeric)))
    classifier.load_state_dict(state["model"])
    data = read_shards(list_shards(f"{feature_dir}/test"), [*spec.categorical_columns, *spec.numeric_columns])
    categorical = np.stack([data[c] for c in spec.categorical_columns], 1).astype(np.int64)
    numeric = np.stack([data[c] for c in spec.numeric_columns], 1).astype(np.float32)
    session = onnxruntime.InferenceSession(str(root / "model" / "model.onnx"))
    onnx_out = session.run(None, {"categorical": categorical, "numeric": numeric})[0]
    with torch.no_grad():
        torch_out = (
            DelayProbability(classifier)
            .eval()(torch.from_numpy(categorical), torch.from_numpy(numeric))
            .numpy()
        )
    assert onnx_out.shape == (len(categorical),)
    np.testing.assert_allclose(onnx_out, torch_out, atol=1e-5)
    written = json.loads((root / "model" / "training_metrics.json").read_text())
    assert written["onnx_max_abs_difference"] < 1e-4 and len(written["history"]) == 3


def trainer_argv(feature_dir, tmp_path) -> list[str]:
    """The trainer's command line as a pod runs it, one epoch, outputs under ``tmp_path``."""
    return [
        sys.executable,
        "-m",
        "kfstack_examples.flights.training.pytorch_trainer",
        "--features-uri",
        feature_dir,
        "--model-uri",
        str(tmp_path / "model"),
        "--checkpoint-uri",
        str(tmp_path / "ckpt"),
        "--epochs",
        "1",
    ]


@pytest.mark.slow
def test_without_world_size_the_trainer_runs_alone(tmp_path, feature_dir):
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "MASTER_ADDR")}
    proc = subprocess.run(
        [*trainer_argv(feature_dir, tmp_path), "--batch-size", "256"],
        capture_output=True,
        text=True,
        env={**env, "OMP_NUM_THREADS": "1"},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rank 0 of 1" in proc.stderr and "4000 train rows" in proc.stderr
    assert len(katib_metrics(proc.stdout)) == 1
    assert (tmp_path / "model" / "model.onnx").is_file()


def test_a_trainjob_node_started_without_torchrun_refuses_to_train(tmp_path, feature_dir):
    """The runtime sets only PET_*; without torchrun a node would train the whole job alone, N
    copies writing one checkpoint URI. It must refuse instead."""
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "MASTER_ADDR")}
    node_env = trainjob_env("job-node-0-0.job", node_rank=1, num_nodes=2)
    proc = subprocess.run(
        trainer_argv(feature_dir, tmp_path),
        capture_output=True,
        text=True,
        env={**env, **node_env, "OMP_NUM_THREADS": "1"},
        timeout=300,
    )
    assert proc.returncode != 0
    assert "PET_NNODES=2, PET_NPROC_PER_NODE=1 but no WORLD_SIZE" in proc.stderr
    assert "torchrun" in proc.stderr
    assert not (tmp_path / "ckpt").exists() and not (tmp_path / "model").exists()


@pytest.mark.slow
def test_the_trainjob_contract_replayed_locally_trains(tmp_path, feature_dir):
    """Each node started exactly as its TrainJob pod is: torchrun under the runtime's PET_* env
    (loopback for node 0's address), and nothing else of the training-operator's."""
    arguments = {
        "platform": "local",
        "data": feature_dir,
        "model": str(tmp_path / "model"),
        "training_logs": str(tmp_path / "logs"),
        **TRAINING_CODE,
        "hyperparameters": {"epochs": 1},
        "workers": 2,
        "training_api": TRAINER_V2,
    }
    replicas = STAGE.replicas(STAGE.settings(arguments)).build(1)
    port = replicas[0].env["PET_MASTER_PORT"]
    for node, replica in enumerate(replicas):
        assert trainjob_env("127.0.0.1", node, 2, int(port)).items() <= replica.env.items()
        assert replica.argv[1:5] == ["-m", "torch.distributed.run", "-m", "kfstack.training.entrypoint"]
        assert replica.env["KFSTACK_INPUT_URI"] == feature_dir  # the training-code contract beside it
    metrics, reference = train_locally(
        TrainingSettings(epochs=2, workers=2, batch_size=128, learning_rate=0.01, max_restarts=0),
        features_uri=feature_dir,
        model_uri=str(tmp_path / "model"),
        logs_uri=str(tmp_path / "logs"),
        threads_per_worker=1,
        training_api=TRAINER_V2,
    )
    assert (reference["training_api"], reference["launcher"]) == ("trainer-v2", "torchrun")
    assert metrics["world_size"] == 2 and metrics["val_auc"] > 0.75
    node0 = (tmp_path / "logs" / "attempt-1" / "rank-0.log").read_text()
    assert "rank 0 of 2" in node0 and len(katib_metrics(node0)) == 2
    assert (tmp_path / "model" / "model.onnx").is_file()


def test_bad_parameters_fail_before_any_process(tmp_path, feature_dir):
    uris = {"model_uri": str(tmp_path / "m"), "logs_uri": str(tmp_path / "l")}
    with pytest.raises(InvalidParameterError, match="data: no dataset at"):
        train_locally(TrainingSettings(workers=1), features_uri=str(tmp_path / "none"), **uris)
    with pytest.raises(InvalidParameterError, match="epochs=0 must be >= 1"):
        TrainingSettings(workers=1, epochs=0)
    with pytest.raises(InvalidParameterError, match="batch_size=2 must be >= workers=3"):
        TrainingSettings(workers=3, batch_size=2)
    assert not (tmp_path / "l").exists()


def test_a_failing_trainer_writes_its_error_where_kubernetes_keeps_it(tmp_path):
    """Under Katib's StdOut collector the container log is empty: the error goes to the
    termination message file too (here a stand-in for /dev/termination-log)."""
    from kfstack.training.termination import MAX_BYTES, termination_message_on_failure

    path = tmp_path / "termination-log"
    path.write_text("")
    with pytest.raises(ValueError), termination_message_on_failure(str(path)):
        raise ValueError("batch_size=" + "9" * 10_000)
    message = path.read_text()
    assert message.startswith("ValueError: batch_size=999")
    assert len(message.encode()) <= MAX_BYTES and "Traceback" in message
    # No file (outside a container): nothing is written, the error still raises.
    with pytest.raises(KeyError), termination_message_on_failure(str(tmp_path / "absent")):
        raise KeyError("x")
    assert not (tmp_path / "absent").exists()


def test_the_model_carries_its_lineage(two_rank_run, feature_dir):
    root, metrics = two_rank_run
    lineage = Lineage.load(str(root / "model"))
    assert lineage.metrics == {name: metrics[name] for name in ("val_auc", "val_log_loss", "val_accuracy")}
    assert lineage.parameters["workers"] == 2 and lineage.parameters["learning_rate"] == 0.01
    assert lineage.parameters["training_api"] in ("v1", "trainer-v2")
    assert lineage.parameters["framework"] == "pytorch"
    # These synthetic features carry no data lineage of their own (the feature job writes one).
    assert lineage.data == {"input_uri": feature_dir}
    assert lineage.pipeline_version == pipeline_version() and lineage.kfstack_version == __version__
