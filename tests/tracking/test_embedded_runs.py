"""An embedded run tracked as KFP's plugin tracks a cluster run: into the store under its
pipeline root by default, or a server of the team's; and a run whose server refuses, never
answers or disappears midway goes on, its summary saying once what was not tracked."""

import io
import os
import subprocess
import sys
import threading
import time

import pytest

from kfstack.app import run_directory
from kfstack.app.local_run import run_pipeline_locally
from kfstack.tracking import runs, store
from kfstack.tracking.client import RUN_FILE_ENV, RUN_ID_ENV
from kfstack.tracking.embedded import Destination, RunTracking

PIPELINE = "tests.tracking.tracked_pipeline:pipeline"


def run(root, arguments=None, **options):
    return run_pipeline_locally(PIPELINE, arguments or {}, str(root), console_stream=io.StringIO(), **options)


def store_client(root):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=store.backend_uri(str(root)))


def stored_artifacts(root, found_run):
    """The run's artifact files in the store under ``root``."""
    folder = root / store.STORE_DIR / store.ARTIFACTS / found_run.info.experiment_id / found_run.info.run_id
    return sorted(str(path.relative_to(folder / "artifacts")) for path in folder.rglob("*") if path.is_file())


def runs_of(client, run_dir):
    experiment = client.get_experiment_by_name("tracked-steps")
    found = client.search_runs(
        [experiment.experiment_id], filter_string=f"tags.`{runs.RUN_DIR_TAG}` = '{run_dir}'"
    )
    return {found_run.info.run_name: found_run for found_run in found}


def test_an_embedded_run_tracks_into_the_store_under_its_root_and_clean_removes_it(
    tracking_on, tmp_path, capsys
):
    first = run(tmp_path, {"rows": 5})
    assert first.status == "SUCCEEDED", first.error
    tracking = first.tracking
    assert tracking["experiment"] == "tracked-steps" and tracking["uri"].startswith("http://127.0.0.1:")
    assert "error" not in tracking

    client = store_client(tmp_path)
    tracked = runs_of(client, first.run_dir)
    parent = tracked.pop(first.run_dir.rsplit("/", 1)[1])
    assert parent.info.run_id == tracking["run_id"] and parent.info.status == "FINISHED"
    assert parent.data.params["rows"] == "5"
    assert parent.data.metrics == {"figures.rows": 5}  # the summary's figures, to compare runs by
    assert parent.data.tags[runs.PIPELINE_TAG] == "tracked-steps"
    assert parent.data.tags[runs.STARTED_BY_TAG].startswith("person")
    assert parent.data.tags[runs.PIPELINE_VERSION_TAG] and parent.data.tags[runs.KFSTACK_VERSION_TAG]
    assert set(tracked) == {"report-rows", "team-logs"}
    for task in tracked.values():
        assert task.data.tags["mlflow.parentRunId"] == parent.info.run_id and task.info.status == "FINISHED"
    report = tracked["report-rows"]
    assert report.data.metrics == {
        "figures.rows": 5,
        "Output.canary.error_rate": 0.01,
        "Output.canary.requests": 200,
    }
    assert report.data.tags["Output.decision"] == "promote"
    # The artifacts, in the store's folder (the server that proxied them has stopped).
    assert stored_artifacts(tmp_path, report) == ["report/report"]
    # The team's own mlflow call, with no configuration, landed in its task's run.
    assert tracked["team-logs"].data.metrics == {"team_metric": 0.5, "Output": 0.5}

    # A second run answered from the step cache says what it reused, and from which run.
    second = run(tmp_path, {"rows": 5})
    cached = runs_of(client, second.run_dir)["report-rows"]
    assert cached.data.tags[runs.CACHED_FROM_TAG] == first.run_dir
    assert cached.data.metrics["figures.rows"] == 5

    # clean removes the runs' entries with their directories.
    capsys.readouterr()
    from kfstack.app.cli import main

    assert main(["clean", "--pipeline-root", str(tmp_path), "--keep", "1"]) == 0
    assert "removed 3 MLflow run(s)" in capsys.readouterr().out
    assert runs_of(client, first.run_dir) == {} and len(runs_of(client, second.run_dir)) == 3
    assert stored_artifacts(tmp_path, report) == []


def test_no_tracking_and_the_off_switch_track_nothing_and_say_nothing(tracking_on, tmp_path, monkeypatch):
    stream = io.StringIO()
    # (The step's own MLflow call would go where MLflow's defaults send it: ./mlflow.db.)
    quiet = {"own_logging": False}
    summary = run_pipeline_locally(PIPELINE, quiet, str(tmp_path), console_stream=stream, track=False)
    assert summary.tracking == {"off": "turned off (--no-tracking)"}
    monkeypatch.setenv("KFSTACK_TRACKING", "off")
    summary = run_pipeline_locally(PIPELINE, quiet, str(tmp_path), console_stream=stream)
    assert summary.status == "SUCCEEDED" and summary.tracking == {"off": "turned off (KFSTACK_TRACKING=off)"}
    assert "tracking off" not in stream.getvalue()
    assert not (tmp_path / store.STORE_DIR).exists()


