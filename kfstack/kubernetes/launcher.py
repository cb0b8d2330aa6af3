"""Creates a custom resource, waits for it, and cleans up after it.

Like every launcher, it is idempotent, cancellable and bounded
(docs/architecture.md#idempotent-cancellable-bounded-launchers).

:func:`launch` runs one object by its kind's lifecycle (:class:`~.resources.Lifecycle`).
An owned batch job goes through this state machine:

1. **Adopt or create.** Look the object up by its deterministic name first. One that exists and
   has not failed is adopted: a retried launcher pod waits on the job its previous attempt
   started instead of starting a duplicate. One that exists and failed is deleted and created
   anew (that is what retrying the step means). A create that races another creator (409)
   adopts too.
2. **Wait.** Poll every ``poll_interval_seconds`` until the kind's :class:`Phase` is finished.
3. **Report.** Success returns the final object. Failure raises
   :class:`~kfstack.errors.ResourceFailedError` with the object's state or conditions and the
   tail of its primary pod's log. Past ``timeout_seconds`` the object is deleted and
   :class:`~kfstack.errors.ResourceTimeoutError` says how far it got.
4. **Cancel.** SIGTERM (a cancelled run) deletes the object, then raises
   :class:`~kfstack.errors.CancelledError`.

A long-lived service is **applied** (created, or its spec replaced), then awaited until its
kind's phase says the state just applied is ready (an InferenceService: its status shows the
spec's traffic split or canaries, Ready; :func:`~.resources.inference_service_phase`); a timeout
or a cancel raises but leaves it as it is (rolling back is its owner's decision, never a side
effect of a wait).

:func:`delete_run_resources` is the pipeline's exit-handler cleanup: it deletes whatever batch
jobs a run left unfinished (a launcher pod killed before its SIGTERM handler ran).

Every create and replace asks for strict field validation (:data:`STRICT`): a field the
cluster's CRD does not know is refused whole, naming it and the controller release that has it
(:class:`~kfstack.errors.ControllerReleaseError`), rather than pruned with a warning while the
rest runs. :meth:`ResourceLauncher.dry_run` asks the same of a body without creating anything
(:mod:`.dry_run` uses it before a step's first create).

The Kubernetes API is reached through the official client; tests point it at a local fake API
server (there is no cluster where they run).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from kfstack.cancellation import sigterm_raises
from kfstack.errors import (
    CancelledError,
    ControllerReleaseError,
    InvalidParameterError,
    PlatformNotAvailableError,
    ResourceFailedError,
    ResourceTimeoutError,
)
from kfstack.kubernetes import controller_releases, naming
from kfstack.kubernetes.placement import Placement
from kfstack.kubernetes.resources import KINDS, Lifecycle, Phase, ResourceKind, kind_of
from kfstack.kubernetes.sdk import lazy_module

if TYPE_CHECKING:
    from kubernetes import client, config
    from kubernetes.client import rest
else:
    client = lazy_module("kubernetes.client")
    config = lazy_module("kubernetes.config")
    rest = lazy_module("kubernetes.client.rest")

logger = logging.getLogger(__name__)

LOG_TAIL_LINES = 50
# Every create and update asks for strict field validation: a field the cluster's CRD does not
# know is refused, naming it, where the API server would otherwise prune it with a warning and
# create the rest (a TrainJob without its node-pool placement, silently).
STRICT = "Strict"


def status_message(err: Exception) -> str:
    """The message of the Kubernetes Status an API error carries, else its body as it came."""
    body = getattr(err, "body", None) or ""
    try:
        return str(json.loads(body).get("message") or body)
    except (TypeError, ValueError, AttributeError):
        return str(body)


def refused_fields(err: Exception) -> list[str]:
    """The fields a strict field validation refused (a 400 whose Status message is a strict
    decoding error); empty for any other error."""
    if getattr(err, "status", None) != 400:
        return []
    return controller_releases.unknown_fields(status_message(err))


def default_api_client() -> client.ApiClient:
    """In a pod: its service account; elsewhere: the current kubeconfig context."""
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.ApiClient()


class ResourceLauncher:
    """Creates, watches and deletes objects of one kind in one namespace.

    Args:
        kind: The resource kind (:mod:`kfstack.kubernetes.resources`).
        namespace: Where the objects live (the launch namespace, :attr:`Cluster.namespace`).
        api_client: A configured client (default: :func:`default_api_client`).
        sleep, clock: Injected so that tests run fast; the defaults are real time.
    """

    def __init__(
        self,
        kind: ResourceKind,
        namespace: str,
        api_client: client.ApiClient | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.kind = kind
        self.namespace = namespace
        api_client = api_client or default_api_client()
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.sleep = sleep
        self.clock = clock

    # -- API calls -----------------------------------------------------------------------------

    def _coordinates(self) -> dict:
        return {
            "group": self.kind.group,
            "version": self.kind.version,
            "namespace": self.namespace,
            "plural": self.kind.plural,
        }

    def get(self, name: str) -> dict | None:
        try:
            return self.custom.get_namespaced_custom_object(name=name, **self._coordinates())
        except rest.ApiException as err:
            if err.status == 404:
                return None
            raise

    def create(self, body: dict) -> dict:
        """Creates ``body``, refused whole if the cluster's CRD does not know one of its fields.

        Raises:
            ControllerReleaseError: The API server refused a field (strict field validation);
                nothing was created.
        """
        with self._strict(body):
            return self.custom.create_namespaced_custom_object(
                body=body, field_validation=STRICT, **self._coordinates()
            )

    def replace(self, body: dict) -> dict:
        """Replaces the object ``body`` names, refused whole as :meth:`create` is.

        Raises:
            ControllerReleaseError: The API server refused a field; the object is unchanged.
        """
        with self._strict(body):
            return self.custom.replace_namespaced_custom_object(
                name=body["metadata"]["name"], body=body, field_validation=STRICT, **self._coordinates()
            )

    def dry_run(self, body: dict) -> None:
        """Asks the API server to create ``body`` without storing it (``dryRun=All``): the same
        schema, strict field validation and admission webhooks as a create, nothing created.

        The probe is named by the server (``generateName``), so that an object of that name
        already there (one a retried step adopts) does not answer 409 in place of the check.

        Raises:
            ControllerReleaseError: A field the cluster's CRD does not know.
            kubernetes.client.rest.ApiException: Any other refusal.
        """
        # What a server sets on a stored object would make the create of a probe invalid.
        server_set = {"name", "resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"}
        metadata = {key: value for key, value in body["metadata"].items() if key not in server_set}
        metadata["generateName"] = f"{body['metadata'].get('name') or 'kfstack'}-"
        # A rendered body may not know its namespace yet; the launch sets it so.
        metadata["namespace"] = self.namespace
        probe = {**body, "metadata": metadata}
        with self._strict(body):
            self.custom.create_namespaced_custom_object(
                body=probe, field_validation=STRICT, dry_run="All", **self._coordinates()
            )

    @contextlib.contextmanager
    def _strict(self, body: dict) -> Iterator[None]:
        """A strict-validation refusal as a :class:`ControllerReleaseError` naming each field
        and the controller release that has it (:mod:`.controller_releases`)."""
        try:
            yield
        except rest.ApiException as err:
            fields = refused_fields(err)
            if not fields:
                raise
            name = body["metadata"].get("name") or body["metadata"].get("generateName", "")
            raise ControllerReleaseError(
                f"the cluster's {self.kind.api_version} {self.kind.kind} API refused {self.kind.kind} "
                f"{self.namespace}/{name}: "
                + controller_releases.explain(self.kind.group, self.kind.kind, fields)
                + ". Nothing was created or changed.",
                tuple(fields),
            ) from err

    def delete(self, name: str) -> bool:
        """Deletes ``name`` and its pods (background propagation); False if it was not there."""
        try:
            self.custom.delete_namespaced_custom_object(
                name=name,
                body=client.V1DeleteOptions(propagation_policy="Background"),
                **self._coordinates(),
            )
            return True
        except rest.ApiException as err:
            if err.status == 404:
                return False
            raise

    def list(self, label_selector: str) -> list[dict]:
        """The objects matching ``label_selector``; none where the cluster does not serve the
        kind at all (404), e.g. TrainJobs on a cluster with only the v1 training-operator."""
        try:
            listed = self.custom.list_namespaced_custom_object(
                label_selector=label_selector, **self._coordinates()
            )
        except rest.ApiException as err:
            if err.status == 404:
                return []
            raise
        return listed.get("items", [])

    def primary_log_tail(self, obj: dict, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` of the primary pod's log and its container's termination message,
        or why there are none.

        The termination message is what a container wrote to its ``terminationMessagePath``
        before it exited (Kubernetes keeps up to 4 KiB in the pod's status). The trainers write
        their error there because a Katib trial's output goes to Katib's metrics file, not to the
        container log (docs/architecture.md#katib), which leaves that log empty.
        """
        ref = self.kind.primary_pod(obj)
        try:
            if ref.name is not None:
                # A list narrowed to one name rather than a get: the Role grants pods `list` only.
                listed = self.core.list_namespaced_pod(
                    self.namespace, field_selector=f"metadata.name={ref.name}"
                )
                missing = f"(no pod named {ref.name})"
            else:
                listed = self.core.list_namespaced_pod(self.namespace, label_selector=ref.selector)
                missing = f"(no pod matches {ref.selector})"
        except rest.ApiException as err:
            return f"(the primary pod could not be listed: {err.status} {err.reason})"
        if not listed.items:
            return missing
        pod = listed.items[0]
        name = pod.metadata.name
        try:
            log = self.core.read_namespaced_pod_log(
                name, self.namespace, container=ref.container, tail_lines=lines
            )
            report = (
                f"last lines of pod {name}:\n{log.rstrip()}"
                if log.strip()
                else f"pod {name}: container {ref.container} wrote nothing to its log"
            )
        except rest.ApiException as err:
            report = f"(the log of pod {name} could not be read: {err.status} {err.reason})"
        message = termination_message(pod, ref.container)
        if message:
            report += f"\ntermination message of container {ref.container} of pod {name}:\n{message.rstrip()}"
        return report

    # -- the state machine ---------------------------------------------------------------------

    def _wait_until_gone(self, name: str, timeout_seconds: float, poll_interval_seconds: float) -> None:
        deadline = self.clock() + timeout_seconds
        while self.get(name) is not None:
            if self.clock() > deadline:
                raise ResourceFailedError(
                    f"{self.kind.kind} {self.namespace}/{name} failed earlier and is still being "
                    f"deleted after {timeout_seconds:.0f}s; retry the step later"
                )
            self.sleep(poll_interval_seconds)

    def adopt_or_create(self, body: dict, poll_interval_seconds: float, timeout_seconds: float) -> dict:
        name = body["metadata"]["name"]
        existing = self.get(name)
        if existing is not None and self.kind.phase(existing) is Phase.FAILED:
            logger.warning(
                "%s %s failed in an earlier attempt; deleting it to start again", self.kind.kind, name
            )
            self.delete(name)
            self._wait_until_gone(name, timeout_seconds, poll_interval_seconds)
            existing = None
        if existing is not None:
            logger.info(
                "adopting %s %s/%s (phase %s), created by an earlier attempt",
                self.kind.kind,
                self.namespace,
                name,
                self.kind.phase(existing).value,
            )
            return existing
        try:
            created = self.create(body)
            logger.info("created %s %s/%s", self.kind.kind, self.namespace, name)
            return created
        except rest.ApiException as err:
            if err.status != 409:
                raise
            logger.info(
                "%s %s/%s was created concurrently; adopting it", self.kind.kind, self.namespace, name
            )
            return self.get(name) or body

    def _failure(self, obj: dict, headline: str) -> str:
        return f"{headline}\n{self.kind.describe(obj)}\n{self.primary_log_tail(obj)}"

    def run(self, body: dict, timeout_seconds: float, poll_interval_seconds: float) -> dict:
        """Adopts or creates ``body``, waits until it finishes; returns the final object.

        Raises:
            InvalidParameterError: A timeout or interval is not positive (nothing was created).
            ResourceFailedError: The object failed (state/conditions and primary pod log tail).
            ResourceTimeoutError: It did not finish in time; it was deleted.
            CancelledError: SIGTERM arrived; the object was deleted.
        """
        _check_bounds(timeout_seconds, poll_interval_seconds)
        name = body["metadata"]["name"]
        what = f"{self.kind.kind} {self.namespace}/{name}"
        started = self.clock()
        with sigterm_raises():
            try:
                obj = self.adopt_or_create(body, poll_interval_seconds, timeout_seconds)
                return self._wait(obj, started, timeout_seconds, poll_interval_seconds, owned=True)
            except CancelledError:
                deleted = self.delete(name)
                logger.warning("cancelled: %s %s", what, "deleted" if deleted else "was already gone")
                raise

    def apply(self, body: dict) -> dict:
        """Creates ``body``, or replaces the spec (labels, annotations) of the object there.

        A ``body`` built from the object as it was read carries that read's ``resourceVersion``:
        the API server then refuses the update (409) if the object changed since (another run's
        rollout), instead of silently overwriting it. Without one, the current object's is used.
        """
        name = body["metadata"]["name"]
        existing = self.get(name)
        if existing is None:
            logger.info("creating %s %s/%s", self.kind.kind, self.namespace, name)
            return self.create(body)
        metadata = existing["metadata"]
        read_at = body["metadata"].get("resourceVersion") or metadata.get("resourceVersion")
        desired = {**body, "metadata": {**body["metadata"], "resourceVersion": read_at}}
        logger.info(
            "updating %s %s/%s (generation %s)",
            self.kind.kind,
            self.namespace,
            name,
            metadata.get("generation"),
        )
        return self.replace(desired)

    def run_service(self, body: dict, timeout_seconds: float, poll_interval_seconds: float) -> dict:
        """Applies a long-lived service and waits until its phase says the applied state is ready.

        Never deletes it: a service outlives the run, and a failed rollout is undone by a
        rollback (its owner's decision), not by deleting what serves traffic.

        Raises:
            ResourceTimeoutError: Not Ready in time; the service is left as it is.
            CancelledError: SIGTERM arrived; the service is left as it is.
        """
        _check_bounds(timeout_seconds, poll_interval_seconds)
        started = self.clock()
        with sigterm_raises():
            obj = self.apply(body)
            return self._wait(obj, started, timeout_seconds, poll_interval_seconds, owned=False)

    def _wait(
        self, obj: dict, started: float, timeout_seconds: float, poll_interval_seconds: float, owned: bool
    ) -> dict:
        """Polls until the object's phase is Succeeded; returns it.

        Args:
            owned: A batch job of this run: deleted when the wait times out. Otherwise (a
                long-lived service) it is left in place.

        Raises:
            ResourceFailedError: It failed or disappeared (conditions and primary pod log tail).
            ResourceTimeoutError: Past ``timeout_seconds`` from ``started``.
        """
        name = obj["metadata"]["name"]
        what = f"{self.kind.kind} {self.namespace}/{name}"
        generation = obj["metadata"].get("generation")
        left = "it was deleted" if owned else "it was left in place"
        last_phase = None
        while True:
            phase = self.kind.phase(obj)
            if phase is not last_phase:
                logger.info("%s: %s (generation %s)", what, phase.value, generation)
                last_phase = phase
            if phase is Phase.SUCCEEDED:
                return obj
            if phase is Phase.FAILED:
                raise ResourceFailedError(
                    self._failure(obj, f"{what} failed" + ("" if owned else f"; {left}"))
                )
            if self.clock() - started > timeout_seconds:
                if owned:
                    self.delete(name)
                goal = "finish" if owned else "become ready in the state just applied"
                raise ResourceTimeoutError(
                    self._failure(
                        obj,
                        f"{what} did not {goal} within {timeout_seconds:.0f}s "
                        f"(last phase {phase.value}); {left}",
                    )
                )
            self.sleep(poll_interval_seconds)
            current = self.get(name)
            if current is None:
                raise ResourceFailedError(f"{what} disappeared while running (deleted by someone else?)")
            obj = current


