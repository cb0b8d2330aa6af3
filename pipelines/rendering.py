"""What a run of a registered pipeline would create, derived from the pipeline itself.

The pipeline is compiled in-process (milliseconds), its compiled spec is walked
(:mod:`kfstack.pipeline_spec`) to every task of a launching component, and each such task's
stage (:func:`kfstack.components.launching_stages`) turns the task's resolved arguments into its
typed settings and builds its Kubernetes objects -- the same two calls the task makes on a
cluster. No wiring is written down twice: a new launching component appears here as soon as its
folder has a ``stage.py`` and the pipeline calls it.

Users: ``kfstack render`` (review, GitOps), ``kfstack run --local`` (a bad value fails before
anything starts) and the pipeline's own validate-parameters task (on the cluster, before the
first stage).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import json
import logging
import math
import os
import sys
import tempfile
from collections.abc import Mapping
from typing import Any

import yaml
from kfp import compiler

from kfstack import errors, pipeline_spec, platforms
from kfstack.components import component_identities, launching_stages
from kfstack.errors import UsageError
from kfstack.kubernetes import access, dry_run, serving_runtime
from kfstack.kubernetes.launcher import Cluster
from kfstack.kubernetes.naming import RunContext
from kfstack.pipelines import entry, load_pipeline, run_check, run_form
from kfstack.settings import Placeholder

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class RenderedTask:
    """The objects one launching task of the run would create (``component``: its
    ``module:function``)."""

    task: str
    component: str
    objects: list[dict]
    when: tuple[str, ...] = ()


def compiled_spec(pipeline_func: Any) -> dict[str, Any]:
    """The pipeline spec exactly as KFP's compiler writes it (first YAML document): a fresh
    copy each call, compiled once per pipeline function and environment (the images kfstack's
    components name come from it)."""
    return json.loads(_compiled_text(pipeline_func, tuple(sorted(os.environ.items()))))


@functools.lru_cache(maxsize=32)
def _compiled_text(pipeline_func: Any, environment: tuple[tuple[str, str], ...]) -> str:
    """``pipeline_func`` compiled, as JSON text; ``environment`` (this process's variables) is
    part of the cache's key only."""
    del environment
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "pipeline.yaml")
        compiler.Compiler().compile(pipeline_func, package_path=path)
        with open(path, encoding="utf-8") as f:
            return json.dumps(pipeline_spec.read_documents(f)[0])


def parameter_types(pipeline_func: Any) -> dict[str, str]:
    """Parameter name -> KFP type (``Integer``, ``Float``, ``Boolean``, ``String``...)."""
    return {name: spec.type for name, spec in pipeline_func.component_spec.inputs.items()}


def convert(name: str, raw: Any, kfp_type: str) -> Any:
    """``raw`` (a string from a command line or a KFP struct) as a value of ``kfp_type``.

    Raises:
        UsageError: It does not read as that type.
    """
    if kfp_type == "Integer" and isinstance(raw, float) and raw.is_integer():
        return int(raw)  # a number of a KFP struct (a dict input, settings_overrides) is a double
    if not isinstance(raw, str):
        return raw
    expected = {"Boolean": "true or false", "Integer": "a whole number", "Float": "a finite number"}
    try:
        if kfp_type == "Boolean":
            lowered = raw.lower()
            if lowered not in ("true", "1", "yes", "false", "0", "no"):
                raise ValueError(raw)
            return lowered in ("true", "1", "yes")
        if kfp_type == "Integer":
            number = float(raw)  # a KFP struct writes integer parameters as "3.0"
            if not number.is_integer():
                raise ValueError(raw)
            return int(number)
        if kfp_type == "Float":
            number = float(raw)
            if not math.isfinite(number):  # no setting has a use for nan or inf
                raise ValueError(raw)
            return number
    except ValueError:
        raise UsageError(f"{name}={raw!r}: expected {expected[kfp_type]}") from None
    return raw


