"""The platform seam: one stage, two platforms, one contract (docs/architecture.md#the-platform-seam).

A launching stage implements :class:`Stage` once per concern -- its typed settings from the
component's arguments, the Kubernetes objects it creates (a pure builder), the same work run on
this machine, and what it reports once its cluster objects finished -- and :func:`run_stage`
picks the platform. No component carries an ``if platform`` branch of its own, and
``kfstack render`` calls the same ``settings`` and ``build`` for every launching task it finds in
a compiled pipeline (:mod:`kfstack.pipeline_spec`).

``local`` is the embedded platform: kfp.local runs the tasks as subprocesses, Spark runs in
``local[*]`` inside the task, the trainer runs as N local processes with the env the operator
would set. ``kubernetes`` creates the stage's objects in the launch namespace (the placement's
``launch_namespace``, else the task pod's own), once an access review says the task may
(:mod:`kfstack.kubernetes.access`), and runs each by its lifecycle
(:mod:`kfstack.kubernetes.launcher`).

A stage whose cluster work depends on what already runs there -- a deployment, whose canary
patches the live InferenceService -- is a :class:`ServiceStage`: its ``build`` is what a first
run creates (for ``kfstack render`` and the early refusal of bad values) and its
``run_kubernetes`` does the work in place of launch-then-collect.

A stage may run in more than one way depending on what the cluster serves (training: a TrainJob
of Trainer v2 or a PyTorchJob of the v1 operator). :meth:`Stage.variants` lists the ways in order
of preference, each with the API kinds it needs; on Kubernetes the first one the cluster serves
runs (:func:`choose_variant`, by API discovery), on the embedded platform -- which has every
contract -- the first, and ``kfstack render`` renders each with the condition it runs under.

Within a variant, the controller's release decides the form of a body: before the first create
a server-side dry run checks each body against the cluster's CRD, and an older release gets the
older form of it where one exists (a TrainJob on Kubeflow Trainer v2.1), or a refusal naming the
field and the release that has it (:mod:`kfstack.kubernetes.dry_run`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Iterator, Mapping
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from kfstack.errors import InvalidParameterError, PlatformNotAvailableError
from kfstack.kubernetes import access, dry_run
from kfstack.kubernetes.launcher import Cluster, launch
from kfstack.kubernetes.naming import RunContext
from kfstack.kubernetes.placement import Placement
from kfstack.kubernetes.resources import ResourceKind
from kfstack.settings import with_overrides
from kfstack.tracking import cluster as cluster_tracking
from kfstack.version import VERSION_ENV

LOCAL = "local"
KUBERNETES = "kubernetes"
PLATFORMS = (LOCAL, KUBERNETES)

# The component arguments every launching stage takes besides its own (pipeline placeholders
# fill run_id and task_name: the cluster objects' names derive from them).
PLATFORM_ARGUMENT = "platform"
RUN_ID_ARGUMENT = "run_id"
TASK_NAME_ARGUMENT = "task_name"
# The setting a component that launches nothing is tracked by (tracked_task); a launching one
# reads it with its placement.
TRACKING_URI_ARGUMENT = "tracking_uri"

# Set by the embedded runner in every task process: the run's directory, where a stage keeps
# what lets an interrupted run resume (``kfstack run --local --resume RUN_DIR``).
RUN_DIR_ENV = "KFSTACK_RUN_DIR"


class StageSettings(Protocol):
    """What :func:`run_stage` needs of a stage's settings: where its cluster work goes."""

    @property
    def placement(self) -> Placement: ...


SettingsT = TypeVar("SettingsT", bound=StageSettings)


@dataclasses.dataclass(frozen=True)
class StageResult:
    """What a stage reports, whichever platform ran it.

    Attributes:
        metrics: Output name of a ``Metrics`` artifact -> the scalars logged on it.
        reference: What ran the stage (the cluster object's coordinates, or the local process
            group), written to the stage's reference artifact.
        outputs: The component's parameter outputs (name -> value), which its body returns.
        documents: Output name of a ``Markdown``/``HTML`` artifact -> the text written to it.
        artifact_metadata: Output name of an artifact -> metadata KFP records on it (a model's
            versions), shown in the UI and kept in the run's lineage.
    """

    metrics: Mapping[str, Mapping[str, float]]
    reference: Mapping[str, Any]
    outputs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    documents: Mapping[str, str] = dataclasses.field(default_factory=dict)
    artifact_metadata: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Variant(Generic[SettingsT]):
    """One way a stage can run on Kubernetes.

    Attributes:
        settings: The stage's settings with the choice made (e.g. ``training_api=trainer-v2``).
        requires: The API kinds the cluster must serve for it (what :meth:`Stage.build` creates).
        choice: The choice in the user's words (``training_api=trainer-v2``); empty when the
            stage has a single way.
    """

    settings: SettingsT
    requires: tuple[ResourceKind, ...]
    choice: str = ""


