"""Cross-stage checks of a training run's parameters, made by the pipeline's first task.

Each stage also validates its own inputs (its functions are reusable on their own); this
module checks what only the whole run can see -- e.g. that every training rank gets a shard --
so that a bad combination fails in seconds, before Spark or any trainer starts.
"""

from __future__ import annotations

from kfstack import platforms
from kfstack.errors import InvalidParameterError


def validate_training_run(
    *,
    platform: str,
    workers: int,
    num_shards: int,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    max_restarts: int,
    max_quarantine_fraction: float,
    sample_fraction: float,
) -> None:
    """Raises on the first problem with a training run's parameters; returns None if fine.

    Raises:
        InvalidParameterError: A value is out of range or inconsistent with another.
        PlatformNotAvailableError: ``platform`` has no launchers yet.
    """
    problems = []
    if workers < 1:
        problems.append(f"workers={workers} must be >= 1")
    if num_shards < 1:
        problems.append(f"num_shards={num_shards} must be >= 1")
    elif workers >= 1 and num_shards < workers:
        problems.append(
            f"num_shards={num_shards} < workers={workers}: every rank must read at least one "
            f"shard; use num_shards >= workers (a multiple of workers balances best)"
        )
    if epochs < 1:
        problems.append(f"epochs={epochs} must be >= 1")
    if batch_size < 1:
        problems.append(f"batch_size={batch_size} must be >= 1")
    if not learning_rate > 0:
        problems.append(f"learning_rate={learning_rate} must be > 0")
    if max_restarts < 0:
        problems.append(f"max_restarts={max_restarts} must be >= 0")
    if not 0.0 <= max_quarantine_fraction <= 1.0:
        problems.append(f"max_quarantine_fraction={max_quarantine_fraction} must be in [0, 1]")
    if not 0.0 < sample_fraction <= 1.0:
        problems.append(f"sample_fraction={sample_fraction} must be in (0, 1]")
    if problems:
        raise InvalidParameterError("invalid run parameters: " + "; ".join(problems))
    platforms.require_available(platform, stage="flights-training")
