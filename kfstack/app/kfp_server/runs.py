"""Experiments and runs on a KFP API server: start a run of an uploaded version, follow it to
its end, record it."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Mapping
from typing import Any

import kfp_server_api
import urllib3

from kfstack.app.kfp_server.connection import name_filter, ui_base, user_namespace
from kfstack.app.kfp_server.pipelines import PipelineVersionRef

SUCCEEDED = "SUCCEEDED"
# Run states after which nothing changes (kfp_server_api.V2beta1RuntimeState).
FINAL_STATES = frozenset({"SUCCEEDED", "SKIPPED", "FAILED", "CANCELED"})


def ensure_experiment(client: Any, name: str) -> tuple[str, bool]:
    """The id of experiment ``name`` (in the client's namespace), created if absent; and whether
    it was created now."""
    namespace = user_namespace(client)
    response = client.list_experiments(filter=name_filter(name), namespace=namespace, page_size=10)
    for experiment in response.experiments or []:
        if experiment.display_name == name:
            return str(experiment.experiment_id), False
    created = client.experiments.experiment_service_create_experiment(
        experiment=kfp_server_api.V2beta1Experiment(
            display_name=name, namespace=namespace, description="created by kfstack"
        )
    )
    return str(created.experiment_id), True


def start_run(
    client: Any,
    ref: PipelineVersionRef,
    experiment_id: str,
    arguments: Mapping[str, Any],
    display_name: str,
    service_account: str | None = None,
) -> str:
    """Starts a run of the pipeline version ``ref`` with ``arguments``; returns its id.

    Args:
        service_account: The Kubernetes service account the run's pods run as; None: the API
            server's default (``DEFAULTPIPELINERUNNERSERVICEACCOUNT``: ``pipeline-runner``, on a
            multi-user KFP the profile's ``default-editor``; kubeflow/pipelines 2.17.0
            backend/src/apiserver/template/template.go, setDefaultServiceAccount, and
            manifests/kustomize/base/installs/multi-user/api-service/params.env).
    """
    run = client.runs.run_service_create_run(
        run=kfp_server_api.V2beta1Run(
            experiment_id=experiment_id,
            display_name=display_name,
            pipeline_version_reference=kfp_server_api.V2beta1PipelineVersionReference(
                pipeline_id=ref.pipeline_id, pipeline_version_id=ref.version_id
            ),
            runtime_config=kfp_server_api.V2beta1RuntimeConfig(parameters=dict(arguments)),
            service_account=service_account or None,
        )
    )
    return str(run.run_id)


def wait_for_run(
    client: Any,
    run_id: str,
    on_task: Callable[[str, str], None],
    poll_interval_seconds: float = 10.0,
    max_poll_errors: int = 5,
    sleep: Callable[[float], None] | None = None,
) -> Any:
    """Polls run ``run_id`` until it ends; returns its last ``V2beta1Run``.

    Never cancels the run: stopping the wait (Ctrl-C) leaves it running on the cluster.

    Args:
        on_task: Called with (task display name, state) whenever a task's state changes.
        poll_interval_seconds: Seconds between two requests.
        max_poll_errors: Connection errors and 5xx answers in a row tolerated (a restarting API
            server) before the last one is raised.
        sleep: Waits between polls (default: ``time.sleep``, looked up at each call).
    """
    pause = sleep or (lambda seconds: time.sleep(seconds))
    states: dict[str, str] = {}
    errors = 0
    while True:
        try:
            run = client.get_run(run_id)
            errors = 0
        except (urllib3.exceptions.HTTPError, ConnectionError, kfp_server_api.ApiException) as err:
            transient = not isinstance(err, kfp_server_api.ApiException) or (err.status or 0) >= 500
            errors += 1
            if not transient or errors >= max_poll_errors:
                raise
            pause(poll_interval_seconds)
            continue
        details = run.run_details.task_details if run.run_details else None
        for task in details or []:
            if not task.display_name:
                continue
            state = task.state or "PENDING"
            key = task.task_id or task.display_name
            if states.get(key) != state:
                states[key] = state
                on_task(task.display_name, state)
        if run.state in FINAL_STATES:
            return run
        pause(poll_interval_seconds)


def run_record(run: Any, url: str, ref: PipelineVersionRef, experiment: str) -> dict[str, Any]:
    """A finished cluster run as JSON data (``kfstack run --wait --summary-json``)."""
    details = run.run_details.task_details if run.run_details else None
    return {
        "run_id": run.run_id,
        "url": url,
        "status": run.state,
        "error": run.error.message if run.error else None,
        "pipeline": ref.pipeline,
        "pipeline_id": ref.pipeline_id,
        "version": ref.version,
        "version_id": ref.version_id,
        "experiment": experiment,
        "parameters": dict(run.runtime_config.parameters or {}) if run.runtime_config else {},
        "created_at": _iso(run.created_at),
        "finished_at": _iso(run.finished_at),
        "tasks": [{"name": t.display_name, "state": t.state} for t in details or [] if t.display_name],
    }


def _iso(moment: datetime.datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def run_url(client: Any, run_id: str) -> str:
    return f"{ui_base(client)}/#/runs/details/{run_id}"
