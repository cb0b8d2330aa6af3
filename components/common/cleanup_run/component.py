"""KFP component: the pipeline's exit handler -- delete what the run left running on the cluster."""

from kfp import dsl

from kfstack.images import COMPONENT_IMAGE


@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def cleanup_run(
    platform: str,
    run_id: str,
    status: dsl.PipelineTaskFinalStatus,
    # Settings from the parameter catalog, written by python -m kfstack.pipelines.signatures.
    launch_namespace: str = "",
    tracking_uri: str = "",
    # End of the catalog's settings.
) -> str:
    """Deletes the run's batch jobs (SparkApplications, TrainJobs, PyTorchJobs, TFJobs, Katib
    Experiments) not finished, and rolls back an InferenceService canary the run left unfinished.

    Runs whether the pipeline succeeded, failed or was stopped (KFP's exit handler). A launcher
    deletes its own job on SIGTERM; this catches a launcher pod that was killed before it could.
    Finished jobs stay until their TTL, so their status and logs remain readable. Last, on a
    cluster tracked without KFP's MLflow plugin, it ends the run's MLflow parent with the run's
    outcome (docs/tracking.md).

    Args:
        platform: ``local`` (nothing to do: the launchers own their processes) or ``kubernetes``.
        run_id: The pipeline run (``dsl.PIPELINE_JOB_ID_PLACEHOLDER``) whose objects to delete.
        status: The run's final status, which KFP gives its exit handler.
        launch_namespace: Kubernetes: the namespace the launchers create their jobs and the InferenceService
            in (and read back, clean up and roll back there); empty: the task pod's own. The run's service
            account needs the launcher Role there (manifests/README.md).
        tracking_uri: Kubernetes: the MLflow tracking server (``http(s)://``) the run, its tasks, their jobs
            and trials are tracked to; empty: none. Where KFP's MLflow plugin is on, its server and runs are
            used whatever this says (docs/tracking.md).

    Returns:
        What was deleted or rolled back, ``Kind/name`` comma-separated (empty when nothing was left).
    """
    from kfstack.components.common.cleanup_run.core import cleanup_run_resources, end_tracked_run

    try:
        return ",".join(
            cleanup_run_resources(platform=platform, run_id=run_id, launch_namespace=launch_namespace)
        )
    finally:
        end_tracked_run(platform, tracking_uri, run_id, status.state or "")
