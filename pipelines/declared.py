"""A team's training pipeline, declared as data: this Spark application, this training code with
these hyperparameters and this search space, this evaluation, this model served as this service.
The pipeline, its parameters and its run form follow from the declaration.

:class:`TrainingPipeline` wires kfstack's components the one way a training pipeline runs
them -- the run's frame (every parameter checked first, the cleanup exit handler), the data step,
tuning (Katib's semantics; skipped at run time with ``tune=false``), the final training on the
tuned values, the evaluation of the model as it serves, its deployment, first at 100% and later
as an analysed canary, and its registration -- and declares its parameters: the pipeline's own
(the hyperparameters a person sets per run, and any other), and every setting of the components
it runs, from the catalog (:data:`kfstack.pipelines.parameters.CATALOG`) with the pipeline's own
defaults. With :class:`Retraining` the same steps retrain on a schedule: a new window of data, a
drift check against the production model, and only when it drifted the training, then a
champion/challenger gate before the canary.

A pipeline of another shape is a plain ``@dsl.pipeline`` over the same components and wiring
helpers (docs/pipelines.md, "A pipeline of another shape").
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import json
import string
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from kfp import dsl

from kfstack.components.data.data_window.component import data_window
from kfstack.components.data.spark_job.component import spark_job
from kfstack.components.evaluation.gate_model.component import gate_model
from kfstack.components.evaluation.model_evaluation.component import model_evaluation
from kfstack.components.monitoring.data_drift.component import data_drift
from kfstack.components.serving.model_deployment.component import model_deployment
from kfstack.components.serving.production_model.component import production_model
from kfstack.components.serving.register_model.component import register_model
from kfstack.components.training.distributed_training.component import distributed_training
from kfstack.components.tuning.hyperparameter_tuning.component import hyperparameter_tuning
from kfstack.contracts import OPTION_STYLES, UNDERSCORES
from kfstack.errors import InvalidParameterError
from kfstack.monitoring.gate import PASS
from kfstack.pipelines import code_signature
from kfstack.pipelines.parameters import CATALOG, FROM_CODE, PER_RUN, Parameter, ParameterSet
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
from kfstack.platforms import TRACKING_URI_ARGUMENT
from kfstack.settings import bound_problems

# A hyperparameter's declared kind (kfstack.contracts: int, float, str, bool) as a parameter type,
# and back.
_TYPES: dict[str, builtins.type] = {"int": int, "float": float, "str": str, "bool": bool}
_KINDS = {type_: kind for kind, type_ in _TYPES.items()}
# The hyperparameter a run's framework reaches the code as, when the declaration leaves it to the run.
FRAMEWORK = "framework"
# How a run form words the canary's quality check for each task (the check itself:
# kfstack.serving.canary.judge): the metric and its direction, and for an RMSE, on the label's
# scale, a share of the stable's rather than a difference.
QUALITY_WORDS = {
    "binary": "Roll back when the canary's AUC is lower than the stable's by more than this.",
    "multiclass": "Roll back when the canary's accuracy is lower than the stable's by more than this.",
    "regression": "Roll back when the canary's RMSE is higher than the stable's by more than this share "
    "of it (0.01: 1%).",
}
# What a data step's argument may name besides the pipeline's parameters: the production model's
# profile (its data step's statistics, for profiling new data on the same edges) in a retraining
# pipeline, empty in a training pipeline.
PRODUCTION_PROFILE = "production_profile"


@dataclasses.dataclass(frozen=True)
class SparkApplication:
    """The data step: a team's PySpark application, run as ``spark-submit`` runs it.

    Attributes:
        application: Its module (``package.module``, run as ``python -m``) or file.
        arguments: Its argv; ``{name}`` in an argument is the value of the pipeline parameter
            ``name`` (``--sample-percent={sample_percent}``), or of :data:`PRODUCTION_PROFILE`.
            In a retraining pipeline ``{window_start}`` and ``{window_end}`` are the run's
            window as resolved (from the run's time when the parameters leave them empty).
        conf: Spark settings the application needs whatever the run (``spark.sql.*``).
        input: The pipeline parameter whose value is the application's input location
            (``KFSTACK_INPUT_URI``).
        task_name: The step's name in the Kubeflow UI.
    """

    application: str
    arguments: Sequence[str] = ()
    conf: Mapping[str, str] = dataclasses.field(default_factory=dict)
    input: str = "input_uri"
    task_name: str = "spark-job"

    def named(self) -> set[str]:
        """The names its arguments' templates read."""
        return {
            field
            for argument in self.arguments
            for _, field, _, _ in string.Formatter().parse(argument)
            if field
        }


@dataclasses.dataclass(frozen=True)
class Hyperparameter:
    """Deprecated since 0.1: a :class:`~kfstack.pipelines.parameters.Parameter` in
    :attr:`Training.hyperparameters` (``Parameter("dropout", ge=0.0, lt=1.0)`` where the
    function's signature types it). Taken with a ``DeprecationWarning`` until 0.2.

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

    def __post_init__(self) -> None:
        warnings.warn(
            "kfstack.api.pipeline.Hyperparameter is deprecated: declare a hyperparameter as a "
            "Parameter (its type and default from the training function's signature); removed in 0.2",
            DeprecationWarning,
            stacklevel=3,
        )


@dataclasses.dataclass(frozen=True)
class Training:
    """The training step: a team's training code and its hyperparameters, each declared once.

    Where a hyperparameter's name, type, default and description are written depends on the
    code's shape (docs/pipelines.md, "Where a hyperparameter is declared"):

    - ``package.module:function`` taking typed keyword arguments (``def train(dropout: float =
      0.1, *, data_dir)``): in the function's signature (and its docstring's ``Args``). Every
      hyperparameter of the signature is a per-run field of the run form; ``hyperparameters``
      adds only what a signature cannot say, by name: ranges and the tuning range
      (``Parameter("dropout", ge=0.0, lt=1.0, search=(0.0, 0.4))``).
    - ``package.module:function`` taking ``argv`` first (``def main(argv=None, *, data_dir)``),
      or ``package.module`` run as ``python -m``: the code parses its own options, which kfstack
      cannot read, so ``hyperparameters`` declares each whole (``Parameter("dropout", float,
      0.1, "Dropout.", ge=0.0, lt=1.0, search=(0.0, 0.4))``), and kfstack writes them on argv
      as ``--name=value`` (``option_style="dashes"``: ``--learning-rate=``).

    Attributes:
        code: ``package.module:function`` or ``package.module``.
        metrics: The metrics the code prints as ``name=value`` lines.
        hyperparameters: :class:`~kfstack.pipelines.parameters.Parameter`\\ s, as above.
        framework: ``pytorch`` or ``tensorflow``; None: the run's ``framework`` parameter, which
            the code also receives as its ``framework`` hyperparameter.
        model_format: What the code writes: ``onnx``, ``sklearn``, ``xgboost``, ``lightgbm`` or
            ``custom``.
        arguments: The code's own arguments on every run, name -> text, typically where things
            are (``{"data_dir": "$KFSTACK_INPUT_DIR", "model_dir": "$KFSTACK_MODEL_DIR"}``): a
            function's keyword arguments (every parameter of its signature without a default
            must be one), a module's ``--name=value``.
        option_style: How hyperparameters are spelled on argv: ``underscores``
            (``--learning_rate``) or ``dashes`` (``--learning-rate``).
        task_name: The step's name in the Kubeflow UI.
        declared: Deprecated since 0.1 (the signature or ``hyperparameters`` declare the types):
            every hyperparameter -> its kind, as the code declared them in a dictionary.
    """

    code: str
    metrics: Sequence[str] = ()
    hyperparameters: Sequence[Parameter | Hyperparameter] = ()
    framework: str | None = "pytorch"
    model_format: str = "onnx"
    arguments: Mapping[str, str] = dataclasses.field(default_factory=dict)
    option_style: str = UNDERSCORES
    task_name: str = "training"
    declared: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        if self.declared is not None:
            warnings.warn(
                "Training(declared=...) is deprecated: the training function's signature, or the "
                "Parameters of Training(hyperparameters=...), declare the types; removed in 0.2",
                DeprecationWarning,
                stacklevel=3,
            )
        if self.option_style not in OPTION_STYLES:
            raise InvalidParameterError(
                f"training code {self.code}: option_style={self.option_style!r} is not one of "
                f"{', '.join(OPTION_STYLES)}"
            )

    @functools.cached_property
    def signature(self) -> code_signature.CodeSignature | None:
        """The function's signature as kfstack reads it; None for a module run as ``python -m``."""
        return code_signature.read(self.code) if ":" in self.code else None

    @functools.cached_property
    def resolved(self) -> tuple[Parameter, ...]:
        """Every hyperparameter the code takes, each a whole per-run parameter: the signature's
        completed by the page's ranges, or the page's own (argv code, a module, ``declared``).

        Raises:
            InvalidParameterError: A hyperparameter written twice, unknown to the signature, or
                incomplete; a location the ``arguments`` do not give.
        """
        page = [self._as_parameter(h) for h in self.hyperparameters]
        names = [p.name for p in page]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise InvalidParameterError(
                f"training code {self.code}: hyperparameters given twice: {', '.join(twice)}"
            )
        signature = self.signature if self.declared is None else None
        if signature is None or signature.takes_argv:
            incomplete = [p.name for p in page if not p.complete]
            if incomplete:
                raise InvalidParameterError(
                    f"training code {self.code} takes its hyperparameters on argv, where kfstack cannot "
                    f"read their types: give {', '.join(incomplete)} a type and a default"
                )
            if signature is not None:
                self._check_locations(signature)
            return self._within_range(page)
        self._check_locations(signature)
        by_name = {p.name: p for p in page}
        taken = {h.name for h in signature.hyperparameters}
        unknown = sorted(set(by_name) - taken)
        if unknown:
            raise InvalidParameterError(
                f"training code {self.code}: {', '.join(unknown)} not in its signature "
                f"(hyperparameters there: {', '.join(sorted(taken)) or 'none'})"
            )
        repeated = sorted(p.name for p in page if p.type is not None or p.default is not None)
        if repeated:
            raise InvalidParameterError(
                f"training code {self.code}: the signature declares the type and default of "
                f"{', '.join(repeated)}; write only their ranges here"
            )
        resolved = []
        for found in signature.hyperparameters:
            if self.framework is None and found.name == FRAMEWORK:
                continue  # the run's framework parameter (given())
            written = by_name.get(found.name, Parameter(found.name))
            bounds = {**({"choices": found.choices} if found.choices else {}), **written.bounds}
            resolved.append(
                written.but(
                    type=found.type,
                    default=found.default,
                    description=written.description or found.description or f"{found.name} of {self.code}.",
                    bounds=bounds,
                )
            )
        return self._within_range(resolved)

    def _within_range(self, hyperparameters: Sequence[Parameter]) -> tuple[Parameter, ...]:
        """``hyperparameters``, each default inside its own range."""
        problems = [
            problem for p in hyperparameters for problem in bound_problems(p.name, p.default, p.bounds)
        ]
        if problems:
            raise InvalidParameterError(
                f"training code {self.code}: a default outside its range: {'; '.join(problems)}"
            )
        return tuple(hyperparameters)

    def _as_parameter(self, hyperparameter: Parameter | Hyperparameter) -> Parameter:
        if isinstance(hyperparameter, Parameter):
            return hyperparameter
        # The deprecated form: its type from ``declared``.
        kind = (self.declared or {}).get(hyperparameter.name)
        return Parameter(
            hyperparameter.name,
            _TYPES.get(kind or "", FROM_CODE),
            hyperparameter.default,
            hyperparameter.description,
            PER_RUN,
            hyperparameter.bounds,
        )

    def _check_locations(self, signature: code_signature.CodeSignature) -> None:
        missing = [name for name in signature.locations if name not in self.arguments]
        if missing:
            raise InvalidParameterError(
                f"training code {self.code} needs {', '.join(missing)}, which Training(arguments=...) "
                'does not give (e.g. {"data_dir": "$KFSTACK_INPUT_DIR"})'
            )

    def declared_types(self) -> dict[str, str]:
        """Every hyperparameter the code takes -> its kind (``int``, ``float``, ``str``, ``bool``):
        the training and tuning steps' ``hyperparameter_types``."""
        if self.declared is not None:
            return dict(self.declared)
        types = {p.name: _KINDS[p.type] for p in self.resolved if p.type is not None}
        if self.framework is None:
            types[FRAMEWORK] = "str"
        return types

    def parameters(self) -> list[Parameter]:
        """The hyperparameters as pipeline parameters, per run."""
        return list(self.resolved)

    def given(self) -> list[str]:
        """The pipeline parameters the code receives as hyperparameters."""
        names = [p.name for p in self.resolved]
        if self.framework is None and FRAMEWORK in self.declared_types():
            names.append(FRAMEWORK)
        return names


