"""The embedded platform's retraining: local runs in run directories.

The embedded platform has no scheduler that records which pipeline retrains a model, so the
receiver is told: ``--retrain SERVICE=PIPELINE`` (the model's served name, as the model
server's ``model_name`` label and the alert's ``inference_service`` carry it) and
``--param NAME=VALUE`` (the arguments a scheduled run would have), checked against the
pipeline when the receiver starts. The alert's namespace means nothing here.

A run the receiver starts is a run directory under the pipeline root like any
``kfstack run --local`` (:mod:`kfstack.app.run_directory`): the receiver creates it -- so it is
there, with its arguments, before the run's process starts -- and runs
``kfstack run --local --resume DIR`` in a process of its own session, which outlives the
receiver. The model's runs are the run directories of that pipeline whose ``serving_name``
argument is the model's (every run of it when the pipeline has no ``serving_name``): one
without ``summary.json`` is running -- until ``--stale-after`` from its start, as a stuck run on
a cluster (a run killed with the machine never writes one); ``.kfstack-run``'s time is its start.

Which alert started which run is also kept beside the runs, in ``alert-runs.jsonl``
(:class:`AlertLedger`), which ``kfstack clean`` never removes: a firing whose run was cleaned
away still finds it, and starts no second one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from kfstack.app import run_directory
from kfstack.app.alert_receiver.decisions import (
    FORCE_PARAMETER,
    NO_TIME,
    SERVING_NAME_PARAMETER,
    TRIGGER_PARAMETER,
    PastRun,
    Refusal,
)
from kfstack.errors import BadInputError
from kfstack.pipelines import load_pipeline, rendering

# Where the started run's own console output goes, beside its task logs.
LAUNCH_LOG = "kfstack-run-console.log"
_LOCAL_CHECK_RUN_ID = "alert-check"


@dataclasses.dataclass(frozen=True)
class RetrainingRecord:
    """What retrains one model embedded: a pipeline and the arguments of its runs."""

    pipeline: str
    arguments: Mapping[str, Any]


class AlertLedger:
    """``<pipeline root>/alert-runs.jsonl``: a line per run an alert started (its model,
    pipeline, trigger, run directory and start), appended, never rewritten."""

    def __init__(self, pipeline_root: str) -> None:
        self.path = os.path.join(pipeline_root, run_directory.ALERT_LEDGER)

    def record(self, service: str, pipeline: str, trigger: str, run: str) -> None:
        started = datetime.datetime.now(datetime.UTC).isoformat()
        line = {"service": service, "pipeline": pipeline, "trigger": trigger, "run": run, "started": started}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")

    def runs(self, service: str, pipeline: str) -> list[PastRun]:
        """The runs recorded for the model's pipeline, as ended runs (a line that is not a
        record, e.g. one cut short by a crash, is passed over)."""
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return []
        found = []
        for text in lines:
            try:
                entry = json.loads(text)
                started = datetime.datetime.fromisoformat(entry["started"])
            except (ValueError, KeyError, TypeError):
                continue
            if isinstance(entry, dict) and (entry.get("service"), entry.get("pipeline")) == (
                service,
                pipeline,
            ):
                found.append(
                    PastRun(
                        id=str(entry["run"]), created_at=started, running=False, trigger=str(entry["trigger"])
                    )
                )
        return found


@dataclasses.dataclass
class LocalSchedule:
    service: str
    record: RetrainingRecord
    pipeline_root: str
    force: bool
    children: list[subprocess.Popen]
    local_arguments: Callable[[str, dict[str, Any]], dict[str, Any]]

    @property
    def ledger(self) -> AlertLedger:
        return AlertLedger(self.pipeline_root)

    @property
    def description(self) -> str:
        return f"--retrain {self.service}={self.record.pipeline}"

    def history(self) -> list[PastRun]:
        self.children[:] = [child for child in self.children if child.poll() is None]  # reaped
        found = []
        for run in run_directory.list_runs(self.pipeline_root):
            try:
                marker = run.marker()
            except (OSError, ValueError):
                continue
            arguments = marker.get("arguments") or {}
            if marker.get("pipeline") != self.record.pipeline:
                continue
            if arguments.get(SERVING_NAME_PARAMETER, self.service) != self.service:
                continue
            found.append(
                PastRun(
                    id=run.path,
                    created_at=_started(marker.get("started", "")),
                    running=not os.path.isfile(run.summary),
                    trigger=str(arguments.get(TRIGGER_PARAMETER) or ""),
                )
            )
        # Runs an alert started whose directories were cleaned away.
        present = {run.id for run in found}
        found += [
            run for run in self.ledger.runs(self.service, self.record.pipeline) if run.id not in present
        ]
        return found

    def start(self, trigger: str) -> str:
        declared = rendering.parameter_types(load_pipeline(self.record.pipeline))
        if TRIGGER_PARAMETER not in declared:
            raise Refusal(f"pipeline {self.record.pipeline} declares no {TRIGGER_PARAMETER!r} parameter")
        arguments = dict(self.record.arguments)
        if SERVING_NAME_PARAMETER in declared:
            arguments[SERVING_NAME_PARAMETER] = self.service
        arguments[TRIGGER_PARAMETER] = trigger
        if self.force and FORCE_PARAMETER in declared:
            arguments[FORCE_PARAMETER] = True
        try:
            arguments = self.local_arguments(self.record.pipeline, arguments)
            # What `kfstack run --local` checks before a run directory exists.
            rendering.render(self.record.pipeline, arguments, run_id=_LOCAL_CHECK_RUN_ID)
        except BadInputError as err:
            raise Refusal(f"pipeline {self.record.pipeline} refuses the run's arguments: {err}") from None
        run = run_directory.RunDirectory.create(self.pipeline_root, self.record.pipeline, arguments=arguments)
        self.ledger.record(self.service, self.record.pipeline, trigger, run.path)
        # The run's lock goes to its process with the descriptor that holds it, so that a
        # `kfstack clean` never finds the run unlocked between its creation and its start.
        lock = run.lock_descriptor()
        try:
            with open(os.path.join(run.logs, LAUNCH_LOG), "w", encoding="utf-8") as console:
                command = [sys.executable, "-m", "kfstack.app.cli", "run", "--local", "--resume", run.path]
                command += ["--pipeline-root", self.pipeline_root]
                self.children.append(
                    subprocess.Popen(
                        command,
                        stdin=subprocess.DEVNULL,
                        stdout=console,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,  # not stopped with the receiver
                        pass_fds=(lock,),
                        env={**os.environ, run_directory.LOCK_FD_ENV: str(lock)},
                    )
                )
        finally:
            run.release()
        return run.path


def _started(stamp: str) -> datetime.datetime:
    """A marker's local-time stamp (``%Y%m%d-%H%M%S``) as an aware UTC time."""
    try:
        seconds = time.mktime(time.strptime(stamp, run_directory.STARTED_FORMAT))
    except ValueError:
        return NO_TIME
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC)


