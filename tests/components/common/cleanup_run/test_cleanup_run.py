"""The exit handler (``cleanup_run``): nothing to do off Kubernetes; on a cluster the run's
unfinished batch jobs deleted (finished ones and other runs' left), a canary the run left
unfinished rolled back and one it did not start left alone, and a part that fails not stopping
the other; the component under kfp.local.

No cluster runs here: a fake API server (tests/kubernetes/fake_api.py), and for the canaries a
fake KServe controller routing to real flights predictors (tests/serving/fake_kserve_cluster.py).
"""

from __future__ import annotations

import logging

import pytest

from kfstack.components.common.cleanup_run.core import cleanup_run_resources
from kfstack.errors import InvalidParameterError, ResourceFailedError
from kfstack.kubernetes import inference_service as isvc
from kfstack.kubernetes import launcher
from kfstack.kubernetes.launcher import Cluster
from kfstack.kubernetes.spark_application import build_spark_application
from kfstack.serving.canary import PROMOTE
from kfstack_examples.flights.predictor import DEFAULT_MODEL_NAME
from tests.kfp_local import run_pipeline, task_outputs
from tests.kubernetes.conftest import NAMESPACE, RUN_ID, put_a_runs_objects, spark_request
from tests.kubernetes.fake_api import FakeKubernetesApi
from tests.serving import fake_kserve_cluster
from tests.serving.fake_kserve_cluster import MODELS, deploy, live, rollout, serving_model


def test_off_kubernetes_there_is_nothing_to_clean():
    assert cleanup_run_resources(platform="local", run_id=RUN_ID) == []


def test_an_unknown_platform_is_refused():
    with pytest.raises(InvalidParameterError, match=r"cleanup: platform='cloud' is not one of"):
        cleanup_run_resources(platform="cloud", run_id=RUN_ID)


def test_without_a_kubernetes_api_nothing_can_have_been_created(tmp_path, monkeypatch, caplog):
    # No in-cluster service account here; make sure no kubeconfig is found either.
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KFSTACK_NAMESPACE", raising=False)
    with caplog.at_level(logging.WARNING):
        assert cleanup_run_resources(platform="kubernetes", run_id=RUN_ID) == []
    assert "nothing to clean up: cleanup: platform='kubernetes' needs a Kubernetes API" in caplog.text


def test_a_launch_namespace_that_is_no_namespace_is_logged_and_nothing_asked(monkeypatch, caplog):
    """validate-run refused the run already (the same check): the exit handler says why it has
    nothing to do, and succeeds, rather than failing the run a second time."""
    with FakeKubernetesApi() as api:
        monkeypatch.setattr(launcher, "default_api_client", api.api_client)
        monkeypatch.setenv("KFSTACK_NAMESPACE", "kubeflow")
        with caplog.at_level(logging.WARNING):
            done = cleanup_run_resources(platform="kubernetes", run_id=RUN_ID, launch_namespace="Team_ML")
        assert done == []
        assert api.requests == []
    assert "nothing to clean up: cleanup: launch_namespace='Team_ML' is not a namespace name" in caplog.text


def test_the_runs_unfinished_jobs_are_deleted_and_nothing_else():
    with FakeKubernetesApi() as api:
        running, finished = put_a_runs_objects(api)
        cluster = Cluster(api.api_client(), NAMESPACE)

        assert cleanup_run_resources(platform="kubernetes", run_id=RUN_ID, cluster=cluster) == [
            f"PyTorchJob/{running['metadata']['name']}"
        ]
        assert ("pytorchjobs", NAMESPACE, "kfs-train-other") in api.objects
        assert ("sparkapplications", NAMESPACE, finished["metadata"]["name"]) in api.objects
        # Run again (a retried exit handler): nothing left to delete.
        assert cleanup_run_resources(platform="kubernetes", run_id=RUN_ID, cluster=cluster) == []


