"""SparkApplication manifests (spark-operator v2, ``sparkoperator.k8s.io/v1beta2``).

The driver runs the wrapper of the Spark image that runs a team's own application
(:mod:`kfstack.spark.driver`, at :data:`kfstack.images.SPARK_DRIVER_FILE`), which learns where
its data is from plain ``env`` and gets a team's Secrets as ``envFrom`` -- both set on the pods
by the operator's mutating webhook, on by default in its chart. The object is built with the
pydantic models of the ``kubeflow-spark-api`` package (``SparkV1beta2SparkApplication`` and its
spec, driver and executor models, and that package's own copies of the core Kubernetes types)
and serialised by their ``to_dict()``. The core types start out as the Kubernetes SDK objects
of :mod:`.pods` (env, security contexts, volumes), shared with the training jobs, and are read
into those copies.

The models are release 2.4.0 (the pin in pyproject.toml); the CRD we target is spark-operator
2.5.2. The models ignore a key they do not know rather than refuse it, so the tests check that
every field this module sets survives a round trip through them and exists in the 2.5.2 CRD,
and validate the objects against that CRD.

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
from typing import TYPE_CHECKING, Any

from kfstack.errors import InvalidParameterError
from kfstack.kubernetes import node_pools, pods
from kfstack.kubernetes.node_pools import NodePoolProfile
from kfstack.kubernetes.placement import Placement
from kfstack.kubernetes.sdk import lazy_module
from kfstack.settings import Placeholder, Settings, setting

if TYPE_CHECKING:
    from kubeflow_spark_api import models as spark
else:
    spark = lazy_module("kubeflow_spark_api.models")

API_VERSION = "sparkoperator.k8s.io/v1beta2"
KIND = "SparkApplication"
# The pyspark pin in pyproject.toml: the Spark image runs that release.
SPARK_VERSION = "4.3.0"
_MEMORY_SUFFIXES = ("k", "m", "g", "t")


@dataclasses.dataclass(frozen=True)
class SparkResources(Settings):
    """Driver and executor sizes (memory as Spark writes it: ``512m``, ``4g``), read from the
    arguments of a Spark stage."""

    concern = "spark resources"

    driver_cores: int = setting(1, ge=1)
    driver_memory: str = setting("2g")
    executor_instances: int = setting(2, ge=1)
    executor_cores: int = setting(2, ge=1)
    executor_memory: str = setting("4g")

    def check(self) -> list[str]:
        return [
            problem
            for name, value in (
                (self.argument("driver_memory"), self.driver_memory),
                (self.argument("executor_memory"), self.executor_memory),
            )
            if (problem := _memory_problem(name, value))
        ]


@dataclasses.dataclass(frozen=True)
class SparkJobPlacement(Placement):
    """Where a Spark job's driver and executors run, read from the placement arguments of a
    Spark stage: a CPU pool by default, and a driver service account that may
    create executor pods."""

    concern = "spark placement"

    node_pool: str = setting(node_pools.CPU_POOL)
    service_account: str = setting("kfstack-spark")
    timeout_seconds: int = setting(2 * 3600, gt=0)

    def check(self) -> list[str]:
        problems = super().check()
        if not self.service_account:
            problems.append(
                f"{self.argument('service_account')}: the Spark driver needs a service account that "
                "may create executor pods"
            )
        return problems


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
        secrets: Credential and image-pull Secret names, and the Secrets whose keys become
            the driver's and executors' environment (``envFrom``).
        service_account: The driver's service account (it creates the executor pods).
        resources: Driver and executor sizes.
        spark_conf: Spark settings the job needs (``sparkConf``; beside the scratch directory).
        time_to_live_seconds: When the finished application is deleted.
        namespace: Set on the object when given.
        env: Plain variables of driver and executors (a team's job learns where its data is
            from them, :mod:`kfstack.contracts`); never credentials.
        istio_mesh: The namespace is in an Istio mesh: driver and executors are labelled out of
            it (:func:`kfstack.kubernetes.pods.job_pod_labels`; the object keeps ``labels``).
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
    spark_conf: dict[str, str] = dataclasses.field(default_factory=dict)
    time_to_live_seconds: int = 86_400
    namespace: str | None = None
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    istio_mesh: bool = True


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


def _core(model: Any, sdk_object: Any) -> Any:
    """A Kubernetes SDK object of :mod:`.pods` as the spark-api model of the same core type."""
    return model.from_dict(pods.to_dict(sdk_object))


def _integer(value: int) -> int | None:
    """An integer size as the models take it: a Placeholder is left out here (see
    :func:`_write_placeholders`)."""
    return None if isinstance(value, Placeholder) else value


def _write_placeholders(manifest: dict, sizes: SparkResources) -> None:
    """Writes the integer sizes that hold a Placeholder into ``manifest`` as they are.

    A Placeholder is a string and the models type ``cores`` and ``instances`` as strict integers,
    so they cannot carry one; it goes in after serialisation, the way every builder writes a
    value only the run knows (:mod:`kfstack.settings`).
    """
    for role, key, value in (
        ("driver", "cores", sizes.driver_cores),
        ("executor", "cores", sizes.executor_cores),
        ("executor", "instances", sizes.executor_instances),
    ):
        if isinstance(value, Placeholder):
            manifest["spec"][role][key] = value


def _role(request: SparkApplicationRequest, cores: int, memory: str) -> dict[str, Any]:
    """The fields driver and executor share, as arguments of either spec model.

    None leaves a field out (``to_dict()`` drops it); an empty map or list says nothing either,
    so it becomes None too. The pod labels go on each role, ``spec.driver.labels`` and
    ``spec.executor.labels`` being "the Kubernetes labels to be added to the pod" of each (the
    2.5.2 CRD). spark-operator v2.5.2 also copies the SparkApplication's own labels (the run's)
    to the driver and the executors, all but Kueue's (``driverConfOption`` and
    ``executorConfOption`` in internal/controller/sparkapplication/submission.go skip keys under
    ``kueue.x-k8s.io/``). Each role gets the run's labels plus those only pods need (the workload
    label, the mesh opt-out), where the CRD puts pod labels; the object carries the run's alone.
    """
    _, mounts = pods.scratch_volumes(request.profile)
    settings = request.profile.pod_settings()
    return {
        "cores": _integer(cores),
        "memory": memory,
        "labels": pods.job_pod_labels(request.labels, request.istio_mesh),
        "env": [_core(spark.IoK8sApiCoreV1EnvVar, var) for var in pods.base_env(request.secrets, request.env)]
        or None,
        "env_from": [
            _core(spark.IoK8sApiCoreV1EnvFromSource, source)
            for source in request.secrets.env_from_sources() or []
        ]
        or None,
        "volume_mounts": [_core(spark.IoK8sApiCoreV1VolumeMount, mount) for mount in mounts] or None,
        "security_context": _core(
            spark.IoK8sApiCoreV1SecurityContext, pods.container_security_context(read_only_root=False)
        ),
        "pod_security_context": _core(spark.IoK8sApiCoreV1PodSecurityContext, pods.pod_security_context()),
        "node_selector": settings["nodeSelector"] or None,
        # The profile's tolerations are manifest dicts already (camelCase keys).
        "tolerations": [spark.IoK8sApiCoreV1Toleration.from_dict(t) for t in settings["tolerations"]] or None,
        "priority_class_name": settings.get("priorityClassName"),
    }


def build_spark_application(request: SparkApplicationRequest) -> dict:
    """A SparkApplication running ``main_file`` with ``arguments`` in cluster mode.

    Raises:
        InvalidParameterError: See :func:`validate_request`.
    """
    validate_request(request)
    volumes, _ = pods.scratch_volumes(request.profile)
    sizes = request.resources
    pull = request.secrets.image_pull_secrets()
    app = spark.SparkV1beta2SparkApplication(
        api_version=API_VERSION,
        kind=KIND,
        metadata=spark.IoK8sApimachineryPkgApisMetaV1ObjectMeta(
            name=request.name, namespace=request.namespace, labels=dict(request.labels)
        ),
        spec=spark.SparkV1beta2SparkApplicationSpec(
            type="Python",
            python_version="3",
            mode="cluster",
            image=request.image,
            image_pull_policy="IfNotPresent",
            image_pull_secrets=[ref.name for ref in pull] if pull else None,
            main_application_file=request.main_file,
            arguments=list(request.arguments),
            spark_version=SPARK_VERSION,
            # Shuffle and spill files on the writable scratch volume.
            spark_conf={**request.spark_conf, "spark.local.dir": pods.SCRATCH_PATH},
            restart_policy=spark.SparkV1beta2RestartPolicy(type="Never"),
            time_to_live_seconds=request.time_to_live_seconds,
            volumes=[_core(spark.IoK8sApiCoreV1Volume, volume) for volume in volumes],
            driver=spark.SparkV1beta2DriverSpec(
                **_role(request, sizes.driver_cores, sizes.driver_memory),
                service_account=request.service_account,
            ),
            executor=spark.SparkV1beta2ExecutorSpec(
                **_role(request, sizes.executor_cores, sizes.executor_memory),
                instances=_integer(sizes.executor_instances),
                # Said, not left to Spark's fallback: the admission policy admits a driver's pod
                # only when it runs as the driver's own account (manifests/cluster/spark-driver-policy).
                service_account=request.service_account,
            ),
        ),
    )
    manifest = app.to_dict()
    _write_placeholders(manifest, sizes)
    return manifest
