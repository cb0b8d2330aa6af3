"""What the flights pipelines' steps need besides their declaration
(:mod:`kfstack_examples.flights.pipelines.training`): the rules of a run across its stages, and
the flights trainers as the generic training step runs them, for callers outside a pipeline
(benchmarks, tests).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kfstack.api import InvalidParameterError
from kfstack.api.pipeline import (
    AUTO,
    DriftThresholds,
    GateRule,
    RegistryEndpoint,
    TuningSettings,
    feature_names,
    resolve_window,
)
from kfstack.api.pipeline import train_locally as train_code_locally
from kfstack.api.stages import settings_from_arguments
from kfstack.api.training import JobTopology
from kfstack_examples.flights.features import CATEGORICAL_FEATURES, NUMERIC_FEATURES
from kfstack_examples.flights.features_job.config import PIPELINE_NAMES, FeatureJobConfig
from kfstack_examples.flights.settings import REPLAY_PARAMETERS, CanaryReplay
from kfstack_examples.flights.training.settings import TRAINER_CODE, TrainingSettings

# The flights trainers as the generic training and tuning steps run a team's code: declared as
# data (TRAINER_CODE).
TRAINING_CODE = {
    "training_code": TRAINER_CODE.entry,
    "hyperparameter_types": dict(TRAINER_CODE.hyperparameters),
    "metric_names": list(TRAINER_CODE.metrics),
    "model_format": "custom",
}


def train_locally(
    training: TrainingSettings,
    *,
    features_uri: str,
    model_uri: str,
    logs_uri: str,
    training_api: str = AUTO,
    threads_per_worker: int | None = None,
    on_group_started: Callable[..., None] | None = None,
) -> tuple[dict[str, float], dict]:
    """The flights training step as these pipelines run it embedded -- the generic step with the
    flights trainers -- for callers outside a pipeline (benchmarks, tests); returns the step's
    metrics and reference."""
    return train_code_locally(
        TRAINER_CODE,
        {name: getattr(training, name) for name in TRAINER_CODE.hyperparameters},
        data_uri=features_uri,
        model_uri=model_uri,
        logs_uri=logs_uri,
        topology=JobTopology.from_arguments(training.arguments()),
        training_api=training_api,
        threads_per_worker=threads_per_worker,
        on_group_started=on_group_started,
    )


def check_run(parameters: Mapping[str, Any]) -> None:
    """The rules of a flights training run beyond each stage's own: the feature job's options
    (a Spark application's argv, which the generic Spark step cannot read), the trainers'
    hyperparameters (their own rules, which the generic step cannot know), and every training
    rank reads a shard.

    Raises:
        InvalidParameterError: A bad feature job option or hyperparameter, or ``num_shards`` <
            ``workers``.
    """
    # The feature job's options (it runs as a Spark application, which checks them again): the
    # same config its driver parses, with stand-ins for the locations the step gives it.
    FeatureJobConfig.from_arguments(
        parameters, PIPELINE_NAMES, output_uri="(the step's output)", quarantine_uri="(its quarantine)"
    )
    # The canary's batches are requests to the flights predictor, which takes at most
    # DEFAULT_MAX_BATCH records: a larger batch fails here, not as a canary of errors.
    CanaryReplay.from_arguments(parameters, REPLAY_PARAMETERS)
    # The trainers' hyperparameters and job shape (batch_size >= workers: the global batch is
    # split over the replicas), which the generic step checks only for type and shell safety.
    TrainingSettings.from_arguments(parameters)
    if "tuning_search_space" in parameters and "tuning_objective" in parameters:
        # The tuning spec against the trainers' declaration with their metrics' ranges (an AUC
        # goal above 1 is refused), which the generic step's declaration does not carry.
        tuning = settings_from_arguments(TuningSettings, parameters, code=TRAINER_CODE)
        if parameters.get("tune", True) and any(p.name == "framework" for p in tuning.parameters):
            raise InvalidParameterError(
                "tuning_search_space: framework is not tuned: it decides the job (a PyTorchJob or a "
                "TFJob), so a trial would run one framework's trainer in the other's job"
            )
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
        lambda: settings_from_arguments(DriftThresholds, parameters, ignored_features=()),
        lambda: _known_features(feature_names(parameters["drift_ignore_features"])),
        lambda: settings_from_arguments(GateRule, parameters),
    )
    problems = []
    for check in checks:
        try:
            check()
        except InvalidParameterError as err:
            problems.append(str(err))
    if problems:
        raise InvalidParameterError("; ".join(problems))
