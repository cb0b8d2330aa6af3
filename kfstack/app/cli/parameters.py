"""A pipeline's parameters as ``--param NAME=VALUE`` gives them, typed and checked before
anything runs or is submitted (``run``, ``render``, ``schedule``)."""

from __future__ import annotations

from typing import Any

from kfstack import platforms
from kfstack.components.argument_names import argument
from kfstack.errors import UsageError
from kfstack.pipelines import environments, load_pipeline, rendering, run_form
from kfstack.tuning.spec import LOCAL_BUDGET, TuningSettings

# Stands in for the KFP run id when parameters are checked before a cluster run or schedule is
# submitted.
CLUSTER_CHECK_RUN_ID = "cluster-check"


def parse_params(pairs: list[str], pipeline: str) -> dict[str, Any]:
    """Turns ``k=v`` strings into typed arguments of ``pipeline``, by its signature's types.

    Raises:
        UsageError: A malformed pair, an unknown name or a value of the wrong type -- before
            anything runs.
    """
    raw: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--param {pair!r}: expected NAME=VALUE")
        raw[name] = value
    pipeline_func = load_pipeline(pipeline)
    types = rendering.parameter_types(pipeline_func)
    arguments: dict[str, Any] = {}
    for name, value in run_form.current_names(pipeline_func, raw).items():
        if name not in types:
            raise UsageError(f"--param {name}: unknown parameter of {pipeline}; known: {', '.join(types)}")
        arguments[name] = rendering.convert(f"--param {name}", value, types[name])
    return arguments


def embedded_budget(pipeline_func: Any) -> dict[str, Any]:
    """The tuning budget an embedded run (``kfstack run --local``) takes where a person sets none:
    :data:`~kfstack.tuning.spec.LOCAL_BUDGET` under the names of the pipeline's parameters that
    carry it (those the pipeline has). The compiled defaults are a cluster run's."""
    parameters = rendering.parameter_types(pipeline_func)
    budget = {argument(TuningSettings, field): value for field, value in LOCAL_BUDGET.items()}
    return {name: value for name, value in budget.items() if name in parameters}


def check_cluster_arguments(pipeline: str, arguments: dict[str, Any]) -> None:
    """Every check a cluster run of ``pipeline`` makes of ``arguments`` before it starts a task
    (stage settings, node pools, the pipeline's rules across stages), here, before anything is
    submitted, and that no value is a path of this machine, which no pod of the cluster has.
    Parameters not given take the compiled defaults, as on the cluster.

    Raises:
        UsageError, InvalidParameterError: What the run would refuse.
    """
    if arguments.get(platforms.PLATFORM_ARGUMENT, platforms.KUBERNETES) == platforms.KUBERNETES:
        rendering.render(pipeline, arguments, run_id=CLUSTER_CHECK_RUN_ID, for_a_cluster=True)
    else:
        rendering.run_check(pipeline)(rendering.run_parameters(pipeline, arguments))


def cluster_run_arguments(
    pipeline: str, arguments: dict[str, Any], environment: str | None
) -> dict[str, Any]:
    """What a cluster run or schedule of ``pipeline`` sends for ``arguments`` (by parameter
    name): checked as the run would check them, with the settings its version compiles in (the
    ``environment``'s, when one is named), then in the version's run form: every setting given
    goes into ``settings_overrides`` (:func:`kfstack.pipelines.run_form.run_arguments`).

    Raises:
        UsageError, InvalidParameterError: What the run would refuse, or a setting a run cannot
            change.
    """
    pipeline_func = load_pipeline(pipeline)
    compiled: dict[str, Any] = {}
    if environment:
        # Typed here; their values are checked with the arguments' just below.
        types = rendering.parameter_types(pipeline_func)
        compiled = environments.load_environment(environment).defaults_for(pipeline, types)
    check_cluster_arguments(pipeline, {**compiled, **arguments})
    return run_form.run_arguments(pipeline_func, arguments, compiled)
