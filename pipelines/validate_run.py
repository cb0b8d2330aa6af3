"""KFP component: the first task of every run -- check the parameters before any stage starts,
then hand each stage its part of the run's settings overrides.

It lives with the pipelines, not in ``components/``, because it is about a whole pipeline: it
compiles the pipeline it belongs to and renders every object the run would create, through the
same stages the run's tasks use (:mod:`kfstack.pipelines.rendering`).

**Each stage takes the overrides it reads, no more.** A task's inputs are its cache key, on a
cluster (KFP's cache) and embedded (:mod:`kfstack.app.step_cache`) alike: a Spark task that took
the run's whole ``settings_overrides`` would run again when a tuning setting changed. So this
task has one output per kfstack component that takes overrides (``<component>_overrides``,
:func:`part_components`), holding those of the run's overrides the component applies -- the ones
naming one of its arguments, as :func:`kfstack.settings.with_overrides` applies them -- and
:func:`kfstack.pipelines.wiring.call` gives each task its component's part. Which settings each
part holds is worked out when the pipeline is compiled, from the components' own signatures
(:func:`settings_read`), and travels as this task's ``settings_read`` input: the task itself runs
with kfp's executor only and cannot import a component.
"""

import functools
import importlib
import inspect
import pathlib
from collections.abc import Iterable
from typing import NamedTuple

from kfp import dsl
from kfp.components import BaseComponent

from kfstack.images import COMPONENT_IMAGE
from kfstack.settings import SETTINGS_OVERRIDES

# validate_run's output holding a component's part of the overrides: the component's function
# name and this ending (``spark_job_overrides``).
PART_ENDING = "_overrides"
# Its inputs KFP's run times fill, in a version compiled for a cluster (kfstack compile:
# kfstack.pipeline_spec.give_run_times), never in the pipeline function: kfp.local 2.17 fails
# resolving them.
RUN_TIMES = {
    "scheduled_time": dsl.PIPELINE_JOB_SCHEDULE_TIME_UTC_PLACEHOLDER,
    "created_time": dsl.PIPELINE_JOB_CREATE_TIME_UTC_PLACEHOLDER,
}


@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def validate_run(
    pipeline: str,
    parameters: dict,
    run_id: str,
    tuning_search_space: str = "",
    tuning_algorithm_settings: str = "",
    settings_overrides: dict = {},  # noqa: B006 (a KFP default, never mutated)
    settings_read: dict = {},  # noqa: B006
    scheduled_time: str = "",
    created_time: str = "",
    # Outputs as KFP reads them: inline, for the task runs this function's source alone (no
    # module around it), which mypy cannot type -- hence the ignore. One per kfstack component
    # that takes the overrides: tests/pipelines/test_overrides_parts.py fails on one left out.
) -> NamedTuple(  # type: ignore[valid-type]
    "Parts",
    [
        ("data_window_overrides", dict),
        ("spark_job_overrides", dict),
        ("hyperparameter_tuning_overrides", dict),
        ("distributed_training_overrides", dict),
        ("model_evaluation_overrides", dict),
        ("data_drift_overrides", dict),
        ("gate_model_overrides", dict),
        ("model_deployment_overrides", dict),
        ("register_model_overrides", dict),
        ("production_model_overrides", dict),
    ],
):
    """Fails the run in seconds when a parameter is out of range or inconsistent; then makes the
    run's MLflow parent where a cluster run tracks without KFP's plugin
    (:mod:`kfstack.pipelines.run_tracking`), and returns each stage's part of the run's overrides.

    Every launching stage builds its typed settings from the run's parameters and its cluster
    objects are rendered, so a bad value (an unknown node pool, malformed Spark memory, too few
    shards for the workers) fails here; on ``platform=kubernetes`` the cluster must be reachable.

    Args:
        pipeline: The registered pipeline this task belongs to.
        parameters: Every pipeline parameter (the pipeline passes its own) but the JSON ones.
        run_id: The pipeline run (names of the rendered objects).
        tuning_search_space: The pipeline's JSON parameters travel as inputs of their own:
            kfp.local 2.17 puts a parameter into a dict input as raw text, so a value holding
            quotes would break the dict. Empty: the pipeline has no such parameter.
        tuning_algorithm_settings: Likewise.
        settings_overrides: The run's overrides of the settings compiled into its version: each
            is checked (a setting of the pipeline, overridable, of its type), then applied to
            ``parameters`` before the check.
        settings_read: Output -> the settings its component reads (see the module docstring);
            an output it does not name holds no override.
        scheduled_time: KFP's ``pipeline_job_schedule_time_utc``, which ``kfstack compile``
            gives a version (:data:`RUN_TIMES`): with created_time, whether a schedule started
            the run (the MLflow parent's ``kfstack.started_by``); empty: none (kfp.local).
        created_time: KFP's ``pipeline_job_create_time_utc``; empty: none.

    Returns:
        One output per kfstack component that takes overrides (``<component>_overrides``):
        those of ``settings_overrides`` that component reads, as they were given.
    """
    from kfstack.pipelines import check_in_fresh_interpreter
    from kfstack.settings import overrides_read

    texts = {
        "tuning_search_space": tuning_search_space,
        "tuning_algorithm_settings": tuning_algorithm_settings,
    }
    values = {**parameters, **{k: v for k, v in texts.items() if v}}
    check_in_fresh_interpreter(pipeline, values, run_id, settings_overrides)
    # Checked: on a cluster without KFP's MLflow plugin, the run's MLflow parent, with them.
    from kfstack.pipelines.run_tracking import start_run

    start_run(values, settings_overrides, run_id, scheduled_time, created_time)

    # The outputs' names, from this function's own signature: where the task runs it (its source
    # alone, as a module of its own) validate_run is this function; where it is defined, the
    # component around it.
    outputs = getattr(validate_run, "python_func", validate_run).__annotations__["return"]._fields
    return tuple(overrides_read(settings_overrides, settings_read.get(output, [])) for output in outputs)


