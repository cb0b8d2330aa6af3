"""Names an API module no longer lists, still answered for one minor release with a
``DeprecationWarning`` naming what replaces them (docs/team-guide.md, "What kfstack promises";
CHANGELOG.md's Upgrading section)."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

REMOVED_IN = "0.2"


def answering(module: str, moved: Mapping[str, tuple[str, str]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``moved``: name -> (the module that holds it now, what to
    use instead, in words). Any other name raises AttributeError as Python would."""

    def __getattr__(name: str) -> Any:
        if name not in moved:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        home, instead = moved[name]
        warnings.warn(
            f"{module}.{name} is deprecated and leaves the API in {REMOVED_IN}: {instead}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), name)

    return __getattr__
