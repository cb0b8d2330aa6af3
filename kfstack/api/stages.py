"""For extending kfstack: a launching component of a team's own (a :class:`Stage`, or a
:class:`ServiceStage` for one that serves), which ``kfstack render``, the run's first task and
the cleanup handler then know as they know kfstack's, and a pipeline's cross-stage check
(``PipelineEntry(check=...)``), which builds the run's typed settings from its arguments.

A package declares its stages in the ``kfstack.stages`` entry-point group (docs/pipelines.md,
"A launching component of your own"). Declaring a pipeline needs none of this:
:mod:`kfstack.api.pipeline` does.
"""

from kfstack.components.argument_names import from_arguments as settings_from_arguments
from kfstack.kubernetes.naming import RunContext
from kfstack.kubernetes.placement import Placement
from kfstack.platforms import ServiceStage, Stage, StageResult, Variant, run_stage

__all__ = [
    "Placement",
    "RunContext",
    "ServiceStage",
    "Stage",
    "StageResult",
    "Variant",
    "run_stage",
    "settings_from_arguments",
]
