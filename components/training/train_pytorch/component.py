"""KFP component: distributed PyTorch training (a PyTorchJob on Kubernetes, local processes here)."""

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Input, Metrics, Model, Output

from kfstack.images import COMPONENT_IMAGE


@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def train_pytorch(
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
    run_id: str = "",
    task_name: str = "train-pytorch",
    gpu_pool: str = "h100",
    elastic_min_workers: int = 0,
    elastic_max_workers: int = 0,
    object_store_secret: str = "",
    image_pull_secret: str = "",
    timeout_seconds: int = 21600,
    poll_interval_seconds: int = 15,
):
    """Trains the delay classifier with DDP over ``workers`` ranks and exports it to ONNX.

    Args:
        platform: ``local`` starts ``workers`` processes with the env a PyTorchJob's pods get;
            ``kubernetes`` creates that PyTorchJob on the ``gpu_pool`` node pool and waits.
        features: Output of the feature job (shards, ``feature_spec.json``).
        epochs: Passes over the training split (>= 1); a checkpoint is written after each.
        workers: Ranks: one Master and ``workers - 1`` Workers (>= 1).
        batch_size: Global batch size, split evenly over ranks (>= workers).
        learning_rate: Adam step size (> 0).
        max_restarts: Restarts from the latest checkpoint after a rank fails (restartPolicy
            OnFailure; the PyTorchJob's backoffLimit), >= 0.
        model: ``model.onnx``, ``feature_spec.json``, ``training_metrics.json``.
        training_metrics: Validation AUC / log loss / accuracy, samples/s (restarts, locally).
        training_logs: Checkpoints (``checkpoints/``) and, locally, one log file per rank and
            attempt.
        training_job: What ran the training; on Kubernetes the PyTorchJob's reference.
        seed: Seed of initialisation and shuffling.
        run_id: The pipeline run (``dsl.PIPELINE_JOB_ID_PLACEHOLDER``); names the PyTorchJob so
            that a retried task adopts it.
        task_name: This task's name (``dsl.PIPELINE_TASK_NAME_PLACEHOLDER``).
        gpu_pool: Node-pool profile of the replicas (``kfstack/kubernetes/node_pools.yaml``:
            ``cpu``, ``h100``, ``a100-mig``, ``h100-spot``).
        elastic_min_workers: With ``elastic_max_workers``: run elastic (torchrun, c10d) between
            these replica counts; 0 = fixed size.
        elastic_max_workers: Upper replica count of an elastic job; 0 = fixed size.
        object_store_secret: Name of the Secret with the object-store keys the replicas get as
            env; empty: none (workload identity).
        image_pull_secret: Name of the image pull Secret; empty: none.
        timeout_seconds: Longest run of the job (its activeDeadlineSeconds and this task's wait).
        poll_interval_seconds: Seconds between status reads.
    """
    from kfstack.components.training.train_pytorch.launcher import run_component

    run_component(
        platform=platform, features=features, epochs=epochs, workers=workers,
        batch_size=batch_size, learning_rate=learning_rate, max_restarts=max_restarts,
        model=model, training_metrics=training_metrics, training_logs=training_logs,
        training_job=training_job, seed=seed, run_id=run_id, task_name=task_name,
        gpu_pool=gpu_pool, elastic_min_workers=elastic_min_workers,
        elastic_max_workers=elastic_max_workers, object_store_secret=object_store_secret,
        image_pull_secret=image_pull_secret, timeout_seconds=timeout_seconds,
        poll_interval_seconds=poll_interval_seconds,
    )
