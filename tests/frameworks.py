"""The training frameworks a test needs, and a skip that names the missing one.

torch runs only where its CPU build is at hand (CI's machines carry one for CPython 3.11; PyPI's
Linux torch wheels are CUDA builds: docs/testing.md "What runs where"): elsewhere the PyTorch
tests skip, each saying that torch is missing and why. Where a run must have a framework
(``make test`` on 3.11 installs both), ``KFSTACK_REQUIRE_FRAMEWORKS`` names it, and its absence
fails the test instead of skipping it.
"""

from __future__ import annotations

import os

import pytest

from kfstack.distributions import installed

REQUIRED = {name for name in os.environ.get("KFSTACK_REQUIRE_FRAMEWORKS", "").split(",") if name}
WHY = {
    "torch": "PyPI has only CUDA builds of torch; the repository's venv takes its CPU build on "
    "Python 3.11 alone",
    "tensorflow": "install kfstack[tensorflow-cpu] (or [tensorflow])",
}


def _reason(module: str) -> str:
    return f"needs {module}, which is not installed here ({WHY[module]})"


def require(module: str) -> None:
    """Skips the calling test (or module, at import) unless ``module`` is installed; fails it
    where the run requires the framework."""
    if installed(module):
        return
    if module in REQUIRED:
        pytest.fail(f"{_reason(module)}, and KFSTACK_REQUIRE_FRAMEWORKS asks for it", pytrace=False)
    pytest.skip(_reason(module), allow_module_level=True)


def needs(module: str) -> pytest.MarkDecorator:
    """A mark for a test that needs ``module``: skipped without it; where the run requires it, the
    test runs and fails on its import instead, so a missing framework is never hidden."""
    return pytest.mark.skipif(not installed(module) and module not in REQUIRED, reason=_reason(module))


needs_torch = needs("torch")
needs_tensorflow = needs("tensorflow")
