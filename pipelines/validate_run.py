"""KFP component: the first task of every run -- check the parameters before any stage starts.

It lives with the pipelines, not in ``components/``, because it is about a whole pipeline: it
compiles the pipeline it belongs to and renders every object the run would create, through the
same stages the run's tasks use (:mod:`kfstack.pipelines.rendering`).
"""

from kfp import dsl

from kfstack.images import COMPONENT_IMAGE


@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def validate_run(
    pipeline: str,
    parameters: dict,
    run_id: str,
    tuning_search_space: str = "",
    tuning_algorithm_settings: str = "",
    settings_overrides: dict = {},  # noqa: B006 (a KFP default, never mutated)
):
    """Fails the run in seconds when a parameter is out of range or inconsistent.

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
    """
    from kfstack.pipelines import check_in_fresh_interpreter

    texts = {
        "tuning_search_space": tuning_search_space,
        "tuning_algorithm_settings": tuning_algorithm_settings,
    }
    values = {**parameters, **{k: v for k, v in texts.items() if v}}
    check_in_fresh_interpreter(pipeline, values, run_id, settings_overrides)
