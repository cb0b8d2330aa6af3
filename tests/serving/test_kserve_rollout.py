"""The Kubernetes rollout against a fake API server, in both deployment modes.

No cluster runs here. The fake API server (tests/kubernetes/fake_api.py) stores the
InferenceService; a fake KServe controller (tests/kubernetes/fake_kserve.py) writes the status a
real one would, with the in-cluster addresses of the stable and canary predictors; and those
addresses are routed to real predictors on loopback serving the model each one names, so the
analysis replays real requests (tests/serving/fake_kserve_cluster.py). What is checked: the
objects applied at each step, what serves at the end, the decision, and where a retraining run
finds the production model. (The exit handler's rollback of a canary whose task was killed is
cleanup_run's, in tests/components/common/cleanup_run/.)
"""

from __future__ import annotations

import dataclasses

import pytest
from kubernetes.client.rest import ApiException

from kfstack.errors import DeploymentFailedError, ResourceTimeoutError
from kfstack.kubernetes import inference_service as isvc
from kfstack.kubernetes import naming
from kfstack.kubernetes.resources import INFERENCE_SERVICE
from kfstack.serving.canary import PROMOTE, ROLLBACK
from kfstack.serving.production import ProductionModel, kserve_production_model
from kfstack.serving.rollout import FIRST
from kfstack_examples.flights.predictor import DEFAULT_MODEL_NAME
from tests.serving.fake_kserve_cluster import MODELS, NAMESPACE, deploy, live, request, rollout, serving_model


@pytest.mark.parametrize("mode", [isvc.SERVERLESS, isvc.STANDARD])
def test_first_rollout_then_a_constant_canary_rolled_back_then_a_good_one_promoted(
    kserve_cluster, kserve_holdout, mode
):
    _, api, _ = kserve_cluster
    outcome = deploy(rollout(kserve_cluster, mode, "run-1"), kserve_holdout)
    assert (outcome.decision, outcome.production_version) == (FIRST, "run-1")
    assert api.count("POST") == 1
    assert isvc.model_versions(live(kserve_cluster)) == ("run-1", None)

    outcome = deploy(rollout(kserve_cluster, mode, "run-2", "constant"), kserve_holdout)
    assert outcome.decision == ROLLBACK, outcome.markdown()
    assert outcome.report.stable.errors == 0
    assert isvc.model_versions(live(kserve_cluster)) == ("run-1", None)
    assert not isvc.canary_in_progress(live(kserve_cluster))
    assert serving_model(kserve_cluster) == MODELS["good"]
    if mode == isvc.SERVERLESS:  # the rollback pins the previous revision
        assert live(kserve_cluster)["spec"]["predictor"]["canaryTrafficPercent"] == 0

    outcome = deploy(rollout(kserve_cluster, mode, "run-3"), kserve_holdout)
    assert outcome.decision == PROMOTE, outcome.markdown()
    assert (outcome.previous_version, outcome.production_version) == ("run-1", "run-3")
    assert isvc.model_versions(live(kserve_cluster)) == ("run-3", None)
    assert serving_model(kserve_cluster) == MODELS["good"]
    assert live(kserve_cluster)["metadata"]["labels"][naming.RUN_LABEL] == "run-3"
    # One service all along: created once, then only updated, never deleted.
    assert api.count("POST") == 1 and api.count("DELETE") == 0


def test_a_canary_against_a_service_in_the_other_mode_is_refused_and_nothing_changes(
    kserve_cluster, kserve_holdout
):
    _, api, _ = kserve_cluster
    deploy(rollout(kserve_cluster, isvc.SERVERLESS, "run-1"), kserve_holdout)
    before = api.count("PUT")
    with pytest.raises(Exception, match="KServe does not change a service's mode"):
        deploy(rollout(kserve_cluster, isvc.STANDARD, "run-2"), kserve_holdout)
    assert api.count("PUT") == before
    assert isvc.model_versions(live(kserve_cluster)) == ("run-1", None)


@pytest.mark.parametrize("mode", [isvc.SERVERLESS, isvc.STANDARD])
def test_a_first_deployment_that_does_not_answer_is_not_production_and_is_deployed_again(
    kserve_cluster, kserve_holdout, mode
):
    _, api, _ = kserve_cluster
    with pytest.raises(DeploymentFailedError, match="did not serve"):
        deploy(rollout(kserve_cluster, mode, "run-1", "broken"), kserve_holdout)
    # Left on trial: not production, so the next run does not canary against it...
    assert isvc.model_versions(live(kserve_cluster)) == (None, "run-1")
    assert rollout(kserve_cluster, mode, "run-2").production_version() is None
    # ...it deploys first again, in place.
    outcome = deploy(rollout(kserve_cluster, mode, "run-2"), kserve_holdout)
    assert (outcome.decision, outcome.previous_version) == (FIRST, None)
    assert isvc.model_versions(live(kserve_cluster)) == ("run-2", None)
    assert serving_model(kserve_cluster) == MODELS["good"]
    assert api.count("POST") == 1 and api.count("DELETE") == 0


@pytest.mark.parametrize("mode", [isvc.SERVERLESS, isvc.STANDARD])
def test_a_retried_task_starts_its_own_killed_canary_over(kserve_cluster, kserve_holdout, mode):
    deploy(rollout(kserve_cluster, mode, "run-1"), kserve_holdout)
    rollout(kserve_cluster, mode, "run-2", "constant").deploy_canary()  # killed here
    # KFP retries the task (the same run: the same version).
    outcome = deploy(rollout(kserve_cluster, mode, "run-2"), kserve_holdout)
    assert outcome.decision == PROMOTE, outcome.markdown()
    assert isvc.model_versions(live(kserve_cluster)) == ("run-2", None)


