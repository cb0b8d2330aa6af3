"""The pipelines kfstack compiles, uploads and runs, by name.

Entries are ``"module:function"`` strings so that listing pipelines imports nothing heavy and a
broken pipeline module cannot stop the others from compiling.
"""

import importlib
from typing import Any

PIPELINES: dict[str, str] = {
    "flights-training": "kfstack.pipelines.flights_training:flights_training",
}
DEFAULT_PIPELINE = "flights-training"


def load_pipeline(name: str) -> Any:
    """Returns the ``@dsl.pipeline`` function registered as ``name``."""
    try:
        target = PIPELINES[name]
    except KeyError:
        raise KeyError(
            f"unknown pipeline {name!r}; known: {', '.join(sorted(PIPELINES))}"
        ) from None
    module_name, func_name = target.split(":")
    return getattr(importlib.import_module(module_name), func_name)
