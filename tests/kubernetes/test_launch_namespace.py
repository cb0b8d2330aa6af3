"""A launch namespace other than the task pod's own: the pod runs in ``kubeflow`` as
``pipeline-runner`` (standalone KFP's runner), the run names ``launch_namespace=team-ml``, and
everything is created and read back there -- batch jobs created, awaited, their logs read,
cancelled and cleaned up; a Katib Experiment's Trials listed; the InferenceService created,
updated and rolled back, its predictors addressed there, the production model read there --
with audit labels saying where from.

No cluster runs here: the cluster comes from :meth:`Cluster.from_environment` as in a task pod
(the downward-API env the pipeline sets), its client pointed at the fake API server
(tests/kubernetes/fake_api.py), with the fake KServe controller (tests/kubernetes/fake_kserve.py)
for the InferenceService.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kfstack.components.common.cleanup_run.core import cleanup_run_resources
from kfstack.components.serving.model_deployment.stage import STAGE as DEPLOYMENT
from kfstack.components.serving.production_model.core import find_production_model
from kfstack.components.training.distributed_training.stage import STAGE as TRAINING
from kfstack.errors import (
    CancelledError,
    InvalidParameterError,
    LaunchNamespaceError,
    ResourceFailedError,
    ResourceTimeoutError,
)
from kfstack.kubernetes import inference_service as isvc
from kfstack.kubernetes import launcher, naming, resources
from kfstack.kubernetes.katib_result import read_trials
from kfstack.kubernetes.launcher import Cluster, launch
from kfstack.kubernetes.placement import Placement
from kfstack.kubernetes.training_jobs import build_pytorchjob
from kfstack.platforms import run_stage
from kfstack.serving.kserve_rollout import KServeRollout
from kfstack.tuning import trials
from kfstack_examples.flights.predictor import DEFAULT_MODEL_NAME
from tests.components.serving.model_deployment import test_model_deployment as deployment
from tests.kubernetes import test_katib_experiment as katib
from tests.kubernetes.conftest import NAMESPACE as LAUNCH
from tests.kubernetes.conftest import RUN_ID, master_pod_labels, training_request
from tests.kubernetes.fake_kserve import FakeKServeController
from tests.kubernetes.test_launcher import FakeClock, cancel_on_second_read
from tests.kubernetes.test_render import training_arguments
from tests.serving.fake_kserve_cluster import PLACEMENT as SERVING_PLACEMENT
from tests.serving.fake_kserve_cluster import request as serving_request

POD_NAMESPACE = "kubeflow"
SERVICE_ACCOUNT = "pipeline-runner"
AUDIT = {naming.SOURCE_NAMESPACE_LABEL: POD_NAMESPACE, naming.SOURCE_SERVICE_ACCOUNT_LABEL: SERVICE_ACCOUNT}
PLACEMENT = Placement(node_pool="cpu", timeout_seconds=600, poll_interval_seconds=5)


@pytest.fixture
def task_pod(fake_api, monkeypatch):
    """This process as a task pod in ``kubeflow`` running as ``pipeline-runner`` (the env the
    pipeline sets through the downward API), its in-cluster client the fake API server's; the
    cluster's time advances only when it sleeps (a wait that never ends times out at once)."""
    monkeypatch.setenv(naming.NAMESPACE_ENV, POD_NAMESPACE)
    monkeypatch.setenv(naming.SERVICE_ACCOUNT_ENV, SERVICE_ACCOUNT)
    monkeypatch.setattr(launcher, "default_api_client", fake_api.api_client)
    from_environment = Cluster.from_environment.__func__  # type: ignore[attr-defined]

    clock = FakeClock()

    def without_sleeping(cls, stage: str, launch_namespace: str = "") -> Cluster:
        cluster = from_environment(cls, stage, launch_namespace)
        return dataclasses.replace(cluster, sleep=clock.sleep, clock=clock)

    monkeypatch.setattr(Cluster, "from_environment", classmethod(without_sleeping))
    return fake_api


def namespaces_used(fake_api) -> set[str]:
    """The namespace of every namespaced request the launcher made."""
    return {
        path.split("/namespaces/")[1].split("/")[0] for _, path in fake_api.requests if "/namespaces/" in path
    }


def running(name: str) -> dict:
    return {"conditions": [{"type": "Running", "status": "True", "reason": "", "message": ""}]}


