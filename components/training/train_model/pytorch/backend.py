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

from kfstack.kubernetes.training_apis import TRAINER_V2
from kfstack.kubernetes.training_jobs import ElasticSettings, TrainingJobRequest, build_pytorchjob
from kfstack.training import local_replicas as local_replicas_
from kfstack.training.process_group import ReplicaSet
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
    """Per attempt: the PyTorchJob's Master and Workers, or the TrainJob's nodes
    (:mod:`kfstack.training.local_replicas`)."""
    command = [TRAINER_MODULE, *trainer_argv]
    if training_api == TRAINER_V2:
        return local_replicas_.trainjob_nodes(settings.workers, command)
    return local_replicas_.pytorchjob_replicas(settings.workers, command)
