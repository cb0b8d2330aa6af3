"""The platforms a pipeline runs on (DESIGN §2) and what differs between them.

``local`` is the embedded platform: kfp.local runs the tasks as subprocesses, Spark runs in
``local[*]`` inside the task, the trainer runs as N local processes with the env the
training-operator would set. ``kubernetes`` creates SparkApplication / PyTorchJob / TFJob
objects on the cluster the task's pod runs in (:mod:`kfstack.kubernetes`).
"""

import json
from typing import Any

from kfstack.errors import InvalidParameterError, PlatformNotAvailableError

LOCAL = "local"
KUBERNETES = "kubernetes"
PLATFORMS = (LOCAL, KUBERNETES)


def artifact_location(platform: str, artifact: Any) -> str:
    """Where a launched job reads or writes ``artifact``.

    Locally the task's own path. On Kubernetes the job's pods run elsewhere, so they get the
    artifact's remote URI (``s3://...``; KFP uploads nothing for them). Whatever the task itself
    writes to ``artifact.path`` is uploaded next to the job's files by KFP.
    """
    return artifact.uri if platform == KUBERNETES else artifact.path


def write_reference(artifact: Any, reference: dict) -> None:
    """Records what ran a step (e.g. the SparkApplication) in ``artifact``'s metadata and file."""
    artifact.metadata.update(reference)
    with open(artifact.path, "w", encoding="utf-8") as f:
        json.dump(reference, f, indent=2)


def require_available(platform: str, stage: str) -> None:
    """Raises unless ``platform`` is one kfstack runs on; call before submitting anything.

    Args:
        platform: The pipeline's ``platform`` parameter.
        stage: Human-readable stage name, used in the message.

    Raises:
        InvalidParameterError: ``platform`` is not a known platform.
    """
    if platform not in PLATFORMS:
        raise InvalidParameterError(
            f"{stage}: platform={platform!r} is not one of {', '.join(PLATFORMS)}"
        )


def kubernetes_options(platform: str, options: dict | None, stage: str) -> dict:
    """``options`` for a Kubernetes launch, checked to be there (a copy; ``{}`` off Kubernetes).

    Raises:
        InvalidParameterError: ``platform`` is ``kubernetes`` but no options were given.
    """
    if platform != KUBERNETES:
        return {}
    if not options:
        raise InvalidParameterError(
            f"{stage}: platform='kubernetes' needs its Kubernetes options (run context, node pool, "
            f"launch settings); the component builds them from its parameters"
        )
    return dict(options)


def require_cluster(stage: str) -> str:
    """Checks that this process can reach a Kubernetes API; returns the namespace to use.

    Raises:
        PlatformNotAvailableError: No in-cluster service account and no kubeconfig, or no
            namespace; nothing was submitted.
    """
    from kfstack.kubernetes.launcher import default_api_client
    from kfstack.kubernetes.naming import current_namespace

    try:
        default_api_client()
        return current_namespace()
    except Exception as err:  # noqa: BLE001 - any config failure means "no cluster"
        raise PlatformNotAvailableError(
            f"{stage}: platform='kubernetes' needs a Kubernetes API: run the pipeline on a "
            f"Kubeflow cluster, or from a machine with a kubeconfig. Nothing was submitted. "
            f"({type(err).__name__}: {err}) For this machine use platform={LOCAL!r} "
            f"(`kfstack run --local`)."
        ) from err
