"""Container image references, derived from the package version in this one place.

See docs/architecture.md#one-place-for-image-references.

Every component and every launched job names its image through this module; no other file
carries a registry or a tag. A fork points ``KFSTACK_IMAGE_REGISTRY`` at its own registry when
it compiles (``kfstack compile``), so the compiled YAML pins images it can pull.
"""

import os
import re

from kfstack.errors import InvalidParameterError
from kfstack.version import __version__

DEFAULT_REGISTRY = "ghcr.io/kfstack"

# One image per role: each carries only what its role imports.
ROLES = ("launcher", "spark", "torch-trainer", "tf-trainer", "predictor")


def image_for(role: str, registry: str | None = None) -> str:
    """Returns ``<registry>/kfstack-<role>:<version>``.

    Args:
        role: One of ``ROLES``.
        registry: Registry/org prefix; defaults to ``$KFSTACK_IMAGE_REGISTRY`` or
            ``DEFAULT_REGISTRY``.
    """
    if role not in ROLES:
        raise ValueError(f"unknown image role {role!r}; expected one of {ROLES}")
    registry = (registry or os.environ.get("KFSTACK_IMAGE_REGISTRY") or DEFAULT_REGISTRY).rstrip("/")
    return f"{registry}/kfstack-{role}:{__version__}"


# An image reference as the OCI distribution spec and Docker's reference grammar write it:
# [registry[:port]/]path[:tag][@digest], lowercase path components.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REFERENCE = re.compile(
    rf"^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
    rf"(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*(?::[\w][\w.-]{{0,127}})?"
    rf"(?:@[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-fA-F0-9]{{32,}})?$"
)


def check_image(image: str, name: str) -> str:
    """``image`` when it is an image reference (empty: kfstack's own, left to the caller).

    Raises:
        InvalidParameterError: Not a reference (a space, a backtick, upper case in the path...),
            naming the parameter ``name``.
    """
    head, _, last = image.split("@", 1)[0].rpartition("/")
    repository = f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]
    # The reference grammar caps a repository name at 255 characters.
    if image and (len(repository) > 255 or len(image) > 4096 or not _REFERENCE.match(image)):
        raise InvalidParameterError(
            f"{name}={image!r} is not an image reference ([registry[:port]/]path[:tag][@digest], "
            f"a lowercase path)"
        )
    return image


# Where the Spark image puts the driver wrapper of a team's own PySpark application (the spark
# target copies kfstack/spark/driver.py there): the generic Spark job's mainApplicationFile, which
# runs the team's file or module as ``__main__`` (:mod:`kfstack.spark.driver`).
SPARK_DRIVER_FILE = "local:///opt/kfstack/jobs/kfstack_driver.py"

# Lightweight components run in the launcher image: it has kfp and this package installed,
# which is why components set install_kfp_package=False.
COMPONENT_IMAGE = image_for("launcher")
