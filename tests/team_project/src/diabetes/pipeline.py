"""diabetes-training: the team's page. Its code stays as the team wrote it: the PySpark step takes
``--input/--output``, the trainer parses its own dash-style options from argv and takes its
locations as keyword-only arguments, the model server is a plain ``kserve.Model``.

The trainer has no signature kfstack can read its hyperparameters from (argparse holds them), so
each is declared here, once, with its range and what tuning searches.
"""

from kfstack.api.pipeline import (
    Evaluation,
    Parameter,
    Predictor,
    SparkApplication,
    Training,
    TrainingPipeline,
    Tuning,
)

DIABETES = TrainingPipeline(
    name="diabetes-training",
    description="Diabetes progression: PySpark split, PyTorch DDP regressor tuned by Katib, KServe canary.",
    data=SparkApplication(
        "diabetes.prepare", arguments=["--input=$KFSTACK_INPUT_URI", "--output=$KFSTACK_OUTPUT_URI"]
    ),
    training=Training(
        "diabetes.train:main",
        metrics=("val_rmse", "val_loss"),
        model_format="custom",
        option_style="dashes",
        arguments={"data_dir": "$KFSTACK_INPUT_DIR", "model_dir": "$KFSTACK_MODEL_DIR"},
        hyperparameters=[
            Parameter("hidden_units", int, 32, "Width of the hidden layer.", ge=1, search=(8, 64)),
            Parameter(
                "dropout", float, 0.1, "Dropout after the hidden layer.", ge=0.0, lt=1.0, search=(0.0, 0.3)
            ),
            Parameter("learning_rate", float, 0.01, "Adam's step size.", gt=0.0, search=(0.003, 0.03)),
            Parameter("epochs", int, 40, "Epochs of the final training.", ge=1),
        ],
    ),
    tuning=Tuning(objective="val_rmse", direction="minimize"),
    evaluation=Evaluation(label="target", task="regression"),
    predictor=Predictor(
        "diabetes.predictor:DiabetesRegressor", runtime="diabetes-predictor", runtime_model_format="diabetes"
    ),
    defaults={"serving_name": "diabetes", "gpu_pool": "cpu", "tuning_trial_epochs": 10},
)
diabetes_training = DIABETES.pipeline()
