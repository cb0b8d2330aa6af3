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
    framework: str = "pytorch",
    tf_topology: str = "mwms",
    tf_parameter_servers: int = 1,
    gpu_pool: str = "h100",
    elastic_min_workers: int = 0,
    elastic_max_workers: int = 0,
    spark_executors: int = 2,
    spark_executor_cores: int = 2,
    spark_executor_memory: str = "4g",
    spark_driver_memory: str = "2g",
    run_id: str = "",
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
        framework: ``pytorch`` or ``tensorflow``.
        tf_topology: ``mwms`` or ``parameter_server`` (TensorFlow).
        tf_parameter_servers: PS replicas of the ``parameter_server`` topology.
        gpu_pool, elastic_min_workers, elastic_max_workers, spark_executors,
            spark_executor_cores, spark_executor_memory, spark_driver_memory: Kubernetes
            settings; on ``kubernetes`` the run's SparkApplication and PyTorchJob are rendered
            with them, so a bad value fails here, and the cluster must be reachable.
        run_id: The pipeline run (names of the rendered objects).
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
        framework=framework,
        tf_topology=tf_topology,
        tf_parameter_servers=tf_parameter_servers,
        kubernetes=dict(
            gpu_pool=gpu_pool, elastic_min_workers=elastic_min_workers,
            elastic_max_workers=elastic_max_workers, spark_executors=spark_executors,
            spark_executor_cores=spark_executor_cores, spark_executor_memory=spark_executor_memory,
            spark_driver_memory=spark_driver_memory,
        ),
        run_id=run_id or "validation",
    )
