"""What a launcher may do in its launch namespace, asked before it creates anything.

A launcher whose Role is missing a verb would otherwise find out half-way: the job created, then
its log unreadable, or the cancel unable to delete it. So on Kubernetes, once the stage's variant
is chosen and before the first create, :func:`review` asks the API server one
``SelfSubjectAccessReview`` (``authorization.k8s.io/v1``) per permission the launch will use in
the launch namespace (:data:`LIFECYCLE_VERBS`, :data:`POD_READS`, :data:`KIND_SPECIFIC_READS`:
the one table of them), and reads each Kueue ``LocalQueue`` the objects name. Every missing
permission and queue is reported in one :class:`~kfstack.errors.LaunchNamespaceError`; nothing is
created.

The pipeline's first task asks the same, once, for every launching step of the run
(:func:`review_launches`, from :func:`kfstack.pipelines.rendering.check_run_parameters`): a Role
without the training step's rights fails the run before its Spark job starts. Each step asks
again before its own create, as the second line: RBAC may have changed since.

Every authenticated client may create a SelfSubjectAccessReview: the ``system:basic-user``
ClusterRole grants it to all of them (kubernetes/kubernetes,
plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go), so the review needs no rule of its
own. The Role a namespace binds (manifests/base/namespaced/launcher-rbac.yaml) grants exactly
:func:`role_permissions`; a test holds the two together.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from kfstack.errors import LaunchNamespaceError
from kfstack.kubernetes.launcher import Cluster
from kfstack.kubernetes.node_pools import KUEUE_QUEUE_LABEL
from kfstack.kubernetes.resources import EXPERIMENT, KINDS, TRIAL, Lifecycle, ResourceKind, kind_of
from kfstack.kubernetes.sdk import lazy_module

if TYPE_CHECKING:
    from kubernetes import client
    from kubernetes.client import rest
else:
    client = lazy_module("kubernetes.client")
    rest = lazy_module("kubernetes.client.rest")

logger = logging.getLogger(__name__)

# The guide's section on binding the launcher's Role in a launch namespace.
GUIDE = 'manifests/README.md, "A launch namespace"'
ROLE = "kfstack-launcher"
ROLE_FILE = "manifests/base/namespaced/launcher-rbac.yaml"
# Kueue v0.19 serves LocalQueues as v1beta2 (its storage version) and still v1beta1
# (kubernetes-sigs/kueue v0.19.2, config/components/crd/bases/kueue.x-k8s.io_localqueues.yaml).
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
LOCAL_QUEUES = "localqueues"


@dataclasses.dataclass(frozen=True, order=True)
class Permission:
    """One verb on one resource (or subresource) of an API group, as RBAC rules and access
    reviews name it; ``group`` is empty for the core group."""

    verb: str
    resource: str
    group: str = ""
    subresource: str = ""

    def __str__(self) -> str:
        resource = f"{self.resource}.{self.group}" if self.group else self.resource
        return f"{self.verb} {resource}" + (f"/{self.subresource}" if self.subresource else "")


# -- the table ---------------------------------------------------------------------------------

# The verbs on a launched kind, by its lifecycle.
LIFECYCLE_VERBS: Mapping[Lifecycle, tuple[str, ...]] = {
    # Adopt or create (get, then create), the wait (get), a timeout or a cancel (delete); the
    # exit handler's cleanup lists the run's jobs and deletes the unfinished ones.
    Lifecycle.BATCH: ("create", "get", "list", "delete"),
    # Apply (get, then create or update: a replace), the wait (get); the exit handler lists the
    # run's services to roll back an unfinished canary (update). Never delete.
    Lifecycle.SERVICE: ("create", "get", "list", "update"),
}
# Read beside every launched kind: a failure's report finds the primary pod (a list, by label or
# by name through a field selector: no get on pods) and reads the tail of its log.
POD_READS = (Permission("list", "pods"), Permission("get", "pods", subresource="log"))
# Read for one kind only: a Katib Experiment's Trials, listed by its label to report every trial.
KIND_SPECIFIC_READS: Mapping[str, tuple[Permission, ...]] = {
    EXPERIMENT.kind: (Permission("list", TRIAL.plural, TRIAL.group),),
}
# A queued node pool's jobs name their Kueue LocalQueue; the review reads it (a get).
LOCAL_QUEUE_GET = Permission("get", LOCAL_QUEUES, KUEUE_GROUP)
# A team's own predictor is served by the ServingRuntime the pipeline names: the run's first task
# and the deployment read it to check it against the pipeline (kfstack.kubernetes.serving_runtime).
# A ClusterServingRuntime needs a ClusterRole, which a namespace's kustomization cannot grant:
# without one, that check says the runtime could not be read and leaves it to KServe.
SERVING_RUNTIME_GET = Permission("get", "servingruntimes", "serving.kserve.io")


def kind_permissions(kind: ResourceKind) -> list[Permission]:
    """What launching ``kind`` uses in the launch namespace, by the table above."""
    own = [Permission(verb, kind.plural, kind.group) for verb in LIFECYCLE_VERBS[kind.lifecycle]]
    return [*own, *POD_READS, *KIND_SPECIFIC_READS.get(kind.kind, ())]


def permissions(kinds: Iterable[ResourceKind]) -> list[Permission]:
    """What launching ``kinds`` uses in the launch namespace, each once, sorted."""
    return sorted({permission for kind in kinds for permission in kind_permissions(kind)})


def role_permissions() -> set[Permission]:
    """What the launcher's Role must grant: every kind kfstack launches (the exit handler's
    cleanup and rollback use a subset of those verbs), the LocalQueue get and the ServingRuntime
    get."""
    return {*permissions(KINDS.values()), LOCAL_QUEUE_GET, SERVING_RUNTIME_GET}


# -- the review --------------------------------------------------------------------------------


def queues(objects: Iterable[dict]) -> list[str]:
    """The Kueue LocalQueues ``objects`` name in a ``kueue.x-k8s.io/queue-name`` label, at any
    depth (a Katib Experiment's trial template carries its job's): the node pool profile's
    ``queue`` where the pool is queued."""

    def walk(value: object) -> Iterator[str]:
        if isinstance(value, dict):
            labels = value.get("labels")
            if isinstance(labels, dict) and labels.get(KUEUE_QUEUE_LABEL):
                yield str(labels[KUEUE_QUEUE_LABEL])
            for item in value.values():
                yield from walk(item)
        elif isinstance(value, list):
            for item in value:
                yield from walk(item)

    return sorted({name for obj in objects for name in walk(obj)})


def _allowed(api: client.AuthorizationV1Api, permission: Permission, namespace: str) -> bool:
    review = client.V1SelfSubjectAccessReview(
        spec=client.V1SelfSubjectAccessReviewSpec(
            resource_attributes=client.V1ResourceAttributes(
                namespace=namespace,
                verb=permission.verb,
                group=permission.group,
                resource=permission.resource,
                subresource=permission.subresource or None,
            )
        )
    )
    status = api.create_self_subject_access_review(review).status
    return bool(status is not None and status.allowed)


def _subject(cluster: Cluster) -> str:
    if not cluster.service_account:
        return "this step's service account"
    where = f"{cluster.source_namespace}/" if cluster.source_namespace else ""
    return f"service account {where}{cluster.service_account}"


def review(stage: str, cluster: Cluster, objects: Sequence[dict]) -> None:
    """Checks, before anything is created, that ``objects`` can be launched in the cluster's
    namespace: one access review per permission their launch uses, and a get of each LocalQueue
    they name. Nothing to launch, nothing to check.

    An API server that answers no access review at all (a cluster without the
    ``system:basic-user`` binding) is logged and the launch goes on: its own calls then say what
    is refused.

    Raises:
        LaunchNamespaceError: A permission is missing or a LocalQueue is not there; the message
            names every one. Nothing was submitted.
    """
    review_launches(stage, [(cluster, objects)])


def review_launches(stage: str, launches: Iterable[tuple[Cluster, Sequence[dict]]]) -> None:
    """:func:`review` of each ``(cluster, objects)``, each in its cluster's namespace (a pipeline
    whose steps launch in different namespaces), with one error for all of them.

    Raises:
        LaunchNamespaceError: Naming every missing permission and LocalQueue, in every namespace.
            Nothing was submitted.
    """
    problems = [problem for cluster, objects in launches for problem in _shortfalls(stage, cluster, objects)]
    if problems:
        raise LaunchNamespaceError(f"{stage}: {'. '.join(problems)}. Nothing was submitted.")


def _shortfalls(stage: str, cluster: Cluster, objects: Sequence[dict]) -> list[str]:
    """What keeps ``objects`` from being launched in the cluster's namespace, a sentence each:
    the permissions missing there, and each LocalQueue that is not there."""
    if not objects:
        return []
    namespace = cluster.namespace
    missing: list[Permission] = []
    api = client.AuthorizationV1Api(cluster.api_client)
    try:
        missing = [p for p in permissions(kind_of(obj) for obj in objects) if not _allowed(api, p, namespace)]
    except rest.ApiException as err:
        logger.warning(
            "%s: the API server answered no access review (%s %s); the launch goes on unchecked",
            stage,
            err.status,
            err.reason,
        )
    absent: list[str] = []
    custom = client.CustomObjectsApi(cluster.api_client)
    for queue in queues(objects):
        try:
            custom.get_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION, namespace, LOCAL_QUEUES, queue)
        except rest.ApiException as err:
            if err.status == 403:
                missing.append(LOCAL_QUEUE_GET)
            elif err.status == 404:
                absent.append(queue)
            else:
                raise
    problems = []
    if missing:
        lacks = "; ".join(f"{permission} in namespace {namespace}" for permission in sorted(set(missing)))
        problems.append(
            f"{_subject(cluster)} lacks {lacks}. Bind it in {namespace} to the Role {ROLE} "
            f"({ROLE_FILE}; {GUIDE})"
        )
    for queue in absent:
        problems.append(
            f"the Kueue LocalQueue {namespace}/{queue} that the node pool's jobs are queued in is not "
            f"there (or Kueue is not installed): create it (manifests/base/namespaced/local-queues.yaml) "
            f"or run on a pool without a queue"
        )
    return problems
