"""TensorFlow behind the training stage: the TFJob, and the same replicas as local processes.

``local``: the replicas of a TFJob as local processes, each with exactly the ``TF_CONFIG`` the
training-operator would give its pod (loopback addresses, a free port per replica and attempt).
Any failure stops the others and restarts the group from the latest checkpoint. With parameter
servers the chief's exit ends the job (the TFJob success policy), and the serving workers and
PS are then stopped. ``kubernetes``: that TFJob on the chosen node pool.
"""

from __future__ import annotations

import dataclasses

from kfstack.kubernetes.training_jobs import TrainingJobRequest, build_tfjob
from kfstack.training.local_replicas import tfjob_replicas
from kfstack.training.process_group import ReplicaSet
from kfstack.training.settings import PARAMETER_SERVER, TrainingSettings
from kfstack.training.tf_config import CHIEF, PS, WORKER

TRAINER_MODULE = "kfstack.components.training.train_model.tensorflow.trainer"
IMAGE_ROLE = "tf-trainer"
NAME_PREFIX = "kfs-tf"


def replica_layout(settings: TrainingSettings) -> dict[str, int]:
    """Replica type -> count, in launch (rank) order: the chief first when there is one."""
    if settings.tf_topology == PARAMETER_SERVER:
        return {CHIEF: 1, WORKER: settings.workers, PS: settings.tf_parameter_servers}
    return {WORKER: settings.workers}


def job_pods(settings: TrainingSettings, world_size: int) -> int:
    """The job's pods, as its cost counts them: its whole replica layout, Chief and PS included
    (``world_size`` is the workers, which the layout already has)."""
    return sum(replica_layout(settings).values())


def build_job(settings: TrainingSettings, request: TrainingJobRequest) -> dict:
    """The TFJob: Workers (MWMS), or Chief + Workers + PS."""
    return build_tfjob(request.with_topology(settings.tf_topology, settings.tf_parameter_servers))


def local_replicas(settings: TrainingSettings, trainer_argv: list[str], training_api: str) -> ReplicaSet:
    """Per attempt: one process per replica with the ``TF_CONFIG`` the operator would set
    (:func:`kfstack.training.local_replicas.tfjob_replicas`).

    ``training_api`` is always ``v1`` here: TensorFlow runs as a TFJob only
    (:mod:`kfstack.kubernetes.training_apis`).
    """
    replicas = tfjob_replicas(replica_layout(settings), [TRAINER_MODULE, *trainer_argv])
    return dataclasses.replace(replicas, details={"topology": settings.tf_topology, **replicas.details})