def test_a_teams_server_wins_over_the_store(tracking_on, server, client, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.uri)
    summary = run(tmp_path)
    assert summary.status == "SUCCEEDED" and summary.tracking["uri"] == server.uri
    assert client.get_run(summary.tracking["run_id"]).info.status == "FINISHED"
    assert not (tmp_path / store.STORE_DIR).exists()


@pytest.mark.parametrize("failing", ["refusing_uri", "silent_uri"])
def test_a_failing_server_costs_the_run_nothing(tracking_on, failing, request, tmp_path):
    uri = request.getfixturevalue(failing)
    stream = io.StringIO()
    summary = run_pipeline_locally(
        PIPELINE, {"own_logging": False}, str(tmp_path), console_stream=stream, tracking_uri=uri
    )
    assert summary.status == "SUCCEEDED", summary.error
    assert summary.tracking["run_id"] is None
    assert summary.tracking["error"].startswith("run: ")
    assert summary.tracking["not_tracked"] == ["the whole run"]  # the parent was never made
    assert summary.stages["team-logs"].status == "SUCCEEDED"
    rendered = summary.render()
    assert rendered.count("not tracked after run:") == 1


def test_a_server_that_disappears_midway_costs_the_run_nothing(tracking_on, tmp_path, monkeypatch):
    """The store's own server stops while the first step runs: the rest goes untracked."""
    monkeypatch.setenv("TRACKED_STEP_SLEEP", "4")
    servers: list[store.LocalServer] = []
    original = store.LocalServer.start

    def start(self):
        servers.append(self)
        original(self)

    monkeypatch.setattr(store.LocalServer, "start", start)

    def stop_when_the_first_step_runs():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            started = run_directory.list_runs(str(tmp_path))
            if servers and started and os.path.exists(started[0].log("report-rows")):
                time.sleep(1)  # the task's run is made before its process starts
                servers[0].stop()
                return
            time.sleep(0.2)

    stopper = threading.Thread(target=stop_when_the_first_step_runs, daemon=True)
    stopper.start()
    summary = run(tmp_path, {"own_logging": False})
    stopper.join()
    assert summary.status == "SUCCEEDED", summary.error
    assert summary.tracking["run_id"]  # the parent run was made before the server went
    assert summary.tracking["error"] and summary.tracking["not_tracked"]
    client = store_client(tmp_path)
    parent = client.get_run(summary.tracking["run_id"])
    assert parent.info.status == "RUNNING"  # its end was not tracked: said, not hidden


def test_a_task_that_starts_before_the_server_answers_does_not_wait_and_its_process_finds_its_run(
    tracking_on, server, client, tmp_path
):
    """The store's server takes seconds to answer: kfstack's own tasks start meanwhile, their
    runs made once it answers; a team's own component (whose MLflow calls read MLFLOW_RUN_ID
    alone) starts once its run is made."""
    answered = threading.Event()

    class Starting:  # the run's own server, until the test lets it answer (the real one)
        uri = server.uri

        def start(self):
            pass

        def wait_ready(self):
            answered.wait(60)

        def stop(self):
            pass

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    where = Destination(uri=server.uri, server=Starting())
    tracked = RunTracking(where, str(run_dir), "early-tasks", "v1", "0.0", {"rows": 3})
    tracked.start()
    early = tracked.task_started("validate-run")
    assert not early.known and tracked.parent is None  # the task did not wait for the server
    env = tracked.task_environment(early)
    # Its run file, and no MLFLOW_RUN_ID it could inherit from the shell that started the run.
    assert env[RUN_ID_ENV] == "" and env[RUN_FILE_ENV] == early.file
    # The task's process (its wrapper of the team's code) waits for the run file meanwhile.
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from kfstack.tracking.client import join_run; print(join_run()['MLFLOW_RUN_ID'])",
        ],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        text=True,
    )
    tracked.task_finished(early, True, {"Output": 0.5})  # its end is logged once its run is made
    assert not early.known
    answered.set()
    told, _ = process.communicate(timeout=60)
    assert process.returncode == 0
    team = tracked.task_started("team-step", wait=True)
    assert team.known and tracked.task_environment(team)[RUN_ID_ENV] == team.id
    tracked.task_finished(team, True, {})
    entry = tracked.finish("SUCCEEDED", {"figures.rows": 3})

    task_run = client.get_run(told.strip())
    assert task_run.info.run_id == early.id and task_run.info.run_name == "validate-run"
    assert task_run.data.tags["mlflow.parentRunId"] == entry["run_id"]
    assert task_run.data.metrics == {"Output": 0.5} and task_run.info.status == "FINISHED"
    assert client.get_run(entry["run_id"]).info.status == "FINISHED" and "error" not in entry
