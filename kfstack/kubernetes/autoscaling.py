"""What a KServe predictor scales on: the autoscaler, its metric and target, and the Prometheus
queries KEDA runs for GPU use and queue length.

Which autoscaler acts depends on the deployment mode (KServe v0.20.0,
``pkg/apis/serving/v1beta1/inference_service_validation.go``, ``validateAutoScalingCompExtension``,
and ``pkg/controller/v1beta1/inferenceservice/reconcilers/autoscaler/autoscaler_reconciler.go``):

- **Serverless** (Knative): Knative's KPA, on ``scaleMetric`` ``concurrency`` or ``rps``. KServe's
  ``autoScaling`` block is ignored there, so GPU use and queue length cannot be asked for; the
  queue-length equivalent is Knative's ``concurrency`` target (requests in flight per replica,
  measured by Knative's queue-proxy).
- **Standard**: the class in the annotation ``serving.kserve.io/autoscalerClass`` (``hpa``,
  ``external``, ``keda``, ``none``; none: ``hpa``). ``hpa`` makes a HorizontalPodAutoscaler on
  cpu or memory utilisation (``scaleMetric``/``scaleTarget``); ``keda`` makes a KEDA
  ScaledObject from ``autoScaling.metrics`` (``scaleMetric`` refused): ``Resource`` metrics
  (cpu, memory) and ``External`` Prometheus queries (GPU use, queue length).

A KEDA ``External`` trigger is KServe's ``target.value`` as the trigger's ``threshold`` with no
``metricType`` (``reconcilers/keda/keda_reconciler.go``, ``getKedaMetrics``), and KEDA's default
metric type is ``AverageValue`` (kedacore/keda v2.20.2, ``pkg/scalers/scaler.go``,
``GetMetricTargetType``): the HPA divides the query's value by the Deployment's replicas and
compares that with the threshold. So each query here is a **sum** over the predictor's pods,
and the target reads per replica. The query selects the pods of the stable predictor's
Deployment (:func:`predictor_deployment`) in its namespace by the pod name, so it is rebuilt
whenever that name changes (a Standard-mode promotion names the predictor after the new model).

This module also mirrors KServe's webhook rules on the autoscaling fields
(:func:`webhook_problems`), so what kfstack builds is what the webhook admits.
"""

from __future__ import annotations

import re
from typing import Any

from kfstack.kubernetes.node_pools import NodePoolProfile
from kfstack.kubernetes.resources import SERVERLESS

AUTOSCALER_CLASS_ANNOTATION = "serving.kserve.io/autoscalerClass"
# kfstack's choices: no class annotation (KServe's default for the mode: its HPA in Standard
# mode), or a class named.
AUTOSCALER_UNSET, HPA, KEDA = "", "hpa", "keda"
AUTOSCALERS = (AUTOSCALER_UNSET, HPA, KEDA)
# The classes KServe 0.20's webhook admits (constants.AutoscalerAllowedClassList).
KSERVE_CLASSES = ("hpa", "external", "keda", "none")

CONCURRENCY, RPS, CPU, MEMORY, GPU, QUEUE = "concurrency", "rps", "cpu", "memory", "gpu", "queue"
# The default target per replica of each metric: Knative's requests in flight or per second;
# cpu, memory and GPU a utilisation percent (of the pod's request; of the GPU's time); queue
# length in requests, as Knative's concurrency default (the same quantity, counted by the
# server instead of by Knative's queue-proxy).
DEFAULT_TARGETS = {CONCURRENCY: 8, RPS: 50, CPU: 80, MEMORY: 80, GPU: 80, QUEUE: 8}
PERCENT_METRICS = (CPU, MEMORY, GPU)
EXTERNAL_METRICS = (GPU, QUEUE)

