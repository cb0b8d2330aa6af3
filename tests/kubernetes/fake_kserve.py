"""What KServe's controller (and Knative's, in Serverless mode) would write into an
InferenceService's status, for the fake API server: no cluster runs here.

:class:`FakeKServeController` is the fake API's ``on_read`` hook. On every read it reconciles at
once: the status shows the spec applied and Ready, as
:func:`kfstack.kubernetes.resources.inference_service_phase` reads it, with the addresses the
real controllers publish -- Knative's ``latest``/``prev`` tag Services of each revision, or
Standard mode's per-predictor Services. It also records which model (``storageUri``) each
address serves, so a test can route the analysis to real predictors on loopback
(:meth:`reach`).
"""

from __future__ import annotations

import json
import urllib.parse

from kfstack.kubernetes.resources import STANDARD, kserve_mode

READY = {"type": "Ready", "status": "True"}
DOMAIN = "example.com"
# Loopback port 9 (discard): nothing listens, every connection is refused.
NOWHERE = "http://127.0.0.1:9"


class FakeKServeController:
    """Reconciles the fake API's InferenceServices (see the module docstring).

    Args:
        fake_api: The :class:`~tests.kubernetes.fake_api.FakeKubernetesApi` to reconcile.
        namespace: Where the services live.
        servers: storageUri -> base URL of a real predictor serving that model.
    """

    def __init__(self, fake_api, namespace: str, servers: dict[str, str]) -> None:
        self.fake_api = fake_api
        self.namespace = namespace
        self.servers = servers
        self.model_at: dict[str, str] = {}  # host -> storageUri it serves
        self._revisions: dict[str, list[tuple[str, str]]] = {}  # service -> (template, storageUri)
        self._rolled_out: dict[str, int] = {}  # service -> index of its rolled-out revision

    def __call__(self, name: str) -> None:
        obj = self.fake_api.objects.get(("inferenceservices", self.namespace, name))
        if obj is None:
            return
        obj["status"] = self._standard(obj) if kserve_mode(obj) == STANDARD else self._serverless(obj)

    def _standard(self, obj: dict) -> dict:
        name, spec = obj["metadata"]["name"], obj["spec"]
        for predictor in [spec["predictor"], *(c["predictor"] for c in spec.get("canary") or [])]:
            host = f"{name}-{predictor['name']}-predictor.{self.namespace}.svc.cluster.local"
            self.model_at[host] = predictor["model"]["storageUri"]
        canaries = [{"type": "CanaryPredictorReady", "status": "True"}] if spec.get("canary") else []
        return {
            "conditions": [READY, *canaries],
            "canaryStatuses": [
                {"name": c["predictor"]["name"], "trafficPercent": c["trafficPercent"], "ready": True}
                for c in spec.get("canary") or []
            ],
        }

    def _serverless(self, obj: dict) -> dict:
        name, predictor = obj["metadata"]["name"], obj["spec"]["predictor"]
        revisions = self._revisions.setdefault(name, [])
        uri = predictor["model"]["storageUri"]
        template = _revision_template(obj)
        if not revisions or revisions[-1][0] != template:  # a new template: a new Knative revision
            revisions.append((template, uri))
        latest = len(revisions) - 1
        percent = predictor.get("canaryTrafficPercent")
        if percent is None or name not in self._rolled_out:
            self._rolled_out[name] = latest  # promoted, or the first rollout
            percent = 100
        previous = self._rolled_out[name]

        def route(tag: str, revision: int, share: int, is_latest: bool) -> dict:
            # Knative's tag Service in the namespace (what a pod calls), and the external URL the
            # status shows.
            self.model_at[f"{tag}-{name}-predictor.{self.namespace}.svc.cluster.local"] = revisions[revision][
                1
            ]
            return {
                "tag": tag,
                "revisionName": f"{name}-predictor-{revision + 1:05d}",
                "latestRevision": is_latest,
                "percent": share,
                "url": f"http://{tag}-{name}-predictor-{self.namespace}.{DOMAIN}",
            }

        traffic = [route("latest", latest, percent, True)]
        if percent < 100:
            traffic.append(route("prev", previous, 100 - percent, False))
        self.model_at[f"{name}-predictor.{self.namespace}.svc.cluster.local"] = revisions[previous][1]
        revision_name = f"{name}-predictor-{latest + 1:05d}"
        return {
            "conditions": [READY],
            "components": {
                "predictor": {
                    "traffic": traffic,
                    "latestCreatedRevision": revision_name,
                    "latestReadyRevision": revision_name,
                    "latestRolledoutRevision": f"{name}-predictor-{previous + 1:05d}",
                }
            },
        }

    def reach(self, url: str) -> str:
        """The loopback predictor serving the model an in-cluster address routes to; an address
        no Service has yet (the controller has not reconciled) reaches nothing, as an unknown
        name does on a cluster."""
        model = self.model_at.get(urllib.parse.urlsplit(url).hostname or "")
        return self.servers[model] if model else NOWHERE


def _revision_template(obj: dict) -> str:
    """What KServe 0.20 writes into the Knative Service's revision template, as far as a spec
    decides it: the predictor's pod spec and labels, and the InferenceService's labels and
    annotations (``pkg/controller/v1beta1/inferenceservice/components/predictor.go``,
    ``buildObjectMeta``; ``reconcilers/knative/ksvc_reconciler.go`` puts them on
    ``spec.template``; a cluster's serviceLabelDisallowedList/serviceAnnotationDisallowedList,
    empty here, would filter them). ``canaryTrafficPercent`` is the route's, not the template's.
    Knative makes a revision of every new template (``pkg/reconciler/configuration``, one per
    Configuration generation)."""
    predictor = {k: v for k, v in obj["spec"]["predictor"].items() if k != "canaryTrafficPercent"}
    metadata = obj["metadata"]
    return json.dumps(
        [predictor, metadata.get("labels") or {}, metadata.get("annotations") or {}], sort_keys=True
    )
