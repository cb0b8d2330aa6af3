"""InferenceServices for both deployment modes through a rollout's life (first rollout, canary,
promotion, rollback), compared as data, round-tripped through the kserve SDK models and
validated against the upstream InferenceService CRD."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kfstack.errors import InvalidParameterError, ResourceTimeoutError
from kfstack.kubernetes import autoscaling, resources
from kfstack.kubernetes import inference_service as isvc
from kfstack.kubernetes.launcher import Cluster, launch
from kfstack.kubernetes.node_pools import get_profile
from kfstack.kubernetes.placement import Placement
from tests.kubernetes.conftest import NAMESPACE
from tests.kubernetes.test_launcher import FakeClock
from tests.upstream_crds import kserve_api_client, openapi_round_trip, validate_with_crds

MODES = (isvc.SERVERLESS, isvc.STANDARD)


def request(mode: str, version: str = "0.1.0+run1", **overrides) -> isvc.ServingRequest:
    fields = {
        "name": "flights-delay",
        "mode": mode,
        "storage_uri": f"s3://models/flights/{version}",
        "model_version": version,
        "profile": get_profile("serving"),
        "service_account": "kfstack-predictor",
        "labels": {"pipelines.kubeflow.org/run-id": "run1"},
        # A team's own runtime and the format it declares.
        "model_format": "team-format",
        "model_format_version": "1",
        "runtime": "team-runtime",
    }
    fields.update(overrides)
    return isvc.ServingRequest(**fields)


def lifecycle(mode: str) -> dict[str, dict]:
    """Every state a service goes through: first deployed (on trial), confirmed (it answered),
    a canary of the next version, then that canary promoted or rolled back."""
    trial = isvc.first_rollout(request(mode))
    first = isvc.confirmed(trial, request(mode))
    canary = isvc.canary_rollout(
        first, request(mode, "0.1.0+run2", labels={"pipelines.kubeflow.org/run-id": "run2"})
    )
    return {
        "trial": trial,
        "first": first,
        "canary": canary,
        "promoted": isvc.promoted(canary, request(mode, "0.1.0+run2")),
        "rolled_back": isvc.rolled_back(canary),
    }


@pytest.mark.parametrize("mode", MODES)
def test_every_stage_of_a_rollout_round_trips_and_validates(mode, tmp_path):
    api = kserve_api_client()
    objects = list(lifecycle(mode).values())
    for obj in objects:
        assert openapi_round_trip(api, "V1beta1InferenceService", obj) == obj
        assert autoscaling.webhook_problems(obj) == []  # KServe 0.20's autoscaling rules
    validate_with_crds(tmp_path, objects)


def test_serverless_canary_promotion_and_rollback():
    stages = lifecycle(isvc.SERVERLESS)
    first, canary = stages["first"], stages["canary"]
    assert stages["trial"]["metadata"]["annotations"] == {
        "serving.kserve.io/deploymentMode": "Serverless",
        "serving.kserve.io/enable-tag-routing": "true",
        "kfstack.dev/new-model-version": "0.1.0+run1",
        "kfstack.dev/new-model-uri": "s3://models/flights/0.1.0+run1",
    }
    assert stages["trial"]["spec"] == first["spec"]  # confirming changes no spec
    predictor = first["spec"]["predictor"]
    assert "canaryTrafficPercent" not in predictor
    assert predictor["model"] == {
        "name": "kserve-container",
        "modelFormat": {"name": "team-format", "version": "1"},
        "runtime": "team-runtime",
        "storageUri": "s3://models/flights/0.1.0+run1",
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "2Gi"}},
    }
    assert (
        predictor["minReplicas"],
        predictor["maxReplicas"],
        predictor["scaleMetric"],
        predictor["scaleTarget"],
    ) == (
        1,
        3,
        "concurrency",
        8,
    )
    assert predictor["serviceAccountName"] == "kfstack-predictor"
    # The canary: the new model as the latest revision at 10%, everything else kept.
    assert canary["spec"]["predictor"]["canaryTrafficPercent"] == 10
    assert canary["spec"]["predictor"]["model"]["storageUri"] == "s3://models/flights/0.1.0+run2"
    assert canary["metadata"]["labels"]["pipelines.kubeflow.org/run-id"] == "run2"
    assert {
        k: v
        for k, v in canary["spec"]["predictor"].items()
        if k not in ("canaryTrafficPercent", "model", "labels")
    } == {k: v for k, v in predictor.items() if k != "model"}
    # The canary revision's pods carry the label the alerts leave out (KServe copies predictor
    # labels into the revision template); a first rollout's, and the promoted revision's, do not.
    assert "labels" not in stages["trial"]["spec"]["predictor"]
    assert canary["spec"]["predictor"]["labels"] == {isvc.CANARY_POD_LABEL: "true"}
    promoted = stages["promoted"]["spec"]["predictor"]
    assert "canaryTrafficPercent" not in promoted and "labels" not in promoted
    assert promoted["model"] == canary["spec"]["predictor"]["model"]  # the same model, a new revision
    # Rollback pins the previous rolled-out revision: 0% to the latest, which keeps its label.
    rolled_back = stages["rolled_back"]["spec"]["predictor"]
    assert rolled_back["canaryTrafficPercent"] == 0
    assert rolled_back["labels"] == {isvc.CANARY_POD_LABEL: "true"}
    # The next canary (after a rollback or a promotion) is labelled again.
    for previous in ("rolled_back", "promoted"):
        next_canary = isvc.canary_rollout(stages[previous], request(isvc.SERVERLESS, "0.1.0+run3"))
        assert next_canary["spec"]["predictor"]["labels"] == {isvc.CANARY_POD_LABEL: "true"}


def test_standard_canary_is_a_named_entry_promoted_by_retargeting():
    stages = lifecycle(isvc.STANDARD)
    first, canary = stages["first"], stages["canary"]
    assert first["metadata"]["annotations"] == {
        "serving.kserve.io/deploymentMode": "Standard",
        "kfstack.dev/model-version": "0.1.0+run1",
        "kfstack.dev/model-uri": "s3://models/flights/0.1.0+run1",
    }
    assert stages["trial"]["metadata"]["annotations"]["kfstack.dev/new-model-version"] == "0.1.0+run1"
    stable_name = first["spec"]["predictor"]["name"]
    (entry,) = canary["spec"]["canary"]
    assert entry["trafficPercent"] == 10
    assert entry["predictor"]["name"] != stable_name
    assert entry["predictor"]["model"]["storageUri"].endswith("run2")
    # The webhook refuses autoscaling fields on a canary; a 0% canary without minReplicas gets no pod.
    assert not {"maxReplicas", "scaleMetric", "scaleTarget", "autoScaling"} & set(entry["predictor"])
    assert entry["predictor"]["minReplicas"] == 1
    assert canary["spec"]["predictor"] == first["spec"]["predictor"]
    promoted = stages["promoted"]["spec"]
    assert "canary" not in promoted
    assert promoted["predictor"]["name"] == entry["predictor"]["name"]
    assert promoted["predictor"]["model"] == entry["predictor"]["model"]
    assert promoted["predictor"]["maxReplicas"] == 3  # the stable's autoscaling stays
    assert stages["rolled_back"]["spec"] == first["spec"]


@pytest.mark.parametrize("mode", MODES)
def test_a_canary_and_its_promotion_carry_this_rollouts_autoscaling(mode):
    first = isvc.confirmed(isvc.first_rollout(request(mode)), request(mode))
    bigger = request(mode, "0.1.0+run2", max_replicas=6)
    promoted = isvc.promoted(isvc.canary_rollout(first, bigger), bigger)["spec"]["predictor"]
    assert promoted["maxReplicas"] == 6 and promoted["serviceAccountName"] == "kfstack-predictor"
    # Only the canary of the version asked for is promoted.
    with pytest.raises(InvalidParameterError, match=r"no canary of model version 0\.1\.0\+run3"):
        isvc.promoted(isvc.canary_rollout(first, bigger), request(mode, "0.1.0+run3"))
    with pytest.raises(InvalidParameterError, match="no canary"):
        isvc.promoted(first, bigger)


def test_a_serverless_canary_is_a_new_revision_wherever_it_is_placed():
    first = isvc.confirmed(isvc.first_rollout(request(isvc.SERVERLESS)), request(isvc.SERVERLESS))
    moved = request(isvc.SERVERLESS, "0.1.0+run2", profile=get_profile("h100"), service_account="new-sa")
    predictor = isvc.canary_rollout(first, moved)["spec"]["predictor"]
    assert predictor["serviceAccountName"] == "new-sa"
    assert predictor["model"]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert predictor["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert predictor["canaryTrafficPercent"] == 10


@pytest.mark.parametrize(
    ("change", "parameter"),
    [
        ({"profile": get_profile("h100")}, "serving_pool"),
        ({"service_account": "other-sa"}, "serving_service_account"),
        ({"profile": get_profile("cpu")}, "serving_pool"),  # the same selector, other resources
    ],
)
def test_a_standard_canary_cannot_move_off_the_stable_pods(change, parameter):
    """KServe builds a Standard canary over the stable predictor's pod spec (inherited fields,
    merged maps): a canary elsewhere would be analysed on the old pods' placement."""
    first = isvc.confirmed(isvc.first_rollout(request(isvc.STANDARD)), request(isvc.STANDARD))
    with pytest.raises(InvalidParameterError, match=f"cannot change {parameter}"):
        isvc.canary_rollout(first, request(isvc.STANDARD, "0.1.0+run2", **change))


