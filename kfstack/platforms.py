"""The platforms a pipeline runs on (DESIGN §2) and the check every launcher makes first.

``local`` is the embedded platform: kfp.local runs the tasks as subprocesses, Spark runs in
``local[*]`` inside the task, the trainer runs as N local processes with the env the
training-operator would set. ``kubernetes`` creates SparkApplication / PyTorchJob objects on a
cluster; its launchers are not part of this release, so it fails before submitting anything.
"""

from kfstack.errors import InvalidParameterError, PlatformNotAvailableError

LOCAL = "local"
KUBERNETES = "kubernetes"
PLATFORMS = (LOCAL, KUBERNETES)

# The platforms whose launchers exist in this release.
AVAILABLE_PLATFORMS = (LOCAL,)


def require_available(platform: str, stage: str) -> None:
    """Raises unless ``stage`` can run on ``platform``; call before submitting anything.

    Args:
        platform: The pipeline's ``platform`` parameter.
        stage: Human-readable stage name, used in the message.

    Raises:
        InvalidParameterError: ``platform`` is not a known platform.
        PlatformNotAvailableError: ``platform`` is known but has no launcher yet.
    """
    if platform not in PLATFORMS:
        raise InvalidParameterError(
            f"platform={platform!r} is not one of {', '.join(PLATFORMS)}"
        )
    if platform not in AVAILABLE_PLATFORMS:
        raise PlatformNotAvailableError(
            f"{stage}: platform={platform!r} is not available yet: the Kubernetes launchers "
            f"(SparkApplication, PyTorchJob) are not part of kfstack yet. Nothing was submitted. "
            f"Run with platform={LOCAL!r} (`kfstack run --local`) for the embedded platform."
        )
