"""Runs TensorFlow training on the requested platform; returns its metrics for the KFP UI.

``local``: the replicas of a TFJob as local processes, each with exactly the ``TF_CONFIG`` the
training-operator would give its pod (loopback addresses, a free port per replica and attempt),
under :func:`kfstack.training.process_group.run_process_group`: any failure stops the others
and restarts the group from the latest checkpoint. With parameter servers the chief's exit ends
the job (the TFJob success policy), and the serving workers and PS are then stopped.

``kubernetes``: the TFJob (:func:`tf_job`) on the ``gpu_pool`` node pool, created or adopted
and watched by :mod:`kfstack.kubernetes.launcher`.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

from kfstack import images, platforms
from kfstack.components.training.common import (
    LOOPBACK,
    launch_training,
    trainer_arguments,
    validate_hyperparameters,
    write_outputs,
)
from kfstack.errors import InvalidParameterError
from kfstack.training.process_group import ReplicaProcess, free_port, run_process_group
from kfstack.training.tf_config import CHIEF, PS, WORKER, tfjob_tf_config

TRAINER_MODULE = "kfstack.components.training.train_tensorflow.trainer"
NAME_PREFIX = "kfs-tf"
MWMS = "mwms"
PARAMETER_SERVER = "parameter_server"
TOPOLOGIES = (MWMS, PARAMETER_SERVER)


def validate_topology(topology: str, parameter_servers: int) -> None:
    if topology not in TOPOLOGIES:
        raise InvalidParameterError(f"tf_topology={topology!r} is not one of {', '.join(TOPOLOGIES)}")
    if topology == PARAMETER_SERVER and parameter_servers < 1:
        raise InvalidParameterError(f"parameter_servers={parameter_servers}: the parameter_server topology needs >= 1")


def replica_layout(topology: str, workers: int, parameter_servers: int) -> dict[str, int]:
    """Replica type -> count, in launch (rank) order: the chief first when there is one."""
    if topology == PARAMETER_SERVER:
        return {CHIEF: 1, WORKER: workers, PS: parameter_servers}
    return {WORKER: workers}


def local_replicas(layout: dict[str, int], trainer_args: list[str]) -> Callable[[int], list[ReplicaProcess]]:
    """Per attempt: one process per replica with the ``TF_CONFIG`` the operator would set."""

    def build(attempt: int) -> list[ReplicaProcess]:
        cluster = {rtype: [f"{LOOPBACK}:{free_port()}" for _ in range(count)] for rtype, count in layout.items()}
        argv = [sys.executable, "-m", TRAINER_MODULE, *trainer_args]
        replicas = []
        for rtype, addresses in cluster.items():
            for index in range(len(addresses)):
                tf_config = tfjob_tf_config(cluster, rtype, index)
                env = {"TF_CONFIG": tf_config} if tf_config else {}
                replicas.append(ReplicaProcess(len(replicas), argv, env, f"{rtype}-{index}"))
        return replicas

    return build


def tf_job(*, context, features_uri: str, model_uri: str, checkpoint_uri: str, epochs: int,
           workers: int, batch_size: int, learning_rate: float, max_restarts: int, seed: int,
           gpu_pool: str, secrets, topology: str = MWMS, parameter_servers: int = 1,
           active_deadline_seconds: int | None = None) -> dict:
    """The TFJob this step creates on Kubernetes (also what ``kfstack render`` writes)."""
    from kfstack.kubernetes import node_pools
    from kfstack.kubernetes.training_jobs import TrainingJobRequest, build_tfjob

    validate_hyperparameters(epochs=epochs, workers=workers, batch_size=batch_size,
                             learning_rate=learning_rate, max_restarts=max_restarts)
    validate_topology(topology, parameter_servers)
    return build_tfjob(TrainingJobRequest(
        name=context.name(NAME_PREFIX),
        labels=context.labels(),
        image=images.image_for("tf-trainer"),
        module=TRAINER_MODULE,
        args=trainer_arguments(features_uri=features_uri, model_uri=model_uri,
                               checkpoint_uri=checkpoint_uri, epochs=epochs, batch_size=batch_size,
                               learning_rate=learning_rate, seed=seed),
        workers=workers,
        profile=node_pools.get_profile(gpu_pool),
        secrets=secrets,
        checkpoint_uri=checkpoint_uri,
        max_restarts=max_restarts,
        active_deadline_seconds=active_deadline_seconds,
        topology=topology,
        parameter_servers=parameter_servers,
    ))


def launch_tensorflow_training(
    *,
    platform: str,
    features_uri: str,
    model_uri: str,
    logs_uri: str,
    epochs: int,
    workers: int,
    batch_size: int,
    learning_rate: float,
    max_restarts: int,
    seed: int = 42,
    topology: str = MWMS,
    parameter_servers: int = 1,
    threads_per_worker: int | None = None,
    on_group_started: Callable[[int, list[subprocess.Popen]], None] | None = None,
    kubernetes: dict | None = None,
) -> tuple[dict[str, float], dict]:
    """Trains; returns flat metrics and a reference to what ran the training.

    Args:
        platform: ``local`` or ``kubernetes``.
        features_uri, model_uri, logs_uri: As for :func:`launch_pytorch_training`.
        epochs, workers, batch_size, learning_rate, max_restarts, seed: See the component.
        topology: ``mwms`` (workers, synchronous) or ``parameter_server`` (chief + workers + PS).
        parameter_servers: PS replicas of the ``parameter_server`` topology.
        threads_per_worker: Local only: intra-op threads per replica.
        on_group_started: Local only: test hook, see ``run_process_group``.
        kubernetes: On ``kubernetes``: ``context``, ``gpu_pool`` and ``settings``.

    Raises:
        InvalidParameterError: before anything starts.
        TrainingFailedError: the local group failed more than ``max_restarts`` times.
        ResourceFailedError: the TFJob failed (conditions and the chief's / worker 0's log tail).
    """
    validate_topology(topology, parameter_servers)
    layout = replica_layout(topology, workers, parameter_servers)

    def run_locally(trainer_argv: list[str]):
        result = run_process_group(
            local_replicas(layout, trainer_argv), logs_dir=logs_uri, max_restarts=max_restarts,
            on_group_started=on_group_started, threads_per_process=threads_per_worker,
            done_when_exits=0 if topology == PARAMETER_SERVER else None,
        )
        return result, {"topology": topology, "replicas": layout}

    def build_job(**kwargs):
        return tf_job(topology=topology, parameter_servers=parameter_servers, **kwargs)

    return launch_training(
        platform=platform, stage="train-tensorflow", kind_name="TFJob", features_uri=features_uri,
        model_uri=model_uri, logs_uri=logs_uri, epochs=epochs, workers=workers, batch_size=batch_size,
        learning_rate=learning_rate, max_restarts=max_restarts, seed=seed, build_job=build_job,
        run_locally=run_locally, kubernetes=kubernetes,
    )

def kubernetes_options(*, platform: str, run_id: str, task_name: str, gpu_pool: str,
                       object_store_secret: str, image_pull_secret: str, timeout_seconds: float,
                       poll_interval_seconds: float) -> dict | None:
    """The ``kubernetes`` argument of :func:`launch_tensorflow_training` (``None`` off Kubernetes)."""
    if platform != platforms.KUBERNETES:
        return None
    from kfstack.kubernetes.launcher import LaunchSettings
    from kfstack.kubernetes.naming import RunContext

    return {
        "context": RunContext(run_id=run_id, task_name=task_name),
        "gpu_pool": gpu_pool,
        "settings": LaunchSettings.from_parameters(
            object_store_secret=object_store_secret, image_pull_secret=image_pull_secret,
            timeout_seconds=timeout_seconds, poll_interval_seconds=poll_interval_seconds),
    }


def run_component(*, platform: str, features, epochs: int, workers: int, batch_size: int,
                  learning_rate: float, max_restarts: int, model, training_metrics, training_logs,
                  training_job, seed: int, topology: str, parameter_servers: int, run_id: str,
                  task_name: str, gpu_pool: str, object_store_secret: str, image_pull_secret: str,
                  timeout_seconds: float, poll_interval_seconds: float) -> None:
    """The ``train_tensorflow`` component's body: artifacts in, metrics and reference out."""
    metrics, reference = launch_tensorflow_training(
        platform=platform,
        features_uri=platforms.artifact_location(platform, features),
        model_uri=platforms.artifact_location(platform, model),
        logs_uri=platforms.artifact_location(platform, training_logs),
        epochs=epochs, workers=workers, batch_size=batch_size, learning_rate=learning_rate,
        max_restarts=max_restarts, seed=seed, topology=topology, parameter_servers=parameter_servers,
        kubernetes=kubernetes_options(
            platform=platform, run_id=run_id, task_name=task_name, gpu_pool=gpu_pool,
            object_store_secret=object_store_secret, image_pull_secret=image_pull_secret,
            timeout_seconds=timeout_seconds, poll_interval_seconds=poll_interval_seconds,
        ),
    )
    write_outputs(metrics, reference, training_metrics, training_job)
