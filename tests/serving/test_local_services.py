"""Run-owned services: a model server started for an embedded run is found by later callers,
stopped with the run, and stops by itself when the run's owner process is killed outright."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from kfstack.errors import RunFailedError
from kfstack.serving import local_services
from kfstack_examples.flights.predictor import command
from tests.conftest import REPO_ROOT
from tests.serving.conftest import MODEL_NAME


def predictor_argv(model_dir: str):
    return lambda port: command(model_dir, MODEL_NAME, port)


def test_a_service_is_found_then_stopped_with_the_run(trained, tmp_path):
    run_dir = str(tmp_path / "run")
    started = local_services.start_service(
        run_dir, "stable", predictor_argv(trained["model"]), f"/v2/models/{MODEL_NAME}/ready"
    )
    found = local_services.find_service(run_dir, "stable")
    assert found == started
    # Started again under the same name (a retried task), the first one is stopped, not orphaned.
    again = local_services.start_service(
        run_dir, "stable", predictor_argv(trained["model"]), f"/v2/models/{MODEL_NAME}/ready"
    )
    assert not psutil.pid_exists(started.pid) or psutil.Process(started.pid).status() == psutil.STATUS_ZOMBIE
    started = again
    assert local_services.stop_services(run_dir) == ["stable"]
    assert not psutil.pid_exists(started.pid) or psutil.Process(started.pid).status() == psutil.STATUS_ZOMBIE
    assert local_services.find_service(run_dir, "stable") is None


def test_a_service_that_cannot_start_fails_with_its_log(tmp_path):
    with pytest.raises(RunFailedError, match="cannot serve"):
        local_services.start_service(
            str(tmp_path / "run"), "canary", predictor_argv(str(tmp_path)), f"/v2/models/{MODEL_NAME}/ready"
        )


def test_a_service_stops_when_its_owner_is_killed(trained, tmp_path):
    # An owner that starts a server, reports its pid and then waits: killed with SIGKILL, it
    # cannot stop the server; the server must notice and stop itself.
    run_dir = str(tmp_path / "run")
    owner_code = textwrap.dedent(
        f"""
        import os, sys, time
        os.environ.pop({local_services.OWNER_PID_ENV!r}, None)
        from kfstack.serving import local_services
        from tests.serving.test_local_services import predictor_argv
        service = local_services.start_service(
            {run_dir!r}, "stable", predictor_argv({trained["model"]!r}), "/v2/models/{MODEL_NAME}/ready"
        )
        print(service.pid, flush=True)
        time.sleep(600)
        """
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", owner_code], stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT
    )
    try:
        server_pid = int(owner.stdout.readline())
        assert psutil.pid_exists(server_pid)
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        if not psutil.pid_exists(server_pid) or psutil.Process(server_pid).status() == psutil.STATUS_ZOMBIE:
            break
        time.sleep(0.5)
    else:
        local_services.stop_services(run_dir)
        pytest.fail("the server outlived its killed owner")
