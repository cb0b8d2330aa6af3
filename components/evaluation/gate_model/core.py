"""The gate's scoring: both models on the same labelled records, through their own transforms.

Each model directory carries its own feature spec and lookups, so the champion sees the new
records as it was trained to (its vocabularies, its imputation) and the challenger as it was.
Scoring encoded shards instead would hand the champion indices from another vocabulary.
"""

from __future__ import annotations

import numpy as np

from kfstack.flights.scoring import FlightScorer, read_holdout
from kfstack.monitoring.gate import GateReport, GateRule, figures
from kfstack.serving.production import read_found
from kfstack.serving.rollout import Holdout


def score(model_dir: str, holdout: Holdout, threshold: float) -> dict[str, float | None]:
    """The model's gate figures on the holdout."""
    probabilities = FlightScorer(model_dir).predict(holdout.records)
    return figures(np.asarray(holdout.labels), probabilities, threshold)


def gate_models(
    challenger_dir: str, champion_dir: str, features_dir: str, rule: GateRule, threshold: float
) -> GateReport:
    """The gate's report for the two model directories on the new window's holdout records."""
    holdout = read_holdout(features_dir)  # every record the feature job wrote (at most 5000)
    champion = read_found(champion_dir)
    return GateReport(
        rule=rule,
        challenger=score(challenger_dir, holdout, threshold),
        champion=score(champion_dir, holdout, threshold) if champion.comparable else None,
        champion_version=champion.version or None,
    )
