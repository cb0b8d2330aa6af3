"""Runs PyTorch training on the requested platform; returns its metrics for the KFP UI.

``local``: ``workers`` processes of :mod:`.trainer`, started with exactly the env the
training-operator gives a PyTorchJob with one Master and ``workers - 1`` Workers (loopback
address, a free port per attempt), under :func:`kfstack.training.process_group.run_process_group`
(restartPolicy OnFailure: the whole group restarts from the latest checkpoint).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

import fsspec

from kfstack import platforms
from kfstack.errors import InvalidParameterError
from kfstack.training import shards
from kfstack.training.env_contract import MASTER, WORKER, pytorchjob_env
from kfstack.training.process_group import ReplicaProcess, free_port, run_process_group

TRAINER_MODULE = "kfstack.components.training.train_pytorch.trainer"
METRICS_FILE = "training_metrics.json"
CHECKPOINT_DIR = "checkpoints"
LOOPBACK = "127.0.0.1"


def validate_parameters(*, features_uri: str, epochs: int, workers: int, batch_size: int,
                        learning_rate: float, max_restarts: int) -> None:
    """Raises :class:`InvalidParameterError` before any process starts."""
    problems = []
    if epochs < 1:
        problems.append(f"epochs={epochs} must be >= 1")
    if workers < 1:
        problems.append(f"workers={workers} must be >= 1")
    if batch_size < max(workers, 1):
        problems.append(f"batch_size={batch_size} must be >= workers={workers} (global batch)")
    if not learning_rate > 0:
        problems.append(f"learning_rate={learning_rate} must be > 0")
    if max_restarts < 0:
        problems.append(f"max_restarts={max_restarts} must be >= 0")
    if problems:
        raise InvalidParameterError("; ".join(problems))
    for split in ("train", "validation"):
        # Raises when a rank would get no shard.
        shards.shards_for_rank(shards.list_shards(f"{features_uri.rstrip('/')}/{split}"), 0, workers)


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
) -> dict[str, float]:
    """Trains and returns flat metrics: ``val_auc``, ``val_log_loss``, ``val_accuracy``,
    ``samples_per_second``, ``restarts``, ``world_size``.

    Args:
        platform: Only ``local`` has a launcher in this release.
        features_uri: Output of the feature job.
        model_uri: Receives ``model.onnx``, ``feature_spec.json``, ``training_metrics.json``.
        logs_uri: Local directory for per-replica logs and the checkpoints.
        epochs, workers, batch_size, learning_rate, max_restarts, seed: see the component.
        threads_per_worker: Intra-op threads per replica; default: the cores split evenly.
        on_group_started: Test hook, see ``run_process_group``.

    Raises:
        PlatformNotAvailableError, InvalidParameterError: before anything starts.
        TrainingFailedError: the group failed more than ``max_restarts`` times.
    """
    platforms.require_available(platform, stage="train-pytorch")
    validate_parameters(features_uri=features_uri, epochs=epochs, workers=workers,
                        batch_size=batch_size, learning_rate=learning_rate, max_restarts=max_restarts)
    os.makedirs(logs_uri, exist_ok=True)
    trainer_args = [
        "--features-uri", features_uri, "--model-uri", model_uri,
        "--checkpoint-uri", os.path.join(logs_uri, CHECKPOINT_DIR),
        "--epochs", str(epochs), "--batch-size", str(batch_size),
        "--learning-rate", str(learning_rate), "--seed", str(seed),
    ]
    result = run_process_group(
        local_replicas(workers, trainer_args), logs_dir=logs_uri, max_restarts=max_restarts,
        on_group_started=on_group_started, threads_per_process=threads_per_worker,
    )
    with fsspec.open(f"{model_uri.rstrip('/')}/{METRICS_FILE}") as f:
        trained = json.load(f)
    return {
        "val_auc": trained["val_auc"],
        "val_log_loss": trained["val_log_loss"],
        "val_accuracy": trained["val_accuracy"],
        "samples_per_second": trained["samples_per_second"],
        "world_size": trained["world_size"],
        "restarts": float(result.restarts),
    }
