"""KFP component: any model rolled out to KServe (or loopback servers) with canary analysis."""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Input, Markdown, Metrics, Model, Output

from kfstack.images import COMPONENT_IMAGE


# A list as a default is a KFP parameter default, compiled into the spec; the body never
# mutates it (B006).
@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def model_deployment(
    platform: str,
    model: Input[Model],
    holdout: Input[Dataset],
    model_format: str,
    task: str,
    label_column: str,
    serving_name: str,
    serving_model: Output[Model],
    serving_metrics: Output[Metrics],
    deployment_report: Output[Markdown],
    deployment: Output[Artifact],
    run_id: str,
    task_name: str,
    # Settings from the parameter catalog, written by python -m kfstack.pipelines.signatures.
    deploy: bool = True,
    serving_mode: str = "serverless",
    serving_min_replicas: int = 1,
    serving_max_replicas: int = 3,
    serving_scale_metric: str = "",
    serving_scale_target: int = 0,
    serving_autoscaler: str = "",
    serving_prometheus_address: str = "",
    serving_keda_authentication: str = "",
    serving_keda_auth_modes: str = "",
    serving_queue_metric: str = "",
    serving_gpu_metric: str = "DCGM_FI_DEV_GPU_UTIL",
    serving_gpu_pod_label: str = "exported_pod",
    serving_gpu_namespace_label: str = "exported_namespace",
    serving_pool: str = "serving",
    serving_service_account: str = "",
    serving_timeout_seconds: int = 1800,
    launch_namespace: str = "",
    tracking_uri: str = "",
    canary_traffic_percent: int = 10,
    canary_records: int = 2000,
    canary_batch_size: int = 20,
    canary_max_error_rate: float = 0.01,
    canary_max_latency_ratio: float = 2.0,
    canary_latency_slack_ms: float = 5.0,
    canary_max_psi: float = 0.2,
    canary_max_quality_drop: float = 0.01,
    drift_ignore_features: str = "",
    # End of the catalog's settings.
    holdout_split: str = "",
    feature_columns: list = [],  # noqa: B006
    request_format: str = "tensor",
    custom_predictor: str = "",
    serving_runtime: str = "",
    serving_model_format: str = "",
    settings_overrides: dict = {},  # noqa: B006
    # Outputs as KFP reads them: inline, for the task runs this function's source alone (no
    # module around it), which mypy cannot type -- hence the ignore.
) -> NamedTuple("Deployment", [("decision", str), ("production_version", str), ("serving_summary", str)]):  # type: ignore[valid-type]
    """Deploys the model: first at 100%, later as a canary judged on the labelled holdout.

    Args:
        platform: ``kubernetes``: a KServe InferenceService (its canary, promotion or rollback);
            ``local``: model servers on loopback and the local registry.
        model: The trained model directory.
        holdout: Labelled rows (Parquet) the canary analysis replays to both sides.
        model_format: ``sklearn``, ``xgboost``, ``onnx`` (served as Triton would, V2 only) or
            ``custom`` (the team's own ``kserve.Model``).
        task: ``binary``, ``multiclass`` or ``regression``: how the canary's quality is judged
            (AUC, accuracy, RMSE).
        label_column: The holdout's label column.
        serving_name: The InferenceService (a DNS label); locally the registry's model name.
        serving_model: What the servers load: the model directory, or for ``onnx`` Triton's
            repository (``<serving_name>/1/model.onnx``).
        serving_metrics: The decision as flags and the compared figures.
        deployment_report: Markdown: the decision and the canary analysis.
        deployment: What serves: the InferenceService's coordinates, or the local servers.
        run_id: The pipeline run: versions the model.
        task_name: This task's name.
        deploy: Deploy the evaluated model: the first time at 100%, later as a canary analysed on the labelled
            holdout, then promoted or rolled back (a KServe InferenceService on Kubernetes; model servers on
            loopback and the local registry locally); false: nothing is deployed and the deployment's outputs
            say skipped.
        holdout_split: A folder of the holdout dataset to replay (``test``); empty: all of it.
        feature_columns: The holdout columns a request carries, in order; empty: all but the label.
        request_format: ``tensor`` (rows of numbers) or ``records`` (one object per row).
        custom_predictor: ``custom``, embedded: ``package.module:Class`` of the team's
            ``kserve.Model``, served by kfstack's format server.
        serving_runtime: The ServingRuntime; empty: KServe picks its runtime for the format.
            ``custom``: the team's, running its predictor image.
        serving_model_format: The ``modelFormat`` the InferenceService declares; empty: the
            model's format. ``custom``: one the team's runtime lists.
        serving_mode: Kubernetes: ``serverless`` (Knative revisions, canaryTrafficPercent, scale to zero) or
            ``standard`` (RawDeployment, the spec.canary list; KServe >= 0.20). A service keeps the mode it
            was created in.
        serving_min_replicas: Kubernetes: autoscaling minimum; 0 (scale to zero) needs serverless.
        serving_max_replicas: Kubernetes: autoscaling maximum.
        serving_scale_metric: Kubernetes: serverless ``concurrency`` or ``rps`` (Knative), standard ``cpu`` or
            ``memory``, with serving_autoscaler=keda also ``gpu`` or ``queue``; empty: the first of the
            mode's.
        serving_scale_target: Kubernetes: the metric's target per replica (requests in flight or per second,
            queue length; cpu, memory and gpu: a utilisation percent, at most 100); 0: the default
            (concurrency 8, rps 50, cpu 80, memory 80, gpu 80, queue 8).
        serving_autoscaler: Kubernetes, standard: KServe's autoscaler class; empty: KServe's default (its
            HPA), ``hpa``, or ``keda`` (a KEDA ScaledObject; also scales on ``gpu`` and ``queue``).
        serving_prometheus_address: Kubernetes: the Prometheus KEDA queries for the gpu and queue metrics
            (e.g. http://prometheus-operated.monitoring.svc:9090); required for them, no default.
        serving_keda_authentication: Kubernetes: a KEDA TriggerAuthentication in the namespace for those
            queries; empty: none. Needs serving_keda_auth_modes.
        serving_keda_auth_modes: Kubernetes: the modes KEDA's Prometheus scaler uses the TriggerAuthentication
            in, comma-separated: bearer or basic, tls, custom (KEDA applies none without); required with
            serving_keda_authentication.
        serving_queue_metric: Kubernetes: the queue-length gauge serving_scale_metric=queue sums over the
            predictor's pods (selected by their pod and namespace labels); empty: kfstack's server's
            kfstack_predictor_requests_in_flight for model_format=custom, refused for other runtimes (Triton's
            port 8002 is not scraped by default).
        serving_gpu_metric: Kubernetes: the GPU utilisation series (percent per GPU; DCGM_FI_PROF_* ratios are
            scaled to percent); MIG slices report DCGM_FI_PROF_GR_ENGINE_ACTIVE only.
        serving_gpu_pod_label: Kubernetes: the GPU series' label naming the pod using the GPU (exported_pod
            unless the DCGM exporter is scraped with honorLabels: then pod).
        serving_gpu_namespace_label: Kubernetes: the GPU series' label naming that pod's namespace
            (exported_namespace, or namespace with honorLabels).
        serving_pool: Kubernetes: node pool of the predictor pods.
        serving_service_account: Kubernetes: the predictor's service account, with the Secret KServe's storage
            initializer reads the model with; empty: the namespace's default.
        serving_timeout_seconds: Kubernetes: longest wait for each rollout state to be Ready.
        launch_namespace: Kubernetes: the namespace the launchers create their jobs and the InferenceService
            in (and read back, clean up and roll back there); empty: the task pod's own. The run's service
            account needs the launcher Role there (manifests/README.md).
        canary_traffic_percent: Kubernetes: the canary's share of live traffic while analysed.
        canary_records: Labelled holdout rows replayed to stable and canary.
        canary_batch_size: Rows per replayed request.
        canary_max_error_rate: Roll back above this canary error rate.
        canary_max_latency_ratio: Roll back when the canary's p95 latency exceeds this times the stable's plus
            canary_latency_slack_ms.
        canary_latency_slack_ms: Milliseconds of slack in the latency rule.
        canary_max_psi: Roll back above this prediction shift (PSI of canary against stable); 0: not checked.
        canary_max_quality_drop: Roll back when the canary's quality is worse than the stable's by more than
            this: its AUC or accuracy lower by this much, its RMSE higher by this share of the stable's (0.01:
            1%).
        drift_ignore_features: Comma-separated features the drift check measures but does not decide on.
        tracking_uri: Kubernetes: the MLflow tracking server (``http(s)://``) the run, its tasks, their jobs
            and trials are tracked to; empty: none. Where KFP's MLflow plugin is on, its server and runs are
            used whatever this says (docs/tracking.md).
        settings_overrides: The run's overrides of settings compiled into its version (setting
            -> value, ``kfstack describe``); the step applies those of its own arguments.

    Returns:
        ``decision`` (first, unchanged, promote, rollback, skipped), ``production_version`` and
        ``serving_summary`` (JSON).
    """
    from kfstack.components.serving.model_deployment.stage import STAGE
    from kfstack.platforms import run_stage

    outputs = run_stage(STAGE, locals()).outputs
    return (outputs["decision"], outputs["production_version"], outputs["serving_summary"])
