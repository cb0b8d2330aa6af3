"""digits-training: a team's Spark job -> a team's TensorFlow code, tuned by Katib -> evaluation
-> deployment of an ONNX model served as Triton serves it.

The second example, built on the public components only -- exactly as a team's own pipeline
would be -- and different from the first on every seam: image data (the 8×8 digits scikit-learn
ships), a PySpark application run as ``spark-submit`` runs it
(:mod:`kfstack_examples.digits.prepare`), Keras code under ``MultiWorkerMirroredStrategy``
(:mod:`kfstack_examples.digits.trainer`), tuning over declared hyperparameters that are not the
learning rate or the batch size, multiclass evaluation (accuracy, macro-F1), and the ``onnx``
format on KServe's Triton runtime (no custom predictor). Run it embedded with
``kfstack run --local digits-training``.
"""

from kfp import dsl

from kfstack.api.pipeline import (
    CATALOG,
    PER_RUN,
    RUN_ID,
    TASK_NAME,
    Parameter,
    ParameterSet,
    call,
    distributed_training,
    guarded,
    hyperparameter_tuning,
    joins_mesh,
    model_deployment,
    model_evaluation,
    on_cluster,
    spark_job,
    uncached,
)
from kfstack_examples.digits.trainer import HYPERPARAMETERS, METRICS

PIPELINE_NAME = "digits-training"
# What the trainer declares, as data: the tuning and training steps check against it.
TRAINING_CODE = {
    "training_code": "kfstack_examples.digits.trainer:train",
    "hyperparameter_types": HYPERPARAMETERS,
    "metric_names": list(METRICS),
    "model_format": "onnx",
}
SPARK_APPLICATION = "kfstack_examples.digits.prepare"
LABEL = "digit"
SEARCH_SPACE = (
    '{"hidden_units": {"type": "int", "min": 16, "max": 128}, '
    '"dropout": {"type": "double", "min": 0.0, "max": 0.4}, '
    '"activation": {"type": "categorical", "values": ["relu", "tanh"]}}'
)


# The parameters: kfstack's components' from the catalog, with the digits defaults and wording,
# and the trainer's own hyperparameters (what its declaration says it takes).
PARAMETERS = ParameterSet(
    [
        *CATALOG.take(
            "platform",
            "workers",
            "max_restarts",
            platform={
                "description": "``kubernetes`` (SparkApplication, Katib Experiment, TFJob, "
                "InferenceService) or ``local`` (the same steps on this machine; ``kfstack run "
                "--local`` sets it)."
            },
            workers={"default": 2, "description": "TensorFlow workers (MultiWorkerMirroredStrategy)."},
            max_restarts={
                "default": 2,
                "description": "Restarts from the latest checkpoint after a worker fails.",
            },
        ),
        Parameter(
            "sample_percent",
            int,
            100,
            "Share of the 1,797 images kept (1-100), by a seeded hash.",
            PER_RUN,
            {"ge": 1, "le": 100},
        ),
        Parameter("epochs", int, 10, "Epochs of the final training.", PER_RUN, {"ge": 1}),
        Parameter("hidden_units", int, 64, "The MLP's hidden layer width (tuning's when ``tune``).", PER_RUN),
        Parameter(
            "dropout", float, 0.1, "Dropout after the hidden layer (0-1; tuning's when ``tune``).", PER_RUN
        ),
        Parameter("activation", str, "relu", "``relu`` or ``tanh`` (tuning's when ``tune``).", PER_RUN),
        *CATALOG.take(
            "tune",
            "tuning_algorithm",
            "tuning_algorithm_settings",
            "tuning_search_space",
            "tuning_max_trials",
            "tuning_parallel_trials",
            "tuning_trial_epochs",
            "tuning_early_stopping",
            "tuning_min_trials_required",
            "tuning_start_step",
            "deploy",
            "serving_name",
            "serving_mode",
            "canary_max_quality_drop",
            "canary_max_psi",
            "gpu_pool",
            "training_api",
            "object_store_secret",
            "istio_mesh",
            "launch_namespace",
            tune={
                "description": "Tune ``hidden_units``, ``dropout`` and ``activation`` first (Katib's "
                "semantics)."
            },
            tuning_algorithm={
                "default": "random",
                "description": "Katib algorithm (random, tpe, grid, ...).",
            },
            tuning_algorithm_settings={
                "default": '{"random_state": 7}',
                "description": "JSON of the algorithm's settings.",
            },
            tuning_search_space={
                "default": SEARCH_SPACE,
                "description": "JSON search space over the trainer's declared hyperparameters.",
            },
            tuning_max_trials={"default": 8, "description": "Trials in all."},
            tuning_parallel_trials={"default": 2, "description": "Trials at once."},
            tuning_trial_epochs={"default": 4, "description": "Epochs per trial."},
            tuning_early_stopping={"description": "``medianstop`` or ``none``."},
            tuning_min_trials_required={"description": "medianstop: succeeded trials before any is stopped."},
            tuning_start_step={"description": "medianstop: the epoch at which a trial is judged."},
            deploy={"description": "Deploy the model (first at 100%, later as a canary)."},
            serving_name={
                "default": "digits",
                "description": "The InferenceService (and Triton's model name).",
            },
            serving_mode={"description": "``serverless`` (Knative) or ``standard`` (RawDeployment)."},
            canary_max_quality_drop={
                "default": 0.02,
                "description": "Roll back when the canary's accuracy is lower by more.",
            },
            canary_max_psi={"description": "Roll back above this shift of the predicted classes' shares."},
            gpu_pool={"description": "Node-pool profile of the training and trial workers."},
            training_api={"description": "``auto`` or ``v1`` (TensorFlow runs as a TFJob)."},
            object_store_secret={"description": "Secret with the object-store keys of the pods."},
        ),
    ]
)