# Queue-length gauges. kfstack's model servers export theirs (the metric contract: per server
# process, counted from a request's headers until it is answered); a predictor runs kfstack's
# server where the model is ``custom`` (a team's ``kserve.Model`` served by kfstack's model
# server, kfstack.contracts.CUSTOM), never assumed from a runtime's name. Any other runtime's
# gauge is named by the team (``serving_queue_metric``).
KFSTACK_QUEUE_METRIC = "kfstack_predictor_requests_in_flight"
# Triton's requests received and not yet executing, per model and version
# (triton-inference-server/server, docs/user_guide/metrics.md, "Pending Request Count"), served
# on Triton's metrics port 8002. KServe v0.20.0's kserve-tritonserver runtime
# (config/runtimes/kserve-tritonserver.yaml) declares no container port 8002 (only the
# prometheus.kserve.io/port annotation), and a PodMonitor endpoint keeps only declared ports
# (prometheus-operator v0.93.0 PodMonitor CRD, podMetricsEndpoints.portNumber: "The Pod must
# declare the specified Port in its spec or the target will be dropped"): kfstack's PodMonitor
# never sees it, and a query on it would read 0. Named explicitly once a team scrapes it.
TRITON_QUEUE_METRIC = "nv_inference_pending_request_count"
TRITON_RUNTIME = "kserve-tritonserver"
TRITON_METRICS_PORT = 8002
# KServe's own runtimes kfstack's standard formats get when no runtime is named (KServe 0.20's
# config/runtimes). Its Python servers (sklearn, xgboost, lightgbm) export step-duration
# histograms only (python/kserve/kserve/metrics.py): no queue length.
KSERVE_RUNTIMES = {
    "sklearn": "kserve-sklearnserver",
    "xgboost": "kserve-xgbserver",
    "lightgbm": "kserve-lgbserver",
    "onnx": TRITON_RUNTIME,
}

# KEDA's Prometheus scaler authenticates only with the modes its trigger's ``authModes`` lists
# (kedacore/keda v2.20.2, pkg/scalers/authentication/authentication_types.go, Config.Modes: a
# comma-separated list; with none, Config.Disabled() and pkg/scalers/prometheus_scaler.go sends
# no credentials whatever the TriggerAuthentication holds). The scaler applies bearer, basic
# and custom (a header) per request and tls (a client certificate) to its transport; KEDA's
# other modes (apiKey, oauth) it ignores. bearer and basic exclude each other (the field's
# exclusiveSet). KServe v0.20.0 copies ``external.authenticationRef.authModes`` into the
# trigger's metadata (reconcilers/keda/keda_reconciler.go), only when it is set.
KEDA_AUTH_MODES = ("bearer", "basic", "tls", "custom")
KEDA_EXCLUSIVE_AUTH_MODES = ("bearer", "basic")

# NVIDIA's DCGM exporter: GPU utilisation in percent per GPU, labelled with the pod using it.
# Scraped through its ServiceMonitor with honorLabels false (the chart's default, NVIDIA/
# dcgm-exporter 4.5.3-4.8.2 deployment/values.yaml), the pod and namespace labels clash with
# the target's own and Prometheus renames them exported_pod / exported_namespace; with
# honorLabels true they stay pod / namespace.
DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
DCGM_POD_LABEL, DCGM_NAMESPACE_LABEL = "exported_pod", "exported_namespace"
# DCGM_FI_DEV_GPU_UTIL is not reported for MIG instances; NVIDIA points to the profiling
# metric instead (NVIDIA/dcgm-exporter issues 216 and 430, NVIDIA/DCGM issue 80), which is
# a ratio (0-1) of the time the slice's graphics engine was active.
MIG_GPU_METRIC = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
# DCGM's profiling fields are ratios (0-1); kfstack's GPU target is a percent.
DCGM_RATIO_PREFIX = "DCGM_FI_PROF_"

