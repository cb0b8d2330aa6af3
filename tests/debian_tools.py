"""The Debian tools the tests run: Prometheus 2.42 and Alertmanager 0.25 (`prometheus`,
`prometheus-alertmanager`), and the browser that drives the MLflow UI (`chromium` and its
`chromium-driver`; a browser a Python package downloads cannot be fetched where the tests run). A
test that needs one skips, saying why, where it is missing, and fails under CI (env CI set), whose
.ci/run installs the packages, so CI never skips it silently."""

from __future__ import annotations

import os
import shutil

import pytest

PACKAGE = {
    "promtool": "prometheus",
    "prometheus": "prometheus",
    "prometheus-alertmanager": "prometheus-alertmanager",
    "amtool": "prometheus-alertmanager",
    "chromium": "chromium",
    "chromedriver": "chromium-driver",
}


def debian_tool(name: str) -> str:
    """The path of ``name``; a skip (or, under CI, a failure) naming the package when absent."""
    # Where Debian installs them, should the PATH lack it.
    installed = os.path.join("/usr/bin", name)
    path = shutil.which(name) or (installed if os.path.exists(installed) else None)
    if path is None:
        message = (
            f"{name} not found: install Debian's {PACKAGE[name]} package "
            f"(apt-get install -y --no-install-recommends {PACKAGE[name]})"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path
