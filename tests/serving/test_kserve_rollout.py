"""The Kubernetes rollout against a fake API server, in both deployment modes.

No cluster runs here. The fake API server (tests/kubernetes/fake_api.py) stores the
InferenceService; a fake KServe controller (tests/kubernetes/fake_kserve.py) writes the status a
real one would, with the in-cluster addresses of the stable and canary predictors; and those
addresses are routed to real predictors on loopback serving the model each one names, so the
analysis replays real requests. What is checked: the objects applied at each step, what serves
at the end, the decision, and the exit handler's rollback of a canary whose task was killed.
"""

from __future__ import annotations

import pytest
from kubernetes.client.rest import ApiException

from kfstack.components.common.cleanup_run.core import cleanup_run_resources
from kfstack.errors import DeploymentFailedError
from kfstack.kubernetes import inference_service as isvc
from kfstack.kubernetes import naming, node_pools
from kfstack.kubernetes.launcher import Cluster
from kfstack.kubernetes.placement import Placement
from kfstack.kubernetes.resources import INFERENCE_SERVICE
from kfstack.serving.canary import PROMOTE, ROLLBACK, CanaryThresholds
from kfstack.serving.kserve_rollout import KServeRollout
from kfstack.serving.production import ProductionModel, kserve_production_model
from kfstack.serving.rollout import FIRST, roll_out
from kfstack_examples.flights import predictor
from kfstack_examples.flights.predictor import DEFAULT_MODEL_NAME
from tests.kubernetes.fake_api import FakeKubernetesApi
from tests.kubernetes.fake_kserve import NOWHERE, FakeKServeController
from tests.serving.conftest import Predictor, read_holdout

NAMESPACE = "team-ml"
MODELS = {
    "good": "s3://models/flights/good",
    "constant": "s3://models/flights/constant",
    "broken": "s3://models/flights/broken",  # its pods never answer
}
PLACEMENT = Placement(node_pool="serving", timeout_seconds=60, poll_interval_seconds=1)


@pytest.fixture(scope="module")
def servers(trained, tmp_path_factory):
    """A real predictor per model the tests roll out (the same trained model; one answering a
    constant), named ``flights-delay`` as KServe's runtime names it after the service."""
    run_dir = str(tmp_path_factory.mktemp("kserve-predictors"))
    good = Predictor(trained["model"], run_dir, service="good")
    constant = Predictor(
        trained["model"],
        run_dir,
        "--fault=constant",
        module="tests.serving.faulty_predictor",
        service="constant",
    )
    yield {MODELS["good"]: good.url, MODELS["constant"]: constant.url, MODELS["broken"]: NOWHERE}
    good.stop()
    constant.stop()


@pytest.fixture(scope="module")
def holdout(trained):
    return read_holdout(trained["features"], 200)


@pytest.fixture
def cluster(servers):
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


def rollout(cluster, mode: str, run: str, model: str = "good") -> KServeRollout:
    api_cluster, _, controller = cluster
    return KServeRollout(request(mode, run, model), api_cluster, PLACEMENT, reach=controller.reach)


def deploy(r: KServeRollout, holdout):
    return roll_out(r, r.request.model_version, holdout, CanaryThresholds(), batch_size=20)


def live(cluster) -> dict:
    """The InferenceService once the controller has reconciled what was last applied."""
    _, api, controller = cluster
    controller(DEFAULT_MODEL_NAME)
    return api.objects[("inferenceservices", NAMESPACE, DEFAULT_MODEL_NAME)]


def serving_model(cluster) -> str:
    """The storageUri that takes 100% of the traffic now, by the status the controller wrote."""
    _, _, controller = cluster
    service = live(cluster)
    if isvc.kserve_mode(service) == isvc.STANDARD:
        assert not service["status"]["canaryStatuses"]
        return service["spec"]["predictor"]["model"]["storageUri"]
    traffic = service["status"]["components"]["predictor"]["traffic"]
    (full,) = [t for t in traffic if t["percent"] == 100]
    return controller.model_at[f"{full['tag']}-{DEFAULT_MODEL_NAME}-predictor.{NAMESPACE}.svc.cluster.local"]