def test_a_training_step_is_created_awaited_and_its_log_read_in_the_launch_namespace(task_pod, tmp_path):
    fake_api = task_pod
    fake_api.put_local_queues(LAUNCH)
    args = training_arguments(
        tmp_path, workers=2, training_api="v1", gpu_pool="h100", launch_namespace=LAUNCH
    )

    def controller(name):
        fake_api.statuses.setdefault(
            name,
            [
                running(name),
                {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]},
            ],
        )
        if not fake_api.pods:
            labels = master_pod_labels(name)
            # The same job's pod in the task pod's namespace would be another run's: never read.
            fake_api.add_pod(f"{name}-master-0", POD_NAMESPACE, labels, log="the pod's own namespace")
            fake_api.add_pod(f"{name}-master-0", LAUNCH, labels, log="CUDA out of memory in team-ml")

    fake_api.on_read = controller
    with pytest.raises(ResourceFailedError) as err:
        run_stage(TRAINING, args)  # the cluster from the environment, as in a task pod
    message = str(err.value)
    assert f"PyTorchJob {LAUNCH}/kfs-train-" in message and "BackoffLimitExceeded" in message
    assert "CUDA out of memory in team-ml" in message and "the pod's own namespace" not in message
    ((namespace, name),) = [(ns, n) for plural, ns, n in fake_api.objects if plural == "pytorchjobs"]
    assert namespace == LAUNCH
    labels = fake_api.objects[("pytorchjobs", LAUNCH, name)]["metadata"]["labels"]
    assert labels.items() >= {**AUDIT, naming.RUN_LABEL: RUN_ID}.items()
    # Reviewed, created, polled, its pods listed and log read: all in the launch namespace.
    assert namespaces_used(fake_api) == {LAUNCH}
    assert fake_api.count("GET", f"/namespaces/{LAUNCH}/pods/{name}-master-0/log") == 1
    assert {r["namespace"] for r in fake_api.reviews} == {LAUNCH}


@pytest.mark.parametrize(
    ("launch_namespace", "where", "audited"),
    [(LAUNCH, LAUNCH, True), (POD_NAMESPACE, POD_NAMESPACE, False), ("", POD_NAMESPACE, False)],
    ids=["elsewhere", "named-own", "default-own"],
)
def test_audit_labels_only_where_the_namespaces_differ(task_pod, launch_namespace, where, audited):
    fake_api = task_pod
    body = build_pytorchjob(training_request())
    name = body["metadata"]["name"]
    fake_api.statuses[name] = [running(name), {"conditions": [{"type": "Succeeded", "status": "True"}]}]
    cluster = Cluster.from_environment("distributed-training", launch_namespace)
    final, reference = launch(body, PLACEMENT, cluster)
    assert reference["namespace"] == where and final["metadata"]["namespace"] == where
    labels = fake_api.objects[("pytorchjobs", where, name)]["metadata"]["labels"]
    assert (labels.items() >= AUDIT.items()) is audited
    if not audited:
        assert not {naming.SOURCE_NAMESPACE_LABEL, naming.SOURCE_SERVICE_ACCOUNT_LABEL} & labels.keys()
    assert labels[naming.RUN_LABEL] == RUN_ID  # the run's own label, whatever the namespace
    assert namespaces_used(fake_api) == {where}


def test_a_service_account_name_that_is_no_label_value_is_left_out(task_pod, monkeypatch):
    monkeypatch.setenv(naming.SERVICE_ACCOUNT_ENV, "a." * 40 + "sa")  # a valid name, 82 characters
    cluster = Cluster.from_environment("distributed-training", LAUNCH)
    assert cluster.audit_labels() == {naming.SOURCE_NAMESPACE_LABEL: POD_NAMESPACE}
    monkeypatch.delenv(naming.SERVICE_ACCOUNT_ENV)  # nor env nor token: not known
    assert Cluster.from_environment("x", LAUNCH).audit_labels() == {
        naming.SOURCE_NAMESPACE_LABEL: POD_NAMESPACE
    }


def test_sigterm_deletes_the_job_in_the_launch_namespace(task_pod):
    fake_api = task_pod
    body = build_pytorchjob(training_request())
    name = body["metadata"]["name"]
    fake_api.statuses[name] = [running(name)]
    fake_api.on_read = cancel_on_second_read()
    with pytest.raises(CancelledError):
        launch(body, PLACEMENT, Cluster.from_environment("distributed-training", LAUNCH))
    assert fake_api.count("DELETE", f"/namespaces/{LAUNCH}/pytorchjobs/{name}") == 1
    assert ("pytorchjobs", LAUNCH, name) not in fake_api.objects
    assert namespaces_used(fake_api) == {LAUNCH}


