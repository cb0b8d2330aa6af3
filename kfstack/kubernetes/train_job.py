"""TrainJob manifests (Kubeflow Trainer v2.3, ``trainer.kubeflow.org/v1alpha1``), built with the
``kubeflow-trainer-api`` models.

A pure function like the v1 builders (:mod:`.training_jobs`), from the same
:class:`~.training_jobs.TrainingJobRequest`: the launcher creates exactly what ``kfstack render``
writes. What Trainer v2 does with a TrainJob (docs/architecture.md#training-operators-environment):
it merges the TrainJob into the referenced ``ClusterTrainingRuntime`` and creates a JobSet with one
Job per node of the replicated job ``node``; the torch runtime gives each node's container the
torchrun contract (``PET_NNODES``, ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK``, ``PET_MASTER_ADDR``,
``PET_MASTER_PORT``: :func:`kfstack.training.env_contract.trainjob_env`).

Choices made here:

- The command is ``torchrun -m <trainer module>``: the runtime sets no ``WORLD_SIZE`` or
  ``RANK``, and torchrun is what derives them from ``PET_*``. (A trainer started without it on a
  multi-node job refuses to run: :meth:`~kfstack.training.env_contract.DistributedEnv.from_env`.)
- One process per node (``numProcPerNode: 1``), one node per replica of the v1 jobs: the
  node-pool profiles size a pod for one GPU (or one MIG slice).
- Placement goes through ``runtimePatches`` (the fields Trainer v2 lets a TrainJob change): the
  pool's node selector and tolerations, the restricted security contexts, the scratch volumes a
  read-only root filesystem needs, image-pull Secrets and the pods' labels (the run's, and the
  batch labels of :func:`~kfstack.kubernetes.pods.job_pod_labels`: whatever runtime the TrainJob
  names, its nodes carry them). The object-store Secret reaches the trainer as ``secretKeyRef``
  env in ``spec.trainer.env``.
- Kueue: on a profile with a queue, the TrainJob carries the queue label and is created
  suspended; Kueue unsuspends it when quota admits it.
- Not expressible per TrainJob in v2.3, and so the runtime's business: the pods'
  ``priorityClassName`` and how often a failed job restarts (the JobSet's
  ``failurePolicy.maxRestarts``). ``manifests/cluster/trainer-v2/`` ships a runtime that sets
  the restarts (``kfstack-torch-distributed``; manifests/README.md).
- Trainer v2.1 (what Kubeflow 1.11 and 26.03 install) has neither ``runtimePatches`` nor
  ``activeDeadlineSeconds``: it places pods through ``podTemplateOverrides``.
  :func:`for_trainer_v2_1` turns the body into that form, which the launch creates where the
  cluster's API server refuses ``runtimePatches`` (:mod:`.dry_run`). What v2.1 lets a TrainJob
  set of its pods is narrower: node selector, tolerations, image-pull Secrets, volumes, labels,
  and per container env and mounts. The pods' security contexts and termination grace period are
  then the business of the runtime the TrainJob names, and the job's time is bounded by its
  launcher alone, which deletes it past ``timeout_seconds`` (and the run's exit handler, should
  the launcher die first).
- Elastic training stays a PyTorchJob feature (its ``elasticPolicy``); TensorFlow stays on TFJob
  (Trainer v2 has no TensorFlow runtime): :mod:`.training_apis` refuses both before anything is
  built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kfstack.errors import InvalidParameterError
from kfstack.kubernetes import pods
from kfstack.kubernetes.resources import TRAINJOB as TRAINJOB_KIND
from kfstack.kubernetes.resources import TRAINJOB_NODE as NODE
from kfstack.kubernetes.sdk import lazy_module
from kfstack.kubernetes.training_apis import DEFAULT_TRAINER_RUNTIME
from kfstack.kubernetes.training_jobs import TrainingJobRequest, validate_request
from kfstack.settings import Placeholder

if TYPE_CHECKING:
    from kubeflow_trainer_api import models
else:
    models = lazy_module("kubeflow_trainer_api.models")

CLUSTER_TRAINING_RUNTIME = "ClusterTrainingRuntime"
# Who owns kfstack's entry in spec.runtimePatches (each patch names its manager).
PATCH_MANAGER = "kfstack.dev/launcher"


def _pod_patch(request: TrainingJobRequest) -> models.TrainerV1alpha1PodTemplatePatch:
    """The node pods' placement, security and labels as a runtime patch.

    The labels go in the pod template's metadata, which a patch may set ("Only labels and
    annotations are allowed", the v2.3.0 TrainJob CRD on ``runtimePatches[].trainingRuntimeSpec.
    template.spec.replicatedJobs[].template.spec.template.metadata``); the TrainJob's own
    ``metadata.labels`` stay on the TrainJob (the v2.3 spec has no other place for pod labels).
    """
    profile = request.profile
    volumes, mounts = pods.scratch_volumes(profile)
    settings = profile.pod_settings()
    spec = {
        "nodeSelector": settings["nodeSelector"] or None,
        "tolerations": settings["tolerations"] or None,
        "securityContext": pods.to_dict(pods.pod_security_context()),
        "imagePullSecrets": pods.to_dict(request.secrets.image_pull_secrets()),
        "volumes": pods.to_dict(volumes),
        "terminationGracePeriodSeconds": pods.TERMINATION_GRACE_SECONDS,
        "containers": [
            {
                "name": NODE,
                "securityContext": pods.to_dict(pods.container_security_context()),
                "volumeMounts": pods.to_dict(mounts),
            }
        ],
    }
    return models.TrainerV1alpha1PodTemplatePatch.from_dict(
        {
            "metadata": {"labels": pods.job_pod_labels(request.labels, request.istio_mesh)},
            "spec": {key: value for key, value in spec.items() if value is not None},
        }
    )


def _runtime_patch(request: TrainingJobRequest) -> models.TrainerV1alpha1RuntimePatch:
    node = models.TrainerV1alpha1ReplicatedJobPatch(
        name=NODE,
        template=models.TrainerV1alpha1JobTemplatePatch(
            spec=models.TrainerV1alpha1JobSpecPatch(template=_pod_patch(request))
        ),
    )
    return models.TrainerV1alpha1RuntimePatch(
        manager=PATCH_MANAGER,
        trainingRuntimeSpec=models.TrainerV1alpha1TrainingRuntimeSpecPatch(
            template=models.TrainerV1alpha1JobSetTemplatePatch(
                spec=models.TrainerV1alpha1JobSetSpecPatch(replicatedJobs=[node])
            )
        ),
    )


def trainer_command(module: str) -> list[str]:
    """The node container's command: torchrun, which turns ``PET_*`` into ranks."""
    return ["torchrun", "-m", module]


