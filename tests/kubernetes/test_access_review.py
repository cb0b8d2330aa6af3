"""The access review before a launch (kfstack.kubernetes.access), against the fake API server's
``authorization.k8s.io/v1`` SelfSubjectAccessReviews and Kueue LocalQueues (no cluster runs
here), and the Role the manifests ship held to the same table."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml

from kfstack.components.common.cleanup_run.core import cleanup_run_resources
from kfstack.components.training.distributed_training.stage import STAGE as TRAINING
from kfstack.errors import LaunchNamespaceError, PlatformNotAvailableError
from kfstack.kubernetes import access, launcher, naming, node_pools, resources
from kfstack.kubernetes import inference_service as isvc
from kfstack.kubernetes.access import Permission
from kfstack.kubernetes.launcher import Cluster
from kfstack.kubernetes.training_jobs import build_pytorchjob
from kfstack.pipelines import rendering
from kfstack.platforms import run_stage
from kfstack.serving.kserve_rollout import KServeRollout
from kfstack_examples.flights.predictor import DEFAULT_MODEL_NAME
from tests.kubernetes.conftest import (
    NAMESPACE,
    RUN_ID,
    master_pod_labels,
    put_a_runs_objects,
    put_flights_runtime,
    training_request,
)
from tests.kubernetes.fake_kserve import FakeKServeController
from tests.kubernetes.test_katib_experiment import build as build_experiment
from tests.kubernetes.test_launcher import FakeClock
from tests.kubernetes.test_render import training_arguments
from tests.serving.fake_kserve_cluster import PLACEMENT as SERVING_PLACEMENT
from tests.serving.fake_kserve_cluster import request as serving_request

ROLE_FILE = Path(__file__).parents[2] / access.ROLE_FILE
POD_READS = {Permission("list", "pods"), Permission("get", "pods", subresource="log")}


def role_grants() -> set[Permission]:
    """Every (verb, resource/subresource, group) the shipped Role's rules grant."""
    (role,) = [doc for doc in yaml.safe_load_all(ROLE_FILE.read_text()) if doc["kind"] == "Role"]
    granted = set()
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for named in rule["resources"]:
                resource, _, subresource = named.partition("/")
                granted |= {Permission(verb, resource, group, subresource) for verb in rule["verbs"]}
    return granted


def test_the_role_grants_exactly_what_the_review_asks_for():
    assert role_grants() == access.role_permissions()


def used(fake_api) -> set[Permission]:
    """What the requests made so far needed, in RBAC's terms (in whichever namespace)."""
    return {
        Permission(verb, resource, group, subresource)
        for verb, group, resource, subresource, _ in fake_api.permissions_used()
    }


def test_what_the_exit_handler_asks_is_in_the_table_the_role_is_held_to(fake_api):
    """The exit handler of a run that left a job running and a canary undecided: every request
    it makes (listing each kind, deleting the job, reading and updating the service to roll the
    canary back) needs only what :func:`access.role_permissions` grants."""
    fake_api.on_read = FakeKServeController(fake_api, NAMESPACE, servers={})
    cluster = Cluster(fake_api.api_client(), NAMESPACE, sleep=lambda seconds: None)
    first = KServeRollout(serving_request(isvc.STANDARD, "run-0", "good"), cluster, SERVING_PLACEMENT)
    first.deploy_first()
    first.promote({})
    KServeRollout(
        serving_request(isvc.STANDARD, RUN_ID, "constant"), cluster, SERVING_PLACEMENT
    ).deploy_canary()
    running, _ = put_a_runs_objects(fake_api)
    fake_api.requests.clear()
    done = cleanup_run_resources(platform="kubernetes", run_id=RUN_ID, cluster=cluster)
    assert done == [f"PyTorchJob/{running['metadata']['name']}", f"InferenceService/{DEFAULT_MODEL_NAME}"]
    asked = used(fake_api)
    assert asked <= access.role_permissions()
    # Not vacuous: the job's delete and the service's rollback were among them.
    service = resources.INFERENCE_SERVICE
    assert {
        Permission("delete", "pytorchjobs", "kubeflow.org"),
        Permission("update", service.plural, service.group),
    } <= asked


