"""digits-training: a team's Spark job -> a team's TensorFlow code, tuned by Katib -> evaluation
-> deployment of an ONNX model served as Triton serves it.

The second example, declared on kfstack's public API as a team's own pipeline would be, and
different from the first on every seam: image data (the 8×8 digits scikit-learn ships), a PySpark
application run as ``spark-submit`` runs it (:mod:`kfstack_examples.digits.prepare`), Keras code
under ``MultiWorkerMirroredStrategy`` (:mod:`kfstack_examples.digits.trainer`), tuning over
declared hyperparameters that are not the learning rate or the batch size, multiclass evaluation
(accuracy, macro-F1), and the ``onnx`` format on KServe's Triton runtime (no custom predictor).
Run it embedded with ``kfstack run --local digits-training``.
"""

from kfstack.api.pipeline import (
    PER_RUN,
    Evaluation,
    Hyperparameter,
    Parameter,
    SparkApplication,
    Training,
    TrainingPipeline,
    Tuning,
)
from kfstack_examples.digits.trainer import HYPERPARAMETERS, METRICS

DIGITS = TrainingPipeline(
    name="digits-training",
    description="Handwritten digits: a PySpark job splits, Katib tunes, Keras trains, Triton serves.",
    data=SparkApplication(
        "kfstack_examples.digits.prepare",
        arguments=["--sample-percent={sample_percent}"],
        task_name="spark-digits",
    ),
    parameters=[
        Parameter("sample_percent", int, 100, "Share of the images kept.", PER_RUN, {"ge": 1, "le": 100})
    ],
    training=Training(
        "kfstack_examples.digits.trainer:train",
        declared=HYPERPARAMETERS,
        metrics=METRICS,
        framework="tensorflow",
        hyperparameters=[
            # Ranges checked before the run's first step: a bad value never waits for the Spark job.
            Hyperparameter(
                "hidden_units",
                64,
                "The MLP's hidden layer width (tuning's when ``tune``).",
                {"ge": 1, "le": 4096},
            ),
            Hyperparameter(
                "dropout",
                0.1,
                "Dropout after the hidden layer (0-1; tuning's when ``tune``).",
                {"ge": 0.0, "lt": 1.0},
            ),
            Hyperparameter(
                "activation",
                "relu",
                "``relu`` or ``tanh`` (tuning's when ``tune``).",
                {"choices": ("relu", "tanh")},
            ),
            Hyperparameter("epochs", 10, "Epochs of the final training.", {"ge": 1}),
        ],
    ),
    tuning=Tuning(
        search_space={
            "hidden_units": {"type": "int", "min": 16, "max": 128},
            "dropout": {"type": "double", "min": 0.0, "max": 0.4},
            "activation": {"type": "categorical", "values": ["relu", "tanh"]},
        },
        objective="val_accuracy",
    ),
    evaluation=Evaluation(label="digit", task="multiclass"),
    defaults={
        "workers": 2,
        "max_restarts": 2,
        "tuning_algorithm": "random",
        "tuning_algorithm_settings": '{"random_state": 7}',
        "tuning_max_trials": 8,
        "tuning_parallel_trials": 2,
        "tuning_trial_epochs": 4,
        "serving_name": "digits",
        "canary_max_quality_drop": 0.02,
    },
)
digits_training = DIGITS.pipeline()
