"""The launcher's state machine for Kubeflow Trainer v2's TrainJob (``trainer.kubeflow.org/v1alpha1``).

Adopt or create, wait, failure with node 0's log tail, timeout, cancel, the run's cleanup, API
discovery and the Katib trial contract -- through the official client over real HTTP to the fake
API server (:mod:`tests.kubernetes.fake_api`). No cluster runs here: the scripted ``status``
objects are what Trainer v2.3's controller reports (conditions ``Suspended``, ``Complete``,
``Failed`` and ``status.jobsStatus``).
"""

import logging
import os
import signal

import pytest

from kfstack.errors import CancelledError, ResourceFailedError, ResourceTimeoutError
from kfstack.kubernetes import naming, resources
from kfstack.kubernetes.launcher import Cluster, delete_run_resources, resource_reference
from kfstack.kubernetes.train_job import build_trainjob
from kfstack.kubernetes.training_jobs import build_pytorchjob
from tests.kubernetes.conftest import NAMESPACE, RUN_ID, training_request
from tests.kubernetes.test_launcher import FakeClock, condition, job_status, launcher_for

PLURAL = "trainjobs"
COLLECTION = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NAMESPACE}/{PLURAL}"

# What Trainer v2.3 reports, in the order a Kueue-queued TrainJob goes through it.
SUSPENDED = {"conditions": [condition("Suspended", "Suspended", "TrainJob is suspended")]}
RESUMED = {
    "type": "Suspended",
    "status": "False",
    "reason": "Resumed",
    "message": "TrainJob is resumed",
}


def jobs_status(active: int = 0, succeeded: int = 0, failed: int = 0) -> list[dict]:
    return [
        {
            "name": "node",
            "active": active,
            "ready": active,
            "succeeded": succeeded,
            "failed": failed,
            "suspended": 0,
        }
    ]


RUNNING = {"conditions": [RESUMED], "jobsStatus": jobs_status(active=2)}
COMPLETE = {
    "conditions": [RESUMED, condition("Complete", "AllJobsCompleted", "jobset completed successfully")],
    "jobsStatus": jobs_status(succeeded=2),
}


def failed(message: str = "jobset failed: job node-0 failed") -> dict:
    return {
        "conditions": [RESUMED, condition("Failed", "FailedJobs", message)],
        "jobsStatus": jobs_status(failed=1),
    }


def trainjob(task: str = "train-pytorch") -> dict:
    return build_trainjob(
        training_request(
            name=naming.resource_name("kfs-train", RUN_ID, task), labels=naming.run_labels(RUN_ID, task)
        )
    )


def trainjob_launcher(fake_api, clock=None):
    return launcher_for(fake_api, kind=resources.TRAINJOB, clock=clock)


def assert_stored_as_built(fake_api, body: dict) -> None:
    """The API received exactly the built body (the server adds only its own metadata)."""
    stored = fake_api.objects[(PLURAL, NAMESPACE, body["metadata"]["name"])]
    server_set = {"uid", "generation", "resourceVersion", "namespace"}
    received = {key: value for key, value in stored.items() if key != "status"}
    received["metadata"] = {k: v for k, v in stored["metadata"].items() if k not in server_set}
    assert received == body
    assert stored["spec"]["suspend"] is True  # profile h100 queues on Kueue


def node_pod(fake_api, job_name: str, index: int, log: str) -> str:
    """A pod of node ``index`` of TrainJob ``job_name``, labelled as JobSet labels it."""
    name = f"{job_name}-node-0-{index}-abcde"
    labels = {
        "jobset.sigs.k8s.io/jobset-name": job_name,
        "jobset.sigs.k8s.io/replicatedjob-name": "node",
        "batch.kubernetes.io/job-completion-index": str(index),
    }
    fake_api.add_pod(name, NAMESPACE, labels, log=log)
    return name


def test_complete_creates_once_and_returns_the_finished_trainjob(fake_api):
    body = trainjob()
    name = body["metadata"]["name"]
    fake_api.statuses[name] = [RUNNING, COMPLETE]
    final = trainjob_launcher(fake_api).run(body, timeout_seconds=600, poll_interval_seconds=5)
    assert resources.TRAINJOB.phase(final) is resources.Phase.SUCCEEDED
    assert final["status"] == COMPLETE
    assert fake_api.count("POST") == 1 and fake_api.count("POST", COLLECTION) == 1
    assert fake_api.count("DELETE") == 0
    assert_stored_as_built(fake_api, body)
    reference = resource_reference(resources.TRAINJOB, final)
    assert reference["apiVersion"] == "trainer.kubeflow.org/v1alpha1"
    assert reference["kind"] == "TrainJob" and reference["name"] == name
    assert reference["namespace"] == NAMESPACE and reference["uid"]


