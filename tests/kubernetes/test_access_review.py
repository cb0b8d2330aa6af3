"""The access review before a launch (kfstack.kubernetes.access), against the fake API server's
``authorization.k8s.io/v1`` SelfSubjectAccessReviews and Kueue LocalQueues (no cluster runs
here), and the Role the manifests ship held to the same table."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml

from kfstack.components.training.distributed_training.stage import STAGE as TRAINING
from kfstack.errors import LaunchNamespaceError, PlatformNotAvailableError
from kfstack.kubernetes import access, naming, node_pools, resources
from kfstack.kubernetes.access import Permission
from kfstack.kubernetes.launcher import Cluster
from kfstack.kubernetes.training_jobs import build_pytorchjob
from kfstack.platforms import run_stage
from tests.kubernetes.conftest import NAMESPACE, training_request
from tests.kubernetes.test_katib_experiment import build as build_experiment
from tests.kubernetes.test_launcher import FakeClock
from tests.kubernetes.test_render import training_arguments

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


def test_the_exit_handler_needs_nothing_the_role_lacks():
    """What cleanup_run calls: the batch jobs listed and deleted, the run's InferenceServices
    listed, read and updated (a canary rolled back); the production-model read is a get."""
    cleanup = {
        Permission(verb, kind.plural, kind.group)
        for kind in resources.KINDS.values()
        for verb in (
            ("list", "delete") if kind.lifecycle is resources.Lifecycle.BATCH else ("list", "get", "update")
        )
    }
    assert cleanup <= role_grants()


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


def created(fake_api) -> list[tuple[str, str]]:
    """Every create of anything but an access review."""
    return [(m, p) for m, p in fake_api.requests if m == "POST" and "selfsubjectaccessreviews" not in p]


def failing_training(fake_api):
    """A controller that fails the training job at once: enough to see it was created."""

    def controller(name):
        fake_api.statuses[name] = [{"conditions": [{"type": "Failed", "status": "True", "reason": "X"}]}]

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
    first_create = paths.index(created(fake_api)[0][1])
    last_review = max(i for i, p in enumerate(paths) if "selfsubjectaccessreviews" in p)
    queue_read = paths.index(f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NAMESPACE}/localqueues/kfstack-h100")
    assert last_review < first_create and queue_read < first_create


def test_missing_permissions_are_named_in_one_error_and_nothing_is_created(fake_api, tmp_path):
    args = training_arguments(tmp_path, workers=2, training_api="v1", gpu_pool="h100")
    fake_api.denied = {("create", "pytorchjobs", "", NAMESPACE), ("get", "pods", "log", NAMESPACE)}
    with pytest.raises(LaunchNamespaceError) as err:
        run_stage(TRAINING, args, cluster=launch_cluster(fake_api))
    message = str(err.value)
    assert message.startswith("distributed-training: service account kubeflow/pipeline-runner lacks ")
    assert f"create pytorchjobs.kubeflow.org in namespace {NAMESPACE}" in message
    assert f"get pods/log in namespace {NAMESPACE}" in message
    assert "delete pytorchjobs" not in message  # only what is missing
    assert f"Bind it in {NAMESPACE} to the Role kfstack-launcher" in message
    assert '"A launch namespace"' in message and message.endswith("Nothing was submitted.")
    assert isinstance(err.value, PlatformNotAvailableError)  # a setup problem: exit 2
    assert created(fake_api) == []
    assert not [key for key in fake_api.objects if key[0] != "localqueues"]


def test_a_missing_local_queue_is_refused_with_its_name_and_namespace(fake_api, tmp_path):
    args = training_arguments(tmp_path, workers=2, training_api="v1", gpu_pool="h100")
    fake_api.put_local_queues("kubeflow")  # the pod's own namespace has them; the launch one not
    with pytest.raises(
        LaunchNamespaceError, match=rf"the Kueue LocalQueue {NAMESPACE}/kfstack-h100 .* not there"
    ):
        run_stage(TRAINING, args, cluster=launch_cluster(fake_api, queues=False))
    assert created(fake_api) == []


def test_a_forbidden_local_queue_names_the_permission(fake_api, tmp_path):
    args = training_arguments(tmp_path, workers=2, training_api="v1", gpu_pool="h100")
    fake_api.forbidden = {"localqueues"}
    with pytest.raises(
        LaunchNamespaceError, match=rf"lacks get localqueues\.kueue\.x-k8s\.io in namespace {NAMESPACE}\."
    ):
        run_stage(TRAINING, args, cluster=launch_cluster(fake_api))
    assert created(fake_api) == []


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
    fake_api.denied = {("list", "pods", "", NAMESPACE)}
    with pytest.raises(
        LaunchNamespaceError, match=r": this step's service account lacks list pods in namespace team-ml\."
    ):
        access.review("spark-job", cluster, [build_pytorchjob(training_request(profile="cpu"))])


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