@pytest.mark.parametrize("mode", [isvc.SERVERLESS, isvc.STANDARD])
def test_first_rollout_then_a_constant_canary_rolled_back_then_a_good_one_promoted(cluster, holdout, mode):
    _, api, _ = cluster
    outcome = deploy(rollout(cluster, mode, "run-1"), holdout)
    assert (outcome.decision, outcome.production_version) == (FIRST, "run-1")
    assert api.count("POST") == 1
    assert isvc.model_versions(live(cluster)) == ("run-1", None)

    outcome = deploy(rollout(cluster, mode, "run-2", "constant"), holdout)
    assert outcome.decision == ROLLBACK, outcome.markdown()
    assert outcome.report.stable.errors == 0
    assert isvc.model_versions(live(cluster)) == ("run-1", None)
    assert not isvc.canary_in_progress(live(cluster))
    assert serving_model(cluster) == MODELS["good"]
    if mode == isvc.SERVERLESS:  # the rollback pins the previous revision
        assert live(cluster)["spec"]["predictor"]["canaryTrafficPercent"] == 0

    outcome = deploy(rollout(cluster, mode, "run-3"), holdout)
    assert outcome.decision == PROMOTE, outcome.markdown()
    assert (outcome.previous_version, outcome.production_version) == ("run-1", "run-3")
    assert isvc.model_versions(live(cluster)) == ("run-3", None)
    assert serving_model(cluster) == MODELS["good"]
    assert live(cluster)["metadata"]["labels"][naming.RUN_LABEL] == "run-3"
    # One service all along: created once, then only updated, never deleted.
    assert api.count("POST") == 1 and api.count("DELETE") == 0


@pytest.mark.parametrize("mode", [isvc.SERVERLESS, isvc.STANDARD])
def test_the_exit_handler_rolls_back_a_canary_whose_task_was_killed(cluster, holdout, mode):
    api_cluster, api, _ = cluster
    deploy(rollout(cluster, mode, "run-1"), holdout)
    # The deploy task applies its canary and is killed before it can decide.
    rollout(cluster, mode, "run-2", "constant").deploy_canary()
    assert isvc.model_versions(live(cluster)) == ("run-1", "run-2")
    # Another run's cleanup leaves it alone; its own run's exit handler rolls it back.
    assert cleanup_run_resources(platform="kubernetes", run_id="run-1", cluster=api_cluster) == []
    assert isvc.canary_in_progress(live(cluster))
    rolled = cleanup_run_resources(platform="kubernetes", run_id="run-2", cluster=api_cluster)
    assert rolled == [f"InferenceService/{DEFAULT_MODEL_NAME}"]
    assert isvc.model_versions(live(cluster)) == ("run-1", None)
    assert not isvc.canary_in_progress(live(cluster))
    assert serving_model(cluster) == MODELS["good"]
    # And the next deployment starts from there.
    assert deploy(rollout(cluster, mode, "run-3"), holdout).decision == PROMOTE
    assert api.count("DELETE") == 0


def test_a_canary_against_a_service_in_the_other_mode_is_refused_and_nothing_changes(cluster, holdout):
    _, api, _ = cluster
    deploy(rollout(cluster, isvc.SERVERLESS, "run-1"), holdout)
    before = api.count("PUT")
    with pytest.raises(Exception, match="KServe does not change a service's mode"):
        deploy(rollout(cluster, isvc.STANDARD, "run-2"), holdout)
    assert api.count("PUT") == before
    assert isvc.model_versions(live(cluster)) == ("run-1", None)


@pytest.mark.parametrize("mode", [isvc.SERVERLESS, isvc.STANDARD])
def test_a_first_deployment_that_does_not_answer_is_not_production_and_is_deployed_again(
    cluster, holdout, mode
):
    _, api, _ = cluster
    with pytest.raises(DeploymentFailedError, match="did not serve"):
        deploy(rollout(cluster, mode, "run-1", "broken"), holdout)
    # Left on trial: not production, so the next run does not canary against it...
    assert isvc.model_versions(live(cluster)) == (None, "run-1")
    assert rollout(cluster, mode, "run-2").production_version() is None
    # ...it deploys first again, in place.
    outcome = deploy(rollout(cluster, mode, "run-2"), holdout)
    assert (outcome.decision, outcome.previous_version) == (FIRST, None)
    assert isvc.model_versions(live(cluster)) == ("run-2", None)
    assert serving_model(cluster) == MODELS["good"]
    assert api.count("POST") == 1 and api.count("DELETE") == 0


