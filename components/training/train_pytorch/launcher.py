"""Runs PyTorch training on the requested platform; returns its metrics for the KFP UI.

``local``: ``workers`` processes of :mod:`.trainer`, started with exactly the env the
training-operator gives a PyTorchJob with one Master and ``workers - 1`` Workers (loopback
address, a free port per attempt), under :func:`kfstack.training.process_group.run_process_group`
(restartPolicy OnFailure: the whole group restarts from the latest checkpoint).

``kubernetes``: a PyTorchJob with the same trainer and arguments on the ``gpu_pool`` node pool
(:func:`pytorch_job`), created or adopted and watched by :mod:`kfstack.kubernetes.launcher`; the
metrics come from ``training_metrics.json`` the trainer writes beside the model.
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
from kfstack.training.env_contract import MASTER, WORKER, pytorchjob_env
from kfstack.training.process_group import ReplicaProcess, free_port, run_process_group

TRAINER_MODULE = "kfstack.components.training.train_pytorch.trainer"
NAME_PREFIX = "kfs-pytorch"


def pytorch_job(*, context, features_uri: str, model_uri: str, checkpoint_uri: str, epochs: int,
                workers: int, batch_size: int, learning_rate: float, max_restarts: int, seed: int,
                gpu_pool: str, secrets, active_deadline_seconds: int | None = None,
                elastic=None) -> dict:
    """The PyTorchJob this step creates on Kubernetes (also what ``kfstack render`` writes).

    Args:
        context: :class:`kfstack.kubernetes.naming.RunContext` (names and labels the job).
        features_uri, model_uri, checkpoint_uri: Remote URIs every pod can reach.
        epochs, workers, batch_size, learning_rate, max_restarts, seed: See the component.
        gpu_pool: Node-pool profile name (:mod:`kfstack.kubernetes.node_pools`).
        secrets: :class:`kfstack.kubernetes.pods.SecretRefs`.
        active_deadline_seconds: Hard limit on the job's run time.
        elastic: :class:`kfstack.kubernetes.training_jobs.ElasticSettings` or ``None``.
    """
    from kfstack.kubernetes import node_pools
    from kfstack.kubernetes.training_jobs import TrainingJobRequest, build_pytorchjob

    validate_hyperparameters(epochs=epochs, workers=workers, batch_size=batch_size,
                             learning_rate=learning_rate, max_restarts=max_restarts)
    return build_pytorchjob(TrainingJobRequest(
        name=context.name(NAME_PREFIX),
        labels=context.labels(),
        image=images.image_for("torch-trainer"),
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
        elastic=elastic,
    ))


def local_replicas(workers: int, trainer_args: list[str]) -> Callable[[int], list[ReplicaProcess]]:
    """Per attempt: one Master and ``workers - 1`` Workers with the PyTorchJob env.

    The env is rebuilt per attempt with a new free port: the previous master's port can still be
    in TIME_WAIT when the group restarts.
    """

    def build(attempt: int) -> list[ReplicaProcess]:
        port = free_port()
        argv = [sys.executable, "-m", TRAINER_MODULE, *trainer_args]
        # A one-replica PyTorchJob still gets WORLD_SIZE=1; the trainer then skips DDP.
        replicas = [ReplicaProcess(0, argv, pytorchjob_env(LOOPBACK, MASTER, 0, workers, port), "master-0")]
        for i in range(workers - 1):
            env = pytorchjob_env(LOOPBACK, WORKER, i, workers, port)
            replicas.append(ReplicaProcess(i + 1, argv, env, f"worker-{i}"))
        return replicas

    return build


def launch_pytorch_training(
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
    threads_per_worker: int | None = None,
    on_group_started: Callable[[int, list[subprocess.Popen]], None] | None = None,
    kubernetes: dict | None = None,
) -> tuple[dict[str, float], dict]:
    """Trains; returns flat metrics and a reference to what ran the training.

    The metrics: ``val_auc``, ``val_log_loss``, ``val_accuracy``, ``samples_per_second``,
    ``world_size`` and, locally, ``restarts`` (the PyTorchJob's restarts show in its status).

    Args:
        platform: ``local`` or ``kubernetes``.
        features_uri: Output of the feature job.
        model_uri: Receives ``model.onnx``, ``feature_spec.json``, ``training_metrics.json``.
        logs_uri: Per-replica logs (local) and the checkpoints (``<logs_uri>/checkpoints``).
        epochs, workers, batch_size, learning_rate, max_restarts, seed: see the component.
        threads_per_worker: Local only: intra-op threads per replica; default: cores split evenly.
        on_group_started: Local only: test hook, see ``run_process_group``.
        kubernetes: On ``kubernetes``: ``context`` (RunContext), ``gpu_pool``, ``settings``
            (:class:`~kfstack.kubernetes.launcher.LaunchSettings`) and optionally ``elastic``.

    Raises:
        InvalidParameterError: before anything starts.
        TrainingFailedError: the local group failed more than ``max_restarts`` times.
        ResourceFailedError: the PyTorchJob failed (conditions and master log tail).
    """
    def run_locally(trainer_argv: list[str]):
        result = run_process_group(
            local_replicas(workers, trainer_argv), logs_dir=logs_uri, max_restarts=max_restarts,
            on_group_started=on_group_started, threads_per_process=threads_per_worker,
        )
        return result, {"world_size": workers}

    return launch_training(
        platform=platform, stage="train-pytorch", kind_name="PyTorchJob", features_uri=features_uri,
        model_uri=model_uri, logs_uri=logs_uri, epochs=epochs, workers=workers, batch_size=batch_size,
        learning_rate=learning_rate, max_restarts=max_restarts, seed=seed, build_job=pytorch_job,
        run_locally=run_locally, kubernetes=kubernetes,
    )

def elastic_settings(min_workers: int, max_workers: int, max_restarts: int):
    """:class:`~kfstack.kubernetes.training_jobs.ElasticSettings`, or ``None`` when both are 0."""
    if not (min_workers or max_workers):
        return None
    from kfstack.kubernetes.training_jobs import ElasticSettings

    return ElasticSettings(min_replicas=min_workers, max_replicas=max_workers, max_restarts=max_restarts)


def kubernetes_options(*, platform: str, run_id: str, task_name: str, gpu_pool: str,
                       elastic_min_workers: int, elastic_max_workers: int, max_restarts: int,
                       object_store_secret: str, image_pull_secret: str, timeout_seconds: float,
                       poll_interval_seconds: float) -> dict | None:
    """The ``kubernetes`` argument of :func:`launch_pytorch_training` (``None`` off Kubernetes)."""
    if platform != platforms.KUBERNETES:
        return None
    from kfstack.kubernetes.launcher import LaunchSettings
    from kfstack.kubernetes.naming import RunContext

    return {
        "context": RunContext(run_id=run_id, task_name=task_name),
        "gpu_pool": gpu_pool,
        "elastic": elastic_settings(elastic_min_workers, elastic_max_workers, max_restarts),
        "settings": LaunchSettings.from_parameters(
            object_store_secret=object_store_secret, image_pull_secret=image_pull_secret,
            timeout_seconds=timeout_seconds, poll_interval_seconds=poll_interval_seconds),
    }


def run_component(*, platform: str, features, epochs: int, workers: int, batch_size: int,
                  learning_rate: float, max_restarts: int, model, training_metrics, training_logs,
                  training_job, seed: int, run_id: str, task_name: str, gpu_pool: str,
                  elastic_min_workers: int, elastic_max_workers: int, object_store_secret: str,
                  image_pull_secret: str, timeout_seconds: float, poll_interval_seconds: float) -> None:
    """The ``train_pytorch`` component's body: artifacts in, metrics and reference out."""
    metrics, reference = launch_pytorch_training(
        platform=platform,
        features_uri=platforms.artifact_location(platform, features),
        model_uri=platforms.artifact_location(platform, model),
        logs_uri=platforms.artifact_location(platform, training_logs),
        epochs=epochs, workers=workers, batch_size=batch_size, learning_rate=learning_rate,
        max_restarts=max_restarts, seed=seed,
        kubernetes=kubernetes_options(
            platform=platform, run_id=run_id, task_name=task_name, gpu_pool=gpu_pool,
            elastic_min_workers=elastic_min_workers, elastic_max_workers=elastic_max_workers,
            max_restarts=max_restarts, object_store_secret=object_store_secret,
            image_pull_secret=image_pull_secret, timeout_seconds=timeout_seconds,
            poll_interval_seconds=poll_interval_seconds,
        ),
    )
    write_outputs(metrics, reference, training_metrics, training_job)