@pytest.mark.parametrize("mode", MODES)
def test_kfstacks_flags_reach_kfstacks_server_only(mode, tmp_path):
    """``predictor.model.args`` carries kfstack's flags where the predictor runs kfstack's model
    server (a custom model), at every step that writes the predictor; a runtime that is not
    kfstack's (here the team's, named like no KServe runtime) gets none, whatever its name."""
    flags = ("--live_drift_ignore_features=month",)
    ours = {"server_flags": flags, "kfstack_server": True}
    trial = isvc.first_rollout(request(mode, **ours))
    canary = isvc.canary_rollout(
        isvc.confirmed(trial, request(mode, **ours)), request(mode, "0.1.0+run2", **ours)
    )
    promoted = isvc.promoted(canary, request(mode, "0.1.0+run2", **ours))
    models = [trial["spec"]["predictor"]["model"], promoted["spec"]["predictor"]["model"]]
    models.append((canary["spec"].get("canary") or [canary["spec"]])[0]["predictor"]["model"])
    assert [m["args"] for m in models] == [list(flags)] * 3
    theirs = isvc.first_rollout(request(mode, server_flags=flags, runtime="triton-24-08"))
    assert "args" not in theirs["spec"]["predictor"]["model"]
    validate_with_crds(tmp_path, [trial, canary, promoted, theirs])


