"""KFP component: the first task of every run -- check the parameters before any stage starts.

It lives with the pipelines, not in ``components/``, because it is about a whole pipeline: it
compiles the pipeline it belongs to and renders every object the run would create, through the
same stages the run's tasks use (:mod:`kfstack.pipelines.rendering`).
"""

from kfp import dsl

from kfstack.images import COMPONENT_IMAGE


@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def validate_run(pipeline: str, parameters: dict, run_id: str):
    """Fails the run in seconds when a parameter is out of range or inconsistent.

    Every launching stage builds its typed settings from the run's parameters and its cluster
    objects are rendered, so a bad value (an unknown node pool, malformed Spark memory, too few
    shards for the workers) fails here; on ``platform=kubernetes`` the cluster must be reachable.

    Args:
        pipeline: The registered pipeline this task belongs to.
        parameters: Every pipeline parameter (the pipeline passes its own).
        run_id: The pipeline run (names of the rendered objects).
    """
    from kfstack.pipelines import check_in_fresh_interpreter

    check_in_fresh_interpreter(pipeline, parameters, run_id)
