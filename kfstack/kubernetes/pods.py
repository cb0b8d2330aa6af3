"""The pods kfstack launches: security context, scratch volumes, credentials, node pool.

Every job pod (trainer replicas, Spark driver and executors) gets the same treatment:

- **Restricted security.** Non-root UID/GID 1000, ``seccompProfile: RuntimeDefault``, no
  privilege escalation, all capabilities dropped, read-only root filesystem. What the frameworks
  must write goes to a ``scratch`` emptyDir on ``/tmp`` (``HOME`` points there); GPU pods also get
  a memory-backed ``/dev/shm`` (NCCL's intra-node transport; the container default is 64 MiB).
- **Credentials only as Secret references.** Object-store keys (and a tracked task's MLflow
  credentials) reach the container as ``env`` with ``secretKeyRef`` to a Secret the platform team
  created; images come through ``imagePullSecrets``. A secret's *name* is a parameter, its value
  never is.
- **The node pool** of a :class:`~kfstack.kubernetes.node_pools.NodePoolProfile`.
- **Batch labels** (:func:`job_pod_labels`): besides the run's labels, the fixed workload label the
  namespace's NetworkPolicies select and, in an Istio mesh, the labels that keep the pod out of it.

Builders return official Kubernetes SDK models; :func:`to_dict` turns them into manifest dicts.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kfstack.kubernetes.naming import batch_pod_labels
from kfstack.kubernetes.node_pools import NodePoolProfile
from kfstack.kubernetes.sdk import lazy_module
from kfstack.tracking.cluster import CREDENTIAL_KEYS

if TYPE_CHECKING:
    from kubernetes import client
else:
    client = lazy_module("kubernetes.client")

NON_ROOT_UID = 1000
SCRATCH_VOLUME = "scratch"
SCRATCH_PATH = "/tmp"
SHM_VOLUME = "dshm"
SHM_PATH = "/dev/shm"
# The trainers checkpoint every epoch and stop at once on SIGTERM; this bounds how long a
# preempted or cancelled job pod holds its GPU.
TERMINATION_GRACE_SECONDS = 30

# Env name == key in the object-store Secret. Every reference is optional: pods that
# authenticate through workload identity (IRSA, GKE) run without the Secret, and a missing key
# surfaces as the object store's own "no credentials" error instead of a pod stuck in
# CreateContainerConfigError.
OBJECT_STORE_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION")


@functools.cache
def _serializer() -> client.ApiClient:
    return client.ApiClient()


def to_dict(model: Any) -> Any:
    """An SDK model (or a structure of them) as the camelCase dict a manifest holds."""
    return _serializer().sanitize_for_serialization(model)


@dataclasses.dataclass(frozen=True)
class SecretRefs:
    """Names (never values) of the Secrets job pods use.

    Attributes:
        object_store: Secret holding ``AWS_ACCESS_KEY_ID`` and ``AWS_SECRET_ACCESS_KEY`` (and
            optionally ``AWS_ENDPOINT_URL``, ``AWS_DEFAULT_REGION``) for s3:// and MinIO URIs;
            empty: no reference at all.
        image_pull: Secret of type ``kubernetes.io/dockerconfigjson``; empty for public images.
        env_from: Secrets a team's code needs (database or feature-store credentials), every key
            of each becoming a variable of the container (``envFrom``); by name, never by value.
        tracking: Secret holding the MLflow tracking server's credentials, each key named as
            MLflow's variable (:data:`kfstack.tracking.cluster.CREDENTIAL_KEYS`); empty: the pods
            do not track.
    """

    object_store: str = ""
    image_pull: str = ""
    env_from: tuple[str, ...] = ()
    tracking: str = ""

    def env(self) -> list[client.V1EnvVar]:
        return _optional_keys(self.object_store, OBJECT_STORE_KEYS) + _optional_keys(
            self.tracking, CREDENTIAL_KEYS
        )

    def env_from_sources(self) -> list[client.V1EnvFromSource] | None:
        return [
            client.V1EnvFromSource(secret_ref=client.V1SecretEnvSource(name=name)) for name in self.env_from
        ] or None

    def image_pull_secrets(self) -> list[client.V1LocalObjectReference] | None:
        return [client.V1LocalObjectReference(name=self.image_pull)] if self.image_pull else None


def _optional_keys(secret: str, keys: tuple[str, ...]) -> list[client.V1EnvVar]:
    """A variable per key, each from the Secret's key of the same name where it has one."""
    if not secret:
        return []
    return [
        client.V1EnvVar(
            name=key,
            value_from=client.V1EnvVarSource(
                secret_key_ref=client.V1SecretKeySelector(name=secret, key=key, optional=True)
            ),
        )
        for key in keys
    ]