def test_the_name_must_fit_what_kserve_derives_from_it():
    assert request(isvc.STANDARD, name="a" * 35).name
    with pytest.raises(InvalidParameterError, match="at most 35 characters in mode=standard"):
        request(isvc.STANDARD, name="a" * 36)
    assert request(isvc.SERVERLESS, name="a" * 45).name
    with pytest.raises(InvalidParameterError, match="at most 45"):
        request(isvc.SERVERLESS, name="a" * 46)
    with pytest.raises(InvalidParameterError, match="name='Flights'"):
        request(isvc.SERVERLESS, name="Flights")


def test_refusals_name_the_field():
    with pytest.raises(InvalidParameterError, match="needs mode=serverless"):
        request(isvc.STANDARD, min_replicas=0)
    with pytest.raises(InvalidParameterError, match="canary_traffic_percent=100"):
        request(isvc.SERVERLESS, canary_traffic_percent=100)
    # No default format: every deployment says what it serves.
    with pytest.raises(InvalidParameterError, match=r"modelFormat\.name\) is empty"):
        request(isvc.SERVERLESS, model_format="")
    # Each mode's autoscaler has its own metrics (Knative's KPA; Standard mode's HPA).
    with pytest.raises(InvalidParameterError, match="scale_metric='cpu': mode=serverless"):
        request(isvc.SERVERLESS, scale_metric="cpu")
    with pytest.raises(InvalidParameterError, match="scale_metric='concurrency': mode=standard"):
        request(isvc.STANDARD, scale_metric="concurrency")
    with pytest.raises(InvalidParameterError, match="at most 100"):
        request(isvc.STANDARD, scale_metric="cpu", scale_target=150)
    assert request(isvc.STANDARD).scaling == ("cpu", 80)
    assert request(isvc.SERVERLESS).scaling == ("concurrency", 8)
    assert request(isvc.SERVERLESS, scale_metric="rps", scale_target=20).scaling == ("rps", 20)
    with pytest.raises(InvalidParameterError, match="has no scheme"):
        request(isvc.SERVERLESS, storage_uri="/models/x")
    request(isvc.SERVERLESS, min_replicas=0)  # scale to zero is Knative's


