"""Controller releases: strict field validation, the dry run before a create, the Trainer v2.1
form of a TrainJob, and a feature an older KServe lacks refused before anything is created.

The fake API server serves, for a kind, a small schema the test writes: the fields an older
release's CRD knows (Kubeflow Trainer v2.1's TrainJob, KServe 0.16's InferenceService), as far
as these bodies reach. It honours ``fieldValidation=Strict`` and ``dryRun=All`` as the API
server does (:mod:`tests.kubernetes.fake_api`). The upstream CRDs themselves are checked against
the same bodies in :mod:`tests.upstream_crds` (oldest and newest supported releases).
"""

from __future__ import annotations

import logging
import pathlib
import re

import pytest
from kubernetes import client

from kfstack.errors import ControllerReleaseError, PlatformNotAvailableError
from kfstack.kubernetes import controller_releases, dry_run, launcher, naming, node_pools, resources
from kfstack.kubernetes import inference_service as isvc
from kfstack.kubernetes.katib_experiment import build_experiment
from kfstack.kubernetes.launcher import Cluster, launch
from kfstack.kubernetes.placement import Placement
from kfstack.kubernetes.train_job import build_trainjob, for_trainer_v2_1
from kfstack.pipelines import rendering
from tests.kubernetes.conftest import NAMESPACE, RUN_ID, put_flights_runtime, training_request
from tests.kubernetes.test_inference_service import request as serving_request
from tests.kubernetes.test_katib_experiment import experiment_request
from tests.kubernetes.test_launcher import FakeClock
from tests.upstream_crds import SHARED_DIR, run_validator

ANY = {"x-kubernetes-preserve-unknown-fields": True}
# What Kubeflow Trainer v2.1's TrainJob CRD knows under spec (trainer-v2 v2.1.0): no
# runtimePatches, no activeDeadlineSeconds; pods are placed through podTemplateOverrides.
TRAINER_V2_1 = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": dict.fromkeys(
                (
                    "annotations",
                    "initializer",
                    "labels",
                    "managedBy",
                    "podTemplateOverrides",
                    "runtimeRef",
                    "suspend",
                    "trainer",
                ),
                ANY,
            ),
        },
        "status": ANY,
    },
}
TRAINER_V2_3 = {"type": "object", "properties": {"spec": ANY, "status": ANY}}
COMPLETE = {"conditions": [{"type": "Complete", "status": "True", "reason": "", "message": ""}]}


def kserve_0_16_schema() -> dict:
    """What KServe 0.16's InferenceService knows of a predictor, as far as a Serverless body
    reaches: every field kfstack's Serverless predictor sets, and no ``name`` (Standard mode's
    named predictor) nor ``spec.canary`` (both KServe 0.20)."""
    predictor = isvc.first_rollout(serving_request(isvc.SERVERLESS))["spec"]["predictor"]
    known = dict.fromkeys((*predictor, "canaryTrafficPercent"), ANY)
    spec = {"predictor": {"type": "object", "properties": known}, "explainer": ANY, "transformer": ANY}
    return {"type": "object", "properties": {"spec": {"type": "object", "properties": spec}, "status": ANY}}


def cluster_of(fake_api) -> Cluster:
    clock = FakeClock()
    return Cluster(fake_api.api_client(), NAMESPACE, sleep=clock.sleep, clock=clock)


# -- what the API server says, and what it means ------------------------------------------------


def test_a_strict_refusal_is_read_as_the_api_server_words_it():
    message = (
        'TrainJob in version "v1alpha1" cannot be handled as a TrainJob: strict decoding error: '
        'unknown field "spec.runtimePatches", unknown field "spec.activeDeadlineSeconds"'
    )
    assert controller_releases.unknown_fields(message) == [
        "spec.runtimePatches",
        "spec.activeDeadlineSeconds",
    ]
    # A webhook's refusal that quotes a field is not a strict decoding error.
    assert controller_releases.unknown_fields('admission webhook denied: unknown field "x"') == []


@pytest.mark.parametrize(
    ("kind", "path", "release"),
    [
        ("TrainJob", "spec.runtimePatches", "v2.2.0"),
        ("TrainJob", "spec.runtimePatches[0].trainingRuntimeSpec", "v2.2.0"),
        ("TrainJob", "spec.activeDeadlineSeconds", "v2.2.0"),
        ("InferenceService", "spec.canary[0].predictor", "v0.20.0"),
        ("InferenceService", "spec.predictor.autoScaling.metrics[1].external.authenticationRef", "v0.16.0"),
    ],
)
def test_each_newer_field_names_the_release_that_has_it(kind, path, release):
    group = "trainer.kubeflow.org" if kind == "TrainJob" else "serving.kserve.io"
    entry = controller_releases.field_release(group, kind, path)
    assert entry is not None and entry.release == release


