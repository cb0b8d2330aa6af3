"""Where and how a stage's cluster work runs: node pool, Secrets, service account, time bounds.

One :class:`Placement` per launching stage, built with the stage's settings and validated with
them -- on every platform, so an unknown node pool fails a local run as it would a cluster run.
"""

from __future__ import annotations

import dataclasses

from kfstack.kubernetes import naming, node_pools, training_apis
from kfstack.kubernetes.pods import SecretRefs
from kfstack.settings import Placeholder, Settings, setting
from kfstack.tracking.cluster import DEFAULT_TRACKING_SECRET

DEFAULT_OBJECT_STORE_SECRET = "kfstack-object-store"


@dataclasses.dataclass(frozen=True)
class Placement(Settings):
    """Cluster placement of one stage's launched objects.

    Attributes:
        node_pool: Node-pool profile of the launched pods (``node_pools.yaml``).
        object_store_secret: Secret with the object-store keys the pods get as env; empty: none
            (workload identity).
        image_pull_secret: Image pull Secret of the launched pods; empty: none.
        service_account: Service account of the launched pods where the stage needs one (the
            Spark driver creates executor pods); empty: the namespace's default.
        timeout_seconds: Longest wait for the launched object (a batch job's deadline too).
        poll_interval_seconds: Seconds between status reads.
        istio_mesh: The launch namespace is in an Istio mesh (sidecar or ambient): batch pods
            are labelled out of it (:func:`kfstack.kubernetes.naming.batch_pod_labels`), so that
            a finished pod completes and the workers' own traffic does not go through a proxy.
            False: no mesh labels at all.
        launch_namespace: Where the launched objects are created and read back (jobs, their
            pods and logs, Trials, the InferenceService); empty: the task pod's own namespace.
        tracking_uri: The MLflow tracking server the runs are tracked to (``http(s)://``); empty:
            none. Where KFP's MLflow plugin is on, its server and runs are used whatever this says
            (:mod:`kfstack.tracking.cluster`).
        tracking_secret: The Secret the launched pods read the tracking server's credentials
            from, its keys named as MLflow's variables (``MLFLOW_TRACKING_TOKEN``, or
            ``MLFLOW_TRACKING_USERNAME`` and ``MLFLOW_TRACKING_PASSWORD``); every reference is
            optional. By default KFP's plugin's own.
    """

    concern = "cluster placement"

    node_pool: str = node_pools.CPU_POOL
    object_store_secret: str = DEFAULT_OBJECT_STORE_SECRET
    image_pull_secret: str = ""
    service_account: str = ""
    timeout_seconds: int = setting(6 * 3600, gt=0)
    poll_interval_seconds: int = setting(15, gt=0)
    istio_mesh: bool = True
    launch_namespace: str = ""
    tracking_uri: str = ""
    tracking_secret: str = DEFAULT_TRACKING_SECRET

    def check(self) -> list[str]:
        problems = []
        uri = self.tracking_uri
        if uri and not isinstance(uri, Placeholder) and not uri.startswith(("http://", "https://")):
            problems.append(
                f"{self.argument('tracking_uri')}={uri!r}: a cluster's pods reach a tracking server "
                "over http:// or https://; empty: KFP's MLflow plugin's, where it is on"
            )
        namespace = self.launch_namespace
        if namespace and not isinstance(namespace, Placeholder):
            problem = naming.check_namespace_name(namespace)
            if problem:
                problems.append(
                    f"{self.argument('launch_namespace')}={problem}; empty: the task pod's own namespace"
                )
        for field, what in (
            ("object_store_secret", "a Secret"),
            ("image_pull_secret", "a Secret"),
            ("service_account", "a service account"),
            ("tracking_secret", "a Secret"),
        ):
            value = getattr(self, field)
            if value and isinstance(value, str) and not isinstance(value, Placeholder):
                problem = naming.check_object_name(value, what)
                if problem:
                    problems.append(f"{self.argument(field)}={problem}")
        if isinstance(self.node_pool, Placeholder):
            return problems
        known = node_pools.load_profiles()
        if self.node_pool not in known:
            problems.append(
                f"{self.argument('node_pool')}={self.node_pool!r} is not a node pool; the profile "
                f"file ({node_pools.profiles_path()}) defines: "
                f"{', '.join(sorted(known))}"
            )
        return problems

    @property
    def profile(self) -> node_pools.NodePoolProfile:
        return node_pools.get_profile(self.node_pool)

    @property
    def secrets(self) -> SecretRefs:
        return SecretRefs(object_store=self.object_store_secret, image_pull=self.image_pull_secret)


@dataclasses.dataclass(frozen=True)
class TrainingPlacement(Placement):
    """Where a training job's replicas run: the GPU node pool the run picks, and which
    training operator's API runs the job."""

    concern = "training placement"

    node_pool: str = setting("h100")
    timeout_seconds: int = setting(6 * 3600, gt=0)
    # Which training operator's API runs the job, and the TrainJob's runtime
    # (kfstack.kubernetes.training_apis).
    training_api: str = setting(training_apis.AUTO, choices=training_apis.TRAINING_APIS)
    trainer_runtime: str = training_apis.DEFAULT_TRAINER_RUNTIME

    def check(self) -> list[str]:
        problems = super().check()
        runtime = self.argument("trainer_runtime")
        if not self.trainer_runtime:
            problems.append(f"{runtime}: name the ClusterTrainingRuntime TrainJobs run on")
        elif not isinstance(self.trainer_runtime, Placeholder):
            problem = naming.check_object_name(self.trainer_runtime, "a ClusterTrainingRuntime")
            if problem:
                problems.append(f"{runtime}={problem}")
        return problems


@dataclasses.dataclass(frozen=True)
class TuningPlacement(TrainingPlacement):
    """Where a Katib Experiment's trials run (the training pool) and how long it may take: the
    wait for the whole Experiment (each trial's job keeps the training placement's timeout)."""

    concern = "tuning placement"

    timeout_seconds: int = setting(24 * 3600, gt=0)


@dataclasses.dataclass(frozen=True)
class ServingPlacement(Placement):
    """Where the InferenceService's predictor pods run, and how long a rollout step may take to
    become Ready (the predictor's service account is what KServe's storage initializer reads
    the model with)."""

    concern = "serving placement"

    node_pool: str = setting(node_pools.SERVING_POOL)
    service_account: str = setting("")
    timeout_seconds: int = setting(30 * 60, gt=0)
    poll_interval_seconds: int = setting(5, gt=0)
