"""A training job's replicas as local processes, each with the env its pod would get.

The embedded platform replays the operators' contracts (:mod:`.env_contract`, :mod:`.tf_config`)
on loopback addresses, for any Python module a job runs (``python -m <module> <args>``): the
example trainers and a team's own code (through :mod:`kfstack.training.entrypoint`) alike.

- PyTorchJob (training-operator v1): one Master and ``workers - 1`` Workers with ``MASTER_*``,
  ``WORLD_SIZE``, ``RANK`` and their ``PET_*`` twins;
- TrainJob (Trainer v2, torch runtime): ``workers`` nodes, each torchrun (``python -m
  torch.distributed.run``, the ``torchrun`` entry point of the same interpreter) under exactly the
  ``PET_*`` env the runtime sets;
- TFJob: one process per replica of the layout with the ``TF_CONFIG`` the operator would set.

Every attempt builds its env anew with free ports: the previous attempt's may still linger in
TIME_WAIT when the group restarts (:func:`.process_group.run_process_group`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from kfstack.training.env_contract import MASTER, WORKER, pytorchjob_env, trainjob_env
from kfstack.training.process_group import LOOPBACK, ReplicaProcess, ReplicaSet, free_port
from kfstack.training.tf_config import CHIEF, tfjob_tf_config


def pytorchjob_replicas(workers: int, command: list[str], env: Mapping[str, str] | None = None) -> ReplicaSet:
    """A PyTorchJob's Master and Workers running ``python -m <command>``.

    A one-replica PyTorchJob still gets ``WORLD_SIZE=1``.
    """
    extra = dict(env or {})

    def build(attempt: int) -> list[ReplicaProcess]:
        port = free_port()
        argv = [sys.executable, "-m", *command]
        master = {**extra, **pytorchjob_env(LOOPBACK, MASTER, 0, workers, port)}
        replicas = [ReplicaProcess(0, argv, master, "master-0")]
        for i in range(workers - 1):
            replicas.append(
                ReplicaProcess(
                    i + 1,
                    argv,
                    {**extra, **pytorchjob_env(LOOPBACK, WORKER, i, workers, port)},
                    f"worker-{i}",
                )
            )
        return replicas

    return ReplicaSet(build=build, details={"world_size": workers})


def trainjob_nodes(workers: int, command: list[str], env: Mapping[str, str] | None = None) -> ReplicaSet:
    """A TrainJob's nodes, each ``torchrun -m <command>`` under the runtime's ``PET_*`` env."""
    extra = dict(env or {})

    def build(attempt: int) -> list[ReplicaProcess]:
        port = free_port()
        argv = [sys.executable, "-m", "torch.distributed.run", "-m", *command]
        return [
            ReplicaProcess(
                node, argv, {**extra, **trainjob_env(LOOPBACK, node, workers, port)}, f"node-{node}"
            )
            for node in range(workers)
        ]

    return ReplicaSet(build=build, details={"world_size": workers, "launcher": "torchrun"})


def tfjob_replicas(
    layout: Mapping[str, int], command: list[str], env: Mapping[str, str] | None = None
) -> ReplicaSet:
    """A TFJob's replicas, ``layout`` being replica type -> count in launch (rank) order.

    With a chief (the ``parameter_server`` topology) the chief's exit ends the job, as the
    TFJob's success policy does, and the serving workers and parameter servers are then stopped.
    """
    extra = dict(env or {})
    layout = dict(layout)

    def build(attempt: int) -> list[ReplicaProcess]:
        cluster = {
            rtype: [f"{LOOPBACK}:{free_port()}" for _ in range(count)] for rtype, count in layout.items()
        }
        argv = [sys.executable, "-m", *command]
        replicas: list[ReplicaProcess] = []
        for rtype, addresses in cluster.items():
            for index in range(len(addresses)):
                tf_config = tfjob_tf_config(cluster, rtype, index)
                replica_env = {**extra, **({"TF_CONFIG": tf_config} if tf_config else {})}
                replicas.append(ReplicaProcess(len(replicas), argv, replica_env, f"{rtype}-{index}"))
        return replicas

    return ReplicaSet(
        build=build, done_when_exits=0 if CHIEF in layout else None, details={"replicas": layout}
    )
