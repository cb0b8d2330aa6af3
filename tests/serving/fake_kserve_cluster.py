"""A KServe cluster for the rollout tests, with no cluster: the fake API server
(tests/kubernetes/fake_api.py) stores the InferenceService, a fake KServe controller
(tests/kubernetes/fake_kserve.py) writes the status a real one would, and the addresses it
writes are routed to real flights predictors on loopback, one per model a test rolls out.

The fixtures over these (``kserve_predictors``, ``kserve_holdout``, ``kserve_cluster``) are in
tests/conftest.py: the KServe rollout tests and the exit handler's (cleanup_run) share them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from kfstack.kubernetes import inference_service as isvc
from kfstack.kubernetes import naming, node_pools
from kfstack.kubernetes.launcher import Cluster
from kfstack.kubernetes.placement import Placement
from kfstack.serving.canary import CanaryThresholds
from kfstack.serving.kserve_rollout import KServeRollout
from kfstack.serving.rollout import roll_out
from kfstack_examples.flights import predictor
from kfstack_examples.flights.predictor import DEFAULT_MODEL_NAME
from tests.kubernetes.fake_api import FakeKubernetesApi
from tests.kubernetes.fake_kserve import NOWHERE, FakeKServeController
from tests.serving.conftest import Predictor

NAMESPACE = "team-ml"
MODELS = {
    "good": "s3://models/flights/good",
    "constant": "s3://models/flights/constant",
    "broken": "s3://models/flights/broken",  # its pods never answer
}
PLACEMENT = Placement(node_pool="serving", timeout_seconds=60, poll_interval_seconds=1)

# What a test gets: the launcher's view of the cluster, the fake API server, the fake controller.
FakeCluster = tuple[Cluster, FakeKubernetesApi, FakeKServeController]


@contextlib.contextmanager
def predictors(model_dir: str, run_dir: str) -> Iterator[dict[str, str]]:
    """A real predictor per model the tests roll out (the same trained model; one answering a
    constant), named ``flights-delay`` as KServe's runtime names it after the service: each
    model's storage URI -> the URL that serves it."""
    good = Predictor(model_dir, run_dir, service="good")
    constant = Predictor(
        model_dir,
        run_dir,
        "--fault=constant",
        module="tests.serving.faulty_predictor",
        service="constant",
    )
    try:
        yield {MODELS["good"]: good.url, MODELS["constant"]: constant.url, MODELS["broken"]: NOWHERE}
    finally:
        good.stop()
        constant.stop()


@contextlib.contextmanager
def fake_cluster(servers: dict[str, str]) -> Iterator[FakeCluster]:
    """A fresh fake API server whose KServe controller routes each model to ``servers``."""
    with FakeKubernetesApi() as api:
        controller = FakeKServeController(api, NAMESPACE, servers)
        api.on_read = controller
        yield Cluster(api.api_client(), NAMESPACE, sleep=lambda s: None), api, controller


def request(mode: str, run: str, model: str) -> isvc.ServingRequest:
    return isvc.ServingRequest(
        name=DEFAULT_MODEL_NAME,
        mode=mode,
        storage_uri=MODELS[model],
        model_version=run,
        profile=node_pools.get_profile("serving"),
        labels=naming.run_labels(run, "model-deployment"),
        model_format=predictor.MODEL_FORMAT,
        runtime=predictor.RUNTIME,
    )


def rollout(cluster: FakeCluster, mode: str, run: str, model: str = "good") -> KServeRollout:
    api_cluster, _, controller = cluster
    return KServeRollout(request(mode, run, model), api_cluster, PLACEMENT, reach=controller.reach)


def deploy(r: KServeRollout, holdout):
    return roll_out(r, r.request.model_version, holdout, CanaryThresholds(), batch_size=20)


def live(cluster: FakeCluster) -> dict:
    """The InferenceService once the controller has reconciled what was last applied."""
    _, api, controller = cluster
    controller(DEFAULT_MODEL_NAME)
    return api.objects[("inferenceservices", NAMESPACE, DEFAULT_MODEL_NAME)]


def serving_model(cluster: FakeCluster) -> str:
    """The storageUri that takes 100% of the traffic now, by the status the controller wrote."""
    _, _, controller = cluster
    service = live(cluster)
    if isvc.kserve_mode(service) == isvc.STANDARD:
        assert not service["status"]["canaryStatuses"]
        return service["spec"]["predictor"]["model"]["storageUri"]
    traffic = service["status"]["components"]["predictor"]["traffic"]
    (full,) = [t for t in traffic if t["percent"] == 100]
    return controller.model_at[f"{full['tag']}-{DEFAULT_MODEL_NAME}-predictor.{NAMESPACE}.svc.cluster.local"]
