"""flights-training: Spark features -> distributed PyTorch or TensorFlow training -> evaluation
-> deployment -> registration.

Predicts whether a NYC 2013 flight arrives more than 15 minutes late (or not at all) from what
is known before departure. Declared on kfstack's declarative layer (:data:`FLIGHTS`): the
flights feature job, the flights trainers (either framework, a run's choice), evaluation and
serving through the flights predictor (a custom ``kserve.Model``), registration of the ONNX graph
it serves. ``flights-retraining`` runs the same declaration on a schedule. Compile with
``kfstack compile``; run embedded with ``kfstack run --local``.
"""

from kfstack.api.pipeline import (
    BINARY,
    PRODUCTION_PROFILE,
    Evaluation,
    Predictor,
    Registration,
    SparkApplication,
    Training,
    TrainingPipeline,
    Tuning,
)
from kfstack_examples.flights import predictor
from kfstack_examples.flights.feature_spec import HOLDOUT_FILE, LABEL_COLUMN, TEST_REQUESTS_FILE
from kfstack_examples.flights.features import CLASS_NAMES
from kfstack_examples.flights.features_job.config import PIPELINE_OPTIONS, SPARK_CONF
from kfstack_examples.flights.pipelines import parameters
from kfstack_examples.flights.training.settings import OBJECTIVE, TRAINER_CODE

FLIGHTS = TrainingPipeline(
    name="flights-training",
    description=(
        "Flight delay classifier on the NYC 2013 flights data: Spark feature job with "
        "quarantine of bad rows, optional Katib tuning, distributed PyTorch (DDP) or TensorFlow "
        "training, ONNX export, evaluation on a held-out test split, and deployment to KServe: the "
        "first model at 100%, later ones as a canary analysed, then promoted or rolled back."
    ),
    summary="Trains, evaluates and deploys the flight delay classifier.",
    data=SparkApplication(
        "kfstack_examples.flights.features_job",
        arguments=[
            *(f"--{name.replace('_', '-')}={{{name}}}" for name in PIPELINE_OPTIONS),
            f"--reference-profile-uri={{{PRODUCTION_PROFILE}}}",
        ],
        conf=SPARK_CONF,
        input="data_uri",
        task_name="spark-features",
    ),
    training=Training(
        TRAINER_CODE.entry,
        metrics=TRAINER_CODE.metrics,
        hyperparameters=parameters.HYPERPARAMETERS,
        framework=None,  # the run's choice, and the trainers' hyperparameter
        model_format="custom",
    ),
    tuning=Tuning(objective=OBJECTIVE),
    evaluation=Evaluation(
        label=LABEL_COLUMN,
        task=BINARY,
        split=TEST_REQUESTS_FILE,
        holdout_split=HOLDOUT_FILE,
        class_names=CLASS_NAMES,
    ),
    predictor=Predictor(
        predictor.MODEL_CLASS,
        request_format="records",  # raw flight records, featurised by the predictor
        runtime=predictor.RUNTIME,
        runtime_model_format=predictor.MODEL_FORMAT,
    ),
    # The flights predictor serves an ONNX graph (its opset is read from it).
    registration=Registration(model_format="onnx"),
    parameters=parameters.OWN,
    defaults=parameters.DEFAULTS,
    descriptions=parameters.DESCRIPTIONS,
    renamed=parameters.RENAMED,
)
flights_training = FLIGHTS.pipeline()
