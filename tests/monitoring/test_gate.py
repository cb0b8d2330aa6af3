"""The champion/challenger gate: a worse challenger never passes, a better one by the margin does,
and the undefined cases decide as documented."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kfstack.errors import InvalidParameterError
from kfstack.monitoring.gate import KEEP, PASS, GateReport, GateRule, figures

MARGIN = GateRule(margin=0.005)


def report(challenger, champion, rule=MARGIN) -> GateReport:
    return GateReport(rule, challenger, champion, champion_version="run-1")


def test_a_worse_challenger_is_never_passed():
    gate = report({"auc": 0.70}, {"auc": 0.75})
    assert gate.decision == KEEP
    assert "does not beat" in gate.reason and "**champion**" in gate.markdown()


def test_a_better_challenger_must_win_by_the_margin():
    assert report({"auc": 0.753}, {"auc": 0.75}).decision == KEEP  # better, by less than 0.005
    assert report({"auc": 0.755}, {"auc": 0.75}).decision == PASS
    assert report({"auc": 0.75}, {"auc": 0.75}, GateRule(margin=0.0)).decision == PASS  # as good, margin 0


def test_log_loss_is_lower_is_better():
    rule = GateRule(metric="log_loss", margin=0.01)
    assert report({"log_loss": 0.48}, {"log_loss": 0.50}, rule).decision == PASS
    assert report({"log_loss": 0.495}, {"log_loss": 0.50}, rule).decision == KEEP
    assert report({"log_loss": 0.60}, {"log_loss": 0.50}, rule).decision == KEEP


def test_undefined_figures_and_no_champion():
    assert report({"auc": 0.7}, None).decision == PASS  # nothing in production
    assert "no champion" in report({"auc": 0.7}, None).reason
    assert report({"auc": None}, {"auc": 0.7}).decision == KEEP  # nothing shown
    assert report({"auc": math.nan}, None).decision == KEEP
    assert report({"auc": 0.7}, {"auc": None}).decision == PASS
    summary = report({"auc": 0.7, "log_loss": 0.5}, {"auc": 0.8}).summary()
    assert summary["decision"] == KEEP and summary["champion_version"] == "run-1"
    assert (
        "| log_loss | 0.5000 | undefined |" in report({"auc": 0.7, "log_loss": 0.5}, {"auc": 0.8}).markdown()
    )


def test_bad_rules_name_their_field():
    with pytest.raises(InvalidParameterError, match="metric='f1' is not one of"):
        GateRule(metric="f1")
    # Any metric of a task decides, a loss or an error the lower the better.
    assert report({"rmse": 1.8}, {"rmse": 2.0}, GateRule(metric="rmse", margin=0.1)).decision == PASS
    assert report({"rmse": 1.95}, {"rmse": 2.0}, GateRule(metric="rmse", margin=0.1)).decision == KEEP
    assert report({"macro_f1": 0.9}, {"macro_f1": 0.8}, GateRule(metric="macro_f1")).decision == PASS
    with pytest.raises(InvalidParameterError, match=r"margin=-0\.1 must be >= 0"):
        GateRule(margin=-0.1)
    # A margin no model can beat is refused, not a gate that never passes.
    with pytest.raises(InvalidParameterError, match="margin=inf must be a finite number"):
        GateRule(margin=float("inf"))


def test_figures_and_metrics_of_scored_records():
    labels = np.array([0, 0, 1, 1])
    probabilities = np.array([0.1, 0.6, 0.4, 0.9])
    values = figures(labels, probabilities, threshold=0.5)
    assert values["auc"] == pytest.approx(0.75) and values["accuracy"] == pytest.approx(0.5)
    assert values["log_loss"] == pytest.approx(-np.mean(np.log([0.9, 0.4, 0.4, 0.9])))
    assert figures(np.array([1, 1]), np.array([0.2, 0.9]), 0.5)["auc"] is None  # one class
    gate = report(values, {"auc": 0.6, "accuracy": None})
    assert gate.metrics() == {
        "passed": 1.0,
        "challenger.auc": pytest.approx(0.75),
        "challenger.accuracy": 0.5,
        "challenger.log_loss": pytest.approx(values["log_loss"]),
        "champion.auc": 0.6,
    }
    assert gate.summary()["decision"] == PASS
