"""Tracking on a cluster, without one: a launching task's run (KFP's plugin's, or made by the
task under the KFP run's parent) against a real tracking server on loopback, the launched objects
it renders (tested with the builders in the components' tests), and a task run through a fake
Kubernetes API whose SparkApplication carries the task's run to its pods."""

import inspect
import json
import uuid

import pytest

from kfstack.components.common.cleanup_run.core import end_tracked_run
from kfstack.pipelines import run_tracking
from kfstack.tracking import cluster, runs
from kfstack.tracking.cluster import task_tracking
from kfstack.version import __version__

KFP_RUN = "8d2f6a0c-1b3e-4f5a-9c7d-0e1f2a3b4c5d"


def env_of(role):
    return {var["name"]: var for var in role["env"]}


def test_with_kfps_plugin_on_the_task_uses_its_run_and_passes_on_what_it_set(refusing_uri, capsys):
    """KFP made the runs and set them in the task's container: nothing is asked of the server
    (it refuses here: a request would fail and say so), and the launched pods get the same."""
    plugin = {
        "MLFLOW_TRACKING_URI": refusing_uri,
        "MLFLOW_RUN_ID": "task-run-1",
        "MLFLOW_EXPERIMENT_ID": "12",
        "MLFLOW_TRACKING_AUTH": "kubernetes-namespaced",
        "MLFLOW_WORKSPACE": "team-ml",
    }
    tracked = task_tracking(plugin, "", "kfp-mlflow-credentials", KFP_RUN, "flights-training", "train")
    assert tracked is not None and tracked.run_id == "task-run-1" and not tracked.made_here
    replicas = tracked.launched_env()
    assert replicas["MLFLOW_TRACKING_URI"] == refusing_uri and replicas["MLFLOW_RUN_ID"] == "task-run-1"
    assert (
        replicas["MLFLOW_TRACKING_AUTH"] == "kubernetes-namespaced"
        and replicas["MLFLOW_WORKSPACE"] == "team-ml"
    )
    assert replicas["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "5"  # the team's calls bounded as kfstack's
    trials = tracked.launched_env(trial=True)
    assert trials["KFSTACK_MLFLOW_PARENT_RUN_ID"] == "task-run-1" and "MLFLOW_RUN_ID" not in trials
    cluster.finish(tracked, succeeded=True)  # KFP ends its own runs
    assert "tracking off" not in capsys.readouterr().err


def test_without_the_plugin_tasks_of_one_run_share_a_parent_and_a_retry_finds_its_run(
    tracking_on, server, client
):
    first = task_tracking({}, server.uri, "mlflow-keys", KFP_RUN, "flights-training", "spark-job", "1.2.0")
    second = task_tracking({}, server.uri, "mlflow-keys", KFP_RUN, "flights-training", "train", "1.2.0")
    assert first is not None and second is not None and first.made_here and second.secret == "mlflow-keys"
    spark, train = client.get_run(first.run_id), client.get_run(second.run_id)
    parent_id = spark.data.tags["mlflow.parentRunId"]
    assert train.data.tags["mlflow.parentRunId"] == parent_id
    parent = client.get_run(parent_id)
    assert parent.info.run_name == KFP_RUN
    assert parent.data.tags[runs.KFP_RUN_ID_TAG] == KFP_RUN
    assert parent.data.tags[runs.PIPELINE_TAG] == "flights-training"
    assert parent.data.tags[runs.PIPELINE_VERSION_TAG] == "1.2.0"
    assert client.get_experiment(parent.info.experiment_id).name == "flights-training"
    assert spark.data.tags[runs.TASK_TAG] == "spark-job" and spark.info.run_name == "spark-job"
    # KFP retries the task: the same run, not a second one.
    again = task_tracking({}, server.uri, "mlflow-keys", KFP_RUN, "flights-training", "spark-job", "1.2.0")
    assert again is not None and again.run_id == first.run_id
    cluster.finish(first, succeeded=True)
    cluster.finish(second, succeeded=False)
    assert client.get_run(first.run_id).info.status == "FINISHED"
    assert client.get_run(second.run_id).info.status == "FAILED"


def test_nothing_named_or_tracking_off_or_a_refusing_server_leave_the_task_untracked(
    tracking_on, refusing_uri, monkeypatch, capsys
):
    assert task_tracking({}, "", "kfp-mlflow-credentials", KFP_RUN, "p", "train") is None
    plugin = {"MLFLOW_TRACKING_URI": refusing_uri, "MLFLOW_RUN_ID": "r", "KFSTACK_TRACKING": "off"}
    assert task_tracking(plugin, "", "kfp-mlflow-credentials", KFP_RUN, "p", "train") is None
    assert capsys.readouterr().err == ""
    assert task_tracking({}, refusing_uri, "kfp-mlflow-credentials", KFP_RUN, "p", "train") is None
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and "train: tracking off" in said[0] and "the run goes on" in said[0]


def test_a_spark_task_on_a_fake_cluster_makes_its_run_and_its_pods_log_into_it(
    tracking_on, server, client, tmp_path, monkeypatch
):
    """The task pod of a version ``kfstack compile`` stamped (its pipeline's name and version),
    on a cluster without KFP's plugin, with the environment's tracking server."""
    from tests.components.data.spark_job.test_spark_job_stage import RUN_ID, run_on_a_fake_cluster

    monkeypatch.setenv("KFSTACK_PIPELINE", "flights-training")
    monkeypatch.setenv("KFSTACK_PIPELINE_VERSION", "1.2.0")
    created, _, outputs = run_on_a_fake_cluster(tmp_path, tracking_uri=server.uri)
    assert outputs["report"].metadata == {"rows_read": 12.0, "rows_written": 11.0}
    for role in ("driver", "executor"):
        env = env_of(created["spec"][role])
        assert env["MLFLOW_TRACKING_URI"]["value"] == server.uri
        run_id = env["MLFLOW_RUN_ID"]["value"]
        # The credentials by reference to the tracking Secret's keys, never a value.
        for key in cluster.CREDENTIAL_KEYS:
            assert env[key] == {
                "name": key,
                "valueFrom": {
                    "secretKeyRef": {"name": "kfp-mlflow-credentials", "key": key, "optional": True}
                },
            }
    task_run = client.get_run(run_id)
    assert task_run.info.status == "FINISHED" and task_run.data.tags[runs.TASK_TAG] == "spark-job"
    # The task's outputs, as an embedded run's: the report's counts as metrics.
    assert task_run.data.metrics == {"report.rows_read": 12.0, "report.rows_written": 11.0}
    parent = client.get_run(task_run.data.tags["mlflow.parentRunId"])
    assert parent.data.tags[runs.KFP_RUN_ID_TAG] == RUN_ID
    assert client.get_experiment(parent.info.experiment_id).name == "flights-training"


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        (
            "tracking_uri",
            "file:///mlruns",
            r"tracking_uri='file:///mlruns': a cluster's pods reach a tracking server over http",
        ),
        ("tracking_secret", "MLflow Keys", r"tracking_secret="),
    ],
)
def test_a_tracking_setting_a_cluster_cannot_use_is_refused(setting, value, message):
    from kfstack.errors import InvalidParameterError
    from kfstack.kubernetes.placement import Placement

    with pytest.raises(InvalidParameterError, match=message):
        Placement(**{setting: value})


