"""PyTorch behind the training stage: the PyTorchJob, and the same replicas as local processes.

``local``, per training API (loopback address, a free port per attempt; the whole group restarts
from the latest checkpoint on a failure, like restartPolicy OnFailure):

- ``v1``: ``workers`` processes of :mod:`.trainer`, started with exactly the env the
  training-operator gives a PyTorchJob with one Master and ``workers - 1`` Workers;
- ``trainer-v2``: ``workers`` nodes, each started as its TrainJob pod is -- torchrun with exactly
  the ``PET_*`` env the Trainer v2 torch runtime sets (``python -m torch.distributed.run`` is the
  ``torchrun`` entry point of the same interpreter).

``kubernetes``: that PyTorchJob (elastic or not) on the chosen node pool; the TrainJob is built
by the stage (:mod:`kfstack.kubernetes.train_job`).
"""

from __future__ import annotations

import sys

from kfstack.kubernetes.training_apis import TRAINER_V2
from kfstack.kubernetes.training_jobs import ElasticSettings, TrainingJobRequest, build_pytorchjob
from kfstack.training.env_contract import MASTER, WORKER, pytorchjob_env, trainjob_env
from kfstack.training.process_group import LOOPBACK, ReplicaProcess, ReplicaSet, free_port
from kfstack.training.settings import TrainingSettings

TRAINER_MODULE = "kfstack.components.training.train_model.pytorch.trainer"
IMAGE_ROLE = "torch-trainer"
NAME_PREFIX = "kfs-pytorch"


def build_job(settings: TrainingSettings, request: TrainingJobRequest) -> dict:
    """The PyTorchJob: 1 Master + ``workers - 1`` Workers, or elastic Workers (torchrun)."""
    elastic = None
    if settings.elastic:
        elastic = ElasticSettings(
            min_replicas=settings.elastic_min_workers,
            max_replicas=settings.elastic_max_workers,
            max_restarts=settings.max_restarts,
        )
    return build_pytorchjob(request.with_elastic(elastic))


def job_pods(settings: TrainingSettings, world_size: int) -> int:
    """The job's pods, as its cost counts them: one per rank (elastic: the world size it ended
    with). Every TrainJob node and PyTorchJob replica runs one process (``nproc_per_node=1``)."""
    return world_size


def local_replicas(settings: TrainingSettings, trainer_argv: list[str], training_api: str) -> ReplicaSet:
    """Per attempt: the PyTorchJob's Master and Workers, or the TrainJob's nodes.

    The env is rebuilt per attempt with a new free port: the previous master's port can still be
    in TIME_WAIT when the group restarts.
    """
    workers = settings.workers
    if training_api == TRAINER_V2:
        return _trainjob_nodes(workers, trainer_argv)

    def build(attempt: int) -> list[ReplicaProcess]:
        port = free_port()
        argv = [sys.executable, "-m", TRAINER_MODULE, *trainer_argv]
        # A one-replica PyTorchJob still gets WORLD_SIZE=1; the trainer then skips DDP.
        replicas = [ReplicaProcess(0, argv, pytorchjob_env(LOOPBACK, MASTER, 0, workers, port), "master-0")]
        for i in range(workers - 1):
            env = pytorchjob_env(LOOPBACK, WORKER, i, workers, port)
            replicas.append(ReplicaProcess(i + 1, argv, env, f"worker-{i}"))
        return replicas

    return ReplicaSet(build=build, details={"world_size": workers})


def _trainjob_nodes(workers: int, trainer_argv: list[str]) -> ReplicaSet:
    """Per attempt: ``workers`` TrainJob nodes, each torchrun under the runtime's ``PET_*`` env."""

    def build(attempt: int) -> list[ReplicaProcess]:
        port = free_port()
        argv = [sys.executable, "-m", "torch.distributed.run", "-m", TRAINER_MODULE, *trainer_argv]
        return [
            ReplicaProcess(node, argv, trainjob_env(LOOPBACK, node, workers, port), f"node-{node}")
            for node in range(workers)
        ]

    return ReplicaSet(build=build, details={"world_size": workers, "launcher": "torchrun"})
