"""The project's KFP components, one folder each (``<stage>/<name>/component.py``).

A component that launches work on a platform has a ``stage.py`` beside its ``component.py``
whose ``STAGE`` implements :class:`kfstack.platforms.Stage`; the component function is named
after ``STAGE.component`` (``distributed-training`` -> ``distributed_training``).
:func:`launching_stages` finds them all, so ``kfstack render`` and the validate-parameters task
know a new launching component the moment its folder exists -- kfstack's own, and a team's,
which its package declares in the ``kfstack.stages`` entry-point group::

    [project.entry-points."kfstack.stages"]
    train-churn = "my_team.components.train_churn.stage:STAGE"

A stage is keyed by its component's ``module:function``, and a compiled task is matched to it
by the component's own code (:func:`kfstack.pipeline_spec.executor_identity`), never by name:
a team's ``distributed_training`` cannot be taken for kfstack's.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import pkgutil
from collections.abc import Mapping
from typing import Any

from kfstack.pipeline_spec import executor_identity
from kfstack.team_code import owner, resolve

STAGE_MODULE = "stage"
COMPONENT_MODULE = "component"
ENTRY_POINT_GROUP = "kfstack.stages"

logger = logging.getLogger(__name__)


def component_key(stage_module: str, stage: Any) -> str:
    """``module:function`` of the component a stage module's ``STAGE`` launches (its sibling
    ``component`` module)."""
    package = stage_module.rpartition(".")[0]
    return f"{package}.{COMPONENT_MODULE}:{stage.component.replace('-', '_')}"


def launching_stages(*packages: str) -> dict[str, Any]:
    """``module:function`` of each launching component -> its ``STAGE``: every ``stage`` module
    under this package and ``packages``, and every stage an installed package declares.

    A declared stage that fails to load, or is not a stage module's ``STAGE``, is left out with
    a warning naming its package: one broken package never stops the others' pipelines (its own
    tasks fail when they import it).
    """
    stages: dict[str, Any] = {}
    for package in (__name__, *packages):
        root = importlib.import_module(package)
        for module in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
            if module.name.rsplit(".", 1)[-1] != STAGE_MODULE:
                continue
            stage = getattr(importlib.import_module(module.name), "STAGE", None)
            if stage is not None:
                stages[component_key(module.name, stage)] = stage
    for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        where = f"launching component {point.name!r} of {owner(point)} ({point.value})"
        if point.module.rsplit(".", 1)[-1] != STAGE_MODULE or not point.attr:
            logger.warning(
                "%s left out: name a stage module's STAGE (package.component_folder.stage:STAGE)", where
            )
            continue
        try:
            stage = point.load()
        except Exception as err:  # the package's module failed to import, whatever the way
            logger.warning("%s left out: it fails to load: %s: %s", where, type(err).__name__, err)
            continue
        if not isinstance(getattr(stage, "component", None), str):
            logger.warning("%s left out: %s has no component name", where, type(stage).__name__)
            continue
        stages[component_key(point.module, stage)] = stage
    return stages


def component_identities(stages: Mapping[str, Any]) -> dict[str, str]:
    """:func:`~kfstack.pipeline_spec.executor_identity` of each stage's component -> its key.

    A component that cannot be imported is left out with a warning naming it (as a broken
    declared stage is).
    """
    identities = {}
    for key in stages:
        try:
            container = resolve(key).component_spec.implementation.container
        except Exception as err:  # a team's module failed to import, whatever the way
            logger.warning("launching component %s left out: %s: %s", key, type(err).__name__, err)
            continue
        identities[executor_identity(container.image, container.command, container.args or [])] = key
    return identities
