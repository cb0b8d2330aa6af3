"""The flights trainers' contract: their declaration, hyperparameters, metric names and files.

The flights example's training code (:mod:`kfstack_examples.flights.training.train`) as the generic
training and tuning steps see any team's code: :data:`TRAINER_CODE` declares the hyperparameters
it takes as ``--name=value`` and the metrics its Katib lines print; :class:`TrainingSettings` are
those hyperparameters on the job's topology, validated once, where they are built -- from
pipeline arguments (the flights pipelines' run check), from the trainer's own argv
(:func:`parse_trainer_args`, the pod's edge) or from a Katib trial template (fields holding a
:class:`~kfstack.settings.Placeholder`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os

from kfstack.api import CHECKPOINT_URI_ENV, INPUT_URI_ENV, MODEL_DIR_ENV, InvalidParameterError, setting
from kfstack.api.training import THROUGHPUT_METRICS, JobTopology, TrainingCode, katib_line

# What a trainer writes beside the model.
MODEL_FILE = "model.onnx"
METRICS_FILE = "training_metrics.json"

# The metric vocabulary: validation metrics as the trainers print them on their Katib metric
# lines (``epoch=3 val_auc=0.7120 val_log_loss=0.5100 val_accuracy=0.7800``) and as the
# training step reports them.
VAL_AUC = "val_auc"
VAL_LOG_LOSS = "val_log_loss"
VAL_ACCURACY = "val_accuracy"
VALIDATION_METRICS = (VAL_AUC, VAL_LOG_LOSS, VAL_ACCURACY)
# The flights trainers' code as the generic steps run it.
TRAINER_CODE = TrainingCode(
    entry="kfstack_examples.flights.training.train",
    hyperparameters={
        "framework": "str",
        "epochs": "int",
        "batch_size": "int",
        "learning_rate": "float",
        "seed": "int",
    },
    metrics=VALIDATION_METRICS,
    # The values each metric can take: a tuning goal outside them is never reached.
    metric_ranges={VAL_AUC: (0.0, 1.0), VAL_LOG_LOSS: (0.0, float("inf")), VAL_ACCURACY: (0.0, 1.0)},
)
# The flights pipelines' tuning objective (the search: flights.pipelines.parameters).
OBJECTIVE = VAL_AUC


def metric_line(epoch: int, scores: dict[str, float]) -> str:
    """The trainers' Katib line of an epoch: the validation metrics, then the epoch's
    throughput (``epoch=3 val_auc=0.7120 ... seconds_per_epoch=1.2000 samples_per_second=...``)."""
    return katib_line(epoch, {name: scores[name] for name in (*VALIDATION_METRICS, *THROUGHPUT_METRICS)})


@dataclasses.dataclass(frozen=True)
class TrainingSettings(JobTopology):
    """What a flights training run is, whichever framework and platform runs it: its job's
    topology (:class:`~kfstack.training.settings.JobTopology`) and the flights trainers'
    hyperparameters (as :data:`TRAINER_CODE` declares them to the generic training step).

    Attributes:
        epochs: Passes over the training split (>= 1); a checkpoint after each.
        batch_size: Global batch size, split evenly over the workers (>= workers).
        learning_rate: Adam step size (> 0).
        seed: Seeds initialisation and data order.
    """

    concern = "training settings"

    epochs: int = setting(4, ge=1)
    batch_size: int = setting(1024, ge=1)
    learning_rate: float = setting(0.003, gt=0)
    seed: int = 42

    def check(self) -> list[str]:
        problems = []
        if self.concrete("batch_size", "workers") and self.batch_size < self.workers:
            problems.append(
                f"batch_size={self.batch_size} must be >= workers={self.workers} "
                f"(it is the global batch, split over the workers)"
            )
        return problems + super().check()


def parse_trainer_args(argv: list[str] | None, prog: str) -> argparse.Namespace:
    """Parses the flights trainers' command line in a trainer process.

    The values are validated by :class:`TrainingSettings` itself, so the pod's edge applies the
    same rules as the training step. The namespace carries ``features_uri``, ``model_uri``,
    ``checkpoint_uri``, ``epochs``, ``batch_size``, ``learning_rate`` and ``seed``.

    The trainers are also a team's training code (:mod:`kfstack.contracts`), which the generic
    distributed training step runs: the locations then come from the contract's environment
    (``KFSTACK_INPUT_URI``, ``KFSTACK_MODEL_DIR``, ``KFSTACK_CHECKPOINT_URI``) and the
    hyperparameters as ``--name=value`` under their declared names (``--batch_size``,
    ``--learning_rate``, ``--epochs``, ``--seed``), which these options take too.

    Raises:
        InvalidParameterError: A location is missing, or a value is out of range.
    """
    defaults = TrainingSettings()
    parser = argparse.ArgumentParser(prog=prog)
    locations = {
        "--features-uri": INPUT_URI_ENV,
        "--model-uri": MODEL_DIR_ENV,
        "--checkpoint-uri": CHECKPOINT_URI_ENV,
    }
    for flag, env in locations.items():
        parser.add_argument(flag, default=os.environ.get(env, ""), help=f"default: ${env}")
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument(
        "--batch-size", "--batch_size", type=int, default=defaults.batch_size, help="global batch size"
    )
    parser.add_argument("--learning-rate", "--learning_rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    args = parser.parse_args(argv)
    missing = [
        f"{flag} (or ${env})"
        for flag, env in locations.items()
        if not getattr(args, flag[2:].replace("-", "_"))
    ]
    if missing:
        raise InvalidParameterError(f"{prog}: no {', '.join(missing)}")
    TrainingSettings(
        epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        seed=args.seed,
        workers=1,
    )
    return args