def build_trainjob(request: TrainingJobRequest, runtime: str = DEFAULT_TRAINER_RUNTIME) -> dict:
    """A ``trainer.kubeflow.org/v1alpha1`` TrainJob of ``request.workers`` nodes on ``runtime``.

    Args:
        request: The same request the v1 builders take; ``elastic``, ``topology`` and
            ``max_restarts`` do not apply (see the module docstring).
        runtime: Name of the ``ClusterTrainingRuntime`` (a torchrun runtime).

    Returns:
        The manifest as a dict (camelCase, no empty fields).

    Raises:
        InvalidParameterError: See :func:`.training_jobs.validate_request`; or ``workers`` is a
            placeholder (a Katib trial parameter): ``numNodes`` is an integer field, and Katib
            substitutes trial parameters as text, which would make it a string.
    """
    validate_request(request)
    if request.secrets.env_from:
        raise InvalidParameterError(
            f"env_secrets={list(request.secrets.env_from)}: a TrainJob (Trainer v2.3) takes no envFrom, "
            f"so whole Secrets cannot become its nodes' environment; use training_api=v1 (PyTorchJob)"
        )
    if isinstance(request.workers, Placeholder):
        raise InvalidParameterError(
            f"workers={request.workers}: the TrainJob's numNodes must be an integer, so the number "
            f"of nodes cannot be a trial parameter; tune hyperparameters, not the job's size"
        )
    profile = request.profile
    trainer = models.TrainerV1alpha1Trainer(
        image=request.image,
        command=trainer_command(request.module),
        args=[str(arg) for arg in request.args],
        env=[
            models.IoK8sApiCoreV1EnvVar.from_dict(var)
            for var in pods.to_dict(pods.base_env(request.secrets, request.env))
        ],
        numNodes=request.workers,
        numProcPerNode=1,
        resourcesPerNode=models.IoK8sApiCoreV1ResourceRequirements.from_dict(profile.resources()),
    )
    job = models.TrainerV1alpha1TrainJob(
        apiVersion=TRAINJOB_KIND.api_version,
        kind=TRAINJOB_KIND.kind,
        metadata=models.IoK8sApimachineryPkgApisMetaV1ObjectMeta(
            name=request.name,
            namespace=request.namespace,
            labels={**request.labels, **profile.job_labels()},
        ),
        spec=models.TrainerV1alpha1TrainJobSpec(
            runtimeRef=models.TrainerV1alpha1RuntimeRef(
                apiGroup=TRAINJOB_KIND.group, kind=CLUSTER_TRAINING_RUNTIME, name=runtime
            ),
            trainer=trainer,
            runtimePatches=[_runtime_patch(request)],
            activeDeadlineSeconds=request.active_deadline_seconds,
            suspend=True if profile.suspend_on_create else None,
        ),
    )
    return job.to_dict()