def test_the_permissions_of_each_lifecycle():
    assert set(access.permissions([resources.PYTORCHJOB])) == {
        *(Permission(verb, "pytorchjobs", "kubeflow.org") for verb in ("create", "get", "list", "delete")),
        *POD_READS,
    }
    assert set(access.permissions([resources.INFERENCE_SERVICE])) == {
        *(
            Permission(verb, "inferenceservices", "serving.kserve.io")
            for verb in ("create", "get", "list", "update")
        ),
        *POD_READS,
    }
    # A Katib Experiment's trials are listed too; its trial jobs are Katib's to create, not ours.
    experiment = set(access.permissions([resources.EXPERIMENT]))
    assert Permission("list", "trials", "kubeflow.org") in experiment
    assert not any(p.resource == "pytorchjobs" for p in experiment)
    assert str(Permission("get", "pods", subresource="log")) == "get pods/log"
    assert str(Permission("create", "pytorchjobs", "kubeflow.org")) == "create pytorchjobs.kubeflow.org"


def test_the_queues_the_objects_name_at_any_depth():
    assert access.queues([build_pytorchjob(training_request(profile="h100"))]) == ["kfstack-h100"]
    assert access.queues([build_pytorchjob(training_request(profile="cpu"))]) == []
    # A Katib Experiment names its queue in the trial template only.
    experiment = build_experiment("pytorchjob")
    assert node_pools.KUEUE_QUEUE_LABEL not in experiment["metadata"].get("labels", {})
    assert access.queues([experiment]) == ["kfstack-h100"]


def launch_cluster(fake_api, *, queues: bool = True) -> Cluster:
    if queues:
        fake_api.put_local_queues(NAMESPACE)
    clock = FakeClock()  # a launch that should not have started ends at its timeout, at once
    return Cluster(
        fake_api.api_client(),
        NAMESPACE,
        sleep=clock.sleep,
        clock=clock,
        source_namespace="kubeflow",
        service_account="pipeline-runner",
    )


def failing_training(fake_api):
    """A controller that fails the training job at once, its master pod there with a log: enough
    to see it was created, and to have the failure's report read that log."""

    def controller(name):
        fake_api.statuses[name] = [{"conditions": [{"type": "Failed", "status": "True", "reason": "X"}]}]
        if not fake_api.pods:
            fake_api.add_pod(f"{name}-master-0", NAMESPACE, master_pod_labels(name), log="loss is nan")

    fake_api.on_read = controller


def test_one_review_per_permission_in_the_launch_namespace_before_the_first_create(fake_api, tmp_path):
    args = training_arguments(tmp_path, workers=2, training_api="v1", gpu_pool="h100")
    failing_training(fake_api)
    with pytest.raises(Exception, match=r"PyTorchJob team-ml/kfs-train-\w+ failed"):
        run_stage(TRAINING, args, cluster=launch_cluster(fake_api))
    asked = {
        Permission(r["verb"], r["resource"], r.get("group", ""), r.get("subresource", ""))
        for r in fake_api.reviews
    }
    assert asked == set(access.permissions([resources.PYTORCHJOB]))
    assert len(fake_api.reviews) == len(asked)  # each once
    assert {r["namespace"] for r in fake_api.reviews} == {NAMESPACE}
    paths = [p for _, p in fake_api.requests]
    first_create = paths.index(fake_api.created()[0])
    last_review = max(i for i, p in enumerate(paths) if "selfsubjectaccessreviews" in p)
    queue_read = paths.index(f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NAMESPACE}/localqueues/kfstack-h100")
    assert last_review < first_create and queue_read < first_create
    # The table covers what the launch then did: created, polled, its pod listed, its log read.
    assert used(fake_api) <= {*access.permissions([resources.PYTORCHJOB]), access.LOCAL_QUEUE_GET}
    assert Permission("get", "pods", subresource="log") in used(fake_api)