def test_into_kfps_run_the_task_logs_its_reports_and_parameters_not_the_metrics_kfp_logs(
    tracking_on, server, client, tmp_path
):
    import types

    from kfstack.tracking.client import Tracker

    plugin_run = Tracker(server.uri).start_run("plugin-made", "train", {})
    tracked = task_tracking(
        {"MLFLOW_TRACKING_URI": server.uri, "MLFLOW_RUN_ID": plugin_run}, "", "s", KFP_RUN, "p", "train"
    )
    (tmp_path / "report.md").write_text("# trained\n")
    cluster.log_outputs(
        tracked,
        {
            "metrics": types.SimpleNamespace(
                path=str(tmp_path / "m"), schema_title="system.Metrics", metadata={"auc": 0.9}
            ),
            "report": types.SimpleNamespace(
                path=str(tmp_path / "report.md"), schema_title="system.Markdown", metadata={}
            ),
            "epochs_run": 4,
        },
    )
    logged = client.get_run(plugin_run)
    assert logged.data.metrics == {"epochs_run": 4}  # KFP's plugin logs the Metrics output itself
    assert [entry.path for entry in client.list_artifacts(plugin_run)] == ["report"]
    cluster.finish(tracked, succeeded=True)
    assert client.get_run(plugin_run).info.status == "RUNNING"  # KFP's plugin ends its own run


