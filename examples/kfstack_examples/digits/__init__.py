"""The digits example: a team's PySpark application (:mod:`.prepare`), Keras training code
(:mod:`.trainer`) and the pipeline that chains them through kfstack's components
(:mod:`.pipeline`, ``digits-training``)."""

from kfstack.api import PipelineEntry

TRAINING = PipelineEntry(function="kfstack_examples.digits.pipeline:digits_training")