@dsl.pipeline(
    name=PIPELINE_NAME,
    description=(
        "Handwritten digits (8x8, shipped with scikit-learn): a team's PySpark job splits and "
        "checks the images, Katib tunes a team's Keras MLP over its declared hyperparameters, "
        "TensorFlow MultiWorkerMirroredStrategy trains it, the ONNX model is evaluated "
        "(accuracy, macro-F1) and deployed on KServe's Triton runtime with canary analysis."
    ),
)
@PARAMETERS.pipeline("Trains, tunes, evaluates and deploys the digits classifier.")
def digits_training(parameters: dict) -> None:
    with guarded(PIPELINE_NAME, parameters) as checked:
        job = {"run_id": RUN_ID, "task_name": TASK_NAME}
        data = call(
            spark_job,
            parameters,
            **job,
            spark_application=SPARK_APPLICATION,
            spark_arguments=[f"--sample-percent={parameters['sample_percent']}"],
        )
        data = on_cluster(data.after(checked), parameters, "spark-digits")
        chosen = {name: parameters[name] for name in ("hidden_units", "dropout", "activation", "epochs")}
        common = {**job, **TRAINING_CODE, "data": data.outputs["output"], "framework": "tensorflow"}
        tuning = call(
            hyperparameter_tuning,
            parameters,
            **common,
            hyperparameters=chosen,
            tuning_objective="val_accuracy",
            tuning_direction="maximize",
        )
        tuning = on_cluster(tuning, parameters, "tuning")
        training = call(
            distributed_training,
            parameters,
            **common,
            hyperparameters=tuning.outputs["best_hyperparameters"],
            pipeline=PIPELINE_NAME,
        )
        training = on_cluster(training, parameters, "training")
        holdout = {"label_column": LABEL, "task": "multiclass"}
        evaluation = model_evaluation(
            model=training.outputs["model"], dataset=data.outputs["output"], dataset_split="test", **holdout
        )
        evaluation = on_cluster(evaluation, parameters, "evaluation")
        deployment = call(
            model_deployment,
            parameters,
            **job,
            **holdout,
            model=training.outputs["model"],
            holdout=data.outputs["output"],
            holdout_split="test",
            model_format="onnx",
        )
        joins_mesh(on_cluster(uncached(deployment.after(evaluation)), parameters, "deployment"))