def test_an_update_from_a_stale_read_is_refused_not_overwriting(kserve_cluster, kserve_holdout):
    """Two rollouts that read the same service: the second update is refused (409) instead of
    silently replacing the first's canary."""
    api_cluster, _, _ = kserve_cluster
    deploy(rollout(kserve_cluster, isvc.SERVERLESS, "run-1"), kserve_holdout)
    stale = live(kserve_cluster)
    launcher = api_cluster.launcher(INFERENCE_SERVICE)
    launcher.apply(isvc.canary_rollout(stale, request(isvc.SERVERLESS, "run-2", "good")))
    with pytest.raises(ApiException) as refused:
        launcher.apply(isvc.canary_rollout(stale, request(isvc.SERVERLESS, "run-3", "good")))
    assert refused.value.status == 409
    assert isvc.model_versions(live(kserve_cluster)) == ("run-1", "run-2")


@pytest.mark.parametrize("mode", [isvc.SERVERLESS, isvc.STANDARD])
def test_a_retraining_run_finds_the_production_model_where_the_rollouts_left_it(
    kserve_cluster, kserve_holdout, mode
):
    api_cluster, api, _ = kserve_cluster
    assert kserve_production_model(api_cluster, DEFAULT_MODEL_NAME) is None  # no service yet
    deploy(rollout(kserve_cluster, mode, "run-1"), kserve_holdout)
    live(kserve_cluster)
    assert kserve_production_model(api_cluster, DEFAULT_MODEL_NAME) == ProductionModel(
        "run-1", MODELS["good"]
    )

    # While a canary is analysed, and after it was rolled back -- when a Serverless spec still
    # names the rejected model -- production is what went into production.
    undecided = rollout(kserve_cluster, mode, "run-2", "constant")
    undecided.deploy_canary()
    live(kserve_cluster)
    production = ProductionModel("run-1", MODELS["good"])
    assert kserve_production_model(api_cluster, DEFAULT_MODEL_NAME) == production
    undecided.roll_back({})
    live(kserve_cluster)
    assert kserve_production_model(api_cluster, DEFAULT_MODEL_NAME) == production
    deploy(rollout(kserve_cluster, mode, "run-3"), kserve_holdout)
    live(kserve_cluster)
    assert kserve_production_model(api_cluster, DEFAULT_MODEL_NAME) == ProductionModel(
        "run-3", MODELS["good"]
    )

    api.serve_only()  # a kserve_cluster without KServe has nothing in production
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


def test_a_serverless_promotion_waits_for_its_new_unlabelled_revision(kserve_cluster, kserve_holdout):
    """The canary revision carries the label the alerts leave out; the promotion drops it, which
    is a new revision of the same model, and the promotion waits until that one is Ready: a
    status still showing the analysed revision (stale, or Knative's latest *ready* revision
    while the new one starts) is not the promotion applied."""
    _, api, controller = kserve_cluster
    deploy(rollout(kserve_cluster, isvc.SERVERLESS, "run-1"), kserve_holdout)
    canary = rollout(kserve_cluster, isvc.SERVERLESS, "run-2")
    canary.deploy_canary()
    analysed = live(kserve_cluster)
    assert analysed["spec"]["predictor"]["labels"] == {isvc.CANARY_POD_LABEL: "true"}
    canary_revision = analysed["status"]["components"]["predictor"]["latestCreatedRevision"]
    # Knative routes 100% to the analysed revision until the new one is Ready: the controller's
    # first reads after the promotion show that state.
    stale_reads = [3]

    def slow(name: str) -> None:
        controller(name)
        obj = api.objects[("inferenceservices", isvc_namespace(analysed), name)]
        if stale_reads[0] and "canaryTrafficPercent" not in obj["spec"]["predictor"]:
            stale_reads[0] -= 1
            predictor = {**analysed["status"]["components"]["predictor"]}
            predictor["traffic"] = [{**predictor["traffic"][0], "percent": 100}]
            obj["status"] = {**analysed["status"], "components": {"predictor": predictor}}

    api.on_read = slow
    canary.promote({})
    assert stale_reads == [0]
    promoted = live(kserve_cluster)
    assert "labels" not in promoted["spec"]["predictor"]
    assert promoted["status"]["components"]["predictor"]["latestCreatedRevision"] != canary_revision
    assert serving_model(kserve_cluster) == MODELS["good"]
    assert isvc.model_versions(promoted) == ("run-2", None)


def test_a_serverless_promotion_whose_revision_never_gets_ready_times_out(kserve_cluster, kserve_holdout):
    _, api, controller = kserve_cluster
    deploy(rollout(kserve_cluster, isvc.SERVERLESS, "run-1"), kserve_holdout)
    canary = rollout(kserve_cluster, isvc.SERVERLESS, "run-2")
    canary.deploy_canary()
    analysed = live(kserve_cluster)

    def stuck(name: str) -> None:
        controller(name)
        obj = api.objects[("inferenceservices", isvc_namespace(analysed), name)]
        predictor = {**analysed["status"]["components"]["predictor"]}
        predictor["traffic"] = [{**predictor["traffic"][0], "percent": 100}]
        obj["status"] = {**analysed["status"], "components": {"predictor": predictor}}

    api.on_read = stuck
    canary.placement = dataclasses.replace(canary.placement, timeout_seconds=1)
    with pytest.raises(ResourceTimeoutError, match="the promoted revision"):
        canary.promote({})


def isvc_namespace(service: dict) -> str:
    return service["metadata"].get("namespace") or NAMESPACE