@pytest.mark.parametrize("mode", [isvc.SERVERLESS, isvc.STANDARD])
def test_a_retried_task_starts_its_own_killed_canary_over(cluster, holdout, mode):
    deploy(rollout(cluster, mode, "run-1"), holdout)
    rollout(cluster, mode, "run-2", "constant").deploy_canary()  # killed here
    # KFP retries the task (the same run: the same version).
    outcome = deploy(rollout(cluster, mode, "run-2"), holdout)
    assert outcome.decision == PROMOTE, outcome.markdown()
    assert isvc.model_versions(live(cluster)) == ("run-2", None)


def test_the_exit_handler_leaves_a_canary_it_did_not_start(cluster, holdout):
    api_cluster, api, _ = cluster
    deploy(rollout(cluster, isvc.SERVERLESS, "run-1"), holdout)
    # Someone canaries by hand on the service the run last labelled (no kfstack annotation).
    service = live(cluster)
    service["spec"]["predictor"]["canaryTrafficPercent"] = 20
    api.put("inferenceservices", NAMESPACE, service)
    assert cleanup_run_resources(platform="kubernetes", run_id="run-1", cluster=api_cluster) == []
    assert live(cluster)["spec"]["predictor"]["canaryTrafficPercent"] == 20


def test_an_update_from_a_stale_read_is_refused_not_overwriting(cluster, holdout):
    """Two rollouts that read the same service: the second update is refused (409) instead of
    silently replacing the first's canary."""
    api_cluster, _, _ = cluster
    deploy(rollout(cluster, isvc.SERVERLESS, "run-1"), holdout)
    stale = live(cluster)
    launcher = api_cluster.launcher(INFERENCE_SERVICE)
    launcher.apply(isvc.canary_rollout(stale, request(isvc.SERVERLESS, "run-2", "good")))
    with pytest.raises(ApiException) as refused:
        launcher.apply(isvc.canary_rollout(stale, request(isvc.SERVERLESS, "run-3", "good")))
    assert refused.value.status == 409
    assert isvc.model_versions(live(cluster)) == ("run-1", "run-2")


@pytest.mark.parametrize("mode", [isvc.SERVERLESS, isvc.STANDARD])
def test_a_retraining_run_finds_the_production_model_where_the_rollouts_left_it(cluster, holdout, mode):
    api_cluster, api, _ = cluster
    assert kserve_production_model(api_cluster, DEFAULT_MODEL_NAME) is None  # no service yet
    deploy(rollout(cluster, mode, "run-1"), holdout)
    live(cluster)
    assert kserve_production_model(api_cluster, DEFAULT_MODEL_NAME) == ProductionModel(
        "run-1", MODELS["good"]
    )

    # While a canary is analysed, and after it was rolled back -- when a Serverless spec still
    # names the rejected model -- production is what went into production.
    undecided = rollout(cluster, mode, "run-2", "constant")
    undecided.deploy_canary()
    live(cluster)
    production = ProductionModel("run-1", MODELS["good"])
    assert kserve_production_model(api_cluster, DEFAULT_MODEL_NAME) == production
    undecided.roll_back({})
    live(cluster)
    assert kserve_production_model(api_cluster, DEFAULT_MODEL_NAME) == production
    deploy(rollout(cluster, mode, "run-3"), holdout)
    live(cluster)
    assert kserve_production_model(api_cluster, DEFAULT_MODEL_NAME) == ProductionModel(
        "run-3", MODELS["good"]
    )

    api.serve_only()  # a cluster without KServe has nothing in production
    assert kserve_production_model(api_cluster, DEFAULT_MODEL_NAME) is None


def test_a_first_deployment_on_trial_or_a_service_made_by_hand():
    on_trial = isvc.first_rollout(request(isvc.SERVERLESS, "run-1", "good"))
    assert isvc.production_model(on_trial) is None
    by_hand = {**on_trial, "metadata": {**on_trial["metadata"], "annotations": {}}}
    assert isvc.production_model(by_hand) == (isvc.UNVERSIONED, MODELS["good"])
    # One made by hand that has had a Serverless canary: its spec may name the canary's model.
    by_hand["spec"]["predictor"]["canaryTrafficPercent"] = 0
    with pytest.raises(DeploymentFailedError, match=r"records no kfstack\.dev/model-uri"):
        isvc.production_model(by_hand)