# A pod of Deployment D is named D-<pod-template-hash>-<suffix> (both alphanumeric): the
# pattern matches D's pods and no other Deployment's, even one whose name starts with D-
# (its pods have one more dash-separated part). PromQL anchors a regex at both ends.
_POD_OF_DEPLOYMENT = "{deployment}-[a-z0-9]+-[a-z0-9]+"
METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def scale_metrics(mode: str, autoscaler: str) -> tuple[str, ...]:
    """The metrics ``autoscaler`` scales on in ``mode`` (the first is the default)."""
    if mode == SERVERLESS:
        return (CONCURRENCY, RPS)
    return (CPU, MEMORY, GPU, QUEUE) if autoscaler == KEDA else (CPU, MEMORY)


def predictor_deployment(isvc_name: str, predictor_name: str | None) -> str:
    """The Deployment (and Service) of a Standard-mode predictor (KServe v0.20.0,
    ``pkg/constants/constants.go``, ``PredictorServiceName``)."""
    return f"{isvc_name}-{predictor_name}-predictor" if predictor_name else f"{isvc_name}-predictor"


def pod_pattern(deployment: str) -> str:
    """The PromQL regex of ``deployment``'s pod names."""
    return _POD_OF_DEPLOYMENT.format(deployment=deployment)


def queue_metric(
    kfstack_server: bool, model_format: str, runtime: str, named: str = ""
) -> tuple[str | None, str]:
    """The queue-length gauge of the server a predictor runs, or None and why kfstack does not
    know it.

    ``named`` (a team's choice) wins; kfstack's model server (``kfstack_server``: the model is
    ``custom``) exports :data:`KFSTACK_QUEUE_METRIC`; any other runtime -- the one named, else
    the one KServe picks for a standard format (:data:`KSERVE_RUNTIMES`) -- is not assumed to
    export anything kfstack's Prometheus scrapes.
    """
    if named:
        return named, ""
    if kfstack_server:
        return KFSTACK_QUEUE_METRIC, ""
    server = runtime or KSERVE_RUNTIMES.get(model_format, "")
    if server == TRITON_RUNTIME:
        return None, (
            f"Triton exports {TRITON_QUEUE_METRIC} on its metrics port {TRITON_METRICS_PORT}, which KServe's "
            f"{TRITON_RUNTIME} runtime does not declare as a container port, so the model servers' "
            f"PodMonitor (port 8080) does not scrape it and KEDA would read 0"
        )
    if not server:
        return None, (
            f"KServe picks the runtime of model format {model_format!r}, and kfstack does not know "
            f"which queue metric it exports"
        )
    if server.startswith("kserve-"):
        return None, (
            f"KServe's runtime {server} exports no queue-length metric (its Python servers export "
            f"step-duration histograms only) and kfstack cannot add one to it"
        )
    return None, (
        f"runtime {server!r} serves model format {model_format!r}, not a custom model on kfstack's "
        f"model server, so kfstack does not know its queue metric"
    )


def auth_modes_problem(modes: str) -> str:
    """Why ``modes`` is not a list of the authentication modes KEDA's Prometheus scaler applies
    (:data:`KEDA_AUTH_MODES`); empty when it is."""
    names = [mode.strip() for mode in modes.split(",")]
    unknown = [name for name in names if name not in KEDA_AUTH_MODES]
    if unknown:
        return (
            f"{', '.join(repr(name) for name in unknown)} is not an authentication mode KEDA's "
            f"Prometheus scaler applies ({', '.join(KEDA_AUTH_MODES)}; comma-separated)"
        )
    if len(set(names) & set(KEDA_EXCLUSIVE_AUTH_MODES)) > 1:
        return f"KEDA takes one of {' and '.join(KEDA_EXCLUSIVE_AUTH_MODES)}, not both"
    if len(set(names)) != len(names):
        return "a mode is listed twice"
    return ""


