"""Training settings: the job topology of any training code, and the flights trainers' contract.

:class:`JobTopology` is what the generic training step runs any code as (framework, replicas,
restarts, TensorFlow topology, elastic bounds). The rest is the flights example's training code
(:mod:`kfstack.flights.training`): its declaration (:data:`TRAINER_CODE`), which tuning settings
default to, its hyperparameters (:class:`TrainingSettings`), its metric names and files. It
stays here while the tuning spec takes its defaults from it; a team's code declares its own.

Settings are validated once, where they are built: from pipeline arguments, from the trainer's
own argv (:func:`parse_trainer_args`, the pod's edge) or from a Katib trial template (fields
holding a :class:`~kfstack.settings.Placeholder`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os

from kfstack import contracts
from kfstack.contracts import FLOAT, INT, STR, TrainingCode
from kfstack.errors import InvalidParameterError
from kfstack.settings import Settings, setting

PYTORCH = "pytorch"
TENSORFLOW = "tensorflow"
FRAMEWORKS = (PYTORCH, TENSORFLOW)
MWMS = "mwms"  # TF MultiWorkerMirroredStrategy: Worker replicas, synchronous all-reduce
PARAMETER_SERVER = "parameter_server"  # TF ParameterServerStrategy: Chief + Workers + PS
TF_TOPOLOGIES = (MWMS, PARAMETER_SERVER)

# What a trainer writes beside the model, and where it checkpoints (relative to its logs).
MODEL_FILE = "model.onnx"
METRICS_FILE = "training_metrics.json"
CHECKPOINT_DIR = "checkpoints"

# The metric vocabulary: validation metrics as the trainers print them on their Katib metric
# lines (``epoch=3 val_auc=0.7120 val_log_loss=0.5100 val_accuracy=0.7800``) and as the
# training step reports them.
VAL_AUC = "val_auc"
VAL_LOG_LOSS = "val_log_loss"
VAL_ACCURACY = "val_accuracy"
VALIDATION_METRICS = (VAL_AUC, VAL_LOG_LOSS, VAL_ACCURACY)
# Throughput over the training steps (kfstack.training.throughput computes it): on the Katib
# metric lines after the validation metrics (that epoch's figures) and in the training step's
# report (the whole run's).
SECONDS_PER_EPOCH = "seconds_per_epoch"
SAMPLES_PER_SECOND = "samples_per_second"
SAMPLES_PER_SECOND_PER_REPLICA = "samples_per_second_per_replica"
THROUGHPUT_METRICS = (SECONDS_PER_EPOCH, SAMPLES_PER_SECOND, SAMPLES_PER_SECOND_PER_REPLICA)
# What the training step adds when the run's node pool has a price (absent without one): the
# job's pods' price per hour and the cost of an epoch's training seconds at it.
PRICE_PER_HOUR = "price_per_hour"
COST_PER_EPOCH = "cost_per_epoch"
# A team's code reports no epochs to kfstack: its step prices the whole job instead.
JOB_COST = "job_cost"
# The values each validation metric can take (a tuning goal outside them is never reached).
METRIC_RANGES = {VAL_AUC: (0.0, 1.0), VAL_LOG_LOSS: (0.0, float("inf")), VAL_ACCURACY: (0.0, 1.0)}
# The flights example's training code (kfstack.flights.training) as the generic training and
# tuning steps see any team's code (kfstack.contracts.TrainingCode): the hyperparameters it
# takes as --name=value, the metrics its metric lines print. Tuning settings default to it.
TRAINER_CODE = TrainingCode(
    entry="kfstack.flights.training.train",
    hyperparameters={"framework": STR, "epochs": INT, "batch_size": INT, "learning_rate": FLOAT, "seed": INT},
    metrics=VALIDATION_METRICS,
)


@dataclasses.dataclass(frozen=True)
class JobTopology(Settings):
    """The shape of a distributed training job, whatever code it runs.

    Attributes:
        framework: ``pytorch`` (DDP; TrainJob or PyTorchJob) or ``tensorflow`` (TFJob).
        workers: Training processes: PyTorch Master + Workers; TF Workers (>= 1).
        max_restarts: Whole-group restarts from the latest checkpoint after a failure (>= 0).
        tf_topology: TensorFlow: ``mwms`` or ``parameter_server``.
        tf_parameter_servers: TensorFlow ``parameter_server``: PS replicas (>= 1).
        elastic_min_workers, elastic_max_workers: PyTorch on Kubernetes: an elastic job between
            these replica counts (torchrun, c10d); both 0: a fixed-size job.
    """

    concern = "training topology"

    framework: str = setting(PYTORCH, choices=FRAMEWORKS)
    workers: int = setting(2, ge=1)
    max_restarts: int = setting(3, ge=0)
    tf_topology: str = setting(MWMS, choices=TF_TOPOLOGIES)
    tf_parameter_servers: int = setting(1, ge=1)
    elastic_min_workers: int = setting(0, ge=0)
    elastic_max_workers: int = setting(0, ge=0)

    def check(self) -> list[str]:
        problems = []
        if self.elastic and self.concrete("elastic_min_workers", "elastic_max_workers", "workers"):
            if self.framework != PYTORCH:
                problems.append(
                    "elastic_min_workers/elastic_max_workers: elastic training is a "
                    "PyTorch feature; set both to 0 for tensorflow"
                )
            elif not 1 <= self.elastic_min_workers <= self.workers <= self.elastic_max_workers:
                problems.append(
                    f"elastic training needs 1 <= elastic_min_workers ({self.elastic_min_workers}) "
                    f"<= workers ({self.workers}) <= elastic_max_workers ({self.elastic_max_workers})"
                )
        return problems

    @property
    def elastic(self) -> bool:
        return bool(self.elastic_min_workers or self.elastic_max_workers)


@dataclasses.dataclass(frozen=True)
class TrainingSettings(JobTopology):
    """What a flights training run is, whichever framework and platform runs it: its job's
    topology (:class:`JobTopology`) and the flights trainers' hyperparameters (as
    :data:`TRAINER_CODE` declares them to the generic training step).

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
        "--features-uri": contracts.INPUT_URI_ENV,
        "--model-uri": contracts.MODEL_DIR_ENV,
        "--checkpoint-uri": contracts.CHECKPOINT_URI_ENV,
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
