"""PyTorchJob and TFJob manifests (training-operator v1), built with the ``kubeflow-training`` models.

Pure functions (docs/architecture.md#pure-spec-builders): a :class:`TrainingJobRequest` in, a
manifest dict out; the launcher creates exactly what ``kfstack render`` writes. What the operator
does with them (docs/architecture.md#training-operators-environment): it names the pods
``<job>-<type>-<i>``, sets the env contract (``MASTER_ADDR``... or ``TF_CONFIG``), restarts per
``restartPolicy`` up to ``runPolicy.backoffLimit``.

Choices made here:

- ``restartPolicy: OnFailure`` (the trainers resume from their latest checkpoint); on spot pools
  ``ExitCode``, so a preempted pod (SIGTERM, exit 143) is retried while a bad parameter (exit 1)
  fails the job at once instead of burning the backoff budget.
- ``cleanPodPolicy: Running``: when the job ends, pods still running are deleted but a failed
  pod is kept, so the launcher (and a person) can read its log; ``ttlSecondsAfterFinished``
  removes the job and its pods later.
- Kueue: on a profile with a queue, the job carries the queue label and is created with
  ``runPolicy.suspend: true``; Kueue unsuspends it when quota admits it.
- Elastic PyTorch (``elasticPolicy``): Worker replicas only (the c10d rendezvous replaces the
  Master) and the trainer starts through ``torchrun``, which turns the operator's ``PET_*``
  variables into the global ``RANK``/``WORLD_SIZE`` the trainer reads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kfstack.errors import InvalidParameterError
from kfstack.kubernetes import pods
from kfstack.kubernetes.node_pools import NodePoolProfile
from kfstack.kubernetes.sdk import lazy_module
from kfstack.training.settings import MWMS, PARAMETER_SERVER

if TYPE_CHECKING:
    from kubeflow.training import models
    from kubeflow.training.constants import constants as training
else:
    models = lazy_module("kubeflow.training.models")
    training = lazy_module("kubeflow.training.constants.constants")

PYTORCHJOB = "PyTorchJob"
TFJOB = "TFJob"
CLEAN_POD_POLICY = "Running"


@dataclasses.dataclass(frozen=True)
class ElasticSettings:
    """``elasticPolicy`` of a PyTorchJob: the job runs with ``min..max`` Worker replicas."""

    min_replicas: int
    max_replicas: int
    max_restarts: int


@dataclasses.dataclass(frozen=True)
class TrainingJobRequest:
    """Everything a training job manifest depends on.

    Attributes:
        name: Object name (:func:`kfstack.kubernetes.naming.resource_name`).
        labels: Labels of the job and its pods (run and task of the pipeline).
        image: Trainer image (:mod:`kfstack.images`).
        module: The trainer's Python module (``python -m <module>``).
        args: The trainer's arguments: URIs of data, checkpoints and the model, hyperparameters.
        workers: Training processes (PyTorch: Master + Workers; TF: Workers).
        profile: Node pool of the replicas.
        secrets: Credential and image-pull Secret names.
        checkpoint_uri: Where the trainer checkpoints; required on spot pools.
        max_restarts: ``runPolicy.backoffLimit``: pod restarts before the job fails.
        active_deadline_seconds: Hard limit on the job's run time; ``None``: none.
        ttl_seconds_after_finished: When the finished job and its pods are deleted.
        namespace: Set on the object when given; else ``kubectl``/the launcher sets it.
        elastic: PyTorch only: run elastic between min and max Worker replicas.
        topology: TF only: ``mwms`` or ``parameter_server``.
        parameter_servers: TF ``parameter_server`` only: PS replicas (>= 1).
        env: Plain variables of every replica (where a team's code finds its data, model
            directory and checkpoints: :mod:`kfstack.contracts`); never credentials.
        istio_mesh: The namespace is in an Istio mesh: every replica's pod is labelled out of
            it (:func:`kfstack.kubernetes.pods.job_pod_labels`; the job object keeps ``labels``).
    """

    name: str
    labels: dict[str, str]
    image: str
    module: str
    args: list[str]
    workers: int
    profile: NodePoolProfile
    secrets: pods.SecretRefs
    checkpoint_uri: str
    max_restarts: int = 3
    active_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int = 86_400
    namespace: str | None = None
    elastic: ElasticSettings | None = None
    topology: str = MWMS
    parameter_servers: int = 1
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    istio_mesh: bool = True

    def with_elastic(self, elastic: ElasticSettings | None) -> TrainingJobRequest:
        return dataclasses.replace(self, elastic=elastic)

    def with_topology(self, topology: str, parameter_servers: int) -> TrainingJobRequest:
        return dataclasses.replace(self, topology=topology, parameter_servers=parameter_servers)


def validate_request(request: TrainingJobRequest) -> None:
    """Raises before anything is built (and so before anything is submitted).

    The hyperparameters, replica counts and topology were validated with the training settings
    the request was made from (:class:`kfstack.training.settings.TrainingSettings`); what is
    checked here is what only the job's placement can tell.

    Raises:
        InvalidParameterError: On an inconsistent setting, with what to change.
    """
    if request.profile.spot and not request.checkpoint_uri:
        raise InvalidParameterError(
            f"node pool {request.profile.name!r} is spot capacity: a preempted job can only "
            f"resume from a checkpoint, so a checkpoint URI is required"
        )


def _restart_policy(profile: NodePoolProfile) -> str:
    return "ExitCode" if profile.spot else "OnFailure"


def _run_policy(request: TrainingJobRequest) -> models.KubeflowOrgV1RunPolicy:
    return models.KubeflowOrgV1RunPolicy(
        backoff_limit=request.max_restarts,
        active_deadline_seconds=request.active_deadline_seconds,
        ttl_seconds_after_finished=request.ttl_seconds_after_finished,
        clean_pod_policy=CLEAN_POD_POLICY,
        suspend=True if request.profile.suspend_on_create else None,
    )


def _metadata(request: TrainingJobRequest):
    from kubernetes import client

    return client.V1ObjectMeta(
        name=request.name,
        namespace=request.namespace,
        labels={**request.labels, **request.profile.job_labels()},
    )


def _manifest(job_model: Callable[..., Any], kind: str, request: TrainingJobRequest, spec: Any) -> dict:
    """A training-operator v1 job of ``kind`` (its SDK model ``job_model``) with ``spec``,
    named and labelled by the request, as a manifest."""
    job = job_model(api_version=training.API_VERSION, kind=kind, metadata=_metadata(request), spec=spec)
    return pods.to_dict(job)


def _replica(
    request: TrainingJobRequest,
    replicas: int,
    container: str,
    command: list[str],
    profile: NodePoolProfile | None = None,
) -> models.KubeflowOrgV1ReplicaSpec:
    profile = profile or request.profile
    template = pods.job_pod_template(
        container_name=container,
        image=request.image,
        command=command,
        profile=profile,
        secrets=request.secrets,
        labels=request.labels,
        istio_mesh=request.istio_mesh,
        env=request.env or None,
    )
    return models.KubeflowOrgV1ReplicaSpec(
        replicas=replicas,
        restart_policy=_restart_policy(request.profile),
        template=template,
    )


def build_pytorchjob(request: TrainingJobRequest) -> dict:
    """A ``kubeflow.org/v1`` PyTorchJob: 1 Master + ``workers - 1`` Workers, or elastic Workers.

    Raises:
        InvalidParameterError: See :func:`validate_request`.
    """
    validate_request(request)
    container = training.PYTORCHJOB_CONTAINER
    replica_specs: dict[str, models.KubeflowOrgV1ReplicaSpec] = {}
    elastic_policy = None
    if request.elastic is not None:
        command = ["torchrun", "-m", request.module, *request.args]
        replica_specs[training.REPLICA_TYPE_WORKER] = _replica(request, request.workers, container, command)
        elastic_policy = models.KubeflowOrgV1ElasticPolicy(
            min_replicas=request.elastic.min_replicas,
            max_replicas=request.elastic.max_replicas,
            max_restarts=request.elastic.max_restarts,
            rdzv_backend="c10d",
        )
    else:
        command = ["python", "-m", request.module, *request.args]
        replica_specs[training.REPLICA_TYPE_MASTER] = _replica(request, 1, container, command)
        if request.workers > 1:
            replica_specs[training.REPLICA_TYPE_WORKER] = _replica(
                request, request.workers - 1, container, command
            )
    spec = models.KubeflowOrgV1PyTorchJobSpec(
        pytorch_replica_specs=replica_specs,
        run_policy=_run_policy(request),
        elastic_policy=elastic_policy,
        # One process per pod: the trainer's env contract (kfstack.training.env_contract).
        nproc_per_node="1" if request.elastic is None else None,
    )
    return _manifest(models.KubeflowOrgV1PyTorchJob, PYTORCHJOB, request, spec)


def build_tfjob(request: TrainingJobRequest) -> dict:
    """A ``kubeflow.org/v1`` TFJob.

    ``mwms``: ``workers`` Worker replicas (worker 0 saves the model; ``TF_CONFIG`` lists them
    all). ``parameter_server``: 1 Chief (coordinator) + ``workers`` Workers + PS replicas; the
    PS pods hold variables, run no model code on the accelerator and so go to the CPU settings of
    the same pool (no accelerator request).

    Raises:
        InvalidParameterError: See :func:`validate_request`.
    """
    validate_request(request)
    container = training.TFJOB_CONTAINER
    command = ["python", "-m", request.module, *request.args]
    replica_specs: dict[str, models.KubeflowOrgV1ReplicaSpec] = {}
    success_policy = None
    if request.topology == PARAMETER_SERVER:
        replica_specs[training.REPLICA_TYPE_CHIEF] = _replica(request, 1, container, command)
        replica_specs[training.REPLICA_TYPE_WORKER] = _replica(request, request.workers, container, command)
        ps_profile = dataclasses.replace(request.profile, accelerator=None)
        replica_specs[training.REPLICA_TYPE_PS] = _replica(
            request,
            request.parameter_servers,
            container,
            command,
            profile=ps_profile,
        )
    else:
        replica_specs[training.REPLICA_TYPE_WORKER] = _replica(request, request.workers, container, command)
        # The job succeeds when every worker has (MWMS workers finish together); the default
        # would end it when worker 0 alone finishes.
        success_policy = "AllWorkers"
    spec = models.KubeflowOrgV1TFJobSpec(
        tf_replica_specs=replica_specs,
        run_policy=_run_policy(request),
        success_policy=success_policy,
    )
    return _manifest(models.KubeflowOrgV1TFJob, TFJOB, request, spec)