@dataclasses.dataclass(frozen=True)
class Tuning:
    """Tuning before the final training, with Katib's semantics. It searches the hyperparameters
    given a ``search`` range (:class:`~kfstack.pipelines.parameters.Parameter`); the search
    space, objective and direction are the defaults of the ``tuning_*`` settings of the same name.

    Attributes:
        objective: The metric that decides, one of the training code's metrics.
        direction: ``maximize`` or ``minimize``.
        task_name: The step's name in the Kubeflow UI.
        search_space: Deprecated since 0.1 (a hyperparameter's ``search`` says it beside its
            range): hyperparameter -> its space (``{"type": "int", "min": 8, "max": 64}``).
    """

    objective: str
    direction: str = "maximize"
    task_name: str = "tuning"
    search_space: Mapping[str, Mapping[str, Any]] | None = None

    def __post_init__(self) -> None:
        if self.search_space is not None:
            warnings.warn(
                "Tuning(search_space=...) is deprecated: give each tuned hyperparameter its "
                "Parameter(search=...); removed in 0.2",
                DeprecationWarning,
                stacklevel=3,
            )


def search_entry(parameter: Parameter) -> dict[str, Any]:
    """A hyperparameter's ``search`` as an entry of the tuning search space (Katib's words:
    :mod:`kfstack.tuning.spec`), checked against its own range.

    Raises:
        InvalidParameterError: A search not of a form below, or outside the parameter's range.
    """
    search, name, bounds = parameter.search, parameter.name, parameter.bounds
    numeric = parameter.type in (int, float)
    if search is True:
        # The whole of its range: its choices, a bool's two values, a number's closed bounds.
        if bounds.get("choices"):
            search = list(bounds["choices"])
        elif parameter.type is bool:
            search = [True, False]
        elif numeric and "ge" in bounds and "le" in bounds:
            search = (bounds["ge"], bounds["le"])
        else:
            raise InvalidParameterError(
                f"hyperparameter {name}: search=True needs choices or both ge and le; give (low, high)"
            )
    if isinstance(search, Mapping):
        entry = dict(search)
    elif isinstance(search, tuple) and numeric and len(search) == 2:
        entry = {"min": search[0], "max": search[1]}
    elif isinstance(search, (list, tuple)) and search:
        entry = {"values": list(search)}
    else:
        raise InvalidParameterError(
            f"hyperparameter {name}: search={search!r} is not (low, high), [value, ...] or a mapping"
        )
    if "values" in entry:
        entry = {"type": "discrete" if numeric else "categorical", **entry}
        bounded = [bound_problems(name, value, bounds) for value in entry["values"]]
    else:
        entry = {"type": "int" if parameter.type is int else "double", **entry}
        bounded = [bound_problems(name, entry.get(end), bounds) for end in ("min", "max")]
    problems = [problem for found in bounded for problem in found]
    if problems:
        raise InvalidParameterError(
            f"hyperparameter {name}: its search leaves its range: {'; '.join(problems)}"
        )
    return entry


