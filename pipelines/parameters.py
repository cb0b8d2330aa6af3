"""Pipeline parameters, each written once: name, type, default, range, description, and who sets
it -- a person per run, or a platform team once per environment.

A pipeline declares its parameters as a :class:`ParameterSet` and lets :meth:`ParameterSet.pipeline`
write its signature and docstring: the signature KFP compiles (every input, its type and
default), ordered so that what a person changes per run comes first and the environment's
settings follow by group; the docstring's ``Args`` are the descriptions KFP compiles into the
spec. A parameter that a settings class reads takes its type, default and range from that class's
field (:func:`from_setting`), so a default is never written twice. :data:`CATALOG` holds the
parameters of kfstack's public components; a pipeline takes them by name and adds its own.

KFP's compiler writes a spec's inputs sorted by name, and the Kubeflow UI lists them in that
order; the order here is what ``kfstack describe``, the docs and the Python signature show.
"""

from __future__ import annotations

import builtins
import dataclasses
import inspect
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from kfstack.components.argument_names import argument
from kfstack.kubernetes import inference_service
from kfstack.kubernetes.placement import Placement, ServingPlacement, TrainingPlacement, TuningPlacement
from kfstack.kubernetes.spark_application import SparkJobPlacement, SparkResources
from kfstack.monitoring.drift import DriftThresholds
from kfstack.monitoring.gate import GateRule
from kfstack.serving import model_registry
from kfstack.serving.canary import CanaryThresholds
from kfstack.settings import SETTINGS_OVERRIDES, bound_problems
from kfstack.training.settings import JobTopology
from kfstack.tuning.spec import TuningSettings

# Who sets a parameter, and the groups of the rest in the order a form reads them.
PER_RUN = "per run"
GROUPS = (
    PER_RUN,
    "data",
    "training",
    "tuning",
    "deployment",
    "canary analysis",
    "drift and gate",
    "model registry",
    "cluster",
)
# The value types a KFP pipeline parameter can have (what the UI's form can fill in).
SCALARS: tuple[type, ...] = (bool, int, float, str)


# A parameter's type or default left to the training code's signature (:class:`Parameter`).
FROM_CODE: Any = None
_RANGE_KEYS = ("ge", "gt", "le", "lt")