def test_missing_permissions_are_named_in_one_error_and_nothing_is_created(fake_api, tmp_path):
    args = training_arguments(tmp_path, workers=2, training_api="v1", gpu_pool="h100")
    fake_api.denied = {
        ("create", "kubeflow.org", "pytorchjobs", "", NAMESPACE),
        ("get", "", "pods", "log", NAMESPACE),
        # Another group's resource of the same name is another permission: not this one.
        ("delete", "other.example.com", "pytorchjobs", "", NAMESPACE),
    }
    with pytest.raises(LaunchNamespaceError) as err:
        run_stage(TRAINING, args, cluster=launch_cluster(fake_api))
    message = str(err.value)
    assert message.startswith("distributed-training: service account kubeflow/pipeline-runner lacks ")
    assert f"create pytorchjobs.kubeflow.org in namespace {NAMESPACE}" in message
    assert f"get pods/log in namespace {NAMESPACE}" in message
    assert "delete pytorchjobs" not in message  # only what is missing, in its own group
    assert f"Bind it in {NAMESPACE} to the Role kfstack-launcher" in message
    assert '"A launch namespace"' in message and message.endswith("Nothing was submitted.")
    assert isinstance(err.value, PlatformNotAvailableError)  # a setup problem: exit 2
    assert fake_api.created() == []
    assert not [key for key in fake_api.objects if key[0] != "localqueues"]


def test_a_missing_local_queue_is_refused_with_its_name_and_namespace(fake_api, tmp_path):
    args = training_arguments(tmp_path, workers=2, training_api="v1", gpu_pool="h100")
    fake_api.put_local_queues("kubeflow")  # the pod's own namespace has them; the launch one not
    with pytest.raises(
        LaunchNamespaceError, match=rf"the Kueue LocalQueue {NAMESPACE}/kfstack-h100 .* not there"
    ):
        run_stage(TRAINING, args, cluster=launch_cluster(fake_api, queues=False))
    assert fake_api.created() == []


def test_a_forbidden_local_queue_names_the_permission(fake_api, tmp_path):
    args = training_arguments(tmp_path, workers=2, training_api="v1", gpu_pool="h100")
    fake_api.forbidden = {"localqueues"}
    with pytest.raises(
        LaunchNamespaceError, match=rf"lacks get localqueues\.kueue\.x-k8s\.io in namespace {NAMESPACE}\."
    ):
        run_stage(TRAINING, args, cluster=launch_cluster(fake_api))
    assert fake_api.created() == []


def test_a_pool_without_a_queue_reads_no_queue(fake_api):
    access.review(
        "spark-job",
        launch_cluster(fake_api, queues=False),
        [build_pytorchjob(training_request(profile="cpu"))],
    )
    assert not [p for _, p in fake_api.requests if "localqueues" in p]
    assert fake_api.reviews  # the permissions were still asked


def test_nothing_to_launch_asks_nothing(fake_api):
    access.review("model-deployment", launch_cluster(fake_api), [])
    assert fake_api.requests == []


def test_an_api_server_that_answers_no_review_is_logged_and_the_queue_still_read(fake_api, caplog):
    fake_api.forbidden = {"selfsubjectaccessreviews"}
    access.review("distributed-training", launch_cluster(fake_api), [build_pytorchjob(training_request())])
    assert "answered no access review (403 Forbidden)" in caplog.text
    assert fake_api.count("GET", "/localqueues/kfstack-h100") == 1


def test_without_a_known_service_account_the_error_says_whose(fake_api):
    cluster = Cluster(fake_api.api_client(), NAMESPACE)
    fake_api.denied = {("list", "", "pods", "", NAMESPACE)}
    with pytest.raises(
        LaunchNamespaceError, match=r": this step's service account lacks list pods in namespace team-ml\."
    ):
        access.review("spark-job", cluster, [build_pytorchjob(training_request(profile="cpu"))])


# --- the whole run, before its first step ------------------------------------------------------


@pytest.fixture
def validate_pod(fake_api, monkeypatch):
    """This process as the run's validate-parameters pod in ``kubeflow``, running as
    ``pipeline-runner`` (the downward-API env the pipeline sets), its in-cluster client the fake
    API server's."""
    monkeypatch.setenv(naming.NAMESPACE_ENV, "kubeflow")
    monkeypatch.setenv(naming.SERVICE_ACCOUNT_ENV, "pipeline-runner")
    monkeypatch.setattr(launcher, "default_api_client", fake_api.api_client)
    return fake_api