# What Trainer v2.1's ``spec.podTemplateOverrides[].spec`` and its containers take (the v2.1.0
# TrainJob CRD); everything else of kfstack's pod patch is the runtime's business there.
V2_1_POD_FIELDS = (
    "nodeSelector",
    "tolerations",
    "imagePullSecrets",
    "volumes",
    "affinity",
    "serviceAccountName",
    "schedulingGates",
    "containers",
)
V2_1_CONTAINER_FIELDS = ("name", "env", "volumeMounts")
# What the v2.1 form cannot carry, said where it is chosen.
V2_1_LEAVES_OUT = (
    "no deadline on the TrainJob (a step's launcher deletes it past timeout_seconds; a Katib "
    "trial's is bounded only by the Experiment's), and the pods' security contexts and termination "
    "grace period are the runtime's (kfstack-torch-distributed sets kfstack's restricted ones; "
    "Kubeflow's torch-distributed sets none)"
)


def for_trainer_v2_1(job: dict) -> dict:
    """``job`` (a :func:`build_trainjob` body) as Kubeflow Trainer v2.1 takes it.

    v2.1 has no ``spec.runtimePatches`` and no ``spec.activeDeadlineSeconds``: kfstack's pod patch
    becomes one ``podTemplateOverrides`` entry for the ``node`` replicated job, keeping the
    fields v2.1 accepts there (:data:`V2_1_POD_FIELDS`); ``trainer.resourcesPerNode`` already
    sizes the pods. A pure function: a test validates its output against Trainer v2.1.0's CRD.
    """
    spec = {
        key: value
        for key, value in job["spec"].items()
        if key not in ("runtimePatches", "activeDeadlineSeconds")
    }
    overrides = []
    for patch in job["spec"].get("runtimePatches") or []:
        replicated = (((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}).get(
            "replicatedJobs"
        ) or []
        for replicated_job in replicated:
            pod = (((replicated_job.get("template") or {}).get("spec") or {}).get("template")) or {}
            pod_spec = {
                key: value for key, value in (pod.get("spec") or {}).items() if key in V2_1_POD_FIELDS
            }
            if "containers" in pod_spec:
                pod_spec["containers"] = [
                    {key: value for key, value in container.items() if key in V2_1_CONTAINER_FIELDS}
                    for container in pod_spec["containers"]
                ]
            override: dict = {"targetJobs": [{"name": replicated_job["name"]}]}
            labels = (pod.get("metadata") or {}).get("labels")
            if labels:
                override["metadata"] = {"labels": labels}
            if pod_spec:
                override["spec"] = pod_spec
            overrides.append(override)
    if overrides:
        spec["podTemplateOverrides"] = overrides
    return {**job, "spec": spec}