@dataclasses.dataclass(frozen=True)
class Parameter:
    """One pipeline parameter: its name, type, default, description, who sets it and its range,
    and for a hyperparameter the range tuning searches. Written once, in one place.

    A hyperparameter of training code whose function signature types it (``dropout: float =
    0.1``) leaves its type, default and description to the code: ``Parameter("dropout", ge=0.0,
    lt=1.0, search=(0.0, 0.4))`` says only what the signature cannot, its ranges
    (:class:`~kfstack.pipelines.declared.Training`). A parameter a settings class reads
    (``owner``) takes its type, default and range from that class's field.

    Attributes:
        name: The parameter's (and the component argument's) name.
        type: ``bool``, ``int``, ``float`` or ``str``; None: the training code's signature's
            (or ``owner``'s field's).
        default: Its value when a run does not set it (an environment file may set another);
            None: the signature's (or ``owner``'s field's).
        description: What KFP shows for it; one line, plain. Empty: the training function's
            docstring's ``Args`` line for it.
        group: :data:`PER_RUN` (a person sets it when triggering a run) or the group of
            environment settings it belongs to (:data:`GROUPS`).
        bounds: Its range as a mapping (``ge``, ``gt``, ``le``, ``lt``, ``choices``); the
            keyword arguments of the same names write it more plainly.
        owner: The settings class whose field it is, which checks the range when the run's
            stages build their settings; None: :meth:`ParameterSet.problems` checks it before a run.
        field: ``owner``'s field it reads, when not ``name``.
        ge, gt, le, lt: Its bounds (``ge=1``: at least 1).
        choices: The values it may take.
        search: A hyperparameter's tuning range: ``(low, high)``; ``[value, ...]`` (the values
            tried); True (all its ``choices``, a bool's two values, or ``ge`` to ``le``); or a
            mapping in Katib's feasible-space words (``{"min": 0.0003, "max": 0.03, "scale":
            "log"}``, ``step``). None: tuning leaves it at its value.
    """

    name: str
    # None (FROM_CODE) only while a hyperparameter waits for its signature: a ParameterSet holds none.
    type: builtins.type = FROM_CODE
    default: Any = FROM_CODE
    description: str = ""
    group: str = PER_RUN
    bounds: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    owner: builtins.type | None = None  # (`type` here is the field above)
    field: str = dataclasses.field(default="", kw_only=True)
    ge: float | None = dataclasses.field(default=None, kw_only=True)
    gt: float | None = dataclasses.field(default=None, kw_only=True)
    le: float | None = dataclasses.field(default=None, kw_only=True)
    lt: float | None = dataclasses.field(default=None, kw_only=True)
    choices: Sequence[Any] = dataclasses.field(default=(), kw_only=True)
    search: Any = dataclasses.field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        if self.type is not None and not isinstance(self.type, builtins.type):
            raise TypeError(
                f"parameter {self.name}: type {self.type!r} is not a type (a description: description=...)"
            )
        bounds = dict(self.bounds)
        for key in _RANGE_KEYS:
            if getattr(self, key) is not None:
                bounds[key] = getattr(self, key)
        if self.choices:
            bounds["choices"] = tuple(self.choices)
        if self.owner is not None and (self.type is None or self.default is None):
            # The field's type, default and range: written once, in the settings class.
            type_, default, field_bounds = setting_field(self.owner, self.field or self.name)
            object.__setattr__(self, "type", self.type or type_)
            object.__setattr__(self, "default", default if self.default is None else self.default)
            bounds = {**field_bounds, **bounds}
        object.__setattr__(self, "bounds", bounds)
        if self.group not in GROUPS:
            raise ValueError(f"parameter {self.name}: group {self.group!r} is not one of {', '.join(GROUPS)}")
        if self.type is None or self.default is None:
            return  # completed from the training code's signature (Training), or refused there
        if self.type not in SCALARS and self.name != SETTINGS_OVERRIDES:
            raise TypeError(f"parameter {self.name}: a pipeline parameter is bool, int, float or str")
        if not isinstance(self.default, self.type) and not (self.type is float and type(self.default) is int):
            raise TypeError(f"parameter {self.name}: default {self.default!r} is not {self.type.__name__}")

    @property
    def complete(self) -> bool:
        """Whether its type and default are known (not left to the training code)."""
        return self.type is not None and self.default is not None

    @property
    def per_run(self) -> bool:
        return self.group == PER_RUN

    def but(self, **changes: Any) -> Parameter:
        """This parameter with some attributes changed (a pipeline's own default, description
        or group)."""
        return dataclasses.replace(self, **changes)

    def range_text(self) -> str:
        """Its range in words (``>= 1``, ``one of tpe, random``); empty: any value of its type."""
        words = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
        parts = [f"{words[key]} {value}" for key, value in self.bounds.items() if key in words]
        if self.bounds.get("choices"):
            parts.append("one of " + ", ".join(str(c) if c != "" else "''" for c in self.bounds["choices"]))
        return ", ".join(parts)


def setting_field(owner: type, field: str) -> tuple[type, Any, dict[str, Any]]:
    """A settings class's ``field`` as a parameter reads it: its type, default and range
    (``owner`` is a dataclass: a ``Settings`` subclass or a plain one).

    Raises:
        ValueError: ``owner`` has no such field, or it has no default.
    """
    fields = {f.name: f for f in dataclasses.fields(owner)}
    if field not in fields:
        raise ValueError(f"{owner.__name__} has no field {field}")
    declared = fields[field]
    if declared.default is dataclasses.MISSING:
        raise ValueError(f"{owner.__name__}.{field} has no default for a pipeline parameter")
    bounds = {key: value for key, value in declared.metadata.items() if value is not None}
    return typing.get_type_hints(owner)[field], declared.default, bounds


def from_setting(owner: type, field: str, description: str, group: str, name: str | None = None) -> Parameter:
    """The parameter a settings class's ``field`` is read from: its type, default and range are
    the field's. ``name`` defaults to the name the components give the field's argument
    (``gpu_pool`` for ``TrainingPlacement.node_pool``). The catalog's way of writing
    ``Parameter(name, description=..., group=..., owner=owner, field=field)``."""
    return Parameter(
        name or argument(owner, field), FROM_CODE, FROM_CODE, description, group, owner=owner, field=field
    )