def termination_message(pod: client.V1Pod, container: str) -> str:
    """The termination message ``container`` of ``pod`` left: of its current state when it has
    terminated, else of its previous run (a restarted container); empty when there is none."""
    for status in (pod.status and pod.status.container_statuses) or []:
        if status.name != container:
            continue
        for state in (status.state, status.last_state):
            terminated = state.terminated if state is not None else None
            if terminated is not None and terminated.message:
                return terminated.message
    return ""


def _check_bounds(timeout_seconds: float, poll_interval_seconds: float) -> None:
    if timeout_seconds <= 0 or poll_interval_seconds <= 0:
        raise InvalidParameterError(
            f"timeout_seconds={timeout_seconds} and poll_interval_seconds={poll_interval_seconds} must be > 0"
        )


@dataclasses.dataclass(frozen=True)
class Cluster:
    """The cluster a launcher talks to: an API client and the namespace to work in.

    Attributes:
        api_client: A configured client (tests pass a fake API server's).
        namespace: Where objects are created and read back (the launch namespace): the
            ``launch_namespace`` a run names, else the task pod's own namespace.
        sleep, clock: Injected so that tests run fast; the defaults are real time.
        source_namespace: The task pod's own namespace, where the pipeline run runs; empty
            where it cannot be told.
        service_account: The service account the task pod runs as; empty where it cannot be
            told (:func:`~kfstack.kubernetes.naming.current_service_account`).
    """

    api_client: client.ApiClient
    namespace: str
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    source_namespace: str = ""
    service_account: str = ""

    @classmethod
    def from_environment(cls, stage: str, launch_namespace: str = "") -> Cluster:
        """This pod's cluster (in-cluster config, else the kubeconfig), working in
        ``launch_namespace``, or where that is empty in this pod's own namespace.

        Raises:
            InvalidParameterError: ``launch_namespace`` is not a namespace name; no API call
                was made.
            PlatformNotAvailableError: No Kubernetes API or no namespace; nothing was submitted.
        """
        problem = naming.check_namespace_name(launch_namespace) if launch_namespace else None
        if problem:
            raise InvalidParameterError(
                f"{stage}: launch_namespace={problem}; empty: the task pod's own namespace"
            )
        try:
            namespace = launch_namespace or naming.current_namespace()
            api_client = default_api_client()
        except Exception as err:
            raise PlatformNotAvailableError(
                f"{stage}: platform='kubernetes' needs a Kubernetes API: run the pipeline on a "
                f"Kubeflow cluster, or from a machine with a kubeconfig. Nothing was submitted. "
                f"({type(err).__name__}: {err}) For this machine use platform='local' "
                f"(`kfstack run --local`)."
            ) from err
        return cls(
            api_client=api_client,
            namespace=namespace,
            source_namespace=namespace if not launch_namespace else _own_namespace(),
            service_account=naming.current_service_account(),
        )

    @property
    def launches_outside_own_namespace(self) -> bool:
        """The launch namespace is another than the task pod's own (as far as that is known)."""
        return bool(self.source_namespace) and self.source_namespace != self.namespace

    def audit_labels(self) -> dict[str, str]:
        """The labels that say who created an object in a namespace other than the task pod's
        own: the source namespace and the service account (the run label says which run).
        None in the pod's own namespace, where the run's namespace is the object's. A value
        that is not a valid label value (a service account name over 63 characters) is left
        out rather than cut short."""
        if not self.launches_outside_own_namespace:
            return {}
        labels = {}
        for label, value in (
            (naming.SOURCE_NAMESPACE_LABEL, self.source_namespace),
            (naming.SOURCE_SERVICE_ACCOUNT_LABEL, self.service_account),
        ):
            if not value:
                continue
            if naming.is_label_value(value):
                labels[label] = value
            else:
                logger.warning("audit label %s left out: %r is not a valid label value", label, value)
        return labels

    def serves(self, kind: ResourceKind) -> bool:
        """Whether the API server serves ``kind`` (API discovery: ``GET /apis/<group>/<version>``).

        Discovery is open to every authenticated client (the ``system:discovery`` role), so this
        needs no RBAC of its own.

        Raises:
            PlatformNotAvailableError: Discovery itself failed (not a plain 404).
        """
        try:
            listed = self.api_client.call_api(
                f"/apis/{kind.group}/{kind.version}",
                "GET",
                header_params={"Accept": "application/json"},
                response_type="object",
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
            )
        except rest.ApiException as err:
            if err.status == 404:
                return False
            raise PlatformNotAvailableError(
                f"API discovery of {kind.api_version} failed: {err.status} {err.reason}"
            ) from err
        return any(resource.get("name") == kind.plural for resource in (listed or {}).get("resources", []))

    def launcher(self, kind: ResourceKind) -> ResourceLauncher:
        return ResourceLauncher(kind, self.namespace, self.api_client, sleep=self.sleep, clock=self.clock)


