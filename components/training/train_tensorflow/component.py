"""KFP component: distributed TensorFlow training (a TFJob on Kubernetes, local processes here)."""

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Input, Metrics, Model, Output

from kfstack.images import COMPONENT_IMAGE


@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def train_tensorflow(
    platform: str,
    features: Input[Dataset],
    epochs: int,
    workers: int,
    batch_size: int,
    learning_rate: float,
    max_restarts: int,
    model: Output[Model],
    training_metrics: Output[Metrics],
    training_logs: Output[Artifact],
    training_job: Output[Artifact],
    seed: int = 42,
    topology: str = "mwms",
    parameter_servers: int = 1,
    run_id: str = "",
    task_name: str = "train-tensorflow",
    gpu_pool: str = "h100",
    object_store_secret: str = "",
    image_pull_secret: str = "",
    timeout_seconds: int = 21600,
    poll_interval_seconds: int = 15,
):
    """Trains the delay classifier with TensorFlow and exports it to ONNX.

    Args:
        platform: ``local`` starts the TFJob's replicas as processes with the ``TF_CONFIG``
            the operator would set; ``kubernetes`` creates the TFJob on ``gpu_pool``.
        features: Output of the feature job (shards, ``feature_spec.json``).
        epochs: Passes over the training split (>= 1); a checkpoint is written after each.
        workers: Worker replicas (>= 1).
        batch_size: ``mwms``: global batch, split over the workers; ``parameter_server``:
            rows per scheduled step.
        learning_rate: Adam step size (> 0).
        max_restarts: Restarts from the latest checkpoint after a replica fails, >= 0.
        model: ``model.onnx``, ``feature_spec.json``, ``training_metrics.json``.
        training_metrics: Validation AUC / log loss / accuracy, samples/s (restarts, locally).
        training_logs: Checkpoints and, locally, one log per replica and attempt.
        training_job: What ran the training; on Kubernetes the TFJob's reference.
        seed: Seed of initialisation and shuffling.
        topology: ``mwms`` (MultiWorkerMirroredStrategy, synchronous) or ``parameter_server``
            (chief + workers + parameter servers, asynchronous).
        parameter_servers: PS replicas of the ``parameter_server`` topology (>= 1).
        run_id: The pipeline run (``dsl.PIPELINE_JOB_ID_PLACEHOLDER``); names the TFJob.
        task_name: This task's name (``dsl.PIPELINE_TASK_NAME_PLACEHOLDER``).
        gpu_pool: Node-pool profile of the replicas (``kfstack/kubernetes/node_pools.yaml``).
        object_store_secret: Name of the Secret with the object-store keys; empty: none.
        image_pull_secret: Name of the image pull Secret; empty: none.
        timeout_seconds: Longest run of the job (its activeDeadlineSeconds and this task's wait).
        poll_interval_seconds: Seconds between status reads.
    """
    from kfstack.components.training.train_tensorflow.launcher import run_component

    run_component(
        platform=platform, features=features, epochs=epochs, workers=workers,
        batch_size=batch_size, learning_rate=learning_rate, max_restarts=max_restarts,
        model=model, training_metrics=training_metrics, training_logs=training_logs,
        training_job=training_job, seed=seed, topology=topology, parameter_servers=parameter_servers,
        run_id=run_id, task_name=task_name, gpu_pool=gpu_pool,
        object_store_secret=object_store_secret, image_pull_secret=image_pull_secret,
        timeout_seconds=timeout_seconds, poll_interval_seconds=poll_interval_seconds,
    )