def test_nothing_tracking_raises_fails_the_task(tracking_on, server, monkeypatch, capsys):
    tracked = cluster.TaskTracking(server.uri, "some-run", made_here=True)

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in tracking")

    monkeypatch.setattr(runs, "log_outputs", broken)
    cluster.log_outputs(tracked, {"epochs_run": 4})
    assert (
        "kfstack: tracking: the task's outputs not tracked (RuntimeError: a bug in tracking)"
        in capsys.readouterr().err
    )


def test_mlflows_own_auth_goes_through_mlflows_client():
    from kfstack.tracking import rest

    assert isinstance(rest.backend("http://mlflow:5000", 5, {}), rest.RestBackend)
    kubernetes_auth = rest.backend("http://mlflow:5000", 5, {"MLFLOW_TRACKING_AUTH": "kubernetes"})
    assert isinstance(kubernetes_auth, rest.MlflowBackend)


def a_kfp_run() -> str:
    return str(uuid.uuid4())


def test_without_the_plugin_the_first_task_makes_the_parent_the_tasks_share_it_and_the_exit_handler_ends_it(
    tracking_on, server, client, capsys
):
    """The run's frame: validate-parameters makes the parent with the run's parameters and tags,
    a launching task nests its run under it, and the exit handler ends it with the run's state."""
    kfp_run = a_kfp_run()
    values = {"platform": "kubernetes", "tracking_uri": server.uri, "trigger": "", "spark_executors": 2}
    first_task = {
        "values": values,
        "overrides": {"canary_records": 500},
        "run_id": kfp_run,
        "scheduled_time": "2026-12-07T06:00:00Z",
        "created_time": "2026-12-07T06:00:14Z",
        "env": {"KFSTACK_PIPELINE": "flights-training", "KFSTACK_PIPELINE_VERSION": "1.2.0"},
    }
    parent = run_tracking.start_run(**first_task)
    assert parent is not None
    made = client.get_run(parent)
    assert made.info.run_name == kfp_run and made.info.status == "RUNNING"
    assert client.get_experiment(made.info.experiment_id).name == "flights-training"
    tags = made.data.tags
    assert tags[runs.KFP_RUN_ID_TAG] == kfp_run and tags[runs.PIPELINE_TAG] == "flights-training"
    assert tags[runs.PIPELINE_VERSION_TAG] == "1.2.0" and tags[runs.KFSTACK_VERSION_TAG] == __version__
    assert tags[runs.STARTED_BY_TAG] == "schedule: 2026-12-07T06:00:00Z"
    params = made.data.params
    assert params["spark_executors"] == "2" and params["canary_records"] == "500"  # the override applied
    assert json.loads(params["settings_overrides"]) == {"canary_records": 500}
    task = task_tracking({}, server.uri, "mlflow-keys", kfp_run, "flights-training", "train", "1.2.0")
    assert task is not None and client.get_run(task.run_id).data.tags["mlflow.parentRunId"] == parent
    # A retried first task finds the same parent, and logs the same again without a complaint.
    assert run_tracking.start_run(**first_task) == parent
    assert client.get_run(parent).data.tags == tags and client.get_run(parent).data.params == params
    assert capsys.readouterr().err == ""
    end_tracked_run(
        "kubernetes", server.uri, kfp_run, "COMPLETE", env={"KFSTACK_PIPELINE": "flights-training"}
    )
    assert client.get_run(parent).info.status == "FINISHED"


