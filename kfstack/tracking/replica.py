"""What a training replica tracks: on the chief only (rank 0; the replicas of one job would log
each value once per replica otherwise), every metric line the code prints -- the lines Katib
reads -- as MLflow metrics with their step, into the run of the training task or, in a tuning
trial, into the trial's own run, which the chief makes (:func:`kfstack.tracking.runs.start_trial_run`)
and puts in ``MLFLOW_RUN_ID`` before the team's code starts, so the team's own ``mlflow`` calls
join it too.

A line's step is its ``epoch=N`` where it prints one, else the count of metric lines so far.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from kfstack.tracking.client import RUN_ID_ENV, Tracker
from kfstack.tracking.runs import start_trial_run
from kfstack.tuning.metric_lines import MetricReport, parse_line

EPOCH = "epoch"


class ReplicaTracking:
    """The chief's metric lines into its run (module docstring)."""

    def __init__(self, tracker: Tracker, run_id: str, owned: bool = False) -> None:
        self.tracker, self.run_id, self.owned = tracker, run_id, owned
        self._lines = 0

    @classmethod
    def for_chief(cls, env: Mapping[str, str], trial: str, argv: Sequence[str]) -> ReplicaTracking | None:
        """The tracking of a chief replica whose environment names a tracking server and a run
        (a trial's: the parent its run nests under); None otherwise. In a trial, the trial's run
        is made (or found, for a trial that restarts) and set in this process's ``MLFLOW_RUN_ID``."""
        tracker = Tracker.from_environment(env, origin=trial or "training")
        if tracker is None:
            return None
        run_id: str | None = env.get(RUN_ID_ENV)
        if trial:
            run_id = start_trial_run(tracker, trial, assignments(argv), env)
            if run_id:
                os.environ[RUN_ID_ENV] = run_id
        return cls(tracker, run_id, owned=bool(trial)) if run_id else None

    def line(self, line: str, reports: Sequence[MetricReport]) -> None:
        """One printed line and the declared metrics' values on it."""
        if not reports:
            return
        self._lines += 1
        epochs = parse_line(line, (EPOCH,))
        step = int(epochs[0].value) if epochs else self._lines
        values = {report.name: report.value for report in reports}
        self.tracker.log_metrics(self.run_id, values, step, what="the metric lines")

    def finish(self, succeeded: bool) -> None:
        """Ends the trial's run, which this replica made (a task's run is ended by whoever made
        it: KFP's plugin, or the embedded run)."""
        if self.owned:
            self.tracker.end_run(self.run_id, "FINISHED" if succeeded else "FAILED")


def assignments(argv: Sequence[str]) -> dict[str, str]:
    """A trial's hyperparameters from its ``--name=value`` (or ``--name value``) arguments."""
    found: dict[str, str] = {}
    items = list(argv)
    for index, item in enumerate(items):
        if not item.startswith("--"):
            continue
        name, sep, value = item[2:].partition("=")
        if not sep:
            following = items[index + 1] if index + 1 < len(items) else ""
            if following.startswith("--"):
                continue
            value = following
        found[name] = value
    return found