@pytest.mark.parametrize("mode", MODES)
def test_a_second_canary_or_another_mode_is_refused(mode):
    stages = lifecycle(mode)
    with pytest.raises(InvalidParameterError, match="already has a canary in progress"):
        isvc.canary_rollout(stages["canary"], request(mode, "0.1.0+run3"))
    with pytest.raises(InvalidParameterError, match=r"already serves model version 0\.1\.0\+run1"):
        isvc.canary_rollout(stages["first"], request(mode, "0.1.0+run1"))
    other = isvc.STANDARD if mode == isvc.SERVERLESS else isvc.SERVERLESS
    with pytest.raises(InvalidParameterError, match="KServe does not change a service's mode"):
        isvc.canary_rollout(stages["first"], request(other, "0.1.0+run3"))
    # After a rollback or a promotion the next canary starts from the service as it was left.
    for previous in ("rolled_back", "promoted"):
        following = isvc.canary_rollout(stages[previous], request(mode, "0.1.0+run3"))
        if mode == isvc.STANDARD:
            (entry,) = following["spec"]["canary"]
            assert entry["predictor"]["model"]["storageUri"].endswith("run3")
        else:
            assert following["spec"]["predictor"]["canaryTrafficPercent"] == 10
            assert following["spec"]["predictor"]["model"]["storageUri"].endswith("run3")


@pytest.mark.parametrize("mode", MODES)
def test_the_annotations_say_which_version_serves_and_which_is_canaried(mode):
    stages = lifecycle(mode)
    assert isvc.model_versions(stages["trial"]) == (None, "0.1.0+run1")
    assert not isvc.canary_in_progress(stages["trial"])
    assert isvc.model_versions(stages["first"]) == ("0.1.0+run1", None)
    assert isvc.model_versions(stages["canary"]) == ("0.1.0+run1", "0.1.0+run2")
    assert isvc.canary_in_progress(stages["canary"])
    assert isvc.model_versions(stages["promoted"]) == ("0.1.0+run2", None)
    assert isvc.model_versions(stages["rolled_back"]) == ("0.1.0+run1", None)
    for settled in ("first", "promoted", "rolled_back"):
        assert not isvc.canary_in_progress(stages[settled])
        assert isvc.NEW_VERSION_ANNOTATION not in stages[settled]["metadata"]["annotations"]
        assert isvc.NEW_URI_ANNOTATION not in stages[settled]["metadata"]["annotations"]
    # The storage of what serves travels with its version, whatever the spec names after a rollback.
    assert isvc.production_model(stages["trial"]) is None
    assert isvc.production_model(stages["first"]) == ("0.1.0+run1", "s3://models/flights/0.1.0+run1")
    assert isvc.production_model(stages["canary"]) == ("0.1.0+run1", "s3://models/flights/0.1.0+run1")
    assert isvc.production_model(stages["promoted"]) == ("0.1.0+run2", "s3://models/flights/0.1.0+run2")
    assert isvc.production_model(stages["rolled_back"]) == ("0.1.0+run1", "s3://models/flights/0.1.0+run1")
    # Only the trial of the version asked for is confirmed, and only once.
    with pytest.raises(InvalidParameterError, match="not the first deployment"):
        isvc.confirmed(stages["trial"], request(mode, "0.1.0+run2"))
    with pytest.raises(InvalidParameterError, match="not the first deployment"):
        isvc.confirmed(stages["first"], request(mode))


