"""Container image references, derived from the package version in this one place.

See docs/architecture.md#one-place-for-image-references.

Every component and every launched job names its image through this module; no other file
carries a registry or a tag. A fork points ``KFSTACK_IMAGE_REGISTRY`` at its own registry when
it compiles (``kfstack compile``), so the compiled YAML pins images it can pull.
"""

import os

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


# Where the Spark image puts the driver wrapper of a team's own PySpark application (the spark
# target copies kfstack/spark/driver.py there): the generic Spark job's mainApplicationFile, which
# runs the team's file or module as ``__main__`` (:mod:`kfstack.spark.driver`).
SPARK_DRIVER_FILE = "local:///opt/kfstack/jobs/kfstack_driver.py"

# Lightweight components run in the launcher image: it has kfp and this package installed,
# which is why components set install_kfp_package=False.
COMPONENT_IMAGE = image_for("launcher")