def test_a_katib_experiment_and_its_trials_are_read_in_the_launch_namespace(task_pod):
    fake_api = task_pod
    body = katib.experiment()
    done = katib.experiment_status(katib.condition("Succeeded", "ExperimentGoalReached"))
    fake_api.statuses[katib.NAME] = [katib.RUNNING, done]
    for namespace, trial in ((LAUNCH, "a1"), (POD_NAMESPACE, "z9")):  # same Experiment name, same labels
        record = katib.katib_trial(f"{katib.NAME}-{trial}", "2025-01-01T10:00:00Z", trials.SUCCEEDED, {})
        fake_api.put("trials", namespace, record)
    cluster = Cluster.from_environment("hyperparameter-tuning", LAUNCH)
    final, _ = launch(body, PLACEMENT, cluster)
    assert final["metadata"]["labels"].items() >= AUDIT.items()
    records = read_trials(cluster, final, katib.experiment_request().tuning)
    assert [r.name for r in records] == [f"{katib.NAME}-a1"]
    assert namespaces_used(fake_api) == {LAUNCH}


def test_the_exit_handler_deletes_the_runs_job_in_the_launch_namespace(task_pod):
    fake_api = task_pod
    job = build_pytorchjob(training_request())
    name = job["metadata"]["name"]
    for namespace in (LAUNCH, POD_NAMESPACE):  # the same run's job in both, unfinished
        fake_api.put("pytorchjobs", namespace, {**job, "status": running(name)})
    done = cleanup_run_resources(platform="kubernetes", run_id=RUN_ID, launch_namespace=LAUNCH)
    assert done == [f"PyTorchJob/{name}"]
    assert ("pytorchjobs", LAUNCH, name) not in fake_api.objects
    assert ("pytorchjobs", POD_NAMESPACE, name) in fake_api.objects  # not where this run launched
    # Without a launch namespace the exit handler cleans the pod's own.
    assert cleanup_run_resources(platform="kubernetes", run_id=RUN_ID) == [f"PyTorchJob/{name}"]
    assert ("pytorchjobs", POD_NAMESPACE, name) not in fake_api.objects


@pytest.mark.parametrize("mode", [isvc.STANDARD, isvc.SERVERLESS])
def test_the_inference_service_lives_and_is_addressed_and_rolled_back_in_the_launch_namespace(task_pod, mode):
    fake_api = task_pod
    fake_api.on_read = FakeKServeController(fake_api, LAUNCH, servers={})
    cluster = Cluster.from_environment("model-deployment", LAUNCH)
    suffix = f".{LAUNCH}.svc.cluster.local"

    first = KServeRollout(serving_request(mode, "run-1", "good"), cluster, SERVING_PLACEMENT)
    assert first.deploy_first().url.split("/")[2].endswith(suffix)
    first.promote({})
    service = fake_api.objects[("inferenceservices", LAUNCH, DEFAULT_MODEL_NAME)]
    assert service["metadata"]["labels"].items() >= AUDIT.items()

    canary_run = KServeRollout(serving_request(mode, "run-2", "constant"), cluster, SERVING_PLACEMENT)
    stable, canary = canary_run.deploy_canary()
    assert stable.url.split("/")[2].endswith(suffix) and canary.url.split("/")[2].endswith(suffix)
    assert isvc.canary_in_progress(fake_api.objects[("inferenceservices", LAUNCH, DEFAULT_MODEL_NAME)])

    # The deploy task killed mid-analysis: the exit handler rolls its canary back, there.
    rolled_back = cleanup_run_resources(platform="kubernetes", run_id="run-2", launch_namespace=LAUNCH)
    assert rolled_back == [f"InferenceService/{DEFAULT_MODEL_NAME}"]
    assert not isvc.canary_in_progress(fake_api.objects[("inferenceservices", LAUNCH, DEFAULT_MODEL_NAME)])
    # A later run's production-model step reads it there.
    production = find_production_model("kubernetes", DEFAULT_MODEL_NAME, launch_namespace=LAUNCH)
    assert production is not None and production.version == "run-1"
    assert find_production_model("kubernetes", DEFAULT_MODEL_NAME) is None  # not in the pod's own
    assert not [key for key in fake_api.objects if key[1] == POD_NAMESPACE]
    assert fake_api.count("DELETE") == 0


def test_a_bad_launch_namespace_is_refused_before_any_api_call(task_pod, tmp_path):
    fake_api = task_pod
    args = training_arguments(tmp_path, workers=2, launch_namespace="Team_ML")
    with pytest.raises(InvalidParameterError, match=r"launch_namespace='Team_ML' is not a namespace name"):
        run_stage(TRAINING, args)
    # The exit handler and the production-model read take it as it is: refused there too.
    with pytest.raises(InvalidParameterError, match=r"launch_namespace='team-ml\.' is not a namespace name"):
        Cluster.from_environment("cleanup", "team-ml.")
    assert fake_api.requests == []


