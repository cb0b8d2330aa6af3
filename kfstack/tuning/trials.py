"""What a tuning run reports, whichever platform ran it: its trials and the outcome.

The embedded tuner fills these from its own trial loop, the Kubernetes step from the
Experiment's ``status`` and its ``Trial`` objects; the report (:mod:`.report`) and the step's
outputs read only these.
"""

from __future__ import annotations

import dataclasses
from typing import Any

# Trial outcomes, in Katib's words (Trial condition types).
SUCCEEDED = "Succeeded"
FAILED = "Failed"
EARLY_STOPPED = "EarlyStopped"
METRICS_UNAVAILABLE = "MetricsUnavailable"  # ran, but never printed the objective
KILLED = "Killed"
RUNNING = "Running"
# Counted against maxFailedTrialCount (Katib counts both).
FAILED_OUTCOMES = (FAILED, METRICS_UNAVAILABLE)
# Trials whose objective is known (Katib hands both to the algorithm and picks the best among them).
OBSERVED_OUTCOMES = (SUCCEEDED, EARLY_STOPPED)


@dataclasses.dataclass
class TrialRecord:
    """One trial.

    Attributes:
        name: The trial's name (Katib: ``<experiment>-<random>``; locally ``trial-<n>``).
        parameters: Its parameter assignments as Katib substitutes them (strings).
        status: One of the outcomes above.
        objective: The objective's value under the metric strategy; None when not observed.
        metrics: Every metric's value under its strategy (objective and additional metrics).
        history: The objective as reported, one value per report (epoch).
        seconds: Wall time from start to end; None when unknown.
        message: Why it failed or stopped early.
    """

    name: str
    parameters: dict[str, str]
    status: str
    objective: float | None = None
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)
    history: list[float] = dataclasses.field(default_factory=list)
    seconds: float | None = None
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialRecord:
        return cls(**data)


@dataclasses.dataclass
class TuningResult:
    """A finished tuning run.

    Attributes:
        algorithm: The Katib algorithm name.
        objective: The objective metric; ``direction`` ``maximize`` or ``minimize``.
        trials: Every trial, in creation order.
        best: The best observed trial (Katib ``currentOptimalTrial``); None when none was observed.
        goal_reached: The best trial reached the spec's goal.
        reason: Why the run ended (Katib's condition reason, e.g. ``ExperimentMaxTrialsReached``).
    """

    algorithm: str
    objective: str
    direction: str
    trials: list[TrialRecord]
    best: TrialRecord | None
    goal_reached: bool = False
    reason: str = ""

    def count(self, *statuses: str) -> int:
        return sum(1 for trial in self.trials if trial.status in statuses)

    def metrics(self) -> dict[str, float]:
        """The figures of the step's ``Metrics`` output."""
        figures = {
            "trials_run": float(len(self.trials)),
            "trials_succeeded": float(self.count(SUCCEEDED)),
            "trials_failed": float(self.count(*FAILED_OUTCOMES)),
            "trials_early_stopped": float(self.count(EARLY_STOPPED)),
            "goal_reached": float(self.goal_reached),
        }
        if self.best is not None and self.best.objective is not None:
            figures[f"best_{self.objective}"] = self.best.objective
        return figures