def test_every_newer_field_is_newer_than_its_controllers_oldest_release():
    def key(release: str) -> tuple[int, ...]:
        return tuple(int(part) for part in release.lstrip("v").split("."))

    for entry in controller_releases.FIELDS:
        controller = controller_releases.CONTROLLERS[entry.controller]
        assert key(controller.oldest) < key(entry.release) <= key(controller.newest), entry
        assert (entry.group, entry.kind) in controller.kinds, entry


# -- strict field validation ----------------------------------------------------------------------


def test_without_strict_validation_an_older_crd_drops_the_placement_silently(fake_api):
    """The hazard: an API server prunes what its CRD does not know and creates the rest."""
    fake_api.serve_schema("trainjobs", TRAINER_V2_1)
    body = build_trainjob(training_request())
    stored = client.CustomObjectsApi(fake_api.api_client()).create_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", NAMESPACE, "trainjobs", body
    )
    assert "runtimePatches" not in stored["spec"] and "activeDeadlineSeconds" not in stored["spec"]
    assert sorted(fake_api.pruned) == [
        "trainjobs: spec.activeDeadlineSeconds",
        "trainjobs: spec.runtimePatches",
    ]


def test_a_create_asks_for_strict_validation_and_is_refused_whole_naming_field_and_release(fake_api):
    fake_api.serve_schema("trainjobs", TRAINER_V2_1)
    launcher = cluster_of(fake_api).launcher(resources.TRAINJOB)
    with pytest.raises(ControllerReleaseError) as refused:
        launcher.create(build_trainjob(training_request()))
    message = str(refused.value)
    assert "spec.runtimePatches (node-pool placement" in message
    assert (
        "spec.activeDeadlineSeconds (a deadline on the TrainJob itself) needs Kubeflow Trainer v2.2.0"
        in message
    )
    assert "Nothing was created" in message
    assert fake_api.field_validation == ["Strict"]
    assert fake_api.objects == {} and fake_api.pruned == []


def test_a_replace_is_refused_whole_and_leaves_the_service_as_it_was(fake_api):
    """A Standard-mode canary on KServe 0.16: the update names spec.canary and KServe 0.20."""
    live = isvc.confirmed(isvc.first_rollout(serving_request(isvc.STANDARD)), serving_request(isvc.STANDARD))
    fake_api.put("inferenceservices", NAMESPACE, live)
    before = fake_api.objects[("inferenceservices", NAMESPACE, "flights-delay")]
    fake_api.serve_schema("inferenceservices", kserve_0_16_schema())
    canary = isvc.canary_rollout(before, serving_request(isvc.STANDARD, "0.1.0+run2"))
    with pytest.raises(
        ControllerReleaseError, match=r"spec\.canary \(a Standard-mode canary .*\) needs KServe v0\.20\.0"
    ):
        cluster_of(fake_api).launcher(resources.INFERENCE_SERVICE).apply(canary)
    assert fake_api.objects[("inferenceservices", NAMESPACE, "flights-delay")] == before
    assert fake_api.field_validation == ["Strict"]


# -- the dry run before the first create -------------------------------------------------------


