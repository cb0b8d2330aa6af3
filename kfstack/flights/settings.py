"""The flights pipelines' parameters as typed settings: where a run's arguments meet the library.

Most settings read arguments of their own field names (``workers``, ``num_shards``...); the
placements below say which arguments place each stage's cluster work, so every argument name
of the pipelines that is not a field name appears here once. Each launching stage builds its
settings from its component's arguments with these classes, the validate-parameters task and
``kfstack render`` build them from the pipeline's parameters through the same stages, and
:func:`check_run` holds the one rule that spans two stages.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kfstack.errors import InvalidParameterError
from kfstack.flights.features import CATEGORICAL_FEATURES, NUMERIC_FEATURES
from kfstack.flights.scoring import DEFAULT_MAX_BATCH
from kfstack.monitoring.drift import DriftThresholds, feature_names
from kfstack.monitoring.gate import GateRule
from kfstack.monitoring.window import resolve_window
from kfstack.serving.model_registry import RegistryEndpoint
from kfstack.settings import Settings, setting


def check_run(parameters: Mapping[str, Any]) -> None:
    """The rule across stages of a flights training run: every training rank reads a shard.

    Raises:
        InvalidParameterError: ``num_shards`` < ``workers``.
    """
    num_shards, workers = parameters.get("num_shards"), parameters.get("workers")
    url = parameters.get("model_registry_url")
    if isinstance(url, str) and url.strip():
        RegistryEndpoint.parse(url)  # a bad URL fails before training, not after the rollout
    if not (isinstance(num_shards, int) and isinstance(workers, int)):
        return  # missing or templated (a Placeholder): each stage checks its own
    if num_shards < workers:
        raise InvalidParameterError(
            f"num_shards={num_shards} < workers={workers}: every rank must read at least one "
            f"shard; use num_shards >= workers (a multiple of workers balances best)"
        )


def _known_features(names: tuple[str, ...]) -> None:
    unknown = sorted(set(names) - {*CATEGORICAL_FEATURES, *NUMERIC_FEATURES})
    if unknown:
        raise InvalidParameterError(f"drift_ignore_features: no feature named {', '.join(unknown)}")


def check_retraining_run(parameters: Mapping[str, Any]) -> None:
    """The rules of a flights retraining run: those of a training run, a window that resolves,
    and valid drift thresholds and gate rule.

    Raises:
        InvalidParameterError: Naming every parameter at fault.
    """
    check_run(parameters)
    checks = (
        lambda: resolve_window(
            parameters["window_start"],
            parameters["window_end"],
            parameters["window_days"],
            parameters["window_lag_days"],
        ),
        lambda: DriftThresholds(parameters["drift_max_psi"], parameters["drift_max_label_rate_shift"]),
        lambda: _known_features(feature_names(parameters["drift_ignore_features"])),
        lambda: GateRule(parameters["gate_metric"], parameters["gate_margin"]),
    )
    problems = []
    for check in checks:
        try:
            check()
        except InvalidParameterError as err:
            problems.append(str(err))
    if problems:
        raise InvalidParameterError("; ".join(problems))


@dataclasses.dataclass(frozen=True)
class CanaryReplay(Settings):
    """How much of the feature job's labelled holdout a canary analysis replays, and in what
    batches (each batch is one request to each side)."""

    concern = "canary analysis"

    records: int = setting(2000, ge=1, parameter="canary_records")
    batch_size: int = setting(20, ge=1, le=DEFAULT_MAX_BATCH, parameter="canary_batch_size")
