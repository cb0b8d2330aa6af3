"""The launcher state machine against a fake Kubernetes API at the HTTP boundary.

Every case goes through the official client over real HTTP to a loopback server; only the
cluster's controllers are scripted (the ``status`` objects show on successive reads).
"""

import os
import signal
from collections.abc import Callable

import pytest

from kfstack.errors import CancelledError, InvalidParameterError, ResourceFailedError, ResourceTimeoutError
from kfstack.kubernetes import resources
from kfstack.kubernetes.launcher import (
    Cluster,
    ResourceLauncher,
    delete_run_resources,
    launch,
    resource_reference,
)
from kfstack.kubernetes.placement import Placement
from kfstack.kubernetes.spark_application import build_spark_application
from kfstack.kubernetes.training_jobs import build_pytorchjob, build_tfjob
from tests.kubernetes.conftest import (
    NAMESPACE,
    RUN_ID,
    master_pod_labels,
    put_a_runs_objects,
    spark_request,
    training_request,
)

PLURAL = "pytorchjobs"


def condition(kind: str, reason: str = "", message: str = "") -> dict:
    return {"type": kind, "status": "True", "reason": reason, "message": message}


def job_status(*kinds: str) -> dict:
    return {"conditions": [condition(k) for k in kinds]}


class FakeClock:
    """Time that advances only when the launcher sleeps: timeouts without waiting."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps = 0

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1

    def __call__(self) -> float:
        return self.now


def launcher_for(fake_api, kind=resources.PYTORCHJOB, clock=None):
    clock = clock or FakeClock()
    return ResourceLauncher(kind, NAMESPACE, fake_api.api_client(), sleep=clock.sleep, clock=clock)


def test_success_creates_once_and_returns_the_finished_job(fake_api):
    body = build_pytorchjob(training_request())
    name = body["metadata"]["name"]
    fake_api.statuses[name] = [
        job_status("Created"),
        job_status("Created", "Running"),
        job_status("Created", "Succeeded"),
    ]
    final = launcher_for(fake_api).run(body, timeout_seconds=600, poll_interval_seconds=5)
    assert resources.PYTORCHJOB.phase(final) is resources.Phase.SUCCEEDED
    assert fake_api.count("POST") == 1
    assert fake_api.count("DELETE") == 0
    stored = fake_api.objects[(PLURAL, NAMESPACE, name)]
    assert stored["spec"] == body["spec"]  # what the builder made is what the API received
    reference = resource_reference(resources.PYTORCHJOB, final)
    assert reference["kind"] == "PyTorchJob" and reference["name"] == name
    assert reference["namespace"] == NAMESPACE and reference["uid"]


def test_failed_condition_reports_conditions_and_the_master_log_tail(fake_api):
    body = build_pytorchjob(training_request())
    name = body["metadata"]["name"]
    fake_api.statuses[name] = [
        job_status("Created", "Running"),
        {
            "conditions": [
                condition("Created"),
                condition(
                    "Failed",
                    "PyTorchJobFailed",
                    f"PyTorchJob {name} is failed because 1 Master replica(s) failed.",
                ),
            ]
        },
    ]
    fake_api.add_pod(
        f"{name}-master-0",
        NAMESPACE,
        master_pod_labels(name),
        log="\n".join(f"line {i}" for i in range(200)) + "\nRuntimeError: CUDA out of memory",
    )
    fake_api.add_pod(
        f"{name}-worker-0",
        NAMESPACE,
        {"training.kubeflow.org/job-name": name, "training.kubeflow.org/replica-type": "worker"},
        log="worker is fine",
    )
    with pytest.raises(ResourceFailedError) as err:
        launcher_for(fake_api).run(body, timeout_seconds=600, poll_interval_seconds=5)
    message = str(err.value)
    assert f"PyTorchJob {NAMESPACE}/{name} failed" in message
    assert "Failed=True reason=PyTorchJobFailed" in message and "1 Master replica(s) failed" in message
    assert f"last lines of pod {name}-master-0" in message
    assert "RuntimeError: CUDA out of memory" in message
    assert "line 199" in message and "line 100" not in message  # a tail, not the whole log
    assert "worker is fine" not in message


def test_timeout_deletes_the_job_and_says_how_far_it_got(fake_api):
    body = build_pytorchjob(training_request())
    name = body["metadata"]["name"]
    fake_api.statuses[name] = [job_status("Created", "Suspended")]  # never admitted by Kueue
    clock = FakeClock()
    with pytest.raises(ResourceTimeoutError) as err:
        launcher_for(fake_api, clock=clock).run(body, timeout_seconds=60, poll_interval_seconds=10)
    assert "did not finish within 60s (last phase Pending); it was deleted" in str(err.value)
    assert "Suspended=True" in str(err.value)
    assert fake_api.count("DELETE", f"/{PLURAL}/{name}") == 1
    assert (PLURAL, NAMESPACE, name) not in fake_api.objects
    assert clock.now > 60


def test_a_retried_step_adopts_the_running_job_instead_of_creating_another(fake_api):
    body = build_pytorchjob(training_request())
    name = body["metadata"]["name"]
    fake_api.put(PLURAL, NAMESPACE, {**body, "status": job_status("Created", "Running")})
    fake_api.statuses[name] = [job_status("Created", "Running"), job_status("Created", "Succeeded")]
    launcher_for(fake_api).run(body, timeout_seconds=600, poll_interval_seconds=5)
    assert fake_api.count("POST") == 0
    assert len([k for k in fake_api.objects if k[0] == PLURAL]) == 1


def test_a_job_that_failed_in_an_earlier_attempt_is_replaced(fake_api):
    body = build_pytorchjob(training_request())
    name = body["metadata"]["name"]
    fake_api.put(PLURAL, NAMESPACE, {**body, "status": job_status("Failed")})
    fake_api.statuses[name] = [job_status("Failed")]
    # After the delete the new object gets a fresh script.
    original_put = fake_api.put

    def put_then_script(plural, namespace, obj):
        original_put(plural, namespace, obj)
        fake_api.statuses[name] = [job_status("Created", "Running"), job_status("Succeeded")]

    fake_api.put = put_then_script
    launcher_for(fake_api).run(body, timeout_seconds=600, poll_interval_seconds=5)
    methods = [m for m, p in fake_api.requests if p.endswith((f"/{PLURAL}/{name}", f"/{PLURAL}"))]
    assert methods.index("DELETE") < methods.index("POST")
    assert fake_api.count("POST") == 1


def test_a_concurrent_create_is_adopted(fake_api):
    body = build_pytorchjob(training_request())
    fake_api.conflict_on_create = True
    fake_api.statuses[body["metadata"]["name"]] = [job_status("Succeeded")]
    final = launcher_for(fake_api).run(body, timeout_seconds=600, poll_interval_seconds=5)
    assert resources.PYTORCHJOB.phase(final) is resources.Phase.SUCCEEDED
    assert fake_api.count("POST") == 1 and fake_api.count("DELETE") == 0


def cancel_on_second_read() -> Callable[[str], None]:
    """An ``on_read`` hook that sends this process SIGTERM, what a cancelled KFP task's pod gets,
    on the second read of a launched object (the first is the adopt-or-create lookup: the
    cancel comes while the job runs)."""
    reads = []

    def on_read(object_name: str) -> None:
        reads.append(object_name)
        if len(reads) == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    return on_read


def test_sigterm_deletes_the_job(fake_api):
    body = build_tfjob(training_request(workers=2))
    name = body["metadata"]["name"]
    fake_api.statuses[name] = [job_status("Created", "Running")]
    fake_api.on_read = cancel_on_second_read()
    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(CancelledError):
        launcher_for(fake_api, kind=resources.TFJOB).run(body, timeout_seconds=600, poll_interval_seconds=5)
    assert fake_api.count("DELETE", f"/tfjobs/{name}") == 1
    assert ("tfjobs", NAMESPACE, name) not in fake_api.objects
    assert signal.getsignal(signal.SIGTERM) is previous


@pytest.mark.parametrize("state", ["FAILED", "SUBMISSION_FAILED"])
def test_spark_application_failure_carries_state_message_and_driver_log(fake_api, state):
    body = build_spark_application(spark_request())
    name = body["metadata"]["name"]
    fake_api.statuses[name] = [
        {"applicationState": {"state": "SUBMITTED"}},
        {"applicationState": {"state": "RUNNING"}, "driverInfo": {"podName": f"{name}-driver"}},
        {
            "applicationState": {"state": state, "errorMessage": "driver container failed with ExitCode: 1"},
            "driverInfo": {"podName": f"{name}-driver"},
        },
    ]
    fake_api.add_pod(
        f"{name}-driver",
        NAMESPACE,
        {"spark-role": "driver"},
        log="kfstack.errors.DataQualityError: 9.1% of rows quarantined (limit 5%)",
    )
    with pytest.raises(ResourceFailedError) as err:
        launcher_for(fake_api, kind=resources.SPARK_APPLICATION).run(
            body, timeout_seconds=600, poll_interval_seconds=5
        )
    message = str(err.value)
    assert f"applicationState: {state}: driver container failed with ExitCode: 1" in message
    assert "9.1% of rows quarantined" in message


def test_spark_application_completes(fake_api):
    body = build_spark_application(spark_request())
    fake_api.statuses[body["metadata"]["name"]] = [
        {"applicationState": {"state": "SUBMITTED"}},
        {"applicationState": {"state": "RUNNING"}},
        {"applicationState": {"state": "COMPLETED"}},
    ]
    final = launcher_for(fake_api, kind=resources.SPARK_APPLICATION).run(
        body, timeout_seconds=600, poll_interval_seconds=5
    )
    assert final["status"]["applicationState"]["state"] == "COMPLETED"


def test_a_missing_pod_log_is_reported_not_raised(fake_api):
    body = build_pytorchjob(training_request())
    fake_api.statuses[body["metadata"]["name"]] = [job_status("Failed")]
    with pytest.raises(ResourceFailedError, match=r"no pod matches training\.kubeflow\.org/job-name="):
        launcher_for(fake_api).run(body, timeout_seconds=600, poll_interval_seconds=5)


def test_bad_timeouts_fail_before_anything_is_created(fake_api):
    body = build_pytorchjob(training_request())
    with pytest.raises(InvalidParameterError):
        launcher_for(fake_api).run(body, timeout_seconds=0, poll_interval_seconds=5)
    assert fake_api.requests == []


def test_cleanup_deletes_only_the_runs_unfinished_objects(fake_api):
    running, finished = put_a_runs_objects(fake_api)
    deleted = delete_run_resources(RUN_ID, Cluster(fake_api.api_client(), NAMESPACE))
    assert deleted == [f"PyTorchJob/{running['metadata']['name']}"]
    assert (PLURAL, NAMESPACE, "kfs-train-other") in fake_api.objects
    assert ("sparkapplications", NAMESPACE, finished["metadata"]["name"]) in fake_api.objects


def test_cleanup_of_one_kind_failing_does_not_stop_the_others(fake_api):
    """A Role not yet updated for TrainJobs (403): the run's Spark job is still deleted, and the
    cleanup then fails saying what it could not clean."""
    running = build_spark_application(spark_request())
    fake_api.put(
        "sparkapplications", NAMESPACE, {**running, "status": {"applicationState": {"state": "RUNNING"}}}
    )
    fake_api.forbidden = {"trainjobs"}
    with pytest.raises(ResourceFailedError) as err:
        delete_run_resources(RUN_ID, Cluster(fake_api.api_client(), NAMESPACE))
    assert f"deleted SparkApplication/{running['metadata']['name']}" in str(err.value)
    assert "could not clean trainjobs.trainer.kubeflow.org: 403 Forbidden" in str(err.value)
    assert ("sparkapplications", NAMESPACE, running["metadata"]["name"]) not in fake_api.objects


# --- long-lived services ----------------------------------------------------------------------
# A test-only kind with the service lifecycle, until the InferenceService exists: what matters is
# that a wait that times out or is cancelled never deletes what serves traffic, and that the run
# cleanup leaves it alone.

WIDGET = resources.ResourceKind(
    kind="Widget",
    group="example.kfstack.dev",
    version="v1",
    plural="widgets",
    phase=resources.service_phase,
    describe=resources.describe_training_job,
    primary_pod=lambda obj: resources.PodRef(name=None, selector="app=widget", container="main"),
    lifecycle=resources.Lifecycle.SERVICE,
)
KINDS_WITH_WIDGET = {**resources.KINDS, WIDGET.kind: WIDGET}


def widget(replicas: int = 1) -> dict:
    return {
        "apiVersion": WIDGET.api_version,
        "kind": WIDGET.kind,
        "metadata": {
            "name": "front",
            "labels": {"kfstack.dev/pipeline-run": RUN_ID, "app.kubernetes.io/part-of": "kfstack"},
        },
        "spec": {"replicas": replicas},
    }


def ready(generation: int) -> dict:
    return {"observedGeneration": generation, "conditions": [condition("Ready")]}


def cluster_for(fake_api, clock=None):
    clock = clock or FakeClock()
    return Cluster(fake_api.api_client(), NAMESPACE, sleep=clock.sleep, clock=clock)


def placement(timeout: int = 600):
    return Placement(node_pool="cpu", timeout_seconds=timeout, poll_interval_seconds=5)


def test_a_service_is_applied_and_awaited_at_the_new_generation(fake_api):
    fake_api.statuses["front"] = [ready(1)]
    final, reference = launch(widget(1), placement(), cluster_for(fake_api), kinds=KINDS_WITH_WIDGET)
    assert final["metadata"]["generation"] == 1 and reference["kind"] == "Widget"
    # A second apply replaces the spec; Ready at the *old* generation is not ready yet.
    fake_api.statuses["front"] = [ready(1), ready(1), ready(2)]
    final, _ = launch(widget(3), placement(), cluster_for(fake_api), kinds=KINDS_WITH_WIDGET)
    assert final["metadata"]["generation"] == 2 and final["spec"]["replicas"] == 3
    assert fake_api.count("PUT") == 1 and fake_api.count("POST") == 1
    assert fake_api.count("DELETE") == 0


def test_a_service_that_is_not_ready_in_time_is_left_in_place(fake_api):
    fake_api.statuses["front"] = [
        {
            "observedGeneration": 1,
            "conditions": [
                {"type": "Ready", "status": "False", "reason": "RevisionMissing", "message": "pulling"}
            ],
        }
    ]
    with pytest.raises(ResourceTimeoutError, match="left in place") as err:
        launch(widget(), placement(timeout=30), cluster_for(fake_api), kinds=KINDS_WITH_WIDGET)
    assert "RevisionMissing" in str(err.value)
    assert fake_api.count("DELETE") == 0
    assert ("widgets", NAMESPACE, "front") in fake_api.objects


def test_a_cancelled_service_rollout_deletes_nothing(fake_api):
    def cancel_once_applied(name):
        if ("widgets", NAMESPACE, name) in fake_api.objects:
            os.kill(os.getpid(), signal.SIGTERM)

    fake_api.on_read = cancel_once_applied
    with pytest.raises(CancelledError):
        launch(widget(), placement(), cluster_for(fake_api), kinds=KINDS_WITH_WIDGET)
    assert fake_api.count("DELETE") == 0
    assert ("widgets", NAMESPACE, "front") in fake_api.objects


def test_run_cleanup_never_deletes_a_service(fake_api):
    fake_api.put("widgets", NAMESPACE, {**widget(), "status": {"observedGeneration": 0}})
    running = build_pytorchjob(training_request())
    fake_api.put(PLURAL, NAMESPACE, {**running, "status": job_status("Running")})
    deleted = delete_run_resources(RUN_ID, cluster_for(fake_api), kinds=KINDS_WITH_WIDGET.values())
    assert deleted == [f"PyTorchJob/{running['metadata']['name']}"]
    assert ("widgets", NAMESPACE, "front") in fake_api.objects
