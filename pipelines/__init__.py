"""The pipelines kfstack compiles, uploads and runs, by name: any installed package's.

A package declares its pipelines in the ``kfstack.pipelines`` entry-point group (the convention
pytest and Kedro plugins use): the entry point's name is the pipeline's, its value a
:class:`PipelineEntry` (``"package.module:OBJECT"``), which names the pipeline function and its
cross-stage check as ``"module:function"``. kfstack itself brings none: its examples are a
package of their own, ``kfstack-examples`` (``examples/``), registered the same way.
Listing reads the names from the packages' metadata and imports nothing; a pipeline is imported only
when it is used, so a broken one cannot stop the others. A pipeline can also be named as
``module:function`` on the command line.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import Any

from kfstack import errors
from kfstack.errors import UsageError
from kfstack.team_code import owner, resolve, shadowing_problem

# A KFP task imports kfp in its runtime mode: the executor only, no compiler.
KFP_RUNTIME_ENV = "_KFP_RUNTIME"
# Pipeline name -> ``module:function``, for the pipelines this process loaded by ``module:function``
# (JSON): an embedded run's tasks inherit it, so that its first task finds by its name a pipeline
# no package registers (a page being tried before its package declares it).
LOADED_ENV = "KFSTACK_PIPELINES_LOADED"


@dataclasses.dataclass(frozen=True)
class PipelineEntry:
    """A registered pipeline.

    Attributes:
        function: ``"module:function"`` of the ``@dsl.pipeline`` function.
        check: ``"module:function"`` of the rules across its stages (each stage checks its own
            settings); called with every parameter's value before a run starts.
        task_image: On a cluster, the image kfstack's own tasks of this pipeline run in
            (validate-run included, which imports the pipeline): kfstack's launcher image with
            the package installed, built ``FROM`` it. None: kfstack's launcher image, which
            holds no team's package. ``kfstack compile/upload --task-image`` overrides it.
    """

    function: str
    check: str | None = None
    task_image: str | None = None


ENTRY_POINT_GROUP = "kfstack.pipelines"


def _declared() -> dict[str, list[importlib.metadata.EntryPoint]]:
    """Pipeline name -> the entry points declaring it (one distribution can be found twice,
    e.g. an editable install's metadata: the same package and value count once)."""
    found: dict[str, list[importlib.metadata.EntryPoint]] = {}
    for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        same = [p for p in found.get(point.name, []) if (owner(p), p.value) == (owner(point), point.value)]
        if not same:
            found.setdefault(point.name, []).append(point)
    return found


def pipeline_names() -> list[str]:
    """The installed packages' pipelines, by name, read from their metadata (nothing imported)."""
    return sorted(_declared())


def chosen(name: str | None) -> str:
    """``name``, or when none is given the one pipeline installed.

    Raises:
        UsageError: No name and none or several pipelines installed (the message lists them).
    """
    if name:
        return name
    names = pipeline_names()
    if len(names) == 1:
        return names[0]
    if not names:
        raise UsageError(
            f"no pipeline is installed: install a package that declares one in the {ENTRY_POINT_GROUP!r} "
            "entry-point group (kfstack's examples: pip install -e examples), or name one as module:function"
        )
    raise UsageError(f"name the pipeline: installed are {', '.join(names)}")


def entry(name: str) -> PipelineEntry:
    """The registered pipeline ``name``, or ``module:function`` named directly.

    Raises:
        UsageError: No such pipeline (the message lists the known ones), a name two packages
            declare, or a registration that fails to load or is not a :class:`PipelineEntry`;
            one line naming the package.
    """
    if ":" in name:
        return PipelineEntry(function=name)
    points = _declared().get(name)
    loaded = json.loads(os.environ.get(LOADED_ENV, "{}"))
    if not points and name in loaded:
        return PipelineEntry(function=loaded[name])
    if not points:
        raise UsageError(f"unknown pipeline {name!r}; known: {', '.join(pipeline_names())}")
    if len(points) > 1:
        packages = " and ".join(sorted(f"{owner(p)} ({p.value})" for p in points))
        raise UsageError(f"pipeline {name!r} is declared by {packages}: uninstall one, or rename it")
    (point,) = points
    _refuse_shadowing(name, point.value)
    try:
        registered = point.load()
    except Exception as err:  # the package's module failed to import, whatever the way
        raise UsageError(
            f"pipeline {name!r} of {owner(point)}: its registration {point.value} fails to load: "
            f"{type(err).__name__}: {err}"
        ) from None
    if not isinstance(registered, PipelineEntry):
        raise UsageError(
            f"pipeline {name!r} of {owner(point)}: {point.value} is a {type(registered).__name__}, "
            f"not a kfstack.pipelines.PipelineEntry"
        )
    return registered


def _refuse_shadowing(name: str, target: str) -> None:
    """Raises before a pipeline whose package a folder of the working directory would shadow in
    the run's processes is loaded (:func:`kfstack.team_code.shadowing_problem`).

    Raises:
        UsageError: Saying what to do.
    """
    problem = shadowing_problem(target)
    if problem:
        raise UsageError(f"pipeline {name!r}: {problem}")


def load_pipeline(name: str) -> Any:
    """Returns the ``@dsl.pipeline`` function registered as ``name`` (or named ``module:function``).

    Raises:
        UsageError: No such pipeline, or its module fails to import (one line, naming it).
    """
    function = entry(name).function
    _refuse_shadowing(name, function)
    try:
        loaded = resolve(function)
    except Exception as err:  # a team's module failed to import, whatever the way
        raise UsageError(
            f"pipeline {name!r}: {function} cannot be loaded: {type(err).__name__}: {err}"
        ) from None
    pipeline_name = getattr(loaded, "name", None)
    if ":" in name and isinstance(pipeline_name, str):
        known = json.loads(os.environ.get(LOADED_ENV, "{}"))
        os.environ[LOADED_ENV] = json.dumps({**known, pipeline_name: function})
    return loaded


def run_check(name: str) -> Callable[[Mapping[str, Any]], None]:
    """The pipeline's own checks: the ranges of the parameters it declares itself (those no
    settings class checks: :meth:`kfstack.pipelines.parameters.ParameterSet.problems`), then
    its rules across stages (its registration's ``check``, when it has one).

    A check refuses a value by raising ``ValueError`` (kfstack's
    :class:`~kfstack.errors.InvalidParameterError` is one): the refusal is bad input, reported
    as an :class:`~kfstack.errors.InvalidParameterError` naming the pipeline, before anything
    runs.
    """
    from kfstack.pipelines.parameters import declared_parameters

    target = entry(name).check
    rules = resolve(target) if target else None
    declared = declared_parameters(load_pipeline(name))

    def check(parameters: Mapping[str, Any]) -> None:
        problems = declared.problems(parameters) if declared else []
        if problems:
            raise errors.InvalidParameterError(f"{name}: " + "; ".join(problems))
        if rules is None:
            return
        try:
            rules(parameters)
        except errors.KfstackError:
            raise
        except ValueError as err:
            raise errors.InvalidParameterError(f"{name}: {err}") from None

    return check


def check_in_fresh_interpreter(
    pipeline: str, values: Mapping[str, Any], run_id: str, overrides: Mapping[str, Any] | None = None
) -> None:
    """The validate-parameters task's body: :func:`kfstack.pipelines.rendering.check_run_parameters`
    in a fresh interpreter with the full kfp SDK.

    A KFP task runs with ``_KFP_RUNTIME=true``, in which kfp loads only its executor and the
    pipeline cannot be compiled in-process; the check's own error is raised here as the same
    :mod:`kfstack.errors` class, so the task fails with it.
    """
    env = {k: v for k, v in os.environ.items() if k != KFP_RUNTIME_ENV}
    argv = [
        sys.executable,
        "-m",
        "kfstack.pipelines.rendering",
        pipeline,
        json.dumps(dict(values)),
        run_id,
        json.dumps(dict(overrides or {})),
    ]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    if proc.returncode == 0:
        return
    try:
        failure = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise RuntimeError(f"the parameter check crashed:\n{proc.stderr[-3000:]}") from None
    error_class = getattr(errors, failure["error"], errors.KfstackError)
    raise error_class(failure["message"])
