"""The Kubernetes rollout: one KServe InferenceService, updated in place.

Each step applies the InferenceService as :mod:`kfstack.kubernetes.inference_service` builds it
and waits until its status shows that state Ready (a long-lived service: a timeout or a cancel
leaves it as it is, :meth:`~kfstack.kubernetes.launcher.ResourceLauncher.run_service`). The
analysis reaches the stable and canary predictors at their in-cluster addresses
(:func:`~kfstack.kubernetes.inference_service.predictor_urls`); in a Kubeflow profile namespace
with Istio sidecar injection those calls need an AuthorizationPolicy that admits the pipeline's
pods (``manifests/README.md#kserve``).

Which version serves is read from the service's own annotations, so the next run -- of this
pipeline or of a retraining one -- starts from what this one left.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.client.rest import ApiException

from kfstack.errors import DeploymentFailedError, ResourceFailedError, ResourceTimeoutError
from kfstack.kubernetes import inference_service as isvc
from kfstack.kubernetes import naming
from kfstack.kubernetes.launcher import Cluster, launch, resource_reference
from kfstack.kubernetes.placement import Placement
from kfstack.kubernetes.resources import INFERENCE_SERVICE, Phase
from kfstack.serving.canary import Endpoint, answers
from kfstack.serving.protocols import V1_PROBABILITIES, ServingProtocol


class KServeRollout:
    """:class:`~kfstack.serving.rollout.Rollout` on a cluster.

    Args:
        request: The rollout (the service, the model, its autoscaling and canary share); its
            namespace is the cluster's.
        cluster: Where the service lives.
        placement: How long to wait for a state to be Ready, and how often to look.
        reach: Maps an in-cluster base URL to the one this process calls (identity on a
            cluster; tests point it at predictors on loopback).
        headers: Sent with every analysis request (e.g. an ``Authorization`` an auth proxy needs).
        protocol: How the analysis asks the predictors for predictions.
    """

    def __init__(
        self,
        request: isvc.ServingRequest,
        cluster: Cluster,
        placement: Placement,
        reach: Callable[[str], str] = lambda url: url,
        headers: Mapping[str, str] | None = None,
        protocol: ServingProtocol = V1_PROBABILITIES,
    ) -> None:
        # The service's namespace is the cluster's: its GPU and queue queries select it.
        self.request = request.in_namespace(cluster.namespace)
        self.cluster = cluster
        self.placement = placement
        self.reach = reach
        self.headers = dict(headers or {})
        self.protocol = protocol
        self.mode = request.mode
        self._launcher = cluster.launcher(INFERENCE_SERVICE)
        self._last: dict | None = None
        self._canary = False

    def _live(self) -> dict | None:
        return self._launcher.get(self.request.name)

    def _apply(self, body: dict) -> dict:
        self._last, _ = launch(body, self.placement, self.cluster)
        return self._last

    def _ready_url(self, live: dict) -> str:
        """The stable predictor's readiness path, as this process reaches it."""
        stable, _ = isvc.predictor_urls(live, self.cluster.namespace)
        return f"{self.reach(stable)}/v2/models/{self.request.name}/ready"

    def _endpoint(self, role: str, base: str) -> Endpoint:
        url = f"{self.reach(base)}{self.protocol.path(self.request.name)}"
        return Endpoint(role, url, self.headers, self.protocol)

    def production_version(self) -> str | None:
        live = self._live()
        return None if live is None else isvc.production_version(live)

    def deploy_first(self) -> Endpoint:
        trial = self._live()  # a first deployment on trial that did not answer, replaced in place
        final = self._apply(isvc.first_rollout(self.request))
        # Another version's trial: wait until the new model took over. (The same version's, a
        # retried task's, is the same spec: nothing to take over, its status is already ours.)
        if trial is not None and isvc.model_versions(trial)[1] != self.request.model_version:
            final = self._await_replacement(trial, "the new first deployment")
        stable, _ = isvc.predictor_urls(final, self.cluster.namespace)
        return self._endpoint("stable", stable)

    def _await_replacement(self, before: dict, what: str) -> dict:
        """After an update that replaces what serves (a first deployment over another, a
        Serverless promotion), waits until the replacement is the one that answers: the status
        read right after the update can still show ``before``'s state Ready (which reads as
        applied). Serverless: Knative's latest created revision is a new one, and ready at 100%
        (the address stays the same). Standard: the new predictor -- a new name, so its own
        Deployment and Service -- says it is ready.

        Raises:
            ResourceTimeoutError: Not within the placement's timeout; the service is left as it is.
        """
        old_revision = _latest_created(before)
        started = self.cluster.clock()
        while True:
            live = self._live()
            if live is not None and INFERENCE_SERVICE.phase(live) is Phase.SUCCEEDED:
                if isvc.kserve_mode(live) == isvc.SERVERLESS:
                    if _latest_created(live) not in (None, old_revision):
                        self._last = live
                        return live
                elif answers(self._ready_url(live), self.headers):
                    self._last = live
                    return live
            if self.cluster.clock() - started > self.placement.timeout_seconds:
                raise ResourceTimeoutError(
                    f"InferenceService {self.request.name}: {what} did not take over within "
                    f"{self.placement.timeout_seconds}s; it was left in place"
                )
            self.cluster.sleep(self.placement.poll_interval_seconds)

    def deploy_canary(self) -> tuple[Endpoint, Endpoint]:
        live = self._live()
        if live is None:
            raise DeploymentFailedError(
                f"InferenceService {self.request.name} is gone: nothing to canary against"
            )
        self._canary = True
        if self._own_canary(live):
            # A retry of a task killed mid-analysis: its canary starts over from the stable state.
            self._apply(isvc.rolled_back(live))
            live = self._live() or live
        final = self._apply(isvc.canary_rollout(live, self.request))
        stable, canary = isvc.predictor_urls(final, self.cluster.namespace)
        if not stable or canary is None:
            raise DeploymentFailedError(
                f"InferenceService {self.request.name} is Ready but its status names no separate stable "
                f"and canary address (Serverless needs tag routing: {isvc.TAG_ROUTING_ANNOTATION})"
            )
        return self._endpoint("stable", stable), self._endpoint("canary", canary)

    def _own_canary(self, live: dict) -> bool:
        return isvc.canary_in_progress(live) and isvc.model_versions(live)[1] == self.request.model_version

    def promote(self, details: Mapping[str, Any]) -> None:
        live = self._live()
        if live is None:
            raise DeploymentFailedError(f"InferenceService {self.request.name} is gone: nothing to promote")
        # A first deployment serves 100% already: its version is only recorded as production.
        if not self._canary:
            self._apply(isvc.confirmed(live, self.request))
            return
        self._apply(isvc.promoted(live, self.request))
        if self.mode == isvc.SERVERLESS:
            # The promoted spec is a new revision of the same model (no canary label, new
            # annotations); until it is Ready, Knative keeps the analysed revision at 100% and
            # a status read now can show that as the promotion applied.
            self._await_replacement(live, "the promoted revision (the analysed one serves meanwhile)")

    def roll_back(self, details: Mapping[str, Any], settle: bool = True) -> None:
        live = self._live()
        # Only this rollout's own canary: one that something else put there is not ours to undo.
        if live is None or not self._own_canary(live):
            return
        if settle:
            self._apply(isvc.rolled_back(live))
        else:
            self._launcher.apply(isvc.rolled_back(live))

    def reference(self) -> dict[str, Any]:
        return resource_reference(INFERENCE_SERVICE, self._last or self._live() or {})