def _own_namespace() -> str:
    """This pod's namespace, or empty where it cannot be told (only the audit labels need it)."""
    try:
        return naming.current_namespace()
    except InvalidParameterError:
        return ""


def launch(
    body: dict, placement: Placement, cluster: Cluster, kinds: dict[str, ResourceKind] | None = None
) -> tuple[dict, dict]:
    """Runs ``body`` in the cluster's namespace by its kind's lifecycle, with the cluster's
    :meth:`~Cluster.audit_labels` added to its own (a batch job and an InferenceService alike).

    Args:
        body: A manifest from a stage's builder.
        placement: Its stage's placement (timeout and poll interval).
        cluster: Where to run it.
        kinds: The kinds to resolve ``body`` with (default: :data:`~.resources.KINDS`).

    Returns:
        The final object (a finished batch job, a ready service) and its
        :func:`resource_reference`.

    Raises:
        See :meth:`ResourceLauncher.run` and :meth:`ResourceLauncher.run_service`.
    """
    kind = kind_of(body, kinds)
    metadata = {**body["metadata"], "namespace": cluster.namespace}
    audit = cluster.audit_labels()
    if audit:
        metadata["labels"] = {**(metadata.get("labels") or {}), **audit}
    body = {**body, "metadata": metadata}
    launcher = cluster.launcher(kind)
    run = launcher.run_service if kind.lifecycle is Lifecycle.SERVICE else launcher.run
    final = run(
        body, timeout_seconds=placement.timeout_seconds, poll_interval_seconds=placement.poll_interval_seconds
    )
    return final, resource_reference(kind, final)


