"""The tracking client against a real tracking server and against failing ones: the layout of a
pipeline run, a task and a trial, and a failure said once and never raised."""

import json
import os
import threading
import time
import types

import pytest

from kfstack import contracts
from kfstack.lineage import document_hash
from kfstack.tracking import client as tracking_client
from kfstack.tracking import runs
from kfstack.tracking.client import Tracker, read_notices
from kfstack.tracking.replica import ReplicaTracking, assignments
from kfstack.training import entrypoint
from kfstack.tuning.metric_lines import parse_line


def artifact(path, schema, metadata=None, uri=""):
    return types.SimpleNamespace(
        path=str(path), schema_title=schema, metadata=metadata or {}, uri=uri or str(path)
    )


def test_a_pipeline_run_its_task_and_their_outputs(server, client, tmp_path):
    tracker = Tracker(server.uri)
    parent = runs.start_pipeline_run(
        tracker, "layout", "layout-run", {runs.PIPELINE_TAG: "layout"}, {"epochs": 3, "settings": {"a": 1}}
    )
    task = runs.start_task_run(tracker, "layout", parent, "train", {runs.PIPELINE_TAG: "layout"})
    model = tmp_path / "model"
    model.mkdir()
    lineage = {"data": "s3://bucket/features", "code": "abc"}
    (model / "lineage.json").write_text(json.dumps(lineage))
    (model / "model.onnx").write_bytes(b"\0" * 64)
    (tmp_path / "report.md").write_text("# report\n")
    outputs = {
        "metrics": artifact(tmp_path / "absent", "system.Metrics", {"auc": 0.9, "rows": 10}),
        "report": artifact(tmp_path / "report.md", "system.Markdown"),
        "model": artifact(model, "system.Model", uri="s3://bucket/model"),
        "data": artifact(tmp_path / "report.md", "system.Dataset", uri="s3://bucket/data"),
        "decision": json.dumps({"decision": "promote", "canary": {"error_rate": 0.01}}),
        "Output": 0.5,
    }
    runs.log_outputs(tracker, task, outputs)
    tracker.end_run(task, "FINISHED")

    task_run = client.get_run(task)
    assert task_run.data.tags["mlflow.parentRunId"] == parent
    assert task_run.data.tags[runs.TASK_TAG] == "train"
    assert task_run.data.metrics == {
        "metrics.auc": 0.9,
        "metrics.rows": 10,
        "decision.canary.error_rate": 0.01,
        "Output": 0.5,
    }
    assert task_run.data.tags["decision.decision"] == "promote"
    assert task_run.data.tags["kfstack.uri.data"] == "s3://bucket/data"  # a dataset: referenced
    assert task_run.data.tags[runs.LINEAGE_HASH_TAG] == document_hash(lineage)
    assert task_run.info.status == "FINISHED"
    listed = {entry.path for entry in client.list_artifacts(task)}
    assert listed == {"report", "model"}
    assert {entry.path for entry in client.list_artifacts(task, "model")} == {
        "model/lineage.json",
        "model/model.onnx",
    }
    parent_run = client.get_run(parent)
    assert parent_run.data.params == {"epochs": "3", "settings": '{"a": 1}'}
    assert parent_run.data.tags[runs.LINEAGE_HASH_TAG] == document_hash(lineage)  # the run's model


def test_a_model_above_the_limit_is_referenced_not_copied(server, client, tmp_path, monkeypatch):
    monkeypatch.setattr(runs, "MODEL_ARTIFACT_LIMIT", 10)
    tracker = Tracker(server.uri)
    task = tracker.start_run("layout", "big-model", {})
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "weights.bin").write_bytes(b"\0" * 100)
    runs.log_outputs(
        tracker, task, {"model": artifact(tmp_path / "model", "system.Model", uri="s3://b/model")}
    )
    assert client.list_artifacts(task) == []
    assert client.get_run(task).data.tags["kfstack.uri.model"] == "s3://b/model"