def run_parameters(pipeline: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """Every parameter of ``pipeline``: its default, or the typed value given.

    Raises:
        UsageError: An unknown pipeline or parameter name, or a value of the wrong type.
    """
    pipeline_func = load_pipeline(pipeline)
    types = parameter_types(pipeline_func)
    values = run_form.current_names(pipeline_func, values)
    unknown = sorted(set(values) - set(types))
    if unknown:
        raise UsageError(f"{pipeline}: unknown parameter {', '.join(unknown)}; known: {', '.join(types)}")
    defaults = {name: spec.default for name, spec in pipeline_func.component_spec.inputs.items()}
    return {**defaults, **{name: convert(name, raw, types[name]) for name, raw in values.items()}}


def _launching_variants(
    pipeline: str, values: Mapping[str, Any], run_id: str, components_packages: tuple[str, ...] = ()
) -> list[tuple[pipeline_spec.LaunchingTask, Any, list[platforms.Variant[Any]]]]:
    """Every launching task of a ``platform=kubernetes`` run, its stage and its variants.

    Raises:
        UsageError, InvalidParameterError: See :func:`render`.
    """
    parameters = {**run_parameters(pipeline, values), platforms.PLATFORM_ARGUMENT: platforms.KUBERNETES}
    run_check(pipeline)(parameters)
    stages = launching_stages(*components_packages)
    spec = compiled_spec(load_pipeline(pipeline))
    found = []
    for task in pipeline_spec.launching_tasks(spec, parameters, component_identities(stages), run_id):
        stage = stages[task.component]
        found.append((task, stage, stage.variants(stage.settings(task.arguments))))
    return found


def render(
    pipeline: str,
    values: Mapping[str, Any],
    run_id: str,
    components_packages: tuple[str, ...] = (),
    *,
    for_a_cluster: bool = False,
    warnings: list[str] | None = None,
) -> list[RenderedTask]:
    """The Kubernetes objects a ``platform=kubernetes`` run of ``pipeline`` would create.

    Where the run would choose by what the cluster serves (``training_api=auto``), each
    alternative is rendered with its condition in :attr:`RenderedTask.when`; give an explicit
    choice (``training_api=v1`` or ``trainer-v2``) for the objects of one cluster.

    Args:
        pipeline: A registered pipeline (``kfstack list``).
        values: Pipeline parameters (typed, or strings to type); the rest take their defaults.
        run_id: Stands in for the KFP run id (names and labels).
        components_packages: Packages to search for launching stages besides kfstack's own
            and those installed packages declare (:func:`kfstack.components.launching_stages`).
        for_a_cluster: The objects are for a cluster (``kfstack render``, a cluster run or
            schedule), not the checks of an embedded run: a value that is a path of this
            machine is refused (:func:`refuse_machine_paths`), and the ServingRuntime the
            project ships is checked against the pipeline (:func:`check_shipped_runtimes`).
        warnings: Where given, what works but should change (``for_a_cluster``: a shipped
            runtime's) is appended to it; else it is logged.

    Raises:
        UsageError: Unknown pipeline or parameter, or a mistyped value; ``for_a_cluster``: a
            value that is a path of this machine.
        InvalidParameterError: A value a stage or the pipeline's rules refuse (nothing rendered);
            ``for_a_cluster``: a shipped ServingRuntime that does not serve the pipeline's
            predictor, naming the file's value and the pipeline's.
    """
    launching = _launching_variants(pipeline, values, run_id, components_packages)
    if for_a_cluster:
        refuse_machine_paths(pipeline, run_parameters(pipeline, values), launching)
        for warning in check_shipped_runtimes(pipeline, launching):
            if warnings is None:
                logger.warning("%s", warning)
            else:
                warnings.append(warning)
    return _build_all(launching, run_id)


def check_shipped_runtimes(
    pipeline: str, launching: list[tuple[pipeline_spec.LaunchingTask, Any, list[platforms.Variant[Any]]]]
) -> list[str]:
    """The ServingRuntime the pipeline's project ships (``manifests/`` of the project its
    predictor's package is developed in) against what the pipeline declares of its own server:
    the class, the format, the package, the image (:mod:`kfstack.kubernetes.serving_runtime`).
    A project installed from a wheel ships no manifests here: nothing to check (the run's first
    task checks the cluster's). Returns what works but should change.

    Raises:
        InvalidParameterError: Naming the step, the file's value and the pipeline's.
    """
    warnings = []
    for task, stage, variants in launching:
        declare = getattr(stage, "declared_runtime", None)  # a stage that deploys a team's server
        declared = declare(variants[0].settings) if declare else None
        if declared is None:
            continue
        project = project_root(declared.model_class.partition(":")[0])
        if project is None:
            continue
        try:
            found = serving_runtime.check_shipped(project, declared)
        except errors.InvalidParameterError as err:
            raise errors.InvalidParameterError(f"{pipeline}: {task.task}: {err}") from None
        warnings += [f"{pipeline}: {task.task}: {warning}" for warning in found]
    return warnings


def machine_path(value: str, roots: list[str]) -> str:
    """The path of this machine ``value`` names, or empty: an absolute path (as it is, a
    ``file://`` URI, or the value of a ``--flag=PATH`` argument) that exists here and lies inside
    one of ``roots`` (not a root itself: a pod has a ``/tmp`` of its own)."""
    candidate = value.partition("=")[2] if value.startswith("-") else value
    if candidate.startswith("file://"):
        candidate = candidate.removeprefix("file://")
    if not (os.path.isabs(candidate) and os.path.exists(candidate)):
        return ""
    real = os.path.realpath(candidate)
    for root in roots:
        if root and real != root and real.startswith(root.rstrip(os.sep) + os.sep):
            return candidate
    return ""


def machine_roots(pipeline_module: str = "") -> list[str]:
    """Where a path names a file of this machine alone: the working directory, the project the
    pipeline's module lives in, the home directory and the temporary directory (resolved)."""
    roots = [os.getcwd(), os.path.expanduser("~"), tempfile.gettempdir()]
    project = project_root(pipeline_module) if pipeline_module else None
    if project:
        roots.append(project)
    return sorted({os.path.realpath(root) for root in roots if root and root != os.sep})


def refuse_machine_paths(
    pipeline: str,
    parameters: Mapping[str, Any],
    launching: list[tuple[pipeline_spec.LaunchingTask, Any, list[platforms.Variant[Any]]]],
) -> None:
    """Refuses a render for a cluster that would carry a path of this machine
    (:func:`machine_path`): a default computed from ``__file__``, or a ``--param`` naming a local
    file, reaches a SparkApplication's or a job's arguments as it is, and the pod, which has none
    of this machine's files, fails there, or reads something else. Each parameter is named;
    a step's own argument that no parameter gives (a path the pipeline writes into its data
    arguments) is named as the step's.

    Raises:
        UsageError: Naming every such parameter (and step argument) and its value.
    """
    roots = machine_roots(_pipeline_module(pipeline))
    found: dict[str, str] = {}
    for name, value in parameters.items():
        for item in _strings(value):
            path = machine_path(item, roots)
            if path:
                found.setdefault(name, path)
    given = set(found.values())
    for task, _, _ in launching:
        for name, value in task.arguments.items():
            for item in _strings(value):
                path = machine_path(item, roots)
                if path and path not in given:
                    found.setdefault(f"{task.task}'s {name}", path)
                    given.add(path)
    if found:
        named = "; ".join(f"{name}={path!r}" for name, path in found.items())
        raise UsageError(
            f"{pipeline}: a path of this machine would reach the cluster, where no pod has it: {named}. "
            "Give a location the cluster reads (s3://..., gs://..., a path in the image) with "
            "--param NAME=VALUE, or a default that is no path of this machine (one computed from "
            "__file__ is a path of the machine that renders)"
        )


def _strings(value: Any) -> list[str]:
    """The strings in a parameter's or argument's value (a list's items, a dict's values)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [item for inner in value.values() for item in _strings(inner)]
    if isinstance(value, (list, tuple)):
        return [item for inner in value for item in _strings(inner)]
    return []


def _pipeline_module(pipeline: str) -> str:
    """The module of ``pipeline``'s registered ``module:function`` (its project is found from it)."""
    return entry(pipeline).function.partition(":")[0]


def project_root(module: str) -> str | None:
    """The folder of the project ``module`` is developed in: the folder holding its top-level
    package (or module) when that folder has a ``pyproject.toml`` (a checkout, an editable
    install); None for a package installed into a site folder, or a module not found."""
    try:
        spec = importlib.util.find_spec(module.partition(".")[0])
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:  # a package: the folder above its own
        folders = [os.path.dirname(os.path.abspath(p)) for p in spec.submodule_search_locations]
    else:  # a top-level module: its file's folder
        folders = [os.path.dirname(os.path.abspath(spec.origin))] if spec.origin else []
    return next((f for f in folders if os.path.isfile(os.path.join(f, "pyproject.toml"))), None)


def _build_all(
    launching: list[tuple[pipeline_spec.LaunchingTask, Any, list[platforms.Variant[Any]]]], run_id: str
) -> list[RenderedTask]:
    """The objects of every variant of every launching task (see :func:`render`)."""
    rendered = []
    for task, stage, variants in launching:
        context = RunContext(run_id=run_id, task_name=task.task)
        # A choice the cluster makes at run time (training_api=auto): every variant, each with
        # the condition under which it is the one created.
        for variant, condition in zip(variants, platforms.variant_conditions(variants), strict=True):
            # Placeholders are str subclasses: as plain JSON data they dump like any string.
            objects = json.loads(json.dumps(stage.build(variant.settings, context)))
            # Where the run would create them: the launch namespace when one is set (otherwise
            # the task pod's own, unknown until the run; kubectl's -n decides).
            namespace = variant.settings.placement.launch_namespace
            if namespace:
                for obj in objects:
                    obj["metadata"]["namespace"] = namespace
            rendered.append(RenderedTask(task.task, task.component, objects, task.when + condition))
    return rendered


# Lists the files a render wrote, so the next render into that directory replaces them whole.
RENDER_MANIFEST = ".kfstack-render"


def _previous_render(out_dir: str) -> list[str]:
    """The files an earlier render wrote into ``out_dir`` (none when it is new or empty).

    Raises:
        UsageError: ``out_dir`` holds anything an earlier render did not write: a render never
            mixes its objects with other files, nor deletes them.
    """
    if not os.path.isdir(out_dir):
        return []
    present = set(os.listdir(out_dir))
    if not present:
        return []
    manifest = os.path.join(out_dir, RENDER_MANIFEST)
    if not os.path.isfile(manifest):
        raise UsageError(
            f"--out {out_dir}: the directory is not empty and was not written by kfstack render; "
            "give an empty or new directory"
        )
    with open(manifest, encoding="utf-8") as f:
        written = [line.strip() for line in f if line.strip()]
    foreign = sorted(present - set(written) - {RENDER_MANIFEST})
    if foreign:
        raise UsageError(
            f"--out {out_dir}: holds files an earlier render did not write ({', '.join(foreign[:5])}); "
            "move them away or give another directory"
        )
    return written


def write_objects(rendered: list[RenderedTask], out_dir: str) -> list[str]:
    """Writes one ``<kind>-<name>.yaml`` per object into ``out_dir``; returns the paths.

    The directory then holds exactly this render: an earlier render's files are replaced whole
    (an object that is no longer rendered does not linger for GitOps to apply). An object that
    only a branch decided at run time creates starts with ``# only when:`` comments naming the
    conditions.

    Raises:
        UsageError: ``out_dir`` holds files no render wrote (see :func:`_previous_render`).
    """
    previous = _previous_render(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    for name in previous:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(out_dir, name))
    paths: list[str] = []
    for task in rendered:
        for obj in task.objects:
            stem = f"{obj['kind'].lower()}-{obj['metadata']['name']}"
            path = os.path.join(out_dir, f"{stem}.yaml")
            # Alternatives of one task (training_api=auto's two Experiments) share a name: the
            # run creates only one of them; each keeps a file of its own, its condition on top.
            n = 1
            while path in paths:
                n += 1
                path = os.path.join(out_dir, f"{stem}-{n}.yaml")
            with open(path, "w", encoding="utf-8") as f:
                if task.when:
                    f.write("".join(f"# only when: {condition}\n" for condition in task.when))
                yaml.safe_dump(obj, f, sort_keys=False)
            paths.append(path)
    with open(os.path.join(out_dir, RENDER_MANIFEST), "w", encoding="utf-8") as f:
        f.write("".join(f"{os.path.basename(path)}\n" for path in paths))
    return paths


def check_run_parameters(pipeline: str, values: Mapping[str, Any], run_id: str) -> None:
    """The validate-parameters task's check: render everything, then, when the run is to use a
    cluster, find it and check, before the first step starts, that it serves an API every
    launching step can run on (a cluster without Trainer v2 fails ``training_api=trainer-v2``
    here, not after the Spark job), that this task's service account may launch there what
    every step would launch, and that the cluster's controller releases accept those objects
    (a server-side dry run; :func:`_review_launches`).

    Raises:
        UsageError, InvalidParameterError: See :func:`render`.
        PlatformNotAvailableError: ``platform=kubernetes`` and no Kubernetes API is reachable, or
            it serves no variant of a launching step, or a launch namespace lacks a permission or
            a LocalQueue (:class:`~kfstack.errors.LaunchNamespaceError`, naming every one), or
            a controller release lacks a field a step needs
            (:class:`~kfstack.errors.ControllerReleaseError`, naming each field and release).
    """
    run_id = run_id or "validation"
    launching = _launching_variants(pipeline, values, run_id)  # compiled once, for both checks
    _build_all(launching, run_id)
    platform = run_parameters(pipeline, values).get(platforms.PLATFORM_ARGUMENT, "")
    platforms.require_available(platform, stage=pipeline)
    if platform == platforms.KUBERNETES:
        _review_launches(pipeline, launching, run_id)


def _review_launches(
    pipeline: str,
    launching: list[tuple[pipeline_spec.LaunchingTask, Any, list[platforms.Variant[Any]]]],
    run_id: str,
) -> None:
    """On the cluster: the variant of each launching step the cluster serves, then one access
    review of what they all would create, grouped by launch namespace, so that a missing
    permission or LocalQueue fails the run before its first step
    (:func:`kfstack.kubernetes.access.review_launches`; each step reviews its own again), a dry
    run of each object, and each step's own check of what the cluster already has
    (``check_cluster``: the deployment's ServingRuntime).

    A step under a condition only the run decides may not run at all: a cluster that serves
    none of its variants does not fail the run here, and it is left out of the review. Where
    it does serve one, what that step would create is reviewed too: a run that gets that far
    must not find the Role short then.

    Raises:
        PlatformNotAvailableError: See :func:`check_run_parameters`.
    """
    clusters: dict[str, Cluster] = {}
    objects: dict[str, list[dict]] = {}
    checks: list[tuple[Any, Any, Cluster]] = []
    for task, stage, variants in launching:
        # Every variant of a step shares its placement's launch namespace (empty: the pod's own).
        namespace = variants[0].settings.placement.launch_namespace
        # One that an upstream step outputs only the run knows: its variant is chosen, no more.
        reviewed = not isinstance(namespace, Placeholder)
        key = namespace if reviewed else ""
        if key not in clusters:
            clusters[key] = Cluster.from_environment(stage=pipeline, launch_namespace=key)
        try:
            variant = platforms.choose_variant(task.task, variants, clusters[key])
        except errors.PlatformNotAvailableError:
            if task.when:
                continue
            raise
        if reviewed:
            context = RunContext(run_id=run_id, task_name=task.task)
            objects.setdefault(key, []).extend(stage.build(variant.settings, context))
            checks.append((stage, variant.settings, clusters[key]))
    launches = [(clusters[key], built) for key, built in objects.items()]
    access.review_launches(pipeline, launches)
    # A field the cluster's controller release does not know fails the run here, before its
    # first step (each step dry-runs its own again, and picks an older form where one fits).
    dry_run.check_launches(pipeline, launches)
    # Then what a step relies on that the cluster already has (the deployment: the team's
    # ServingRuntime serves the pipeline's class and format), as the step checks it again.
    for stage, settings, cluster in checks:
        check_cluster = getattr(stage, "check_cluster", None)
        if check_cluster is not None:
            check_cluster(settings, cluster)


def main(argv: list[str] | None = None) -> int:
    """``python -m kfstack.pipelines.rendering PIPELINE PARAMETERS_JSON RUN_ID [OVERRIDES_JSON]``:
    the check of :func:`check_run_parameters`, after the run's settings overrides are checked and
    applied (see :func:`kfstack.pipelines.check_in_fresh_interpreter`); a refused value prints
    ``{"error", "message"}`` and exits 1."""
    pipeline, parameters, run_id, *overrides = argv if argv is not None else sys.argv[1:]
    try:
        values = json.loads(parameters)
        if overrides:
            values = run_form.merged_for(pipeline, values, json.loads(overrides[0]))
        check_run_parameters(pipeline, values, run_id)
    except errors.KfstackError as err:
        print(json.dumps({"error": type(err).__name__, "message": str(err)}))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
