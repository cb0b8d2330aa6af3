"""The project's KFP components, one folder each (``<stage>/<name>/component.py``).

A component that launches work on a platform has a ``stage.py`` beside its ``component.py``
whose ``STAGE`` implements :class:`kfstack.platforms.Stage`. :func:`launching_stages` finds them
all, so ``kfstack render`` and the validate-parameters task know a new launching component the
moment its folder exists.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

STAGE_MODULE = "stage"


def launching_stages(package: str = __name__) -> dict[str, Any]:
    """Component name -> ``STAGE`` of every ``stage`` module under ``package``."""
    root = importlib.import_module(package)
    stages: dict[str, Any] = {}
    for module in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
        if module.name.rsplit(".", 1)[-1] != STAGE_MODULE:
            continue
        stage = getattr(importlib.import_module(module.name), "STAGE", None)
        if stage is not None:
            stages[stage.component] = stage
    return stages
