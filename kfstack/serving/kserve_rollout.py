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

from kfstack.errors import DeploymentFailedError
from kfstack.kubernetes import inference_service as isvc
from kfstack.kubernetes import naming
from kfstack.kubernetes.launcher import Cluster, launch, resource_reference
from kfstack.kubernetes.placement import Placement
from kfstack.kubernetes.resources import INFERENCE_SERVICE
from kfstack.serving.canary import Endpoint

# What an InferenceService made by hand (without kfstack's annotation) is called as production.
UNVERSIONED = "unversioned"


class KServeRollout:
    """:class:`~kfstack.serving.rollout.Rollout` on a cluster.

    Args:
        request: The rollout (the service, the model, its autoscaling and canary share).
        cluster: Where the service lives.
        placement: How long to wait for a state to be Ready, and how often to look.
        reach: Maps an in-cluster base URL to the one this process calls (identity on a
            cluster; tests point it at predictors on loopback).
        headers: Sent with every analysis request (e.g. an ``Authorization`` an auth proxy needs).
    """

    def __init__(
        self,
        request: isvc.ServingRequest,
        cluster: Cluster,
        placement: Placement,
        reach: Callable[[str], str] = lambda url: url,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.request = request
        self.cluster = cluster
        self.placement = placement
        self.reach = reach
        self.headers = dict(headers or {})
        self.mode = request.mode
        self._launcher = cluster.launcher(INFERENCE_SERVICE)
        self._last: dict | None = None
        self._canary = False

    def _live(self) -> dict | None:
        return self._launcher.get(self.request.name)

    def _apply(self, body: dict) -> dict:
        self._last, _ = launch(body, self.placement, self.cluster)
        return self._last

    def _endpoint(self, role: str, base: str) -> Endpoint:
        url = f"{self.reach(base)}/v1/models/{self.request.name}:predict"
        return Endpoint(role, url, self.headers)

    def production_version(self) -> str | None:
        live = self._live()
        if live is None:
            return None
        production, _ = isvc.model_versions(live)
        return production or UNVERSIONED

    def deploy_first(self) -> Endpoint:
        final = self._apply(isvc.first_rollout(self.request))
        stable, _ = isvc.predictor_urls(final, self.cluster.namespace)
        return self._endpoint("stable", stable)

    def deploy_canary(self) -> tuple[Endpoint, Endpoint]:
        live = self._live()
        if live is None:
            raise DeploymentFailedError(
                f"InferenceService {self.request.name} is gone: nothing to canary against"
            )
        self._canary = True
        final = self._apply(isvc.canary_rollout(live, self.request))
        stable, canary = isvc.predictor_urls(final, self.cluster.namespace)
        if not stable or canary is None:
            raise DeploymentFailedError(
                f"InferenceService {self.request.name} is Ready but its status names no separate stable "
                f"and canary address (Serverless needs tag routing: {isvc.TAG_ROUTING_ANNOTATION})"
            )
        return self._endpoint("stable", stable), self._endpoint("canary", canary)

    def promote(self, details: Mapping[str, Any]) -> None:
        if not self._canary:
            return  # a first deployment serves 100% already
        live = self._live()
        if live is None:
            raise DeploymentFailedError(f"InferenceService {self.request.name} is gone: nothing to promote")
        self._apply(isvc.promoted(live, self.request))

    def roll_back(self, details: Mapping[str, Any]) -> None:
        live = self._live()
        # Only this rollout's own canary: one that something else put there is not ours to undo.
        if live is not None and isvc.model_versions(live)[1] == self.request.model_version:
            self._apply(isvc.rolled_back(live))

    def reference(self) -> dict[str, Any]:
        return resource_reference(INFERENCE_SERVICE, self._last or self._live() or {})


def roll_back_run_canaries(run_id: str, cluster: Cluster) -> list[str]:
    """The exit handler's rollback: every InferenceService whose canary run ``run_id`` started
    and left unfinished (its process was killed before it could roll back) is rolled back.
    Applied, not awaited: the exit handler must not hang on a slow revision.

    Returns:
        ``InferenceService/name`` of each service rolled back.
    """
    if not cluster.serves(INFERENCE_SERVICE):
        return []
    launcher = cluster.launcher(INFERENCE_SERVICE)
    rolled_back = []
    for live in launcher.list(naming.run_selector(run_id)):
        if isvc.canary_in_progress(live):
            launcher.apply(isvc.rolled_back(live))
            rolled_back.append(f"InferenceService/{live['metadata']['name']}")
    return rolled_back