def test_a_refusing_server_is_said_once_and_never_raised(refusing_uri, tmp_path, capsys):
    notices = str(tmp_path / "notices.jsonl")
    tracker = Tracker(refusing_uri, notices, origin="train")
    started = time.monotonic()
    assert tracker.start_run("x", "run", {}) is None
    tracker.log_metrics("some-run", {"auc": 0.9})
    tracker.end_run("some-run", "FINISHED")
    assert time.monotonic() - started < tracking_client.REQUEST_TIMEOUT_SECONDS
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and said[0].startswith(f"kfstack: train: tracking off: {refusing_uri} failed (")
    assert "the run goes on" in said[0]
    first, *skipped = read_notices(notices)
    assert first["origin"] == "train" and first["not_tracked"] == "experiment x"
    assert [entry["not_tracked"] for entry in skipped] == ["metrics", "the run's end"]
    # Another process of the run starts off, without a try of its own.
    other = Tracker(refusing_uri, notices, origin="trial-1")
    assert not other.active and "train failed" in other.error


def test_a_server_that_never_answers_costs_one_timeout(silent_uri, tmp_path, capsys):
    tracker = Tracker(silent_uri, str(tmp_path / "notices.jsonl"))
    started = time.monotonic()
    for step in range(5):
        tracker.log_metrics("a-run", {"loss": 1.0 / (step + 1)}, step)
    waited = time.monotonic() - started
    assert tracking_client.REQUEST_TIMEOUT_SECONDS <= waited < tracking_client.REQUEST_TIMEOUT_SECONDS + 5
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert tracker.not_tracked() == ["metrics"]


def test_assignments_read_either_spelling_of_an_option():
    assert assignments(["--lr=0.1", "--depth", "4", "--flag", "--learning-rate=3"]) == {
        "lr": "0.1",
        "depth": "4",
        "learning-rate": "3",
    }


def test_a_trial_makes_its_run_under_the_tuning_tasks_and_logs_each_epoch(server, client, monkeypatch):
    tracker = Tracker(server.uri)
    tuning = tracker.start_run("trials", "tune", {})
    env = {"MLFLOW_TRACKING_URI": server.uri, "MLFLOW_RUN_ID": tuning}
    monkeypatch.setenv("MLFLOW_RUN_ID", "")  # for_chief sets it: undone after the test
    monkeypatch.delenv("MLFLOW_RUN_ID")
    tracked = ReplicaTracking.for_chief(env, "trial-7", ["--lr=0.1", "--depth=4"])
    assert tracked is not None
    for line in ("epoch=1 score=0.5", "epoch=2 score=0.7", "done"):
        tracked.line(line, parse_line(line, ("score",)))
    trial = client.get_run(tracked.run_id)
    assert trial.data.tags["mlflow.parentRunId"] == tuning
    assert trial.data.tags[runs.TRIAL_TAG] == "trial-7" and trial.info.run_name == "trial-7"
    assert trial.data.params == {"lr": "0.1", "depth": "4"}
    assert [(m.step, m.value) for m in client.get_metric_history(tracked.run_id, "score")] == [
        (1, 0.5),
        (2, 0.7),
    ]
    # The team's own calls go to the trial's run.
    assert os.environ["MLFLOW_RUN_ID"] == tracked.run_id
    tracked.finish(succeeded=True)
    assert client.get_run(tracked.run_id).info.status == "FINISHED"
    # A trial that restarts finds its run again.
    again = ReplicaTracking.for_chief(env, "trial-7", ["--lr=0.1", "--depth=4"])
    assert again is not None and again.run_id == tracked.run_id


