"""Throughput, scaling efficiency and cost of a training run: computed here, and only here.

The trainers time their training steps (validation, checkpoints, start-up and export are
excluded) and count the samples those steps consumed over all replicas; :func:`throughput`
turns them into the reported figures, for one epoch (the Katib metric line) or the whole run
(``training_metrics.json``). The training step prices the run with :func:`cost_metrics` at what
its pods cost per hour (:meth:`kfstack.kubernetes.node_pools.NodePoolProfile.price_per_hour`).
Since only the training seconds are priced, the cost per epoch is a lower bound of what a run
costs: its pods also wait to be scheduled, start, validate and export.
"""

from __future__ import annotations

from kfstack.training.settings import (
    COST_PER_EPOCH,
    JOB_COST,
    PRICE_PER_HOUR,
    SAMPLES_PER_SECOND,
    SAMPLES_PER_SECOND_PER_REPLICA,
    SECONDS_PER_EPOCH,
)

SECONDS_PER_HOUR = 3600.0


def throughput(seconds: float, samples: float, epochs: int, replicas: int) -> dict[str, float]:
    """Seconds per epoch, samples/s overall and samples/s per replica of ``epochs`` epochs.

    Args:
        seconds: Training seconds of those epochs, by the trainer's clock.
        samples: Training samples those epochs consumed, all replicas together.
        epochs: How many epochs ``seconds`` covers (0: nothing was measured, all figures 0).
        replicas: The training replicas (world size) that shared the samples (>= 1).
    """
    samples_per_second = samples / seconds if seconds else 0.0
    return {
        SECONDS_PER_EPOCH: seconds / epochs if epochs else 0.0,
        SAMPLES_PER_SECOND: samples_per_second,
        SAMPLES_PER_SECOND_PER_REPLICA: samples_per_second / replicas,
    }


def cost_metrics(seconds_per_epoch: float, price_per_hour: float | None) -> dict[str, float]:
    """The job's price per hour and the cost of an epoch's training seconds at it.

    Args:
        seconds_per_epoch: Training seconds per epoch (:func:`throughput`).
        price_per_hour: What all the job's pods cost per hour; None: unknown.

    Returns:
        ``price_per_hour`` and ``cost_per_epoch``, in the price's currency; empty without a
        price: an unknown cost is left out of the report, never reported as 0.
    """
    if price_per_hour is None:
        return {}
    return {
        PRICE_PER_HOUR: price_per_hour,
        COST_PER_EPOCH: seconds_per_epoch * price_per_hour / SECONDS_PER_HOUR,
    }


def job_cost(seconds: float, price_per_hour: float | None) -> dict[str, float]:
    """What a whole job cost: its pods' price per hour and ``seconds`` of them at it (for code
    that reports no epochs of its own); empty without a price, like :func:`cost_metrics`."""
    if price_per_hour is None:
        return {}
    return {PRICE_PER_HOUR: price_per_hour, JOB_COST: seconds * price_per_hour / SECONDS_PER_HOUR}


def scaling_efficiency(
    samples_per_second: float, replicas: int, one_replica_samples_per_second: float
) -> float:
    """Samples/s with ``replicas`` replicas ÷ (``replicas`` × one replica's): 1.0 is linear
    scaling, below it the replicas lose time to communication or to sharing hardware."""
    return samples_per_second / (replicas * one_replica_samples_per_second)