def test_failed_reports_the_condition_and_node_0s_log_tail(fake_api):
    body = trainjob()
    name = body["metadata"]["name"]
    fake_api.statuses[name] = [RUNNING, failed("jobset failed: job node-0 failed (BackoffLimitExceeded)")]
    node_pod(fake_api, "kfs-train-another-job", 0, log="another job's node 0")  # listed first
    node_0 = node_pod(fake_api, name, 0, log="epoch 1/4\nloss=0.7\nRuntimeError: NCCL error")
    node_pod(fake_api, name, 1, log="node 1: terminated by peer")
    with pytest.raises(ResourceFailedError) as err:
        trainjob_launcher(fake_api).run(body, timeout_seconds=600, poll_interval_seconds=5)
    message = str(err.value)
    assert f"TrainJob {NAMESPACE}/{name} failed" in message
    assert "Failed=True reason=FailedJobs: jobset failed: job node-0 failed (BackoffLimitExceeded)" in message
    assert f"last lines of pod {node_0}:\nepoch 1/4\nloss=0.7\nRuntimeError: NCCL error" in message
    assert "node 1" not in message and "another job" not in message
    assert fake_api.count("DELETE") == 0  # a failed job stays for inspection


def test_a_suspended_trainjob_runs_once_kueue_admits_it(fake_api, caplog):
    body = trainjob()
    name = body["metadata"]["name"]
    script = [SUSPENDED, SUSPENDED, RUNNING, COMPLETE]
    assert [resources.trainjob_phase({"status": s}).value for s in script] == [
        "Pending",
        "Pending",
        "Running",
        "Succeeded",
    ]
    fake_api.statuses[name] = script
    with caplog.at_level(logging.INFO, logger="kfstack.kubernetes.launcher"):
        final = trainjob_launcher(fake_api).run(body, timeout_seconds=600, poll_interval_seconds=5)
    assert final["status"] == COMPLETE
    phases = [r.args[1] for r in caplog.records if r.msg == "%s: %s (generation %s)"]
    assert phases == ["Pending", "Running", "Succeeded"]
    assert fake_api.count("POST") == 1 and fake_api.count("DELETE") == 0


def test_timeout_while_suspended_deletes_the_trainjob(fake_api):
    body = trainjob()
    name = body["metadata"]["name"]
    fake_api.statuses[name] = [SUSPENDED]  # Kueue never admits it
    clock = FakeClock()
    with pytest.raises(ResourceTimeoutError) as err:
        trainjob_launcher(fake_api, clock=clock).run(body, timeout_seconds=60, poll_interval_seconds=10)
    message = str(err.value)
    assert (
        f"TrainJob {NAMESPACE}/{name} did not finish within 60s (last phase Pending); it was deleted"
        in message
    )
    assert "Suspended=True reason=Suspended: TrainJob is suspended" in message
    assert "(no pod matches jobset.sigs.k8s.io/jobset-name=" in message  # no pod while suspended
    assert fake_api.count("POST") == 1
    assert fake_api.count("DELETE") == 1 and fake_api.count("DELETE", f"{COLLECTION}/{name}") == 1
    assert (PLURAL, NAMESPACE, name) not in fake_api.objects
    assert clock.now > 60


def test_a_retried_step_adopts_the_running_trainjob(fake_api):
    body = trainjob()
    name = body["metadata"]["name"]
    fake_api.put(PLURAL, NAMESPACE, {**body, "status": RUNNING})
    uid = fake_api.objects[(PLURAL, NAMESPACE, name)]["metadata"]["uid"]
    fake_api.statuses[name] = [RUNNING, RUNNING, COMPLETE]
    final = trainjob_launcher(fake_api).run(body, timeout_seconds=600, poll_interval_seconds=5)
    assert final["status"] == COMPLETE and final["metadata"]["uid"] == uid
    assert fake_api.count("POST") == 0 and fake_api.count("DELETE") == 0
    assert [key for key in fake_api.objects if key[0] == PLURAL] == [(PLURAL, NAMESPACE, name)]


