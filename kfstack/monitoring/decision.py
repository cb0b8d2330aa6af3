"""Whether to retrain: the drift check's decision, on either reference a drift step compares with.

A retraining run retrains when the new data drifted from what production was trained on, when
forced, or when there is nothing to compare with: nothing in production yet (the first model is
trained), or a model in production that carries no training profile (a model of another kind;
the canary then compares the two live). The drift step (``monitoring/data_drift``) makes the
decision from its reference -- a production-model artifact (``champion.json`` saying what was
found), a profile, or data -- and the report (:mod:`kfstack.monitoring.drift`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kfstack.monitoring.drift import DriftReport

RETRAIN = "retrain"
SKIP = "skip"


@dataclasses.dataclass(frozen=True)
class DriftDecision:
    """The decision, why, and the report it rests on (None when nothing was compared).

    Attributes:
        retrain: Train a new model.
        reason: One sentence a person reads in the run summary.
        forced: ``force`` was set.
        reference: What was compared with: the production model's version, or empty for a
            reference that is not a production model (a profile, a dataset).
        report: The comparison; None when there was nothing to compare with.
    """

    retrain: bool
    reason: str
    forced: bool
    reference: str
    report: DriftReport | None

    def summary(self) -> dict[str, Any]:
        """A run summary's ``drift`` entry."""
        return {
            "decision": RETRAIN if self.retrain else SKIP,
            "reason": self.reason,
            "forced": self.forced,
            "champion_version": self.reference or None,
            **(self.report.summary() if self.report else {"drifted": None}),
        }

    def metrics(self) -> dict[str, float]:
        """The KFP Metrics artifact: the decision as flags and the compared figures."""
        metrics: dict[str, float] = {"retrain": float(self.retrain), "forced": float(self.forced)}
        if self.report is not None:
            metrics["drifted"] = float(self.report.drifted)
            metrics["max_psi"] = self.report.max_psi
            if self.report.label_rate_shift is not None:
                metrics["label_rate_shift"] = self.report.label_rate_shift
            metrics.update({f"psi.{name}": value for name, value in sorted(self.report.psi.items())})
        return metrics

    def markdown(self) -> str:
        head = f"# Retraining: **{RETRAIN if self.retrain else SKIP}**\n\n{self.reason}.\n"
        if self.report is None:
            return head
        return head + "\n" + self.report.markdown().replace("# Data drift", "## Data drift", 1)


def nothing_to_compare(reason: str, forced: bool, reference: str = "") -> DriftDecision:
    """Retrain without a comparison: nothing (comparable) is in production."""
    return DriftDecision(True, reason, forced, reference, None)


def decide(report: DriftReport, forced: bool, reference: str = "") -> DriftDecision:
    """Retrain when ``report`` drifted or when ``forced``; ``reference`` names what production
    runs (empty: the reference is a profile or dataset, not a production model)."""
    what = f"{reference}'s training data" if reference else "the reference"
    if report.drifted:
        changed = [
            *report.drifted_features,
            *(["the label rate"] if report.label_drifted else []),
            *(["the feature set"] if report.feature_set_changed else []),
        ]
        reason = f"the new data drifted from {what}: {', '.join(changed)}"
    elif forced:
        reason = f"no drift from {what}, but force=true"
    elif reference:
        reason = f"no drift from {what}: {reference} stays in production"
    else:
        reason = f"no drift from {what}"
    return DriftDecision(report.drifted or forced, reason, forced, reference, report)