def _latest_created(service: dict) -> str | None:
    predictor = ((service.get("status") or {}).get("components") or {}).get("predictor") or {}
    return predictor.get("latestCreatedRevision")


def roll_back_run_canaries(run_id: str, cluster: Cluster) -> list[str]:
    """The exit handler's rollback: every InferenceService whose canary run ``run_id`` started
    and left unfinished (its process was killed before it could roll back) is rolled back.

    The run's canary is one in progress on a service carrying the run's label (a canary rollout
    labels the service with its run) and kfstack's annotation of the version being rolled out; a
    canary made otherwise is left alone. Applied, not awaited: the exit handler must not hang on
    a slow revision.

    Returns:
        ``InferenceService/name`` of each service rolled back.

    Raises:
        ResourceFailedError: Some could not be rolled back, after every other one was.
    """
    if not cluster.serves(INFERENCE_SERVICE):
        return []
    launcher = cluster.launcher(INFERENCE_SERVICE)
    rolled_back, problems = [], []
    for live in launcher.list(naming.run_selector(run_id)):
        name = live["metadata"]["name"]
        if not (isvc.canary_in_progress(live) and isvc.model_versions(live)[1]):
            continue
        try:
            launcher.apply(isvc.rolled_back(live))
            rolled_back.append(f"InferenceService/{name}")
        except ApiException as err:
            problems.append(f"InferenceService/{name}: {err.status} {err.reason}")
    if problems:
        raise ResourceFailedError(
            f"run {run_id}'s canary could not be rolled back: {'; '.join(problems)} "
            f"(rolled back: {', '.join(rolled_back) or 'nothing'})"
        )
    return rolled_back
