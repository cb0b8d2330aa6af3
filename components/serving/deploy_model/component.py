"""KFP component: the trained model rolled out -- first to 100%, later as an analysed canary."""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Input, Markdown, Metrics, Model, Output

from kfstack.images import COMPONENT_IMAGE


@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def deploy_model(
    platform: str,
    model: Input[Model],
    features: Input[Dataset],
    deploy: bool,
    serving_name: str,
    serving_mode: str,
    serving_pool: str,
    serving_service_account: str,
    serving_min_replicas: int,
    serving_max_replicas: int,
    serving_scale_metric: str,
    serving_scale_target: int,
    serving_timeout_seconds: int,
    canary_traffic_percent: int,
    canary_records: int,
    canary_batch_size: int,
    canary_max_error_rate: float,
    canary_max_latency_ratio: float,
    canary_latency_slack_ms: float,
    canary_max_psi: float,
    canary_max_auc_drop: float,
    run_id: str,
    task_name: str,
    serving_metrics: Output[Metrics],
    deployment_report: Output[Markdown],
    deployment: Output[Artifact],
) -> NamedTuple("Deployment", [("decision", str), ("production_version", str), ("serving_summary", str)]):
    """Deploys the model: at 100% when nothing serves yet, else as a canary that is analysed on
    the feature job's labelled holdout and then promoted or rolled back.

    Args:
        platform: ``kubernetes`` applies a KServe InferenceService; ``local`` runs KServe model
            servers on loopback and records production in the local registry.
        model: The trained model directory (ONNX model, feature spec, lookups).
        features: Output of the feature job (its labelled holdout requests are replayed).
        deploy: ``false`` deploys nothing (outputs ``skipped``).
        serving_name: The InferenceService (and model) name, a DNS-1035 label.
        serving_mode: Kubernetes: ``serverless`` (Knative) or ``standard`` (RawDeployment).
        serving_pool: Kubernetes: node pool of the predictor pods (GPU pools allowed).
        serving_service_account: Kubernetes: the predictor's service account, whose Secrets let
            KServe's storage initializer read the model; empty: the namespace's default.
        serving_min_replicas: Kubernetes: autoscaling minimum; 0 = scale to zero (serverless).
        serving_max_replicas: Kubernetes: autoscaling maximum.
        serving_scale_metric: Kubernetes: serverless ``concurrency`` or ``rps`` (Knative),
            standard ``cpu`` or ``memory`` (HPA); empty: the first of the mode's.
        serving_scale_target: Kubernetes: the metric's target per replica (requests in flight or per
            second; cpu and memory: a utilisation percent of the request, at most 100); 0: the
            default (concurrency 8, rps 50, cpu 80, memory 80).
        serving_timeout_seconds: Kubernetes: longest wait for each rollout state to be Ready.
        canary_traffic_percent: Kubernetes: the canary's share of live traffic while analysed.
        canary_records: Labelled holdout records replayed to stable and canary.
        canary_batch_size: Records per replayed request.
        canary_max_error_rate: Rollback above this canary error rate.
        canary_max_latency_ratio: Rollback when canary p95 > ratio x stable p95 + slack.
        canary_latency_slack_ms: The slack (ms) of that rule.
        canary_max_psi: Rollback above this prediction shift (PSI, canary against stable); 0: not
            checked (a model retrained on drifted data is meant to predict differently).
        canary_max_auc_drop: Rollback when canary AUC < stable AUC - this.
        run_id: The pipeline run (labels the InferenceService; the exit handler finds its canary).
        task_name: This task's name.
        serving_metrics: The decision as flags and the compared figures.
        deployment_report: Markdown: the decision and the canary analysis table.
        deployment: What serves: the InferenceService's reference, or the local servers.

    Returns:
        The decision (``first``, ``promote``, ``rollback``, ``unchanged`` or ``skipped``), the
        model version in production afterwards, and the run summary's ``serving`` entry (JSON).
    """
    from kfstack.components.serving.deploy_model.stage import STAGE
    from kfstack.platforms import run_stage

    outputs = run_stage(STAGE, locals()).outputs
    return (outputs["decision"], outputs["production_version"], outputs["serving_summary"])
