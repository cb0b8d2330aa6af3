"""Runs a team's file or module as its own process would run it: as ``__main__``, with
``sys.argv`` and ``sys.path[0]`` as ``python FILE`` or ``python -m MODULE`` would set them.

The Spark driver wrapper (:mod:`kfstack.spark.driver`) runs a PySpark application this way, as
``spark-submit`` would; the training entrypoint (:mod:`kfstack.training.entrypoint`) runs a
training module this way, as ``python -m`` would. An exit with status 0 (or none) counts as
returning; any other exit, and any exception, goes on unchanged.

Also how kfstack finds what an installed package declares (its pipelines, its launching stages):
:func:`resolve` of a ``module:attribute`` name, :func:`owner` of an entry point, and
:func:`shadowing_problem`: a folder of the working directory named like the package, which the
processes of a run would import instead of it.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import importlib.util
import os
import runpy
import sys
from collections.abc import Iterator, Sequence
from typing import Any

# A file may be named as spark-submit names files inside an image.
LOCAL_SCHEME = "local://"


def resolve(target: str) -> Any:
    """The object ``module:attribute`` names (the module imported).

    Raises:
        Exception: Whatever importing the module raises; AttributeError or ValueError when it
            holds no such attribute or ``target`` is not ``module:attribute``.
    """
    module_name, attribute = target.split(":")
    return getattr(importlib.import_module(module_name), attribute)


def shadowing_problem(module: str) -> str | None:
    """Why ``module``'s package would not be itself in a process started in the working
    directory, or None.

    ``kfstack init churn`` makes ``churn/churn/``: from the folder above, ``churn`` in the working
    directory is a folder without ``__init__.py``. Python imports it as a namespace package in
    every process that has the working directory on its path (a run's tasks, ``python -m``),
    ahead of an editable install's finder, and the package's modules are not found in it.
    """
    module_name = module.split(":")[0]
    top = module_name.split(".")[0]
    here = os.path.join(os.getcwd(), top)
    if not (os.path.isdir(here) or os.path.isfile(f"{here}.py")):
        return None
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None  # importing it says what is wrong
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or [])
    if spec.origin in (None, "namespace"):
        # A namespace package: the working directory's folder is one of its portions. It is the
        # package when the module named is in it (a team's own layout), not when it is the top.
        if module_name != top and _found(module_name):
            return None
        elsewhere = "its installed location"
    else:
        if any(_same(location, here) for location in locations) or _same(spec.origin or "", f"{here}.py"):
            return None  # the working directory's folder is the package itself
        elsewhere = locations[0] if locations else os.path.dirname(spec.origin or "")
    return (
        f"the working directory has a folder {top}/ that is not the package {top} ({elsewhere}): "
        f"the run's processes, which start here, would import the folder instead. Run kfstack from "
        f"inside the project (cd {top}) or from another directory"
    )


def _found(module_name: str) -> bool:
    try:
        return importlib.util.find_spec(module_name) is not None
    except (ImportError, ValueError):
        return False


def _same(a: str, b: str) -> bool:
    return os.path.exists(a) and os.path.exists(b) and os.path.samefile(a, b)


def owner(point: importlib.metadata.EntryPoint) -> str:
    """The name of the installed package that declares ``point``, for messages."""
    return point.dist.name if point.dist is not None else "an unknown package"


def local_path(application: str) -> str:
    """A file's path on this machine (``local://`` removed)."""
    return application[len(LOCAL_SCHEME) :] if application.startswith(LOCAL_SCHEME) else application


@contextlib.contextmanager
def _as_main(path_entry: str, argv: list[str]) -> Iterator[None]:
    """``sys.argv`` and ``sys.path[0]`` as the code's own process would have them, for the
    duration of the block (restored after, so the caller goes on as before)."""
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = argv
    sys.path.insert(0, path_entry)
    try:
        yield
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path


def run_as_main(target: str, arguments: Sequence[str]) -> None:
    """Runs ``target`` -- a ``.py`` file (``local://`` allowed) or a module name -- as
    ``__main__`` with ``arguments`` after its name in ``sys.argv``; returns when it returns or
    exits with status 0.

    Raises:
        SystemExit: The code exited with a non-zero status (or a message).
        Exception: Whatever the code raised, unchanged.
    """
    try:
        if target.endswith(".py"):
            path = local_path(target)
            with _as_main(os.path.dirname(os.path.abspath(path)), [path, *arguments]):
                runpy.run_path(path, run_name="__main__")
        else:
            # run_module(alter_sys=True) sets argv[0] to the module's file, as ``python -m`` does.
            with _as_main(os.getcwd(), [target, *arguments]):
                runpy.run_module(target, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        if exit_.code not in (None, 0):
            raise
