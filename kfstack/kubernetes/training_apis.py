"""Which training API a job goes to: training-operator v1 (PyTorchJob, TFJob) or Kubeflow
Trainer v2 (TrainJob).

Current Kubeflow installs Trainer v2 and no longer the v1 training-operator; many clusters still
run training-operator 1.9. The pipeline parameter ``training_api`` chooses:

- ``v1``: PyTorchJob or TFJob;
- ``trainer-v2``: TrainJob (PyTorch only, see below);
- ``auto`` (default): whichever the cluster serves, Trainer v2 first when it serves both.

:func:`candidate_apis` turns the choice into the APIs to try, in order of preference; the
platform seam asks the cluster which it serves (:meth:`kfstack.kubernetes.launcher.Cluster.serves`)
and ``kfstack render`` renders every candidate.

**TensorFlow stays on v1 TFJob.** Trainer v2 deprecated TFJob and ships no TensorFlow runtime.
A plain runtime could run the trainer, but ``TF_CONFIG`` would then be assembled by kfstack from
JobSet host names -- a private contract neither Trainer nor Katib knows, and one that cannot
express the ``parameter_server`` topology's distinct chief and PS replicas. So
``training_api=trainer-v2`` with ``framework=tensorflow`` is refused with what to use instead,
and ``auto`` only considers TFJob for it. **Elastic PyTorch stays on v1** too: it is the
PyTorchJob's ``elasticPolicy``; the v2.3 TrainJob has no such field.
"""

from __future__ import annotations

from kfstack.errors import InvalidParameterError
from kfstack.kubernetes.resources import PYTORCHJOB, TFJOB, TRAINJOB, ResourceKind
from kfstack.training.settings import TENSORFLOW

# The ClusterTrainingRuntime a TrainJob references by default: the upstream torchrun runtime
# Trainer v2.3's manifests install (kfstack's own: manifests/cluster/trainer-v2/).
DEFAULT_TRAINER_RUNTIME = "torch-distributed"

AUTO = "auto"
V1 = "v1"
TRAINER_V2 = "trainer-v2"
TRAINING_APIS = (AUTO, V1, TRAINER_V2)


def job_kind(api: str, framework: str) -> ResourceKind:
    """The kind a concrete API (``v1`` or ``trainer-v2``) runs ``framework`` as."""
    if api == TRAINER_V2:
        return TRAINJOB
    return TFJOB if framework == TENSORFLOW else PYTORCHJOB


def candidate_apis(requested: str, framework: str, elastic: bool = False) -> tuple[str, ...]:
    """The concrete APIs that may run the job, in order of preference.

    Args:
        requested: ``auto``, ``v1`` or ``trainer-v2``.
        framework: ``pytorch`` or ``tensorflow``.
        elastic: An elastic PyTorch job (elastic_min_workers/elastic_max_workers set).

    Raises:
        InvalidParameterError: ``trainer-v2`` for a job only v1 can run (TensorFlow, elastic),
            or an unknown choice.
    """
    if requested not in TRAINING_APIS:
        raise InvalidParameterError(f"training_api={requested!r} is not one of {', '.join(TRAINING_APIS)}")
    v1_only = None
    if framework == TENSORFLOW:
        v1_only = (
            "Kubeflow Trainer v2 has no TensorFlow runtime (it deprecated TFJob); use "
            "training_api=v1 (a TFJob on the training-operator v1.9) or framework=pytorch"
        )
    elif elastic:
        v1_only = (
            "elastic training is the PyTorchJob's elasticPolicy, which the TrainJob does not "
            "have; use training_api=v1, or set elastic_min_workers=elastic_max_workers=0"
        )
    if requested == TRAINER_V2:
        if v1_only:
            raise InvalidParameterError(f"training_api=trainer-v2: {v1_only}")
        return (TRAINER_V2,)
    if requested == V1 or v1_only:
        return (V1,)
    return (TRAINER_V2, V1)