def test_a_part_that_fails_does_not_stop_the_other_and_the_step_fails_saying_what_was_done():
    """A Role without InferenceServices (403): the run's Spark job is still deleted, and the step
    then fails naming what it could not clean and what it did."""
    running = build_spark_application(spark_request())
    with FakeKubernetesApi() as api:
        api.put(
            "sparkapplications", NAMESPACE, {**running, "status": {"applicationState": {"state": "RUNNING"}}}
        )
        api.forbidden = {"inferenceservices"}
        with pytest.raises(ResourceFailedError) as failed:
            cleanup_run_resources(
                platform="kubernetes", run_id=RUN_ID, cluster=Cluster(api.api_client(), NAMESPACE)
            )
        assert ("sparkapplications", NAMESPACE, running["metadata"]["name"]) not in api.objects
    message = str(failed.value)
    assert message.startswith(f"cleanup of run {RUN_ID}: ") and "Forbidden" in message
    assert message.endswith(f"(done: SparkApplication/{running['metadata']['name']})")


# --- canaries: a fake KServe cluster with real predictors ------------------------------------


@pytest.mark.parametrize("mode", [isvc.SERVERLESS, isvc.STANDARD])
@pytest.mark.slow
def test_the_exit_handler_rolls_back_a_canary_whose_task_was_killed(kserve_cluster, kserve_holdout, mode):
    api_cluster, api, _ = kserve_cluster
    deploy(rollout(kserve_cluster, mode, "run-1"), kserve_holdout)
    # The deploy task applies its canary and is killed before it can decide.
    rollout(kserve_cluster, mode, "run-2", "constant").deploy_canary()
    assert isvc.model_versions(live(kserve_cluster)) == ("run-1", "run-2")
    # Another run's cleanup leaves it alone; its own run's exit handler rolls it back.
    assert cleanup_run_resources(platform="kubernetes", run_id="run-1", cluster=api_cluster) == []
    assert isvc.canary_in_progress(live(kserve_cluster))
    rolled = cleanup_run_resources(platform="kubernetes", run_id="run-2", cluster=api_cluster)
    assert rolled == [f"InferenceService/{DEFAULT_MODEL_NAME}"]
    assert isvc.model_versions(live(kserve_cluster)) == ("run-1", None)
    assert not isvc.canary_in_progress(live(kserve_cluster))
    assert serving_model(kserve_cluster) == MODELS["good"]
    # And the next deployment starts from there.
    assert deploy(rollout(kserve_cluster, mode, "run-3"), kserve_holdout).decision == PROMOTE
    assert api.count("DELETE") == 0


def test_the_exit_handler_leaves_a_canary_it_did_not_start(kserve_cluster, kserve_holdout):
    api_cluster, api, _ = kserve_cluster
    deploy(rollout(kserve_cluster, isvc.SERVERLESS, "run-1"), kserve_holdout)
    # Someone canaries by hand on the service the run last labelled (no kfstack annotation).
    service = live(kserve_cluster)
    service["spec"]["predictor"]["canaryTrafficPercent"] = 20
    api.put("inferenceservices", fake_kserve_cluster.NAMESPACE, service)
    assert cleanup_run_resources(platform="kubernetes", run_id="run-1", cluster=api_cluster) == []
    assert live(kserve_cluster)["spec"]["predictor"]["canaryTrafficPercent"] == 20


# --- the component ----------------------------------------------------------------------------


# kfp.local warns that the component's image is not plain Python; this process has its packages.
@pytest.mark.filterwarnings("ignore:You may be attemping to run a task:RuntimeWarning")
def test_the_component_runs_under_kfp_local_as_a_team_pipelines_exit_handler(tmp_path):
    """It takes the run's final status, which KFP gives an exit handler's task alone."""
    from kfp import dsl

    from kfstack.components.common.cleanup_run.component import cleanup_run

    @dsl.component
    def step():
        print("the run's work")

    @dsl.pipeline(name="team-cleanup")
    def team_cleanup():
        with dsl.ExitHandler(cleanup_run(platform="local", run_id="run-1")):
            step()

    run = run_pipeline(team_cleanup, tmp_path / "root")
    assert task_outputs(run, "cleanup-run")["parameterValues"] == {"Output": ""}  # nothing left
