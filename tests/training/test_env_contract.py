"""The PyTorchJob env the operator sets, and how the trainer reads it."""

import pytest

from kfstack.errors import InvalidParameterError
from kfstack.training.env_contract import DistributedEnv, pytorchjob_env, trainjob_env


def test_master_env_matches_the_training_operator():
    assert pytorchjob_env("job-master-0", "master", 0, 3) == {
        "MASTER_ADDR": "job-master-0",
        "MASTER_PORT": "23456",
        "WORLD_SIZE": "3",
        "RANK": "0",
        "PET_MASTER_ADDR": "job-master-0",
        "PET_MASTER_PORT": "23456",
        "PET_NNODES": "3",
        "PET_NPROC_PER_NODE": "1",
        "PET_NODE_RANK": "0",
    }


def test_worker_i_has_node_rank_i_plus_one():
    env = pytorchjob_env("job-master-0", "worker", 1, 3, port=29500)
    assert env["RANK"] == env["PET_NODE_RANK"] == "2"
    assert env["MASTER_PORT"] == "29500"


@pytest.mark.parametrize("args", [("a", "master", 1, 2), ("a", "worker", 2, 3), ("a", "chief", 0, 2)])
def test_impossible_replicas_are_refused(args):
    with pytest.raises(InvalidParameterError):
        pytorchjob_env(*args)


def test_no_world_size_means_a_single_process():
    env = DistributedEnv.from_env({})
    assert (env.rank, env.world_size, env.is_distributed, env.is_chief) == (0, 1, False, True)


def test_round_trip_through_the_env():
    env = DistributedEnv.from_env(pytorchjob_env("10.0.0.5", "worker", 0, 2, port=1234))
    assert (env.rank, env.world_size, env.master_addr, env.master_port) == (1, 2, "10.0.0.5", 1234)
    assert env.is_distributed and not env.is_chief


@pytest.mark.parametrize(
    "env",
    [
        {"WORLD_SIZE": "2", "RANK": "2", "MASTER_ADDR": "a"},
        {"WORLD_SIZE": "two", "RANK": "0"},
        {"WORLD_SIZE": "2", "RANK": "1"},  # no MASTER_ADDR
    ],
)
def test_inconsistent_env_is_a_clear_error(env):
    with pytest.raises(InvalidParameterError):
        DistributedEnv.from_env(env)


def test_the_crd_spelling_of_replica_types_is_accepted():
    assert pytorchjob_env("a", "Worker", 0, 2) == pytorchjob_env("a", "worker", 0, 2)


def test_several_processes_per_pod_need_torchrun():
    operator_env = {**pytorchjob_env("a", "worker", 0, 2), "PET_NPROC_PER_NODE": "4", "WORLD_SIZE": "8"}
    with pytest.raises(InvalidParameterError, match="torchrun"):
        DistributedEnv.from_env(operator_env)
    # What torchrun hands its third process on node 1: a global RANK and a LOCAL_RANK.
    under_torchrun = {**operator_env, "RANK": "6", "LOCAL_RANK": "2", "TORCHELASTIC_RUN_ID": "j"}
    env = DistributedEnv.from_env(under_torchrun)
    assert (env.rank, env.local_rank, env.world_size) == (6, 2, 8)


def test_trainjob_env_is_exactly_the_torch_runtimes():
    """Trainer v2.3's torch plugin: the torchrun variables only; the master is node 0's pod."""
    assert trainjob_env("job-node-0-0.job", 1, 3) == {
        "PET_NNODES": "3",
        "PET_NPROC_PER_NODE": "1",
        "PET_NODE_RANK": "1",
        "PET_MASTER_ADDR": "job-node-0-0.job",
        "PET_MASTER_PORT": "29500",
    }
    with pytest.raises(InvalidParameterError):
        trainjob_env("a", 3, 3)


@pytest.mark.parametrize(
    "env",
    [
        {"PET_NNODES": "2", "PET_NPROC_PER_NODE": "1", "PET_NODE_RANK": "0"},
        {"PET_NNODES": "1", "PET_NPROC_PER_NODE": "4"},
        {"PET_NNODES": "1:3"},  # an elastic PyTorchJob's range, started without torchrun
    ],
)
def test_one_of_several_processes_without_world_size_is_refused(env):
    with pytest.raises(InvalidParameterError, match="no WORLD_SIZE") as err:
        DistributedEnv.from_env(env)
    assert "torchrun" in str(err.value)


def test_a_one_node_trainjob_without_torchrun_still_trains_alone():
    env = DistributedEnv.from_env(trainjob_env("a", 0, 1))
    assert (env.rank, env.world_size) == (0, 1)


def test_what_torchrun_hands_a_trainjob_node_is_read_as_its_global_rank():
    under_torchrun = {
        **trainjob_env("job-node-0-0.job", 1, 2),
        "RANK": "1",
        "WORLD_SIZE": "2",
        "LOCAL_RANK": "0",
        "MASTER_ADDR": "job-node-0-0.job",
        "MASTER_PORT": "29500",
        "TORCHELASTIC_RUN_ID": "none",
    }
    env = DistributedEnv.from_env(under_torchrun)
    assert (env.rank, env.world_size, env.master_port) == (1, 2, 29500)