@pytest.mark.parametrize(
    ("state", "status", "said"),
    [
        ("COMPLETE", "FINISHED", ""),  # KFP's backend
        ("SUCCEEDED", "FINISHED", ""),  # kfp.local
        ("FAILED", "FAILED", ""),
        ("CANCELED", "KILLED", ""),
        ("RUNNING", "FAILED", "the run's final state 'RUNNING' is not one KFP documents"),
    ],
)
def test_the_parent_ends_with_the_runs_final_state(tracking_on, server, client, capsys, state, status, said):
    kfp_run = a_kfp_run()
    env = {"KFSTACK_PIPELINE": "ended-runs"}
    parent = run_tracking.start_run(
        {"platform": "kubernetes", "tracking_uri": server.uri}, {}, kfp_run, env=env
    )
    assert parent is not None and client.get_run(parent).data.tags[runs.STARTED_BY_TAG] == "person"
    end_tracked_run("kubernetes", server.uri, kfp_run, state, env=env)
    assert client.get_run(parent).info.status == status
    err = capsys.readouterr().err
    assert (said in err) if said else err == ""


def test_the_exit_handler_ends_the_parent_when_its_cleanup_fails_and_fails_with_the_cleanups_error(
    tracking_on, server, client, monkeypatch
):
    """The component's own body: the parent ends whatever the cleanup met, and the cleanup's
    error, not tracking's, is the task's."""
    from kfp import dsl

    from kfstack.components.common.cleanup_run import core
    from kfstack.components.common.cleanup_run.component import cleanup_run
    from kfstack.errors import ResourceFailedError

    kfp_run = a_kfp_run()
    monkeypatch.setenv("KFSTACK_PIPELINE", "cleanups")
    parent = run_tracking.start_run(
        {"platform": "kubernetes", "tracking_uri": server.uri},
        {},
        kfp_run,
        env={"KFSTACK_PIPELINE": "cleanups"},
    )

    def forbidden(**_):
        raise ResourceFailedError("cleanup of run: sparkapplications is forbidden")

    monkeypatch.setattr(core, "cleanup_run_resources", forbidden)
    status = dsl.PipelineTaskFinalStatus(
        state="FAILED",
        pipeline_job_resource_name="r",
        pipeline_task_name="t",
        error_code=None,
        error_message=None,
    )
    with pytest.raises(ResourceFailedError, match="forbidden"):
        cleanup_run.python_func(platform="kubernetes", run_id=kfp_run, status=status, tracking_uri=server.uri)
    assert client.get_run(parent).info.status == "FAILED"


def test_nothing_the_frames_tracking_raises_fails_its_task(tracking_on, server, monkeypatch, capsys):
    def broken(*_, **__):
        raise RuntimeError("a bug in tracking")

    monkeypatch.setattr(cluster, "_find_or_make_parent", broken)
    monkeypatch.setattr(cluster, "_parent_found_by", broken)  # the exit handler's lookup
    on_cluster = {"platform": "kubernetes", "tracking_uri": server.uri}
    assert run_tracking.start_run(on_cluster, {}, a_kfp_run(), env={}) is None
    end_tracked_run("kubernetes", server.uri, a_kfp_run(), "COMPLETE", env={})
    said = capsys.readouterr().err
    assert "the pipeline run not tracked (RuntimeError: a bug in tracking)" in said
    assert "the pipeline run's end not tracked (RuntimeError: a bug in tracking)" in said


def test_the_exit_handler_makes_nothing_where_no_parent_was_made(tracking_on, server, client):
    """A run whose first task failed its check made no parent: the end finds none and makes
    neither a run nor an experiment."""
    end_tracked_run(
        "kubernetes", server.uri, a_kfp_run(), "FAILED", env={"KFSTACK_PIPELINE": "never-started"}
    )
    assert client.get_experiment_by_name("never-started") is None


def test_the_frame_tracks_nothing_embedded_and_ends_nothing_under_kfps_plugin(
    tracking_on, refusing_uri, capsys
):
    """Embedded, the runner tracks from outside; with KFP's plugin on, KFP ends the parent: no
    request is made (the server refuses here: one would be said on stderr)."""
    local = {"platform": "local", "tracking_uri": refusing_uri}
    assert run_tracking.start_run(local, {}, KFP_RUN, env={}) is None
    plugin = {"MLFLOW_TRACKING_URI": refusing_uri, "MLFLOW_RUN_ID": "cleanup-task-run"}
    end_tracked_run("local", refusing_uri, KFP_RUN, "SUCCEEDED", env={})
    end_tracked_run("kubernetes", refusing_uri, KFP_RUN, "SUCCEEDED", env=plugin)
    assert capsys.readouterr().err == ""
    # Without the plugin the same refusing server is tried, and said once.
    on_cluster = {"platform": "kubernetes", "tracking_uri": refusing_uri}
    assert run_tracking.start_run(on_cluster, {}, KFP_RUN, env={}) is None
    assert "tracking off" in capsys.readouterr().err


