"""The run form: what a person fills in to start a run of a pipeline version.

A version is compiled with its settings in it (``kfstack compile``, ``--env`` for an
environment's; the pipeline's defaults without): its run form in the Kubeflow UI is the
pipeline's per-run parameters and one more field, ``settings_overrides``, a JSON object through
which a person changes any other setting for one run (``{"gpu_pool": "a100"}``). Every component
that takes a setting also takes that object and applies the overrides of its own arguments
(:func:`kfstack.settings.with_overrides`): KFP's DSL cannot index a dict parameter, so the run's
validate-parameters task takes the object whole, checks it first (:func:`merged`: a name no
setting has, a per-run parameter or a value of the wrong type fails the run before any stage),
and hands each step the part it reads (:mod:`kfstack.pipelines.validate_run`).

Not overridable (:func:`fixed_settings`): the run's frame (:data:`NOT_OVERRIDABLE`), which KFP
applies before any component could read an override -- ``object_store_secret`` and
``tracking_secret`` (the KFP driver mounts them into every task pod), ``platform`` and
``launch_namespace`` (the cleanup exit handler's, which must clean up where the run launched)
-- and any setting the pipeline composes into another value when compiled, or hands a step
without the overrides. A version is compiled for their values: ``kfstack compile --env``.

Whoever starts a run by parameter name (``kfstack run``, ``schedule``, ``reproduce``, the alert
receiver, ``--resume``) goes through :func:`run_arguments`, which puts every setting a person
named into the object; a pipeline whose signature is written by hand has no run form and its
arguments go as they are.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from kfp import dsl

from kfstack.errors import InvalidParameterError, UsageError
from kfstack.pipelines.parameters import Parameter, ParameterSet, declared_parameters
from kfstack.pipelines.wiring import FRAME_PARAMETERS
from kfstack.settings import SETTINGS_OVERRIDES

# The settings a version is compiled for and a run cannot change (see the module docstring).
NOT_OVERRIDABLE = FRAME_PARAMETERS


def version_function(pipeline_func: Any, settings: Mapping[str, Any] | None = None) -> Any:
    """The ``@dsl.pipeline`` function a version of ``pipeline_func`` is compiled from: its run
    form, with ``settings`` (parameter -> value) and the pipeline's defaults compiled in (a
    per-run parameter ``settings`` names takes it as its default). A pipeline whose signature is
    written by hand is its own version function.

    Raises:
        KeyError: ``settings`` names a parameter the pipeline does not take.
    """
    declared = declared_parameters(pipeline_func)
    if declared is None:
        return pipeline_func
    inner = pipeline_func.pipeline_func
    form = declared.run_form(inner.summary, inner.body, settings or {})
    return dsl.pipeline(name=pipeline_func.name, description=pipeline_func.description)(form)


@functools.lru_cache(maxsize=64)  # a registered pipeline is a module global: the same object each time
def fixed_settings(pipeline_func: Any) -> frozenset[str]:
    """The settings of ``pipeline_func`` a run cannot change: :data:`NOT_OVERRIDABLE`, those
    that reach no step as an input of their own name -- composed into another value when the
    version is compiled (a Spark argument ``--shards={num_shards}``), where no step's override
    could reach them -- and those a step takes without the run's overrides (its inputs given by
    hand, without :func:`kfstack.pipelines.wiring.run_overrides`).

    Found by compiling the run form with a distinct value for every text and number setting and
    looking for each among its steps' inputs. A boolean cannot be told from another: it is taken
    to reach its step. A pipeline whose run form does not compile with such values is taken to
    route every setting by name.
    """
    declared = declared_parameters(pipeline_func)
    if declared is None:
        return frozenset(NOT_OVERRIDABLE)
    settings = [p for p in declared if not p.per_run and p.name not in NOT_OVERRIDABLE]
    distinct: dict[str, Any] = {}
    for number, parameter in enumerate(settings):
        if parameter.type is str:
            distinct[parameter.name] = f"kfstack-distinct-{parameter.name}"
        elif parameter.type in (int, float):
            distinct[parameter.name] = parameter.type(970001 + number)
    try:
        spec = _compiled(version_function(pipeline_func, distinct))
    except Exception:  # a pipeline that computes with its settings when compiled: nothing to tell
        return frozenset(NOT_OVERRIDABLE)
    # Reached: some step takes it by its name, and every step that does takes the overrides too.
    reached: set[str] = set()
    missed: set[str] = set()
    for name, value, overridden in _task_constants(spec):
        if name in distinct and distinct[name] == value:
            (reached if overridden else missed).add(name)
    return frozenset(NOT_OVERRIDABLE) | (set(distinct) - (reached - missed))


def _compiled(pipeline_func: Any) -> dict[str, Any]:
    from kfstack.pipelines.rendering import compiled_spec  # rendering imports this module

    return compiled_spec(pipeline_func)


def _task_constants(spec: Mapping[str, Any]) -> Iterator[tuple[str, Any, bool]]:
    """(input name, constant, whether the task takes the run's overrides) of every task input a
    compiled ``spec`` gives as a constant."""
    dags = [spec["root"]["dag"], *(c["dag"] for c in spec.get("components", {}).values() if "dag" in c)]
    for dag in dags:
        for task in dag.get("tasks", {}).values():
            inputs = task.get("inputs", {}).get("parameters", {})
            # The run's overrides, or the validate task's part of them for this step's component
            # (which holds every setting the component takes by name): anything but a constant.
            overrides = inputs.get(SETTINGS_OVERRIDES)
            overridden = overrides is not None and "runtimeValue" not in overrides
            for name, given in inputs.items():
                if "constant" in given.get("runtimeValue", {}):
                    yield name, given["runtimeValue"]["constant"], overridden


def overridable(parameters: ParameterSet, fixed: Iterable[str] = NOT_OVERRIDABLE) -> list[Parameter]:
    """The settings a run may change through ``settings_overrides``, in the form's order;
    ``fixed``: those it cannot (:func:`fixed_settings`)."""
    excluded = set(fixed)
    return [p for p in parameters.ordered() if not p.per_run and p.name not in excluded]


def merged(
    parameters: ParameterSet,
    values: Mapping[str, Any],
    overrides: Mapping[str, Any],
    fixed: Iterable[str] = NOT_OVERRIDABLE,
) -> dict[str, Any]:
    """``values`` (parameter -> value) with ``overrides`` applied, each override checked first;
    ``fixed``: the settings a run cannot change (:func:`fixed_settings`).

    Raises:
        InvalidParameterError: Naming every override that names no setting of the pipeline, a
            per-run parameter or a fixed setting, or holds a value of another type than its
            setting's.
    """
    if not isinstance(overrides, Mapping):
        raise InvalidParameterError(f"{SETTINGS_OVERRIDES} must be a JSON object, not {overrides!r}")
    excluded = set(fixed)
    problems, typed = [], {}
    for name, value in overrides.items():
        if name not in parameters:
            problems.append(f"{name}: no setting of this pipeline")
        elif parameters[name].per_run:
            problems.append(f"{name} is a per-run parameter: set it as one")
        elif name in excluded:
            problems.append(
                f"{name} is compiled into the version and not overridable per run: compile and upload "
                "a version for the value (kfstack compile --env)"
            )
        else:
            converted = _typed(parameters[name], value)
            if converted is None:
                kind = parameters[name].type.__name__
                problems.append(f"{name}={value!r} must be {kind}")
            else:
                typed[name] = converted
    if problems:
        raise InvalidParameterError(f"{SETTINGS_OVERRIDES}: " + "; ".join(problems))
    return {**values, **typed}


def _typed(parameter: Parameter, value: Any) -> Any:
    """``value`` as ``parameter``'s type, where it is one (a JSON number of a protobuf ``Struct``
    is a double: ``3.0`` is an int setting's 3); None where it is not."""
    if parameter.type is bool or isinstance(value, bool):
        return value if parameter.type is bool and isinstance(value, bool) else None
    if parameter.type is int:
        if isinstance(value, int):
            return value
        return int(value) if isinstance(value, float) and value.is_integer() else None
    if parameter.type is float:
        ok = isinstance(value, (int, float)) and math.isfinite(value)
        return float(value) if ok else None
    return value if isinstance(value, parameter.type) else None


def run_arguments(
    pipeline_func: Any, arguments: Mapping[str, Any], compiled: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The arguments of a run of ``pipeline_func``'s version (its run form), from ``arguments``
    by parameter name as ``--param``, a schedule, a lineage record or an alert give them: a
    per-run parameter stays itself, every other setting goes into ``settings_overrides``
    (beside what an explicit ``settings_overrides`` holds). A pipeline without a run form takes
    ``arguments`` as they are.

    Args:
        compiled: The settings the version was compiled with; a value of a fixed setting
            (:func:`fixed_settings`) equal to its compiled one (or, without it, to the
            pipeline's default) is no change and is left out.

    Raises:
        UsageError: A fixed setting with another value than the version's.
    """
    declared = declared_parameters(pipeline_func)
    if declared is None:
        return dict(arguments)
    compiled = compiled or {}
    fixed = fixed_settings(pipeline_func)
    run: dict[str, Any] = {}
    overrides = dict(arguments.get(SETTINGS_OVERRIDES) or {})
    changed = []
    for name, value in arguments.items():
        if name == SETTINGS_OVERRIDES:
            continue
        if name in declared and declared[name].per_run:
            run[name] = value
        elif name in fixed:
            if value != compiled.get(name, declared[name].default if name in declared else value):
                changed.append(f"{name}={value!r}")
        else:
            overrides[name] = value
    if changed:
        raise UsageError(
            f"{', '.join(changed)}: compiled into the pipeline version and not overridable per run; "
            "compile and upload a version for it (kfstack compile --env, kfstack upload --env)"
        )
    if overrides:
        run[SETTINGS_OVERRIDES] = overrides
    return run


def merged_for(pipeline: str, values: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`merged` for the registered pipeline ``pipeline``; one without a run form takes no
    overrides.

    Raises:
        InvalidParameterError: See :func:`merged`.
    """
    from kfstack.pipelines import load_pipeline

    pipeline_func = load_pipeline(pipeline)
    declared = declared_parameters(pipeline_func)
    if declared is None:
        if overrides:
            raise InvalidParameterError(
                f"{pipeline}: takes no {SETTINGS_OVERRIDES}: its parameters are its own"
            )
        return dict(values)
    fixed = fixed_settings(pipeline_func) if overrides else NOT_OVERRIDABLE
    return merged(declared, values, overrides, fixed)


def still_parameters(spec: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    """Those of ``settings`` that the compiled ``spec`` still has as parameters: all of them for
    a pipeline without a run form, none for one with (its settings are compiled in)."""
    inputs = spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {})
    return {name: value for name, value in settings.items() if name in inputs}


def current_names(pipeline_func: Any, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` with each parameter name the pipeline has renamed (its
    :class:`~kfstack.pipelines.parameters.ParameterSet`'s ``renamed``) replaced by the current
    one, with a ``FutureWarning``: a schedule, a lineage record or a script written before the
    rename keeps working for one release (CHANGELOG.md says how to upgrade)."""
    declared = declared_parameters(pipeline_func)
    renamed = declared.renamed if declared is not None else {}
    current = {}
    for name, value in arguments.items():
        if name in renamed:
            warnings.warn(
                f"parameter {name} is now {renamed[name]}: the old name is taken until the next release",
                FutureWarning,
                stacklevel=2,
            )
            name = renamed[name]
        current[name] = value
    return current