@pytest.mark.parametrize(
    ("name", "namespace", "subdomain"),
    [
        ("team-ml", True, True),
        ("a" * 63, True, True),
        ("a" * 64, False, True),  # a subdomain's parts have no bound of their own, its whole 253
        ("team.ml", False, True),
        ("a." * 126 + "a", False, True),
        ("a." * 127 + "a", False, False),
        ("team..ml", False, False),
        ("team-.ml", False, False),
        (".team", False, False),
        ("team.", False, False),
        ("Team_ML", False, False),
        ("-team", False, False),
        ("team\n", False, False),
        ("", False, False),
    ],
)
def test_the_names_the_api_server_takes(name, namespace, subdomain):
    """A namespace's name is a DNS-1123 label, a service account's a subdomain: labels joined by
    dots (kubernetes/apimachinery, pkg/util/validation/validation.go)."""
    assert (naming.check_namespace_name(name) is None) is namespace
    assert bool(naming.DNS_LABEL.match(name)) is namespace
    assert bool(naming.DNS_SUBDOMAIN.match(name)) is subdomain


def test_the_kinds_reviewed_are_the_ones_launched(task_pod, tmp_path):
    """The training step's review asks about its own kind only, not every kind the variant
    choice looked at (auto on a cluster serving both APIs runs a TrainJob)."""
    fake_api = task_pod
    fake_api.put_local_queues(LAUNCH)
    args = training_arguments(tmp_path, workers=2, launch_namespace=LAUNCH)

    def fail_at_once(name):
        fake_api.statuses[name] = [{"conditions": [{"type": "Failed", "status": "True", "reason": "X"}]}]

    fake_api.on_read = fail_at_once
    with pytest.raises(ResourceFailedError, match=rf"TrainJob {LAUNCH}/"):
        run_stage(TRAINING, args)
    assert {r["resource"] for r in fake_api.reviews} == {resources.TRAINJOB.plural, "pods"}


def deployment_arguments(tmp_path, **overrides) -> dict:
    """The model-deployment step's arguments on a cluster, launching in ``team-ml``: a small
    digits holdout on disk (read before the rollout), the model at a remote URI."""
    holdout = tmp_path / "holdout.parquet"
    pq.write_table(pa.table({"p0": [0.0, 1.0], "p1": [1.0, 0.0], "digit": [0, 1]}), holdout)
    values = {
        **deployment.arguments(tmp_path, tmp_path),
        "platform": "kubernetes",
        "model": "s3://models/digits/good",
        "holdout": str(holdout),
        "task_name": "model-deployment",
        "serving_timeout_seconds": 60,
        "launch_namespace": LAUNCH,
    }
    return {**values, **overrides}


def test_the_deployment_step_reviews_the_inference_service_rights_in_the_launch_namespace(task_pod, tmp_path):
    """The deploy step's own review, before its first create: a Role without the update a canary
    and a rollback need refuses it there, naming the permission, and nothing is applied."""
    fake_api = task_pod
    service = resources.INFERENCE_SERVICE
    fake_api.denied = {("update", service.group, service.plural, "", LAUNCH)}
    with pytest.raises(LaunchNamespaceError) as err:
        run_stage(DEPLOYMENT, deployment_arguments(tmp_path))
    message = str(err.value)
    assert message.startswith(
        f"model-deployment: service account {POD_NAMESPACE}/{SERVICE_ACCOUNT} lacks update "
        f"inferenceservices.serving.kserve.io in namespace {LAUNCH}."
    )
    assert fake_api.created() == [] and fake_api.objects == {}
    assert {r["resource"] for r in fake_api.reviews} == {service.plural, "pods"}
    assert {r["namespace"] for r in fake_api.reviews} == {LAUNCH}


def test_the_deployment_step_applies_its_inference_service_in_the_launch_namespace(task_pod, tmp_path):
    """Allowed, it is created there with the audit labels; with no KServe controller to make it
    Ready, the wait times out and leaves it in place."""
    fake_api = task_pod
    with pytest.raises(ResourceTimeoutError, match=rf"InferenceService {LAUNCH}/digits did not become ready"):
        run_stage(DEPLOYMENT, deployment_arguments(tmp_path))
    (key,) = fake_api.objects
    assert key == ("inferenceservices", LAUNCH, "digits")
    assert fake_api.objects[key]["metadata"]["labels"].items() >= AUDIT.items()
    paths = [path for _, path in fake_api.requests]
    assert max(i for i, p in enumerate(paths) if "selfsubjectaccessreviews" in p) < paths.index(
        fake_api.created()[0]
    )
    assert fake_api.count("DELETE") == 0
    assert namespaces_used(fake_api) == {LAUNCH}