class LocalRetraining:
    """Local runs of the pipelines the receiver was told retrain each model (module docstring).

    Args:
        records: Served model name -> what retrains it.
        pipeline_root: Where the run directories are (``kfstack run --local --pipeline-root``).
        local_arguments: ``(pipeline, arguments) -> arguments`` of a run on this machine
            (``kfstack run --local``'s: ``platform=local``, the local tuning budget).
        force: Start runs with ``force=true`` when the pipeline has the parameter.
    """

    def __init__(
        self,
        records: Mapping[str, RetrainingRecord],
        pipeline_root: str,
        local_arguments: Callable[[str, dict[str, Any]], dict[str, Any]],
        force: bool = True,
    ) -> None:
        self.records = dict(records)
        self.local_arguments = local_arguments
        self.pipeline_root = os.path.abspath(pipeline_root)
        self.force = force
        self.children: list[subprocess.Popen] = []

    @contextlib.contextmanager
    def schedule_for(self, namespace: str, service: str) -> Iterator[LocalSchedule]:
        record = self.records.get(service)
        if record is None:
            known = ", ".join(sorted(self.records)) or "none"
            raise Refusal(f"no --retrain {service}=PIPELINE was given; models retrained here: {known}")
        yield LocalSchedule(
            service, record, self.pipeline_root, self.force, self.children, self.local_arguments
        )
