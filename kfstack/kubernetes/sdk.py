"""The Kubernetes SDKs, imported when an object is first built or an API first called.

The settings classes a step reads live beside the builders of its cluster objects (a Spark job's
resources beside its SparkApplication), so every step process imports these modules, on the
embedded platform too, where no cluster object is ever built. The SDKs' model packages take
0.5-1.5 s each to import on a 2-core machine (pydantic builds a class per model); a step that
runs here pays none of it, and a cluster step pays it once, when it builds.

A module-level ``models = lazy_module("kubeflow_katib_api.models")`` is used as the module
itself (``models.V1beta1Experiment(...)``) inside functions; type checkers see the real module
(``if TYPE_CHECKING``).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class _LazyModule:
    def __init__(self, name: str) -> None:
        self._name = name

    def _module(self) -> ModuleType:
        # importlib's per-module lock makes a first use from two threads import it once.
        return importlib.import_module(self._name)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._module(), attribute)

    def __repr__(self) -> str:
        return f"<module {self._name!r}, imported on first use>"


def lazy_module(name: str) -> Any:
    """``name``, imported when one of its attributes is first used."""
    return _LazyModule(name)
