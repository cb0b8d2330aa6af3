"""flights-retraining: a new window of data -> drift check against the production model ->
(drifted) tune, train, evaluate -> champion/challenger gate -> (better) canary deployment.

Meant to run on a schedule (``kfstack schedule flights-retraining --cron ...``): each run reads
a new window of flights (``window_days`` back from its scheduled time, or an explicit
``window_start``/``window_end``), profiles it on the production model's histogram edges and
compares it with the data that model was trained on. Only when it drifted (or ``force``, or
nothing is in production) does it train; only a model that beats production on the new
window's holdout by ``gate_margin`` goes on to the canary, which is analysed and then promoted
or rolled back as in ``flights-training``: the same declaration (:data:`FLIGHTS`) with
:class:`~kfstack.api.pipeline.Retraining`. ``synthetic_drift`` changes a share of the window on
purpose, to see the retraining branch on the bundled data. A drift alert's receiver
(``kfstack alert-receiver``) starts it between schedules with ``force=true`` and a ``trigger``
saying why, which the drift report records (docs/retraining.md, "From a drift alert").
"""

import dataclasses

from kfstack.api.pipeline import Retraining
from kfstack_examples.flights.feature_spec import DRIFT_PROFILE_FILE, PROFILE_FILE
from kfstack_examples.flights.pipelines import parameters
from kfstack_examples.flights.pipelines.training import FLIGHTS
from kfstack_examples.flights.scoring import MODEL_DIR_FILES

FLIGHTS_RETRAINING = dataclasses.replace(
    FLIGHTS,
    name="flights-retraining",
    description=(
        "Drift-gated retraining of the flight delay classifier: a new window of flights, a drift "
        "check (PSI per feature, label rate) against the production model's training data, and "
        "only when it drifted: tuning, training, evaluation, a champion/challenger gate on the new "
        "window, and a KServe canary analysed, then promoted or rolled back."
    ),
    summary="Retrains the flight delay classifier when the new window drifted; promotes only a better model.",
    retraining=Retraining(
        profile_file=DRIFT_PROFILE_FILE,
        # A flights model directory with the profile of its training data: the drift check's
        # reference, the gate's champion.
        comparable_files=[*MODEL_DIR_FILES, PROFILE_FILE],
        training_pipeline=FLIGHTS.name,
    ),
    defaults={**FLIGHTS.defaults, **parameters.RETRAINING_DEFAULTS},
    descriptions={**FLIGHTS.descriptions, **parameters.RETRAINING_DESCRIPTIONS},
)
flights_retraining = FLIGHTS_RETRAINING.pipeline()
