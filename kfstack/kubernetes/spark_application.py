"""SparkApplication manifests (spark-operator v2, ``sparkoperator.k8s.io/v1beta2``).

The driver runs the same ``main(argv)`` the embedded platform calls in-process
(:mod:`kfstack.spark_jobs.flights_features.job`), from the file the Spark image puts at
:data:`kfstack.images.SPARK_MAIN_FILE`. No Python model of this CRD is among our dependencies,
so the object is a dict built here, with the Kubernetes SDK models for every core type in it
(env, tolerations, security contexts, volumes) and validated against the upstream CRD in tests.

Choices made here:

- ``restartPolicy: Never``: a failed Spark job is retried by the KFP task's retry policy (a new
  launcher attempt), not behind its back by the operator, so every attempt is visible in the UI.
- Security: the pods run non-root with no privilege escalation and all capabilities dropped;
  the root filesystem stays writable because Spark's entrypoint and ``spark-submit`` write under
  ``$SPARK_HOME`` -- scratch space (``spark.local.dir``) is on the ``scratch`` emptyDir.
- No Kueue queue: kfstack queues only the training jobs (the GPU work); the Spark job runs on
  the CPU pool's node selector, tolerations and priority class.
"""

from __future__ import annotations

import dataclasses

from kubernetes import client

from kfstack.errors import InvalidParameterError
from kfstack.kubernetes import pods
from kfstack.kubernetes.node_pools import NodePoolProfile
from kfstack.settings import Placeholder, Settings, setting

API_VERSION = "sparkoperator.k8s.io/v1beta2"
KIND = "SparkApplication"
# The pyspark pin in pyproject.toml: the Spark image runs that release.
SPARK_VERSION = "4.3.0"
_MEMORY_SUFFIXES = ("k", "m", "g", "t")


@dataclasses.dataclass(frozen=True)
class SparkResources(Settings):
    """Driver and executor sizes (memory as Spark writes it: ``512m``, ``4g``), read from the
    ``spark_*`` arguments of a Spark stage."""

    concern = "spark resources"

    driver_cores: int = setting(1, ge=1, parameter="spark_driver_cores")
    driver_memory: str = setting("2g", parameter="spark_driver_memory")
    executor_instances: int = setting(2, ge=1, parameter="spark_executors")
    executor_cores: int = setting(2, ge=1, parameter="spark_executor_cores")
    executor_memory: str = setting("4g", parameter="spark_executor_memory")

    def check(self) -> list[str]:
        return [
            problem
            for name, value in (
                ("spark_driver_memory", self.driver_memory),
                ("spark_executor_memory", self.executor_memory),
            )
            if (problem := _memory_problem(name, value))
        ]


@dataclasses.dataclass(frozen=True)
class SparkApplicationRequest:
    """Everything a SparkApplication manifest depends on.

    Attributes:
        name: Object name (:func:`kfstack.kubernetes.naming.resource_name`).
        labels: Labels of the object and its pods.
        image: Spark image (:mod:`kfstack.images`).
        main_file: ``local://`` path of the driver's main file inside the image.
        arguments: The job's argv (URIs and parameters).
        profile: Node pool of driver and executors.
        secrets: Credential and image-pull Secret names.
        service_account: The driver's service account (it creates the executor pods).
        resources: Driver and executor sizes.
        time_to_live_seconds: When the finished application is deleted.
        namespace: Set on the object when given.
    """

    name: str
    labels: dict[str, str]
    image: str
    main_file: str
    arguments: list[str]
    profile: NodePoolProfile
    secrets: pods.SecretRefs
    service_account: str
    resources: SparkResources = dataclasses.field(default_factory=SparkResources)
    time_to_live_seconds: int = 86_400
    namespace: str | None = None


def _memory_problem(name: str, value: str) -> str | None:
    if isinstance(value, Placeholder):
        return None
    number, suffix = value[:-1], value[-1:].lower()
    if suffix not in _MEMORY_SUFFIXES or not number.isdigit() or int(number) < 1:
        return f"{name}={value!r}: expected Spark memory like 512m or 4g"
    return None


def validate_request(request: SparkApplicationRequest) -> None:
    """Raises before anything is built or submitted (the sizes validated themselves).

    Raises:
        InvalidParameterError: The main file or the service account is unusable.
    """
    if not request.main_file.startswith("local://"):
        raise InvalidParameterError(f"main_file={request.main_file!r} must be a local:// path in the image")
    if not request.service_account:
        raise InvalidParameterError("the Spark driver needs a service account that may create executor pods")


def _role(request: SparkApplicationRequest, cores: int, memory: str) -> dict:
    """The fields driver and executor share."""
    _, mounts = pods.scratch_volumes(request.profile)
    settings = request.profile.pod_settings()
    role = {
        "cores": cores,
        "memory": memory,
        "labels": dict(request.labels),
        "env": pods.to_dict(pods.base_env(request.secrets)),
        "volumeMounts": pods.to_dict(mounts),
        "securityContext": pods.to_dict(pods.container_security_context(read_only_root=False)),
        "podSecurityContext": pods.to_dict(pods.pod_security_context()),
        "nodeSelector": settings["nodeSelector"],
        "tolerations": settings["tolerations"],
    }
    if "priorityClassName" in settings:
        role["priorityClassName"] = settings["priorityClassName"]
    return {k: v for k, v in role.items() if v not in (None, [], {})}


def build_spark_application(request: SparkApplicationRequest) -> dict:
    """A SparkApplication running ``main_file`` with ``arguments`` in cluster mode.

    Raises:
        InvalidParameterError: See :func:`validate_request`.
    """
    validate_request(request)
    volumes, _ = pods.scratch_volumes(request.profile)
    sizes = request.resources
    driver = {
        **_role(request, sizes.driver_cores, sizes.driver_memory),
        "serviceAccount": request.service_account,
    }
    executor = {
        **_role(request, sizes.executor_cores, sizes.executor_memory),
        "instances": sizes.executor_instances,
    }
    spec = {
        "type": "Python",
        "pythonVersion": "3",
        "mode": "cluster",
        "image": request.image,
        "imagePullPolicy": "IfNotPresent",
        "mainApplicationFile": request.main_file,
        "arguments": list(request.arguments),
        "sparkVersion": SPARK_VERSION,
        "sparkConf": {
            # Shuffle and spill files on the writable scratch volume.
            "spark.local.dir": pods.SCRATCH_PATH,
        },
        "restartPolicy": {"type": "Never"},
        "timeToLiveSeconds": request.time_to_live_seconds,
        "volumes": pods.to_dict(volumes),
        "driver": driver,
        "executor": executor,
    }
    pull = request.secrets.image_pull_secrets()
    if pull:
        spec["imagePullSecrets"] = [ref.name for ref in pull]
    metadata = pods.to_dict(
        client.V1ObjectMeta(name=request.name, namespace=request.namespace, labels=dict(request.labels))
    )
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec}