def gpu_problem(profile: NodePoolProfile, gpu_metric: str) -> str:
    """Why GPU use cannot be scaled on in ``profile``'s pods with ``gpu_metric``; empty when it can."""
    if profile.accelerator is None:
        return f"node pool {profile.name!r} has no GPU (no accelerator in its profile)"
    if profile.accelerator.resource.startswith(MIG_RESOURCE_PREFIX) and gpu_metric == DCGM_GPU_UTIL:
        return (
            f"node pool {profile.name!r} gives its pods MIG slices ({profile.accelerator.resource}), for "
            f"which DCGM does not report {DCGM_GPU_UTIL}; scale on {MIG_GPU_METRIC} (the slice's graphics "
            f"engine activity, a 0-1 ratio kfstack turns into a percent) or on queue length"
        )
    return ""


def external_query(
    metric: str, namespace: str, deployment: str, pod_label: str, namespace_label: str, divisor: int = 1
) -> str:
    """The PromQL sum of ``metric`` over ``deployment``'s pods in ``namespace``.

    ``divisor`` turns a pod's sum over its devices into their mean (a pod with several GPUs);
    a DCGM profiling ratio becomes a percent.
    """
    selector = f'{{{namespace_label}="{namespace}", {pod_label}=~"{pod_pattern(deployment)}"}}'
    query = f"sum({metric}{selector})"
    scale = 100 if metric.startswith(DCGM_RATIO_PREFIX) else 1
    if scale != 1:
        query = f"{scale} * {query}"
    if divisor != 1:
        query = f"{query} / {divisor}"
    return query


def resource_metric(metric: str, target: int) -> dict[str, Any]:
    """A KEDA ``Resource`` metric: a utilisation percent (cpu must be one; KServe's webhook
    takes memory as Utilization or AverageValue)."""
    return {
        "type": "Resource",
        "resource": {"name": metric, "target": {"type": "Utilization", "averageUtilization": target}},
    }


def external_metric(
    server_address: str, query: str, target: int, authentication: str, auth_modes: str
) -> dict[str, Any]:
    """A KEDA ``External`` metric on Prometheus: ``target`` per replica (see the module docstring).

    The target's type is ``Value`` because KServe's webhook requires ``value`` on an External
    metric and checks ``value`` only for that type; KServe passes the value alone to KEDA. The
    TriggerAuthentication ``authentication`` is used in the ``auth_modes`` (KServe's
    ``ExtMetricAuthentication``: ``authenticationRef`` beside ``authModes``, v0.20.0
    pkg/apis/serving/v1beta1/component.go), without which KEDA applies none of it.
    """
    metric: dict[str, Any] = {
        "type": "External",
        "external": {
            "metric": {"backend": "prometheus", "serverAddress": server_address, "query": query},
            "target": {"type": "Value", "value": str(target)},
        },
    }
    if authentication:
        modes = ",".join(mode.strip() for mode in auth_modes.split(","))
        metric["external"]["authenticationRef"] = {
            "authenticationRef": {"name": authentication},
            "authModes": modes,
        }
    return metric


# --- KServe 0.20's webhook, on the built object ---------------------------------------------


def webhook_problems(isvc: dict) -> list[str]:
    """What KServe 0.20's validating webhook would refuse in ``isvc``'s autoscaling (KServe
    v0.20.0, ``inference_service_validation.go``: ``validateInferenceServiceAutoscaler``,
    ``validateAutoScalingCompExtension`` and the HPA, KEDA and KPA rules it calls, and the
    canary rules of ``validateCanarySpecs``); the messages are KServe's."""
    annotations = (isvc.get("metadata") or {}).get("annotations") or {}
    spec = isvc.get("spec") or {}
    problems = []
    autoscaler = annotations.get(AUTOSCALER_CLASS_ANNOTATION)
    if autoscaler is not None and autoscaler not in KSERVE_CLASSES:
        problems.append(f"[{autoscaler}] is not a supported autoscaler class type")
    problems += _component_problems(annotations, spec.get("predictor") or {})
    for canary in spec.get("canary") or []:
        predictor = canary.get("predictor") or {}
        for field in ("maxReplicas", "scaleTarget", "scaleMetric", "autoScaling"):
            if predictor.get(field):
                problems.append(
                    f"canary {predictor.get('name')!r} must not set {field} (canary uses fixed replicas)"
                )
    return problems


