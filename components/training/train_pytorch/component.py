"""KFP component: distributed PyTorch training (PyTorchJob on Kubernetes, local processes here)."""

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
):
    """Trains the delay classifier with DDP over ``workers`` ranks and exports it to ONNX.

    Args:
        platform: ``local`` starts ``workers`` processes with the env a PyTorchJob's pods get.
        features: Output of the feature job (shards, ``feature_spec.json``).
        epochs: Passes over the training split (>= 1); a checkpoint is written after each.
        workers: Ranks: one Master and ``workers - 1`` Workers (>= 1).
        batch_size: Global batch size, split evenly over ranks (>= 1).
        learning_rate: Adam step size (> 0).
        max_restarts: Whole-group restarts from the latest checkpoint after a rank fails
            (restartPolicy OnFailure), >= 0.
        model: ``model.onnx``, ``feature_spec.json``, ``training_metrics.json``.
        training_metrics: Validation AUC / log loss / accuracy, samples/s, restarts.
        training_logs: One log file per rank and attempt.
    """
    from kfstack.components.training.train_pytorch.launcher import launch_pytorch_training

    metrics = launch_pytorch_training(
        platform=platform,
        features_uri=features.path,
        model_uri=model.path,
        logs_uri=training_logs.path,
        epochs=epochs,
        workers=workers,
        batch_size=batch_size,
        learning_rate=learning_rate,
        max_restarts=max_restarts,
    )
    for name, value in metrics.items():
        training_metrics.log_metric(name, value)