def test_a_trainjob_that_failed_in_an_earlier_attempt_is_replaced(fake_api):
    body = trainjob()
    name = body["metadata"]["name"]
    fake_api.put(PLURAL, NAMESPACE, {**body, "status": failed()})
    old_uid = fake_api.objects[(PLURAL, NAMESPACE, name)]["metadata"]["uid"]

    def script_the_new_trainjob_once_the_old_is_gone(object_name):
        if (PLURAL, NAMESPACE, object_name) not in fake_api.objects:
            fake_api.statuses[object_name] = [RUNNING, COMPLETE]

    fake_api.on_read = script_the_new_trainjob_once_the_old_is_gone
    final = trainjob_launcher(fake_api).run(body, timeout_seconds=600, poll_interval_seconds=5)
    assert final["status"] == COMPLETE and final["metadata"]["uid"] != old_uid
    methods = [method for method, path in fake_api.requests if method in ("DELETE", "POST")]
    assert methods == ["DELETE", "POST"]
    assert fake_api.count("DELETE", f"{COLLECTION}/{name}") == 1 and fake_api.count("POST", COLLECTION) == 1
    assert_stored_as_built(fake_api, body)


def test_sigterm_during_the_wait_deletes_the_trainjob(fake_api):
    body = trainjob()
    name = body["metadata"]["name"]
    fake_api.statuses[name] = [RUNNING]
    sent = []

    def cancel_once_created(object_name):
        if (PLURAL, NAMESPACE, object_name) in fake_api.objects and not sent:
            sent.append(object_name)
            os.kill(os.getpid(), signal.SIGTERM)  # what a cancelled KFP task's pod gets

    fake_api.on_read = cancel_once_created
    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(CancelledError):
        trainjob_launcher(fake_api).run(body, timeout_seconds=600, poll_interval_seconds=5)
    assert sent == [name]
    assert fake_api.count("POST") == 1
    assert fake_api.count("DELETE") == 1 and fake_api.count("DELETE", f"{COLLECTION}/{name}") == 1
    assert (PLURAL, NAMESPACE, name) not in fake_api.objects
    assert signal.getsignal(signal.SIGTERM) is previous


def test_cleanup_deletes_the_runs_unfinished_trainjob_and_leaves_a_complete_one(fake_api):
    queued, done = trainjob("train-pytorch"), trainjob("train-again")
    fake_api.put(PLURAL, NAMESPACE, {**queued, "status": SUSPENDED})
    fake_api.put(PLURAL, NAMESPACE, {**done, "status": COMPLETE})
    deleted = delete_run_resources(RUN_ID, Cluster(fake_api.api_client(), NAMESPACE))
    assert deleted == [f"TrainJob/{queued['metadata']['name']}"]
    assert fake_api.count("DELETE") == 1
    assert (PLURAL, NAMESPACE, queued["metadata"]["name"]) not in fake_api.objects
    assert (PLURAL, NAMESPACE, done["metadata"]["name"]) in fake_api.objects


def test_cleanup_works_on_a_cluster_without_the_trainjob_api(fake_api):
    fake_api.serve_only(resources.PYTORCHJOB, resources.TFJOB, resources.SPARK_APPLICATION)
    running = build_pytorchjob(training_request())
    fake_api.put("pytorchjobs", NAMESPACE, {**running, "status": job_status("Created", "Running")})
    deleted = delete_run_resources(RUN_ID, Cluster(fake_api.api_client(), NAMESPACE))
    assert deleted == [f"PyTorchJob/{running['metadata']['name']}"]
    assert fake_api.count("GET", COLLECTION) == 1  # listed, answered 404, skipped
    assert fake_api.count("DELETE") == 1


def test_discovery_tells_whether_the_cluster_serves_trainjobs(fake_api):
    cluster = Cluster(fake_api.api_client(), NAMESPACE)
    assert cluster.serves(resources.TRAINJOB) is True
    fake_api.serve_only(resources.PYTORCHJOB)
    assert cluster.serves(resources.TRAINJOB) is False
    assert cluster.serves(resources.PYTORCHJOB) is True


def test_the_katib_trial_contract_and_the_launchers_node_0_selector():
    trial = resources.TRAINJOB.trial
    assert trial.success_condition == 'status.conditions.#(type=="Complete")#|#(status=="True")#'
    assert trial.failure_condition == 'status.conditions.#(type=="Failed")#|#(status=="True")#'
    node_0 = {
        "jobset.sigs.k8s.io/replicatedjob-name": "node",
        "batch.kubernetes.io/job-completion-index": "0",
    }
    assert trial.primary_pod_labels == node_0
    assert trial.primary_container == "node"
    body = trainjob()
    ref = resources.TRAINJOB.primary_pod(body)
    selector = dict(term.split("=", 1) for term in ref.selector.split(","))
    assert selector == {"jobset.sigs.k8s.io/jobset-name": body["metadata"]["name"], **node_0}
    assert ref.name is None and ref.container == "node"
