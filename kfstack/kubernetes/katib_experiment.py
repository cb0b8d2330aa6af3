"""Katib ``Experiment`` manifests (Katib v0.19, ``kubeflow.org/v1beta1``); what a finished one
says about its trials is :mod:`.katib_result`'s.

:func:`build_experiment` is a pure function like the job builders
(docs/architecture.md#pure-spec-builders): an :class:`ExperimentRequest` in -- the tuning spec
(:class:`~kfstack.tuning.spec.TuningSettings`) and one complete trial job as :mod:`.training_jobs` /
:mod:`.train_job` build it, with ``${trialParameters.<name>}`` where a trial's values go -- and the
Experiment out, built with the ``kubeflow-katib-api`` models and serialised by their ``to_dict()``.
Katib's CRDs carry no field schema, so those models are the check on its shape (the tests round-trip
it through them) and the trial job is checked against its own kind's CRD.

What Katib does with it (docs/architecture.md#katib): its suggestion service proposes parameter
assignments; for each, the experiment controller creates a ``Trial`` named
``<experiment>-<8 random characters>`` and the trial controller creates the trial job from
``trialTemplate.trialSpec`` with the placeholders substituted and ``metadata.name`` set to the
trial's name. Katib's pod webhook then rewrites the primary container of the job's primary pod to
``sh -c "<command and args joined by spaces> 1>/var/log/katib/metrics.log 2>&1 && ..."`` and a
sidecar parses the metric lines of that file with :data:`~kfstack.tuning.metric_lines.DEFAULT_FILTER`.

Choices made here:

- Everything Katib would default is written out (metric strategies, the StdOut collector and its
  filter, the trial kind's conditions and primary pod labels), so the contract is visible in the
  object and does not change with a Katib release's defaults.
- ``retain: true``: Katib otherwise deletes a trial's job as soon as the trial ends. Under the
  StdOut collector the trainer's output goes to the metrics file, not to the container log, so a
  failed trial's own account of its failure is the container's termination message, which only
  lives as long as its pod (:meth:`~.launcher.ResourceLauncher.primary_log_tail`). The jobs' own
  ``ttlSecondsAfterFinished`` (a TrainJob's runtime TTL) removes them later, and deleting the
  Experiment deletes its trials and their jobs.
- A trial job whose primary command line would not survive ``sh -c`` is refused before anything
  is submitted (:func:`validate_request`), as is one whose placeholders and trial parameters do
  not match one to one (Katib's webhook refuses the latter at create time, the former fails every
  trial at run time).
- The Experiment's name must be a DNS label of at most 40 characters (Katib's webhook rule).
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import TYPE_CHECKING, Any

from kfstack.errors import InvalidParameterError
from kfstack.kubernetes.resources import (
    EXPERIMENT,
    PYTORCHJOB,
    TFJOB,
    TRAINJOB,
    ResourceKind,
    primary_replica_type,
)
from kfstack.kubernetes.sdk import lazy_module
from kfstack.settings import katib_references, substitute_katib_parameters
from kfstack.tuning import spec
from kfstack.tuning.metric_lines import DEFAULT_FILTER
from kfstack.tuning.spec import SearchParameter, TuningSettings

if TYPE_CHECKING:
    from kubeflow_katib_api import models
else:
    models = lazy_module("kubeflow_katib_api.models")

# The trial parameter every trial template carries: the trial's own name (Katib's metadata
# substitution), so that each trial writes its model and checkpoints under a path of its own.
TRIAL_NAME = "trial_name"
TRIAL_NAME_REFERENCE = "${trialSpec.Name}"
STDOUT_COLLECTOR = "StdOut"
MEDIANSTOP = spec.MEDIANSTOP
# Katib's webhook: experiment names match this and have at most 40 characters (trial names append
# 9, and the trial jobs' pods more).
MAX_NAME_LENGTH = 40
_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# Katib's metadata references (manifest/generator.go, consts); its placeholder syntax is
# kfstack.settings' (katib_parameter, katib_references, substitute_katib_parameters).
_META_REFERENCE = re.compile(
    r"^\$\{trialSpec\.(Name|Namespace|Kind|APIVersion|(Labels|Annotations)\[.+\])\}$"
)
# Characters a shell leaves alone in a word (the set shlex.quote leaves unquoted).
_SHELL_UNSAFE = re.compile(r"[^\w@%+=:,./-]", re.ASCII)
# What `kfstack render` writes for a value only the pipeline run knows (an artifact's URI, an
# earlier task's output: kfstack.pipeline_spec's artifact_placeholder and output_placeholder).
# The shell check passes over it: the run builds the Experiment again with the real value, and
# checks that.
RUN_PLACEHOLDER = re.compile(r"\{\{(?:artifact|output):[^{}]*\}\}")


@dataclasses.dataclass(frozen=True)
class TrialParameterRef:
    """One ``trialTemplate.trialParameters`` entry: the trial job's ``${trialParameters.<name>}``
    is replaced by the value of ``reference``.

    Attributes:
        name: The placeholder's name in the trial job.
        description: What it is (shown in Katib's UI).
        reference: A tuned parameter's name (an Experiment parameter), or a Katib metadata
            reference such as ``${trialSpec.Name}``.
    """

    name: str
    description: str
    reference: str

    @property
    def is_metadata(self) -> bool:
        return self.reference.startswith("${trialSpec.")


def trial_parameters(tuning: TuningSettings) -> tuple[TrialParameterRef, ...]:
    """One trial parameter per tuned parameter (same name) and :data:`TRIAL_NAME`."""
    tuned = tuple(
        TrialParameterRef(name=p.name, description=f"{p.name}: {p.type} tuned by Katib", reference=p.name)
        for p in tuning.parameters
    )
    name = TrialParameterRef(
        name=TRIAL_NAME,
        description="the trial's name: each trial keeps its model and checkpoints under it",
        reference=TRIAL_NAME_REFERENCE,
    )
    return (*tuned, name)


@dataclasses.dataclass(frozen=True)
class ExperimentRequest:
    """Everything an Experiment manifest depends on.

    Attributes:
        name: Object name (:func:`kfstack.kubernetes.naming.resource_name`, <= 40 characters).
        labels: Labels of the Experiment (the run and task): Katib copies them to its Trials and
            their pods.
        tuning: The tuning spec.
        trial_job: One complete job, exactly as its builder returns it, with
            ``${trialParameters.<name>}`` where each trial's values go; its name and namespace
            are dropped (Katib names each trial's job after the trial).
        trial_kind: The job's kind; one with a Katib trial contract (``trial_kind.trial``).
        trial_parameters: The placeholders of ``trial_job`` and what fills them
            (:func:`trial_parameters`).
    """

    name: str
    labels: dict[str, str]
    tuning: TuningSettings
    trial_job: dict
    trial_kind: ResourceKind
    trial_parameters: tuple[TrialParameterRef, ...]


# --- validation --------------------------------------------------------------------------------


def primary_command_line(trial_job: dict, kind: ResourceKind) -> tuple[str, list[str]]:
    """Where the trial's primary container is, and its command and args as one list: what Katib's
    StdOut collector joins into ``sh -c``.

    PyTorchJob and TFJob: the container named ``kind.trial.primary_container`` of the replica the
    operator labels ``job-role=master`` (Master or Chief, else Worker). TrainJob: the runtime makes
    the container from ``spec.trainer``, whose command and args it takes.

    Raises:
        InvalidParameterError: The kind is not a trial kind, or the job has no such container.
    """
    if kind.trial is None:
        raise InvalidParameterError(f"{kind.kind} cannot run Katib trials (kfstack knows no trial contract)")
    job_spec = trial_job.get("spec") or {}
    if kind.kind == TRAINJOB.kind:
        trainer = job_spec.get("trainer") or {}
        return "spec.trainer", [*(trainer.get("command") or []), *(trainer.get("args") or [])]
    if kind.kind not in (PYTORCHJOB.kind, TFJOB.kind):
        raise InvalidParameterError(f"kfstack does not know where the primary container of a {kind.kind} is")
    replicas_key = "pytorchReplicaSpecs" if kind.kind == PYTORCHJOB.kind else "tfReplicaSpecs"
    role = primary_replica_type(trial_job)
    replica = (job_spec.get(replicas_key) or {}).get(role) or {}
    containers = ((replica.get("template") or {}).get("spec") or {}).get("containers") or []
    name = kind.trial.primary_container
    container = next((c for c in containers if c.get("name") == name), None)
    if container is None:
        raise InvalidParameterError(
            f"the trial {kind.kind}'s {role} replica has no container named {name!r}: Katib's metrics "
            f"collector reads that container of the pod labelled {kind.trial.primary_pod_labels}"
        )
    where = f"spec.{replicas_key}.{role} container {name}"
    return where, [*(container.get("command") or []), *(container.get("args") or [])]


def _check_trial_parameters(request: ExperimentRequest) -> None:
    parameters = request.trial_parameters
    names = [p.name for p in parameters]
    references = [p.reference for p in parameters]
    for label, values in (("name", names), ("reference", references)):
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            raise InvalidParameterError(f"trial parameters: {label} {', '.join(twice)} appears twice")
    tuned = [p.name for p in request.tuning.parameters]
    for parameter in parameters:
        if not parameter.name or "{" in parameter.name or "}" in parameter.name:
            raise InvalidParameterError(
                f"trial parameter name {parameter.name!r} must be non-empty, without {{ }}"
            )
        if parameter.is_metadata:
            if not _META_REFERENCE.match(parameter.reference):
                raise InvalidParameterError(
                    f"trial parameter {parameter.name!r}: {parameter.reference!r} is not a Katib metadata "
                    f"reference (${{trialSpec.Name}}, .Namespace, .Kind, .APIVersion, .Labels[k], "
                    f".Annotations[k])"
                )
        elif parameter.reference not in tuned:
            raise InvalidParameterError(
                f"trial parameter {parameter.name!r} references {parameter.reference!r}, which is not "
                f"tuned (tuning_search_space has {', '.join(tuned)})"
            )
    missing = [name for name in tuned if name not in references]
    if missing:
        raise InvalidParameterError(
            f"tuned parameter(s) {', '.join(missing)} reach no trial parameter: Katib fails every trial "
            f"whose assignments the template does not take; add a trial parameter referencing each"
        )


def _check_placeholders(request: ExperimentRequest) -> None:
    used = katib_references(json.dumps(request.trial_job))
    declared = {p.name for p in request.trial_parameters}
    unknown = sorted(used - declared)
    if unknown:
        raise InvalidParameterError(
            f"the trial {request.trial_kind.kind} uses "
            f"{', '.join('${trialParameters.' + n + '}' for n in unknown)}, which no trial parameter "
            f"declares (declared: {', '.join(sorted(declared)) or 'none'}); Katib would refuse the Experiment"
        )
    unused = sorted(declared - used)
    if unused:
        raise InvalidParameterError(
            f"trial parameter(s) {', '.join(unused)} appear nowhere in the trial {request.trial_kind.kind} "
            f"(as ${{trialParameters.<name>}}): a tuned value would never reach the trainer; Katib "
            f"would refuse the Experiment"
        )


def _format_number(value: float, kind: str) -> str:
    """A bound as Katib parses it: an int's without a fraction (Go's Atoi refuses ``1.0``)."""
    return str(int(value)) if kind == spec.INT else repr(float(value))


def _sample_values(parameter: TrialParameterRef, tuning: TuningSettings, experiment: str) -> list[str]:
    """Values Katib may substitute for ``parameter``: every choice, or a range's bounds."""
    if parameter.is_metadata:
        return [f"{experiment}-abcdefgh"]  # a trial's name; the other metadata is of the same kind
    (searched,) = [p for p in tuning.parameters if p.name == parameter.reference]
    if searched.values:
        return list(searched.values)
    assert searched.min is not None and searched.max is not None
    return [_format_number(searched.min, searched.type), _format_number(searched.max, searched.type)]


def _substituted(arg: str, samples: dict[str, list[str]]) -> list[str]:
    """``arg`` with each of its placeholders in turn taking each of its sample values."""
    found = sorted(katib_references(arg))
    first = {name: samples[name][0] for name in found}

    def fill(values: dict[str, str]) -> str:
        return substitute_katib_parameters(arg, values)

    return [fill(first)] + [fill({**first, name: value}) for name in found for value in samples[name][1:]]


def _check_command_line(request: ExperimentRequest) -> None:
    where, command_line = primary_command_line(request.trial_job, request.trial_kind)
    kind = request.trial_kind.kind
    if not command_line:
        raise InvalidParameterError(
            f"the trial {kind}'s primary container ({where}) sets no command: Katib would read the "
            f"image's entrypoint from the registry; state the command"
        )
    samples = {p.name: _sample_values(p, request.tuning, request.name) for p in request.trial_parameters}
    for arg in command_line:
        for candidate in _substituted(RUN_PLACEHOLDER.sub("run-value", arg), samples):
            if candidate and not _SHELL_UNSAFE.search(candidate):
                continue
            shown = "" if candidate == arg else f" (as {candidate!r} with a trial's values)"
            problem = "is empty" if not candidate else "holds whitespace or a shell metacharacter"
            raise InvalidParameterError(
                f"the trial {kind}'s primary command line ({where}): argument {arg!r}{shown} {problem}. "
                f"Katib's StdOut metrics collector runs the command line as `sh -c` with the arguments "
                f"joined by spaces, unquoted, so the shell would split, drop or interpret it: pass such "
                f"a value through a file or an environment variable"
            )


def validate_request(request: ExperimentRequest) -> None:
    """Raises before anything is built (and so before anything is submitted).

    Raises:
        InvalidParameterError: A name Katib refuses; a trial kind without a trial contract; a
            trial job of another kind than ``trial_kind``, or one Katib's StdOut collector would break (see
            :func:`primary_command_line`); placeholders and trial parameters that do not match
            one to one; a tuned parameter no trial parameter takes; a failure budget above the
            trial budget.
    """
    if len(request.name) > MAX_NAME_LENGTH or not _NAME.match(request.name):
        raise InvalidParameterError(
            f"Experiment name {request.name!r} must be a DNS label of at most {MAX_NAME_LENGTH} "
            f"characters starting with a letter (Katib's rule)"
        )
    kind = request.trial_kind
    if kind.trial is None:
        raise InvalidParameterError(f"{kind.kind} cannot run Katib trials (kfstack knows no trial contract)")
    job = request.trial_job
    if (job.get("apiVersion"), job.get("kind")) != (kind.api_version, kind.kind):
        raise InvalidParameterError(
            f"the trial job is a {job.get('apiVersion')} {job.get('kind')}, not the "
            f"{kind.api_version} {kind.kind} the request names"
        )
    tuning = request.tuning
    if tuning.max_failed_trials > tuning.max_trials:
        raise InvalidParameterError(
            f"tuning_max_failed_trials={tuning.max_failed_trials} must be <= "
            f"tuning_max_trials={tuning.max_trials} (Katib refuses it)"
        )
    _check_trial_parameters(request)
    _check_placeholders(request)
    _check_command_line(request)


# --- the manifest ------------------------------------------------------------------------------


def _objective(tuning: TuningSettings) -> models.V1beta1ObjectiveSpec:
    return models.V1beta1ObjectiveSpec(
        type=tuning.direction,
        objective_metric_name=tuning.objective,
        goal=tuning.goal if tuning.has_goal else None,
        additional_metric_names=list(tuning.additional_metrics) or None,
        metric_strategies=[
            models.V1beta1MetricStrategy(name=name, value=strategy)
            for name, strategy in tuning.metric_strategies.items()
        ],
    )


def _algorithm(tuning: TuningSettings) -> models.V1beta1AlgorithmSpec:
    settings = [
        models.V1beta1AlgorithmSetting(name=name, value=value)
        for name, value in tuning.algorithm_config.items()
    ]
    return models.V1beta1AlgorithmSpec(algorithm_name=tuning.algorithm, algorithm_settings=settings or None)


def _early_stopping(tuning: TuningSettings) -> models.V1beta1EarlyStoppingSpec | None:
    if tuning.early_stopping != MEDIANSTOP:
        return None
    return models.V1beta1EarlyStoppingSpec(
        algorithm_name=MEDIANSTOP,
        algorithm_settings=[
            models.V1beta1EarlyStoppingSetting(
                name="min_trials_required", value=str(tuning.min_trials_required)
            ),
            models.V1beta1EarlyStoppingSetting(name="start_step", value=str(tuning.start_step)),
        ],
    )


def _parameter(parameter: SearchParameter) -> models.V1beta1ParameterSpec:
    if parameter.is_range:
        assert parameter.min is not None and parameter.max is not None
        space = models.V1beta1FeasibleSpace(
            min=_format_number(parameter.min, parameter.type),
            max=_format_number(parameter.max, parameter.type),
            step=None if parameter.step is None else _format_number(parameter.step, parameter.type),
            distribution=spec.KATIB_DISTRIBUTION[parameter.scale],
        )
    else:
        space = models.V1beta1FeasibleSpace(list=list(parameter.values))
    return models.V1beta1ParameterSpec(
        name=parameter.name, parameter_type=parameter.type, feasible_space=space
    )


def _trial_spec(trial_job: dict) -> dict[str, Any]:
    """The trial job as the template: a plain copy (JSON types only) without name and namespace."""
    template = json.loads(json.dumps(trial_job))
    metadata = template.get("metadata") or {}
    for key in ("name", "namespace"):
        metadata.pop(key, None)
    template["metadata"] = metadata
    return template


def _trial_template(request: ExperimentRequest) -> models.V1beta1TrialTemplate:
    contract = request.trial_kind.trial
    assert contract is not None  # validate_request refuses a kind without one
    return models.V1beta1TrialTemplate(
        primary_container_name=contract.primary_container,
        primary_pod_labels=dict(contract.primary_pod_labels),
        success_condition=contract.success_condition,
        failure_condition=contract.failure_condition,
        # Keep finished trials' jobs: a failed trial's termination message lives with its pod
        # (see the module docstring); the jobs' TTL and the Experiment's deletion remove them.
        retain=True,
        trial_parameters=[
            models.V1beta1TrialParameterSpec(name=p.name, description=p.description, reference=p.reference)
            for p in request.trial_parameters
        ],
        trial_spec=_trial_spec(request.trial_job),
    )


def build_experiment(request: ExperimentRequest) -> dict:
    """A ``kubeflow.org/v1beta1`` Experiment whose trials run ``request.trial_job``.

    Returns:
        The manifest as a dict (camelCase, no empty fields); no namespace (the launcher sets its
        own).

    Raises:
        InvalidParameterError: See :func:`validate_request`.
    """
    validate_request(request)
    tuning = request.tuning
    experiment = models.V1beta1Experiment(
        api_version=EXPERIMENT.api_version,
        kind=EXPERIMENT.kind,
        metadata=models.IoK8sApimachineryPkgApisMetaV1ObjectMeta(
            name=request.name, labels=dict(request.labels) or None
        ),
        spec=models.V1beta1ExperimentSpec(
            objective=_objective(tuning),
            algorithm=_algorithm(tuning),
            early_stopping=_early_stopping(tuning),
            parallel_trial_count=tuning.parallel_trials,
            max_trial_count=tuning.max_trials,
            max_failed_trial_count=tuning.max_failed_trials,
            resume_policy=tuning.resume_policy,
            parameters=[_parameter(p) for p in tuning.parameters],
            # Katib's default collector and filter, stated: DEFAULT_FILTER is also the embedded
            # tuner's parser (kfstack.tuning.metric_lines), so both read the same values.
            metrics_collector_spec=models.V1beta1MetricsCollectorSpec(
                collector=models.V1beta1CollectorSpec(kind=STDOUT_COLLECTOR),
                source=models.V1beta1SourceSpec(
                    filter=models.V1beta1FilterSpec(metrics_format=[DEFAULT_FILTER])
                ),
            ),
            trial_template=_trial_template(request),
        ),
    )
    return experiment.to_dict()