def test_predictor_urls_for_the_analysis():
    standard = lifecycle(isvc.STANDARD)["canary"]
    stable, canary = isvc.predictor_urls(standard, "ml-prod")
    (entry,) = standard["spec"]["canary"]
    assert (
        stable
        == f"http://flights-delay-{standard['spec']['predictor']['name']}-predictor.ml-prod.svc.cluster.local"
    )
    assert canary == f"http://flights-delay-{entry['predictor']['name']}-predictor.ml-prod.svc.cluster.local"
    serverless = lifecycle(isvc.SERVERLESS)["canary"]
    # Before the tags show in the status there is nothing to call.
    assert isvc.predictor_urls(serverless, "ml-prod") == ("", None)
    serverless["status"] = {
        "components": {
            "predictor": {
                "traffic": [
                    {
                        "tag": "latest",
                        "percent": 10,
                        "url": "http://latest-flights-delay-predictor-ml-prod.example.com",
                    },
                    {
                        "tag": "prev",
                        "percent": 90,
                        "url": "http://prev-flights-delay-predictor-ml-prod.example.com",
                    },
                ]
            }
        }
    }
    # The tags' in-cluster Services, not the external domain of the status URLs.
    assert isvc.predictor_urls(serverless, "ml-prod") == (
        "http://prev-flights-delay-predictor.ml-prod.svc.cluster.local",
        "http://latest-flights-delay-predictor.ml-prod.svc.cluster.local",
    )
    assert isvc.predictor_urls(lifecycle(isvc.SERVERLESS)["first"], "ml-prod") == (
        "http://flights-delay-predictor.ml-prod.svc.cluster.local",
        None,
    )


