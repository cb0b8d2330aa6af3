"""The exit handler's work: delete the unfinished batch jobs of a pipeline run, and roll back a
canary it left unfinished."""

from __future__ import annotations

import logging

from kfstack import platforms
from kfstack.errors import PlatformNotAvailableError
from kfstack.kubernetes.launcher import Cluster, delete_run_resources
from kfstack.serving.kserve_rollout import roll_back_run_canaries

logger = logging.getLogger(__name__)


def cleanup_run_resources(*, platform: str, run_id: str, cluster: Cluster | None = None) -> list[str]:
    """``Kind/name`` of each object deleted or rolled back; nothing happens off Kubernetes
    (there the runner stops what a run started, and production changes only on a promotion).

    Long-lived services (an InferenceService) are never deleted here: they outlive the run. One
    the run left with its canary in progress (the deploy task was killed before it could decide)
    is rolled back -- the one change a cleanup makes to a service.

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
    try:
        deleted = delete_run_resources(run_id, cluster)
    finally:
        # Whatever the batch cleanup met, the canary still goes back.
        rolled_back = roll_back_run_canaries(run_id, cluster)
        for what in rolled_back:
            logger.warning("rolled back the unfinished canary of %s, left by run %s", what, run_id)
    for what in deleted:
        logger.warning("deleted %s, left running by run %s", what, run_id)
    return deleted + rolled_back
