"""KFP component: distributed training of the delay classifier, PyTorch or TensorFlow."""

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Input, Metrics, Model, Output

from kfstack.images import COMPONENT_IMAGE


@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def train_model(
    platform: str,
    features: Input[Dataset],
    framework: str,
    workers: int,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    max_restarts: int,
    seed: int,
    tf_topology: str,
    tf_parameter_servers: int,
    elastic_min_workers: int,
    elastic_max_workers: int,
    gpu_pool: str,
    object_store_secret: str,
    image_pull_secret: str,
    training_timeout_seconds: int,
    training_api: str,
    trainer_runtime: str,
    run_id: str,
    task_name: str,
    model: Output[Model],
    training_metrics: Output[Metrics],
    training_logs: Output[Artifact],
    training_job: Output[Artifact],
):
    """Trains the delay classifier over ``workers`` replicas and exports it to ONNX.

    Args:
        platform: ``local`` starts the replicas as processes with the env their pods would get;
            ``kubernetes`` creates a TrainJob, PyTorchJob or TFJob on the ``gpu_pool`` node pool
            and waits.
        features: Output of the feature job (shards, ``feature_spec.json``).
        framework: ``pytorch`` (DDP; TrainJob or PyTorchJob) or ``tensorflow`` (TFJob).
        workers: Training replicas (>= 1): PyTorch one Master and ``workers - 1`` Workers; TF
            Workers (the ``parameter_server`` topology adds a Chief and the PS replicas).
        epochs: Passes over the training split (>= 1); a checkpoint is written after each.
        batch_size: Global batch size (>= workers): split evenly over the replicas of
            synchronous training; with TF ``parameter_server`` each step's batch on one worker.
        learning_rate: Adam step size (> 0).
        max_restarts: Restarts from the latest checkpoint after a replica fails (>= 0; the
            job's backoffLimit on Kubernetes).
        seed: Seeds initialisation and data order.
        tf_topology: TensorFlow: ``mwms`` (MultiWorkerMirroredStrategy, synchronous) or
            ``parameter_server`` (chief + workers + parameter servers, asynchronous).
        tf_parameter_servers: TensorFlow ``parameter_server``: PS replicas (>= 1).
        elastic_min_workers: PyTorch on Kubernetes: with ``elastic_max_workers``, an elastic
            PyTorchJob between these replica counts (torchrun, c10d); 0 = fixed size.
        elastic_max_workers: PyTorch on Kubernetes: upper replica count; 0 = fixed size.
        gpu_pool: Kubernetes: node-pool profile of the replicas (``node_pools.yaml``).
        object_store_secret: Kubernetes: Secret with the object-store keys the replicas get as
            env; empty: none (workload identity).
        image_pull_secret: Kubernetes: image pull Secret of the replicas; empty: none.
        training_timeout_seconds: Kubernetes: the job's activeDeadlineSeconds and the longest
            wait for it (seconds).
        training_api: ``auto`` (what the cluster serves; Trainer v2 first), ``v1``
            (PyTorchJob/TFJob) or ``trainer-v2`` (TrainJob; PyTorch, not elastic). Locally the
            replicas replay the chosen API's env contract (``auto``: Trainer v2 for PyTorch).
        trainer_runtime: The TrainJob's ClusterTrainingRuntime (a torchrun runtime).
        run_id: The pipeline run (``dsl.PIPELINE_JOB_ID_PLACEHOLDER``); names the job so that a
            retried task adopts it.
        task_name: This task's name (``dsl.PIPELINE_TASK_NAME_PLACEHOLDER``).
        model: ``model.onnx``, ``feature_spec.json``, ``training_metrics.json``.
        training_metrics: Validation AUC / log loss / accuracy, training seconds per epoch,
            samples/s overall and per replica, world size, and where the node pool has a price
            (``node_pools.yaml``; locally the ``cpu`` pool's, for the whole machine) the job's
            price per hour and cost per epoch; locally also restarts.
        training_logs: Checkpoints (``checkpoints/``) and, locally, one log file per replica and
            attempt.
        training_job: What ran the training: the job's reference, or the local process group.
    """
    from kfstack.components.training.train_model.stage import STAGE
    from kfstack.platforms import run_stage

    run_stage(STAGE, locals())