def test_under_kfps_plugin_the_first_task_tags_kfps_parent_and_makes_nothing(tracking_on, server, client):
    """KFP made the parent and the first task's nested run (here by MLflow's own client, as the
    plugin would): the task adds kfstack's tags to KFP's parent, and neither makes a run nor
    logs a parameter."""
    experiment = client.create_experiment(f"kfp-made-{a_kfp_run()}")
    kfp_parent = client.create_run(experiment, run_name="kfp-run").info.run_id
    nested = client.create_run(experiment, tags={"mlflow.parentRunId": kfp_parent}).info.run_id
    plugin = {"MLFLOW_TRACKING_URI": server.uri, "MLFLOW_RUN_ID": nested, "KFSTACK_PIPELINE_VERSION": "1.2.0"}
    values = {"platform": "kubernetes", "tracking_uri": "", "trigger": "drift on arr_delay"}
    assert run_tracking.start_run(values, {}, a_kfp_run(), env=plugin) == kfp_parent
    tagged = client.get_run(kfp_parent).data
    assert tagged.tags[runs.STARTED_BY_TAG] == "alert: drift on arr_delay"
    assert tagged.tags[runs.PIPELINE_VERSION_TAG] == "1.2.0" and tagged.params == {}
    assert len(client.search_runs([experiment])) == 2  # KFP's two, no more


@pytest.mark.parametrize(
    ("scheduled", "created", "schedule"),
    [
        ("2026-12-07T06:00:00Z", "2026-12-07T06:00:09Z", "2026-12-07T06:00:00Z"),  # a recurring run's tick
        ("2026-12-07T07:00:00+01:00", "2026-12-07T06:00:09Z", "2026-12-07T06:00:00Z"),  # told in UTC
        ("2026-12-07T06:00:09Z", "2026-12-07T06:00:09Z", ""),  # started once: KFP gives its creation time
        ("2026-12-07T06:00:09+00:00", "2026-12-07T06:00:09.420Z", ""),  # the same second, written otherwise
        ("{{$.pipeline_job_schedule_time_utc}}", "{{$.pipeline_job_create_time_utc}}", ""),  # kfp.local
        ("", "", ""),
        ("not a time", "2026-12-07T06:00:09Z", ""),
    ],
)
def test_a_schedule_is_told_by_a_tick_earlier_than_the_runs_creation(scheduled, created, schedule):
    assert run_tracking.schedule_of(scheduled, created) == schedule


