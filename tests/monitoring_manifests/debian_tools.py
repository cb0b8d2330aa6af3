"""The Prometheus tools the monitoring tests run, from Debian's `prometheus` package (2.42):
a test that needs one skips, saying why, where it is missing, and fails under CI (env CI set),
whose .ci/run installs the package, so CI never skips it silently."""

from __future__ import annotations

import os
import shutil

import pytest

PACKAGE = {"promtool": "prometheus", "prometheus": "prometheus"}


def debian_tool(name: str) -> str:
    """The path of ``name``; a skip (or, under CI, a failure) naming the package when absent."""
    path = shutil.which(name)
    if path is None:
        message = (
            f"{name} not found: install Debian's {PACKAGE[name]} package "
            f"(apt-get install -y --no-install-recommends {PACKAGE[name]})"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path