class StageBase(Protocol, Generic[SettingsT]):
    """What every stage has, whatever its Kubernetes flow (see :class:`Stage`, :class:`ServiceStage`).

    Attributes:
        component: The KFP component's name (``distributed-training``): how ``kfstack render`` finds the
            stage of a task in a compiled pipeline.
        reference_output: Name of the output artifact that records what ran the stage.
    """

    component: str
    reference_output: str

    def settings(self, arguments: Mapping[str, Any]) -> SettingsT:
        """Typed, validated settings from the component's arguments (artifacts as URIs).

        Raises:
            InvalidParameterError: A value is bad; nothing was started.
        """
        ...

    def preflight(self, settings: SettingsT) -> None:
        """Checks that must read something (its inputs exist and fit), on either platform,
        before anything starts; ``kfstack render`` skips them. Gets the settings as the
        arguments gave them (before a variant is chosen)."""
        ...

    def variants(self, settings: SettingsT) -> list[Variant[SettingsT]]:
        """The ways this stage can run, in order of preference (at least one).

        Raises:
            InvalidParameterError: The settings leave no way to run (nothing was started).
        """
        ...

    def build(self, settings: SettingsT, context: RunContext) -> list[dict]:
        """The Kubernetes objects this stage creates with settings of one of its
        :meth:`variants`: pure, no API call."""
        ...

    def run_local(self, settings: SettingsT) -> StageResult:
        """The same work on this machine."""
        ...


class Stage(StageBase[SettingsT], Protocol):
    """A pipeline step that launches work, on either platform: on Kubernetes its :meth:`build`
    objects are launched by their lifecycle, then :meth:`collect` reads what they left."""

    def collect(self, settings: SettingsT, finished: list[dict], cluster: Cluster) -> StageResult:
        """The result, once every object of :meth:`build` finished (read back its reports, or
        what the cluster keeps about them)."""
        ...


@runtime_checkable
class ServiceStage(StageBase[SettingsT], Protocol):
    """A step whose Kubernetes work depends on what the cluster already runs (a deployment: its
    canary patches the live InferenceService), so it is not build-then-launch. :meth:`build`
    still gives what a first run creates (``kfstack render``, and a bad value refused before any
    API call); :meth:`run_kubernetes` does the work."""

    def run_kubernetes(self, settings: SettingsT, context: RunContext, cluster: Cluster) -> StageResult:
        """The step on the cluster, once the variant is chosen."""
        ...


def require_available(platform: str, stage: str) -> None:
    """Raises unless ``platform`` is one kfstack runs on; call before submitting anything.

    Raises:
        InvalidParameterError: ``platform`` is not a known platform.
    """
    if platform not in PLATFORMS:
        raise InvalidParameterError(f"{stage}: platform={platform!r} is not one of {', '.join(PLATFORMS)}")


def is_artifact(value: Any) -> bool:
    """A KFP artifact argument (``Input[...]``/``Output[...]``), told apart by its attributes."""
    return hasattr(value, "uri") and hasattr(value, "path") and hasattr(value, "metadata")


def artifact_location(platform: str, artifact: Any) -> str:
    """Where a stage's work reads or writes ``artifact``.

    Locally the task's own path. On Kubernetes the launched pods run elsewhere, so they get the
    artifact's remote URI (``s3://...``; KFP uploads nothing for them). Whatever the task itself
    writes to ``artifact.path`` is uploaded next to the job's files by KFP.
    """
    return str(artifact.uri if platform == KUBERNETES else artifact.path)


