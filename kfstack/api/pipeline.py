"""For declaring a pipeline: kfstack's components, the pipeline's parameters (its own and the
components' catalog), the wiring of a run, and what a pipeline's run check builds.
Imports kfp; none of pyspark, a training framework or kserve.

The components take a team's own code by name (``spark_application``, ``training_code``,
``custom_predictor``) and give it both platforms. A training pipeline of the usual shape is
declared as data (:class:`TrainingPipeline`); one of another shape declares its parameters as a
:class:`ParameterSet` (its own :class:`Parameter`\\ s and the :data:`CATALOG`'s, taken by name)
and wires its steps inside :func:`guarded` (the run's frame: the parameters checked first, the
cleanup exit handler): :func:`call` gives a task every input that names a pipeline parameter,
:func:`on_cluster` its name and pod settings. A package registers its pipelines as
``kfstack.api.PipelineEntry`` values in the ``kfstack.pipelines`` entry-point group, and a launching
component of its own as a :class:`Stage` in ``kfstack.stages`` (docs/pipelines.md).
"""

from kfstack.api import _deprecated
from kfstack.components.common.cleanup_run.component import cleanup_run
from kfstack.components.data.data_window.component import data_window
from kfstack.components.data.spark_job.component import spark_job
from kfstack.components.evaluation.gate_model.component import gate_model
from kfstack.components.evaluation.model_evaluation.component import model_evaluation
from kfstack.components.monitoring.data_drift.component import data_drift
from kfstack.components.serving.model_deployment.component import model_deployment
from kfstack.components.serving.production_model.component import production_model
from kfstack.components.serving.register_model.component import register_model
from kfstack.components.training.distributed_training.component import distributed_training
from kfstack.components.training.distributed_training.stage import train_locally
from kfstack.components.tuning.hyperparameter_tuning.component import hyperparameter_tuning
from kfstack.evaluation.task_metrics import BINARY, MULTICLASS, REGRESSION
from kfstack.kubernetes.training_apis import AUTO
from kfstack.monitoring.drift import DriftThresholds, feature_names
from kfstack.monitoring.gate import PASS, GateRule
from kfstack.monitoring.window import resolve_window
from kfstack.pipelines.declared import (
    PRODUCTION_PROFILE,
    Evaluation,
    Predictor,
    Registration,
    Retraining,
    SparkApplication,
    Training,
    TrainingPipeline,
    Tuning,
)
from kfstack.pipelines.parameters import PER_RUN, Parameter
from kfstack.pipelines.wiring import (
    RUN_ID,
    TASK_NAME,
    call,
    guarded,
    joins_mesh,
    on_cluster,
    uncached,
)
from kfstack.serving.model_registry import RegistryEndpoint
from kfstack.tuning.spec import TuningSettings

__all__ = [
    "AUTO",
    "BINARY",
    "MULTICLASS",
    "PASS",
    "PER_RUN",
    "PRODUCTION_PROFILE",
    "REGRESSION",
    "RUN_ID",
    "TASK_NAME",
    "DriftThresholds",
    "Evaluation",
    "GateRule",
    "Parameter",
    "Predictor",
    "Registration",
    "RegistryEndpoint",
    "Retraining",
    "SparkApplication",
    "Training",
    "TrainingPipeline",
    "Tuning",
    "TuningSettings",
    "call",
    "cleanup_run",
    "data_drift",
    "data_window",
    "distributed_training",
    "feature_names",
    "gate_model",
    "guarded",
    "hyperparameter_tuning",
    "joins_mesh",
    "model_deployment",
    "model_evaluation",
    "on_cluster",
    "production_model",
    "register_model",
    "resolve_window",
    "spark_job",
    "train_locally",
    "uncached",
]

# Names this module no longer lists (0.1): answered with a DeprecationWarning until 0.2.
_STAGES = "kfstack.api.stages"
_INTERNAL = "internal: nothing replaces it in the API"
_PARAMETERS = "kfstack.pipelines.parameters"
__getattr__ = _deprecated.answering(
    __name__,
    {
        "Hyperparameter": (
            "kfstack.pipelines.declared",
            "declare it as a Parameter in Training(hyperparameters=...)",
        ),
        "from_setting": (
            "kfstack.pipelines.parameters",
            "Parameter(name, description=..., owner=SettingsClass)",
        ),
        "ParameterSet": (
            "kfstack.pipelines.parameters",
            "declare a TrainingPipeline, or a plain @dsl.pipeline",
        ),
        "CATALOG": (_PARAMETERS, "`kfstack describe` and docs/parameters.md list it"),
        "JobTopology": ("kfstack.training.settings", "kfstack.api.training.JobTopology"),
        "run_overrides": ("kfstack.pipelines.wiring", "call() gives a task its overrides"),
        "COMPONENT_IMAGE": ("kfstack.images", _INTERNAL),
        "JSON_PARAMETERS": ("kfstack.pipelines.wiring", _INTERNAL),
        "NAMESPACE_FIELD": ("kfstack.pipelines.wiring", _INTERNAL),
        "Cluster": ("kfstack.kubernetes.launcher", _INTERNAL),
        **{
            name: (home, f"{_STAGES}.{name}")
            for name, home in {
                "Stage": "kfstack.platforms",
                "ServiceStage": "kfstack.platforms",
                "StageResult": "kfstack.platforms",
                "Variant": "kfstack.platforms",
                "run_stage": "kfstack.platforms",
                "RunContext": "kfstack.kubernetes.naming",
                "Placement": "kfstack.kubernetes.placement",
            }.items()
        },
        "settings_from_arguments": ("kfstack.api.stages", f"{_STAGES}.settings_from_arguments"),
    },
)
