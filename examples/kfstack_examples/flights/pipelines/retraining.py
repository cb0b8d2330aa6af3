"""flights-retraining: a new window of data -> drift check against the production model ->
(drifted) tune, train, evaluate -> champion/challenger gate -> (better) canary deployment.

Meant to run on a schedule (``kfstack schedule flights-retraining --cron ...``): each run reads
a new window of flights (``window_days`` back from its scheduled time, or an explicit
``window_start``/``window_end``), profiles it on the production model's histogram edges and
compares it with the data that model was trained on. Only when it drifted (or ``force``, or
nothing is in production) does it train; only a model that beats production on the new
window's holdout by ``gate_margin`` goes on to the canary, which is analysed and then promoted
or rolled back as in ``flights-training`` (the same steps: :mod:`kfstack_examples.flights.pipelines.steps`).
``synthetic_drift`` changes a share of the window on purpose, to see the retraining branch on
the bundled data. A drift alert's receiver (``kfstack alert-receiver``) starts it between
schedules with ``force=true`` and a ``trigger`` saying why, which the drift report records
(docs/retraining.md, "From a drift alert").
"""

from kfp import dsl

from kfstack.api.pipeline import PASS, data_drift, data_window
from kfstack_examples.flights.feature_spec import DRIFT_PROFILE_FILE
from kfstack_examples.flights.pipelines import steps
from kfstack_examples.flights.pipelines.parameters import RETRAINING

PIPELINE_NAME = "flights-retraining"


@dsl.pipeline(
    name=PIPELINE_NAME,
    description=(
        "Drift-gated retraining of the flight delay classifier: a new window of flights, a drift "
        "check (PSI per feature, label rate) against the production model's training data, and "
        "only when it drifted: tuning, training, evaluation, a champion/challenger gate on the new "
        "window, and a KServe canary analysed, then promoted or rolled back."
    ),
)
@RETRAINING.pipeline(
    "Retrains the flight delay classifier when the new window drifted; promotes only a better model."
)
def flights_retraining(parameters: dict) -> None:
    with steps.guarded(PIPELINE_NAME, parameters) as checked:
        window = steps.call(
            data_window,
            parameters,
            scheduled_time=dsl.PIPELINE_JOB_SCHEDULE_TIME_UTC_PLACEHOLDER,
            created_time=dsl.PIPELINE_JOB_CREATE_TIME_UTC_PLACEHOLDER,
        ).after(checked)
        steps.on_cluster(steps.uncached(window), parameters, "data-window")
        champion = steps.production(parameters).after(checked)
        # The new window, profiled on the champion's histogram edges: like is compared with like.
        # Never cached: a window relative to the run's time is new data under the same arguments.
        features = steps.features(
            parameters,
            window_start=window.outputs["start"],
            window_end=window.outputs["end"],
            reference_profile_uri=champion.outputs["profile_uri"],
        )
        steps.uncached(features)
        # The generic drift check against the production model, on the profile the feature job
        # computed over the whole window on the champion's edges.
        drift = steps.call(
            data_drift,
            parameters,
            reference=champion.outputs["model"],
            current=features.outputs["output"],
            current_profile_file=DRIFT_PROFILE_FILE,
        )
        steps.on_cluster(drift, parameters, "drift-check")
        with dsl.If(drift.outputs["Output"] == True, name="drifted"):  # noqa: E712 (a KFP condition)
            training, evaluation = steps.train_and_evaluate(parameters, features)
            gate = steps.gate(parameters, training, champion, features).after(evaluation)
            with dsl.If(gate.outputs["Output"] == PASS, name="beats-production"):
                deployment = steps.deploy(parameters, training, features)
                steps.register(parameters, training, deployment)
