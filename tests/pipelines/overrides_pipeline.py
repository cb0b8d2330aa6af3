"""A small pipeline with a run form for the parts of the overrides (test_overrides_parts.py): its
frame (:func:`kfstack.pipelines.wiring.guarded`) and two steps, the data window and the model in
production, wired by :func:`~kfstack.pipelines.wiring.call`. Named as ``module:function``
(:data:`NAME`), so the run's check, in a fresh interpreter, imports it as the command line would.

(No ``from __future__ import annotations``: KFP reads the pipeline's annotations as types.)
"""

from kfp import dsl

from kfstack.components.data.data_window.component import data_window
from kfstack.components.serving.production_model.component import production_model
from kfstack.pipelines import wiring
from kfstack.pipelines.parameters import CATALOG, ParameterSet

NAME = f"{__name__}:pipeline"
PARAMETERS = ParameterSet(
    CATALOG[name]
    for name in (
        "window_start",
        "window_end",
        "window_days",
        "window_lag_days",
        "serving_name",
        "platform",
        "launch_namespace",
        "object_store_secret",
    )
)


@dsl.pipeline(name="overridden-window")
@PARAMETERS.pipeline("The data window and the model in production, in a run's frame.")
def pipeline(values: dict) -> None:
    with wiring.guarded(NAME, values) as checked:
        window = wiring.call(data_window, values, scheduled_time="", created_time="2026-11-24T03:00:00Z")
        window.after(checked)
        wiring.call(production_model, values).after(checked)
