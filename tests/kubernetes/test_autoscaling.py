"""Autoscaling on GPU use and queue length (KServe 0.20 with KEDA): every rollout step's
InferenceService is CRD-valid and passes KServe's webhook rules as kfstack mirrors them, the
Prometheus queries select the stable predictor's pods (checked by a real promtool), and every
refusal names the parameter and why."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
import yaml

from kfstack.components import argument_names
from kfstack.errors import InvalidParameterError
from kfstack.kubernetes import autoscaling
from kfstack.kubernetes import inference_service as isvc
from kfstack.kubernetes.node_pools import get_profile
from tests.kubernetes.test_inference_service import request as base_request
from tests.upstream_crds import kserve_api_client, openapi_round_trip, validate_with_crds

NAMESPACE = "ml-prod"
PROMETHEUS = "http://prometheus-operated.monitoring.svc:9090"


def request(mode: str = isvc.STANDARD, version: str = "0.1.0+run1", **overrides) -> isvc.ServingRequest:
    fields = {"namespace": NAMESPACE, "prometheus_address": PROMETHEUS}
    return base_request(mode, version, **{**fields, **overrides})


# (mode, overrides) of each way a service scales.
SCALINGS = {
    "serverless": (isvc.SERVERLESS, {}),
    "standard-default": (isvc.STANDARD, {}),
    "standard-hpa-memory": (isvc.STANDARD, {"autoscaler": "hpa", "scale_metric": "memory"}),
    "keda-cpu": (isvc.STANDARD, {"autoscaler": "keda"}),
    "keda-memory": (isvc.STANDARD, {"autoscaler": "keda", "scale_metric": "memory", "scale_target": 70}),
    "keda-gpu": (
        isvc.STANDARD,
        {
            "autoscaler": "keda",
            "scale_metric": "gpu",
            "profile": get_profile("h100"),
            "keda_authentication": "prom",
            "keda_auth_modes": "bearer, tls",
        },
    ),
    # kfstack's model server: a custom model.
    "keda-queue": (
        isvc.STANDARD,
        {"autoscaler": "keda", "scale_metric": "queue", "scale_target": 4, "kfstack_server": True},
    ),
    # A team's own runtime (its vLLM) scaling on its own gauge.
    "keda-queue-named": (
        isvc.STANDARD,
        {
            "autoscaler": "keda",
            "scale_metric": "queue",
            "runtime": "vllm-0-8",
            "queue_metric": "vllm:num_requests_waiting",
        },
    ),
}


def lifecycle(mode: str, **overrides) -> dict[str, dict]:
    trial = isvc.first_rollout(request(mode, **overrides))
    first = isvc.confirmed(trial, request(mode, **overrides))
    canary = isvc.canary_rollout(first, request(mode, "0.1.0+run2", **overrides))
    promoted = isvc.promoted(canary, request(mode, "0.1.0+run2", **overrides))
    return {
        "trial": trial,
        "first": first,
        "canary": canary,
        "promoted": promoted,
        "rolled_back": isvc.rolled_back(canary),
        # The next rollout after the promotion: the stable is now run2's Deployment.
        "next_canary": isvc.canary_rollout(promoted, request(mode, "0.1.0+run3", **overrides)),
    }


@pytest.mark.parametrize("scaling", sorted(SCALINGS))
def test_every_rollout_step_is_crd_valid_and_admitted_by_the_webhook(scaling, tmp_path):
    mode, overrides = SCALINGS[scaling]
    stages = lifecycle(mode, **overrides)
    api = kserve_api_client()
    for stage, obj in stages.items():
        assert autoscaling.webhook_problems(obj) == [], stage
        assert openapi_round_trip(api, "V1beta1InferenceService", obj) == obj, stage
    validate_with_crds(tmp_path, list(stages.values()))


def external_queries(obj: dict) -> list[str]:
    metrics = ((obj["spec"]["predictor"].get("autoScaling") or {}).get("metrics")) or []
    return [m["external"]["metric"]["query"] for m in metrics if m["type"] == "External"]


def stable_deployment(obj: dict) -> str:
    return autoscaling.predictor_deployment(obj["metadata"]["name"], obj["spec"]["predictor"].get("name"))


def pods_of(deployment: str) -> list[str]:
    # Deployment pods: <deployment>-<pod-template-hash>-<5 characters>.
    return [f"{deployment}-7d9f8b6c5d-x2k9p", f"{deployment}-5b8c7d9f4-qq7zr"]


@pytest.mark.parametrize("scaling", ["keda-gpu", "keda-queue", "keda-queue-named"])
def test_each_step_queries_the_stable_predictors_pods_only(scaling):
    mode, overrides = SCALINGS[scaling]
    stages = lifecycle(mode, **overrides)
    deployments = {name: stable_deployment(obj) for name, obj in stages.items()}
    # The promotion renames the stable Deployment (the canary's becomes it).
    assert deployments["promoted"] != deployments["first"]
    # Every predictor Deployment the service has had: stables and canaries.
    every = set(deployments.values()) | {
        autoscaling.predictor_deployment(obj["metadata"]["name"], entry["predictor"]["name"])
        for obj in stages.values()
        for entry in obj["spec"].get("canary") or []
    }
    assert len(every) == 3  # run1's, run2's, run3's
    for name, obj in stages.items():
        (query,) = external_queries(obj)
        pattern = re.search(r'pod=~"([^"]+)"', query).group(1)
        for pod in pods_of(deployments[name]):
            assert re.fullmatch(pattern, pod), (name, pod)
        # Any other predictor's pods (a canary, an earlier stable), and a Deployment whose name
        # extends the stable's.
        others = [pod for other in every - {deployments[name]} for pod in pods_of(other)]
        others += pods_of(deployments[name] + "-extra")
        assert not any(re.fullmatch(pattern, pod) for pod in others), name
        assert f'="{NAMESPACE}"' in query


def _canary_pods(obj: dict) -> list[str]:
    name = obj["metadata"]["name"]
    return [
        pod
        for entry in obj["spec"].get("canary") or []
        for pod in pods_of(autoscaling.predictor_deployment(name, entry["predictor"]["name"]))
    ]


def test_keda_metrics_and_the_class_annotation():
    queue = {"autoscaler": "keda", "scale_metric": "queue", "scale_target": 4, "kfstack_server": True}
    keda = isvc.first_rollout(request(**queue))
    predictor = keda["spec"]["predictor"]
    assert keda["metadata"]["annotations"][autoscaling.AUTOSCALER_CLASS_ANNOTATION] == "keda"
    assert "scaleMetric" not in predictor and "scaleTarget" not in predictor
    (metric,) = predictor["autoScaling"]["metrics"]
    deployment = stable_deployment(keda)
    assert metric == {
        "type": "External",
        "external": {
            "metric": {
                "backend": "prometheus",
                "serverAddress": PROMETHEUS,
                "query": f'sum(kfstack_predictor_requests_in_flight{{namespace="{NAMESPACE}", '
                f'pod=~"{deployment}-[a-z0-9]+-[a-z0-9]+"}})',
            },
            "target": {"type": "Value", "value": "4"},
        },
    }
    cpu = isvc.first_rollout(request(autoscaler="keda"))["spec"]["predictor"]["autoScaling"]["metrics"]
    assert cpu == [
        {
            "type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
        }
    ]
    hpa = isvc.first_rollout(request(autoscaler="hpa"))
    assert hpa["metadata"]["annotations"][autoscaling.AUTOSCALER_CLASS_ANNOTATION] == "hpa"
    assert (hpa["spec"]["predictor"]["scaleMetric"], hpa["spec"]["predictor"]["scaleTarget"]) == ("cpu", 80)
    default = isvc.first_rollout(request())
    assert autoscaling.AUTOSCALER_CLASS_ANNOTATION not in default["metadata"]["annotations"]
    # A Standard canary has fixed replicas: it carries no autoscaling, and the stable keeps its own.
    first = isvc.confirmed(keda, request(**queue))
    canary = isvc.canary_rollout(
        first, request(version="0.1.0+run2", autoscaler="keda", scale_metric="memory")
    )
    assert canary["spec"]["predictor"] == first["spec"]["predictor"]
    # The promotion writes this rollout's class: back to KServe's default here.
    promoted = isvc.promoted(
        isvc.canary_rollout(first, request(version="0.1.0+run2")), request(version="0.1.0+run2")
    )
    assert autoscaling.AUTOSCALER_CLASS_ANNOTATION not in promoted["metadata"]["annotations"]
    assert promoted["spec"]["predictor"]["scaleMetric"] == "cpu"


def test_gpu_queries_average_a_pods_gpus_and_turn_dcgm_ratios_into_percent():
    h100 = get_profile("h100")
    two = type(h100)(**{**h100.__dict__, "accelerator": type(h100.accelerator)("nvidia.com/gpu", 2)})
    (query,) = external_queries(
        isvc.first_rollout(request(autoscaler="keda", scale_metric="gpu", profile=two))
    )
    assert query.startswith('sum(DCGM_FI_DEV_GPU_UTIL{exported_namespace="ml-prod", exported_pod=~"')
    assert query.endswith(" / 2")
    mig = request(
        autoscaler="keda",
        scale_metric="gpu",
        profile=get_profile("a100-mig"),
        gpu_metric="DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        gpu_pod_label="pod",
        gpu_namespace_label="namespace",
    )
    (query,) = external_queries(isvc.first_rollout(mig))
    assert query.startswith('100 * sum(DCGM_FI_PROF_GR_ENGINE_ACTIVE{namespace="ml-prod", pod=~"')


def test_the_queue_metric_is_kfstacks_only_for_kfstacks_server_else_named():
    in_flight = ("kfstack_predictor_requests_in_flight", "")
    # kfstack's server (a custom model), whatever its runtime is called.
    assert autoscaling.queue_metric(True, "team-format", "team-runtime") == in_flight
    assert autoscaling.queue_metric(True, "kfstack-flights", "kfstack-flights-predictor") == in_flight
    # A runtime's name says nothing: a team's own Triton is not kfstack's server.
    for model_format, runtime in [
        ("triton", "triton-24-08"),
        ("onnx", ""),
        ("onnx", "kserve-tritonserver"),
        ("sklearn", ""),
        ("tensorflow", ""),
    ]:
        series, why = autoscaling.queue_metric(False, model_format, runtime)
        assert series is None and why, (model_format, runtime)
    # A named gauge wins, on any runtime.
    assert autoscaling.queue_metric(False, "onnx", "", "nv_inference_pending_request_count") == (
        "nv_inference_pending_request_count",
        "",
    )
    assert autoscaling.queue_metric(True, "x", "y", "team_queue")[0] == "team_queue"
    triton = request(
        autoscaler="keda",
        scale_metric="queue",
        model_format="onnx",
        runtime="",
        protocol_version="v2",
        queue_metric="nv_inference_pending_request_count",
    )
    (query,) = external_queries(isvc.first_rollout(triton))
    assert query.startswith('sum(nv_inference_pending_request_count{namespace="ml-prod", pod=~"')


def test_the_trigger_authentication_is_used_in_its_modes():
    """KServe copies ``authModes`` into KEDA's trigger only when it is set, and KEDA's Prometheus
    scaler sends no credentials without it: the modes are written beside the reference."""
    gpu = isvc.first_rollout(request(**SCALINGS["keda-gpu"][1]))
    (metric,) = gpu["spec"]["predictor"]["autoScaling"]["metrics"]
    assert metric["external"]["authenticationRef"] == {
        "authenticationRef": {"name": "prom"},
        "authModes": "bearer,tls",
    }
    # No authentication named: no reference, no modes.
    queue = isvc.first_rollout(request(**SCALINGS["keda-queue"][1]))
    (metric,) = queue["spec"]["predictor"]["autoScaling"]["metrics"]
    assert "authenticationRef" not in metric["external"]


REFUSALS = [
    # Knative mode ignores autoScaling: the queue-length equivalent is its concurrency target.
    (
        isvc.SERVERLESS,
        {"scale_metric": "queue"},
        r"serving_scale_metric='queue': in serving_mode=serverless \(Knative\) KServe ignores the "
        r"autoScaling.*"
        r"serving_scale_metric=concurrency \(requests in flight per replica\)",
    ),
    (
        isvc.SERVERLESS,
        {"scale_metric": "gpu"},
        r"GPU use needs serving_mode=standard with serving_autoscaler=keda",
    ),
    (
        isvc.SERVERLESS,
        {"autoscaler": "keda"},
        r"serving_autoscaler=keda: KServe's autoscaler classes act in serving_mode=standard only",
    ),
    (isvc.STANDARD, {"scale_metric": "queue"}, r"serving_scale_metric='queue' needs serving_autoscaler=keda"),
    (
        isvc.STANDARD,
        {"autoscaler": "hpa", "scale_metric": "gpu"},
        r"serving_scale_metric='gpu' needs serving_autoscaler=keda",
    ),
    (isvc.STANDARD, {"scale_metric": "concurrency"}, r"serving_mode=standard scales on cpu or memory"),
    (
        isvc.STANDARD,
        {"autoscaler": "keda", "scale_metric": "queue", "prometheus_address": ""},
        r"serving_scale_metric=queue needs serving_prometheus_address: .* there is no default",
    ),
    (
        isvc.STANDARD,
        {"autoscaler": "keda", "scale_metric": "gpu"},
        r"serving_scale_metric=gpu: node pool 'serving' has no GPU",
    ),
    (
        isvc.STANDARD,
        {"autoscaler": "keda", "scale_metric": "gpu", "profile": get_profile("a100-mig")},
        r"MIG slices \(nvidia.com/mig-1g.10gb\), for which DCGM does not report DCGM_FI_DEV_GPU_UTIL; "
        r"scale on DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    ),
    (
        isvc.STANDARD,
        {"autoscaler": "keda", "scale_metric": "queue", "model_format": "sklearn", "runtime": ""},
        r"serving_scale_metric=queue: KServe's runtime kserve-sklearnserver exports no queue-length "
        r"metric.*name the queue gauge .* in serving_queue_metric, or scale on cpu or memory",
    ),
    (
        isvc.STANDARD,
        {"autoscaler": "keda", "scale_metric": "queue", "model_format": "tensorflow", "runtime": ""},
        r"KServe picks the runtime of model format 'tensorflow'.*in serving_queue_metric",
    ),
    # Triton's pending-request gauge is on port 8002, which nothing scrapes by default.
    (
        isvc.STANDARD,
        {"autoscaler": "keda", "scale_metric": "queue", "model_format": "onnx", "runtime": ""},
        r"serving_scale_metric=queue: Triton exports nv_inference_pending_request_count on its metrics "
        r"port 8002, which KServe's kserve-tritonserver runtime does not declare.*KEDA would read 0.*"
        r"serving_queue_metric",
    ),
    # A team's own runtime is not assumed to be kfstack's server, whatever its name.
    (
        isvc.STANDARD,
        {"autoscaler": "keda", "scale_metric": "queue", "model_format": "triton", "runtime": "triton-24-08"},
        r"serving_scale_metric=queue: runtime 'triton-24-08' serves model format 'triton', not a custom "
        r"model on kfstack's model server.*serving_queue_metric",
    ),
    (
        isvc.STANDARD,
        {"autoscaler": "keda", "scale_metric": "queue", "queue_metric": "queue length"},
        r"serving_queue_metric='queue length' is not a Prometheus metric name",
    ),
    # A TriggerAuthentication without its modes does nothing; modes without one have no credentials.
    (
        isvc.STANDARD,
        {"keda_authentication": "prom"},
        r"serving_keda_authentication='prom' needs serving_keda_auth_modes: .* sends no credentials",
    ),
    (
        isvc.STANDARD,
        {"keda_auth_modes": "bearer"},
        r"serving_keda_auth_modes='bearer' needs serving_keda_authentication",
    ),
    (
        isvc.STANDARD,
        {"keda_authentication": "prom", "keda_auth_modes": "bearer,oauth"},
        r"serving_keda_auth_modes='bearer,oauth': 'oauth' is not an authentication mode KEDA's "
        r"Prometheus scaler applies \(bearer, basic, tls, custom",
    ),
    (
        isvc.STANDARD,
        {"keda_authentication": "prom", "keda_auth_modes": "basic,bearer"},
        r"KEDA takes one of bearer and basic, not both",
    ),
    (
        isvc.STANDARD,
        {"autoscaler": "keda", "scale_metric": "gpu", "scale_target": 120, "profile": get_profile("h100")},
        r"serving_scale_target=120: gpu scales on a utilisation percent, at most 100",
    ),
    (
        isvc.STANDARD,
        {"autoscaler": "keda", "gpu_pod_label": "exported-pod"},
        r"serving_gpu_pod_label='exported-pod' is not a Prometheus label name",
    ),
    (
        isvc.STANDARD,
        {"prometheus_address": "prometheus:9090"},
        r"serving_prometheus_address='prometheus:9090' is not an http\(s\):// URL",
    ),
    (
        isvc.STANDARD,
        {"keda_authentication": "Prom_Auth"},
        r"serving_keda_authentication='Prom_Auth' is not a Kubernetes object name",
    ),
    (isvc.STANDARD, {"autoscaler": "kpa"}, r"serving_autoscaler='kpa' is not one of , hpa, keda"),
]


@pytest.mark.parametrize(("mode", "overrides", "message"), REFUSALS)
def test_refusals_name_the_parameter_and_why(mode, overrides, message):
    arguments = {
        **request(mode).arguments(argument_names.names_of(isvc.ServingRequest)),
        **{argument_names.argument(isvc.ServingRequest, k): v for k, v in overrides.items()},
    }
    with pytest.raises(InvalidParameterError, match=message):
        argument_names.from_arguments(isvc.ServingRequest, arguments)


def test_a_query_needs_the_services_namespace():
    keda = request(autoscaler="keda", scale_metric="queue", kfstack_server=True, namespace="")
    with pytest.raises(InvalidParameterError, match="selects the service's namespace"):
        isvc.first_rollout(keda)


@pytest.mark.parametrize(
    ("annotations", "predictor", "canary", "message"),
    [
        (
            {"serving.kserve.io/autoscalerClass": "kpa"},
            {},
            None,
            r"\[kpa\] is not a supported autoscaler class type",
        ),
        (
            {"serving.kserve.io/autoscalerClass": "keda"},
            {"scaleMetric": "cpu"},
            None,
            "ScaleMetric is not supported for KEDA",
        ),
        (
            {"serving.kserve.io/autoscalerClass": "keda"},
            {
                "autoScaling": {
                    "metrics": [
                        {
                            "type": "Resource",
                            "resource": {
                                "name": "cpu",
                                "target": {"type": "AverageValue", "averageValue": "1"},
                            },
                        }
                    ]
                }
            },
            None,
            "the cpu target value type should be Utilization",
        ),
        (
            {"serving.kserve.io/autoscalerClass": "keda"},
            {
                "autoScaling": {
                    "metrics": [
                        {
                            "type": "External",
                            "external": {
                                "metric": {"query": "up"},
                                "target": {"type": "AverageValue", "averageValue": "1"},
                            },
                        }
                    ]
                }
            },
            None,
            "the target threshold value should not be empty",
        ),
        (
            {"serving.kserve.io/autoscalerClass": "keda"},
            {
                "autoScaling": {
                    "metrics": [{"type": "External", "external": {"metric": {}, "target": {"value": "1"}}}]
                }
            },
            None,
            "the query should not be empty",
        ),
        (
            {"serving.kserve.io/autoscalerClass": "hpa"},
            {"autoScaling": {"metrics": [{"type": "External", "external": {}}]}},
            None,
            r"invalid HPA metric source type with value \[External\]",
        ),
        (
            {"serving.kserve.io/autoscalerClass": "hpa"},
            {"scaleMetric": "memory", "scaleTarget": 150},
            None,
            r"\[1-100\]",
        ),
        ({}, {"scaleMetric": "gpu"}, None, r"\[gpu\] is not a supported metric"),  # Knative: KPA
        ({}, {}, {"name": "c", "autoScaling": {"metrics": []}}, "canary 'c' must not set autoScaling"),
    ],
)
def test_the_mirrored_webhook_refuses_what_kserve_refuses(annotations, predictor, canary, message):
    mode = "Standard" if annotations or canary else "Serverless"
    obj = {
        "metadata": {"name": "x", "annotations": {"serving.kserve.io/deploymentMode": mode, **annotations}},
        "spec": {"predictor": predictor, **({"canary": [{"predictor": canary}]} if canary else {})},
    }
    (problem,) = autoscaling.webhook_problems(obj)
    assert re.search(message, problem)


def test_a_live_service_the_webhook_would_refuse_is_not_sent():
    first = isvc.confirmed(isvc.first_rollout(request(autoscaler="keda")), request(autoscaler="keda"))
    first["spec"]["predictor"]["scaleMetric"] = "cpu"  # edited by hand under KEDA
    with pytest.raises(
        InvalidParameterError, match="webhook would refuse it: ScaleMetric is not supported for KEDA"
    ):
        isvc.canary_rollout(first, request(version="0.1.0+run2", autoscaler="keda"))


# --- the queries on a real Prometheus engine (promtool) -------------------------------------


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        message = "promtool not found (Debian's prometheus package: apt-get install prometheus)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.mark.parametrize("scaling", ["keda-gpu", "keda-queue", "keda-queue-named"])
def test_promtool_sums_the_stable_pods_and_nothing_else(scaling, tmp_path):
    mode, overrides = SCALINGS[scaling]
    canary = lifecycle(mode, **overrides)["canary"]
    (query,) = external_queries(canary)
    stable_pods = pods_of(stable_deployment(canary))
    other_pods = _canary_pods(canary) + pods_of(stable_deployment(canary) + "-extra")
    if scaling == "keda-gpu":
        # DCGM exporter's series as its ServiceMonitor leaves them (honorLabels false): the
        # exporter's own pod in pod/namespace, the GPU's user in exported_pod/exported_namespace.
        metric, pod, namespace, extra = (
            "DCGM_FI_DEV_GPU_UTIL",
            "exported_pod",
            "exported_namespace",
            ('gpu="0", pod="dcgm-exporter-abcde", namespace="gpu-operator", '),
        )
    elif scaling == "keda-queue-named":
        metric, pod, namespace, extra = ("vllm:num_requests_waiting", "pod", "namespace", 'model_name="m", ')
    else:
        metric, pod, namespace, extra = (
            "kfstack_predictor_requests_in_flight",
            "pod",
            "namespace",
            ('model_name="flights-delay", protocol="v1", '),
        )
    series = []
    for i, name in enumerate(stable_pods):
        series.append(
            {
                "series": f'{metric}{{{extra}{namespace}="{NAMESPACE}", {pod}="{name}"}}',
                "values": f"{10 * (i + 1)}x5",
            }
        )
    for name in other_pods:
        series.append(
            {"series": f'{metric}{{{extra}{namespace}="{NAMESPACE}", {pod}="{name}"}}', "values": "1000x5"}
        )
    # The stable's pod name in another namespace (another environment on the same Prometheus).
    series.append(
        {"series": f'{metric}{{{extra}{namespace}="ml-dev", {pod}="{stable_pods[0]}"}}', "values": "1000x5"}
    )
    tests = {
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {"expr": query, "eval_time": "2m", "exp_samples": [{"labels": "{}", "value": 30}]}
                ],
            }
        ],
    }
    path = tmp_path / "query_test.yaml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    proc = subprocess.run([promtool(), "test", "rules", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_rollout_queries_its_clusters_namespace(fake_api):
    from kfstack.kubernetes.launcher import Cluster
    from kfstack.kubernetes.placement import Placement
    from kfstack.serving.kserve_rollout import KServeRollout
    from tests.kubernetes.conftest import NAMESPACE as CLUSTER_NAMESPACE

    rollout = KServeRollout(
        request(autoscaler="keda", scale_metric="queue", kfstack_server=True, namespace=""),
        Cluster(fake_api.api_client(), CLUSTER_NAMESPACE),
        Placement(node_pool="serving", timeout_seconds=60, poll_interval_seconds=1),
    )
    (query,) = external_queries(isvc.first_rollout(rollout.request))
    assert f'namespace="{CLUSTER_NAMESPACE}"' in query
