"""What the PyTorch and TensorFlow training launchers share: parameter checks, the trainer's
command line, the metrics file, the launch flow."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import fsspec

from kfstack import platforms
from kfstack.errors import InvalidParameterError
from kfstack.training import shards
from kfstack.training.process_group import GroupResult
from kfstack.uris import fsspec_uri, join

METRICS_FILE = "training_metrics.json"
CHECKPOINT_DIR = "checkpoints"
LOOPBACK = "127.0.0.1"
# The flat metrics a training step logs (training_metrics.json holds more, e.g. the history).
REPORTED_METRICS = ("val_auc", "val_log_loss", "val_accuracy", "samples_per_second", "world_size")


def validate_hyperparameters(*, epochs: int, workers: int, batch_size: int, learning_rate: float,
                             max_restarts: int) -> None:
    """Raises :class:`InvalidParameterError` (all problems at once) before anything starts."""
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


def validate_parameters(*, features_uri: str, epochs: int, workers: int, batch_size: int,
                        learning_rate: float, max_restarts: int) -> None:
    """:func:`validate_hyperparameters`, then that every rank gets a shard of each split."""
    validate_hyperparameters(epochs=epochs, workers=workers, batch_size=batch_size,
                             learning_rate=learning_rate, max_restarts=max_restarts)
    for split in ("train", "validation"):
        # Raises when a rank would get no shard.
        shards.shards_for_rank(shards.list_shards(f"{features_uri.rstrip('/')}/{split}"), 0, workers)


def trainer_arguments(*, features_uri: str, model_uri: str, checkpoint_uri: str, epochs: int,
                      batch_size: int, learning_rate: float, seed: int) -> list[str]:
    """Both trainers' argv, the same for local processes and cluster pods."""
    return [
        "--features-uri", features_uri, "--model-uri", model_uri, "--checkpoint-uri", checkpoint_uri,
        "--epochs", str(epochs), "--batch-size", str(batch_size),
        "--learning-rate", str(learning_rate), "--seed", str(seed),
    ]


def read_metrics(model_uri: str) -> dict[str, float]:
    """The flat metrics of the ``training_metrics.json`` a trainer wrote beside its model."""
    with fsspec.open(join(model_uri, METRICS_FILE)) as f:
        trained = json.load(f)
    return {name: trained[name] for name in REPORTED_METRICS}


def write_outputs(metrics: dict[str, float], reference: dict, training_metrics, training_job) -> None:
    """Logs the metrics on the Metrics artifact and records what ran the training."""
    for name, value in metrics.items():
        training_metrics.log_metric(name, value)
    platforms.write_reference(training_job, reference)


def launch_training(*, platform: str, stage: str, kind_name: str, features_uri: str, model_uri: str,
                    logs_uri: str, epochs: int, workers: int, batch_size: int, learning_rate: float,
                    max_restarts: int, seed: int, build_job: Callable[..., dict],
                    run_locally: Callable[[list[str]], tuple[GroupResult, dict]],
                    kubernetes: dict | None) -> tuple[dict[str, float], dict]:
    """The flow both training launchers share.

    Checks the parameters (every rank gets a shard) before anything starts; then either builds
    the job (``build_job(**trainer args, workers=, max_restarts=, secrets=,
    active_deadline_seconds=, **kubernetes options)``) and runs it on the cluster through
    :func:`kfstack.kubernetes.launcher.launch`, or runs the replicas locally
    (``run_locally(trainer argv)`` -> group result and reference details). The metrics come from
    the ``training_metrics.json`` the trainer's chief wrote beside the model.

    Args:
        kind_name: ``PyTorchJob`` or ``TFJob`` (:data:`kfstack.kubernetes.resources.KINDS`).
    """
    platforms.require_available(platform, stage=stage)
    validate_parameters(features_uri=fsspec_uri(features_uri), epochs=epochs, workers=workers,
                        batch_size=batch_size, learning_rate=learning_rate, max_restarts=max_restarts)
    args = dict(features_uri=features_uri, model_uri=model_uri,
                checkpoint_uri=join(logs_uri, CHECKPOINT_DIR), epochs=epochs,
                batch_size=batch_size, learning_rate=learning_rate, seed=seed)
    extra: dict[str, float] = {}
    if platform == platforms.KUBERNETES:
        from kfstack.kubernetes.launcher import launch
        from kfstack.kubernetes.resources import KINDS

        # The pods open the artifacts' remote URIs themselves.
        args.update({k: fsspec_uri(v) for k, v in args.items() if k.endswith("_uri")})
        options = platforms.kubernetes_options(platform, kubernetes, stage=stage)
        settings = options.pop("settings")
        body = build_job(workers=workers, max_restarts=max_restarts, secrets=settings.secrets,
                         active_deadline_seconds=int(settings.timeout_seconds), **options, **args)
        _, reference = launch(KINDS[kind_name], body, settings)
        reference = {"platform": platforms.KUBERNETES, **reference}
    else:
        os.makedirs(logs_uri, exist_ok=True)
        result, details = run_locally(trainer_arguments(**args))
        extra["restarts"] = float(result.restarts)
        reference = {"platform": platforms.LOCAL, "kind": "LocalProcessGroup", **details,
                     "attempts": result.attempts}
    return {**read_metrics(args["model_uri"]), **extra}, reference