def part_output(component: BaseComponent) -> str | None:
    """The output of :func:`validate_run` holding ``component``'s part of the overrides; None for
    a component that has none (a team's own: it takes the whole object)."""
    for output, known in part_components().items():
        if component is known:
            return output
    return None


@functools.cache
def part_components() -> dict[str, BaseComponent]:
    """Each output of :func:`validate_run` -> the kfstack component whose part it holds, found by
    its name (``kfstack/components/<stage>/<component>/component.py``).

    Raises:
        LookupError: An output names no kfstack component that takes the overrides
            (tests/pipelines/test_overrides_parts.py checks every such component has one).
    """
    import kfstack.components

    root = pathlib.Path(kfstack.components.__file__).parent
    found = {}
    for output in validate_run.component_spec.outputs or {}:
        function = output.removesuffix(PART_ENDING)
        candidates = [
            getattr(
                importlib.import_module(f"kfstack.components.{path.parent.parent.name}.{function}.component"),
                function,
                None,
            )
            for path in sorted(root.glob(f"*/{function}/component.py"))
        ]
        taking = [
            c for c in candidates if isinstance(c, BaseComponent) and SETTINGS_OVERRIDES in arguments(c)
        ]
        if len(taking) != 1:
            raise LookupError(
                f"validate_run's output {output} names no kfstack component that takes {SETTINGS_OVERRIDES}"
            )
        found[output] = taking[0]
    return found


def arguments(component: BaseComponent) -> list[str]:
    """The arguments of ``component``'s function: the names whose overrides it applies (its
    ``locals()``, which :func:`kfstack.settings.with_overrides` is given)."""
    return list(inspect.signature(component.python_func).parameters)


def settings_read(settings: Iterable[str]) -> dict[str, list[str]]:
    """:func:`validate_run`'s ``settings_read`` for a pipeline whose settings are ``settings``:
    each output -> those of them its component reads (outputs whose component reads none left
    out). An override naming no setting of the pipeline never gets this far: the task refuses it."""
    names = set(settings) - {SETTINGS_OVERRIDES}
    read = {output: sorted(names.intersection(arguments(c))) for output, c in part_components().items()}
    return {output: names for output, names in read.items() if names}