def locate_artifacts(platform: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` with every artifact replaced by its location on ``platform``."""
    return {
        name: artifact_location(platform, value) if is_artifact(value) else value
        for name, value in arguments.items()
    }


def _needs(variant: Variant[Any]) -> str:
    return " and ".join(
        f"{kind.api_version} {kind.kind}" + (f" ({kind.provided_by})" if kind.provided_by else "")
        for kind in variant.requires
    )


def choose_variant(stage: str, variants: list[Variant[SettingsT]], cluster: Cluster) -> Variant[SettingsT]:
    """The first of ``variants`` whose kinds the cluster serves (asked through API discovery).

    Raises:
        PlatformNotAvailableError: The cluster serves what none of them needs; the message says
            what each would need. Nothing was submitted.
    """
    served: dict[str, bool] = {}
    for variant in variants:
        for kind in variant.requires:
            if kind.kind not in served:
                served[kind.kind] = cluster.serves(kind)
        if all(served[kind.kind] for kind in variant.requires):
            return variant
    needs = "; ".join(
        (f"{variant.choice} needs " if variant.choice else "it needs ") + _needs(variant)
        for variant in variants
    )
    if len(variants) == 1:
        # A forced choice (training_api=v1) may have an alternative the cluster does serve.
        parameter = variants[0].choice.partition("=")[0]
        todo = "Install it (manifests/README.md)" + (f" or choose another {parameter}" if parameter else "")
    else:
        todo = "Install one of them (manifests/README.md)"
    raise PlatformNotAvailableError(
        f"{stage}: the cluster does not serve the API this step needs: {needs}. {todo}. "
        f"Nothing was submitted."
    )


def variant_conditions(variants: list[Variant[Any]]) -> list[tuple[str, ...]]:
    """For ``kfstack render``: the condition under which each variant is the one that runs."""
    if len(variants) == 1:
        return [()]
    conditions: list[tuple[str, ...]] = []
    for i, variant in enumerate(variants):
        condition = f"{variant.choice}: the cluster serves {_needs(variant)}"
        if i:
            condition += " and not " + " / ".join(_needs(earlier) for earlier in variants[:i])
        conditions.append((condition,))
    return conditions


def run_stage(
    stage: Stage[Any] | ServiceStage[Any], arguments: Mapping[str, Any], cluster: Cluster | None = None
) -> StageResult:
    """A launching component's whole body: settings, the platform's run, the outputs.

    Args:
        stage: The component's stage.
        arguments: The component's arguments as KFP passes them (``locals()`` of its body:
            parameters and ``Input``/``Output`` artifacts), the run's ``settings_overrides``
            among them (:func:`kfstack.settings.with_overrides` applies them first).
        cluster: Kubernetes only: the cluster to use; default: this pod's
            (:meth:`Cluster.from_environment`).

    Returns:
        The stage's result, already logged on its ``Metrics`` outputs and its reference artifact.

    Raises:
        InvalidParameterError: A bad argument (nothing was started).
        PlatformNotAvailableError: ``kubernetes`` without a reachable API, or one that serves
            none of the stage's variants, or a launch namespace where the task lacks a
            permission or a LocalQueue (:class:`~kfstack.errors.LaunchNamespaceError`).
        ResourceFailedError, TrainingFailedError, DataQualityError...: the work failed.
    """
    arguments = with_overrides(arguments)
    platform = arguments.get(PLATFORM_ARGUMENT, "")
    require_available(platform, stage.component)
    settings = stage.settings(locate_artifacts(platform, arguments))
    variants = stage.variants(settings)
    stage.preflight(settings)
    if platform != KUBERNETES:
        # The embedded platform has every variant's contract: the preferred one runs.
        local = stage.run_local(variants[0].settings)
        result = dataclasses.replace(local, reference={"platform": LOCAL, **local.reference})
        publish(result, stage, arguments)
        return result
    context = RunContext(
        run_id=arguments.get(RUN_ID_ARGUMENT, ""),
        task_name=arguments.get(TASK_NAME_ARGUMENT) or stage.component,
    )
    # Every variant is built first: a value its builder refuses fails before any API call (and
    # before the task's MLflow run is made).
    for variant in variants:
        stage.build(variant.settings, context)
    cluster = cluster or Cluster.from_environment(stage.component, settings.placement.launch_namespace)
    variant = choose_variant(stage.component, variants, cluster)
    # The task's MLflow run, which the batch jobs' pods log into (kfstack.tracking.cluster); a
    # service stage's pods (the predictors) are told nothing of it.
    tracking = _task_tracking(settings.placement.tracking_uri, settings.placement.tracking_secret, context)
    context = dataclasses.replace(context, tracking=tracking)
    built = stage.build(variant.settings, context)
    with cluster_tracking.tracked_work(tracking) as outputs:
        # Before the first create: may this step's service account launch them there?
        access.review(stage.component, cluster, built)
        # And does the cluster's controller release accept each whole (a dry run), or an older
        # form of it? A feature it lacks is refused here, never half done.
        objects = [dry_run.fitted(stage.component, cluster, body) for body in built]
        # A service stage applies what the cluster already runs calls for (run_kubernetes): for it
        # the dry run is the check alone (no service kind has an older form).
        if isinstance(stage, ServiceStage):
            result = stage.run_kubernetes(variant.settings, context, cluster)
        else:
            result = _launch_and_collect(stage, variant.settings, objects, cluster)
        result = dataclasses.replace(result, reference={"platform": KUBERNETES, **result.reference})
        publish(result, stage, arguments)
        outputs.update(_outputs(result, stage, arguments))
    return result


@contextlib.contextmanager
def tracked_task(component: str, arguments: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The body of a component that launches nothing (the evaluation), tracked on a cluster as
    :func:`run_stage` tracks a launching one: what the body puts into the yielded dict (its
    outputs, as KFP hands them over) is logged into the task's MLflow run, and the run ends with
    the body's outcome. In an embedded run (:data:`RUN_DIR_ENV` set) nothing is tracked here:
    the runner tracks every task from outside it.

    ``arguments``: the component's, with ``run_id``, ``task_name`` and the ``tracking_uri``
    setting (each optional: without a run id the task is tracked only where KFP's plugin made
    its run).
    """
    tracking = None
    if RUN_DIR_ENV not in os.environ:
        context = RunContext(
            run_id=arguments.get(RUN_ID_ARGUMENT, ""),
            task_name=arguments.get(TASK_NAME_ARGUMENT) or component,
        )
        # It launches no pod: no Secret to pass on.
        tracking = _task_tracking(arguments.get(TRACKING_URI_ARGUMENT, ""), "", context)
    with cluster_tracking.tracked_work(tracking) as outputs:
        yield outputs


def _task_tracking(
    tracking_uri: str, tracking_secret: str, context: RunContext
) -> cluster_tracking.TaskTracking | None:
    """The task's MLflow run: KFP's plugin's, or made here where the environment names a server."""
    return cluster_tracking.task_tracking(
        os.environ,
        tracking_uri,
        tracking_secret,
        context.run_id,
        cluster_tracking.experiment_of(os.environ),
        context.task_name,
        os.environ.get(VERSION_ENV, ""),
    )


def _outputs(result: StageResult, stage: StageBase[Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """What the stage output, as KFP hands a task's outputs over: its artifacts (``Metrics``,
    documents, the model, the reference) and its parameter outputs."""
    names = {*result.metrics, *result.documents, *result.artifact_metadata, stage.reference_output}
    return {**{name: arguments[name] for name in names if name in arguments}, **result.outputs}


def _launch_and_collect(
    stage: Stage[Any], settings: Any, objects: list[dict], cluster: Cluster
) -> StageResult:
    """Launches each built object by its lifecycle, then collects the stage's result."""
    finished, references = [], []
    for body in objects:
        final, reference = launch(body, settings.placement, cluster)
        finished.append(final)
        references.append(reference)
    collected = stage.collect(settings, finished, cluster)
    reference = references[0] if len(references) == 1 else {"objects": references} if references else {}
    return dataclasses.replace(collected, reference={**reference, **collected.reference})


def publish(result: StageResult, stage: StageBase[Any], arguments: Mapping[str, Any]) -> None:
    """Logs the result's metrics on the ``Metrics`` outputs, writes its documents, sets its
    artifacts' metadata and writes the reference artifact."""
    for output, values in result.metrics.items():
        for name, value in values.items():
            arguments[output].log_metric(name, value)
    for output, text in result.documents.items():
        with open(arguments[output].path, "w", encoding="utf-8") as f:
            f.write(text)
    for output, metadata in result.artifact_metadata.items():
        arguments[output].metadata.update(metadata)
    reference_artifact = arguments.get(stage.reference_output)
    if reference_artifact is not None:
        reference_artifact.metadata.update(result.reference)
        with open(reference_artifact.path, "w", encoding="utf-8") as f:
            json.dump(dict(result.reference), f, indent=2)
