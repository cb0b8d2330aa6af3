"""Libraries published in more than one distribution, and the error where none is installed.

ONNX Runtime, TensorFlow and XGBoost each come as a CPU and a GPU distribution (``onnxruntime`` /
``onnxruntime-gpu``, ``tensorflow-cpu`` / ``tensorflow``, ``xgboost-cpu`` / ``xgboost``) that
install the same import name. A library that required one would put it beside the one a team
has, and whichever installed last would win. So kfstack requires none of them: each is an extra
of its own name (pyproject.toml), the team names the one it has, and where kfstack needs the
library and finds no distribution of it, :func:`require` says which extras provide it, instead of
a bare ``ModuleNotFoundError`` in the middle of a run.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from types import ModuleType

from kfstack.errors import PlatformNotAvailableError

# Import name -> the extras of kfstack that install a distribution of it, CPU first.
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "onnxruntime": ("onnxruntime", "onnxruntime-gpu"),
    "tensorflow": ("tensorflow-cpu", "tensorflow"),
    "xgboost": ("xgboost-cpu", "xgboost"),
}


def missing_message(module: str, purpose: str) -> str:
    """What to install for ``module`` (one of :data:`DISTRIBUTIONS`), in one line."""
    extras = DISTRIBUTIONS[module]
    choices = " or ".join(f'"kfstack[{extra}]"' for extra in extras)
    return (
        f"{purpose} needs {module}, and no distribution of it is installed: pip install {choices} "
        f"(the first is the CPU build; keep the one your environment already has)"
    )


def installed(module: str) -> bool:
    """Whether some distribution of ``module`` is installed (without importing it)."""
    return importlib.util.find_spec(module) is not None


def _normalized(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def extra_for(module: str) -> str:
    """The extra that keeps the distribution of ``module`` this environment has (its CPU
    distribution where it has none), e.g. ``onnxruntime-gpu`` beside an installed
    onnxruntime-gpu: what a project made here names, so that installing it changes nothing."""
    extras = DISTRIBUTIONS[module]
    present = {_normalized(name) for name in importlib.metadata.packages_distributions().get(module, [])}
    return next((extra for extra in extras if extra in present), extras[0])


def require(module: str, purpose: str) -> ModuleType:
    """``module`` imported, whichever of its distributions is installed.

    Args:
        module: An import name of :data:`DISTRIBUTIONS`.
        purpose: What needs it, for the message (``"the onnx model server"``).

    Raises:
        PlatformNotAvailableError: No distribution of it is installed; the message names the
            extras that provide one.
    """
    if not installed(module):
        raise PlatformNotAvailableError(missing_message(module, purpose))
    return importlib.import_module(module)
