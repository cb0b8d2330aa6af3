"""The pipelines kfstack compiles, uploads and runs, by name.

Entries name their pipeline function as ``"module:function"`` so that listing pipelines imports
nothing heavy and a broken pipeline module cannot stop the others from compiling.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from typing import Any

from kfstack.errors import UsageError


@dataclasses.dataclass(frozen=True)
class PipelineEntry:
    """A registered pipeline.

    Attributes:
        function: ``"module:function"`` of the ``@dsl.pipeline`` function.
        check: ``"module:function"`` of the rules across its stages (each stage checks its own
            settings); called with every parameter's value before a run starts.
    """

    function: str
    check: str | None = None


PIPELINES: dict[str, PipelineEntry] = {
    "flights-training": PipelineEntry(
        function="kfstack.pipelines.flights_training:flights_training",
        check="kfstack.flights.settings:check_run",
    ),
}
DEFAULT_PIPELINE = "flights-training"


def _resolve(target: str) -> Any:
    module_name, attribute = target.split(":")
    return getattr(importlib.import_module(module_name), attribute)


def entry(name: str) -> PipelineEntry:
    """The registered pipeline ``name``.

    Raises:
        UsageError: No such pipeline (the message lists the known ones).
    """
    try:
        return PIPELINES[name]
    except KeyError:
        raise UsageError(f"unknown pipeline {name!r}; known: {', '.join(sorted(PIPELINES))}") from None


def load_pipeline(name: str) -> Any:
    """Returns the ``@dsl.pipeline`` function registered as ``name``."""
    return _resolve(entry(name).function)


def run_check(name: str) -> Callable[[Mapping[str, Any]], None]:
    """The pipeline's rules across stages (a no-op when it has none)."""
    check = entry(name).check
    return _resolve(check) if check else (lambda parameters: None)