@pytest.mark.parametrize("told", ["run id", "run file"])
def test_the_training_entrypoint_tracks_its_epochs_and_the_teams_own_logging_joins(
    told, server, client, team_code, tmp_path, monkeypatch
):
    tracker = Tracker(server.uri)
    task = tracker.start_run("training", "train", {})
    code = contracts.TrainingCode("epochs_team:train", {"epochs": "int", "rate": "float"}, ("score",))
    env = {
        **entrypoint.step_env(code, "custom", str(tmp_path / "model"), str(tmp_path / "result.json")),
        "MLFLOW_TRACKING_URI": server.uri,
    }
    filler = None
    if told == "run id":
        env["MLFLOW_RUN_ID"] = task
    else:  # an embedded task that started while the store's server was starting: the run comes later
        run_file = str(tmp_path / "task-run")
        env[tracking_client.RUN_FILE_ENV] = run_file
        filler = threading.Timer(0.5, tracking_client.write_run_file, (run_file, task))
        filler.start()
    monkeypatch.setenv("MLFLOW_RUN_ID", "")  # the entrypoint sets it: undone after the test
    monkeypatch.delenv("MLFLOW_RUN_ID")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    entrypoint.main(["--epochs=3", "--rate=0.25"], env)
    if filler is not None:
        filler.join()
    import mlflow

    mlflow.end_run()  # the team's call started the run in this process (a replica's exit ends it)
    history = client.get_metric_history(task, "score")
    assert [(m.step, m.value) for m in history] == [(1, 0.25), (2, 0.5), (3, 0.75)]
    assert client.get_run(task).data.metrics["team_figure"] == 42.0
    assert json.loads((tmp_path / "result.json").read_text())["metrics"] == {"score": 0.75}


@pytest.mark.parametrize("env", [{}, {"MLFLOW_TRACKING_URI": "http://127.0.0.1:9"}])
def test_a_chief_without_a_run_to_log_into_tracks_nothing(env):
    assert ReplicaTracking.for_chief(env, "", []) is None


def test_a_run_file_gives_its_id_once_filled_and_nothing_when_empty_or_never_filled(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_RUN_ID", "")  # join_run sets it: undone after the test
    monkeypatch.delenv("MLFLOW_RUN_ID")
    run_file = str(tmp_path / "run")
    env = {tracking_client.RUN_FILE_ENV: run_file}
    assert tracking_client.join_run(env, wait=0.2) == env  # never filled: the code runs untracked
    tracking_client.write_run_file(run_file, None)  # the run could not be made
    assert tracking_client.join_run(env) == env and "MLFLOW_RUN_ID" not in os.environ
    filler = threading.Timer(0.3, tracking_client.write_run_file, (str(tmp_path / "later"), "abc123"))
    filler.start()
    later = {tracking_client.RUN_FILE_ENV: str(tmp_path / "later")}
    assert tracking_client.join_run(later)["MLFLOW_RUN_ID"] == "abc123"
    assert os.environ["MLFLOW_RUN_ID"] == "abc123"  # for the team's code, and what it starts
    filler.join()
    # A process told its run outright keeps it.
    assert tracking_client.join_run({**later, "MLFLOW_RUN_ID": "given"})["MLFLOW_RUN_ID"] == "given"


def test_the_store_server_runs_without_mlflows_job_processes(server):
    """MLflow's server starts a job runner and its consumers unless told otherwise: the store's
    server is one server and its one worker, none of them (kfstack.tracking.store)."""
    import psutil

    tree = [psutil.Process(server.process.pid), *psutil.Process(server.process.pid).children(recursive=True)]
    commands = [" ".join(process.cmdline()) for process in tree]
    assert not [command for command in commands if "huey" in command or "_job_runner" in command]


def test_an_output_that_cannot_be_measured_is_left_out_not_raised(server, client, tmp_path, monkeypatch):
    def vanished(path):
        raise FileNotFoundError(path)

    tracker = Tracker(server.uri)
    task = tracker.start_run("layout", "vanishing", {})
    (tmp_path / "report.md").write_text("# report\n")
    monkeypatch.setattr(runs, "_size", vanished)
    runs.log_outputs(
        tracker, task, {"report": artifact(tmp_path / "report.md", "system.Markdown"), "Output": 0.5}
    )
    assert client.get_run(task).data.metrics == {"Output": 0.5} and client.list_artifacts(task) == []