def test_the_sdk_imports_under_a_command_line_kserve_would_refuse():
    # kserve parses sys.argv when imported; --http_port=abc would make that import exit.
    code = (
        "import sys; sys.argv = ['launcher', '--http_port=abc', '--model', 'x'];"
        "from kfstack.kubernetes.inference_service import kserve_sdk;"
        "print(kserve_sdk().V1beta1InferenceService.__name__, sys.argv)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "V1beta1InferenceService ['launcher', '--http_port=abc', '--model', 'x']" in proc.stdout


# --- readiness: the status shows the spec just applied ------------------------------------------

READY = {"type": "Ready", "status": "True"}
NOT_READY = {"type": "Ready", "status": "False", "reason": "RevisionMissing", "message": "pulling the image"}


def knative_status(
    latest: int, previous: int | None, ready=READY, observed: int = 7, newest_ready: bool = True
) -> dict:
    revision = "flights-delay-predictor-0000"
    # While the newest revision is not ready, Knative's "latest" traffic goes to the last ready one.
    latest_ready = f"{revision}2" if newest_ready else f"{revision}1"
    traffic = [{"revisionName": latest_ready, "latestRevision": True, "percent": latest}]
    if previous is not None:
        traffic.append({"revisionName": f"{revision}1", "latestRevision": False, "percent": previous})
    return {
        # KServe copies this from the Knative Service: unrelated to the InferenceService's generation.
        "observedGeneration": observed,
        "conditions": [ready],
        "components": {
            "predictor": {
                "traffic": traffic,
                "latestCreatedRevision": f"{revision}2",
                "latestReadyRevision": latest_ready,
                "latestRolledoutRevision": f"{revision}1",
            }
        },
    }


def standard_status(canaries: list[tuple[str, int, bool]], ready=READY, canary_condition=True) -> dict:
    conditions = [ready]
    if canaries and canary_condition:  # KServe 0.20 sets it while there are canaries
        all_ready = all(r for _, _, r in canaries)
        conditions.append({"type": "CanaryPredictorReady", "status": "True" if all_ready else "False"})
    return {
        "observedGeneration": 1,
        "conditions": conditions,
        "canaryStatuses": [{"name": n, "trafficPercent": p, "ready": r} for n, p, r in canaries],
    }


def test_serverless_readiness_follows_the_traffic_split_not_observed_generation():
    stages = lifecycle(isvc.SERVERLESS)
    canary = stages["canary"]
    phase = resources.inference_service_phase
    assert phase(canary) is resources.Phase.PENDING  # no status yet
    # Ready, and observedGeneration far ahead, but the split is the old one: not applied yet.
    assert phase({**canary, "status": knative_status(100, None, observed=99)}) is resources.Phase.RUNNING
    assert phase({**canary, "status": knative_status(10, 90, ready=NOT_READY)}) is resources.Phase.RUNNING
    assert phase({**canary, "status": knative_status(10, 90)}) is resources.Phase.SUCCEEDED
    # The new revision not ready: "latest" still resolves to the old one, whatever Ready says.
    unready = knative_status(10, 90, newest_ready=False)
    assert phase({**canary, "status": unready}) is resources.Phase.RUNNING
    assert phase({**stages["promoted"], "status": knative_status(10, 90)}) is resources.Phase.RUNNING
    assert phase({**stages["promoted"], "status": knative_status(100, None)}) is resources.Phase.SUCCEEDED
    assert phase({**stages["rolled_back"], "status": knative_status(0, 100)}) is resources.Phase.SUCCEEDED
    first = {**stages["first"], "status": knative_status(100, None)}
    first["status"]["components"]["predictor"].pop("latestRolledoutRevision")
    assert phase(first) is resources.Phase.SUCCEEDED


def test_standard_readiness_follows_the_canary_statuses():
    stages = lifecycle(isvc.STANDARD)
    (entry,) = stages["canary"]["spec"]["canary"]
    name = entry["predictor"]["name"]
    phase = resources.inference_service_phase
    assert phase({**stages["canary"], "status": standard_status([])}) is resources.Phase.RUNNING
    assert (
        phase({**stages["canary"], "status": standard_status([(name, 10, False)])}) is resources.Phase.RUNNING
    )
    assert (
        phase({**stages["canary"], "status": standard_status([(name, 10, True)])})
        is resources.Phase.SUCCEEDED
    )
    # Every canary ready, but the controller has not set CanaryPredictorReady yet.
    unconfirmed = standard_status([(name, 10, True)], canary_condition=False)
    assert phase({**stages["canary"], "status": unconfirmed}) is resources.Phase.RUNNING
    # Promoted or rolled back: ready once the canary's status is gone.
    for stage in ("promoted", "rolled_back"):
        assert (
            phase({**stages[stage], "status": standard_status([(name, 10, True)])}) is resources.Phase.RUNNING
        )
        assert phase({**stages[stage], "status": standard_status([])}) is resources.Phase.SUCCEEDED


KINDS = {**resources.KINDS, resources.INFERENCE_SERVICE.kind: resources.INFERENCE_SERVICE}


def cluster_for(fake_api):
    clock = FakeClock()
    return Cluster(fake_api.api_client(), NAMESPACE, sleep=clock.sleep, clock=clock)


def test_a_canary_is_applied_and_awaited_until_its_split_shows(fake_api):
    stages = lifecycle(isvc.SERVERLESS)
    placement = Placement(node_pool="serving", timeout_seconds=600, poll_interval_seconds=5)
    fake_api.statuses["flights-delay"] = [knative_status(100, None)]
    launch(stages["first"], placement, cluster_for(fake_api), kinds=KINDS)
    live = fake_api.objects[("inferenceservices", NAMESPACE, "flights-delay")]
    canary = isvc.canary_rollout(live, request(isvc.SERVERLESS, "0.1.0+run2"))
    fake_api.statuses["flights-delay"] = [
        knative_status(100, None),
        knative_status(100, None),
        knative_status(10, 90),
    ]
    final, reference = launch(canary, placement, cluster_for(fake_api), kinds=KINDS)
    assert final["spec"]["predictor"]["canaryTrafficPercent"] == 10
    assert reference["kind"] == "InferenceService"
    assert fake_api.count("POST") == 1 and fake_api.count("PUT") == 1 and fake_api.count("DELETE") == 0


def test_a_canary_not_ready_in_time_is_left_for_its_owner_to_roll_back(fake_api):
    stages = lifecycle(isvc.SERVERLESS)
    fake_api.put("inferenceservices", NAMESPACE, stages["first"])
    fake_api.statuses["flights-delay"] = [knative_status(100, None, ready=NOT_READY)]
    placement = Placement(node_pool="serving", timeout_seconds=30, poll_interval_seconds=5)
    with pytest.raises(ResourceTimeoutError, match="left in place") as err:
        launch(stages["canary"], placement, cluster_for(fake_api), kinds=KINDS)
    assert "RevisionMissing" in str(err.value)
    assert "traffic: flights-delay-predictor-00002 (latest)=100%" in str(err.value)
    assert fake_api.count("DELETE") == 0
    # The rollback (the owner's decision) then restores the previous split.
    live = fake_api.objects[("inferenceservices", NAMESPACE, "flights-delay")]
    fake_api.statuses["flights-delay"] = [knative_status(0, 100)]
    final, _ = launch(isvc.rolled_back(live), placement, cluster_for(fake_api), kinds=KINDS)
    assert final["spec"]["predictor"]["canaryTrafficPercent"] == 0
    assert final["spec"]["predictor"]["model"]["storageUri"].endswith("run2")