def delete_run_resources(
    run_id: str, cluster: Cluster, kinds: Iterable[ResourceKind] = KINDS.values()
) -> list[str]:
    """Deletes every unfinished batch job of ``kinds`` that run ``run_id`` created.

    Long-lived services are never deleted here: they outlive the run that applied them.
    Finished jobs stay (the v1 jobs' ``ttlSecondsAfterFinished`` removes them; a TrainJob stays
    until deleted) so their status and logs remain readable. A kind the cluster does not serve
    has nothing to delete. A kind that cannot be listed or deleted (e.g. a Role not yet
    updated for it) does not stop the cleanup of the others.

    Returns:
        ``Kind/name`` of what was deleted.

    Raises:
        ResourceFailedError: Some kind could not be cleaned, after every other kind was.
    """
    deleted, problems = [], []
    for kind in kinds:
        if kind.lifecycle is not Lifecycle.BATCH:
            continue
        launcher = cluster.launcher(kind)
        try:
            for obj in launcher.list(naming.run_selector(run_id)):
                if not kind.phase(obj).finished and launcher.delete(obj["metadata"]["name"]):
                    deleted.append(f"{kind.kind}/{obj['metadata']['name']}")
        except rest.ApiException as err:
            problems.append(f"{kind.plural}.{kind.group}: {err.status} {err.reason}")
    if problems:
        raise ResourceFailedError(
            f"cleanup of run {run_id} deleted {', '.join(deleted) or 'nothing'} but could not "
            f"clean {'; '.join(problems)}"
        )
    return deleted


def resource_reference(kind: ResourceKind, obj: dict) -> dict:
    """What a launcher outputs about the object it ran: enough to find it again."""
    metadata = obj.get("metadata") or {}
    return {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "namespace": metadata.get("namespace"),
        "name": metadata.get("name"),
        "uid": metadata.get("uid"),
    }
