"""A team's training pipeline, declared as data: this Spark application, this training code with
these hyperparameters and this search space, this evaluation, this model served as this service.
The pipeline, its parameters and its run form follow from the declaration.

:class:`TrainingPipeline` wires kfstack's components the one way a training pipeline runs
them -- the run's frame (every parameter checked first, the cleanup exit handler), the data step,
tuning (Katib's semantics; skipped at run time with ``tune=false``), the final training on the
tuned values, the evaluation of the model as it serves, and its deployment, first at 100% and later
as an analysed canary -- and declares its parameters: the pipeline's own (the hyperparameters a
person sets per run, and any other), and every setting of the components it runs, from the
catalog (:data:`kfstack.pipelines.parameters.CATALOG`) with the pipeline's own defaults.

A pipeline of another shape is a plain ``@dsl.pipeline`` over the same components and wiring
helpers (docs/pipelines.md, "A pipeline of another shape").
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import string
from collections.abc import Mapping, Sequence
from typing import Any

from kfp import dsl

from kfstack.components.data.spark_job.component import spark_job
from kfstack.components.evaluation.model_evaluation.component import model_evaluation
from kfstack.components.serving.model_deployment.component import model_deployment
from kfstack.components.training.distributed_training.component import distributed_training
from kfstack.components.tuning.hyperparameter_tuning.component import hyperparameter_tuning
from kfstack.errors import InvalidParameterError
from kfstack.pipelines.parameters import CATALOG, PER_RUN, Parameter, ParameterSet
from kfstack.pipelines.wiring import (
    FRAME_PARAMETERS,
    RUN_ID,
    TASK_NAME,
    call,
    guarded,
    joins_mesh,
    on_cluster,
    run_overrides,
    uncached,
)

# A hyperparameter's declared kind (kfstack.contracts: int, float, str, bool) as a parameter type.
_TYPES: dict[str, builtins.type] = {"int": int, "float": float, "str": str, "bool": bool}


@dataclasses.dataclass(frozen=True)
class SparkApplication:
    """The data step: a team's PySpark application, run as ``spark-submit`` runs it.

    Attributes:
        application: Its module (``package.module``, run as ``python -m``) or file.
        arguments: Its argv; ``{name}`` in an argument is the value of the pipeline parameter
            ``name`` (``--sample-percent={sample_percent}``).
        task_name: The step's name in the Kubeflow UI.
    """

    application: str
    arguments: Sequence[str] = ()
    task_name: str = "spark-job"


@dataclasses.dataclass(frozen=True)
class Hyperparameter:
    """A hyperparameter a person sets per run (and tuning may choose): a pipeline parameter of the
    type the training code declares for it.

    Attributes:
        name: As the training code declares it.
        default: Its value when a run does not set it.
        description: What the run form shows for it.
        bounds: Its range (``ge``, ``gt``, ``le``, ``lt``, ``choices``), checked before a run.
    """

    name: str
    default: Any
    description: str
    bounds: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Training:
    """The training step: a team's training code, as it declares itself.

    Attributes:
        code: ``package.module:function`` (called with the hyperparameters as keyword
            arguments) or ``package.module`` (run as ``python -m`` with ``--name=value``).
        declared: Every hyperparameter the code takes -> its kind (``int``, ``float``, ``str``,
            ``bool``), as the code declares them.
        metrics: The metrics the code prints as ``name=value`` lines.
        hyperparameters: Those a person sets per run, each a parameter of the pipeline; the code
            takes its own defaults for the rest.
        framework: ``pytorch`` or ``tensorflow``.
        model_format: What the code writes: ``onnx``, ``sklearn``, ``xgboost``, ``lightgbm`` or
            ``custom``.
        task_name: The step's name in the Kubeflow UI.
    """

    code: str
    declared: Mapping[str, str]
    metrics: Sequence[str]
    hyperparameters: Sequence[Hyperparameter]
    framework: str = "pytorch"
    model_format: str = "onnx"
    task_name: str = "training"


@dataclasses.dataclass(frozen=True)
class Tuning:
    """Tuning before the final training, with Katib's semantics.

    Attributes:
        search_space: Hyperparameter -> its space (``{"type": "int", "min": 8, "max": 64}``,
            ``double``, ``categorical`` with ``values``): the default of ``tuning_search_space``.
        objective: The metric that decides, one of the training code's metrics.
        direction: ``maximize`` or ``minimize``.
        task_name: The step's name in the Kubeflow UI.
    """

    search_space: Mapping[str, Mapping[str, Any]]
    objective: str
    direction: str = "maximize"
    task_name: str = "tuning"


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """The evaluation of the trained model, scored through the server that will serve it, and the
    labelled rows a canary replays.

    Attributes:
        label: The label column of the data step's output.
        task: ``binary``, ``multiclass`` or ``regression``.
        split: The data step's split (a folder of its output) evaluated and replayed.
        task_name: The evaluation step's name in the Kubeflow UI.
    """

    label: str
    task: str
    split: str = "test"
    task_name: str = "evaluation"


@dataclasses.dataclass(frozen=True)
class TrainingPipeline:
    """A training pipeline, declared: what :meth:`pipeline` wires, with which parameters.

    Attributes:
        name: The pipeline's name (``kfstack list``; kebab-case).
        description: What it does, as KFP and the Kubeflow UI show it.
        data: The data step.
        training: The training step.
        evaluation: The evaluation (and the canary's holdout).
        tuning: Tuning before training; None: none (training takes the run's values).
        deploy: Deploy the evaluated model (the ``deploy`` parameter can still skip it per run).
        parameters: The pipeline's own parameters besides the hyperparameters (a data step's
            option the application reads from its arguments).
        defaults: Catalog parameter -> this pipeline's default (``{"workers": 2}``).
        descriptions: Catalog parameter -> this pipeline's wording of it.
        summary: The first line of the pipeline function's docstring.
    """

    name: str
    description: str
    data: SparkApplication
    training: Training
    evaluation: Evaluation
    tuning: Tuning | None = None
    deploy: bool = True
    parameters: Sequence[Parameter] = ()
    defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    descriptions: Mapping[str, str] = dataclasses.field(default_factory=dict)
    summary: str = "Prepares the data, trains, evaluates and deploys the model."

    def __post_init__(self) -> None:
        problems = []
        undeclared = [h.name for h in self.training.hyperparameters if h.name not in self.training.declared]
        if undeclared:
            problems.append(f"hyperparameters not declared by {self.training.code}: {', '.join(undeclared)}")
        catalog = set(self.catalog_names())
        unknown = sorted({*self.defaults, *self.descriptions} - catalog)
        if unknown:
            problems.append(
                f"defaults or descriptions for settings this pipeline has not: {', '.join(unknown)}"
            )
        named = {
            field for argument in self.data.arguments for _, field, _, _ in string.Formatter().parse(argument)
        }
        own = {h.name for h in self.training.hyperparameters} | {p.name for p in self.parameters}
        missing = sorted(name for name in named if name and name not in own | catalog)
        if missing:
            problems.append(f"data arguments name no parameter of the pipeline: {', '.join(missing)}")
        if self.tuning and self.tuning.objective not in self.training.metrics:
            problems.append(f"tuning objective {self.tuning.objective} is not one of the metrics")
        if problems:
            raise InvalidParameterError(f"pipeline {self.name}: " + "; ".join(problems))

    # -- what the pipeline gives its steps, and so does not take as a parameter ----------------

    def training_arguments(self) -> dict[str, Any]:
        """The arguments of the training and tuning steps the declaration fixes."""
        return {
            "training_code": self.training.code,
            "hyperparameter_types": dict(self.training.declared),
            "metric_names": list(self.training.metrics),
            "model_format": self.training.model_format,
            "framework": self.training.framework,
        }

    def _labelled(self) -> dict[str, Any]:
        return {"label_column": self.evaluation.label, "task": self.evaluation.task}

    def _components(self) -> dict[Any, set[str]]:
        """Each component the pipeline runs -> the inputs it gives that component itself."""
        job = {"run_id", "task_name"}
        code = {*self.training_arguments(), "data", "hyperparameters"} | job
        steps = {
            spark_job: {"spark_application", "spark_arguments"} | job,
            distributed_training: code | {"pipeline"},
            # A threshold means something to a binary classifier only.
            model_evaluation: {"model", "dataset", "dataset_split", *self._labelled()}
            | (set() if self.evaluation.task == "binary" else {"decision_threshold"}),
        }
        if self.tuning:
            steps[hyperparameter_tuning] = code | {"tuning_objective", "tuning_direction"}
        if self.deploy:
            steps[model_deployment] = {
                "model",
                "holdout",
                "holdout_split",
                "model_format",
                *self._labelled(),
            } | job
        return steps

    def catalog_names(self) -> list[str]:
        """The catalog's parameters this pipeline takes: every input of its components that the
        pipeline does not give itself, and the run's frame's."""
        taken = set(FRAME_PARAMETERS)
        for component, given in self._components().items():
            taken |= set(component.component_spec.inputs or {}) - given
        if self.tuning is None:
            taken.discard("tune")
        return [name for name in CATALOG.names if name in taken]

    def parameter_set(self) -> ParameterSet:
        """Every parameter of the pipeline: its hyperparameters and own parameters, then the
        catalog's it takes, with its defaults and wording."""
        own = [
            Parameter(
                h.name, _TYPES[self.training.declared[h.name]], h.default, h.description, PER_RUN, h.bounds
            )
            for h in self.training.hyperparameters
        ]
        defaults = dict(self.defaults)
        if self.tuning:
            defaults.setdefault("tuning_search_space", json.dumps(dict(self.tuning.search_space)))
        changes: dict[str, dict[str, Any]] = {}
        for name, value in defaults.items():
            changes.setdefault(name, {})["default"] = value
        for name, text in self.descriptions.items():
            changes.setdefault(name, {})["description"] = text
        return ParameterSet([*own, *self.parameters, *CATALOG.take(*self.catalog_names(), **changes)])

    # -- the pipeline -------------------------------------------------------------------------

    def pipeline(self) -> Any:
        """The ``@dsl.pipeline`` function: what ``kfstack compile`` compiles and a
        :class:`~kfstack.pipelines.PipelineEntry` names."""
        parameters = self.parameter_set()

        @dsl.pipeline(name=self.name, description=self.description)
        @parameters.pipeline(self.summary)
        def declared_pipeline(values: dict) -> None:
            self._wire(values)

        return declared_pipeline

    def _wire(self, values: Mapping[str, Any]) -> None:
        job = {"run_id": RUN_ID, "task_name": TASK_NAME}
        with guarded(self.name, values) as checked:
            arguments = [argument.format(**values) for argument in self.data.arguments]
            data_task = call(
                spark_job, values, **job, spark_application=self.data.application, spark_arguments=arguments
            )
            data_task = on_cluster(data_task.after(checked), values, self.data.task_name)
            data = data_task.outputs["output"]
            chosen = {h.name: values[h.name] for h in self.training.hyperparameters}
            code = {**job, **self.training_arguments(), "data": data}
            hyperparameters: Any = chosen
            if self.tuning:
                tuning = call(
                    hyperparameter_tuning,
                    values,
                    **code,
                    hyperparameters=chosen,
                    tuning_objective=self.tuning.objective,
                    tuning_direction=self.tuning.direction,
                )
                tuning = on_cluster(tuning, values, self.tuning.task_name)
                hyperparameters = tuning.outputs["best_hyperparameters"]
            training = call(
                distributed_training, values, **code, hyperparameters=hyperparameters, pipeline=self.name
            )
            model = on_cluster(training, values, self.training.task_name).outputs["model"]
            split = self.evaluation.split
            labelled = self._labelled()
            # Given, not called with the parameters: a hyperparameter may share a name with one of
            # the evaluation's own inputs (batch_size), which are not the run's; its settings are.
            settings = (
                {"decision_threshold": values["decision_threshold"]} if "decision_threshold" in values else {}
            )
            evaluation = model_evaluation(
                model=model,
                dataset=data,
                dataset_split=split,
                **labelled,
                **settings,
                **run_overrides(values),
            )
            evaluation = on_cluster(evaluation, values, self.evaluation.task_name)
            if not self.deploy:
                return
            deployment = call(
                model_deployment,
                values,
                **job,
                **labelled,
                model=model,
                holdout=data,
                holdout_split=split,
                model_format=self.training.model_format,
            )
            joins_mesh(on_cluster(uncached(deployment.after(evaluation)), values, "deployment"))
