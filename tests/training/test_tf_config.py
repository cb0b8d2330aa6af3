"""TF_CONFIG: what the operator sets per replica, and how the trainer reads it."""

import json

import pytest

from kfstack.errors import InvalidParameterError
from kfstack.training.tf_config import TFTask, tfjob_addresses, tfjob_tf_config


def test_addresses_follow_the_operators_service_names():
    cluster = tfjob_addresses("kfs-tf-1", "team-ml", {"chief": 1, "worker": 2, "ps": 1, "evaluator": 0})
    assert cluster == {
        "chief": ["kfs-tf-1-chief-0.team-ml.svc:2222"],
        "worker": ["kfs-tf-1-worker-0.team-ml.svc:2222", "kfs-tf-1-worker-1.team-ml.svc:2222"],
        "ps": ["kfs-tf-1-ps-0.team-ml.svc:2222"],
    }


def test_tf_config_round_trip_and_roles():
    cluster = tfjob_addresses("j", "ns", {"chief": 1, "worker": 2, "ps": 1})
    raw = tfjob_tf_config(cluster, "Worker", 1)
    assert json.loads(raw) == {
        "cluster": cluster,
        "task": {"type": "worker", "index": 1},
        "environment": "cloud",
    }
    worker = TFTask.from_env({"TF_CONFIG": raw})
    assert (worker.task_type, worker.index, worker.num_workers) == ("worker", 1, 2)
    assert worker.has_parameter_servers and not worker.is_chief
    assert TFTask.from_env({"TF_CONFIG": tfjob_tf_config(cluster, "chief", 0)}).is_chief


def test_without_a_chief_worker_zero_leads():
    cluster = {"worker": ["a:1", "b:2"]}
    assert TFTask.from_env({"TF_CONFIG": tfjob_tf_config(cluster, "worker", 0)}).is_chief
    assert not TFTask.from_env({"TF_CONFIG": tfjob_tf_config(cluster, "worker", 1)}).is_chief


def test_a_one_replica_job_gets_no_tf_config_and_trains_alone():
    assert tfjob_tf_config({"worker": ["a:1"]}, "worker", 0) is None
    task = TFTask.from_env({})
    assert not task.is_distributed and task.is_chief and task.num_workers == 1


@pytest.mark.parametrize(
    "raw",
    [
        "not json",
        json.dumps({"cluster": {"worker": ["a:1"]}}),
        json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}),
        json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"type": "ps", "index": 0}}),
    ],
)
def test_malformed_tf_config_is_a_clear_error(raw):
    with pytest.raises(InvalidParameterError, match="TF_CONFIG"):
        TFTask.from_env({"TF_CONFIG": raw})


def test_building_a_config_for_a_missing_replica_fails():
    with pytest.raises(InvalidParameterError):
        tfjob_tf_config({"worker": ["a:1"]}, "chief", 0)