def _component_problems(annotations: dict, component: dict) -> list[str]:
    mode = annotations.get("serving.kserve.io/deploymentMode")
    autoscaler = annotations.get(AUTOSCALER_CLASS_ANNOTATION)
    if mode == "Standard":
        if autoscaler == HPA:
            return _hpa_problems(component)
        if autoscaler == KEDA:
            return _keda_problems(component)
        return []  # no class (or external/none): the webhook checks nothing
    # Knative: KPA unless Knative's own class annotation names its HPA (kfstack never sets it).
    metric = component.get("scaleMetric") or CONCURRENCY
    if metric not in (CONCURRENCY, RPS):
        return [f"[{metric}] is not a supported metric"]
    if metric == RPS and component.get("scaleTarget") is not None and component["scaleTarget"] < 1:
        return ["the target for rps should be greater than 1"]
    return []


def _hpa_problems(component: dict) -> list[str]:
    metric = component.get("scaleMetric") or CPU
    if metric not in (CPU, MEMORY):
        return [f"[{metric}] is not a supported metric"]
    target = component.get("scaleTarget")
    # KServe's condition reads `metric == cpu && target < 1 || target > 100` (Go precedence):
    # above 100 is refused for memory too.
    if target is not None and ((metric == CPU and target < 1) or target > 100):
        return ["the target utilization percentage should be a [1-100] integer"]
    if target is not None and metric == MEMORY and target < 1:
        return ["the target memory should be greater than 1 MiB"]
    for spec in (component.get("autoScaling") or {}).get("metrics") or []:
        if spec.get("type") != "Resource":
            return [
                f"invalid HPA metric source type with value [{spec.get('type')}],"
                "valid metric source types are Resource"
            ]
        if not spec.get("resource"):
            return ["metricSpec.Resource is not set for resource metric source type"]
    return []


def _keda_problems(component: dict) -> list[str]:
    if component.get("scaleMetric"):
        return ["ScaleMetric is not supported for KEDA"]
    for spec in (component.get("autoScaling") or {}).get("metrics") or []:
        kind = spec.get("type")
        if kind == "Resource":
            resource = spec.get("resource")
            if not resource:
                return ["metricSpec.Resource is not set for resource metric source type"]
            target = resource.get("target") or {}
            if resource.get("name") == CPU and target.get("type") != "Utilization":
                return ["the cpu target value type should be Utilization"]
            if resource.get("name") == MEMORY and target.get("type") not in ("AverageValue", "Utilization"):
                return ["the memory target value type should be AverageValue or Utilization"]
            if resource.get("name") not in (CPU, MEMORY):
                return [f"resource type {resource.get('name')} is not supported"]
            problem = _target_problem(target)
        elif kind == "External":
            external = spec.get("external")
            if not external:
                return ["metricSpec.External is not set for external metric source type"]
            if not (external.get("metric") or {}).get("query"):
                return ["the query should not be empty"]
            if (external.get("target") or {}).get("value") is None:
                return ["the target threshold value should not be empty"]
            problem = _target_problem(external["target"])
        else:
            return [
                f"unknown KEDA metric type with value [{kind}].Valid types are Resource,External,PodMetric"
            ]
        if problem:
            return [problem]
    return []


def _target_problem(target: dict) -> str:
    """``validateScaleTarget``: the field of the target's type is set (a utilisation in 1-100)."""
    kind = target.get("type")
    if kind == "Utilization":
        utilization = target.get("averageUtilization")
        if utilization is None:
            return "the AverageUtilization type should be set"
        if not 1 <= utilization <= 100:
            return "the target utilization percentage should be a [1-100] integer"
    if kind == "AverageValue" and target.get("averageValue") is None:
        return "the AverageValue type should be set"
    if kind == "Value" and target.get("value") is None:
        return "the Value type should be set"
    return ""
