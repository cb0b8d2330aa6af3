"""Training settings of any training code: the job's topology and the names of what a run reports.

:class:`JobTopology` is what the generic training step runs a team's code as (framework,
replicas, restarts, TensorFlow topology, elastic bounds), validated once where it is built
(pipeline arguments, or a Katib trial template whose fields hold a
:class:`~kfstack.settings.Placeholder`). A code's own hyperparameters are its declaration's
(:class:`kfstack.contracts.TrainingCode`).
"""

from __future__ import annotations

import dataclasses

from kfstack.settings import Settings, setting

PYTORCH = "pytorch"
TENSORFLOW = "tensorflow"
FRAMEWORKS = (PYTORCH, TENSORFLOW)
MWMS = "mwms"  # TF MultiWorkerMirroredStrategy: Worker replicas, synchronous all-reduce
PARAMETER_SERVER = "parameter_server"  # TF ParameterServerStrategy: Chief + Workers + PS
TF_TOPOLOGIES = (MWMS, PARAMETER_SERVER)

# Where a job checkpoints, relative to its logs.
CHECKPOINT_DIR = "checkpoints"

# Throughput over the training steps (kfstack.training.throughput computes it): what a code may
# print per epoch and report for the whole run; a report's seconds_per_epoch is priced per epoch.
SECONDS_PER_EPOCH = "seconds_per_epoch"
SAMPLES_PER_SECOND = "samples_per_second"
SAMPLES_PER_SECOND_PER_REPLICA = "samples_per_second_per_replica"
THROUGHPUT_METRICS = (SECONDS_PER_EPOCH, SAMPLES_PER_SECOND, SAMPLES_PER_SECOND_PER_REPLICA)
# What the training step adds when the run's node pool has a price (absent without one): the
# job's pods' price per hour and the cost of an epoch's training seconds at it.
PRICE_PER_HOUR = "price_per_hour"
COST_PER_EPOCH = "cost_per_epoch"
# And always the whole job's: its pods for the code's seconds.
JOB_COST = "job_cost"


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
