"""Creates a custom resource, waits for it, and cleans up after it (STYLE 6).

:func:`launch` is the state machine every Kubernetes launcher runs:

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

:func:`delete_run_resources` is the pipeline's exit-handler cleanup: it deletes whatever a run
left unfinished (a launcher pod killed before its SIGTERM handler ran).

The Kubernetes API is reached through the official client; tests point it at a local fake API
server (there is no cluster where they run).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable

from kubernetes import client, config
from kubernetes.client.rest import ApiException

from kfstack.cancellation import sigterm_raises
from kfstack.errors import CancelledError, InvalidParameterError, ResourceFailedError, ResourceTimeoutError
from kfstack.kubernetes import naming
from kfstack.kubernetes.pods import SecretRefs
from kfstack.kubernetes.resources import Phase, ResourceKind

logger = logging.getLogger(__name__)

LOG_TAIL_LINES = 50


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
        namespace: Where the objects live (:func:`kfstack.kubernetes.naming.current_namespace`).
        api_client: A configured client (default: :func:`default_api_client`).
        sleep, clock: Injected so that tests run fast; the defaults are real time.
    """

    def __init__(self, kind: ResourceKind, namespace: str, api_client: client.ApiClient | None = None,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic):
        self.kind = kind
        self.namespace = namespace
        api_client = api_client or default_api_client()
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.sleep = sleep
        self.clock = clock

    # -- API calls -----------------------------------------------------------------------------

    def _coordinates(self) -> dict:
        return {"group": self.kind.group, "version": self.kind.version,
                "namespace": self.namespace, "plural": self.kind.plural}

    def get(self, name: str) -> dict | None:
        try:
            return self.custom.get_namespaced_custom_object(name=name, **self._coordinates())
        except ApiException as err:
            if err.status == 404:
                return None
            raise

    def create(self, body: dict) -> dict:
        return self.custom.create_namespaced_custom_object(body=body, **self._coordinates())

    def delete(self, name: str) -> bool:
        """Deletes ``name`` and its pods (background propagation); False if it was not there."""
        try:
            self.custom.delete_namespaced_custom_object(
                name=name, body=client.V1DeleteOptions(propagation_policy="Background"),
                **self._coordinates(),
            )
            return True
        except ApiException as err:
            if err.status == 404:
                return False
            raise

    def list(self, label_selector: str) -> list[dict]:
        listed = self.custom.list_namespaced_custom_object(label_selector=label_selector, **self._coordinates())
        return listed.get("items", [])

    def primary_log_tail(self, obj: dict, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` of the primary pod's log, or why there is none."""
        ref = self.kind.primary_pod(obj)
        try:
            name = ref.name
            if name is None:
                listed = self.core.list_namespaced_pod(self.namespace, label_selector=ref.selector)
                if not listed.items:
                    return f"(no pod matches {ref.selector})"
                name = listed.items[0].metadata.name
            log = self.core.read_namespaced_pod_log(name, self.namespace, container=ref.container,
                                                    tail_lines=lines)
            return f"last lines of pod {name}:\n{log.rstrip()}"
        except ApiException as err:
            return f"(the primary pod's log could not be read: {err.status} {err.reason})"

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
            logger.warning("%s %s failed in an earlier attempt; deleting it to start again",
                           self.kind.kind, name)
            self.delete(name)
            self._wait_until_gone(name, timeout_seconds, poll_interval_seconds)
            existing = None
        if existing is not None:
            logger.info("adopting %s %s/%s (phase %s), created by an earlier attempt",
                        self.kind.kind, self.namespace, name, self.kind.phase(existing).value)
            return existing
        try:
            created = self.create(body)
            logger.info("created %s %s/%s", self.kind.kind, self.namespace, name)
            return created
        except ApiException as err:
            if err.status != 409:
                raise
            logger.info("%s %s/%s was created concurrently; adopting it", self.kind.kind, self.namespace, name)
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
        if timeout_seconds <= 0 or poll_interval_seconds <= 0:
            raise InvalidParameterError(
                f"timeout_seconds={timeout_seconds} and poll_interval_seconds={poll_interval_seconds} "
                f"must be > 0"
            )
        name = body["metadata"]["name"]
        what = f"{self.kind.kind} {self.namespace}/{name}"
        started = self.clock()
        with sigterm_raises():
            try:
                obj = self.adopt_or_create(body, poll_interval_seconds, timeout_seconds)
                last_phase = None
                while True:
                    phase = self.kind.phase(obj)
                    if phase is not last_phase:
                        logger.info("%s: %s", what, phase.value)
                        last_phase = phase
                    if phase is Phase.SUCCEEDED:
                        return obj
                    if phase is Phase.FAILED:
                        raise ResourceFailedError(self._failure(obj, f"{what} failed"))
                    if self.clock() - started > timeout_seconds:
                        self.delete(name)
                        raise ResourceTimeoutError(self._failure(
                            obj, f"{what} did not finish within {timeout_seconds:.0f}s "
                                 f"(last phase {phase.value}); it was deleted"))
                    self.sleep(poll_interval_seconds)
                    current = self.get(name)
                    if current is None:
                        raise ResourceFailedError(f"{what} disappeared while running (deleted by someone else?)")
                    obj = current
            except CancelledError:
                deleted = self.delete(name)
                logger.warning("cancelled: %s %s", what, "deleted" if deleted else "was already gone")
                raise


@dataclasses.dataclass(frozen=True)
class LaunchSettings:
    """How a component's launcher talks to the cluster (its pipeline parameters, mostly).

    Attributes:
        secrets: Secret names the launched pods use.
        timeout_seconds: Longest wait for the launched object to finish (> 0).
        poll_interval_seconds: Seconds between status reads (> 0).
        namespace: Where to create; default: this pod's own namespace.
        api_client: Default: in-cluster config, else kubeconfig (tests pass a fake's client).
    """

    secrets: SecretRefs
    timeout_seconds: float = 6 * 3600
    poll_interval_seconds: float = 15
    namespace: str | None = None
    api_client: client.ApiClient | None = None

    @classmethod
    def from_parameters(cls, *, object_store_secret: str, image_pull_secret: str,
                        timeout_seconds: float, poll_interval_seconds: float) -> LaunchSettings:
        """From a component's parameters (Secret names, timeouts)."""
        return cls(secrets=SecretRefs(object_store=object_store_secret, image_pull=image_pull_secret),
                   timeout_seconds=timeout_seconds, poll_interval_seconds=poll_interval_seconds)


def launch(kind: ResourceKind, body: dict, settings: LaunchSettings) -> tuple[dict, dict]:
    """Creates (or adopts) ``body`` in the settings' namespace and waits for it to succeed.

    Returns:
        The finished object and its :func:`resource_reference`.

    Raises:
        See :meth:`ResourceLauncher.run`.
    """
    namespace = settings.namespace or naming.current_namespace()
    body = {**body, "metadata": {**body["metadata"], "namespace": namespace}}
    launcher = ResourceLauncher(kind, namespace, settings.api_client)
    final = launcher.run(body, timeout_seconds=settings.timeout_seconds,
                         poll_interval_seconds=settings.poll_interval_seconds)
    return final, resource_reference(kind, final)


def delete_run_resources(run_id: str, *, namespace: str, kinds: Iterable[ResourceKind],
                         api_client: client.ApiClient | None = None) -> list[str]:
    """Deletes every unfinished object of ``kinds`` that run ``run_id`` created.

    Finished objects stay (their ``ttlSecondsAfterFinished`` removes them) so their status and
    logs remain readable. Returns ``Kind/name`` of what was deleted.
    """
    deleted = []
    api_client = api_client or default_api_client()
    for kind in kinds:
        launcher = ResourceLauncher(kind, namespace, api_client)
        for obj in launcher.list(naming.run_selector(run_id)):
            if not kind.phase(obj).finished and launcher.delete(obj["metadata"]["name"]):
                deleted.append(f"{kind.kind}/{obj['metadata']['name']}")
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
