"""Deletes the unfinished cluster objects of a pipeline run (the exit handler's work)."""

from __future__ import annotations

import logging

from kfstack import platforms
from kfstack.errors import PlatformNotAvailableError

logger = logging.getLogger(__name__)


def cleanup_run_resources(*, platform: str, run_id: str, api_client=None, namespace: str | None = None) -> list[str]:
    """``Kind/name`` of each object deleted; nothing happens off Kubernetes.

    Args:
        platform: ``local`` or ``kubernetes``.
        run_id: The pipeline run whose objects (label ``kfstack.dev/pipeline-run``) to delete.
        api_client, namespace: Default: this pod's cluster and namespace.
    """
    platforms.require_available(platform, stage="cleanup")
    if platform != platforms.KUBERNETES:
        return []
    from kfstack.kubernetes.launcher import delete_run_resources
    from kfstack.kubernetes.resources import KINDS

    if api_client is None:
        try:
            namespace = namespace or platforms.require_cluster(stage="cleanup")
        except PlatformNotAvailableError as err:
            # Without a cluster nothing can have been created; the first task said so already.
            logger.warning("nothing to clean up: %s", err)
            return []
    deleted = delete_run_resources(run_id, namespace=namespace, kinds=KINDS.values(), api_client=api_client)
    for what in deleted:
        logger.warning("deleted %s, left running by run %s", what, run_id)
    return deleted