def container_security_context(read_only_root: bool = True) -> client.V1SecurityContext:
    """The restricted Pod Security Standard for one container."""
    return client.V1SecurityContext(
        allow_privilege_escalation=False,
        capabilities=client.V1Capabilities(drop=["ALL"]),
        read_only_root_filesystem=read_only_root,
        run_as_non_root=True,
        run_as_user=NON_ROOT_UID,
        run_as_group=NON_ROOT_UID,
        seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"),
    )


def pod_security_context() -> client.V1PodSecurityContext:
    return client.V1PodSecurityContext(
        run_as_non_root=True,
        run_as_user=NON_ROOT_UID,
        run_as_group=NON_ROOT_UID,
        fs_group=NON_ROOT_UID,
        seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"),
    )


def scratch_volumes(profile: NodePoolProfile) -> tuple[list[client.V1Volume], list[client.V1VolumeMount]]:
    """The writable volumes of a job pod on ``profile``: ``/tmp``, plus ``/dev/shm`` on GPUs."""
    volumes = [client.V1Volume(name=SCRATCH_VOLUME, empty_dir=client.V1EmptyDirVolumeSource())]
    mounts = [client.V1VolumeMount(name=SCRATCH_VOLUME, mount_path=SCRATCH_PATH)]
    if profile.gpu:
        volumes.append(
            client.V1Volume(name=SHM_VOLUME, empty_dir=client.V1EmptyDirVolumeSource(medium="Memory"))
        )
        mounts.append(client.V1VolumeMount(name=SHM_VOLUME, mount_path=SHM_PATH))
    return volumes, mounts


def base_env(secrets: SecretRefs, extra: dict[str, str] | None = None) -> list[client.V1EnvVar]:
    """``HOME`` on the scratch volume, unbuffered Python, the object-store Secret refs, ``extra``."""
    env = [
        client.V1EnvVar(name="HOME", value=SCRATCH_PATH),
        client.V1EnvVar(name="PYTHONUNBUFFERED", value="1"),
        client.V1EnvVar(name="PYTHONDONTWRITEBYTECODE", value="1"),
    ]
    env += [client.V1EnvVar(name=k, value=v) for k, v in sorted((extra or {}).items())]
    return env + secrets.env()


def job_pod_labels(labels: Mapping[str, str], istio_mesh: bool) -> dict[str, str]:
    """The labels of every pod of a batch job kfstack launches (training replicas, TrainJob
    nodes, Spark driver and executors, and so every Katib trial's pods): the run's ``labels``
    and :func:`~kfstack.kubernetes.naming.batch_pod_labels` over them.

    They go on the pods themselves: Istio decides injection from the pod's own labels (the
    sidecar injector's ``injectRequired`` in istio pkg/kube/inject/inject.go reads the label
    before the annotation), and a NetworkPolicy selects pods, never the job that owns them.
    """
    return {**labels, **batch_pod_labels(istio_mesh)}


def job_pod_template(
    *,
    container_name: str,
    image: str,
    command: list[str],
    profile: NodePoolProfile,
    secrets: SecretRefs,
    labels: dict[str, str],
    istio_mesh: bool,
    env: dict[str, str] | None = None,
    service_account: str | None = None,
) -> client.V1PodTemplateSpec:
    """The pod template of one replica type of a training job.

    Args:
        container_name: What the operator looks for (``pytorch``, ``tensorflow``).
        image: The role's image (:mod:`kfstack.images`).
        command: The full command line.
        profile: Node pool of the pod.
        secrets: Secret names for credentials and image pulls.
        labels: The run's labels (run and task of the pipeline, for lookups and cleanup); the
            pod carries :func:`job_pod_labels` of them.
        istio_mesh: The namespace is in an Istio mesh: the pod is labelled out of it.
        env: Extra plain variables (never credentials).
        service_account: Pod service account; default: the namespace's default.
    """
    volumes, mounts = scratch_volumes(profile)
    container = client.V1Container(
        name=container_name,
        image=image,
        command=command,
        env=base_env(secrets, env),
        env_from=secrets.env_from_sources(),
        resources=client.V1ResourceRequirements(**profile.resources()),
        security_context=container_security_context(),
        volume_mounts=mounts,
    )
    settings = profile.pod_settings()
    tolerations = [
        client.V1Toleration(
            key=t.get("key"),
            operator=t.get("operator"),
            value=t.get("value"),
            effect=t.get("effect"),
            toleration_seconds=t.get("tolerationSeconds"),
        )
        for t in settings["tolerations"]
    ]
    return client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(labels=job_pod_labels(labels, istio_mesh)),
        spec=client.V1PodSpec(
            containers=[container],
            node_selector=settings["nodeSelector"] or None,
            tolerations=tolerations or None,
            priority_class_name=settings.get("priorityClassName"),
            security_context=pod_security_context(),
            image_pull_secrets=secrets.image_pull_secrets(),
            service_account_name=service_account,
            volumes=volumes,
            termination_grace_period_seconds=TERMINATION_GRACE_SECONDS,
        ),
    )
