"""The project's version, and the version a compiled pipeline carries.

``__version__`` is the package's (images are tagged with it, :mod:`kfstack.images`). A pipeline
compiled from a source tree carries more: ``<version>+<git short sha>``, with ``-dirty`` when its
tracked files have uncommitted changes, so two compilations of different code never share a name. It can
also be given explicitly (``kfstack compile --pipeline-version``, or :data:`VERSION_ENV`).

``+`` is not allowed where a version must be a Kubernetes label value, a DNS label or an image
tag: :func:`label_safe` gives the same version with ``-`` in its place.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess

__version__ = "0.1.0"

# An explicit pipeline version: set by `kfstack compile --pipeline-version` while it compiles,
# and by the embedded runner for the tasks of a run.
VERSION_ENV = "KFSTACK_PIPELINE_VERSION"
# The pipeline's name, which `kfstack compile` stamps into every task beside its version.
PIPELINE_ENV = "KFSTACK_PIPELINE"
# Ends the version of a source tree whose tracked files have uncommitted changes.
DIRTY_SUFFIX = "-dirty"
# Kubernetes label values: at most 63 characters, alphanumeric at both ends, [-_.] between.
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")
_SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def label_safe(version: str) -> str:
    """``version`` where ``+`` is not allowed (label values, DNS labels, image tags)."""
    return version.replace("+", "-")


def check_version(version: str) -> str:
    """``version`` if it can name a pipeline version and, :func:`label_safe`, be a label value.

    Raises:
        ValueError: It cannot.
    """
    if not _LABEL_VALUE.match(label_safe(version)):
        raise ValueError(
            f"pipeline version {version!r}: letters, digits and . _ - + only, at most 63 characters, "
            f"starting and ending with a letter or digit"
        )
    return version


def pipeline_version(explicit: str | None = None) -> str:
    """The version a pipeline compiled now carries: ``explicit``, else :data:`VERSION_ENV`, else
    ``<__version__>+<git short sha>[-dirty]`` of the source tree this package runs from, else
    (no git checkout: an installed package) ``__version__``.

    Raises:
        ValueError: An explicit version that cannot be one (:func:`check_version`).
    """
    given = explicit or os.environ.get(VERSION_ENV)
    if given:
        return check_version(given)
    return _source_version()


@functools.cache
def _source_version(root: str = _SOURCE_ROOT) -> str:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", root, *args], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()

    try:
        if git("rev-parse", "--show-toplevel") != os.path.realpath(root):
            return __version__  # not this project's own checkout (installed inside another repo)
        sha = git("rev-parse", "--short", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))  # tracked files only
    except (OSError, subprocess.SubprocessError):
        return __version__
    return f"{__version__}+{sha}{DIRTY_SUFFIX if dirty else ''}"
