"""The run's frame and MLflow on a cluster: the first task makes the pipeline run's parent (the
exit handler ends it: :func:`kfstack.components.common.cleanup_run.core.end_tracked_run`).

Embedded, the runner tracks the whole run from outside its tasks (:mod:`kfstack.tracking.embedded`);
where KFP's MLflow plugin is on, KFP makes and ends the parent. Only a cluster run without the
plugin, whose environment names a tracking server, needs them.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from typing import Any

from kfstack.monitoring.window import parse_time
from kfstack.platforms import KUBERNETES, PLATFORM_ARGUMENT, TRACKING_URI_ARGUMENT
from kfstack.settings import SETTINGS_OVERRIDES
from kfstack.tracking import cluster, runs
from kfstack.version import VERSION_ENV

_SAME_SECOND = datetime.timedelta(seconds=1)


def start_run(
    values: Mapping[str, Any],
    overrides: Mapping[str, Any],
    run_id: str,
    scheduled_time: str = "",
    created_time: str = "",
    env: Mapping[str, str] | None = None,
) -> str | None:
    """The validate-parameters task's part, once the run's parameters are checked: the parent of
    a ``platform=kubernetes`` run, with the run's effective parameters (``values`` with the
    ``overrides`` applied, and the overrides themselves) and what started it. Its id, or None
    (nothing to track here; :func:`kfstack.tracking.cluster.start_pipeline_run`)."""
    effective = {**values, **overrides}
    if effective.get(PLATFORM_ARGUMENT) != KUBERNETES:
        return None
    env = os.environ if env is None else env
    parameters = {**effective, **({SETTINGS_OVERRIDES: dict(overrides)} if overrides else {})}
    return cluster.start_pipeline_run(
        env,
        str(effective.get(TRACKING_URI_ARGUMENT) or ""),
        run_id,
        env.get(VERSION_ENV, ""),
        parameters,
        runs.started_by(
            trigger=str(effective.get(runs.TRIGGER_PARAMETER) or ""),
            schedule=schedule_of(scheduled_time, created_time),
        ),
    )


def schedule_of(scheduled_time: str, created_time: str) -> str:
    """The time a recurring run was scheduled for, from KFP's ``pipeline_job_schedule_time_utc``
    and ``pipeline_job_create_time_utc``; empty for a run started once.

    KFP gives a run started once its creation time as its scheduled time; a recurring run's is
    its schedule's tick, and its workflow is created after it. A tick and a creation within the
    same second cannot be told apart from a run started once (both times are to the second), nor
    can anything be where KFP fills in neither (kfp.local, older backends): both read as started
    by a person.
    """
    try:
        scheduled, created = parse_time(scheduled_time), parse_time(created_time)
    except ValueError:  # InvalidParameterError: a filled-in value that is no time
        return ""
    if scheduled is None or created is None or created - scheduled < _SAME_SECOND:
        return ""
    return scheduled.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
