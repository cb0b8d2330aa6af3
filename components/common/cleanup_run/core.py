"""The exit handler's work: delete the unfinished batch jobs of a pipeline run, roll back a
canary it left unfinished, and end the run's MLflow parent."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from kubernetes.client.rest import ApiException

from kfstack import platforms
from kfstack.errors import InvalidParameterError, PlatformNotAvailableError, ResourceFailedError
from kfstack.kubernetes.launcher import Cluster, delete_run_resources
from kfstack.serving.kserve_rollout import roll_back_run_canaries
from kfstack.tracking import cluster as cluster_tracking

logger = logging.getLogger(__name__)


def cleanup_run_resources(
    *, platform: str, run_id: str, cluster: Cluster | None = None, launch_namespace: str = ""
) -> list[str]:
    """``Kind/name`` of each object deleted or rolled back; nothing happens off Kubernetes
    (there the runner stops what a run started, and production changes only on a promotion).

    Long-lived services (an InferenceService) are never deleted here: they outlive the run. One
    the run left with its canary in progress (the deploy task was killed before it could decide)
    is rolled back -- the one change a cleanup makes to a service.

    Args:
        platform: ``local`` or ``kubernetes``.
        run_id: The pipeline run whose objects (label ``kfstack.dev/pipeline-run``) to delete.
        cluster: Default: this pod's cluster, in ``launch_namespace``.
        launch_namespace: Where the run's launchers created their objects; empty: this pod's
            own namespace.
    """
    platforms.require_available(platform, stage="cleanup")
    if platform != platforms.KUBERNETES:
        return []
    if cluster is None:
        try:
            cluster = Cluster.from_environment(stage="cleanup", launch_namespace=launch_namespace)
        except (PlatformNotAvailableError, InvalidParameterError) as err:
            # Without a cluster, or with a launch namespace that is no namespace's name, nothing
            # can have been created: the first task refused the run already and said why.
            logger.warning("nothing to clean up: %s", err)
            return []
    done: list[str] = []
    problems: list[str] = []
    # Both parts run whatever the other met: a Role without one kind must not keep the other.
    for part, verb in ((delete_run_resources, "deleted"), (roll_back_run_canaries, "rolled back")):
        try:
            for what in part(run_id, cluster):
                logger.warning("%s %s, left unfinished by run %s", verb, what, run_id)
                done.append(what)
        except (ResourceFailedError, PlatformNotAvailableError, ApiException) as err:
            problems.append(str(err))
    if problems:
        raise ResourceFailedError(
            f"cleanup of run {run_id}: {'; '.join(problems)} (done: {', '.join(done) or 'nothing'})"
        )
    return done


def end_tracked_run(
    platform: str, tracking_uri: str, run_id: str, state: str, env: Mapping[str, str] | None = None
) -> None:
    """On a cluster, the run's MLflow parent ends with KFP's final ``state`` of the run, where the
    run's first task made it (:func:`kfstack.tracking.cluster.end_pipeline_run`): embedded, the
    runner ends it; with KFP's plugin on, KFP does."""
    if platform != platforms.KUBERNETES:
        return
    env = os.environ if env is None else env
    cluster_tracking.end_pipeline_run(env, tracking_uri, run_id, state)
