"""What the PyTorch and TensorFlow training launchers share: parameter checks, the trainer's
command line, the metrics file, the Kubernetes launch settings."""

from __future__ import annotations

import json

import fsspec

from kfstack import platforms
from kfstack.errors import InvalidParameterError
from kfstack.training import shards
from kfstack.uris import join

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


def launch_settings(*, object_store_secret: str, image_pull_secret: str, timeout_seconds: float,
                    poll_interval_seconds: float):
    """:class:`~kfstack.kubernetes.launcher.LaunchSettings` from a component's parameters."""
    from kfstack.kubernetes.launcher import LaunchSettings
    from kfstack.kubernetes.pods import SecretRefs

    return LaunchSettings(
        secrets=SecretRefs(object_store=object_store_secret, image_pull=image_pull_secret),
        timeout_seconds=timeout_seconds, poll_interval_seconds=poll_interval_seconds,
    )


def write_outputs(metrics: dict[str, float], reference: dict, training_metrics, training_job) -> None:
    """Logs the metrics on the Metrics artifact and records what ran the training."""
    for name, value in metrics.items():
        training_metrics.log_metric(name, value)
    platforms.write_reference(training_job, reference)
