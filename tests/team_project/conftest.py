"""The diabetes project (``src/diabetes/``, a plain package) as a team's own code: ``src/`` goes on
the path of this process and, through ``PYTHONPATH``, of every process a test starts (training
replicas, spark-submit's Python, a model server), as an installed package would be, for the tests
that ask for it. The package never imports kfstack; the tests run it through kfstack's wrappers.

It is under ``src/``, not beside this file, because pytest puts this test folder (no
``__init__.py``) on ``sys.path`` for the whole session: a ``diabetes`` package here would be
importable by every later test (and a project that ``kfstack init`` names ``diabetes`` refused)."""

from __future__ import annotations

import os
import pathlib
import sys
from collections.abc import Iterator

import pytest

PROJECT = pathlib.Path(__file__).with_name("src")


@pytest.fixture(scope="module")
def diabetes_project() -> Iterator[pathlib.Path]:
    _forget_diabetes()  # a package of that name another test imported is not this one
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.syspath_prepend(str(PROJECT))
        paths = [str(PROJECT), os.environ.get("PYTHONPATH")]
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, paths)))
        yield PROJECT
    # Off the path, and out of the imported modules: a later test may make a project of that name.
    _forget_diabetes()


def _forget_diabetes() -> None:
    for name in [name for name in sys.modules if name.split(".")[0] == "diabetes"]:
        del sys.modules[name]
