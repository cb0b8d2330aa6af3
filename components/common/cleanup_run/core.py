"""Deletes the unfinished batch jobs of a pipeline run (the exit handler's work)."""

from __future__ import annotations

import logging

from kfstack import platforms
from kfstack.errors import PlatformNotAvailableError
from kfstack.kubernetes.launcher import Cluster, delete_run_resources

logger = logging.getLogger(__name__)


def cleanup_run_resources(*, platform: str, run_id: str, cluster: Cluster | None = None) -> list[str]:
    """``Kind/name`` of each object deleted; nothing happens off Kubernetes.

    Long-lived services (an InferenceService) are never deleted here: they outlive the run.

    Args:
        platform: ``local`` or ``kubernetes``.
        run_id: The pipeline run whose objects (label ``kfstack.dev/pipeline-run``) to delete.
        cluster: Default: this pod's cluster and namespace.
    """
    platforms.require_available(platform, stage="cleanup")
    if platform != platforms.KUBERNETES:
        return []
    if cluster is None:
        try:
            cluster = Cluster.from_environment(stage="cleanup")
        except PlatformNotAvailableError as err:
            # Without a cluster nothing can have been created; the first task said so already.
            logger.warning("nothing to clean up: %s", err)
            return []
    deleted = delete_run_resources(run_id, cluster)
    for what in deleted:
        logger.warning("deleted %s, left running by run %s", what, run_id)
    return deleted
