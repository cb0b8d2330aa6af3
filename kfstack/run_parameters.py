"""Cross-stage checks of a training run's parameters, made by the pipeline's first task.

Each stage also validates its own inputs (its functions are reusable on their own); this
module checks what only the whole run can see -- e.g. that every training rank gets a shard --
so that a bad combination fails in seconds, before Spark or any trainer starts.
"""

from __future__ import annotations

from kfstack import platforms
from kfstack.errors import InvalidParameterError


FRAMEWORKS = ("pytorch", "tensorflow")
TF_TOPOLOGIES = ("mwms", "parameter_server")

# Parameters the first task does not receive, for rendering only: they name things (data,
# Secrets, the driver's account) or bound the wait, and the launchers check them again.
RENDER_STAND_INS = {
    "data_uri": "", "seed": 0, "object_store_secret": "", "image_pull_secret": "",
    "spark_service_account": "kfstack-spark", "training_timeout_seconds": 3600,
    "gpu_pool": "cpu", "elastic_min_workers": 0, "elastic_max_workers": 0, "spark_executors": 1,
    "spark_executor_cores": 1, "spark_executor_memory": "1g", "spark_driver_memory": "1g",
}


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
    framework: str = "pytorch",
    tf_topology: str = "mwms",
    tf_parameter_servers: int = 1,
    kubernetes: dict | None = None,
    run_id: str = "validation",
) -> None:
    """Raises on the first problem with a training run's parameters; returns None if fine.

    Args:
        platform, workers, ...: The run's parameters checked here.
        kubernetes: On ``kubernetes``, the pipeline parameters that shape the cluster objects
            (``gpu_pool``, ``spark_executor_memory``...): the objects are rendered with them
            (:mod:`kfstack.kubernetes.render`) so that a bad value fails now, not after Spark.
        run_id: The pipeline run, for the rendered names.

    Raises:
        InvalidParameterError: A value is out of range or inconsistent with another.
        PlatformNotAvailableError: ``platform=kubernetes`` but no Kubernetes API is reachable.
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
    platforms.require_available(platform, stage="flights-training")
    if framework not in FRAMEWORKS:
        problems.append(f"framework={framework!r} is not one of {', '.join(FRAMEWORKS)}")
    elif framework == "tensorflow":
        if tf_topology not in TF_TOPOLOGIES:
            problems.append(f"tf_topology={tf_topology!r} is not one of {', '.join(TF_TOPOLOGIES)}")
        elif tf_topology == "parameter_server" and tf_parameter_servers < 1:
            problems.append(f"tf_parameter_servers={tf_parameter_servers} must be >= 1")
    if problems:
        raise InvalidParameterError("invalid run parameters: " + "; ".join(problems))
    if platform == platforms.KUBERNETES:
        from kfstack.kubernetes.render import render_objects

        params = dict(workers=workers, num_shards=num_shards, epochs=epochs, batch_size=batch_size,
                      learning_rate=learning_rate, max_restarts=max_restarts,
                      max_quarantine_fraction=max_quarantine_fraction, sample_fraction=sample_fraction,
                      framework=framework, tf_topology=tf_topology,
                      tf_parameter_servers=tf_parameter_servers, **(kubernetes or {}))
        render_objects("flights-training", params, run_id=run_id, pipeline_root="s3://validation",
                       defaults=RENDER_STAND_INS)
        platforms.require_cluster(stage="flights-training")
