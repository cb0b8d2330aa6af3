"""Recurring runs (``kfstack schedule``) on a KFP API server: list, create or replace, delete."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import kfp_server_api

from kfstack.app.kfp_server.connection import PAGE_SIZE, pages, ui_base, user_namespace
from kfstack.app.kfp_server.pipelines import PipelineVersionRef
from kfstack.errors import UsageError

# A recurring run never overlaps itself: a slow retraining is not started again beside itself.
MAX_CONCURRENCY = 1


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A recurring run as ``kfstack schedule --list`` shows it.

    Attributes:
        name: Its display name.
        id: Its recurring run id.
        cron: Its cron expression (or ``every <n>s`` for a periodic one).
        status: ``ENABLED`` or ``DISABLED``.
        pipeline_id: The pipeline it runs.
        version_id: The version it is pinned to; ``None``: the latest at each run.
        service_account: The service account its runs' pods run as, as the server reports it
            (KFP 2.17 fills in its default when none was given); ``None``: not reported.
        arguments: The pipeline parameters its runs are started with.
        experiment_id: The experiment its runs go to.
    """

    name: str
    id: str
    cron: str
    status: str
    pipeline_id: str | None
    version_id: str | None
    service_account: str | None = None
    arguments: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    experiment_id: str | None = None


def schedules(client: Any, pipeline_id: str | None = None) -> list[Schedule]:
    """The recurring runs in the client's namespace (of one pipeline when ``pipeline_id``)."""
    namespace = user_namespace(client)
    found = []
    for run in pages(
        lambda token: client.list_recurring_runs(page_token=token, page_size=PAGE_SIZE, namespace=namespace),
        "recurring_runs",
    ):
        reference = run.pipeline_version_reference
        schedule = Schedule(
            name=run.display_name,
            id=run.recurring_run_id,
            cron=_trigger_text(run.trigger),
            status=str(run.status or run.mode or "?"),
            pipeline_id=reference.pipeline_id if reference else None,
            version_id=(reference.pipeline_version_id or None) if reference else run.pipeline_version_id,
            service_account=run.service_account or None,
            arguments=dict((run.runtime_config.parameters or {}) if run.runtime_config else {}),
            experiment_id=run.experiment_id or None,
        )
        if pipeline_id is None or schedule.pipeline_id == pipeline_id:
            found.append(schedule)
    return found


def _trigger_text(trigger: Any) -> str:
    if trigger and trigger.cron_schedule and trigger.cron_schedule.cron:
        return str(trigger.cron_schedule.cron)
    if trigger and trigger.periodic_schedule and trigger.periodic_schedule.interval_second:
        return f"every {trigger.periodic_schedule.interval_second}s"
    return "?"


def create_schedule(
    client: Any,
    name: str,
    ref: PipelineVersionRef,
    pinned: bool,
    experiment_id: str,
    cron: str,
    arguments: Mapping[str, Any],
    service_account: str | None = None,
) -> tuple[str, list[str]]:
    """Creates recurring run ``name`` and removes any earlier one of that name.

    KFP has no update of a recurring run. The new one is created *before* the old ones are
    deleted, so a refused request never leaves the pipeline unscheduled.

    Args:
        ref: The pipeline, and the version to pin when ``pinned``.
        pinned: Run ``ref``'s version; else whatever version is the pipeline's latest at each
            run (the reference carries the pipeline id only; KFP >= 2.5).
        cron: Six fields, seconds first (:func:`kfstack.app.cron.parse_cron`).
        arguments: Pipeline parameters (the rest take the compiled defaults).
        service_account: The Kubernetes service account its runs' pods run as; None: the API
            server's default (:func:`kfstack.app.kfp_server.runs.start_run`).

    Returns:
        The new recurring run's id, and the ids of the ones it replaced.

    Raises:
        UsageError: A schedule of that name runs another pipeline (nothing is created or
            deleted: a name is not taken from another pipeline's schedule).
    """
    same_name = [s for s in schedules(client) if s.name == name]
    others = [s for s in same_name if s.pipeline_id and s.pipeline_id != ref.pipeline_id]
    if others:
        raise UsageError(
            f"schedule {name!r} runs another pipeline (id {others[0].pipeline_id}); choose another "
            f"--name, or delete that schedule first (kfstack schedule --delete {name})"
        )
    previous = [s.id for s in same_name]
    created = client.recurring_runs.recurring_run_service_create_recurring_run(
        recurring_run=kfp_server_api.V2beta1RecurringRun(
            display_name=name,
            description=f"{ref.pipeline} {ref.version if pinned else 'latest version'}, scheduled by kfstack",
            experiment_id=experiment_id,
            pipeline_version_reference=kfp_server_api.V2beta1PipelineVersionReference(
                pipeline_id=ref.pipeline_id, pipeline_version_id=ref.version_id if pinned else None
            ),
            runtime_config=kfp_server_api.V2beta1RuntimeConfig(parameters=dict(arguments)),
            trigger=kfp_server_api.V2beta1Trigger(
                cron_schedule=kfp_server_api.V2beta1CronSchedule(cron=cron)
            ),
            # int64 in the API: a JSON string, as protojson writes it.
            max_concurrency=str(MAX_CONCURRENCY),
            # Missed runs (a paused schedule, a controller down) are not replayed one by one:
            # the next run retrains on the data as it is then.
            no_catchup=True,
            mode=kfp_server_api.RecurringRunMode.ENABLE,
            service_account=service_account or None,
        )
    )
    for old in previous:
        client.delete_recurring_run(old)
    return str(created.recurring_run_id), previous


def delete_schedules(client: Any, name: str) -> list[str]:
    """Deletes the recurring run(s) named ``name``; returns their ids.

    Raises:
        UsageError: None has that name (the message lists the names there are).
    """
    found = schedules(client)
    ids = [s.id for s in found if s.name == name]
    if not ids:
        known = ", ".join(sorted({s.name for s in found})) or "none"
        raise UsageError(f"no schedule named {name!r}; schedules: {known}")
    for recurring_run_id in ids:
        client.delete_recurring_run(recurring_run_id)
    return ids


def schedule_url(client: Any, recurring_run_id: str) -> str:
    return f"{ui_base(client)}/#/recurringrun/details/{recurring_run_id}"
