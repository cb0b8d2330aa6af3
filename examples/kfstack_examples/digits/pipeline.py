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

from kfstack.api.pipeline import Evaluation, Parameter, SparkApplication, Training, TrainingPipeline, Tuning

DIGITS = TrainingPipeline(
    name="digits-training",
    description="Handwritten digits: a PySpark job splits, Katib tunes, Keras trains, Triton serves.",
    data=SparkApplication(
        "kfstack_examples.digits.prepare",
        arguments=["--sample-percent={sample_percent}"],
        task_name="spark-digits",
    ),
    parameters=[Parameter("sample_percent", int, 100, "Share of the images kept.", ge=1, le=100)],
    training=Training(
        # Its signature declares each hyperparameter's type, default and description; the ranges
        # (checked before the run's first step) and the tuning ranges are here, by name.
        "kfstack_examples.digits.trainer:train",
        metrics=("val_accuracy", "val_loss"),
        framework="tensorflow",
        hyperparameters=[
            Parameter("hidden_units", ge=1, le=4096, search=(16, 128)),
            Parameter("dropout", ge=0.0, lt=1.0, search=(0.0, 0.4)),
            Parameter("activation", search=True),
            Parameter("epochs", ge=1),
            Parameter("batch_size", ge=1),
            Parameter("learning_rate", gt=0.0),
        ],
    ),
    tuning=Tuning(objective="val_accuracy"),
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
