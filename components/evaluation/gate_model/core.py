"""The gate's scoring: both models on the same labelled records, each through its own server.

Each model is loaded as its server loads it (:mod:`kfstack.serving.scoring`: a standard
format's stand-in, or the team's ``kserve.Model``) and sent the same requests, so each sees the
records as it was trained to (a custom predictor's own transform, its own vocabularies). Scoring
pre-encoded features instead would hand the champion the challenger's encoding.
"""

from __future__ import annotations

from collections.abc import Sequence

from kfstack.monitoring.gate import GateReport, GateRule
from kfstack.serving import scoring
from kfstack.serving.production import read_found
from kfstack.serving.scoring import evaluate_dataset


def gate_models(
    *,
    challenger_dir: str,
    champion_dir: str,
    dataset_uri: str,
    task: str,
    label_column: str,
    rule: GateRule,
    model_format: str,
    custom_predictor: str = "",
    feature_columns: Sequence[str] = (),
    request_format: str = scoring.TENSOR,
    threshold: float = 0.5,
    batch_size: int = scoring.DEFAULT_BATCH,
) -> GateReport:
    """The gate's report for the two model directories on the labelled rows at ``dataset_uri``;
    the champion directory is the production-model step's artifact (:func:`read_found` says
    whether a model was found there and can be scored).

    Raises:
        InvalidParameterError: A bad task, format, predictor or dataset, before a model is loaded
            where it can be told.
    """

    def figures(model_dir: str) -> dict[str, float | None]:
        return evaluate_dataset(
            model_dir=model_dir,
            model_format=model_format,
            dataset_uri=dataset_uri,
            task=task,
            label_column=label_column,
            feature_columns=feature_columns,
            request_format=request_format,
            custom_predictor=custom_predictor,
            threshold=threshold,
            batch_size=batch_size,
        ).metrics

    champion = read_found(champion_dir)
    return GateReport(
        rule=rule,
        challenger=figures(challenger_dir),
        champion=figures(champion_dir) if champion.comparable else None,
        champion_version=champion.version or None,
    )
