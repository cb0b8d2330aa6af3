"""flights-training: Spark features -> distributed PyTorch or TensorFlow training -> evaluation
-> deployment.

Predicts whether a NYC 2013 flight arrives more than 15 minutes late (or not at all) from what
is known before departure. Compile with ``kfstack compile``; run embedded with
``kfstack run --local`` (sets ``platform=local``). The steps are wired in
:mod:`kfstack_examples.flights.pipelines.steps` (shared with ``flights-retraining``); the parameters are
declared in :mod:`kfstack_examples.flights.pipelines.parameters`, which writes this pipeline's
signature and docstring (each parameter's default is its settings class's own).
"""

from kfp import dsl

from kfstack_examples.flights.pipelines import steps
from kfstack_examples.flights.pipelines.parameters import TRAINING

PIPELINE_NAME = "flights-training"


@dsl.pipeline(
    name=PIPELINE_NAME,
    description=(
        "Flight delay classifier on the NYC 2013 flights data: Spark feature job with "
        "quarantine of bad rows, optional Katib tuning, distributed PyTorch (DDP) or TensorFlow "
        "training, ONNX export, evaluation on a held-out test split, and deployment to KServe: the "
        "first model at 100%, later ones as a canary analysed, then promoted or rolled back."
    ),
)
@TRAINING.pipeline("Trains, evaluates and deploys the flight delay classifier.")
def flights_training(parameters: dict) -> None:
    with steps.guarded(PIPELINE_NAME, parameters) as checked:
        features = steps.features(parameters).after(checked)
        training, evaluation = steps.train_and_evaluate(parameters, features)
        # Deployment comes after the evaluation (a model that failed to evaluate is never served).
        deployment = steps.deploy(parameters, training, features).after(evaluation)
        steps.register(parameters, training, deployment)
