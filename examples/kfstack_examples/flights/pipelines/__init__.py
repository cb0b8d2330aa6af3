"""The flights pipelines, as the ``kfstack.pipelines`` entry points of this package name them.

:mod:`.training` (``flights-training``) and :mod:`.retraining` (``flights-retraining``) share
their steps (:mod:`.steps`) and the descriptions of their parameters (:mod:`.parameters`).
"""

from kfstack.api import PipelineEntry

TRAINING = PipelineEntry(
    function="kfstack_examples.flights.pipelines.training:flights_training",
    check="kfstack_examples.flights.pipelines.steps:check_run",
)
RETRAINING = PipelineEntry(
    function="kfstack_examples.flights.pipelines.retraining:flights_retraining",
    check="kfstack_examples.flights.pipelines.steps:check_retraining_run",
)