# kfp.local warns that the component's image is not plain Python; this process has its packages.
@pytest.mark.filterwarnings("ignore:You may be attemping to run a task:RuntimeWarning")
def test_the_evaluation_as_on_a_cluster_without_the_plugin_logs_its_figures_and_report_into_its_run(
    tracking_on, server, client, monkeypatch, tmp_path
):
    """The real component under plain kfp.local, which is not kfstack's embedded runner (no run
    directory in the task's environment): as in a cluster's task pod, the task finds the KFP
    run's parent by the run's id and logs into a run of its own."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from kfp import dsl

    from kfstack.components.evaluation.model_evaluation.component import model_evaluation
    from tests.kfp_local import run_pipeline
    from tests.serving import standard_models

    model = standard_models.sklearn_digits(str(tmp_path / "sklearn"))
    x, y = standard_models.digits()
    rows = standard_models.DIGITS_TEST_ROWS
    pq.write_table(
        pa.table({**{f"p{i}": x[-rows:, i] for i in range(64)}, "digit": y[-rows:]}),
        tmp_path / "holdout.parquet",
    )
    accuracy = float((model.predict(x[-rows:]) == y[-rows:]).mean())
    monkeypatch.setenv("KFSTACK_PIPELINE", "evaluations")

    @dsl.pipeline(name="evaluations")
    def evaluations():
        trained = dsl.importer(
            artifact_uri=str(tmp_path / "sklearn"),
            artifact_class=dsl.Model,
            metadata={"model_format": "sklearn"},
        )
        data = dsl.importer(artifact_uri=str(tmp_path / "holdout.parquet"), artifact_class=dsl.Dataset)
        model_evaluation(
            model=trained.output,
            dataset=data.output,
            task="multiclass",
            label_column="digit",
            tracking_uri=server.uri,
            run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
            task_name=dsl.PIPELINE_TASK_NAME_PLACEHOLDER,
        )

    run_pipeline(evaluations, tmp_path / "root")
    experiment = client.get_experiment_by_name("evaluations")
    (task,) = client.search_runs([experiment.experiment_id], "tags.`kfstack.task` = 'model-evaluation'")
    assert task.info.status == "FINISHED" and task.info.run_name == "model-evaluation"
    assert task.data.metrics["evaluation_metrics.accuracy"] == pytest.approx(accuracy)
    assert task.data.metrics["evaluation_metrics.rows"] == rows
    logged = {artifact.path for artifact in client.list_artifacts(task.info.run_id)}
    assert {"evaluation_report", "charts"} <= logged
    parent = client.get_run(task.data.tags["mlflow.parentRunId"])
    assert parent.data.tags[runs.KFP_RUN_ID_TAG] == parent.info.run_name  # found by the KFP run's id


def test_the_deployment_as_on_a_cluster_makes_its_task_run_and_logs_its_decision(
    tracking_on, server, client, monkeypatch, tmp_path
):
    """The deployment step runs as a service stage through run_stage; its task is tracked as a
    launching task's (here with deploy=false: no InferenceService, the decision ``skipped``)."""
    from kfstack.components.serving.model_deployment.component import model_deployment
    from kfstack.components.serving.model_deployment.stage import STAGE
    from kfstack.kubernetes.launcher import Cluster
    from kfstack.platforms import run_stage
    from tests.components.data.spark_job.test_spark_job_stage import FakeArtifact
    from tests.kubernetes.fake_api import FakeKubernetesApi

    monkeypatch.setenv("KFSTACK_PIPELINE", "deployments")
    kfp_run = a_kfp_run()
    outputs = {
        name: FakeArtifact(f"memory://kfstack-test/deploy/{name}", str(tmp_path / name), schema)
        for name, schema in (
            ("serving_model", "system.Model"),
            ("serving_metrics", "system.Metrics"),
            ("deployment_report", "system.Markdown"),
            ("deployment", "system.Artifact"),
        )
    }
    defaults = {
        name: parameter.default
        for name, parameter in inspect.signature(model_deployment.python_func).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }
    args = {
        **defaults,
        "platform": "kubernetes",
        "model": FakeArtifact("s3://models/digits", str(tmp_path / "model"), "system.Model"),
        "holdout": FakeArtifact("s3://data/holdout", str(tmp_path / "holdout"), "system.Dataset"),
        "model_format": "sklearn",
        "task": "multiclass",
        "label_column": "digit",
        "serving_name": "digits",
        "run_id": kfp_run,
        "task_name": "deployment",
        "deploy": False,
        "tracking_uri": server.uri,
        **outputs,
    }
    with FakeKubernetesApi() as api:
        result = run_stage(STAGE, args, cluster=Cluster(api.api_client(), "team-ml", sleep=lambda s: None))
    assert result.outputs["decision"] == "skipped"
    experiment = client.get_experiment_by_name("deployments")
    (task,) = client.search_runs([experiment.experiment_id], "tags.`kfstack.task` = 'deployment'")
    assert task.info.status == "FINISHED"
    assert task.data.tags["serving_summary.decision"] == "skipped"
    assert "deployment_report" in {artifact.path for artifact in client.list_artifacts(task.info.run_id)}
    parent = client.get_run(task.data.tags["mlflow.parentRunId"])
    assert parent.data.tags[runs.KFP_RUN_ID_TAG] == kfp_run
