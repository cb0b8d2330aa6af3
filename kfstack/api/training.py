"""For a team's training code: what it declares (:class:`TrainingCode`),
the operators' environment read as one object (PyTorch's ranks, TensorFlow's task), atomic
checkpoints on any URI, the shards a rank reads, metrics and Katib's metric lines, throughput, and
the termination message a failed replica leaves, and whether the code trains a tuning trial (whose
model nothing keeps). Imports numpy and pyarrow, no framework."""

from kfstack.api import _deprecated
from kfstack.contracts import TrainingCode, tuning_trial
from kfstack.training.checkpoints import list_checkpoints, load_checkpoint, save_checkpoint, to_bytes
from kfstack.training.env_contract import DistributedEnv
from kfstack.training.metrics import accuracy, katib_line, log_loss, numeric_report, roc_auc
from kfstack.training.settings import FRAMEWORKS, PYTORCH, TENSORFLOW, THROUGHPUT_METRICS, JobTopology
from kfstack.training.shards import read_split, rows_per_rank
from kfstack.training.termination import termination_message_on_failure
from kfstack.training.tf_config import CHIEF, PS, WORKER, TFTask
from kfstack.training.throughput import throughput

__all__ = [
    "CHIEF",
    "FRAMEWORKS",
    "PS",
    "PYTORCH",
    "TENSORFLOW",
    "THROUGHPUT_METRICS",
    "WORKER",
    "DistributedEnv",
    "JobTopology",
    "TFTask",
    "TrainingCode",
    "accuracy",
    "katib_line",
    "list_checkpoints",
    "load_checkpoint",
    "log_loss",
    "numeric_report",
    "read_split",
    "roc_auc",
    "rows_per_rank",
    "save_checkpoint",
    "termination_message_on_failure",
    "throughput",
    "to_bytes",
    "tuning_trial",
]

# The hyperparameter kinds as constants (0.1): a declaration types a hyperparameter as Python does
# (``int``; ``TrainingCode`` takes the kind's name, ``"int"``), and ``FLOAT``/``INT`` are the
# served fields' kinds in kfstack.api.serving. Answered with a DeprecationWarning until 0.2.
__getattr__ = _deprecated.answering(
    __name__,
    {
        name: ("kfstack.contracts", f'the kind\'s name, "{name.lower()}", or the Python type')
        for name in ("BOOL", "FLOAT", "INT", "STR")
    },
)
