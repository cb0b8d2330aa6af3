"""Katib's ``medianstop`` early stopping, as Katib v0.19 really computes it.

Two halves, as in Katib:

**The rule** (``pkg/earlystopping/v1beta1/medianstop/service.py``), made each time new trials
are created and attached to those trials for their whole life: for every *succeeded* trial
(early-stopped, failed and running ones do not count), the average of the first ``start_step``
reports of the objective; once at least ``min_trials_required`` trials have one, the rule is
"stop when the objective is worse than the **mean** of those averages" -- the service calls it
the median, but it returns ``sum / len``. Worse means less when maximising, greater when
minimising. Until then the new trials get no rule at all.

**The check** (the metrics collector sidecar, ``file-metricscollector/main.go``): it counts the
trial's reports of the objective and compares exactly once, at the ``start_step``-th report,
and not the value just printed but the best one the trial reported so far (max when maximising).
A trial still better than the rule then is never judged again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from kfstack.tuning.spec import MAXIMIZE

LESS, GREATER = "less", "greater"


@dataclasses.dataclass(frozen=True)
class StopRule:
    """Katib's ``EarlyStoppingRule``: stop once the objective compares so with ``value``."""

    metric: str
    value: float
    comparison: str
    start_step: int


def median_stop_rule(
    succeeded: Iterable[Sequence[float]],
    *,
    metric: str,
    direction: str,
    min_trials_required: int,
    start_step: int,
) -> StopRule | None:
    """The rule for trials created now.

    Args:
        succeeded: Each succeeded trial's reports of the objective, in the order printed.
        metric, direction: The objective.
        min_trials_required, start_step: medianstop's settings.

    Returns:
        The rule, or None while fewer than ``min_trials_required`` trials succeeded.
    """
    averages = [sum(values[:start_step]) / len(values[:start_step]) for values in succeeded if values]
    if len(averages) < min_trials_required:
        return None
    return StopRule(
        metric=metric,
        value=sum(averages) / len(averages),
        comparison=LESS if direction == MAXIMIZE else GREATER,
        start_step=start_step,
    )


class StopRuleCheck:
    """The collector's check of one trial against its rule, fed one report at a time."""

    def __init__(self, rule: StopRule) -> None:
        self.rule = rule
        self._reports = 0
        self.best: float | None = None

    def observe(self, value: float) -> bool:
        """Records a report of the objective; True when the trial is to be stopped now."""
        rule = self.rule
        if self.best is None or (value < self.best if rule.comparison == GREATER else value > self.best):
            self.best = value
        self._reports += 1
        if self._reports != rule.start_step:
            return False
        return self.best < rule.value if rule.comparison == LESS else self.best > rule.value
