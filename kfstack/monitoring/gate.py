"""The champion/challenger gate: a retrained model (the challenger) goes on to a canary only when
it beats the model in production (the champion) on the same new data by a margin.

Both are scored on the same labelled records -- the new data's holdout -- so the comparison is
of the models, not of the data. The figure compared is one of the task's metrics
(:mod:`kfstack.evaluation.task_metrics`; by default its quality metric: AUC, accuracy or RMSE),
where higher is better or, for a loss or an error, lower. The rule:

    challenger >= champion + margin   (higher is better: AUC, accuracy, F1, R²...)
    challenger <= champion - margin   (lower is better: log loss, RMSE, MAE)

A margin of 0 lets a challenger through that is merely as good; a positive one asks for a real
gain, so that noise does not cause a rollout. With no champion (nothing in production yet) the
challenger passes: there is nothing to beat. A metric undefined on the data (one class only)
fails the gate: nothing can be shown.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from kfstack.evaluation.task_metrics import HIGHER_IS_BETTER
from kfstack.settings import Settings, setting
from kfstack.training import metrics

# Metric -> whether higher is better: every metric of a task.
GATE_METRICS = HIGHER_IS_BETTER
PASS = "challenger"
KEEP = "champion"


@dataclasses.dataclass(frozen=True)
class GateRule(Settings):
    """Which metric decides and by how much the challenger must win (in the metric's units)."""

    concern = "gate rule"

    metric: str = setting("auc", choices=tuple(GATE_METRICS))
    margin: float = setting(0.0, ge=0.0)


@dataclasses.dataclass(frozen=True)
class GateReport:
    """Both models' figures on the same records, and the decision."""

    rule: GateRule
    challenger: Mapping[str, float | None]
    champion: Mapping[str, float | None] | None
    champion_version: str | None = None

    @property
    def challenger_value(self) -> float | None:
        return _defined(self.challenger.get(self.rule.metric))

    @property
    def champion_value(self) -> float | None:
        return None if self.champion is None else _defined(self.champion.get(self.rule.metric))

    @property
    def decision(self) -> str:
        """:data:`PASS` (the challenger goes on) or :data:`KEEP` (production stays)."""
        challenger = self.challenger_value
        if challenger is None:
            return KEEP
        if self.champion is None:
            return PASS
        champion = self.champion_value
        if champion is None:
            return PASS  # the champion shows nothing on these records; the challenger does
        higher = GATE_METRICS[self.rule.metric]
        wins = (
            challenger >= champion + self.rule.margin if higher else challenger <= champion - self.rule.margin
        )
        return PASS if wins else KEEP

    @property
    def reason(self) -> str:
        metric, margin = self.rule.metric, self.rule.margin
        challenger, champion = self.challenger_value, self.champion_value
        if challenger is None:
            return f"the challenger's {metric} is undefined on these records"
        if self.champion is None and self.champion_version:
            return (
                f"{self.champion_version} in production cannot be scored here: the challenger has no "
                f"champion to beat (the canary compares the two live)"
            )
        if self.champion is None:
            return "nothing in production: the challenger has no champion to beat"
        if champion is None:
            return f"the champion's {metric} is undefined on these records"
        direction = "+" if GATE_METRICS[metric] else "-"
        verdict = "beats" if self.decision == PASS else "does not beat"
        return (
            f"challenger {metric} {challenger:.4f} {verdict} champion {champion:.4f} "
            f"{direction} margin {margin}"
        )

    def summary(self) -> dict[str, Any]:
        """A run summary's ``gate`` entry."""
        return {
            "decision": self.decision,
            "metric": self.rule.metric,
            "margin": self.rule.margin,
            "challenger": dict(self.challenger),
            "champion": None if self.champion is None else dict(self.champion),
            "champion_version": self.champion_version,
            "reason": self.reason,
        }

    def metrics(self) -> dict[str, float]:
        """The KFP Metrics artifact: both models' defined figures and the decision as a flag."""
        figures = {"passed": float(self.decision == PASS)}
        for role, values in (("challenger", self.challenger), ("champion", self.champion or {})):
            for name, value in values.items():
                defined = _defined(value)
                if defined is not None:
                    figures[f"{role}.{name}"] = defined
        return figures

    def markdown(self) -> str:
        names = sorted(set(self.challenger) | set(self.champion or {}))
        lines = [
            f"# Champion/challenger gate: **{self.decision}**",
            "",
            self.reason + ".",
            "",
            f"| metric | challenger | champion ({self.champion_version or 'none'}) |",
            "|---|---|---|",
        ]
        for name in names:
            champion = "" if self.champion is None else _format(self.champion.get(name))
            lines.append(f"| {name} | {_format(self.challenger.get(name))} | {champion} |")
        return "\n".join(lines) + "\n"


def figures(labels: np.ndarray, probabilities: np.ndarray, threshold: float) -> dict[str, float | None]:
    """A model's gate figures on labelled records: AUC (None with one class only), accuracy at
    ``threshold`` and log loss."""
    return {
        "auc": metrics.roc_auc(labels, probabilities) if metrics.has_both_classes(labels) else None,
        "accuracy": metrics.accuracy(labels, probabilities, threshold),
        "log_loss": metrics.log_loss(labels, probabilities),
    }


def _defined(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _format(value: float | None) -> str:
    return "undefined" if _defined(value) is None else f"{value:.4f}"
