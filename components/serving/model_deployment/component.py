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
    deploy: bool = True,
    holdout_split: str = "",
    feature_columns: list = [],  # noqa: B006
    request_format: str = "tensor",
    custom_predictor: str = "",
    serving_runtime: str = "",
    serving_model_format: str = "",
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
    canary_traffic_percent: int = 10,
    canary_records: int = 2000,
    canary_batch_size: int = 20,
    canary_max_error_rate: float = 0.01,
    canary_max_latency_ratio: float = 2.0,
    canary_latency_slack_ms: float = 5.0,
    canary_max_psi: float = 0.2,
    canary_max_quality_drop: float = 0.01,
    drift_ignore_features: str = "",
    # Outputs as KFP reads them: inline, for the task runs this function's source alone (no
    # module around it), which mypy cannot type -- hence the ignore.
    settings_overrides: dict = {},  # noqa: B006
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
        deploy: ``false``: nothing is deployed; the outputs say ``skipped``.
        holdout_split: A folder of the holdout dataset to replay (``test``); empty: all of it.
        feature_columns: The holdout columns a request carries, in order; empty: all but the label.
        request_format: ``tensor`` (rows of numbers) or ``records`` (one object per row).
        custom_predictor: ``custom``, embedded: ``package.module:Class`` of the team's
            ``kserve.Model``, served by kfstack's format server.
        serving_runtime: The ServingRuntime; empty: KServe picks its runtime for the format.
            ``custom``: the team's, running its predictor image.
        serving_model_format: The ``modelFormat`` the InferenceService declares; empty: the
            model's format. ``custom``: one the team's runtime lists.
        serving_mode: ``serverless`` (Knative; ``canaryTrafficPercent``) or ``standard``
            (RawDeployment; ``spec.canary``).
        serving_min_replicas: Autoscaling lower bound (0: scale to zero, serverless only).
        serving_max_replicas: Autoscaling upper bound.
        serving_scale_metric: Serverless ``concurrency``/``rps``, standard ``cpu``/``memory``,
            with ``serving_autoscaler=keda`` also ``gpu``/``queue``; empty: the mode's default.
        serving_scale_target: Target per replica (a percent for cpu, memory and gpu; requests
            for concurrency and queue; per second for rps); 0: the default.
        serving_autoscaler: Standard mode's autoscaler class: empty (KServe's default HPA),
            ``hpa`` or ``keda``.
        serving_prometheus_address: The Prometheus KEDA queries for ``gpu`` and ``queue``.
        serving_keda_authentication: A KEDA TriggerAuthentication for it; empty: none.
        serving_keda_auth_modes: The modes KEDA uses it in (``bearer`` or ``basic``, ``tls``,
            ``custom``; comma-separated); required with it, for KEDA applies none without.
        serving_queue_metric: The queue-length gauge ``queue`` sums per pod; empty: kfstack's
            server's own (``model_format=custom``), else refused (name the runtime's).
        serving_gpu_metric: The GPU utilisation series (DCGM exporter's).
        serving_gpu_pod_label: Its label naming the pod using the GPU.
        serving_gpu_namespace_label: Its label naming that pod's namespace.
        serving_pool: Node-pool profile of the predictor pods.
        serving_service_account: The predictor's service account (reads the model); empty: default.
        serving_timeout_seconds: Longest wait for a rollout step to be Ready.
        launch_namespace: Kubernetes: the namespace the InferenceService is created and read back
            in; empty: this task's own (the launcher Role must be bound there,
            manifests/README.md).
        canary_traffic_percent: The canary's share of traffic while it is analysed (1-99).
        canary_records: Holdout rows replayed.
        canary_batch_size: Rows per request.
        canary_max_error_rate: Roll back above this canary error rate.
        canary_max_latency_ratio: Roll back when canary p95 > this x stable p95 + slack.
        canary_latency_slack_ms: The slack (ms).
        canary_max_psi: Roll back above this prediction shift (PSI); 0: not checked.
        canary_max_quality_drop: Roll back when the canary's quality metric is worse than the
            stable's by more than this.
        drift_ignore_features: Comma-separated features the servers' live drift measures but
            leaves out of its max PSI, as the drift check does; empty: the model's own declared
            ones. Passed to kfstack's model servers only (KServe's runtimes watch no drift).
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
