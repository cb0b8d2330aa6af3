"""The flights pipelines, as the ``kfstack.pipelines`` entry points of this package name them.

:mod:`.training` declares ``flights-training`` on kfstack's declarative layer, and
:mod:`.retraining` the same declaration retraining on a schedule (``flights-retraining``); they
share their own parameters (:mod:`.parameters`) and the rules of a run (:mod:`.steps`).
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