class ParameterSet:
    """A pipeline's parameters, in the order a person reads them."""

    def __init__(self, parameters: Iterable[Parameter], renamed: Mapping[str, str] | None = None):
        """``renamed``: an earlier name -> the parameter's name now; a run that gives the earlier
        name is taken for one release, with a warning (:func:`kfstack.pipelines.run_form.current_names`)."""
        self.renamed = dict(renamed or {})
        self._by_name: dict[str, Parameter] = {}
        for parameter in parameters:
            if not parameter.complete:
                raise TypeError(
                    f"parameter {parameter.name}: no type or default (only a hyperparameter of a training "
                    "function that types it in its signature may leave them to the code)"
                )
            if parameter.name in self._by_name:
                raise ValueError(f"parameter {parameter.name} is declared twice")
            self._by_name[parameter.name] = parameter

    def __iter__(self) -> Iterator[Parameter]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __getitem__(self, name: str) -> Parameter:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no parameter named {name}") from None

    @property
    def names(self) -> list[str]:
        return list(self._by_name)

    def take(self, *names: str, **changed: Mapping[str, Any]) -> list[Parameter]:
        """The named parameters (in the order named), each with the changes ``changed`` gives
        it by name (``take("workers", workers={"default": 2})``)."""
        unknown = set(changed) - set(names)
        if unknown:
            raise KeyError(f"changes for parameters not taken: {', '.join(sorted(unknown))}")
        return [self[name].but(**changed.get(name, {})) for name in names]

    def problems(self, values: Mapping[str, Any]) -> list[str]:
        """The range problems of ``values`` (by parameter name) for the parameters no settings
        class checks (those declared here, not read from a field); values of another type (a
        placeholder a compiled pipeline resolves later) are left to the run."""
        found = []
        for parameter in self:
            value = values.get(parameter.name)
            if parameter.owner is None and parameter.bounds and isinstance(value, SCALARS):
                found += bound_problems(parameter.name, value, parameter.bounds)
        return found

    def ordered(self) -> list[Parameter]:
        """Per-run parameters first, then the environment's settings group by group; the
        declared order within a group."""
        return sorted(self, key=lambda p: GROUPS.index(p.group))

    def grouped(self) -> dict[str, list[Parameter]]:
        """Group -> its parameters, groups in :data:`GROUPS` order, empty ones left out."""
        groups: dict[str, list[Parameter]] = {}
        for parameter in self.ordered():
            groups.setdefault(parameter.group, []).append(parameter)
        return groups

    def docstring(self, summary: str) -> str:
        """A Google-style docstring: ``summary``, then one ``Args`` line per parameter (what
        KFP compiles into the spec's descriptions)."""
        args = "\n".join(f"    {p.name}: {p.description}" for p in self.ordered())
        return f"{summary}\n\nArgs:\n{args}\n"

    def signature(self) -> inspect.Signature:
        """The pipeline function's signature: every parameter, typed and defaulted, ordered."""
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        return inspect.Signature(
            [inspect.Parameter(p.name, kind, default=p.default, annotation=p.type) for p in self.ordered()]
        )

    def pipeline(self, summary: str) -> Callable[[Callable[[dict[str, Any]], None]], Callable[..., None]]:
        """Turns ``body(parameters)`` into a pipeline function with these parameters.

        ``body`` receives every parameter by name (KFP's channels when compiled) and wires the
        steps. The function it returns has the generated signature (``__signature__``) and
        docstring; apply ``@dsl.pipeline`` on top, which reads both. Its ``parameters``
        attribute is this set (``kfstack describe``'s groups, the run check of the ranges the
        pipeline declares itself: :func:`declared_parameters`).
        """
        signature = self.signature()

        def decorate(body: Callable[[dict[str, Any]], None]) -> Callable[..., None]:
            def pipeline(*args: Any, **kwargs: Any) -> None:
                bound = signature.bind(*args, **kwargs)
                bound.apply_defaults()
                body(dict(bound.arguments))

            pipeline.__name__ = body.__name__
            pipeline.__qualname__ = body.__qualname__
            pipeline.__module__ = body.__module__
            pipeline.__doc__ = self.docstring(summary)
            pipeline.__signature__ = signature  # type: ignore[attr-defined]
            pipeline.parameters = self  # type: ignore[attr-defined]
            # What a version with its settings compiled in is built from (:meth:`run_form`).
            pipeline.body = body  # type: ignore[attr-defined]
            pipeline.summary = summary  # type: ignore[attr-defined]
            return pipeline

        return decorate

    def run_form(
        self, summary: str, body: Callable[[dict[str, Any]], None], settings: Mapping[str, Any]
    ) -> Callable[..., None]:
        """The pipeline function of a version with its settings compiled in: its run form is
        the per-run parameters and ``settings_overrides`` (:data:`SETTINGS_OVERRIDES_PARAMETER`);
        every other parameter is a constant of the version, its value in ``settings`` or its
        default. A per-run parameter ``settings`` names keeps its field, with that value as its
        default. ``body`` receives every parameter by name, as from :meth:`pipeline`, and the
        overrides' channel under ``settings_overrides``.

        Raises:
            KeyError: ``settings`` names a parameter this set does not have.
        """
        strangers = sorted(name for name in settings if name not in self)
        if strangers:
            raise KeyError(f"not parameters of this pipeline: {', '.join(strangers)}")
        constants = {p.name: settings.get(p.name, p.default) for p in self if not p.per_run}
        per_run = ParameterSet(
            [
                *(p.but(default=settings.get(p.name, p.default)) for p in self if p.per_run),
                SETTINGS_OVERRIDES_PARAMETER,
            ]
        )
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        signature = inspect.Signature(
            [inspect.Parameter(p.name, kind, default=p.default, annotation=p.type) for p in per_run]
        )

        def pipeline(*args: Any, **kwargs: Any) -> None:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            body({**constants, **bound.arguments})

        pipeline.__name__ = body.__name__
        pipeline.__qualname__ = body.__qualname__
        pipeline.__module__ = body.__module__
        pipeline.__doc__ = per_run.docstring(summary)
        pipeline.__signature__ = signature  # type: ignore[attr-defined]
        return pipeline


