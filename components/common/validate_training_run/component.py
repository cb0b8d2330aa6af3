"""KFP component: check a training run's parameters before any stage starts."""

from kfp import dsl

from kfstack.images import COMPONENT_IMAGE


@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def validate_training_run(
    platform: str,
    workers: int,
    num_shards: int,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    max_restarts: int,
    max_quarantine_fraction: float,
    sample_fraction: float,
):
    """Fails the run in seconds when its parameters are out of range or inconsistent.

    Args:
        platform: ``local`` (embedded) or ``kubernetes``.
        workers: Training processes (PyTorchJob replicas), >= 1.
        num_shards: Parquet shards per split, >= workers.
        epochs: Passes over the training split, >= 1.
        batch_size: Global batch size (summed over workers), >= 1.
        learning_rate: Optimiser step size, > 0.
        max_restarts: Whole-group restarts after a rank fails, >= 0.
        max_quarantine_fraction: Largest tolerated share of quarantined rows, in [0, 1].
        sample_fraction: Share of flights used, in (0, 1].
    """
    from kfstack.run_parameters import validate_training_run as validate

    validate(
        platform=platform,
        workers=workers,
        num_shards=num_shards,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        max_restarts=max_restarts,
        max_quarantine_fraction=max_quarantine_fraction,
        sample_fraction=sample_fraction,
    )