@dataclasses.dataclass(frozen=True)
class Predictor:
    """A team's own ``kserve.Model``, which scores the model in the evaluation and serves it
    (the training's ``model_format`` is then ``custom``).

    Attributes:
        model_class: ``package.module:Class``.
        request_format: What a request carries: ``tensor`` (rows as a numeric matrix) or
            ``records`` (rows as objects, the data set's columns).
        runtime: On a cluster, the ServingRuntime that runs it (the team's image).
        runtime_model_format: The model format that runtime declares.
    """

    model_class: str
    request_format: str = "tensor"
    runtime: str = ""
    runtime_model_format: str = ""

    def scoring(self) -> dict[str, str]:
        """The inputs of every step that scores through it."""
        return {
            "model_format": "custom",
            "custom_predictor": self.model_class,
            "request_format": self.request_format,
        }


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """The evaluation of the trained model, scored through the server that will serve it, and the
    labelled rows a canary replays.

    Attributes:
        label: The label column of the data step's output.
        task: ``binary``, ``multiclass`` or ``regression``.
        split: The data step's split (a folder or file of its output) evaluated.
        holdout_split: The split a canary replays and a retraining's gate scores; None: ``split``.
        class_names: A classifier's class names, in label order, for its report.
        task_name: The evaluation step's name in the Kubeflow UI.
    """

    label: str
    task: str
    split: str = "test"
    holdout_split: str | None = None
    class_names: Sequence[str] = ()
    task_name: str = "evaluation"

    @property
    def holdout(self) -> str:
        return self.split if self.holdout_split is None else self.holdout_split