# The run form's one field for the settings (:meth:`ParameterSet.run_form`).
SETTINGS_OVERRIDES_PARAMETER = Parameter(
    SETTINGS_OVERRIDES,
    dict,
    {},
    "This run's values of settings compiled into the version, as a JSON object: setting name -> "
    'value, e.g. {"gpu_pool": "a100", "tuning_max_trials": 4}. `kfstack describe` lists the '
    "settings and their compiled values; a name no setting has is refused before anything starts.",
    PER_RUN,
)


def reference_markdown(parameters: ParameterSet, title: str) -> str:
    """A reference page of ``parameters``: one table per group, per-run first, each parameter
    with its type, default, range and description (``docs/parameters.md`` is the catalog's)."""
    lines = [f"# {title}", ""]
    lines.append(
        "Written by `python -m kfstack.pipelines.parameters` from the declarations in "
        "`kfstack/pipelines/parameters.py`; `tests/pipelines/test_parameter_catalog.py` keeps it "
        "in step with them. A pipeline takes the parameters it needs by name, with its own "
        "defaults or wording where it has them: `kfstack describe NAME` shows a pipeline's own "
        "([pipelines.md](pipelines.md#where-a-parameter-is-declared))."
    )
    for group, members in parameters.grouped().items():
        heading = "Per run" if group == PER_RUN else f"{group[0].upper()}{group[1:]} (set per environment)"
        lines += [
            "",
            f"## {heading}",
            "",
            "| parameter | type | default | range | description |",
            "|---|---|---|---|---|",
        ]
        for p in members:
            cells = (f"`{p.name}`", p.type.__name__, f"`{p.default!r}`", p.range_text(), p.description)
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def declared_parameters(pipeline_func: Any) -> ParameterSet | None:
    """The :class:`ParameterSet` a pipeline was generated from (through ``@dsl.pipeline``'s
    wrapper), or None for a pipeline whose signature is written by hand."""
    function = getattr(pipeline_func, "pipeline_func", pipeline_func)
    found = getattr(function, "parameters", None)
    return found if isinstance(found, ParameterSet) else None


# ---------------------------------------------------------------------------------------------
# The parameters of kfstack's public components. Descriptions say what a run does with the value.
# ---------------------------------------------------------------------------------------------

_CLUSTER = "cluster"
_SERVING = inference_service.ServingRequest

