"""The drift check's decision: retrain when the data drifted, when forced, or when nothing is in
production (there is nothing to keep)."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from kfstack.errors import InvalidParameterError
from kfstack.flights.feature_spec import DRIFT_PROFILE_FILE, PROFILE_FILE
from kfstack.monitoring.drift import DriftReport, DriftThresholds, compare_profiles
from kfstack.serving.production import read_found

RETRAIN = "retrain"
SKIP = "skip"


@dataclasses.dataclass(frozen=True)
class DriftCheck:
    """The decision, why, and the report it rests on (None when nothing was compared)."""

    retrain: bool
    reason: str
    forced: bool
    champion_version: str
    report: DriftReport | None

    def summary(self) -> dict[str, Any]:
        """A run summary's ``drift`` entry."""
        return {
            "decision": RETRAIN if self.retrain else SKIP,
            "reason": self.reason,
            "forced": self.forced,
            "champion_version": self.champion_version or None,
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


def _profile(directory: str, name: str) -> dict[str, Any]:
    with open(os.path.join(directory, name), encoding="utf-8") as f:
        return json.load(f)


def check_drift(features_dir: str, champion_dir: str, thresholds: DriftThresholds, force: bool) -> DriftCheck:
    """The decision for the new window at ``features_dir`` against the production-model artifact
    at ``champion_dir``.

    Raises:
        InvalidParameterError: The new window was not profiled against this champion (no drift
            profile, or one binned on other edges).
    """
    champion = read_found(champion_dir)
    if not champion.found:
        return DriftCheck(True, "nothing in production: the first model is trained", force, "", None)
    if not champion.comparable:
        reason = (
            f"{champion.version} in production is not a model directory of this project (no training "
            f"profile to compare with): a model is trained, and the canary compares the two live"
        )
        return DriftCheck(True, reason, force, champion.version, None)
    if not os.path.exists(os.path.join(features_dir, DRIFT_PROFILE_FILE)):
        raise InvalidParameterError(
            f"{features_dir} has no {DRIFT_PROFILE_FILE}: the feature job ran without the production "
            f"model's profile as its reference_profile_uri"
        )
    report = compare_profiles(
        _profile(champion_dir, PROFILE_FILE), _profile(features_dir, DRIFT_PROFILE_FILE), thresholds
    )
    if report.drifted:
        what = [
            *report.drifted_features,
            *(["the label rate"] if report.label_drifted else []),
            *(["the feature set"] if report.feature_set_changed else []),
        ]
        reason = f"the new window drifted from {champion.version}'s training data: {', '.join(what)}"
    elif force:
        reason = f"no drift from {champion.version}'s training data, but force=true"
    else:
        reason = f"no drift from {champion.version}'s training data: {champion.version} stays in production"
    return DriftCheck(report.drifted or force, reason, force, champion.version, report)