@dataclasses.dataclass(frozen=True)
class Registration:
    """The model that went into production, registered in Kubeflow Model Registry with its
    lineage (nothing when a run's ``model_registry_url`` is empty).

    Attributes:
        model_format: The format the registry records (a custom predictor's ONNX graph: ``onnx``).
        task_name: The step's name in the Kubeflow UI.
    """

    model_format: str
    task_name: str = "model-registry"


@dataclasses.dataclass(frozen=True)
class Retraining:
    """The pipeline retrains on new data: a window of it (``window_days`` back from the run's
    time, or the run's ``window_start``/``window_end``), a drift check against the production
    model, and only when it drifted (or ``force``, or nothing is in production) tuning, training
    and evaluation; only a model that beats production on the new window's holdout (the gate)
    deploys.

    Attributes:
        profile_file: The file of the data step's output holding the new window's profile on the
            production model's edges (the data step reads them from :data:`PRODUCTION_PROFILE`).
        comparable_files: What a production model directory holds for this pipeline to compare
            with it (its profile among them).
        training_pipeline: The training pipeline whose steps this one runs: a model's lineage
            names it for ``kfstack reproduce``, which needs no drift check.
    """

    profile_file: str
    comparable_files: Sequence[str]
    training_pipeline: str


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
        predictor: The team's own server of the model; None: KServe's for ``model_format``.
        deploy: Deploy the evaluated model (the ``deploy`` parameter can still skip it per run).
        registration: Register the deployed model; None: no registration step.
        retraining: Retrain on new data, gated by drift and by production; None: train every run.
        parameters: The pipeline's own parameters besides the hyperparameters (a data step's
            option the application reads from its arguments); one named as a catalog setting
            stands for it.
        defaults: Catalog parameter -> this pipeline's default (``{"workers": 2}``).
        descriptions: Catalog parameter -> this pipeline's wording of it.
        renamed: An earlier name of a parameter -> its name now, taken with a warning for one
            release.
        summary: The first line of the pipeline function's docstring.
    """

    name: str
    description: str
    data: SparkApplication
    training: Training
    evaluation: Evaluation
    tuning: Tuning | None = None
    predictor: Predictor | None = None
    deploy: bool = True
    registration: Registration | None = None
    retraining: Retraining | None = None
    parameters: Sequence[Parameter] = ()
    defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    descriptions: Mapping[str, str] = dataclasses.field(default_factory=dict)
    renamed: Mapping[str, str] = dataclasses.field(default_factory=dict)
    summary: str = "Prepares the data, trains, evaluates and deploys the model."

    def __post_init__(self) -> None:
        problems = []
        try:
            self.training.resolved  # noqa: B018 (read here: a page that contradicts its code fails on import)
            search_space = self.search_space()
        except InvalidParameterError as err:
            raise InvalidParameterError(f"pipeline {self.name}: {err}") from None
        if self.tuning and not search_space:
            problems.append("tuning searches no hyperparameter: give one a Parameter(search=...)")
        catalog = set(self.catalog_names())
        unknown = sorted({*self.defaults, *self.descriptions} - catalog)
        if unknown:
            problems.append(
                f"defaults or descriptions for settings this pipeline has not: {', '.join(unknown)}"
            )
        known = self._own_names() | catalog | {PRODUCTION_PROFILE}
        missing = sorted(self.data.named() - known)
        if missing:
            problems.append(f"data arguments name no parameter of the pipeline: {', '.join(missing)}")
        if self.data.input not in known:
            problems.append(f"data input {self.data.input} is no parameter of the pipeline")
        if self.tuning and self.tuning.objective not in self.training.metrics:
            problems.append(f"tuning objective {self.tuning.objective} is not one of the metrics")
        if self.predictor and self.training.model_format != "custom":
            problems.append(
                f"a Predictor serves training model_format custom, not {self.training.model_format}"
            )
        if self.retraining and not (self.tuning and self.deploy):
            problems.append("a retraining pipeline tunes and deploys (the gate decides what deploys)")
        if problems:
            raise InvalidParameterError(f"pipeline {self.name}: " + "; ".join(problems))

    # -- what the pipeline gives its steps, and so does not take as a parameter ----------------

    def training_arguments(self) -> dict[str, Any]:
        """The arguments of the training and tuning steps the declaration fixes."""
        fixed = {
            "training_code": self.training.code,
            "hyperparameter_types": self.training.declared_types(),
            "metric_names": list(self.training.metrics),
            "model_format": self.training.model_format,
            "code_arguments": dict(self.training.arguments),
            "option_style": self.training.option_style,
        }
        if self.training.framework is not None:
            fixed["framework"] = self.training.framework
        return fixed

    def _own_names(self) -> set[str]:
        return {h.name for h in self.training.resolved} | {p.name for p in self.parameters}

    def search_space(self) -> dict[str, dict[str, Any]]:
        """What tuning searches: each hyperparameter's ``search`` (or the deprecated
        ``Tuning.search_space``); empty without tuning."""
        if self.tuning is None:
            return {}
        if self.tuning.search_space is not None:
            return {name: dict(entry) for name, entry in self.tuning.search_space.items()}
        return {p.name: search_entry(p) for p in self.training.resolved if p.search is not None}

    def _labelled(self) -> dict[str, Any]:
        return {"label_column": self.evaluation.label, "task": self.evaluation.task}

    def _scoring(self) -> dict[str, Any]:
        """How the evaluation, the gate and the deployment score the model."""
        return {**self._labelled(), **(self.predictor.scoring() if self.predictor else {})}

    def _serving(self) -> dict[str, Any]:
        """What the deployment gives KServe besides the model's format."""
        if not self.predictor:
            return {"model_format": self.training.model_format}
        predictor = self.predictor
        return {"serving_runtime": predictor.runtime, "serving_model_format": predictor.runtime_model_format}

    def _components(self) -> dict[Any, set[str]]:
        """Each component the pipeline runs -> the inputs it gives that component itself."""
        job = {"run_id", "task_name"}
        code = {*self.training_arguments(), "data", "hyperparameters"} | job
        scoring = set(self._scoring())
        steps = {
            spark_job: {"spark_application", "spark_arguments", "spark_conf", "input_uri"} | job,
            distributed_training: code | {"pipeline"},
            # A threshold means something to a binary classifier only.
            model_evaluation: {"model", "dataset", "dataset_split", "class_names", *scoring}
            | job
            | (set() if self.evaluation.task == "binary" else {"decision_threshold"}),
        }
        if self.tuning:
            steps[hyperparameter_tuning] = code
        if self.deploy:
            steps[model_deployment] = {"model", "holdout", "holdout_split", *scoring, *self._serving()} | job
        if self.registration:
            steps[register_model] = {"model", "decision", "model_format"}
        if self.retraining:
            steps[data_window] = {"scheduled_time", "created_time"}
            steps[production_model] = {"comparable_files"}
            steps[data_drift] = {"reference", "current", "current_profile_file"}
            steps[gate_model] = {"challenger", "champion", "dataset", "dataset_split", *scoring}
        return steps

    def catalog_names(self) -> list[str]:
        """The catalog's parameters this pipeline takes: every input of its components that the
        pipeline does not give itself or declare as its own, those its data arguments name, and
        the run's frame's."""
        taken = set(FRAME_PARAMETERS) | self.data.named() | {self.data.input}
        for component, given in self._components().items():
            taken |= set(component.component_spec.inputs or {}) - given
        if self.tuning is None:
            taken.discard("tune")
        taken -= self._own_names()
        return [name for name in CATALOG.names if name in taken]

    def parameter_set(self) -> ParameterSet:
        """Every parameter of the pipeline: the data's, its own, its hyperparameters, then the
        catalog's it takes, with its defaults and wording."""
        defaults = dict(self.defaults)
        if self.tuning:
            defaults.setdefault("tuning_search_space", json.dumps(self.search_space()))
            defaults.setdefault("tuning_objective", self.tuning.objective)
            defaults.setdefault("tuning_direction", self.tuning.direction)
        changes: dict[str, dict[str, Any]] = {}
        for name, value in defaults.items():
            changes.setdefault(name, {})["default"] = value
        descriptions = dict(self.descriptions)
        if self.deploy and self.evaluation.task in QUALITY_WORDS:
            descriptions.setdefault("canary_max_quality_drop", QUALITY_WORDS[self.evaluation.task])
        for name, text in descriptions.items():
            changes.setdefault(name, {})["description"] = text
        # In the order a person reads a run form: the data (its input, what its arguments name,
        # the pipeline's own), then the model's hyperparameters, then the components' settings.
        catalog = CATALOG.take(*self.catalog_names(), **changes)
        data = {self.data.input} | self.data.named()
        ordered = [
            *(p for p in catalog if p.name in data),
            *self.parameters,
            *self.training.parameters(),
            *(p for p in catalog if p.name not in data),
        ]
        ordered.sort(key=lambda p: p.name != self.data.input)  # the input first, the rest as they were
        return ParameterSet(ordered, renamed=self.renamed)

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
        # The steps' inputs never take a hyperparameter by name: it is the code's (a trainer's
        # batch_size), not a step's setting of the same name (the evaluation's rows per request).
        hyperparameters = {h.name for h in self.training.resolved}
        steps = {name: value for name, value in values.items() if name not in hyperparameters}
        with guarded(self.name, values) as checked:
            if self.retraining is None:
                data = self._data(values, steps, {PRODUCTION_PROFILE: ""}).after(checked)
                training, evaluation = self._train_and_evaluate(values, steps, data, self.name)
                if self.deploy:
                    # After the evaluation: a model that failed to evaluate is never served.
                    deployment = self._deploy(steps, training, data).after(evaluation)
                    self._register(steps, training, deployment)
                return
            self._retrain(values, steps, checked)

    def _data(
        self, values: Mapping[str, Any], steps: Mapping[str, Any], given: Mapping[str, Any]
    ) -> dsl.PipelineTask:
        arguments = [argument.format(**{**values, **given}) for argument in self.data.arguments]
        task = call(
            spark_job,
            steps,
            run_id=RUN_ID,
            task_name=TASK_NAME,
            spark_application=self.data.application,
            spark_arguments=arguments,
            spark_conf=dict(self.data.conf),
            input_uri=values[self.data.input],
        )
        return on_cluster(task, values, self.data.task_name)

    def _train_and_evaluate(
        self,
        values: Mapping[str, Any],
        steps: Mapping[str, Any],
        data_task: dsl.PipelineTask,
        reproduced_by: str,
    ) -> tuple[dsl.PipelineTask, dsl.PipelineTask]:
        data = data_task.outputs["output"]
        chosen = {name: values[name] for name in self.training.given()}
        code = {"run_id": RUN_ID, "task_name": TASK_NAME, **self.training_arguments(), "data": data}
        hyperparameters: Any = chosen
        if self.tuning:
            tuning = call(hyperparameter_tuning, steps, **code, hyperparameters=chosen)
            tuning = on_cluster(tuning, values, self.tuning.task_name)
            hyperparameters = tuning.outputs["best_hyperparameters"]
        training = call(
            distributed_training, steps, **code, hyperparameters=hyperparameters, pipeline=reproduced_by
        )
        training = on_cluster(training, values, self.training.task_name)
        # The evaluation's settings are the decision threshold, the tracking server and the run's
        # overrides; its other inputs are the declaration's.
        settings = {
            name: values[name] for name in ("decision_threshold", TRACKING_URI_ARGUMENT) if name in values
        }
        evaluation = model_evaluation(
            run_id=RUN_ID,
            task_name=TASK_NAME,
            model=training.outputs["model"],
            dataset=data,
            dataset_split=self.evaluation.split,
            **self._scoring(),
            **({"class_names": list(self.evaluation.class_names)} if self.evaluation.class_names else {}),
            **settings,
            **run_overrides(values, model_evaluation),
        )
        return training, on_cluster(evaluation, values, self.evaluation.task_name)

    def _deploy(
        self, steps: Mapping[str, Any], training: dsl.PipelineTask, data_task: dsl.PipelineTask
    ) -> dsl.PipelineTask:
        """The rollout of the trained model: first at 100%, later as an analysed canary that
        replays the holdout."""
        task = call(
            model_deployment,
            steps,
            run_id=RUN_ID,
            task_name=TASK_NAME,
            model=training.outputs["model"],
            holdout=data_task.outputs["output"],
            holdout_split=self.evaluation.holdout,
            **self._scoring(),
            **self._serving(),
        )
        return joins_mesh(on_cluster(uncached(task), steps, "deployment"))

    def _register(
        self, steps: Mapping[str, Any], training: dsl.PipelineTask, deployment: dsl.PipelineTask
    ) -> None:
        if self.registration is None:
            return
        task = call(
            register_model,
            steps,
            model=training.outputs["model"],
            decision=deployment.outputs["decision"],
            model_format=self.registration.model_format,
        )
        on_cluster(uncached(task), steps, self.registration.task_name)

    def _retrain(
        self, values: Mapping[str, Any], steps: Mapping[str, Any], checked: dsl.PipelineTask
    ) -> None:
        assert self.retraining is not None  # (the caller's branch)
        retraining = self.retraining
        # Never cached: the window relative to the run's time, and what serves, change between
        # runs with the same arguments.
        window = call(
            data_window,
            steps,
            scheduled_time=dsl.PIPELINE_JOB_SCHEDULE_TIME_UTC_PLACEHOLDER,
            created_time=dsl.PIPELINE_JOB_CREATE_TIME_UTC_PLACEHOLDER,
        ).after(checked)
        on_cluster(uncached(window), values, "data-window")
        champion = call(production_model, steps, comparable_files=list(retraining.comparable_files))
        champion = on_cluster(uncached(champion.after(checked)), values, "production-model")
        # The new window, profiled on the champion's edges: like is compared with like.
        data = self._data(
            values,
            steps,
            {
                "window_start": window.outputs["start"],
                "window_end": window.outputs["end"],
                PRODUCTION_PROFILE: champion.outputs["profile_uri"],
            },
        )
        uncached(data)
        drift = call(
            data_drift,
            steps,
            reference=champion.outputs["model"],
            current=data.outputs["output"],
            current_profile_file=retraining.profile_file,
        )
        on_cluster(drift, values, "drift-check")
        with dsl.If(drift.outputs["Output"] == True, name="drifted"):  # noqa: E712 (a KFP condition)
            training, evaluation = self._train_and_evaluate(values, steps, data, retraining.training_pipeline)
            gate = call(
                gate_model,
                steps,
                challenger=training.outputs["model"],
                champion=champion.outputs["model"],
                dataset=data.outputs["output"],
                dataset_split=self.evaluation.holdout,
                **self._scoring(),
            )
            gate = on_cluster(gate.after(evaluation), values, "champion-challenger")
            with dsl.If(gate.outputs["Output"] == PASS, name="beats-production"):
                deployment = self._deploy(steps, training, data)
                self._register(steps, training, deployment)