CATALOG = ParameterSet(
    [
        Parameter(
            "platform",
            str,
            "kubernetes",
            "``kubernetes`` (SparkApplication + TrainJob, PyTorchJob or TFJob on this cluster) or "
            "``local`` (embedded: everything on this machine; ``kfstack run --local``).",
            _CLUSTER,
            {"choices": ("kubernetes", "local")},
        ),
        # The data window a run reads (data_window).
        Parameter(
            "window_start",
            str,
            "",
            "First date read (ISO ``2013-07-01``); empty: from the first. With window_end, the "
            "window exactly.",
            PER_RUN,
        ),
        Parameter("window_end", str, "", "Last date read (inclusive); empty: to the last.", PER_RUN),
        Parameter(
            "window_days",
            int,
            0,
            "Without window_start/window_end: a window of this many days ending the day before the "
            "run's time (a scheduled run: its scheduled time) less window_lag_days; 0 and no dates: "
            "all the data.",
            PER_RUN,
            {"ge": 0},
        ),
        Parameter(
            "window_lag_days",
            int,
            0,
            "Days between a relative window's end and the run's day: late data settles.",
            "data",
            {"ge": 0},
        ),
        # Spark (spark_job).
        Parameter(
            "input_uri",
            str,
            "",
            "The raw data the Spark application reads (its KFSTACK_INPUT_URI: s3://, gs://, a "
            "local path...); empty: none, or the application's own default.",
            PER_RUN,
        ),
        Parameter(
            "spark_image",
            str,
            "",
            "Kubernetes: the image of the Spark driver and executors, with the team's application "
            "installed; empty: kfstack's Spark image.",
            _CLUSTER,
        ),
        from_setting(SparkResources, "executor_instances", "Kubernetes: Spark executor pods.", "data"),
        from_setting(SparkResources, "executor_cores", "Kubernetes: cores per executor.", "data"),
        from_setting(
            SparkResources,
            "executor_memory",
            "Kubernetes: memory per executor (Spark notation: 4g, 512m).",
            "data",
        ),
        from_setting(
            SparkResources,
            "driver_memory",
            "Driver memory (Spark notation); locally the memory of the one JVM.",
            "data",
        ),
        from_setting(
            SparkJobPlacement, "service_account", "Kubernetes: the Spark driver's service account.", _CLUSTER
        ),
        from_setting(
            SparkJobPlacement,
            "timeout_seconds",
            "Kubernetes: longest wait for the SparkApplication.",
            _CLUSTER,
        ),
        # The training job's shape (distributed_training, hyperparameter_tuning).
        from_setting(
            JobTopology,
            "framework",
            "``pytorch`` (DDP; TrainJob or PyTorchJob, see training_api) or ``tensorflow`` (TFJob).",
            PER_RUN,
        ),
        from_setting(
            JobTopology,
            "workers",
            "Training ranks (TrainJob: nodes; PyTorchJob: 1 Master + workers-1 Workers; TFJob: Workers).",
            PER_RUN,
        ),
        from_setting(
            JobTopology,
            "max_restarts",
            "Restarts from the last checkpoint when a rank fails (a TrainJob: its runtime's, see "
            "trainer_runtime).",
            "training",
        ),
        from_setting(
            JobTopology,
            "tf_topology",
            "TensorFlow: ``mwms`` (MultiWorkerMirroredStrategy, synchronous) or ``parameter_server`` "
            "(chief + workers + parameter servers, asynchronous).",
            "training",
        ),
        from_setting(
            JobTopology,
            "tf_parameter_servers",
            "TensorFlow ``parameter_server`` topology: PS replicas.",
            "training",
        ),
        from_setting(
            JobTopology,
            "elastic_min_workers",
            "Kubernetes, PyTorch: with elastic_max_workers, run the PyTorchJob elastic between these "
            "replica counts (torchrun, c10d); 0 = fixed size.",
            "training",
        ),
        from_setting(
            JobTopology,
            "elastic_max_workers",
            "Kubernetes, PyTorch: upper replica count of an elastic job; 0 = fixed.",
            "training",
        ),
        Parameter(
            "trainer_image",
            str,
            "",
            "Kubernetes: the image of the training replicas and trials, with the team's training "
            "code installed; empty: kfstack's trainer image for the framework.",
            _CLUSTER,
        ),
        # Where the launched pods run (every launching component).
        from_setting(
            TrainingPlacement,
            "node_pool",
            "Kubernetes: node pool of the training replicas (``cpu``, ``h100``, ``a100-mig``, "
            "``h100-spot``; see kfstack/kubernetes/node_pools.yaml).",
            _CLUSTER,
        ),
        from_setting(
            Placement,
            "object_store_secret",
            "Kubernetes: name of the Secret with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and "
            "AWS_ENDPOINT_URL for MinIO) for the pods; optional.",
            _CLUSTER,
        ),
        from_setting(
            Placement,
            "image_pull_secret",
            "Kubernetes: image pull Secret of the launched jobs; empty: none.",
            _CLUSTER,
        ),
        from_setting(
            Placement,
            "istio_mesh",
            "Kubernetes: the launch namespace is in an Istio mesh (a Kubeflow profile namespace): "
            "every batch pod carries the labels that keep it out of the mesh "
            "(``sidecar.istio.io/inject=false``, ``istio.io/dataplane-mode=none``); false: no "
            "mesh labels on them. The predictors and the deployment task stay in the mesh.",
            _CLUSTER,
        ),
        from_setting(
            Placement,
            "launch_namespace",
            "Kubernetes: the namespace the launchers create their jobs and the InferenceService in "
            "(and read back, clean up and roll back there); empty: the task pod's own. The run's "
            "service account needs the launcher Role there (manifests/README.md).",
            _CLUSTER,
        ),
        from_setting(
            Placement,
            "tracking_uri",
            "Kubernetes: the MLflow tracking server (``http(s)://``) the run, its tasks, their "
            "jobs and trials are tracked to; empty: none. Where KFP's MLflow plugin is on, its "
            "server and runs are used whatever this says (docs/tracking.md).",
            _CLUSTER,
        ),
        from_setting(
            Placement,
            "tracking_secret",
            "Kubernetes: the Secret the task pods and their jobs' pods read the tracking server's "
            "credentials from (keys MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and "
            "MLFLOW_TRACKING_PASSWORD; optional); by default KFP's MLflow plugin's.",
            _CLUSTER,
        ),
        from_setting(
            TrainingPlacement,
            "timeout_seconds",
            "Kubernetes: the training job's activeDeadlineSeconds and the longest wait for it (seconds).",
            _CLUSTER,
        ),
        from_setting(
            TrainingPlacement,
            "training_api",
            "Kubernetes: ``auto`` (the training API the cluster serves; Trainer v2's TrainJob when it "
            "serves both), ``v1`` (PyTorchJob/TFJob, training-operator v1.9) or ``trainer-v2`` "
            "(TrainJob, Kubeflow Trainer v2.3; PyTorch, not elastic). Locally: which contract the "
            "replicas replay.",
            _CLUSTER,
        ),
        from_setting(
            TrainingPlacement,
            "trainer_runtime",
            "Kubernetes, Trainer v2: the ClusterTrainingRuntime of the TrainJob (``torch-distributed`` "
            "upstream; ``kfstack-torch-distributed`` restarts the whole job from its checkpoint, see "
            "manifests/README.md).",
            _CLUSTER,
        ),
        # Tuning (hyperparameter_tuning).
        from_setting(
            TuningSettings,
            "enabled",
            "Tune the declared hyperparameters before training (a Katib Experiment on Kubernetes, "
            "the embedded tuner locally); false: train with the values given.",
            PER_RUN,
        ),
        from_setting(
            TuningSettings,
            "algorithm",
            "random, tpe, multivariate-tpe, cmaes, grid, sobol; on Kubernetes also "
            "bayesianoptimization (hyperband is refused: kfstack's trials have no growing resource).",
            "tuning",
        ),
        from_setting(
            TuningSettings,
            "algorithm_settings",
            'JSON object of Katib algorithm settings, e.g. {"random_state": 7}; {} for the defaults.',
            "tuning",
        ),
        Parameter(
            "tuning_search_space",
            str,
            "{}",
            "JSON, tuned argument -> feasible space (types double, int, categorical, discrete; "
            "components/tuning/hyperparameter_tuning/README.md).",
            "tuning",
        ),
        Parameter("tuning_objective", str, "", "The metric tuned: one the training code declares.", "tuning"),
        from_setting(TuningSettings, "direction", "maximize or minimize.", "tuning"),
        from_setting(
            TuningSettings, "goal", "Stop tuning once the best trial reaches it; 0 = no goal.", "tuning"
        ),
        from_setting(
            TuningSettings, "require_goal", "Fail when the trials end without reaching tuning_goal.", "tuning"
        ),
        from_setting(
            TuningSettings,
            "metric_strategy",
            "min, max or latest of a trial's reports; empty: by direction.",
            "tuning",
        ),
        from_setting(TuningSettings, "early_stopping", "medianstop or none.", "tuning"),
        from_setting(
            TuningSettings,
            "min_trials_required",
            "medianstop: succeeded trials before any trial is stopped.",
            "tuning",
        ),
        from_setting(
            TuningSettings,
            "start_step",
            "medianstop: the epoch at which a trial is judged (< trial epochs; Katib's default is 4).",
            "tuning",
        ),
        from_setting(TuningSettings, "trial_epochs", "Epochs per trial.", "tuning"),
        from_setting(
            TuningSettings, "parallel_trials", "Trials at once (capped to the cores locally).", "tuning"
        ),
        from_setting(
            TuningSettings,
            "max_trials",
            "Trials in all (`kfstack run --local` applies a small local budget).",
            "tuning",
        ),
        from_setting(
            TuningSettings, "max_failed_trials", "Tuning fails once this many trials failed.", "tuning"
        ),
        from_setting(
            TuningSettings,
            "resume_policy",
            "Kubernetes: Katib resumePolicy (Never, LongRunning, FromVolume).",
            _CLUSTER,
        ),
        from_setting(
            TuningPlacement, "timeout_seconds", "Kubernetes: longest wait for the Experiment.", _CLUSTER
        ),
        # Evaluation and the gate's scoring (gate_model; model_evaluation's threshold).
        Parameter(
            "decision_threshold",
            float,
            0.5,
            "Binary: a row is predicted positive at a probability at or above it.",
            "training",
            {"ge": 0.0, "le": 1.0},
        ),
        # Deployment (model_deployment).
        Parameter(
            "deploy",
            bool,
            True,
            "Deploy the evaluated model: the first time at 100%, later as a canary analysed on the "
            "labelled holdout, then promoted or rolled back (a KServe InferenceService on Kubernetes; "
            "model servers on loopback and the local registry locally); false: nothing is deployed and "
            "the deployment's outputs say skipped.",
            PER_RUN,
        ),
        Parameter("serving_name", str, "model", "The InferenceService (and model) name.", "deployment"),
        Parameter(
            "serving_mode",
            str,
            inference_service.SERVERLESS,
            "Kubernetes: ``serverless`` (Knative revisions, canaryTrafficPercent, scale to zero) or "
            "``standard`` (RawDeployment, the spec.canary list; KServe >= 0.20). A service keeps the "
            "mode it was created in.",
            "deployment",
            {"choices": (inference_service.SERVERLESS, inference_service.STANDARD)},
        ),
        from_setting(ServingPlacement, "node_pool", "Kubernetes: node pool of the predictor pods.", _CLUSTER),
        from_setting(
            ServingPlacement,
            "service_account",
            "Kubernetes: the predictor's service account, with the Secret KServe's storage initializer "
            "reads the model with; empty: the namespace's default.",
            _CLUSTER,
        ),
        from_setting(
            _SERVING,
            "min_replicas",
            "Kubernetes: autoscaling minimum; 0 (scale to zero) needs serverless.",
            "deployment",
            name="serving_min_replicas",
        ),
        from_setting(
            _SERVING,
            "max_replicas",
            "Kubernetes: autoscaling maximum.",
            "deployment",
            name="serving_max_replicas",
        ),
        from_setting(
            _SERVING,
            "scale_metric",
            "Kubernetes: serverless ``concurrency`` or ``rps`` (Knative), standard ``cpu`` or "
            "``memory``, with serving_autoscaler=keda also ``gpu`` or ``queue``; empty: the first of the "
            "mode's.",
            "deployment",
            name="serving_scale_metric",
        ),
        from_setting(
            _SERVING,
            "scale_target",
            "Kubernetes: the metric's target per replica (requests in flight or per second, queue "
            "length; cpu, memory and gpu: a utilisation percent, at most 100); 0: the default "
            "(concurrency 8, rps 50, cpu 80, memory 80, gpu 80, queue 8).",
            "deployment",
            name="serving_scale_target",
        ),
        from_setting(
            _SERVING,
            "autoscaler",
            "Kubernetes, standard: KServe's autoscaler class; empty: KServe's default (its HPA), ``hpa``, "
            "or ``keda`` (a KEDA ScaledObject; also scales on ``gpu`` and ``queue``).",
            "deployment",
        ),
        from_setting(
            _SERVING,
            "prometheus_address",
            "Kubernetes: the Prometheus KEDA queries for the gpu and queue metrics (e.g. "
            "http://prometheus-operated.monitoring.svc:9090); required for them, no default.",
            _CLUSTER,
        ),
        from_setting(
            _SERVING,
            "keda_authentication",
            "Kubernetes: a KEDA TriggerAuthentication in the namespace for those queries; empty: none. "
            "Needs serving_keda_auth_modes.",
            _CLUSTER,
        ),
        from_setting(
            _SERVING,
            "keda_auth_modes",
            "Kubernetes: the modes KEDA's Prometheus scaler uses the TriggerAuthentication in, "
            "comma-separated: bearer or basic, tls, custom (KEDA applies none without); required with "
            "serving_keda_authentication.",
            _CLUSTER,
        ),
        from_setting(
            _SERVING,
            "queue_metric",
            "Kubernetes: the queue-length gauge serving_scale_metric=queue sums over the predictor's pods "
            "(selected by their pod and namespace labels); empty: kfstack's server's "
            "kfstack_predictor_requests_in_flight for model_format=custom, refused for other runtimes "
            "(Triton's port 8002 is not scraped by default).",
            _CLUSTER,
        ),
        from_setting(
            _SERVING,
            "gpu_metric",
            "Kubernetes: the GPU utilisation series (percent per GPU; DCGM_FI_PROF_* ratios are scaled "
            "to percent); MIG slices report DCGM_FI_PROF_GR_ENGINE_ACTIVE only.",
            _CLUSTER,
        ),
        from_setting(
            _SERVING,
            "gpu_pod_label",
            "Kubernetes: the GPU series' label naming the pod using the GPU (exported_pod unless the "
            "DCGM exporter is scraped with honorLabels: then pod).",
            _CLUSTER,
        ),
        from_setting(
            _SERVING,
            "gpu_namespace_label",
            "Kubernetes: the GPU series' label naming that pod's namespace (exported_namespace, or "
            "namespace with honorLabels).",
            _CLUSTER,
        ),
        from_setting(
            ServingPlacement,
            "timeout_seconds",
            "Kubernetes: longest wait for each rollout state to be Ready.",
            _CLUSTER,
        ),
        # Canary analysis (model_deployment).
        from_setting(
            _SERVING,
            "canary_traffic_percent",
            "Kubernetes: the canary's share of live traffic while analysed.",
            "canary analysis",
        ),
        from_setting(
            CanaryThresholds,
            "max_error_rate",
            "Roll back above this canary error rate.",
            "canary analysis",
        ),
        from_setting(
            CanaryThresholds,
            "max_latency_ratio",
            "Roll back when the canary's p95 latency exceeds this times the stable's plus "
            "canary_latency_slack_ms.",
            "canary analysis",
        ),
        from_setting(
            CanaryThresholds,
            "latency_slack_ms",
            "Milliseconds of slack in the latency rule.",
            "canary analysis",
        ),
        from_setting(
            CanaryThresholds,
            "max_psi",
            "Roll back above this prediction shift (PSI of canary against stable); 0: not checked.",
            "canary analysis",
        ),
        from_setting(
            CanaryThresholds,
            "max_quality_drop",
            "Roll back when the canary's quality is worse than the stable's by more than this: its AUC "
            "or accuracy lower by this much, its RMSE higher by this share of the stable's (0.01: 1%).",
            "canary analysis",
        ),
        Parameter(
            "canary_records",
            int,
            2000,
            "Labelled holdout rows replayed to stable and canary.",
            "canary analysis",
            {"ge": 1},
        ),
        Parameter("canary_batch_size", int, 20, "Rows per replayed request.", "canary analysis", {"ge": 1}),
        # Drift check and champion/challenger gate (data_drift, gate_model).
        from_setting(
            DriftThresholds,
            "max_psi",
            "Retrain when a feature's PSI (new window against the production model's training data) is "
            "above this (0.1 small, 0.2 large shift).",
            "drift and gate",
        ),
        from_setting(
            DriftThresholds,
            "max_label_rate_shift",
            "Retrain when the label rate moved by more than this (0-1).",
            "drift and gate",
        ),
        Parameter(
            "drift_ignore_features",
            str,
            "",
            "Comma-separated features the drift check measures but does not decide on.",
            "drift and gate",
        ),
        Parameter("force", bool, False, "Retrain even when nothing drifted.", PER_RUN),
        Parameter(
            "trigger",
            str,
            "",
            "Why this run was started: a drift alert's receiver writes the alert, the model, when it "
            "started firing and its max PSI; empty: a schedule or by hand.",
            PER_RUN,
        ),
        # The component decides by the task's quality metric unless told (GateRule takes one).
        Parameter(
            "gate_metric",
            str,
            "",
            "The metric the champion/challenger gate decides on, any of the task's; empty: the "
            "task's quality metric (AUC, accuracy, RMSE).",
            "drift and gate",
        ),
        from_setting(
            GateRule,
            "margin",
            "How much better than production (on the new window's holdout) the retrained model must be "
            "to go on to the canary, in the gate metric's units (0: at least as good).",
            "drift and gate",
        ),
        # Kubeflow Model Registry (register_model).
        Parameter(
            "model_registry_url",
            str,
            "",
            "Kubeflow Model Registry REST base URL (e.g. "
            "http://model-registry-service.kubeflow.svc.cluster.local:8080): the model that went into "
            "production is registered there with its lineage. Empty: off.",
            "model registry",
        ),
        Parameter(
            "model_registry_author",
            str,
            model_registry.DEFAULT_AUTHOR,
            "Author of the registered versions (and owner of a new registered model).",
            "model registry",
        ),
    ]
)


if __name__ == "__main__":
    print(reference_markdown(CATALOG, "Pipeline parameters: kfstack's catalog"), end="")