def test_the_run_is_refused_before_its_first_step_naming_all_that_is_missing(validate_pod):
    """flights-training launching in team-ml, whose Role lacks the TrainJob create and which has
    no LocalQueues: the parameter check, before the Spark job, names both in one error."""
    fake_api = validate_pod
    fake_api.put_local_queues("kubeflow")  # the pod's own namespace has them; the launch one not
    trainjobs = resources.TRAINJOB
    fake_api.denied = {("create", trainjobs.group, trainjobs.plural, "", NAMESPACE)}
    with pytest.raises(LaunchNamespaceError) as err:
        rendering.check_run_parameters(
            "flights-training", {"platform": "kubernetes", "launch_namespace": NAMESPACE}, RUN_ID
        )
    message = str(err.value)
    assert message.startswith("flights-training: service account kubeflow/pipeline-runner lacks ")
    assert f"create trainjobs.trainer.kubeflow.org in namespace {NAMESPACE}." in message
    assert f"the Kueue LocalQueue {NAMESPACE}/kfstack-h100 " in message
    assert message.count("Nothing was submitted") == 1
    assert fake_api.created() == []
    # Every step's kind was asked about, once each and in the launch namespace: the Spark job,
    # the Experiment, the variant the cluster serves first (a TrainJob, not a PyTorchJob too),
    # the InferenceService.
    asked = [(r["resource"], r["verb"]) for r in fake_api.reviews if r["resource"] != "pods"]
    assert {resource for resource, _ in asked} == {
        resources.SPARK_APPLICATION.plural,
        resources.EXPERIMENT.plural,
        resources.TRIAL.plural,
        trainjobs.plural,
        resources.INFERENCE_SERVICE.plural,
    }
    assert len(asked) == len(set(asked))
    assert {r["namespace"] for r in fake_api.reviews} == {NAMESPACE}


def test_the_run_passes_where_everything_is_there(validate_pod):
    fake_api = validate_pod
    fake_api.put_local_queues(NAMESPACE)
    put_flights_runtime(fake_api)
    rendering.check_run_parameters(
        "flights-training", {"platform": "kubernetes", "launch_namespace": NAMESPACE}, RUN_ID
    )
    assert fake_api.reviews and fake_api.created() == []


def test_launches_in_two_namespaces_are_reviewed_in_each_with_one_error(fake_api):
    fake_api.put_local_queues("team-b")
    fake_api.denied = {("list", "", "pods", "", NAMESPACE), ("list", "", "pods", "", "team-b")}
    job = build_pytorchjob(training_request(profile="h100"))
    with pytest.raises(LaunchNamespaceError) as err:
        access.review_launches(
            "team-pipeline",
            [
                (Cluster(fake_api.api_client(), NAMESPACE), [job]),
                (Cluster(fake_api.api_client(), "team-b"), [job]),
            ],
        )
    message = str(err.value)
    assert "lacks list pods in namespace team-ml." in message
    assert "lacks list pods in namespace team-b." in message
    assert "LocalQueue team-ml/kfstack-h100" in message and "team-b/kfstack-h100" not in message
    assert message.count("Nothing was submitted") == 1


# --- who the task pod is ----------------------------------------------------------------------


def token(claims: dict) -> str:
    """A JWT as the kubelet mounts it: header.payload.signature, base64url without padding."""

    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


def test_the_service_account_from_the_env_then_the_token(tmp_path):
    path = tmp_path / "token"
    path.write_text(token({"sub": "system:serviceaccount:kubeflow:pipeline-runner", "aud": ["x"]}))
    env = {naming.SERVICE_ACCOUNT_ENV: "default-editor"}
    assert naming.current_service_account(env, str(path)) == "default-editor"
    assert naming.current_service_account({}, str(path)) == "pipeline-runner"
    path.write_text(token({"sub": "system:node:worker-1"}))  # not a service account
    assert naming.current_service_account({}, str(path)) == ""
    path.write_text("not a token")
    assert naming.current_service_account({}, str(path)) == ""
    assert naming.current_service_account({}, str(tmp_path / "absent")) == ""
