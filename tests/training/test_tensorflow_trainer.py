"""The TensorFlow trainer on the local TFJob launcher: real TensorFlow processes talking over
gRPC collectives (MultiWorkerMirroredStrategy) and to a parameter server, on small data."""

import json
import signal

import numpy as np
import onnxruntime
import pytest

from kfstack.errors import InvalidParameterError
from kfstack.training import shards
from kfstack_examples.flights.feature_spec import FeatureSpec
from kfstack_examples.flights.pipelines.steps import train_locally
from kfstack_examples.flights.training.settings import TrainingSettings
from tests.training.conftest import katib_metrics, kill_after_first_checkpoint, make_feature_dir


def run(tmp_path, features, topology="mwms", on_group_started=None, **overrides):
    training = {
        "framework": "tensorflow",
        "epochs": 2,
        "workers": 2,
        "batch_size": 128,
        "learning_rate": 0.01,
        "max_restarts": 0,
        "tf_topology": topology,
    }
    return train_locally(
        TrainingSettings(**{**training, **overrides}),
        features_uri=features,
        model_uri=str(tmp_path / "model"),
        logs_uri=str(tmp_path / "logs"),
        threads_per_worker=1,
        on_group_started=on_group_started,
    )


@pytest.fixture(scope="module")
def features(tmp_path_factory):
    return make_feature_dir(tmp_path_factory.mktemp("tf-features"), rows=4000, shards=2, seed=4)


def test_mwms_two_workers_train_read_disjoint_shards_and_export_onnx(tmp_path, features):
    metrics, reference = run(tmp_path, features)
    assert reference == {
        "kind": "LocalProcessGroup",
        "framework": "tensorflow",
        "training_api": "v1",  # TensorFlow runs as a TFJob only, auto or not
        "topology": "mwms",
        "replicas": {"worker": 2},
        "attempts": 1,
    }
    assert metrics["world_size"] == 2 and metrics["val_auc"] > 0.75 and metrics["restarts"] == 0
    assert metrics["report.samples_per_second_per_replica"] == pytest.approx(
        metrics["report.samples_per_second"] / 2
    )
    logs = tmp_path / "logs" / "attempt-1"
    chief, other = (logs / "rank-0.log").read_text(), (logs / "rank-1.log").read_text()
    assert [m["epoch"] for m in katib_metrics(chief)] == [1, 2]
    assert all(line["seconds_per_epoch"] > 0 for line in katib_metrics(chief))
    assert katib_metrics(other) == []  # only the chief prints Katib lines
    # Each worker read its own shard: half the train rows each.
    rows = shards.shard_rows(shards.list_shards(f"{features}/train"))
    assert f"worker 0 of 2: {rows[0]} train rows" in chief and f"worker 1 of 2: {rows[1]} train rows" in other
    trained = json.loads((tmp_path / "model" / "training_metrics.json").read_text())
    assert trained["topology"] == "mwms" and trained["onnx_max_abs_difference"] <= 1e-4
    # The exported model serves with the interface evaluation and serving use.
    spec = FeatureSpec.load(str(tmp_path / "model"))
    session = onnxruntime.InferenceSession(str(tmp_path / "model" / "model.onnx"))
    probabilities = session.run(
        None,
        {
            "categorical": np.zeros((3, len(spec.categorical)), np.int64),
            "numeric": np.zeros((3, len(spec.numeric)), np.float32),
        },
    )[0]
    assert probabilities.shape == (3,) and np.all((probabilities > 0) & (probabilities < 1))


@pytest.mark.slow
def test_parameter_server_topology_trains_and_stops_its_servers(tmp_path, features):
    started = []
    metrics, reference = run(
        tmp_path,
        features,
        topology="parameter_server",
        tf_parameter_servers=1,
        on_group_started=lambda attempt, processes: started.extend(processes),
    )
    assert reference["replicas"] == {"chief": 1, "worker": 2, "ps": 1}
    assert metrics["val_auc"] > 0.75
    assert started[0].returncode == 0
    # Workers and PS serve forever; the launcher stopped them when the chief finished.
    assert all(p.returncode == -signal.SIGTERM for p in started[1:])
    assert "topology parameter_server" in (tmp_path / "logs" / "attempt-1" / "rank-0.log").read_text()


# A fault test of 25 s: slow. The default suite keeps the PyTorch one (test_local_launcher), which
# runs the same restart-from-checkpoint path of the process group.
@pytest.mark.slow
def test_killed_worker_restarts_the_group_which_resumes_from_the_checkpoint(tmp_path):
    features = make_feature_dir(tmp_path / "features", rows=16000, shards=2, seed=5)
    logs = tmp_path / "logs"
    kill_worker, killed = kill_after_first_checkpoint(logs / "checkpoints")

    metrics, _ = run(
        tmp_path, features, epochs=4, batch_size=64, max_restarts=2, on_group_started=kill_worker
    )
    assert killed, "the worker finished before it could be killed"
    assert metrics["restarts"] == 1
    chief_after = (logs / "attempt-2" / "rank-0.log").read_text()
    assert "resumed from checkpoint of epoch" in chief_after
    epochs_after = [m["epoch"] for m in katib_metrics(chief_after)]
    assert epochs_after and epochs_after[0] > 1 and epochs_after[-1] == 4
    assert metrics["val_auc"] > 0.75
    # The run's figures span both attempts (the checkpoint carries the first one's seconds):
    # an epoch is 8000 rows per worker in batches of 32, on 2 workers.
    assert metrics["report.seconds_per_epoch"] * metrics["report.samples_per_second"] == pytest.approx(16000)


def test_bad_topology_fails_before_any_process(tmp_path, features):
    with pytest.raises(InvalidParameterError, match="tf_topology='ring'"):
        run(tmp_path, features, topology="ring")
    with pytest.raises(InvalidParameterError, match="tf_parameter_servers=0"):
        run(tmp_path, features, topology="parameter_server", tf_parameter_servers=0)
    assert not (tmp_path / "logs").exists()
