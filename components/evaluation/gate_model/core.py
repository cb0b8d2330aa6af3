"""The gate's scoring: both models on the same labelled records, through their own transforms.

Each model directory carries its own feature spec and lookups, so the champion sees the new
records as it was trained to (its vocabularies, its imputation) and the challenger as it was.
Scoring encoded shards instead would hand the champion indices from another vocabulary.
"""

from __future__ import annotations

import numpy as np

from kfstack.features import HOLDOUT_FILE
from kfstack.flights.scoring import REQUEST_SCHEMA, FlightScorer, check_flights
from kfstack.monitoring.gate import GateReport, GateRule, figures
from kfstack.serving.production import read_found
from kfstack.serving.rollout import Holdout
from kfstack.uris import join

# Every holdout record the feature job wrote (it writes at most 5000).
ALL_RECORDS = 1_000_000


def score(model_dir: str, holdout: Holdout, threshold: float) -> dict[str, float | None]:
    """The model's gate figures on the holdout."""
    probabilities = FlightScorer(model_dir).predict(holdout.records)
    return figures(np.asarray(holdout.labels), probabilities, threshold)


def gate_models(
    challenger_dir: str, champion_dir: str, features_dir: str, rule: GateRule, threshold: float
) -> GateReport:
    """The gate's report for the two model directories on the new window's holdout records."""
    read = Holdout.read(join(features_dir, HOLDOUT_FILE), ALL_RECORDS)
    # Typed and checked as the predictor takes a request (Parquet gives its numbers as floats).
    records = REQUEST_SCHEMA.typed(read.records, "holdout")
    check_flights(records, "holdout")
    holdout = Holdout(records, read.labels)
    champion = read_found(champion_dir)
    return GateReport(
        rule=rule,
        challenger=score(challenger_dir, holdout, threshold),
        champion=score(champion_dir, holdout, threshold) if champion.comparable else None,
        champion_version=champion.version or None,
    )