def test_on_trainer_v2_1_a_trainjob_is_created_in_its_v2_1_form_and_says_so(fake_api, caplog):
    fake_api.serve_schema("trainjobs", TRAINER_V2_1)
    cluster = cluster_of(fake_api)
    body = build_trainjob(training_request())
    with caplog.at_level(logging.WARNING, logger="kfstack.kubernetes.dry_run"):
        fitted = dry_run.fitted("distributed-training", cluster, body)
    assert fitted == for_trainer_v2_1(body)
    (line,) = [r.getMessage() for r in caplog.records]
    assert (
        "does not know spec.activeDeadlineSeconds, spec.runtimePatches (Kubeflow Trainer v2.2.0 or newer)"
        in line
    )
    assert "in the Kubeflow Trainer v2.1.0 form" in line
    assert "no deadline on the TrainJob (a step's launcher deletes it past timeout_seconds" in line
    assert "Kubeflow's torch-distributed sets none" in line
    # The dry runs stored nothing; the real create stores the v2.1 form whole, nothing pruned.
    assert fake_api.objects == {} and len(fake_api.dry_runs) == 2
    fake_api.statuses[body["metadata"]["name"]] = [COMPLETE]
    final, _ = launch(fitted, Placement(timeout_seconds=60, poll_interval_seconds=1), cluster)
    spec = final["spec"]
    assert "runtimePatches" not in spec and "activeDeadlineSeconds" not in spec
    (override,) = spec["podTemplateOverrides"]
    assert override["targetJobs"] == [{"name": "node"}]
    assert override["spec"]["nodeSelector"] == node_pools.get_profile("h100").pod_settings()["nodeSelector"]
    assert spec["trainer"]["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == "1"
    assert fake_api.pruned == []


def test_on_trainer_v2_3_the_newest_form_is_created_as_built(fake_api):
    fake_api.serve_schema("trainjobs", TRAINER_V2_3)
    body = build_trainjob(training_request())
    assert dry_run.fitted("distributed-training", cluster_of(fake_api), body) is body
    # The probe is named by the server: an object of the body's name (an earlier attempt's)
    # does not answer 409 in place of the check.
    ((_path, probe),) = fake_api.dry_runs
    assert "name" not in probe["metadata"] and probe["metadata"]["generateName"].startswith(
        body["metadata"]["name"]
    )


def test_the_v2_1_form_validates_against_trainer_v2_1s_crd(tmp_path):
    older = SHARED_DIR / "crds-older" / "trainer-v2" / "v2.1.0"
    if not older.is_dir():
        pytest.skip(
            f"Trainer v2.1.0's CRDs are not at {older}: the v2.1 form is checked by the fake API only"
        )
    path = tmp_path / "trainjob-v2.1.yaml"
    import yaml

    path.write_text(yaml.safe_dump(for_trainer_v2_1(build_trainjob(training_request("h100-spot")))))
    report = run_validator(path, "the v2.1 form against Trainer v2.1.0's CRD", crds=older)
    assert report.startswith("OK TrainJob/")


def test_a_katib_trial_template_gets_the_v2_1_form_too(fake_api):
    """Katib creates trials' jobs without strict validation: the template itself is checked."""
    fake_api.serve_schema("trainjobs", TRAINER_V2_1)
    experiment = build_experiment(experiment_request(resources.TRAINJOB))
    fitted = dry_run.fitted("hyperparameter-tuning", cluster_of(fake_api), experiment)
    trial = fitted["spec"]["trialTemplate"]["trialSpec"]
    assert "runtimePatches" not in trial["spec"] and "podTemplateOverrides" in trial["spec"]
    assert trial["metadata"] == experiment["spec"]["trialTemplate"]["trialSpec"]["metadata"]
    assert fake_api.objects == {}


def test_a_standard_mode_service_on_kserve_0_16_is_refused_before_anything_is_created(fake_api):
    fake_api.serve_schema("inferenceservices", kserve_0_16_schema())
    cluster = cluster_of(fake_api)
    serverless = isvc.first_rollout(serving_request(isvc.SERVERLESS))
    assert dry_run.fitted("model-deployment", cluster, serverless) is serverless
    standard = isvc.first_rollout(serving_request(isvc.STANDARD))
    with pytest.raises(ControllerReleaseError) as refused:
        dry_run.check_launches("flights-training", [(cluster, [standard])])
    assert re.search(
        r"spec\.predictor\.name \(Standard mode's named predictor .*\) needs KServe v0\.20\.0",
        str(refused.value),
    )
    assert fake_api.objects == {} and fake_api.created() == []


def test_a_dry_run_the_server_does_not_answer_leaves_the_check_to_the_create(fake_api, caplog):
    """A webhook without dry-run support, say: the strict create is the second line."""
    fake_api.forbidden.add("trainjobs")
    body = build_trainjob(training_request())
    with caplog.at_level(logging.WARNING, logger="kfstack.kubernetes.dry_run"):
        assert dry_run.fitted("distributed-training", cluster_of(fake_api), body) is body
    assert "its create will be validated instead" in caplog.text


def test_a_webhook_without_dry_run_support_leaves_the_check_to_the_create(fake_api, caplog):
    fake_api.dry_run_refusals["trainjobs"] = (
        400,
        "BadRequest",
        'admission webhook "validate.trainjob.example" does not support dry run',
    )
    body = build_trainjob(training_request())
    with caplog.at_level(logging.WARNING, logger="kfstack.kubernetes.dry_run"):
        assert dry_run.fitted("distributed-training", cluster_of(fake_api), body) is body
    assert "not answered (400 Bad Request)" in caplog.text


def test_any_other_refusal_of_a_dry_run_fails_the_step_with_the_servers_words(fake_api):
    """An invalid value or a webhook's denial: the create would be refused the same way, after
    the steps before it had run."""
    fake_api.dry_run_refusals["trainjobs"] = (
        422,
        "Unprocessable Entity",
        'TrainJob.trainer.kubeflow.org "x" is invalid: spec.trainer.numNodes: Invalid value: 0',
    )
    with pytest.raises(PlatformNotAvailableError) as refused:
        dry_run.fitted("distributed-training", cluster_of(fake_api), build_trainjob(training_request()))
    assert "refuses TrainJob" in str(refused.value)
    assert "spec.trainer.numNodes: Invalid value: 0. Nothing was created." in str(refused.value)
    assert fake_api.objects == {}


def test_an_older_form_is_chosen_only_where_the_server_accepts_it(fake_api):
    """The v2.3 form refused for its fields, the v2.1 form's dry run not answered: no evidence
    that the cluster takes it, so the refusal stands."""
    fake_api.serve_schema("trainjobs", TRAINER_V2_1)
    fake_api.dry_run_refusals["trainjobs"] = (503, "Service Unavailable", "webhook unreachable")
    with pytest.raises(ControllerReleaseError, match=r"spec\.runtimePatches"):
        dry_run.fitted("distributed-training", cluster_of(fake_api), build_trainjob(training_request()))
    assert fake_api.objects == {}


def test_docs_table_states_the_supported_releases_and_what_each_feature_needs():
    text = (pathlib.Path(__file__).parents[2] / "docs" / "kubernetes.md").read_text()
    for controller in controller_releases.CONTROLLERS.values():
        row = f"| {controller.name} | {controller.oldest} | {controller.newest} |"
        assert row in text, row
    for entry in controller_releases.FIELDS:
        # The feature's row names the release it needs.
        rows = [line for line in text.splitlines() if line.startswith("|") and f"`{entry.path}`" in line]
        assert rows and all(entry.release in row for row in rows), entry


# -- the run's first task ---------------------------------------------------------------------


@pytest.fixture
def validate_pod(fake_api, monkeypatch):
    """This process as the run's validate-parameters pod in ``kubeflow``, its in-cluster client
    the fake API server's, launching into a namespace with its LocalQueues."""
    monkeypatch.setenv(naming.NAMESPACE_ENV, "kubeflow")
    monkeypatch.setenv(naming.SERVICE_ACCOUNT_ENV, "pipeline-runner")
    monkeypatch.setattr(launcher, "default_api_client", fake_api.api_client)
    fake_api.put_local_queues(NAMESPACE)
    return fake_api


RUN = {"platform": "kubernetes", "launch_namespace": NAMESPACE}


def test_the_run_is_refused_before_its_first_step_where_kserve_lacks_standard_mode(validate_pod):
    fake_api = validate_pod
    fake_api.serve_schema("inferenceservices", kserve_0_16_schema())
    with pytest.raises(ControllerReleaseError) as refused:
        rendering.check_run_parameters("flights-training", {**RUN, "serving_mode": "standard"}, RUN_ID)
    message = str(refused.value)
    assert message.startswith("flights-training: InferenceService ")
    assert (
        "spec.predictor.name (Standard mode's named predictor (serving_mode=standard)) needs KServe v0.20.0"
        in message
    )
    assert fake_api.created() == [] and not [key for key in fake_api.objects if key[0] != "localqueues"]


def test_on_kubeflow_1_11s_trainer_the_run_goes_on_with_the_v2_1_form(validate_pod, caplog):
    """The training step's TrainJob and the tuning step's trial template both fall back."""
    fake_api = validate_pod
    fake_api.serve_schema("trainjobs", TRAINER_V2_1)
    put_flights_runtime(fake_api)
    with caplog.at_level(logging.WARNING, logger="kfstack.kubernetes.dry_run"):
        rendering.check_run_parameters("flights-training", RUN, RUN_ID)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and all("in the Kubeflow Trainer v2.1.0 form" in line for line in lines)
    assert any("the trial job of Experiment" in line for line in lines)
    assert fake_api.created() == []
